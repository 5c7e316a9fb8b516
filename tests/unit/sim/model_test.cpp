// The per-GPU model at exact scenario times: readings, cumulative counters against the
// ground truth, driver reloads, order independence, and the sample buffers.

#include "sim/physics/gpu_sim.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "sim/truth/truth.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

constexpr Micros S = kMicrosPerSecond;

// GPU 0: job a (50%) on [10, 110); job b (square 80%/20%, 5 s high per 20 s) on [60, 160).
// GPU 1: job b only. A driver reload at 130 s.
const std::string kScenario = std::string(testing::kModel) + R"(
gpus: {count: 2, model: m}
jobs:
  - {name: a, start: 10, end: 110, gpus: [0], pid: 100, uid: 1000, memory: 1GiB, utilization: 0.5}
  - name: b
    start: 60
    end: 160
    gpus: [0, 1]
    pids: [200, 201]
    uid: 2000
    memory: 2GiB
    utilization: {pattern: square, high: 0.8, low: 0.2, period: 20, duty: 0.25}
faults:
  - {kind: driver_reload, at: 130}
)";

TEST(Model, ReadingsFollowUtilization) {
  Scenario s = testing::parse_ok(kScenario);
  SimGpu gpu(s, 0);
  InstantValues idle = gpu.values_at(5 * S);
  EXPECT_EQ(idle.util_percent, 0u);
  EXPECT_EQ(idle.power_mw, 50000u);
  EXPECT_EQ(idle.performance_state, 8u);
  EXPECT_EQ(idle.sm_clock_mhz, 310u);
  EXPECT_EQ(idle.temperature_c, 30u);
  EXPECT_EQ(idle.memory_temperature_c, 35u);
  EXPECT_EQ(idle.clocks_event_reasons, 0x1ULL);
  EXPECT_EQ(idle.memory_used_bytes, 0u);

  InstantValues half = gpu.values_at(20 * S);
  EXPECT_EQ(half.util_percent, 50u);
  EXPECT_EQ(half.memory_util_percent, 30u);
  EXPECT_EQ(half.power_mw, 150000u);
  EXPECT_EQ(half.performance_state, 0u);
  EXPECT_EQ(half.sm_clock_mhz, 1810u);
  EXPECT_EQ(half.memory_clock_mhz, 5001u);
  EXPECT_EQ(half.temperature_c, 55u);
  EXPECT_EQ(half.clocks_event_reasons, 0u);
  EXPECT_EQ(half.memory_used_bytes, 1ULL << 30);

  InstantValues capped = gpu.values_at(62 * S);  // 50% + 80% is capped at 100%
  EXPECT_EQ(capped.util_percent, 100u);
  EXPECT_EQ(capped.power_mw, 250000u);
  EXPECT_EQ(capped.memory_used_bytes, 3ULL << 30);
  EXPECT_EQ(gpu.values_at(70 * S).util_percent, 70u);

  const auto& procs = gpu.processes(62 * S);
  ASSERT_EQ(procs.size(), 2u);
  EXPECT_EQ(procs[0].pid, 100u);
  EXPECT_EQ(procs[1].pid, 200u);
  EXPECT_EQ(procs[1].memory_bytes, 2ULL << 30);
  EXPECT_TRUE(gpu.processes(200 * S).empty());
}

TEST(Model, EnergyCounterEqualsTruthAtExactTimes) {
  Scenario s = testing::parse_ok(kScenario);
  for (unsigned g = 0; g < 2; ++g) {
    SimGpu gpu(s, g);
    for (Micros t : {0 * S, 7 * S, 60 * S, 65 * S + 123, 99 * S, 129 * S, 129 * S + 999'999}) {
      double truth = compute_truth(s, 0, std::max<Micros>(t, 1)).gpus[g].energy_joules;
      if (t == 0) truth = 0;
      EXPECT_NEAR(static_cast<double>(gpu.energy_millijoules(t)), truth * 1000, 0.5) << "gpu " << g << " t " << t;
      double busy = t == 0 ? 0 : compute_truth(s, 0, t).gpus[g].busy_seconds;
      EXPECT_NEAR(gpu.busy_seconds(t), busy, 1e-9);
    }
  }
  // Hand-computed: GPU 0 over [0, 110) is 50 W * 110 s plus 200 W * busy, busy = 25 + 39.5.
  SimGpu gpu0(s, 0);
  EXPECT_EQ(gpu0.energy_millijoules(110 * S), 18'400'000ULL);
}

TEST(Model, DriverReloadRestartsTheEnergyCounter) {
  Scenario s = testing::parse_ok(kScenario);
  SimGpu gpu(s, 1);
  EXPECT_GT(gpu.energy_millijoules(130 * S - 1), 1000u);
  EXPECT_EQ(gpu.energy_millijoules(130 * S), 0u);
  double after = compute_truth(s, 130 * S, 150 * S).gpus[1].energy_joules;
  EXPECT_NEAR(static_cast<double>(gpu.energy_millijoules(150 * S)), after * 1000, 0.5);
  // The busy integral (behind the PCIe byte counters) is not reset.
  EXPECT_NEAR(gpu.busy_seconds(150 * S), compute_truth(s, 0, 150 * S).gpus[1].busy_seconds, 1e-9);
}

// Readings depend only on the time asked for, never on the order of questions.
TEST(Model, AnyQueryOrderGivesTheSameReadings) {
  // A one-second square wave for a day: far more segments than one checkpoint interval.
  Scenario s = testing::parse_ok(std::string(testing::kModel) + R"(
gpus: {count: 1, model: m}
jobs:
  - {name: w, gpus: [0], pid: 1, utilization: {pattern: square, high: 0.9, low: 0.3, period: 1, duty: 0.37}}
)");
  std::vector<Micros> times;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200; ++i) times.push_back(static_cast<Micros>(rng() % (3000 * S)));
  std::sort(times.begin(), times.end());
  SimGpu forward(s, 0);
  std::vector<unsigned long long> expected;
  for (Micros t : times) expected.push_back(forward.energy_millijoules(t));
  SimGpu shuffled(s, 0);
  std::vector<std::size_t> order(times.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (std::size_t i : order) EXPECT_EQ(shuffled.energy_millijoules(times[i]), expected[i]) << times[i];
  // And against the truth: 50 W + 200 W * (0.37 * 0.9 + 0.63 * 0.3) per second.
  EXPECT_NEAR(static_cast<double>(forward.energy_millijoules(3000 * S)), 3000 * (50 + 200 * 0.522) * 1000, 1);
}

TEST(Model, SamplesAreExactPeriodAverages) {
  // 50% for the first 100 ms of every second, 70% for the rest: the utilization period
  // [0, 200 ms) averages 60%, the next four 70%; the power period [0, 100 ms) is all 50%.
  Scenario s = testing::parse_ok(std::string(testing::kModel) + R"(
gpus: {count: 1, model: m}
jobs:
  - {name: w, gpus: [0], pid: 9, utilization: {pattern: square, high: 0.5, low: 0.7, period: 1, duty: 0.1}}
)");
  SimGpu gpu(s, 0);
  PeriodHistory& util = gpu.utilization_samples();
  PeriodHistory& power = gpu.power_samples();
  EXPECT_TRUE(util.complete_until(199'999).empty());
  const auto& first = util.complete_until(S);
  ASSERT_EQ(first.size(), 5u);
  EXPECT_EQ(first[0].start, 0);
  EXPECT_EQ(first[0].util_percent, 60u);
  EXPECT_EQ(first[0].memory_util_percent, 36u);
  EXPECT_EQ(first[0].end, 200'000);
  EXPECT_EQ(first[1].util_percent, 70u);
  const auto& first_power = power.complete_until(S);
  ASSERT_EQ(first_power.size(), 10u);
  EXPECT_EQ(first_power[0].end, 100'000);
  EXPECT_EQ(first_power[0].power_mw, 150000u);  // 50 W + 200 W * 0.5
  EXPECT_EQ(first_power[1].power_mw, 190000u);  // 50 W + 200 W * 0.7

  // The utilization buffer keeps the last 100 periods, the power buffer 120, and
  // sum(sample * period) is the integral.
  const auto& later = util.complete_until(60 * S + 50'000);
  ASSERT_EQ(later.size(), 100u);
  EXPECT_EQ(later.back().start, 299 * 200'000);
  EXPECT_EQ(util.oldest_instant(60 * S + 50'000), 40 * S);
  double sum = 0;
  for (const Period& p : later) sum += p.util_percent / 100.0 * 0.2;
  double truth = compute_truth(s, 40 * S, 60 * S).gpus[0].busy_seconds;
  EXPECT_NEAR(sum, truth, 1e-9);
  const auto& later_power = power.complete_until(60 * S + 50'000);
  ASSERT_EQ(later_power.size(), 120u);
  EXPECT_EQ(later_power.back().end, 60 * S);
  double joules = 0;
  for (const Period& p : later_power) joules += p.power_mw / 1000.0 * 0.1;
  EXPECT_NEAR(joules, compute_truth(s, 48 * S, 60 * S).gpus[0].energy_joules, 1e-6);

  // Going back in time rebuilds the buffer with the same values.
  const auto& again = util.complete_until(S);
  ASSERT_EQ(again.size(), 5u);
  EXPECT_EQ(again[0].util_percent, 60u);
}

TEST(Model, AnIrregularPowerCadenceFollowsTheGpusState) {
  // Busy from 2 s to 4 s: samples every 40 ms while busy, every 1 s (25 busy periods) while
  // idle; each covers the time since the one before, and their energy is the truth's.
  Scenario s = testing::parse_ok(std::string(testing::kModel) + R"(
    samples: {power_period: 1s, power_period_busy: 40ms, power_depth: 119}
gpus: {count: 1, model: m}
jobs:
  - {name: w, gpus: [0], pid: 9, start: 2, end: 4, utilization: 0.6}
)");
  SimGpu gpu(s, 0);
  const auto& buffer = gpu.power_samples().complete_until(6 * S);
  std::vector<Micros> ends;
  double joules = 0;
  for (std::size_t i = 0; i < buffer.size(); ++i) {
    const Period& p = buffer[i];
    ends.push_back(p.end);
    joules += p.power_mw / 1000.0 * static_cast<double>(p.end - p.start) / 1e6;
    EXPECT_EQ(p.start, i == 0 ? 0 : buffer[i - 1].end) << i;
  }
  // 1 s and 2 s while idle, every 40 ms from 2.04 s to 4 s, then 5 s and 6 s.
  ASSERT_EQ(ends.size(), 2u + 50u + 2u);
  EXPECT_EQ(ends[0], 1 * S);
  EXPECT_EQ(ends[1], 2 * S);
  EXPECT_EQ(ends[2], 2 * S + 40'000);
  EXPECT_EQ(ends[51], 4 * S);
  EXPECT_EQ(ends[52], 5 * S);
  EXPECT_EQ(ends[53], 6 * S);
  EXPECT_NEAR(joules, compute_truth(s, 0, 6 * S).gpus[0].energy_joules, 1e-6);
  // The buffer holds 119 samples: 4.76 s of a busy GPU.
  Scenario busy = testing::parse_ok(std::string(testing::kModel) + R"(
    samples: {power_period: 1s, power_period_busy: 40ms, power_depth: 119}
gpus: {count: 1, model: m}
jobs:
  - {name: w, gpus: [0], pid: 9, utilization: 0.6}
)");
  SimGpu busy_gpu(busy, 0);
  const auto& full = busy_gpu.power_samples().complete_until(60 * S);
  ASSERT_EQ(full.size(), 119u);
  EXPECT_EQ(full.front().start, 60 * S - 119 * 40'000);
}

TEST(Model, SampleBuffersFollowTheModel) {
  Scenario s = testing::parse_ok(std::string(testing::kModel) + R"(
    samples: {utilization_period: 500ms, utilization_depth: 10, power_period: 250ms, power_depth: 4}
gpus: {count: 1, model: m}
jobs:
  - {name: w, gpus: [0], pid: 9, utilization: 0.4}
)");
  SimGpu gpu(s, 0);
  const auto& u = gpu.utilization_samples().complete_until(60 * S);
  ASSERT_EQ(u.size(), 10u);
  EXPECT_EQ(u.front().end, 55 * S + 500'000);
  const auto& p = gpu.power_samples().complete_until(60 * S);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p.front().end, 59 * S + 250'000);
  EXPECT_EQ(p.front().power_mw, 130000u);
}

TEST(Model, ProcessSharesSplitTheGpuByUtilization) {
  Scenario s = testing::parse_ok(kScenario);
  SimGpu gpu(s, 0);
  // In [60, 65) job a asks 50% and job b 80%: the GPU is 100% busy, split 50:80.
  const auto records = gpu.process_records(64 * S, 61 * S, false);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].pid, 100u);
  EXPECT_EQ(records[0].sm_percent, 38u);  // 100 * 50 / 130
  EXPECT_EQ(records[1].pid, 200u);
  EXPECT_EQ(records[1].sm_percent, 62u);      // 100 * 80 / 130
  EXPECT_EQ(records[1].memory_percent, 37u);  // 60% memory utilization split 50:80
  for (const auto& r : records) {
    // From the process's grid point at or before 61 s: its first new sample's period.
    EXPECT_LE(r.window_start, 61 * S);
    EXPECT_GT(r.window_start, 61 * S - 200'000);
    EXPECT_EQ((r.window_start - process_phase(r.pid, 200'000)) % 200'000, 0);
    EXPECT_LE(r.time, 64 * S);
    EXPECT_GT(r.time, 64 * S - 200'000);
    EXPECT_EQ((r.time - process_phase(r.pid, 200'000)) % 200'000, 0);
  }
  EXPECT_NE(records[0].time, records[1].time);  // each process on its own grid
}

}  // namespace
}  // namespace gpumeter::sim
