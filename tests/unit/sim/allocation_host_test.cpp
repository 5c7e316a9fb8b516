// Allocations on the simulated node's host side: the kubelet lists a pod's allocation with or
// without a process; the HPC job-mapping directory shows each Slurm job's GPUs over its span.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "attribution/hpc_jobs.h"
#include "sim/host/procfs_writer.h"
#include "sim/host/sim_kubelet.h"
#include "sim/host/slurm_tree.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

namespace fs = std::filesystem;
using testing::entries;
using testing::fresh_dir;
constexpr auto read = testing::read_file;
constexpr Micros S = kMicrosPerSecond;

// GPU 0: a notebook pod holds it 10-110 s, its kernel runs 30-50 s. GPU 1: time-sliced by a pod
// allocation (20-60 s, no process) and a plain pod job (40-80 s). GPUs 2-3: Slurm jobs 7
// (0-100 s, GPUs 2-3) and 8 (50-70 s, GPU 3), with one step of job 7.
const std::string kScenario = std::string(testing::kModel) + R"(
gpus:
  - {model: m, uuid: GPU-0}
  - {model: m, uuid: GPU-1}
  - {model: m, uuid: GPU-2}
  - {model: m, uuid: GPU-3}
duration: 200
allocations:
  - {name: nb, start: 10, end: 110, gpus: [0], kubernetes: {namespace: team-a, pod: notebook, container: jupyter}}
  - {name: idle-pod, start: 20, end: 60, gpus: [1], kubernetes: {namespace: team-b, pod: waiting, container: main}}
  - {name: job7, end: 100, gpus: [2, 3], uid: 2000, slurm: {job_id: "7"}}
  - {name: job8, start: 50, end: 70, gpus: [3], uid: 2001, slurm: {job_id: "8"}}
jobs:
  - {name: k, allocation: nb, start: 30, end: 50, gpus: [0], pid: 10, utilization: 0.5}
  - {name: busy-pod, start: 40, end: 80, gpus: [1], pid: 20, utilization: 0.5,
     kubernetes: {namespace: team-c, pod: server, container: app}}
  - {name: step0, allocation: job7, start: 10, end: 20, gpus: [2], pid: 30, utilization: 0.8}
)";

std::string listing(const std::vector<kubelet::PodResources>& pods) {
  std::string s;
  for (const auto& p : pods) {
    s += p.namespace_ + "/" + p.name + ":";
    for (const auto& c : p.containers) {
      s += " " + c.name + "[";
      for (const auto& d : c.devices) {
        s += d.resource_name + "=";
        for (const auto& id : d.device_ids) s += id + " ";
      }
      s += "]";
    }
    s += "\n";
  }
  return s;
}

TEST(AllocationKubelet, APodsAllocationIsListedOverItsSpanWithOrWithoutAProcess) {
  Scenario s = testing::parse_ok(kScenario);
  SimKubelet k(s, 5 * S);
  auto at = [&](double seconds) { return listing(k.pods_at(static_cast<Micros>(seconds * S))); };
  EXPECT_EQ(at(9.999999), "");
  // From the allocation's start, no lead, with no process yet.
  EXPECT_EQ(at(10), "team-a/notebook: jupyter[nvidia.com/gpu=GPU-0 ]\n");
  EXPECT_EQ(at(35),  // the kernel runs in the notebook's one container
            "team-a/notebook: jupyter[nvidia.com/gpu=GPU-0 ]\n"
            "team-b/waiting: main[nvidia.com/gpu=GPU-1::0 ]\n"
            "team-c/server: app[nvidia.com/gpu=GPU-1::1 ]\n");
  // The kernel's own lead does not outlive the allocation, nor make a second container.
  EXPECT_EQ(at(109.999999), "team-a/notebook: jupyter[nvidia.com/gpu=GPU-0 ]\n");
  EXPECT_EQ(at(110), "");
  // GPU 1 is held by the idle pod and the serving pod at once (40-60 s): time-sliced, so both
  // are replicas; the allocation came first and has replica 0.
  EXPECT_TRUE(k.time_sliced(1));
  EXPECT_FALSE(k.time_sliced(0));
  EXPECT_EQ(at(30),
            "team-a/notebook: jupyter[nvidia.com/gpu=GPU-0 ]\n"
            "team-b/waiting: main[nvidia.com/gpu=GPU-1::0 ]\n");
  EXPECT_EQ(at(59),
            "team-a/notebook: jupyter[nvidia.com/gpu=GPU-0 ]\n"
            "team-b/waiting: main[nvidia.com/gpu=GPU-1::0 ]\n"
            "team-c/server: app[nvidia.com/gpu=GPU-1::1 ]\n");
  EXPECT_EQ(at(60),
            "team-a/notebook: jupyter[nvidia.com/gpu=GPU-0 ]\n"
            "team-c/server: app[nvidia.com/gpu=GPU-1::1 ]\n");
  EXPECT_EQ(at(84.999999),  // the plain job keeps its lead
            "team-a/notebook: jupyter[nvidia.com/gpu=GPU-0 ]\n"
            "team-c/server: app[nvidia.com/gpu=GPU-1::1 ]\n");
  EXPECT_EQ(at(85), "team-a/notebook: jupyter[nvidia.com/gpu=GPU-0 ]\n");
}

TEST(AllocationHpcJobs, EachGpusJobsOverTheirAllocations) {
  Scenario s = testing::parse_ok(kScenario);
  using M = std::map<unsigned, std::vector<std::string>>;
  EXPECT_EQ(hpc_jobs_at(s, -5 * S), (M{{2, {"7"}}, {3, {"7"}}}));  // before the epoch: time 0
  EXPECT_EQ(hpc_jobs_at(s, 30 * S), (M{{2, {"7"}}, {3, {"7"}}}));  // between steps: still held
  EXPECT_EQ(hpc_jobs_at(s, 50 * S), (M{{2, {"7"}}, {3, {"7", "8"}}}));
  EXPECT_EQ(hpc_jobs_at(s, 99 * S), (M{{2, {"7"}}, {3, {"7"}}}));
  EXPECT_EQ(hpc_jobs_at(s, 100 * S), M{});
  EXPECT_EQ(hpc_jobs_file({"7", "8"}), "7\n8\n");
}

TEST(AllocationHpcJobs, TheTreeIsWhatTheAgentReads) {
  Scenario s = testing::parse_ok(kScenario);
  fs::path dir = fresh_dir("hpc");
  fs::create_directories(dir / kHpcJobsDir);
  std::ofstream(dir / kHpcJobsDir / "1") << "999\n";      // left by an earlier run
  std::ofstream(dir / kHpcJobsDir / ".3.tmp") << "half";  // an unfinished write
  std::ofstream(dir / kHpcJobsDir / "notes.txt") << "x";  // not a mapping file: left alone
  auto tree = ProcfsTree::open(dir, s, 5 * S);
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  ASSERT_NE((*tree)->hpc_jobs(), nullptr);
  EXPECT_EQ(entries(dir / kHpcJobsDir), (std::set<std::string>{"1", "notes.txt"}));

  ASSERT_TRUE((*tree)->sync(55 * S).ok());
  EXPECT_EQ(entries(dir / kHpcJobsDir), (std::set<std::string>{"2", "3", "notes.txt"}));
  EXPECT_EQ(read(dir / kHpcJobsDir / "3"), "7\n8\n");
  auto mapping = read_hpc_job_mapping((dir / kHpcJobsDir).string());
  ASSERT_TRUE(mapping.ok()) << mapping.error().message;
  EXPECT_EQ(hpc_jobs_for_gpu(*mapping, 3, "GPU-3"), (std::vector<std::string>{"7", "8"}));
  EXPECT_EQ(hpc_jobs_for_gpu(*mapping, 2, "GPU-2"), (std::vector<std::string>{"7"}));
  EXPECT_TRUE(hpc_jobs_for_gpu(*mapping, 0, "GPU-0").empty());

  ASSERT_TRUE((*tree)->sync(80 * S).ok());  // job 8 ended: GPU 3's file rewritten
  EXPECT_EQ(read(dir / kHpcJobsDir / "3"), "7\n");
  ASSERT_TRUE((*tree)->sync(100 * S).ok());  // job 7 ended: its files removed
  EXPECT_EQ(entries(dir / kHpcJobsDir), (std::set<std::string>{"notes.txt"}));
  EXPECT_EQ((*tree)->next_change_after(0), 10 * S - 5 * S);  // step0's pid, 5 s ahead
  EXPECT_EQ((*tree)->next_change_after(20 * S), 25 * S);     // step0's pid goes
  EXPECT_EQ((*tree)->next_change_after(25 * S), 35 * S);     // busy-pod's pid comes
  EXPECT_EQ((*tree)->next_change_after(35 * S), 50 * S);     // job 8 starts: only the mapping changes
  EXPECT_EQ((*tree)->hpc_jobs()->next_change_after(70 * S), 100 * S);
}

TEST(AllocationHpcJobs, NoDirectoryWithoutSlurmAllocations) {
  Scenario s = testing::parse_ok(std::string(testing::kModel) + R"(
gpus: {count: 1, model: m}
allocations:
  - {name: nb, gpus: [0], kubernetes: {namespace: a, pod: p, container: c}}
)");
  fs::path dir = fresh_dir("no-hpc");
  auto tree = ProcfsTree::open(dir, s, 5 * S);
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  ASSERT_TRUE((*tree)->sync(0).ok());
  EXPECT_EQ((*tree)->hpc_jobs(), nullptr);
  EXPECT_FALSE(fs::exists(dir / "run"));
}

}  // namespace
}  // namespace gpumeter::sim
