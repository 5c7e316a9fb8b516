#include "ledger/ledger.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <functional>
#include <limits>
#include <random>

namespace gpumeter {
namespace {

constexpr std::int64_t kT0 = 1'700'000'000'000'000;  // µs
constexpr std::int64_t kPeriod = 200'000;

OwnerLabels owner(std::string project, std::string user = "") {
  OwnerLabels o;
  o.project = std::move(project);
  o.user = std::move(user);
  return o;
}

// Builds a tick covering `periods` sample periods after `start`, all with the same values.
struct TickBuilder {
  std::int64_t start;
  int periods = 5;
  double util = 0;
  double power = 0;
  std::vector<LedgerProcess> procs;
  std::vector<std::pair<unsigned, double>> sm;  // pid -> SM share every period

  LedgerTick build() const {
    LedgerTick t;
    t.wall_us = start + periods * kPeriod;
    t.processes = procs;
    t.utilization_samples_supported = true;
    t.power_samples_supported = true;
    t.process_samples_supported = true;
    for (int i = 1; i <= periods; ++i) {
      const std::int64_t ts = start + i * kPeriod;
      t.utilization_samples.push_back({ts, util});
      t.power_samples.push_back({ts, power});
      for (const auto& [pid, share] : sm) t.process_samples.push_back({pid, ts, share, 0});
    }
    return t;
  }
};

GpuLedger started_ledger(double idle_w = 70) {
  GpuLedger l(GpuLedgerOptions{idle_w, 10'000'000});
  TickBuilder first{kT0 - kPeriod, 1};
  l.advance(first.build());  // the first tick only sets the cursor
  EXPECT_EQ(l.cursor_us(), kT0);
  EXPECT_EQ(l.covered_seconds(), 0);
  return l;
}

TEST(GpuLedger, OneProcessTakesTheWholeGpu) {
  GpuLedger l = started_ledger();
  TickBuilder t{kT0, 5, 0.5, 300, {{42, owner("nlp", "dana"), 8e9}}, {{42, 0.5}}};
  l.advance(t.build());
  ASSERT_EQ(l.owners().size(), 1u);
  const auto& [o, tot] = *l.owners().begin();
  EXPECT_EQ(o.project, "nlp");
  EXPECT_DOUBLE_EQ(tot.allocated_seconds, 1.0);
  EXPECT_DOUBLE_EQ(tot.busy_seconds, 0.5);
  EXPECT_DOUBLE_EQ(tot.memory_byte_seconds, 8e9);
  EXPECT_DOUBLE_EQ(tot.energy_joules, 300.0);
  EXPECT_DOUBLE_EQ(l.covered_seconds(), 1.0);
}

TEST(GpuLedger, TwoOwnersSplitAllocationEvenlyAndBusyAndEnergyByShare) {
  GpuLedger l = started_ledger(100);
  TickBuilder t{kT0, 5, 0.9, 400, {{1, owner("a"), 1e9}, {2, owner("b"), 3e9}}, {{1, 0.3}, {2, 0.6}}};
  l.advance(t.build());
  const auto& a = l.owners().at(owner("a"));
  const auto& b = l.owners().at(owner("b"));
  EXPECT_DOUBLE_EQ(a.allocated_seconds, 0.5);
  EXPECT_DOUBLE_EQ(b.allocated_seconds, 0.5);
  EXPECT_NEAR(a.busy_seconds, 0.3, 1e-12);
  EXPECT_NEAR(b.busy_seconds, 0.6, 1e-12);
  // idle 100 W split evenly, the 300 W above idle by busy share (1/3, 2/3)
  EXPECT_NEAR(a.energy_joules, 50 + 100, 1e-9);
  EXPECT_NEAR(b.energy_joules, 50 + 200, 1e-9);
  // Their idle energy: the board's idle power while each held it; the rest is active.
  EXPECT_NEAR(a.idle_energy_joules, 50, 1e-9);
  EXPECT_NEAR(b.idle_energy_joules, 50, 1e-9);
  EXPECT_NEAR(a.memory_byte_seconds, 1e9, 1e-3);
  EXPECT_FALSE(l.owners().count(unattributed_owner()));
}

TEST(GpuLedger, NobodyPresentIsIdleAndUnplacedBusyIsUnattributed) {
  GpuLedger l = started_ledger();
  TickBuilder t{kT0, 5, 0.2, 150};
  l.advance(t.build());
  const auto& idle = l.owners().at(idle_owner());
  EXPECT_DOUBLE_EQ(idle.allocated_seconds, 1.0);
  EXPECT_DOUBLE_EQ(idle.energy_joules, 150.0);
  EXPECT_DOUBLE_EQ(idle.idle_energy_joules, 70.0);  // 70 W idle; 80 W above it with nobody there
  EXPECT_NEAR(l.owners().at(unattributed_owner()).busy_seconds, 0.2, 1e-12);
  EXPECT_EQ(l.owners().at(unattributed_owner()).idle_energy_joules, 0);
}

TEST(GpuLedger, ALoneShareTakesAllTheBusyTimeItsRecordRoundsDown) {
  GpuLedger l = started_ledger(100);
  TickBuilder t{kT0, 5, 0.8, 300, {{1, owner("a"), 0}}, {{1, 0.5}}};
  l.advance(t.build());
  EXPECT_NEAR(l.owners().at(owner("a")).busy_seconds, 0.8, 1e-12);
  EXPECT_NEAR(l.owners().at(owner("a")).energy_joules, 300, 1e-9);
  EXPECT_FALSE(l.owners().count(unattributed_owner()));
}

TEST(GpuLedger, BusyTimeNoMemberHasAShareOfIsUnattributed) {
  GpuLedger l = started_ledger(100);
  TickBuilder first{kT0, 1, 0.0, 100, {{1, owner("a"), 0}}};
  l.advance(first.build());
  TickBuilder t{kT0 + kPeriod, 5, 0.8, 300, {{1, owner("a"), 0}}};  // listed, no record
  l.advance(t.build());
  EXPECT_NEAR(l.owners().at(owner("a")).busy_seconds, 0, 1e-12);
  EXPECT_NEAR(l.owners().at(owner("a")).allocated_seconds, 1.0, 1e-12);
  EXPECT_NEAR(l.owners().at(unattributed_owner()).busy_seconds, 0.8, 1e-12);
  // idle power to the member, the 200 W above idle with the unattributed busy time
  EXPECT_NEAR(l.owners().at(owner("a")).energy_joules, 100, 1e-9);
  EXPECT_NEAR(l.owners().at(owner("a")).idle_energy_joules, 100, 1e-9);
  EXPECT_NEAR(l.owners().at(unattributed_owner()).energy_joules, 200, 1e-9);
}

TEST(GpuLedger, IdleEnergyIsThePowerUpToIdleAndScalesWithTheEnergyCounter) {
  GpuLedger l = started_ledger(100);
  // Below idle power the whole draw is idle energy (the process is listed from the first tick,
  // so it is present throughout the second).
  l.advance(TickBuilder{kT0, 5, 0.0, 80, {{1, owner("a"), 0}}}.build());
  l.advance(TickBuilder{kT0 + 5 * kPeriod, 5, 0.0, 80, {{1, owner("a"), 0}}}.build());
  EXPECT_NEAR(l.owners().at(owner("a")).idle_energy_joules, 80, 1e-9);
  EXPECT_NEAR(l.owners().at(owner("a")).energy_joules, 80, 1e-9);
  // The energy counter says 10% more than the power samples: both parts grow by it.
  LedgerTick t = TickBuilder{kT0 + 10 * kPeriod, 5, 0.5, 300, {{1, owner("a"), 0}}, {{1, 0.5}}}.build();
  t.energy_joules = 1000;
  l.advance(t);
  t = TickBuilder{kT0 + 15 * kPeriod, 5, 0.5, 300, {{1, owner("a"), 0}}, {{1, 0.5}}}.build();
  t.energy_joules = 1000 + 330;
  l.advance(t);
  const auto& a = l.owners().at(owner("a"));
  EXPECT_NEAR(a.energy_joules, 80 + 300 + 330, 1e-9);
  EXPECT_NEAR(a.idle_energy_joules, 80 + 100 + 110, 1e-9);
  // It survives a restart.
  auto restored = GpuLedger::from_json(nlohmann::json::parse(l.to_json().dump()), GpuLedgerOptions{100});
  ASSERT_TRUE(restored.ok()) << restored.error().message;
  EXPECT_EQ(restored->owners().at(owner("a")).idle_energy_joules, a.idle_energy_joules);
}

TEST(GpuLedger, ProcessSamplesOnACoarserGridCoverTheTimeSinceTheirLastSample) {
  // Real drivers stamp per-process samples on their own schedule (here once a second) while
  // device samples come every 200 ms: each process sample covers the time since its last one.
  GpuLedger l = started_ledger(0);
  auto tick = [&](std::int64_t start) {
    LedgerTick t = TickBuilder{start, 5, 0.6, 300, {{1, owner("a"), 0}}}.build();
    t.process_samples = {{1, start + 5 * kPeriod, 0.6, 0}};
    return t;
  };
  l.advance(tick(kT0));  // the first sample covers one device period only
  const double first = l.owners().at(owner("a")).busy_seconds;
  EXPECT_NEAR(first, 0.6 * 0.2, 1e-12);
  l.advance(tick(kT0 + 5 * kPeriod));  // the second covers the whole second since the first
  EXPECT_NEAR(l.owners().at(owner("a")).busy_seconds - first, 0.6, 1e-12);
  // Allocation: 0.2 s in the first tick (the process was not listed before it, so only its
  // sample places it), then the whole second (listed at both ends).
  EXPECT_NEAR(l.owners().at(owner("a")).allocated_seconds, 1.2, 1e-12);
}

TEST(GpuLedger, ALongSilenceIsNotSpreadOver) {
  GpuLedger l = started_ledger(0);
  LedgerTick t = TickBuilder{kT0, 5, 0.0, 100, {{1, owner("a"), 0}}}.build();
  t.process_samples = {{1, kT0 + kPeriod, 0.5, 0}};
  l.advance(t);
  // Five seconds of nothing from the process, then one sample: it covers at most one second.
  LedgerTick later = TickBuilder{kT0 + 5 * kPeriod, 25, 0.1, 100, {{1, owner("a"), 0}}}.build();
  later.process_samples = {{1, kT0 + 30 * kPeriod, 0.5, 0}};
  l.advance(later);
  const auto& a = l.owners().at(owner("a"));
  EXPECT_NEAR(a.busy_seconds, 0.0 + 0.1 * 1.0, 1e-12);  // only the last second's busy time
  EXPECT_NEAR(l.owners().at(unattributed_owner()).busy_seconds, 0.1 * 4.0, 1e-12);
}

TEST(GpuLedger, ProcessListedAtBothEndsCountsWithoutSamples) {
  GpuLedger l(GpuLedgerOptions{70, 10'000'000});
  TickBuilder first{kT0 - kPeriod, 1, 0, 70, {{7, owner("x"), 1e9}}};
  l.advance(first.build());
  TickBuilder t{kT0, 5, 0, 70, {{7, owner("x"), 1e9}}};  // idle process: real NVML sends no samples
  l.advance(t.build());
  EXPECT_DOUBLE_EQ(l.owners().at(owner("x")).allocated_seconds, 1.0);
  EXPECT_FALSE(l.owners().count(idle_owner()));
}

TEST(GpuLedger, AProcessListedForTheFirstTimeIsThereSinceItsStart) {
  // Idle, so no records: its start time from the host places it 0.3 s into the reading.
  GpuLedger l = started_ledger();
  LedgerProcess p{7, owner("x"), 1e9, kT0 + 3 * kPeriod / 2};
  TickBuilder t{kT0, 5, 0, 70, {p}};
  l.advance(t.build());
  EXPECT_NEAR(l.owners().at(owner("x")).allocated_seconds, 0.7, 1e-12);
  EXPECT_NEAR(l.owners().at(idle_owner()).allocated_seconds, 0.3, 1e-12);
}

TEST(GpuLedger, WithoutRecordsAProcessThatStoppedIsThereForHalfTheReading) {
  // A GPU without per-process utilization: the process is listed, then gone; when it stopped
  // inside the reading is unknown, and half is the estimate with the least error.
  GpuLedger l(GpuLedgerOptions{70, 10'000'000});
  TickBuilder first{kT0 - kPeriod, 1, 0.5, 200, {{7, owner("x"), 1e9}}};
  l.advance(first.build());
  TickBuilder t{kT0, 5, 0.5, 200, {}};
  LedgerTick tick = t.build();
  tick.process_samples_supported = false;
  l.advance(tick);
  EXPECT_NEAR(l.owners().at(owner("x")).allocated_seconds, 0.5, 1e-12);
  EXPECT_NEAR(l.owners().at(owner("x")).busy_seconds, 0.5, 1e-12) << "the only process: all of the busy time";
  EXPECT_NEAR(l.owners().at(idle_owner()).allocated_seconds, 0.5, 1e-12);
  // With per-process records the stop is known from them: no record, not there.
  GpuLedger r(GpuLedgerOptions{70, 10'000'000});
  r.advance(first.build());
  r.advance(t.build());
  EXPECT_FALSE(r.owners().count(owner("x")));
}

TEST(GpuLedger, ProcessSampleWithoutListingIsUnattributed) {
  GpuLedger l = started_ledger();
  TickBuilder t{kT0, 5, 0.4, 200, {}, {{99, 0.4}}};  // came and went between two lists
  l.advance(t.build());
  EXPECT_DOUBLE_EQ(l.owners().at(unattributed_owner()).allocated_seconds, 1.0);
  EXPECT_NEAR(l.owners().at(unattributed_owner()).busy_seconds, 0.4, 1e-12);
}

TEST(GpuLedger, PowerSamplesThatRunAheadAreKeptForTheNextTick) {
  GpuLedger l = started_ledger(0);
  LedgerTick t = TickBuilder{kT0, 2, 0.5, 100}.build();
  t.power_samples.push_back({kT0 + 3 * kPeriod, 500});  // one period ahead of utilization
  l.advance(t);
  EXPECT_NEAR(l.energy_joules(), 40, 1e-9);
  LedgerTick t2 = TickBuilder{kT0 + 2 * kPeriod, 1, 0.5, 0}.build();
  t2.power_samples.clear();  // this period's power came with the previous tick
  l.advance(t2);
  EXPECT_NEAR(l.energy_joules(), 40 + 100, 1e-9);
}

TEST(GpuLedger, SamplesAlreadySeenAreNotCountedTwice) {
  GpuLedger l = started_ledger();
  LedgerTick t = TickBuilder{kT0, 5, 1.0, 100}.build();
  l.advance(t);
  l.advance(t);  // a restarted backend hands the same buffer again
  EXPECT_DOUBLE_EQ(l.covered_seconds(), 1.0);
}

TEST(GpuLedger, AGapLongerThanTheLimitIsNotIntegrated) {
  GpuLedger l = started_ledger();
  l.advance(TickBuilder{kT0 + 60'000'000, 5, 1.0, 500, {{1, owner("a"), 0}}, {{1, 1.0}}}.build());
  EXPECT_EQ(l.gaps(), 1u);
  EXPECT_NEAR(l.gap_seconds(), 60.2, 1e-9);
  EXPECT_NEAR(l.covered_seconds(), 0.8, 1e-9);  // the first sample after the gap starts coverage
  EXPECT_NEAR(l.owners().at(owner("a")).allocated_seconds, 0.8, 1e-9);
}

// Samples with their own timestamps, oldest first.
LedgerTick samples_at(const std::vector<std::int64_t>& ts, double util = 0.5) {
  LedgerTick t;
  t.wall_us = ts.empty() ? kT0 : ts.back();
  t.processes = {{1, owner("a"), 0}};
  t.utilization_samples_supported = t.power_samples_supported = t.process_samples_supported = true;
  for (auto x : ts) {
    t.utilization_samples.push_back({x, util});
    t.power_samples.push_back({x, 100});
  }
  return t;
}

TEST(GpuLedger, SamplesLostFromTheBufferAreAGapEvenWhenShorterThanMaxGap) {
  GpuLedger l = started_ledger();
  l.advance(samples_at({kT0 + kPeriod, kT0 + 2 * kPeriod}));
  // The agent (or the GPU) stalled: the buffer now starts 10 periods after the cursor.
  std::vector<std::int64_t> ts;
  for (int i = 12; i <= 16; ++i) ts.push_back(kT0 + i * kPeriod);
  l.advance(samples_at(ts));
  EXPECT_EQ(l.gaps(), 1u);
  EXPECT_NEAR(l.gap_seconds(), 2.0, 1e-9);
  EXPECT_NEAR(l.covered_seconds(), 0.4 + 0.8, 1e-9);  // not stretched: coverage restarts at the first
  EXPECT_NEAR(l.busy_seconds(), 0.5 * 1.2, 1e-9);
  EXPECT_EQ(l.cursor_us(), kT0 + 16 * kPeriod);
}

TEST(GpuLedger, AHoleInsideOneReadIsAGapToo) {
  GpuLedger l = started_ledger();
  l.advance(samples_at({kT0 + kPeriod, kT0 + 2 * kPeriod, kT0 + 6 * kPeriod, kT0 + 7 * kPeriod}));
  EXPECT_EQ(l.gaps(), 1u);
  EXPECT_NEAR(l.gap_seconds(), 0.8, 1e-9);
  EXPECT_NEAR(l.covered_seconds(), 0.6, 1e-9);
  double alloc = 0;
  for (const auto& [o, t] : l.owners()) alloc += t.allocated_seconds;
  EXPECT_NEAR(alloc, l.covered_seconds(), 1e-12);
}

TEST(GpuLedger, JitterWithinHalfAPeriodIsNoGap) {
  GpuLedger l = started_ledger();
  l.advance(samples_at({kT0 + kPeriod, kT0 + 2 * kPeriod}));
  l.advance(samples_at({kT0 + 3 * kPeriod + kPeriod / 3, kT0 + 4 * kPeriod, kT0 + 5 * kPeriod, kT0 + 6 * kPeriod}));
  EXPECT_EQ(l.gaps(), 0u);
  EXPECT_EQ(l.device_period_us(), kPeriod);
  EXPECT_NEAR(l.covered_seconds(), 1.2, 1e-9);
}

TEST(GpuLedger, ARestartShorterThanTheBufferLosesNothing) {
  GpuLedger l = started_ledger();
  l.advance(samples_at({kT0 + kPeriod, kT0 + 2 * kPeriod}));
  auto saved = l.to_json();
  auto restored = GpuLedger::from_json(nlohmann::json::parse(saved.dump()), GpuLedgerOptions{70});
  ASSERT_TRUE(restored.ok()) << restored.error().message;
  EXPECT_EQ(restored->device_period_us(), kPeriod);
  // The restarted backend hands the whole buffer again, old samples included.
  std::vector<std::int64_t> ts;
  for (int i = -20; i <= 40; ++i) ts.push_back(kT0 + i * kPeriod);
  restored->advance(samples_at(ts));
  EXPECT_EQ(restored->gaps(), 0u);
  EXPECT_NEAR(restored->covered_seconds(), 8.0, 1e-9);
}

TEST(GpuLedger, AFailedCollectionInPolledModeIsAGapNotStretchedOver) {
  GpuLedger l(GpuLedgerOptions{0, 10'000'000});
  LedgerTick t;
  t.wall_us = kT0;
  t.processes = {{1, owner("a"), 0}};
  t.utilization_ratio = 0.5;
  t.power_watts = 100;
  l.advance(t);
  t.wall_us += 1'000'000;
  l.advance(t);
  l.interrupt();
  t.wall_us += 3'000'000;
  l.advance(t);
  EXPECT_EQ(l.gaps(), 1u);
  EXPECT_NEAR(l.gap_seconds(), 3.0, 1e-9);
  EXPECT_NEAR(l.covered_seconds(), 1.0, 1e-9);
  t.wall_us += 1'000'000;
  l.advance(t);
  EXPECT_NEAR(l.covered_seconds(), 2.0, 1e-9);
}

TEST(GpuLedger, PolledModeUsesTheEnergyCounterAndSurvivesItsReset) {
  GpuLedger l(GpuLedgerOptions{50, 10'000'000});
  LedgerTick t;
  t.wall_us = kT0;
  t.processes = {{1, owner("a"), 0}};
  t.utilization_ratio = 0.5;
  t.power_watts = 200;
  t.energy_joules = 10'000;
  l.advance(t);
  t.wall_us += 1'000'000;
  t.energy_joules = 10'180;  // 180 J, although 200 W × 1 s was polled
  l.advance(t);
  EXPECT_NEAR(l.energy_joules(), 180, 1e-9);
  EXPECT_NEAR(l.owners().at(owner("a")).energy_joules, 180, 1e-9);
  EXPECT_NEAR(l.owners().at(owner("a")).busy_seconds, 0.5, 1e-12);
  t.wall_us += 1'000'000;
  t.energy_joules = 120;  // driver reload: the counter restarted
  l.advance(t);
  EXPECT_NEAR(l.energy_joules(), 180 + 200, 1e-9);  // power × time for the reset interval
  t.wall_us += 1'000'000;
  t.energy_joules = 310;
  l.advance(t);
  EXPECT_NEAR(l.energy_joules(), 180 + 200 + 190, 1e-9);
}

// The invariants over random ticks: owners sum to the device's integrals exactly.
TEST(GpuLedger, PeriodsInAFaultSpanAreChargedToTheOwnersWithTheFaultLabel) {
  GpuLedger l = started_ledger(100);
  l.advance(TickBuilder{kT0, 5, 0.5, 300, {{1, owner("a"), 1e9}}, {{1, 0.5}}}.build());
  // Faulty from the middle of the tick's third period on; the GPU is idle after the fourth.
  LedgerTick t = TickBuilder{kT0 + 5 * kPeriod, 5, 0.5, 300, {{1, owner("a"), 1e9}}, {{1, 0.5}}}.build();
  t.faults = {{kT0 + 7 * kPeriod + kPeriod / 3, std::numeric_limits<std::int64_t>::max()}};
  l.advance(t);
  OwnerLabels faulty_a = owner("a");
  faulty_a.fault = kFaultValue;
  const auto& healthy = l.owners().at(owner("a"));
  const auto& struck = l.owners().at(faulty_a);
  EXPECT_NEAR(healthy.allocated_seconds, 1.0 + 0.4, 1e-12);  // the first tick and two periods
  EXPECT_NEAR(struck.allocated_seconds, 0.6, 1e-12);
  EXPECT_NEAR(struck.busy_seconds, 0.3, 1e-12);
  EXPECT_NEAR(struck.energy_joules, 180, 1e-9);
  EXPECT_NEAR(struck.idle_energy_joules, 60, 1e-9);
  EXPECT_NEAR(struck.memory_byte_seconds, 0.6e9, 1e-3);
  // Idle time in a fault span is faulty too; after the span nothing is.
  LedgerTick idle = TickBuilder{kT0 + 10 * kPeriod, 5, 0.0, 100}.build();
  idle.faults = {{kT0 + 10 * kPeriod, kT0 + 12 * kPeriod}};
  l.advance(idle);
  OwnerLabels faulty_idle = idle_owner();
  faulty_idle.fault = kFaultValue;
  EXPECT_NEAR(l.owners().at(faulty_idle).allocated_seconds, 0.4, 1e-12);
  EXPECT_NEAR(l.owners().at(idle_owner()).allocated_seconds, 0.6, 1e-12);
  double allocated = 0;
  for (const auto& [o, tot] : l.owners()) allocated += tot.allocated_seconds;
  EXPECT_NEAR(allocated, l.covered_seconds(), 1e-12);
  // The label survives a restart.
  auto restored = GpuLedger::from_json(nlohmann::json::parse(l.to_json().dump()), GpuLedgerOptions{100});
  ASSERT_TRUE(restored.ok()) << restored.error().message;
  EXPECT_EQ(restored->owners(), l.owners());
}

TEST(GpuLedger, InvariantsHoldOverRandomTicks) {
  std::mt19937 rng(12345);
  std::uniform_real_distribution<double> unit(0, 1);
  GpuLedger l = started_ledger(60);
  std::int64_t cursor = kT0;
  double wall = 0, busy = 0, energy = 0, idle_energy = 0;
  for (int tick = 0; tick < 500; ++tick) {
    LedgerTick t;
    const int periods = 1 + static_cast<int>(rng() % 8);
    const int nproc = static_cast<int>(rng() % 5);
    for (int p = 0; p < nproc; ++p) {
      unsigned pid = 100 + static_cast<unsigned>(rng() % 7);
      bool dup = false;
      for (auto& q : t.processes) dup = dup || q.pid == pid;
      if (!dup) t.processes.push_back({pid, owner("p" + std::to_string(pid % 3)), unit(rng) * 1e10});
    }
    t.utilization_samples_supported = t.power_samples_supported = t.process_samples_supported = true;
    for (int i = 1; i <= periods; ++i) {
      const std::int64_t ts = cursor + i * kPeriod;
      double u = std::round(unit(rng) * 100) / 100;
      double p = 60 + 600 * unit(rng) * (rng() % 2);
      t.utilization_samples.push_back({ts, u});
      t.power_samples.push_back({ts, p});
      busy += u * 0.2;
      energy += p * 0.2;
      idle_energy += std::min(p, 60.0) * 0.2;
      wall += 0.2;
      for (auto& q : t.processes) {
        if (rng() % 3) t.process_samples.push_back({q.pid, ts, unit(rng) * u, 0});
      }
    }
    cursor += periods * kPeriod;
    t.wall_us = cursor;
    l.advance(t);
  }
  double alloc_sum = 0, busy_sum = 0, energy_sum = 0, idle_energy_sum = 0;
  for (const auto& [o, tot] : l.owners()) {
    alloc_sum += tot.allocated_seconds;
    busy_sum += tot.busy_seconds;
    energy_sum += tot.energy_joules;
    idle_energy_sum += tot.idle_energy_joules;
    EXPECT_LE(tot.idle_energy_joules, tot.energy_joules * (1 + 1e-12));
    EXPECT_GE(tot.busy_seconds, 0);
    EXPECT_GE(tot.energy_joules, 0);
  }
  EXPECT_NEAR(l.covered_seconds(), wall, 1e-9 * wall);
  EXPECT_NEAR(alloc_sum, wall, 1e-9 * wall);
  EXPECT_NEAR(busy_sum, busy, 1e-9 * busy);
  EXPECT_NEAR(energy_sum, energy, 1e-9 * energy);
  EXPECT_NEAR(idle_energy_sum, idle_energy, 1e-9 * idle_energy);
  EXPECT_NEAR(l.busy_seconds(), busy, 1e-9 * busy);
  EXPECT_NEAR(l.energy_joules(), energy, 1e-9 * energy);
}

TEST(GpuLedger, StateRoundTripResumesEveryCounter) {
  GpuLedger l = started_ledger();
  l.advance(TickBuilder{kT0, 5, 0.5, 300, {{42, owner("nlp", "dana"), 8e9}}, {{42, 0.5}}}.build());
  auto restored = GpuLedger::from_json(nlohmann::json::parse(l.to_json().dump()), GpuLedgerOptions{70});
  ASSERT_TRUE(restored.ok()) << restored.error().message;
  EXPECT_EQ(restored->owners(), l.owners());
  EXPECT_EQ(restored->cursor_us(), l.cursor_us());
  // It continues where it stopped; the process is listed at both ends, so it stays present.
  restored->advance(TickBuilder{kT0 + kPeriod * 5, 5, 0.5, 300, {{42, owner("nlp", "dana"), 8e9}}}.build());
  EXPECT_DOUBLE_EQ(restored->owners().at(owner("nlp", "dana")).allocated_seconds, 2.0);
}

// The power sensor samples only part of the time (A100, H100): the energy counter is the
// reference, and the owners' energy adds up to its increase, split as the power samples say.
TEST(GpuLedger, EnergyFromPowerSamplesIsScaledToTheCounter) {
  GpuLedger l(GpuLedgerOptions{70, 10'000'000});
  LedgerTick first = TickBuilder{kT0 - kPeriod, 1}.build();
  first.energy_joules = 5'000;
  l.advance(first);
  TickBuilder t{kT0, 5, 0.5, 300, {{42, owner("a"), 8e9}, {43, owner("b"), 8e9}}, {{42, 0.3}, {43, 0.2}}};
  LedgerTick tick = t.build();
  tick.energy_joules = 5'000 + 330;  // 300 W × 1 s sampled; the counter says 330 J
  l.advance(tick);
  const double a = l.owners().at(owner("a")).energy_joules, b = l.owners().at(owner("b")).energy_joules;
  EXPECT_NEAR(a + b, 330, 1e-9);
  EXPECT_NEAR(l.energy_joules(), 330, 1e-9);
  // The split is the power samples' (without them: 300 J, a share by SM of the power above idle).
  GpuLedger unscaled = started_ledger();
  unscaled.advance(t.build());
  const double ua = unscaled.owners().at(owner("a")).energy_joules;
  const double ub = unscaled.owners().at(owner("b")).energy_joules;
  EXPECT_NEAR(ua + ub, 300, 1e-9);
  EXPECT_NEAR(a / b, ua / ub, 1e-9);
}

TEST(GpuLedger, MalformedStateIsAnError) {
  auto bad = GpuLedger::from_json(nlohmann::json{{"mode", "samples"}}, {});
  EXPECT_FALSE(bad.ok());
  nlohmann::json j = started_ledger().to_json();
  j["owners"] = nlohmann::json::array(
      {{{"owner", {{"project", "a"}, {"user", ""}, {"namespace", ""}, {"pod", ""}, {"container", ""}, {"hpc_job", ""}}},
        {"allocated_seconds", -1.0},
        {"busy_seconds", 0.0},
        {"memory_byte_seconds", 0.0},
        {"energy_joules", 0.0},
        {"last_active_us", 0}}});
  // A negative amount is not structure: it restarts at 0 and is named; the owner is kept.
  std::vector<std::string> dropped;
  auto neg = GpuLedger::from_json(j, {}, &dropped);
  ASSERT_TRUE(neg.ok()) << neg.error().message;
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_NE(dropped[0].find("\"allocated_seconds\" was -1.0"), std::string::npos) << dropped[0];
  ASSERT_EQ(neg->owners().size(), 1u);
  EXPECT_DOUBLE_EQ(neg->owners().begin()->second.allocated_seconds, 0);
}

// Reproduced with fuzz_ledger_state: integers were read with a plain cast, undefined for 1e300 and
// wrapping for -1, so a damaged state file restored garbage counters instead of being refused.
TEST(GpuLedger, IntegersOutOfRangeAreAnError) {
  GpuLedger l = started_ledger();
  l.advance(TickBuilder{kT0, 5, 0.5, 300, {{42, owner("nlp", "dana"), 8e9}}, {{42, 0.5}}}.build());
  const nlohmann::json good = l.to_json();
  ASSERT_TRUE(GpuLedger::from_json(good, {}).ok());
  struct Case {
    std::function<void(nlohmann::json&)> damage;
    const char* field;
  };
  const Case cases[] = {
      {[](nlohmann::json& j) { j["cursor_us"] = 1e300; }, "\"cursor_us\""},
      {[](nlohmann::json& j) { j["cursor_us"] = 1.5; }, "\"cursor_us\""},
      {[](nlohmann::json& j) { j["gaps"] = -1; }, "\"gaps\""},
      {[](nlohmann::json& j) { j["processes"][0]["pid"] = -1; }, "\"pid\""},
      {[](nlohmann::json& j) { j["processes"][0]["pid"] = 1ULL << 40; }, "\"pid\""},
      {[](nlohmann::json& j) { j["owners"][0]["last_active_us"] = -1e300; }, "\"last_active_us\""},
  };
  for (const Case& c : cases) {
    nlohmann::json j = good;
    c.damage(j);
    auto r = GpuLedger::from_json(j, {});
    ASSERT_FALSE(r.ok()) << c.field;
    EXPECT_NE(r.error().message.find(c.field), std::string::npos) << r.error().message;
  }
}

TEST(GpuLedger, PruneDropsOwnersIdleSinceTheCutoff) {
  GpuLedger l = started_ledger();
  l.advance(TickBuilder{kT0, 5, 0.5, 300, {{1, owner("old"), 0}}, {{1, 0.5}}}.build());
  l.advance(TickBuilder{kT0 + 5 * kPeriod, 5, 0.5, 300, {{2, owner("new"), 0}}, {{2, 0.5}}}.build());
  EXPECT_EQ(l.prune(kT0 + 10 * kPeriod), 1u);
  EXPECT_FALSE(l.owners().count(owner("old")));
  EXPECT_TRUE(l.owners().count(owner("new")));
}

}  // namespace
}  // namespace gpumeter
