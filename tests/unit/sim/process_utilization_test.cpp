// Per-process records of the model at exact scenario times: the per-process grid, the window
// each record averages over, and which processes get one.

#include "sim/physics/process_utilization.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sim/physics/gpu_sim.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

constexpr Micros S = kMicrosPerSecond;
constexpr Micros P = 200'000;

// The last point of a process's sample grid at or before t: where the period of its first
// sample after t begins.
Micros grid_at_or_before(std::uint32_t pid, Micros t) {
  const Micros phase = process_phase(pid, P);
  return phase + ((t - phase) / P) * P - ((t - phase) % P < 0 ? P : 0);
}

// GPU 0: "x" at 60% on [1, 3), "y" at 40% from 2.5 s; "z" present at 0% throughout.
const std::string kScenario = std::string(testing::kModel) + R"(
gpus: {count: 1, model: m}
jobs:
  - {name: x, gpus: [0], pid: 11, start: 1, end: 3, utilization: 0.6}
  - {name: y, gpus: [0], pid: 12, start: 2.5, utilization: 0.4}
  - {name: z, gpus: [0], pid: 13, utilization: 0}
)";

TEST(ProcessUtilization, PhaseIsAFixedWholeMicrosecondOffset) {
  for (std::uint32_t pid : {1U, 2U, 4242U, 4194304U}) {
    const Micros phase = process_phase(pid, P);
    EXPECT_GE(phase, 0);
    EXPECT_LT(phase, P);
    EXPECT_EQ(phase, process_phase(pid, P));
  }
  EXPECT_NE(process_phase(1, P), process_phase(2, P));
}

TEST(ProcessUtilization, RecordsAverageOverTheSamplesOfTheProcesssLife) {
  Scenario s = testing::parse_ok(kScenario);
  SimGpu gpu(s, 0);
  const Micros now = 5 * S + 123'457;
  const auto records = gpu.process_records(now, 0, false);
  ASSERT_EQ(records.size(), 2u);  // z never had a share
  for (const ProcessRecord& r : records) {
    EXPECT_EQ((r.time - process_phase(r.pid, P)) % P, 0);
  }
  // Each is sampled from the period in which it started: x at 1 s, y at 2.5 s. The time
  // before is no part of its average.
  EXPECT_EQ(records[0].window_start, grid_at_or_before(11, 1 * S));
  EXPECT_EQ(records[1].window_start, grid_at_or_before(12, 2 * S + 500'000));
  // x: alone at 60% on [1, 2.5), then 60:40 of 100% on [2.5, 3). It ended at 3 s, so its
  // record carries its last sample before then, not one near now.
  const ProcessRecord& x = records[0];
  EXPECT_EQ(x.pid, 11u);
  EXPECT_LT(x.time, 3 * S);
  EXPECT_GE(x.time, 3 * S - P);
  // y still runs: its last sample is the last of its grid at or before now.
  EXPECT_LE(records[1].time, now);
  EXPECT_GT(records[1].time, now - P);
  const double x_busy = 0.6 * 1.5 + 0.6 * (to_seconds(x.time) - 2.5);
  EXPECT_EQ(x.sm_percent, static_cast<unsigned>(std::lround(100 * x_busy / to_seconds(x.time - x.window_start))));
  // y: 40:60 of 100% on [2.5, 3), then 40% alone until its sample time.
  const ProcessRecord& y = records[1];
  EXPECT_EQ(y.pid, 12u);
  const double y_busy = 0.4 * 0.5 + 0.4 * (to_seconds(y.time) - 3);
  EXPECT_EQ(y.sm_percent, static_cast<unsigned>(std::lround(100 * y_busy / to_seconds(y.time - y.window_start))));

  // Since 4 s: x did not run, y did at 40% all along. y's first sample after 4 s measured the
  // period that began at its grid point at or before 4 s.
  const auto later = gpu.process_records(now, 4 * S, false);
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0].pid, 12u);
  EXPECT_EQ(later[0].window_start, grid_at_or_before(12, 4 * S));
  EXPECT_GT(later[0].window_start, 4 * S - P);
  EXPECT_EQ(later[0].sm_percent, 40u);
  EXPECT_EQ(later[0].memory_percent, 24u);
  // Since its own sample time: nothing new.
  EXPECT_TRUE(gpu.process_records(now, y.time, false).empty());
}

TEST(ProcessUtilization, AProcessThatStartsAfterItsSampleHasNothingYet) {
  Scenario s = testing::parse_ok(kScenario);
  SimGpu gpu(s, 0);
  // Just before y's first sample after its start at 2.5 s, y has run but no sample of it
  // measured that yet: no record for it.
  const Micros start = 2 * S + 500'000;
  Micros next_sample = process_phase(12, P);
  while (next_sample <= start + 1) next_sample += P;
  const auto records = gpu.process_records(next_sample - 1, 2 * S, false);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].pid, 11u);
  EXPECT_EQ(records[0].sm_percent, 60u);
  // At its next sample the record holds its share over the period in which it started.
  const auto after = gpu.process_records(next_sample, 2 * S, false);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[1].pid, 12u);
  EXPECT_EQ(after[1].time, next_sample);
  EXPECT_EQ(after[1].window_start, grid_at_or_before(12, start));
  EXPECT_EQ(after[1].window_start, next_sample - P);
  const double busy = 0.4 * to_seconds(next_sample - start);
  EXPECT_EQ(after[1].sm_percent,
            static_cast<unsigned>(std::lround(100 * busy / to_seconds(next_sample - after[1].window_start))));
}

TEST(ProcessUtilization, HistoryEndsWithTheUtilizationBuffer) {
  Scenario s = testing::parse_ok(kScenario);
  SimGpu gpu(s, 0);
  // At 23.3 s the buffer covers [3.2 s, ...): x ended at 3 s.
  const auto records = gpu.process_records(23 * S + 300'000, 0, false);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].pid, 12u);
  EXPECT_EQ(records[0].window_start, grid_at_or_before(12, 3 * S + 200'000));
  EXPECT_EQ(records[0].sm_percent, 40u);
}

// GPU 0: "b" bursts to 50% on [1, 2) and [4, 5), idle between; "s" at 30% throughout.
const std::string kBursty = std::string(testing::kModel) + R"(
gpus: {count: 1, model: m}
jobs:
  - {name: b, gpus: [0], pid: 21, start: 0, utilization: {pattern: trace, points: [[0, 0], [1, 0.5], [2, 0], [4, 0.5], [5, 0]]}}
  - {name: s, gpus: [0], pid: 22, start: 0, utilization: 0.3}
)";

TEST(ProcessUtilization, ActiveOnlySamplesAverageTheActivePeriodsAndStampTheLastOne) {
  Scenario s = testing::parse_ok(kBursty);
  SimGpu gpu(s, 0);
  const Micros now = 3 * S + 500'000;
  // Over the whole window: the window variant averages b's idle time in, the active-only
  // variant does not, and stamps b's last active sample, over a second before now.
  const auto window = gpu.process_records(now, 0, false);
  const auto active = gpu.process_records(now, 0, true);
  ASSERT_EQ(window.size(), 2u);
  ASSERT_EQ(active.size(), 2u);
  const ProcessRecord& b = active[0];
  EXPECT_EQ(b.pid, 21u);
  EXPECT_LT(window[0].sm_percent, 30u);
  EXPECT_GT(window[0].time, now - P);
  // Its first and last active samples reach into [1, 2) by a part of a period: the average
  // of whole samples at 50% and two partial ones lies between.
  EXPECT_LE(b.sm_percent, 50u);
  EXPECT_GE(b.sm_percent, 40u);
  EXPECT_GE(b.time, 2 * S);
  EXPECT_LT(b.time, 2 * S + P);
  EXPECT_GT(b.window_start, 1 * S - P);
  EXPECT_LE(b.window_start, 1 * S);
  // The steady process is active in every sample: both variants agree.
  EXPECT_EQ(active[1].pid, 22u);
  EXPECT_EQ(active[1].sm_percent, window[1].sm_percent);
  EXPECT_EQ(active[1].time, window[1].time);
  // Since b's last active sample: no record for it until it runs again.
  const auto idle = gpu.process_records(now, b.time, true);
  ASSERT_EQ(idle.size(), 1u);
  EXPECT_EQ(idle[0].pid, 22u);
  const auto again = gpu.process_records(4 * S + 500'000, b.time, true);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_GE(again[0].time, 4 * S);
}

}  // namespace
}  // namespace gpumeter::sim
