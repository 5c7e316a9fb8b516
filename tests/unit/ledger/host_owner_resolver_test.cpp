// HostOwnerResolver: the owner it gives follows the process, its jobs and its pod, though it is
// built only when one of them changes.
#include "ledger/host_owner_resolver.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "../attribution/test_support.h"

namespace gpumeter {
namespace {

using testing::TempDir;
using testing::write_file;

// Replaces /proc/<pid> with a new directory, as the kernel does when a pid is reused.
void new_process_at(const std::string& dir, const std::string& comm, unsigned start_time, unsigned uid) {
  const std::string next = dir + ".next";
  std::filesystem::copy(dir, next, std::filesystem::copy_options::recursive);
  write_file(next + "/stat", "5151 (" + comm + ") S 1 5151 5151 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 " +
                                 std::to_string(start_time) + " 0 0\n");
  const std::string id = std::to_string(uid);
  write_file(next + "/status", "Name:\t" + comm + "\nUid:\t" + id + "\t" + id + "\t" + id + "\t" + id + "\n");
  std::filesystem::remove_all(dir);
  std::filesystem::rename(next, dir);
}

TEST(HostOwnerResolver, OwnerFollowsTheProcessAndItsJobs) {
  TempDir tmp;
  const std::string root = tmp.copy_layout("docker-v2");
  write_file(tmp / "jobs/0", "4242\n");
  HostOwnerResolverOptions o;
  o.procfs = root + "/proc";
  o.rootfs = root;
  o.environment = {"GPUMETER_PROJECT"};
  o.hpc_job_mapping_dir = tmp / "jobs";
  o.hpc_refresh = std::chrono::milliseconds(0);
  Logger log(LogLevel::kError);
  HostOwnerResolver resolver(o, log);
  DeviceIdentity gpu0;
  gpu0.index = 0;
  gpu0.uuid = "GPU-0";
  DeviceIdentity gpu1;
  gpu1.index = 1;
  gpu1.uuid = "GPU-1";

  OwnerLabels first = resolver.resolve(5151, gpu0);
  EXPECT_EQ(first.user, "bob");
  EXPECT_EQ(first.hpc_job, "4242");
  EXPECT_EQ(resolver.resolve(5151, gpu0), first);
  EXPECT_EQ(resolver.resolve(5151, gpu1).hpc_job, "") << "another GPU, another mapping file";

  // The batch system maps the GPU to another job.
  write_file(tmp / "jobs/0", "4343\n");
  EXPECT_EQ(resolver.resolve(5151, gpu0).hpc_job, "4343");

  // The pid now belongs to another process, of another user.
  new_process_at(root + "/proc/5151", "bash", 9999999, 1000);
  OwnerLabels reused = resolver.resolve(5151, gpu0);
  EXPECT_EQ(reused.user, "alice");
  EXPECT_EQ(reused.hpc_job, "4343");

  // Gone, then back after the pid is no longer retained: read again.
  resolver.retain({});
  std::filesystem::remove_all(root + "/proc/5151");
  EXPECT_EQ(resolver.resolve(5151, gpu0), unattributed_owner());
}

}  // namespace
}  // namespace gpumeter
