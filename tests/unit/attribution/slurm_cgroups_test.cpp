// The Slurm cgroup source: jobs and their GPUs from fixture cgroup and procfs trees built in a
// temporary directory, in the v1 (devices controller) and v2 (job_<id> and SLUID) layouts.

#include "attribution/slurm_cgroups.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "test_support.h"

namespace gpumeter {
namespace {

using testing::TempDir;
using testing::write_file;
namespace fs = std::filesystem;

const std::vector<std::string> kAllow = {"SLURM_JOB_ID", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES"};

std::string environ_of(const std::vector<std::string>& entries) {
  std::string out;
  for (const auto& e : entries) out += e + '\0';
  return out;
}

// A host under `tmp`: sys/fs/cgroup and proc.
struct Host {
  std::string root, proc;
  explicit Host(const TempDir& tmp) : root(tmp / "sys/fs/cgroup"), proc(tmp / "proc") {
    fs::create_directories(root);
    fs::create_directories(proc);
  }
  SlurmCgroupOptions options(std::vector<std::string> allow = kAllow) const {
    return SlurmCgroupOptions{root, proc, std::move(allow)};
  }
  void process(unsigned pid, const std::vector<std::string>& env) const {
    write_file(proc + "/" + std::to_string(pid) + "/environ", environ_of(env));
  }
  // cgroup v1: the job's devices allow-list.
  std::string v1_job(const std::string& slurm, unsigned uid, const std::string& job, const std::string& list) const {
    const std::string dir = fmt::format("{}/devices/{}/uid_{}/job_{}", root, slurm, uid, job);
    write_file(dir + "/devices.list", list);
    return dir;
  }
  // cgroup v2: a task cgroup of a step under the job's directory (job_<id> or a SLUID).
  void v2_task(const std::string& job_dir, const std::string& step, const std::vector<unsigned>& pids,
               const std::string& scope = "system.slice/slurmstepd.scope") const {
    std::string procs;
    for (unsigned p : pids) procs += std::to_string(p) + "\n";
    const std::string step_dir = fmt::format("{}/{}/{}/step_{}", root, scope, job_dir, step);
    write_file(step_dir + "/user/task_0/cgroup.procs", procs);
    write_file(step_dir + "/slurm/cgroup.procs", "1\n");  // slurmstepd
  }
};

std::vector<SlurmJobGpus> read_ok(const SlurmCgroupOptions& o) {
  auto r = read_slurm_job_gpus(o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  if (r.ok()) {
    EXPECT_EQ(r->jobs_unreadable, 0u) << r->unreadable_error;
  }
  return r.ok() ? r->jobs : std::vector<SlurmJobGpus>{};
}

using Gpus = std::vector<std::string>;

TEST(slurm_cgroups, MissingTreeOrNoSlurmIsAnEmptyList) {
  TempDir tmp;
  auto r = read_slurm_job_gpus(SlurmCgroupOptions{tmp / "nowhere", tmp / "proc", kAllow});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->jobs.empty());
  Host host(tmp);
  write_file(host.root + "/system.slice/sshd.service/cgroup.procs", "1\n");
  write_file(host.root + "/devices/user.slice/devices.list", "a *:* rwm\n");
  EXPECT_TRUE(read_ok(host.options()).empty());
}

TEST(slurm_cgroups, ParsesTheDevicesList) {
  // The kernel's format (security/device_cgroup.c): "<a|b|c> <major|*>:<minor|*> <r?w?m?>".
  auto l = parse_devices_list(
      "c 1:3 rwm\nc 195:255 rwm\nc 195:254 rw\nc 195:2 rwm\nc 195:0 rw\nb 195:5 rwm\n"
      "c 195:7 m\nc 195:1 r\nc 195:1 rwm\n");
  EXPECT_FALSE(l.all);
  EXPECT_EQ(l.gpus, (Gpus{"0", "1", "2"}));
  EXPECT_TRUE(parse_devices_list("a *:* rwm\n").all);
  EXPECT_TRUE(parse_devices_list("c *:* rwm\n").all);
  EXPECT_TRUE(parse_devices_list("c 195:* rwm\n").all);
  EXPECT_FALSE(parse_devices_list("c 196:* rwm\n").all);
  // Malformed lines are skipped, the rest kept.
  l = parse_devices_list("garbage\nc 195:x rwm\nc 195:3 rwz\nc195:4 rwm\nc 195:99999999999 rwm\n\nc 195:6 rwm");
  EXPECT_FALSE(l.all);
  EXPECT_EQ(l.gpus, (Gpus{"6"}));
  EXPECT_TRUE(parse_devices_list("").gpus.empty());
}

TEST(slurm_cgroups, ParsesGpuListsAndSluids) {
  EXPECT_EQ(parse_gpu_list("0,1,3", true), (Gpus{"0", "1", "3"}));
  EXPECT_EQ(parse_gpu_list(" 2 , 2,0 ", true), (Gpus{"2", "0"}));
  EXPECT_TRUE(parse_gpu_list("0,x", true).empty());
  EXPECT_TRUE(parse_gpu_list("0-3", true).empty());
  EXPECT_TRUE(parse_gpu_list("", true).empty());
  EXPECT_TRUE(parse_gpu_list("GPU-0a1b", true).empty());
  EXPECT_EQ(parse_gpu_list("GPU-0a1b-22,MIG-9f8e", false), (Gpus{"GPU-0a1b-22", "MIG-9f8e"}));
  EXPECT_TRUE(parse_gpu_list("0,1", false).empty());
  EXPECT_TRUE(parse_gpu_list("GPU-0a1b,1", false).empty());
  EXPECT_TRUE(is_sluid("sEKNKTV3WPV500"));
  EXPECT_TRUE(is_sluid("s4SNKN57XZTE00"));
  EXPECT_FALSE(is_sluid("sEKNKTV3WPV50"));   // 12 digits
  EXPECT_FALSE(is_sluid("sEKNKTV3WPV5I0"));  // I is not a base-32 digit
  EXPECT_FALSE(is_sluid("SEKNKTV3WPV500"));
  EXPECT_FALSE(is_sluid("job_51300"));
}

TEST(slurm_cgroups, V1ReadsEachJobsDeviceAllowList) {
  TempDir tmp;
  Host host(tmp);
  host.v1_job("slurm", 2051, "51300", "c 195:255 rwm\nc 195:254 rwm\nc 195:1 rwm\nc 195:2 rwm\nc 1:3 rwm\n");
  host.v1_job("slurm", 1001, "9", "c 195:0 rwm\nc 195:255 rwm\n");
  host.v1_job("slurm_node7", 1001, "400", "c 195:255 rwm\n");  // a job without GPUs: not listed
  write_file(host.root + "/devices/slurm/uid_1001/job_x/devices.list", "c 195:3 rwm\n");  // not a job
  write_file(host.root + "/devices/slurmd.service/devices.list", "c 195:3 rwm\n");
  EXPECT_EQ(read_ok(host.options()), (std::vector<SlurmJobGpus>{
                                         {"9", "1001", {"0"}, "cgroup-v1-devices"},
                                         {"51300", "2051", {"1", "2"}, "cgroup-v1-devices"},
                                     }));
}

TEST(slurm_cgroups, V1AllowAllFallsBackToTheJobsEnvironment) {
  // A default-allow devices cgroup lists `a *:* rwm` whatever it denies: the list does not say.
  TempDir tmp;
  Host host(tmp);
  const std::string job = host.v1_job("slurm", 2051, "77", "a *:* rwm\n");
  write_file(job + "/step_batch/task_0/cgroup.procs", "300\n");
  host.process(300, {"HOME=/home/carol", "SLURM_JOB_GPUS=3,4", "CUDA_VISIBLE_DEVICES=0,1"});
  EXPECT_EQ(read_ok(host.options()), (std::vector<SlurmJobGpus>{{"77", "2051", {"3", "4"}, "cgroup-v1-environ"}}));
  // Nothing allow-listed: its GPUs are not known, so it holds none here.
  EXPECT_EQ(read_ok(host.options({"GPUMETER_PROJECT"})), std::vector<SlurmJobGpus>{});
}

TEST(slurm_cgroups, V2JobIdPathsReadTheBatchStepsEnvironment) {
  TempDir tmp;
  Host host(tmp);
  host.v2_task("job_51300", "batch", {100});
  host.v2_task("job_51300", "0", {101, 102});
  host.process(100, {"PATH=/bin", "SLURM_JOB_ID=51300", "SLURM_JOB_GPUS=1,2", "CUDA_VISIBLE_DEVICES=0,1"});
  host.process(101, {"SLURM_JOB_ID=51300", "SLURM_STEP_GPUS=1", "CUDA_VISIBLE_DEVICES=0"});
  host.process(1, {"SLURM_JOB_GPUS=0,1,2,3,4,5,6,7"});  // slurmstepd's cgroup is never read
  EXPECT_EQ(read_ok(host.options()), (std::vector<SlurmJobGpus>{{"51300", "", {"1", "2"}, "cgroup-v2-environ"}}));
}

TEST(slurm_cgroups, V2StepsWithoutABatchStepGiveTheUnionOfTheirGpus) {
  TempDir tmp;
  Host host(tmp);
  // An allocation from salloc with two srun steps, and an extern step with no GPU variable.
  host.v2_task("job_8", "0", {200});
  host.v2_task("job_8", "1", {210});
  host.v2_task("job_8", "extern", {220});
  host.process(200, {"SLURM_STEP_GPUS=2"});
  host.process(210, {"SLURM_STEP_GPUS=5,2"});
  host.process(220, {"SLURM_JOB_ID=8"});
  // Another node's slurmd on the same host (MULTIPLE_SLURMD), in another slice.
  host.v2_task("job_12", "0", {230}, "slurm.slice/node2_slurmstepd.scope");
  host.process(230, {"SLURM_STEP_GPUS=6"});
  EXPECT_EQ(read_ok(host.options()), (std::vector<SlurmJobGpus>{
                                         {"8", "", {"2", "5"}, "cgroup-v2-environ"},
                                         {"12", "", {"6"}, "cgroup-v2-environ"},
                                     }));
}

TEST(slurm_cgroups, V2SluidPathsTakeTheJobIdFromTheEnvironment) {
  // Slurm 26.05 without CgroupJobIdPaths=yes: the job's directory is its SLUID.
  TempDir tmp;
  Host host(tmp);
  host.v2_task("sEKNKTV3WPV500", "batch", {100});
  host.v2_task("sEKNKTV3WPV500", "0", {101});
  host.v2_task("s4SNKN57XZTE00", "0", {200});
  host.v2_task("system", "x", {300});  // the scope's waiting area for new slurmstepds
  // The batch step has the GPUs but not the id; a later step has the id.
  host.process(100, {"SLURM_JOB_GPUS=0"});
  host.process(101, {"SLURM_JOB_ID=51301", "SLURM_STEP_GPUS=0"});
  host.process(200, {"SLURM_JOB_ID=9", "SLURM_STEP_GPUS=3"});
  host.process(300, {"SLURM_JOB_ID=1", "SLURM_STEP_GPUS=7"});
  EXPECT_EQ(read_ok(host.options()), (std::vector<SlurmJobGpus>{
                                         {"9", "", {"3"}, "cgroup-v2-environ"},
                                         {"51301", "", {"0"}, "cgroup-v2-environ"},
                                     }));
  // Without SLURM_JOB_ID in the allow-list the SLUID stands for the job (Slurm's tools accept it).
  EXPECT_EQ(read_ok(host.options({"SLURM_JOB_GPUS", "SLURM_STEP_GPUS"})),
            (std::vector<SlurmJobGpus>{
                {"s4SNKN57XZTE00", "", {"3"}, "cgroup-v2-environ"},
                {"sEKNKTV3WPV500", "", {"0"}, "cgroup-v2-environ"},
            }));
}

TEST(slurm_cgroups, BothV2NamingModesOnOneHost) {
  // Jobs started before and after CgroupJobIdPaths changed, side by side under one scope.
  TempDir tmp;
  Host host(tmp);
  host.v2_task("job_41", "batch", {100});
  host.v2_task("sEKNKTV3WPV500", "batch", {200});
  host.process(100, {"SLURM_JOB_ID=41", "SLURM_JOB_GPUS=1"});
  host.process(200, {"SLURM_JOB_ID=42", "SLURM_JOB_GPUS=2"});
  EXPECT_EQ(read_ok(host.options()), (std::vector<SlurmJobGpus>{
                                         {"41", "", {"1"}, "cgroup-v2-environ"},
                                         {"42", "", {"2"}, "cgroup-v2-environ"},
                                     }));
}

TEST(slurm_cgroups, OnlyAllowListedVariablesAreRead) {
  TempDir tmp;
  Host host(tmp);
  host.v2_task("job_5", "0", {100});
  host.process(100, {"SLURM_JOB_GPUS=1", "SLURM_STEP_GPUS=2", "CUDA_VISIBLE_DEVICES=GPU-aaaa-bbbb"});
  auto gpus = [&](std::vector<std::string> allow) {
    auto jobs = read_ok(host.options(std::move(allow)));
    EXPECT_LE(jobs.size(), 1u);
    return jobs.empty() ? Gpus{} : jobs[0].gpus;  // a job with no GPU known is not listed
  };
  EXPECT_EQ(gpus(kAllow), (Gpus{"1"}));
  EXPECT_EQ(gpus({"SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES"}), (Gpus{"2"}));
  EXPECT_EQ(gpus({"CUDA_VISIBLE_DEVICES"}), (Gpus{"GPU-aaaa-bbbb"}));
  EXPECT_EQ(gpus({"HOME", "PATH"}), (Gpus{}));
  EXPECT_EQ(gpus({}), (Gpus{}));
}

TEST(slurm_cgroups, NumericCudaVisibleDevicesIsNotTrusted) {
  // Inside a job with constrained devices Slurm renumbers CUDA_VISIBLE_DEVICES from 0: "0" may
  // be any GPU of the node.
  TempDir tmp;
  Host host(tmp);
  host.v2_task("job_5", "0", {100});
  host.process(100, {"CUDA_VISIBLE_DEVICES=0"});
  EXPECT_EQ(read_ok(host.options()), std::vector<SlurmJobGpus>{});
}

TEST(slurm_cgroups, MalformedFilesAreSkipped) {
  TempDir tmp;
  Host host(tmp);
  host.v2_task("job_5", "batch", {100});
  // cgroup.procs with garbage around a good pid; a malformed job variable falls through to the
  // step's; a job id that is not a number is ignored.
  write_file(host.root + "/system.slice/slurmstepd.scope/job_5/step_0/user/task_0/cgroup.procs",
             "abc\n-1\n99999999999\n\n101\n");
  host.process(100, {"SLURM_JOB_GPUS=0,x", "SLURM_JOB_ID=5;rm"});
  host.process(101, {"SLURM_STEP_GPUS=4"});
  // An environ with no final NUL and a value past the size the agent keeps.
  write_file(host.proc + "/102/environ", "SLURM_STEP_GPUS=" + std::string(8000, '1'));
  write_file(host.root + "/system.slice/slurmstepd.scope/job_5/step_1/user/task_0/cgroup.procs", "102\n");
  EXPECT_EQ(read_ok(host.options()), (std::vector<SlurmJobGpus>{{"5", "", {"4"}, "cgroup-v2-environ"}}));
}

TEST(slurm_cgroups, AVanishedJobOrProcessIsLeftOut) {
  TempDir tmp;
  Host host(tmp);
  // v1: the job's directory is listed but its devices.list is gone (the job ended).
  fs::create_directories(host.root + "/devices/slurm/uid_1/job_3");
  host.v1_job("slurm", 1, "4", "c 195:1 rwm\n");
  // v2: the first process exited; the next one is read.
  host.v2_task("job_6", "batch", {100, 101});
  host.process(101, {"SLURM_JOB_GPUS=2"});
  EXPECT_EQ(read_ok(host.options()), (std::vector<SlurmJobGpus>{
                                         {"4", "1", {"1"}, "cgroup-v1-devices"},
                                         {"6", "", {"2"}, "cgroup-v2-environ"},
                                     }));
}

TEST(slurm_cgroups, JobsEndingWhileReadNeverGiveAnError) {
  // Another thread removes and recreates a job's cgroup tree and process while the reader
  // runs: every read succeeds, and sees the job whole or not at all.
  TempDir tmp;
  Host host(tmp);
  host.v1_job("slurm", 1, "4", "c 195:1 rwm\n");
  const std::string scope = host.root + "/system.slice/slurmstepd.scope";
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    while (!stop.load()) {
      write_file(scope + "/job_6/step_batch/user/task_0/cgroup.procs", "100\n");
      write_file(host.proc + "/100/environ", environ_of({"SLURM_JOB_GPUS=2"}));
      std::error_code ec;
      fs::remove_all(scope + "/job_6", ec);
      fs::remove_all(host.proc + "/100", ec);
    }
  });
  int errors = 0, other = 0;
  for (int i = 0; i < 300; ++i) {
    auto r = read_slurm_job_gpus(host.options());
    if (!r.ok()) {
      ++errors;
      continue;
    }
    for (const auto& j : r->jobs) {
      if (j.job_id == "4") {
        if (j.gpus != Gpus{"1"}) ++other;
      } else if (j.job_id != "6" || !(j.gpus == Gpus{"2"} || j.gpus.empty())) {
        ++other;
      }
    }
  }
  stop = true;
  churn.join();
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(other, 0);
}

// On a real kernel a job's cgroup removed between the open of one of its files and the read
// answers ENODEV, not ENOENT (kernfs; tests/integration/test_slurm_real.py checks it on the
// host): the job ended, which is no error. Before, such a read counted the job unreadable and
// logged a warning at each job end that met a read.
TEST(slurm_cgroups, ACgroupRemovedWhileReadIsGoneNotUnreadable) {
  for (int err : {ENOENT, ENOTDIR, ESRCH, ELOOP, ENODEV}) EXPECT_TRUE(slurm_cgroup_entry_gone(err)) << err;
  for (int err : {EACCES, EPERM, EIO, EISDIR, ENOMEM}) EXPECT_FALSE(slurm_cgroup_entry_gone(err)) << err;
}

// What a real Slurm 22.05 wrote on cgroup v1 with ConstrainDevices=yes and PrologFlags=Contain
// (../shared/reference/slurm-real-cluster.md; tests/integration/test_slurm_real.py): `a *:* rwm`
// at every level; slurmstepd in step_<s>, the tasks in step_<s>/task_0; the extern step's
// `sleep` with none of the job's variables; an srun step inside the batch job inheriting
// SLURM_JOB_GPUS; a job-allocating srun with SLURM_STEP_GPUS only.
TEST(slurm_cgroups, V1AsSlurm2205WritesIt) {
  TempDir tmp;
  Host host(tmp);
  auto level = [&](const std::string& dir, const std::string& procs) {
    write_file(dir + "/devices.list", "a *:* rwm\n");
    write_file(dir + "/cgroup.procs", procs);
  };
  // Job 2 (GPUs 2,3): a batch script running an srun step on GPU 2.
  const std::string job2 = host.v1_job("slurm_vm", 0, "2", "a *:* rwm\n");
  write_file(job2 + "/cgroup.procs", "");  // the job level holds no process
  level(job2 + "/step_batch", "410\n");
  level(job2 + "/step_batch/task_0", "420\n421\n");
  level(job2 + "/step_extern", "400\n405\n");
  level(job2 + "/step_0", "430\n");
  level(job2 + "/step_0/task_0", "440\n");
  host.process(400, {"PATH=/bin"});                  // slurmstepd: [2.extern]
  host.process(405, {"CUDA_HOME=/usr/local/cuda"});  // its sleep placeholder
  host.process(410, {"PATH=/bin"});                  // slurmstepd: [2.batch]
  host.process(420, {"SLURM_JOB_ID=2", "SLURM_JOB_GPUS=2,3", "CUDA_VISIBLE_DEVICES=0,1"});
  host.process(440, {"SLURM_JOB_ID=2", "SLURM_JOB_GPUS=2,3", "SLURM_STEP_GPUS=2", "CUDA_VISIBLE_DEVICES=0"});
  // Job 3 (GPUs 0,1): a job-allocating srun.
  const std::string job3 = host.v1_job("slurm_vm", 0, "3", "a *:* rwm\n");
  level(job3 + "/step_extern", "500\n505\n");
  level(job3 + "/step_0", "510\n");
  level(job3 + "/step_0/task_0", "520\n");
  host.process(520, {"SLURM_JOB_ID=3", "SLURM_STEP_GPUS=0,1", "CUDA_VISIBLE_DEVICES=0,1"});
  // Job 4: its batch step has ended and only the extern step is left: no GPU is known.
  const std::string job4 = host.v1_job("slurm_vm", 0, "4", "a *:* rwm\n");
  level(job4 + "/step_extern", "600\n605\n");
  host.process(605, {"CUDA_HOME=/usr/local/cuda"});
  EXPECT_EQ(read_ok(host.options()), (std::vector<SlurmJobGpus>{
                                         {"2", "0", {"2", "3"}, "cgroup-v1-environ"},
                                         {"3", "0", {"0", "1"}, "cgroup-v1-environ"},
                                     }));
}

TEST(slurm_cgroups, SymbolicLinksAreNotFollowed) {
  TempDir tmp;
  Host host(tmp);
  write_file(tmp / "elsewhere/job_9/devices.list", "c 195:0 rwm\n");
  write_file(tmp / "elsewhere/devices.list", "c 195:0 rwm\n");
  write_file(tmp / "elsewhere/environ", environ_of({"SLURM_JOB_GPUS=0"}));
  fs::create_directories(host.root + "/devices/slurm/uid_1");
  fs::create_directory_symlink(tmp / "elsewhere/job_9", host.root + "/devices/slurm/uid_1/job_9");
  fs::create_directories(host.root + "/devices/slurm/uid_1/job_10");
  fs::create_symlink(tmp / "elsewhere/devices.list", host.root + "/devices/slurm/uid_1/job_10/devices.list");
  fs::create_directory_symlink(tmp / "elsewhere", host.root + "/devices/slurm_evil");
  host.v2_task("job_11", "batch", {100});
  fs::create_directories(host.proc + "/100");
  fs::create_symlink(tmp / "elsewhere/environ", host.proc + "/100/environ");
  EXPECT_EQ(read_ok(host.options()), std::vector<SlurmJobGpus>{});  // its environ is a link, not read
}

TEST(slurm_cgroups, BoundedWork) {
  TempDir tmp;
  Host host(tmp);
  // More processes in a job than are read: the job's GPUs come from the first ones only.
  std::string procs;
  for (unsigned pid = 1000; pid < 1000 + kMaxSlurmPidsPerJob + 5; ++pid) procs += std::to_string(pid) + "\n";
  write_file(host.root + "/system.slice/slurmstepd.scope/job_1/step_0/user/task_0/cgroup.procs", procs);
  host.process(static_cast<unsigned>(1000 + kMaxSlurmPidsPerJob), {"SLURM_STEP_GPUS=1"});
  host.process(static_cast<unsigned>(1000 + kMaxSlurmPidsPerJob - 1), {"SLURM_STEP_GPUS=0"});
  EXPECT_EQ(read_ok(host.options()), (std::vector<SlurmJobGpus>{{"1", "", {"0"}, "cgroup-v2-environ"}}));
  // More jobs than are read: the first kMaxSlurmJobs by id.
  for (std::size_t j = 0; j < kMaxSlurmJobs + 3; ++j) {
    fs::create_directories(fmt::format("{}/devices/slurm/uid_1/job_{}", host.root, 100 + j));
    write_file(fmt::format("{}/devices/slurm/uid_1/job_{}/devices.list", host.root, 100 + j), "c 195:0 rwm\n");
  }
  auto read = read_slurm_job_gpus(host.options());
  ASSERT_TRUE(read.ok()) << read.error().message;
  ASSERT_EQ(read->jobs.size(), kMaxSlurmJobs);
  // v1 is read first, in job-id order: 1024 of its 1027 jobs are kept, its last 3 and the v2
  // job left out, and counted.
  EXPECT_EQ(read->jobs.front().job_id, "100");
  EXPECT_EQ(read->jobs.back().job_id, std::to_string(100 + kMaxSlurmJobs - 1));
  EXPECT_EQ(read->jobs_left_out, 4u);
}

// Directories a crashed slurmd left behind, with no process and so no GPU known, sort before a
// real job: they do not fill the bound, and the real job's allocation is read.
TEST(slurm_cgroups, StaleJobDirectoriesDoNotHideARealJob) {
  TempDir tmp;
  Host host(tmp);
  for (int j = 10; j < 2010; ++j) {
    fs::create_directories(fmt::format("{}/system.slice/slurmstepd.scope/job_{}", host.root, j));
  }
  host.v2_task("job_48213", "batch", {100});
  host.process(100, {"SLURM_JOB_GPUS=5"});
  auto read = read_slurm_job_gpus(host.options());
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->jobs, (std::vector<SlurmJobGpus>{{"48213", "", {"5"}, "cgroup-v2-environ"}}));
  EXPECT_EQ(read->jobs_left_out, 0u);
}

// Reads the tree in a child process that is not root (file modes do not stop root): 0 when
// it read job 5 of uid 2 and skipped the unreadable uid_1, saying why.
int read_as_nobody(const SlurmCgroupOptions& o) {
  pid_t child = ::fork();
  if (child == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(10);
    auto r = read_slurm_job_gpus(o);
    if (!r.ok()) ::_exit(11);
    if (r->jobs != std::vector<SlurmJobGpus>{{"5", "2", {"2"}, "cgroup-v1-devices"}}) ::_exit(12);
    if (r->jobs_unreadable != 1 || r->unreadable_error.find("uid_1") == std::string::npos) ::_exit(13);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

// One job (or one user's jobs) that cannot be read is skipped alone, and said; the others'
// allocations stay known. The tree itself unreadable is an error.
TEST(slurm_cgroups, AnUnreadableJobIsSkippedAloneAndAnUnreadableTreeIsAnError) {
  TempDir tmp;
  Host host(tmp);
  host.v1_job("slurm", 1, "4", "c 195:1 rwm\n");
  host.v1_job("slurm", 2, "5", "c 195:2 rwm\n");
  for (const char* d : {"sys", "sys/fs", "sys/fs/cgroup", "sys/fs/cgroup/devices", "sys/fs/cgroup/devices/slurm",
                        "sys/fs/cgroup/devices/slurm/uid_2", "sys/fs/cgroup/devices/slurm/uid_2/job_5"}) {
    ASSERT_EQ(::chmod((tmp / d).c_str(), 0755), 0);
  }
  ASSERT_EQ(::chmod((host.root + "/devices/slurm/uid_2/job_5/devices.list").c_str(), 0644), 0);
  ASSERT_EQ(::chmod((host.root + "/devices/slurm/uid_1").c_str(), 0700), 0);
  EXPECT_EQ(read_as_nobody(host.options()), 0);
  // A directory where devices.list should be is no allow-list either: that job is skipped.
  ASSERT_EQ(::chmod((host.root + "/devices/slurm/uid_1").c_str(), 0755), 0);
  fs::remove(host.root + "/devices/slurm/uid_1/job_4/devices.list");
  fs::create_directory(host.root + "/devices/slurm/uid_1/job_4/devices.list");
  auto r = read_slurm_job_gpus(host.options());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->jobs, (std::vector<SlurmJobGpus>{{"5", "2", {"2"}, "cgroup-v1-devices"}}));
  EXPECT_EQ(r->jobs_unreadable, 1u);
  EXPECT_NE(r->unreadable_error.find("job_4"), std::string::npos) << r->unreadable_error;
  // The Slurm root unreadable: nothing can be said.
  ASSERT_EQ(::chmod((host.root + "/devices/slurm").c_str(), 0700), 0);
  pid_t child = ::fork();
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
    auto whole = read_slurm_job_gpus(host.options());
    ::_exit(!whole.ok() && whole.error().code == EACCES ? 0 : 11);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace gpumeter
