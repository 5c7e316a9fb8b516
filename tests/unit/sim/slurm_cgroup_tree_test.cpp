// The Slurm jobs' cgroup trees `gpumeter sim procfs --slurm-cgroup` writes, read back by the
// agent's reader (src/attribution/slurm_cgroups.h) at times before, during and between steps.

#include "sim/host/slurm_cgroup_tree.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "attribution/slurm_cgroups.h"
#include "sim/host/procfs_writer.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

namespace fs = std::filesystem;
using testing::entries;
using testing::fresh_dir;
constexpr auto read = testing::read_file;
constexpr Micros S = kMicrosPerSecond;

// Slurm job 7 holds GPUs 2-3 over 0-100 s; its step 0 runs on GPU 2 over 10-20 s and step 1 on
// both over 30-40 s. Job 8 holds GPU 3 over 50-70 s with no step. Pid 4000000 is taken by a
// plain job, so the batch scripts get the next free pids.
const std::string kScenario = std::string(testing::kModel) + R"(
gpus: {count: 4, model: m}
duration: 200
allocations:
  - {name: job7, end: 100, gpus: [2, 3], uid: 2000, slurm: {job_id: "7"}}
  - {name: nb, start: 5, end: 50, gpus: [0], kubernetes: {namespace: a, pod: p, container: c}}
  - {name: job8, start: 50, end: 70, gpus: [3], uid: 2001, slurm: {job_id: "8"}}
jobs:
  - {name: step0, allocation: job7, start: 10, end: 20, gpus: [2], pid: 30, utilization: 0.8,
     env: {SLURM_JOB_ID: "7"}}
  - {name: step1, allocation: job7, start: 30, end: 40, gpus: [2, 3], pids: [31, 32], utilization: 0.8}
  - {name: other, start: 0, end: 200, gpus: [1], pid: 4000000, utilization: 0.1}
)";

const std::vector<std::string> kAllow = {"SLURM_JOB_ID", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES"};

std::vector<SlurmJobGpus> read_back(const fs::path& dir) {
  auto r = read_slurm_job_gpus(SlurmCgroupOptions{(dir / kCgroupRoot).string(), (dir / "proc").string(), kAllow});
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r->jobs : std::vector<SlurmJobGpus>{};
}

TEST(SlurmCgroupTree, LayoutNamesAndSluids) {
  for (auto l : {SlurmCgroupLayout::kNone, SlurmCgroupLayout::kV1, SlurmCgroupLayout::kV1Whitelist,
                 SlurmCgroupLayout::kV2, SlurmCgroupLayout::kV2Sluid}) {
    EXPECT_EQ(parse_slurm_cgroup_layout(to_string(l)), l);
  }
  EXPECT_FALSE(parse_slurm_cgroup_layout("v3").has_value());
  EXPECT_TRUE(is_sluid(sluid_of("51300")));
  EXPECT_TRUE(is_sluid(sluid_of("")));
  EXPECT_EQ(sluid_of("51300"), sluid_of("51300"));
  EXPECT_NE(sluid_of("51300"), sluid_of("51301"));
}

TEST(SlurmCgroupTree, BatchScriptsAreProcessesOverTheAllocations) {
  Scenario s = testing::parse_ok(kScenario);
  EXPECT_TRUE(slurm_batch_jobs(s, SlurmCgroupLayout::kNone).empty());
  auto batch = slurm_batch_jobs(s, SlurmCgroupLayout::kV2);
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].pids, (std::vector<unsigned>{4000001}));  // 4000000 is taken
  EXPECT_EQ(batch[1].pids, (std::vector<unsigned>{4000002}));
  EXPECT_EQ(batch[0].start, 0);
  EXPECT_EQ(batch[0].end, 100 * S);
  EXPECT_EQ(batch[0].uid, 2000u);
  EXPECT_TRUE(batch[0].gpus.empty());
  EXPECT_EQ(batch[0].cgroup, "/system.slice/slurmstepd.scope/job_7/step_batch/user/task_0");
  EXPECT_EQ(batch[0].env, (std::vector<std::pair<std::string, std::string>>{{"SLURM_JOB_ID", "7"},
                                                                            {"SLURM_JOB_UID", "2000"},
                                                                            {"SLURM_JOB_GPUS", "2,3"},
                                                                            {"CUDA_VISIBLE_DEVICES", "0,1"}}));
  EXPECT_EQ(slurm_batch_jobs(s, SlurmCgroupLayout::kV2Sluid)[1].cgroup,
            "/system.slice/slurmstepd.scope/" + sluid_of("8") + "/step_batch/user/task_0");
  auto v1 = slurm_batch_jobs(s, SlurmCgroupLayout::kV1);
  EXPECT_EQ(v1[0].cgroup_version, 1);
  EXPECT_EQ(v1[0].cgroup, "/slurm_node0/uid_2000/job_7/step_batch/task_0");  // Slurm 22.05, node node0
  auto whitelist = slurm_batch_jobs(s, SlurmCgroupLayout::kV1Whitelist);
  EXPECT_EQ(whitelist[0].cgroup_version, 1);
  EXPECT_EQ(whitelist[0].cgroup, "/slurm/uid_2000/job_7/step_batch/task_0");
}

TEST(SlurmCgroupTree, V2TreeFollowsTheAllocationsAndSteps) {
  Scenario s = testing::parse_ok(kScenario);
  fs::path dir = fresh_dir("cg-v2");
  auto tree = ProcfsTree::open(dir, s, 5 * S, {}, SlurmCgroupLayout::kV2);
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  const SlurmCgroupTree* cg = (*tree)->slurm_cgroups();
  ASSERT_NE(cg, nullptr);
  const fs::path scope = dir / kCgroupRoot / "system.slice/slurmstepd.scope";

  ASSERT_TRUE((*tree)->sync(15 * S).ok());  // step 0 runs
  EXPECT_EQ(entries(scope), (std::set<std::string>{"job_7"}));
  EXPECT_EQ(entries(scope / "job_7"), (std::set<std::string>{"step_batch", "step_0"}));
  EXPECT_EQ(read(scope / "job_7/step_batch/user/task_0/cgroup.procs"), "4000001\n");
  EXPECT_EQ(read(scope / "job_7/step_0/user/task_0/cgroup.procs"), "30\n");
  EXPECT_EQ(read(scope / "job_7/step_0/slurm/cgroup.procs"), "");
  EXPECT_TRUE((*tree)->present().count(4000001));
  EXPECT_EQ(read_back(dir), (std::vector<SlurmJobGpus>{{"7", "", {"2", "3"}, "cgroup-v2-environ"}}));

  ASSERT_TRUE((*tree)->sync(25 * S).ok());  // between steps: the job and its batch script remain
  EXPECT_EQ(entries(scope / "job_7"), (std::set<std::string>{"step_batch"}));
  EXPECT_EQ(read_back(dir), (std::vector<SlurmJobGpus>{{"7", "", {"2", "3"}, "cgroup-v2-environ"}}));

  ASSERT_TRUE((*tree)->sync(35 * S).ok());  // step 1, numbered after step 0
  EXPECT_EQ(read(scope / "job_7/step_1/user/task_0/cgroup.procs"), "31\n32\n");

  ASSERT_TRUE((*tree)->sync(60 * S).ok());
  EXPECT_EQ(read_back(dir), (std::vector<SlurmJobGpus>{{"7", "", {"2", "3"}, "cgroup-v2-environ"},
                                                       {"8", "", {"3"}, "cgroup-v2-environ"}}));
  ASSERT_TRUE((*tree)->sync(100 * S).ok());  // both ended, no lead
  EXPECT_EQ(entries(scope), (std::set<std::string>{}));
  EXPECT_TRUE(read_back(dir).empty());

  // Edges: allocations and steps, exactly.
  EXPECT_EQ(cg->next_change_after(0), 10 * S);
  EXPECT_EQ(cg->next_change_after(20 * S), 30 * S);
  EXPECT_EQ(cg->next_change_after(40 * S), 50 * S);
  EXPECT_EQ(cg->next_change_after(70 * S), 100 * S);
  EXPECT_EQ(cg->next_change_after(100 * S), kForever);
  // The procfs tree, which `--follow` drives, wakes at them too, between its own pid edges
  // (5 s and 25 s here) and the job mapping's (50 s).
  EXPECT_EQ((*tree)->next_change_after(5 * S), 10 * S);
  EXPECT_EQ((*tree)->next_change_after(25 * S), 30 * S);
}

TEST(SlurmCgroupTree, V2SluidTreeMapsToJobIdsThroughTheEnvironment) {
  Scenario s = testing::parse_ok(kScenario);
  fs::path dir = fresh_dir("cg-sluid");
  auto tree = ProcfsTree::open(dir, s, 5 * S, {}, SlurmCgroupLayout::kV2Sluid);
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  ASSERT_TRUE((*tree)->sync(60 * S).ok());
  EXPECT_EQ(entries(dir / kCgroupRoot / "system.slice/slurmstepd.scope"),
            (std::set<std::string>{sluid_of("7"), sluid_of("8")}));
  EXPECT_EQ(read_back(dir), (std::vector<SlurmJobGpus>{{"7", "", {"2", "3"}, "cgroup-v2-environ"},
                                                       {"8", "", {"3"}, "cgroup-v2-environ"}}));
}

// What a real Slurm 22.05 writes with ConstrainDevices=yes (../shared/reference/
// slurm-real-cluster.md, and tests/integration/test_slurm_real.py against one): slurm_<node>,
// `a *:* rwm` at every level, the processes in step_<s>/task_0. The reader then takes the GPUs
// from the batch script's environment.
TEST(SlurmCgroupTree, V1TreeIsSlurm2205s) {
  Scenario s = testing::parse_ok(kScenario);
  fs::path dir = fresh_dir("cg-v1-2205");
  auto tree = ProcfsTree::open(dir, s, 5 * S, {}, SlurmCgroupLayout::kV1);
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  const fs::path job7 = dir / kCgroupRoot / "devices/slurm_node0/uid_2000/job_7";

  ASSERT_TRUE((*tree)->sync(15 * S).ok());  // step 0 runs
  EXPECT_EQ(entries(job7), (std::set<std::string>{"cgroup.procs", "devices.list", "step_batch", "step_0"}));
  for (const char* level : {"", "/step_batch", "/step_batch/task_0", "/step_0", "/step_0/task_0"}) {
    EXPECT_EQ(read(job7.string() + level + "/devices.list"), "a *:* rwm\n") << level;
  }
  EXPECT_EQ(read(job7 / "cgroup.procs"), "");
  EXPECT_EQ(read(job7 / "step_batch/cgroup.procs"), "");
  EXPECT_EQ(read(job7 / "step_batch/task_0/cgroup.procs"), "4000001\n");
  EXPECT_EQ(read(job7 / "step_0/task_0/cgroup.procs"), "30\n");
  const std::string cgroup = read(dir / "proc/4000001/cgroup");
  EXPECT_EQ(cgroup.substr(0, cgroup.find('\n')), "12:devices:/slurm_node0/uid_2000/job_7/step_batch/task_0");
  EXPECT_EQ(read_back(dir), (std::vector<SlurmJobGpus>{{"7", "2000", {"2", "3"}, "cgroup-v1-environ"}}));

  ASSERT_TRUE((*tree)->sync(25 * S).ok());  // between steps
  EXPECT_EQ(entries(job7), (std::set<std::string>{"cgroup.procs", "devices.list", "step_batch"}));
  ASSERT_TRUE((*tree)->sync(60 * S).ok());
  EXPECT_EQ(read_back(dir), (std::vector<SlurmJobGpus>{{"7", "2000", {"2", "3"}, "cgroup-v1-environ"},
                                                       {"8", "2001", {"3"}, "cgroup-v1-environ"}}));
  ASSERT_TRUE((*tree)->sync(70 * S).ok());
  EXPECT_FALSE(fs::exists(dir / kCgroupRoot / "devices/slurm_node0/uid_2001/job_8"));
  EXPECT_EQ(entries(dir / kCgroupRoot / "devices/slurm_node0/uid_2001"), (std::set<std::string>{}));
  // Without the variables allow-listed, the jobs' GPUs are not known: `a *:* rwm` does not say.
  auto r = read_slurm_job_gpus(
      SlurmCgroupOptions{(dir / kCgroupRoot).string(), (dir / "proc").string(), {"GPUMETER_PROJECT"}});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->jobs.empty());
}

// An older Slurm's form, kept as an explicit variant: the job's devices.list names its GPUs.
TEST(SlurmCgroupTree, V1WhitelistTreeListsEachJobsGpus) {
  Scenario s = testing::parse_ok(kScenario);
  fs::path dir = fresh_dir("cg-v1");
  auto tree = ProcfsTree::open(dir, s, 5 * S, {}, SlurmCgroupLayout::kV1Whitelist);
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  ASSERT_TRUE((*tree)->sync(60 * S).ok());
  const fs::path slurm = dir / kCgroupRoot / "devices/slurm";
  EXPECT_EQ(read(slurm / "uid_2000/job_7/devices.list"), "c 195:2 rwm\nc 195:3 rwm\nc 195:254 rwm\nc 195:255 rwm\n");
  EXPECT_EQ(read_back(dir), (std::vector<SlurmJobGpus>{{"7", "2000", {"2", "3"}, "cgroup-v1-devices"},
                                                       {"8", "2001", {"3"}, "cgroup-v1-devices"}}));
  ASSERT_TRUE((*tree)->sync(70 * S).ok());
  EXPECT_FALSE(fs::exists(slurm / "uid_2001/job_8"));
  EXPECT_EQ(entries(slurm / "uid_2001"), (std::set<std::string>{}));  // no .old or .tmp left
}

TEST(SlurmCgroupTree, AnEarlierWritersJobsAreTakenOver) {
  Scenario s = testing::parse_ok(kScenario);
  fs::path dir = fresh_dir("cg-takeover");
  const fs::path scope = dir / kCgroupRoot / "system.slice/slurmstepd.scope";
  fs::create_directories(scope / "job_7/step_9/user/task_0");
  std::ofstream(scope / "job_7/step_9/user/task_0/cgroup.procs") << "999\n";
  fs::create_directories(scope / "job_99");
  fs::create_directories(scope / ".job_5.tmp");
  fs::create_directories(scope / "system");  // not a job: left alone
  auto tree = ProcfsTree::open(dir, s, 5 * S, {}, SlurmCgroupLayout::kV2);
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  EXPECT_EQ(entries(scope), (std::set<std::string>{"job_7", "job_99", "system"}));
  ASSERT_TRUE((*tree)->sync(25 * S).ok());
  EXPECT_EQ(entries(scope), (std::set<std::string>{"job_7", "system"}));
  EXPECT_EQ(entries(scope / "job_7"), (std::set<std::string>{"step_batch"}));  // replaced whole
}

TEST(SlurmCgroupTree, AReaderNeverSeesAJobDirectoryHalfWritten) {
  // Steps start and end (each a whole job directory exchanged in one rename) while the agent's
  // reader runs: it always finds job 7 with its batch script, so always with GPUs 2 and 3.
  for (const auto& [layout, want] :
       {std::pair{SlurmCgroupLayout::kV2, SlurmJobGpus{"7", "", {"2", "3"}, "cgroup-v2-environ"}},
        std::pair{SlurmCgroupLayout::kV1, SlurmJobGpus{"7", "2000", {"2", "3"}, "cgroup-v1-environ"}}}) {
    SCOPED_TRACE(std::string(to_string(layout)));
    Scenario s = testing::parse_ok(kScenario);
    fs::path dir = fresh_dir("cg-atomic");
    auto tree = ProcfsTree::open(dir, s, 5 * S, {}, layout);
    ASSERT_TRUE(tree.ok()) << tree.error().message;
    ASSERT_TRUE((*tree)->sync(15 * S).ok());
    std::atomic<bool> stop{false};
    std::atomic<int> write_errors{0};
    std::thread writer([&] {
      for (int i = 0; !stop.load(); ++i) {
        if (!(*tree)->sync((i % 3 == 0 ? 15 : i % 3 == 1 ? 25 : 35) * S).ok()) ++write_errors;
      }
    });
    int reads = 0, wrong = 0;
    for (; reads < 300; ++reads) {
      auto r = read_slurm_job_gpus(SlurmCgroupOptions{(dir / kCgroupRoot).string(), (dir / "proc").string(), kAllow});
      if (!r.ok() || r->jobs != std::vector<SlurmJobGpus>{want}) ++wrong;
    }
    stop = true;
    writer.join();
    EXPECT_EQ(write_errors.load(), 0);
    EXPECT_EQ(wrong, 0) << "of " << reads << " reads";
  }
}

TEST(SlurmCgroupTree, NotWrittenByDefault) {
  Scenario s = testing::parse_ok(kScenario);
  fs::path dir = fresh_dir("cg-none");
  auto tree = ProcfsTree::open(dir, s, 5 * S);
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  ASSERT_TRUE((*tree)->sync(25 * S).ok());
  EXPECT_EQ((*tree)->slurm_cgroups(), nullptr);
  EXPECT_FALSE(fs::exists(dir / "sys"));
  EXPECT_FALSE((*tree)->present().count(4000001));
}

}  // namespace
}  // namespace gpumeter::sim
