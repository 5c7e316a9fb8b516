// Ground truth: hand-computed values, the three invariants, window tiling and determinism.

#include "sim/truth/truth.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace gpumeter::sim {
namespace {

constexpr Micros S = kMicrosPerSecond;

// GPU 0: a (50%) on [10, 110) and b (square 80%/20%, 5 s high per 20 s) on [60, 160);
// GPU 1: b only; GPU 2: c at 0% on [0, 50) (present but idle).
const std::string kScenario = std::string(testing::kModel) + R"(
gpus: {count: 3, model: m}
jobs:
  - {name: a, start: 10, end: 110, gpus: [0], pid: 100, uid: 1000, cgroup: /a, env: {P: x}, memory: 1GiB,
     utilization: 0.5}
  - name: b
    start: 60
    end: 160
    gpus: [0, 1]
    pids: [200, 201]
    uid: 2000
    memory: 2GiB
    utilization: {pattern: square, high: 0.8, low: 0.2, period: 20, duty: 0.25}
  - {name: c, end: 50, gpus: [2], pid: 300, utilization: 0}
)";

const JobTruth* find(const Truth& t, const std::string& name, unsigned gpu) {
  for (const JobTruth& j : t.jobs) {
    if (j.name == name && j.gpu == gpu) return &j;
  }
  return nullptr;
}

void expect_invariants(const Scenario& s, const Truth& t) {
  const double window = to_seconds(t.to - t.from);
  for (const GpuTruth& g : t.gpus) {
    double allocated = 0, busy = 0, energy = 0;
    for (const JobTruth& j : t.jobs) {
      if (j.gpu != g.gpu) continue;
      allocated += j.allocated_seconds;
      busy += j.busy_seconds;
      energy += j.energy_joules;
    }
    const double tol = 1e-9 * std::max(1.0, window);
    EXPECT_NEAR(allocated + g.idle_seconds, window, tol) << s.source << " gpu " << g.gpu;
    EXPECT_NEAR(g.allocated_seconds + g.idle_seconds, window, tol);
    EXPECT_NEAR(busy, g.busy_seconds, tol) << "gpu " << g.gpu;
    EXPECT_NEAR(energy + g.idle_energy_joules, g.energy_joules, 1e-9 * std::max(1.0, g.energy_joules));
  }
}

TEST(Truth, HandComputedValues) {
  Scenario s = testing::parse_ok(kScenario);
  Truth t = compute_truth(s, 0, 200 * S);
  ASSERT_EQ(t.gpus.size(), 3u);
  const GpuTruth& g0 = t.gpus[0];
  EXPECT_NEAR(g0.busy_seconds, 25 + 39.5 + 16, 1e-9);
  EXPECT_NEAR(g0.energy_joules, 50 * 200 + 200 * 80.5, 1e-6);
  EXPECT_NEAR(g0.allocated_seconds, 150, 1e-9);
  EXPECT_NEAR(g0.idle_seconds, 50, 1e-9);
  EXPECT_NEAR(g0.idle_energy_joules, 50 * 50, 1e-6);
  EXPECT_NEAR(g0.memory_byte_seconds, (100.0 * 1 + 100.0 * 2) * (1ULL << 30), 1);
  EXPECT_NEAR(t.gpus[1].busy_seconds, 35, 1e-9);

  const JobTruth* a = find(t, "a", 0);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->pid, 100u);
  EXPECT_EQ(a->uid, 1000u);
  EXPECT_EQ(a->cgroup, "/a");
  ASSERT_EQ(a->env.size(), 1u);
  EXPECT_NEAR(a->allocated_seconds, 50 + 25, 1e-9);  // alone for 50 s, shared with b for 50 s
  // Alone: 25 busy seconds. Shared, 5 s of every 20 at 100% split 50:80, 15 s at 70% split 50:20.
  // Two whole periods, then [100, 110) with 5 s high and 5 s low.
  const double a_shared = 2 * (5 * 50.0 / 130 + 15 * 0.5) + (5 * 50.0 / 130 + 5 * 0.5);
  EXPECT_NEAR(a->busy_seconds, 25 + a_shared, 1e-9);
  EXPECT_NEAR(a->memory_byte_seconds, 100.0 * (1ULL << 30), 1);
  const JobTruth* b1 = find(t, "b", 1);
  ASSERT_NE(b1, nullptr);
  EXPECT_EQ(b1->pid, 201u);
  EXPECT_NEAR(b1->energy_joules, 50 * 100 + 200 * 35, 1e-6);

  // A present job at 0% still holds the GPU: allocated, never busy, idle power only.
  const JobTruth* c = find(t, "c", 2);
  ASSERT_NE(c, nullptr);
  EXPECT_NEAR(c->allocated_seconds, 50, 1e-9);
  EXPECT_EQ(c->busy_seconds, 0);
  EXPECT_NEAR(c->energy_joules, 50 * 50, 1e-9);
  EXPECT_NEAR(t.gpus[2].idle_seconds, 150, 1e-9);

  expect_invariants(s, t);
}

TEST(Truth, InvariantsHoldForTheDeployScenarios) {
  for (const char* name : {"h100-8x-three-teams.yaml", "faults-demo.yaml", "bench-8x-64proc.yaml"}) {
    auto s = load_scenario(std::string(GPUMETER_SOURCE_DIR) + "/deploy/scenarios/" + name);
    ASSERT_TRUE(s.ok()) << s.error().message;
    for (auto [from, to] : {std::pair<Micros, Micros>{0, 7200 * S}, {1234 * S + 567, 4321 * S}}) {
      expect_invariants(*s, compute_truth(*s, from, to));
    }
  }
}

TEST(Truth, ThreeTeamsScenarioHasEveryKindOfUse) {
  auto s = load_scenario(std::string(GPUMETER_SOURCE_DIR) + "/deploy/scenarios/h100-8x-three-teams.yaml");
  ASSERT_TRUE(s.ok()) << s.error().message;
  Truth t = compute_truth(*s, 0, s->duration);
  ASSERT_EQ(t.gpus.size(), 8u);
  for (const GpuTruth& g : t.gpus) {
    EXPECT_GT(g.busy_seconds, 0) << g.gpu;
    EXPECT_GT(g.idle_seconds, 0) << g.gpu;  // every GPU is idle part of the time
  }
  EXPECT_NEAR(t.gpus[0].busy_seconds, 6300 * 0.95, 1e-6);
  int on_gpu6 = 0;
  for (const JobTruth& j : t.jobs) on_gpu6 += j.gpu == 6;
  EXPECT_EQ(on_gpu6, 2);  // time-sliced by two pods
}

TEST(Truth, ConsecutiveWindowsTile) {
  Scenario s = testing::parse_ok(kScenario);
  Truth whole = compute_truth(s, 0, 200 * S);
  Truth first = compute_truth(s, 0, 73 * S + 5);
  Truth second = compute_truth(s, 73 * S + 5, 200 * S);
  for (unsigned g = 0; g < 3; ++g) {
    EXPECT_NEAR(first.gpus[g].energy_joules + second.gpus[g].energy_joules, whole.gpus[g].energy_joules, 1e-6);
    EXPECT_NEAR(first.gpus[g].busy_seconds + second.gpus[g].busy_seconds, whole.gpus[g].busy_seconds, 1e-9);
  }
}

TEST(Truth, IsDeterministic) {
  auto s = load_scenario(std::string(GPUMETER_SOURCE_DIR) + "/deploy/scenarios/h100-8x-three-teams.yaml");
  ASSERT_TRUE(s.ok());
  Truth a = compute_truth(*s, 100 * S, 7000 * S);
  Truth b = compute_truth(*s, 100 * S, 7000 * S);
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (std::size_t i = 0; i < a.gpus.size(); ++i) {
    EXPECT_EQ(a.gpus[i].energy_joules, b.gpus[i].energy_joules);
    EXPECT_EQ(a.gpus[i].busy_seconds, b.gpus[i].busy_seconds);
  }
  for (std::size_t i = 0; i < a.jobs.size(); ++i) {
    EXPECT_EQ(a.jobs[i].name, b.jobs[i].name);
    EXPECT_EQ(a.jobs[i].energy_joules, b.jobs[i].energy_joules);
    EXPECT_EQ(a.jobs[i].busy_seconds, b.jobs[i].busy_seconds);
  }
}

}  // namespace
}  // namespace gpumeter::sim
