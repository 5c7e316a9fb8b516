// Allocations (`allocations:`): their parsing and checks, and the ground truth under both
// allocation policies on small hand-computed cases.

#include <gtest/gtest.h>

#include <iterator>

#include "sim/truth/truth.h"
#include "sim/truth/truth_scheduler.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

constexpr Micros S = kMicrosPerSecond;

// GPU 0: a notebook pod holds it 10-110 s; its kernel runs 30-50 s at 50 %.
// GPUs 1-2: Slurm job 7 holds both 0-100 s. Step s0 runs on both 10-20 s at 80 %; on GPU 1,
// s1 40-60 s at 60 % and s1b 50-70 s at 20 % (two steps at once 50-60 s). A process outside
// any allocation, rogue, runs on GPU 1 80-120 s at 40 %: shared with the job 80-100 s, alone
// after it.
const std::string kScenario = std::string(testing::kModel) + R"(
gpus: {count: 3, model: m}
allocations:
  - {name: nb, start: 10, end: 110, gpus: [0], uid: 1000,
     kubernetes: {namespace: team-a, pod: notebook, container: jupyter}}
  - {name: sl, end: 100, gpus: [1, 2], uid: 2000, slurm: {job_id: "7"}}
jobs:
  - {name: k, allocation: nb, start: 30, end: 50, gpus: [0], pid: 10, utilization: 0.5}
  - {name: s0, allocation: sl, start: 10, end: 20, gpus: [1, 2], pids: [20, 21], utilization: 0.8}
  - {name: s1, allocation: sl, start: 40, end: 60, gpus: [1], pid: 22, utilization: 0.6}
  - {name: s1b, allocation: sl, start: 50, end: 70, gpus: [1], pid: 23, utilization: 0.2}
  - {name: rogue, start: 80, end: 120, gpus: [1], pid: 30, uid: 1001, utilization: 0.4}
)";

const OwnerTruth* owner(const SchedulerTruth& t, const std::string& name, unsigned gpu) {
  for (const OwnerTruth& o : t.owners) {
    if (o.name == name && o.gpu == gpu) return &o;
  }
  return nullptr;
}

const JobTruth* job(const Truth& t, const std::string& name, unsigned gpu) {
  for (const JobTruth& j : t.jobs) {
    if (j.name == name && j.gpu == gpu) return &j;
  }
  return nullptr;
}

void expect_invariants(const SchedulerTruth& t) {
  const double window = to_seconds(t.to - t.from);
  for (const GpuTruth& g : t.gpus) {
    double allocated = 0, busy = 0;
    for (const OwnerTruth& o : t.owners) {
      if (o.gpu != g.gpu) continue;
      allocated += o.allocated_seconds;
      busy += o.busy_seconds;
      EXPECT_LE(o.idle_allocated_seconds, o.allocated_seconds + 1e-9) << o.name;
    }
    EXPECT_NEAR(allocated + g.idle_seconds, window, 1e-9 * window) << "gpu " << g.gpu;
    EXPECT_NEAR(g.allocated_seconds + g.idle_seconds, window, 1e-9 * window);
    EXPECT_NEAR(busy, g.busy_seconds, 1e-9 * window) << "gpu " << g.gpu;
  }
}

TEST(AllocationParse, JobsTakeTheirPodFromTheAllocation) {
  Scenario s = testing::parse_ok(kScenario);
  ASSERT_EQ(s.allocations.size(), 2u);
  EXPECT_EQ(s.allocations[0].name, "nb");
  EXPECT_EQ(s.allocations[0].start, 10 * S);
  EXPECT_EQ(s.allocations[0].end, 110 * S);
  EXPECT_EQ(s.allocations[0].kubernetes.pod, "notebook");
  EXPECT_EQ(s.allocations[1].slurm_job, "7");
  EXPECT_EQ(s.allocations[1].uid, 2000u);
  EXPECT_EQ(s.allocations[1].gpus, (std::vector<unsigned>{1, 2}));
  EXPECT_EQ(s.jobs[0].allocation, 0u);
  EXPECT_EQ(s.jobs[0].kubernetes.namespace_, "team-a");  // inherited
  EXPECT_EQ(s.jobs[0].kubernetes.container, "jupyter");
  EXPECT_EQ(s.jobs[1].allocation, 1u);
  EXPECT_TRUE(s.jobs[1].kubernetes.empty());
  EXPECT_EQ(s.jobs[4].allocation, kNoAllocation);
}

TEST(AllocationParse, ErrorsNameTheFieldAndWhatIsWrong) {
  const std::string head = std::string(testing::kModel) + "gpus: {count: 2, model: m}\n";
  const std::string pod = "kubernetes: {namespace: a, pod: p, container: c}";
  struct BadCase {
    const char* what;
    std::string yaml;
    std::string expected;  // a part of the message
  };
  const BadCase cases[] = {
      {"GPU out of range", head + "allocations:\n  - {name: x, gpus: [2], " + pod + "}\n",
       "allocations[0].gpus[0]: must be between 0 and 1, got 2"},
      {"GPU twice", head + "allocations:\n  - {name: x, gpus: [1, 1], " + pod + "}\n",
       "allocations[0].gpus[1]: GPU 1 is listed twice"},
      {"no owner", head + "allocations:\n  - {name: x, gpus: [0]}\n",
       "allocations[0]: needs exactly one of 'kubernetes' (a pod's container) or 'slurm' (a Slurm job)"},
      {"two owners", head + "allocations:\n  - {name: x, gpus: [0], slurm: {job_id: '1'}, " + pod + "}\n",
       "allocations[0]: needs exactly one of"},
      {"bad job id", head + "allocations:\n  - {name: x, gpus: [0], slurm: {job_id: 'j1'}}\n",
       "allocations[0].slurm.job_id: expected a Slurm job id (decimal digits), got 'j1'"},
      {"end before start", head + "allocations:\n  - {name: x, start: 5, end: 5, gpus: [0], " + pod + "}\n",
       "allocations[0].end: must be later than start"},
      {"unknown key", head + "allocations:\n  - {name: x, gpus: [0], pid: 3, " + pod + "}\n",
       "allocations[0]: unknown key 'pid'"},
      {"duplicate name",
       head + "allocations:\n  - {name: x, gpus: [0], " + pod + "}\n  - {name: x, gpus: [1], slurm: {job_id: '1'}}\n",
       "allocations[1].name: allocation name 'x' is also used by allocations[0]"},
      {"one container twice at once",
       head + "allocations:\n  - {name: x, end: 10, gpus: [0], " + pod + "}\n  - {name: y, start: 5, gpus: [1], " +
           pod + "}\n",
       "allocations[1]: overlaps allocations[0] ('x'), which names the same container at the same time"},
      {"one Slurm job twice at once",
       head + "allocations:\n  - {name: x, gpus: [0], slurm: {job_id: '1'}}\n  - {name: y, gpus: [1], slurm: {job_id: "
              "'1'}}\n",
       "allocations[1]: overlaps allocations[0] ('x'), which names the same Slurm job at the same time"},
      {"unknown allocation",
       head + "allocations:\n  - {name: x, gpus: [0], " + pod +
           "}\njobs:\n  - {name: j, allocation: z, gpus: [0], pid: 1, utilization: 0.5}\n",
       "jobs[0].allocation: unknown allocation 'z' (allocations: x)"},
      {"job on a GPU its allocation does not hold",
       head + "allocations:\n  - {name: x, gpus: [0], " + pod +
           "}\njobs:\n  - {name: j, allocation: x, gpus: [1], pid: 1, utilization: 0.5}\n",
       "jobs[0]: runs on GPU 1, which its allocation 'x' does not hold"},
      {"job outside its allocation's span",
       head + "allocations:\n  - {name: x, start: 10, end: 20, gpus: [0], slurm: {job_id: '5'}}\njobs:\n"
              "  - {name: j, allocation: x, start: 15, end: 25, gpus: [0], pid: 1, utilization: 0.5}\n",
       "jobs[0]: runs over [15 s, 25 s), outside its allocation 'x' [10 s, 20 s)"},
      {"job with its own pod in a pod's allocation",
       head + "allocations:\n  - {name: x, gpus: [0], " + pod +
           "}\njobs:\n  - {name: j, allocation: x, gpus: [0], pid: 1, " + pod + ", utilization: 0.5}\n",
       "jobs[0]: takes its pod and container from its allocation 'x'; drop 'kubernetes'"},
      {"allocation named as a job",
       head + "allocations:\n  - {name: j, gpus: [0], " + pod +
           "}\njobs:\n  - {name: j, gpus: [1], pid: 1, utilization: 0.5}\n",
       "allocations[0].name: 'j' is also a job's name"},
  };
  for (const BadCase& c : cases) {
    auto s = parse_scenario(c.yaml, "test.yaml");
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_EQ(s.error().message.rfind("test.yaml:", 0), 0u) << c.what << ": " << s.error().message;
    EXPECT_NE(s.error().message.find(c.expected), std::string::npos)
        << c.what << "\n  got:      " << s.error().message << "\n  expected: " << c.expected;
  }
}

TEST(AllocationTruth, SchedulerPolicyHandComputed) {
  Scenario s = testing::parse_ok(kScenario);
  SchedulerTruth t = compute_scheduler_truth(s, 0, 200 * S);
  ASSERT_EQ(t.gpus.size(), 3u);
  // GPU 0: the pod holds it 100 s, its kernel runs 20 of them at 50 %.
  const OwnerTruth* nb = owner(t, "nb", 0);
  ASSERT_NE(nb, nullptr);
  EXPECT_TRUE(nb->is_allocation);
  EXPECT_NEAR(nb->allocated_seconds, 100, 1e-9);
  EXPECT_NEAR(nb->busy_seconds, 10, 1e-9);
  EXPECT_NEAR(nb->idle_allocated_seconds, 80, 1e-9);
  EXPECT_NEAR(t.gpus[0].allocated_seconds, 100, 1e-9);
  EXPECT_NEAR(t.gpus[0].idle_seconds, 100, 1e-9);
  EXPECT_NEAR(t.gpus[0].idle_energy_joules, 100 * 50, 1e-6);  // idle 0-10 s and 110-200 s at 50 W
  EXPECT_EQ(t.foreign_seconds[0], 0);
  // GPU 1: the job alone 0-80 s (its steps run 10-20 and 40-70), shared equally with rogue
  // 80-100 s, rogue alone 100-120 s.
  const OwnerTruth* sl1 = owner(t, "sl", 1);
  ASSERT_NE(sl1, nullptr);
  EXPECT_NEAR(sl1->allocated_seconds, 80 + 10, 1e-9);
  EXPECT_NEAR(sl1->idle_allocated_seconds, 40 + 10, 1e-9);
  // s0 10 s at 80 %, s1 10 s at 60 %, both s1 and s1b 10 s at 80 % together, s1b 10 s at 20 %.
  EXPECT_NEAR(sl1->busy_seconds, 8 + 6 + 8 + 2, 1e-9);
  const OwnerTruth* rogue = owner(t, "rogue", 1);
  ASSERT_NE(rogue, nullptr);
  EXPECT_FALSE(rogue->is_allocation);
  EXPECT_NEAR(rogue->allocated_seconds, 10 + 20, 1e-9);
  EXPECT_NEAR(rogue->busy_seconds, 40 * 0.4, 1e-9);
  EXPECT_EQ(rogue->idle_allocated_seconds, 0);
  EXPECT_NEAR(t.gpus[1].allocated_seconds, 120, 1e-9);
  EXPECT_NEAR(t.gpus[1].idle_seconds, 80, 1e-9);
  EXPECT_NEAR(t.foreign_seconds[1], 20, 1e-9);
  // GPU 2: the job holds it 100 s, s0 runs on it 10 s.
  const OwnerTruth* sl2 = owner(t, "sl", 2);
  ASSERT_NE(sl2, nullptr);
  EXPECT_NEAR(sl2->allocated_seconds, 100, 1e-9);
  EXPECT_NEAR(sl2->idle_allocated_seconds, 90, 1e-9);
  EXPECT_NEAR(sl2->busy_seconds, 8, 1e-9);
  // Only owners: no entry for the steps themselves.
  EXPECT_EQ(owner(t, "s0", 1), nullptr);
  EXPECT_EQ(owner(t, "k", 0), nullptr);
  ASSERT_EQ(t.owners.size(), 4u);  // nb, sl on GPUs 1 and 2, then rogue: allocations first
  EXPECT_EQ(t.owners[0].name, "nb");
  EXPECT_EQ(t.owners[3].name, "rogue");
  expect_invariants(t);
}

TEST(AllocationTruth, ProcessPolicyIgnoresAllocations) {
  Scenario s = testing::parse_ok(kScenario);
  Truth t = compute_truth(s, 0, 200 * S);
  EXPECT_NEAR(t.gpus[0].allocated_seconds, 20, 1e-9);  // only while the kernel runs
  EXPECT_NEAR(t.gpus[0].idle_seconds, 180, 1e-9);
  EXPECT_NEAR(t.gpus[1].allocated_seconds, 10 + 30 + 40, 1e-9);
  ASSERT_NE(job(t, "s1", 1), nullptr);
  EXPECT_NEAR(job(t, "s1", 1)->allocated_seconds, 10 + 5, 1e-9);  // shares 50-60 s with s1b
  EXPECT_NEAR(job(t, "s1b", 1)->allocated_seconds, 5 + 10, 1e-9);
  EXPECT_NEAR(job(t, "rogue", 1)->allocated_seconds, 40, 1e-9);
  EXPECT_EQ(job(t, "k", 0)->kubernetes.pod, "notebook");  // the pod its allocation names
}

TEST(AllocationTruth, WindowsCutAllocationsAndTile) {
  Scenario s = testing::parse_ok(kScenario);
  SchedulerTruth first = compute_scheduler_truth(s, 0, 85 * S);
  SchedulerTruth second = compute_scheduler_truth(s, 85 * S, 200 * S);
  EXPECT_NEAR(owner(first, "sl", 1)->allocated_seconds, 80 + 2.5, 1e-9);
  EXPECT_NEAR(owner(second, "sl", 1)->allocated_seconds, 7.5, 1e-9);
  EXPECT_NEAR(owner(first, "nb", 0)->idle_allocated_seconds + owner(second, "nb", 0)->idle_allocated_seconds, 80, 1e-9);
  expect_invariants(first);
  expect_invariants(second);
}

TEST(AllocationTruth, WithoutAllocationsBothPoliciesAgree) {
  for (const char* name : {"h100-8x-three-teams.yaml", "bench-8x-64proc.yaml"}) {
    auto s = load_scenario(std::string(GPUMETER_SOURCE_DIR) + "/deploy/scenarios/" + name);
    ASSERT_TRUE(s.ok()) << s.error().message;
    Truth p = compute_truth(*s, 100 * S, 5000 * S);
    SchedulerTruth q = compute_scheduler_truth(*s, 100 * S, 5000 * S);
    ASSERT_EQ(p.jobs.size(), q.owners.size()) << name;
    for (std::size_t i = 0; i < p.jobs.size(); ++i) {
      EXPECT_EQ(q.owners[i].name, p.jobs[i].name);
      EXPECT_EQ(q.owners[i].gpu, p.jobs[i].gpu);
      EXPECT_NEAR(q.owners[i].allocated_seconds, p.jobs[i].allocated_seconds, 1e-6);
      EXPECT_NEAR(q.owners[i].busy_seconds, p.jobs[i].busy_seconds, 1e-6);
      EXPECT_EQ(q.owners[i].idle_allocated_seconds, 0);
    }
    for (std::size_t g = 0; g < p.gpus.size(); ++g) {
      EXPECT_NEAR(q.gpus[g].idle_seconds, p.gpus[g].idle_seconds, 1e-6);
      EXPECT_NEAR(q.gpus[g].idle_energy_joules, p.gpus[g].idle_energy_joules, 1e-6);
      EXPECT_EQ(q.foreign_seconds[g], 0);
    }
    expect_invariants(q);
  }
}

TEST(AllocationTruth, TheAcceptanceScenario) {
  auto s = load_scenario(std::string(GPUMETER_SOURCE_DIR) + "/tests/integration/scenarios/allocations.yaml");
  ASSERT_TRUE(s.ok()) << s.error().message;
  SchedulerTruth t = compute_scheduler_truth(*s, 0, s->duration);
  struct Want {
    const char* name;
    unsigned gpu;
    double allocated, idle_allocated, busy;
  };
  const Want wants[] = {
      {"jupyter-alice", 0, 56, 46, 4},      {"slurm-51300", 1, 48, 22, 12 * 0.7 + 14 * 0.5},
      {"slurm-51300", 2, 46, 34, 12 * 0.7}, {"eval-a", 3, 28, 4.5, 3 + 7.5 + 1.5},
      {"asr-b", 3, 26, 13.5, 10},           {"bypass-bob", 2, 2, 0, 4 * 0.9},
  };
  ASSERT_EQ(t.owners.size(), std::size(wants));
  for (const Want& w : wants) {
    const OwnerTruth* o = owner(t, w.name, w.gpu);
    ASSERT_NE(o, nullptr) << w.name;
    EXPECT_NEAR(o->allocated_seconds, w.allocated, 1e-9) << w.name;
    EXPECT_NEAR(o->idle_allocated_seconds, w.idle_allocated, 1e-9) << w.name;
    EXPECT_NEAR(o->busy_seconds, w.busy, 1e-9) << w.name;
  }
  EXPECT_NEAR(t.foreign_seconds[2], 4, 1e-9);
  EXPECT_NEAR(t.gpus[4].idle_seconds, 60, 1e-9);
  expect_invariants(t);
}

}  // namespace
}  // namespace gpumeter::sim
