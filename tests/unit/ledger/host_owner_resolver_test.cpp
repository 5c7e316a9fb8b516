// HostOwnerResolver: the owner it gives follows the process, its jobs and its pod, though it is
// built only when one of them changes.
#include "ledger/host_owner_resolver.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "../attribution/test_support.h"
#include "fake_clock.h"

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

ProjectResolver rules(std::vector<ProjectRuleSpec> specs, std::string default_project) {
  auto r = ProjectResolver::create(std::move(specs), std::move(default_project));
  EXPECT_TRUE(r.ok()) << r.error().message;
  return std::move(r).value();
}

// A config reload: the owners already built are forgotten, so the process is named by the new
// rules at its next lookup, and a new allow-list reads its environment again.
TEST(HostOwnerResolver, UpdatedRulesNameTheProcessAgain) {
  TempDir tmp;
  const std::string root = tmp.copy_layout("docker-v2");
  HostOwnerResolverOptions o;
  o.procfs = root + "/proc";
  o.rootfs = root;
  o.environment = {"GPUMETER_PROJECT"};
  o.rules = rules({ProjectRuleSpec{"env.GPUMETER_PROJECT", std::nullopt, std::nullopt, std::nullopt}}, "none");
  Logger log(LogLevel::kError);
  HostOwnerResolver resolver(o, log);
  DeviceIdentity gpu0;
  gpu0.index = 0;
  gpu0.uuid = "GPU-0";
  EXPECT_EQ(resolver.resolve(5151, gpu0).project, "speech");

  resolver.update_rules(
      rules({ProjectRuleSpec{"env.GPUMETER_PROJECT", std::nullopt, std::string("team-$0"), std::nullopt}}, "none"),
      {"GPUMETER_PROJECT"});
  EXPECT_EQ(resolver.resolve(5151, gpu0).project, "team-speech");

  // The variable is no longer allow-listed: its value is not read, and the default applies.
  resolver.update_rules(rules({ProjectRuleSpec{"user", std::nullopt, std::nullopt, std::nullopt}}, "none"), {});
  EXPECT_EQ(resolver.resolve(5151, gpu0).project, "bob");
  resolver.update_rules(
      rules({ProjectRuleSpec{"env.GPUMETER_PROJECT", std::nullopt, std::nullopt, std::nullopt}}, "none"), {});
  EXPECT_EQ(resolver.resolve(5151, gpu0).project, "none");
  // Allow-listed again: read again from /proc.
  resolver.update_rules(
      rules({ProjectRuleSpec{"env.GPUMETER_PROJECT", std::nullopt, std::nullopt, std::nullopt}}, "none"),
      {"GPUMETER_PROJECT"});
  EXPECT_EQ(resolver.resolve(5151, gpu0).project, "speech");
  // Lookups counted across the caches an allow-list change replaced.
  AttributionStatus st;
  resolver.contribute(st);
  EXPECT_EQ(st.owner_lookups, 5u);
}

void set_mtime(const std::string& path, std::int64_t unix_us) {
  const timespec t{static_cast<time_t>(unix_us / 1'000'000), static_cast<long>(unix_us % 1'000'000) * 1000};
  const timespec times[2] = {t, t};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

OwnerLabels job_owner(std::string id) {
  OwnerLabels o;
  o.project = "default";
  o.hpc_job = std::move(id);
  return o;
}

TEST(HostOwnerResolver, AllocationsFromTheMappingChangeWhenItsFilesDid) {
  TempDir tmp;
  const std::string dir = tmp / "jobs";
  std::filesystem::create_directories(dir);
  testing::FakeClock clock;
  clock.set_wall_us(1'800'000'000'000'000);
  HostOwnerResolverOptions o;
  o.procfs = tmp / "proc";
  o.hpc_job_mapping_dir = dir;
  o.hpc_refresh = std::chrono::hours(1);  // only a change of the directory makes it read again
  o.allocations = true;
  o.rules = ProjectResolver({}, "default");
  o.clock = &clock;
  Logger log(LogLevel::kError);
  HostOwnerResolver resolver(o, log);
  DeviceIdentity gpu0;
  gpu0.index = 0;
  gpu0.uuid = "GPU-0";

  auto first = resolver.allocation(gpu0);
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->owners.empty());

  // A prolog wrote the file 3 s before the next look: the job holds the GPU from then.
  write_file(dir + "/0", "51300\n");
  set_mtime(dir + "/0", clock.wall_us() + 7'000'000);
  clock.advance_wall(std::chrono::microseconds(10'000'000));
  auto held = resolver.allocation(gpu0);
  ASSERT_TRUE(held);
  EXPECT_EQ(held->owners, std::vector<OwnerLabels>{job_owner("51300")});
  EXPECT_EQ(held->since_us, clock.wall_us() - 3'000'000);

  // The epilog removed it 2 s before the next look: the directory's time says when.
  std::filesystem::remove(dir + "/0");
  set_mtime(dir, clock.wall_us() + 8'000'000);
  clock.advance_wall(std::chrono::microseconds(10'000'000));
  auto released = resolver.allocation(gpu0);
  ASSERT_TRUE(released);
  EXPECT_TRUE(released->owners.empty());
  EXPECT_EQ(released->since_us, clock.wall_us() - 2'000'000);

  // A time outside (previous read, now] is clamped into it.
  write_file(dir + "/0", "51301\n");
  set_mtime(dir + "/0", clock.wall_us() + 60'000'000);
  clock.advance_wall(std::chrono::microseconds(1'000'000));
  EXPECT_EQ(resolver.allocation(gpu0)->since_us, clock.wall_us());

  o.allocations = false;
  HostOwnerResolver off(o, log);
  EXPECT_FALSE(off.allocation(gpu0)) << "the process policy asks for no allocation";
}

// Options for the Slurm cgroup tests: the cgroup tree and procfs under `tmp`, allocations on.
HostOwnerResolverOptions slurm_options(const std::filesystem::path& tmp, testing::FakeClock* clock) {
  HostOwnerResolverOptions o;
  o.procfs = tmp / "proc";
  o.slurm_cgroups.cgroup_root = tmp / "cgroup";
  o.slurm_cgroups.procfs = tmp / "proc";
  o.allocations = true;
  o.rules = ProjectResolver({}, "default");
  o.clock = clock;
  return o;
}

DeviceIdentity gpu_at(int index, std::string uuid, int device_minor) {
  DeviceIdentity gpu;
  gpu.index = index;
  gpu.uuid = std::move(uuid);
  gpu.device_minor = device_minor;
  return gpu;
}

TEST(HostOwnerResolver, SlurmJobsFromTheirCgroupsByDeviceMinor) {
  TempDir tmp;
  // cgroup v1: job 77 may open /dev/nvidia3, which is GPU index 0 on this node.
  write_file(tmp / "cgroup/devices/slurm/uid_2051/job_77/devices.list", "c 195:3 rw\nc 195:255 rw\n");
  testing::FakeClock clock;
  clock.set_wall_us(1'800'000'000'000'000);
  HostOwnerResolverOptions o = slurm_options(tmp.path(), &clock);
  o.hpc_refresh = std::chrono::milliseconds(0);
  Logger log(LogLevel::kError);
  HostOwnerResolver resolver(o, log);
  const DeviceIdentity gpu0 = gpu_at(0, "GPU-0", 3);
  const DeviceIdentity gpu3 = gpu_at(3, "GPU-3", 0);
  auto held = resolver.allocation(gpu0);
  ASSERT_TRUE(held);
  EXPECT_EQ(held->owners, std::vector<OwnerLabels>{job_owner("77")});
  EXPECT_EQ(held->since_us, clock.wall_us());
  EXPECT_TRUE(resolver.allocation(gpu3)->owners.empty()) << "index 3 is /dev/nvidia0, which the job may not open";
  std::filesystem::remove_all(tmp / "cgroup/devices/slurm/uid_2051/job_77");
  clock.advance_wall(std::chrono::microseconds(5'000'000));
  auto released = resolver.allocation(gpu0);
  EXPECT_TRUE(released->owners.empty());
  EXPECT_EQ(released->since_us, clock.wall_us());
}

// The Slurm cgroups are read on the collection thread: a read due within the slack is made at
// once. Without it, a refresh equal to the collection interval skipped every other collection
// whose call came a few milliseconds early, and an edge was seen up to two intervals late (found
// against a real Slurm 22.05, tests/integration/test_slurm_real.py).
TEST(HostOwnerResolver, SlurmCgroupsAreReadAgainWhenDueWithinTheSlack) {
  for (const bool slack : {false, true}) {
    SCOPED_TRACE(slack ? "with slack" : "without");
    TempDir tmp;
    write_file(tmp / "cgroup/devices/slurm_n1/uid_0/job_5/devices.list", "c 195:0 rw\n");
    testing::FakeClock clock;
    clock.set_wall_us(1'800'000'000'000'000);
    HostOwnerResolverOptions o = slurm_options(tmp.path(), &clock);
    o.hpc_refresh = std::chrono::hours(1);
    // Due 1 ms after the last read: any later call reads again.
    o.refresh_slack = slack ? std::chrono::hours(1) - std::chrono::milliseconds(1) : std::chrono::milliseconds(0);
    Logger log(LogLevel::kError);
    HostOwnerResolver resolver(o, log);
    const DeviceIdentity gpu = gpu_at(0, "GPU-0", 0);
    ASSERT_EQ(resolver.allocation(gpu)->owners, std::vector<OwnerLabels>{job_owner("5")});
    std::filesystem::remove_all(tmp / "cgroup/devices/slurm_n1/uid_0/job_5");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    clock.advance_wall(std::chrono::microseconds(1'000'000));
    EXPECT_EQ(resolver.allocation(gpu)->owners.empty(), slack) << "the job's end is seen at this call only with slack";
  }
}

// A slack as large as the refresh interval, or larger, reads at every call.
TEST(HostOwnerResolver, ASlackPastTheRefreshReadsAtEveryCall) {
  TempDir tmp;
  write_file(tmp / "cgroup/devices/slurm/uid_0/job_6/devices.list", "c 195:1 rw\n");
  HostOwnerResolverOptions o = slurm_options(tmp.path(), nullptr);
  o.hpc_refresh = std::chrono::milliseconds(1000);
  o.refresh_slack = std::chrono::milliseconds(5000);
  Logger log(LogLevel::kError);
  HostOwnerResolver resolver(o, log);
  const DeviceIdentity gpu = gpu_at(1, "GPU-1", 1);
  EXPECT_EQ(resolver.allocation(gpu)->owners, std::vector<OwnerLabels>{job_owner("6")});
  std::filesystem::remove_all(tmp / "cgroup/devices/slurm/uid_0/job_6");
  EXPECT_TRUE(resolver.allocation(gpu)->owners.empty());
}

// The kubelet's device ids matched to a GPU by the fields of its identity, whatever its vendor:
// AMD's plugin names a GPU by its PCI address (docs/kubelet.md, "Device ids").
TEST(HostOwnerResolver, PodsOfAGpuByUuidPciAddressIndexOrMinor) {
  const std::vector<kubelet::PodResources> pods = {
      {"train-0", "ml", {{"main", {{"amd.com/gpu", {"0000:c1:00.0", "0000:c2:00.0"}}}}}},
      {"infer-0", "ml", {{"main", {{"nvidia.com/gpu", {"GPU-aaaa"}}, {"amd.com/gpu", {"0000:C3:00.0"}}}}}},
      {"by-index", "ml", {{"main", {{"nvidia.com/gpu", {"4"}}}}}},
      {"by-minor", "ml", {{"main", {}, {{"gpu.nvidia.com", "node-1", "gpu-7"}}}}},
  };
  const kubelet::DeviceMap map = kubelet::build_device_map(pods, {"nvidia.com/gpu", "amd.com/gpu"});
  auto pod_names = [&](const DeviceIdentity& gpu) {
    std::vector<std::string> out;
    if (const auto* owners = HostOwnerResolver::pods_of(map, gpu)) {
      for (const auto& o : *owners) out.push_back(o.pod);
    }
    return out;
  };
  using Names = std::vector<std::string>;
  DeviceIdentity amd;  // ROCm SMI's identity: the unique id, the PCI address
  amd.index = 4;
  amd.uuid = "0x8a1c3e5f7b2d4e60";
  amd.vendor = "amd";
  amd.pci_bus_id = "0000:c1:00.0";
  EXPECT_EQ(pod_names(amd), Names{"train-0"}) << "the PCI address comes before the index";
  DeviceIdentity radeon;  // no unique id: the uuid names the slot
  radeon.index = 5;
  radeon.uuid = "amd-0000:c2:00.0";
  radeon.vendor = "amd";
  radeon.pci_bus_id = "0000:c2:00.0";
  EXPECT_EQ(pod_names(radeon), Names{"train-0"});
  DeviceIdentity nvml;  // NVML spells its address otherwise; the uuid comes first
  nvml.index = 0;
  nvml.uuid = "GPU-aaaa";
  nvml.vendor = "nvidia";
  nvml.pci_bus_id = "00000000:C1:00.0";
  EXPECT_EQ(pod_names(nvml), Names{"infer-0"});
  nvml.uuid = "GPU-bbbb";
  EXPECT_EQ(pod_names(nvml), Names{"train-0"}) << "the same slot in another spelling";
  nvml.pci_bus_id = "00000000:C3:00.0";
  EXPECT_EQ(pod_names(nvml), Names{"infer-0"});
  DeviceIdentity elsewhere = amd;
  elsewhere.pci_bus_id = "0000:c4:00.0";
  EXPECT_EQ(pod_names(elsewhere), Names{"by-index"}) << "no entry of its address: its index";
  elsewhere.index = 6;
  EXPECT_EQ(pod_names(elsewhere), Names{});
  elsewhere.device_minor = 7;
  EXPECT_EQ(pod_names(elsewhere), Names{"by-minor"});
  elsewhere.device_minor.reset();
  elsewhere.pci_bus_id = "";
  EXPECT_EQ(pod_names(elsewhere), Names{});
  DeviceIdentity mig;  // a MIG device is its own uuid only, not its parent's slot
  mig.index = 0;
  mig.uuid = "MIG-cccc";
  mig.parent_uuid = "GPU-bbbb";
  mig.pci_bus_id = "00000000:C1:00.0";
  EXPECT_EQ(pod_names(mig), Names{});
}

}  // namespace
}  // namespace gpumeter
