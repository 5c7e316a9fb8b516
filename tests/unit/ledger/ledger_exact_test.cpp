// Exact busy time (LedgerProcess::busy_seconds, a DRM client's engine time) beside sampled
// shares in polled mode, as the AMD GPUs are integrated.

#include <gtest/gtest.h>

#include "ledger/ledger.h"

namespace gpumeter {
namespace {

constexpr std::int64_t kT0 = 1'700'000'000'000'000;  // µs

OwnerLabels owner(std::string project) {
  OwnerLabels o;
  o.project = std::move(project);
  return o;
}

// A polled tick (no sample buffers), `wall_us` after kT0, with a KFD-like process 1 whose share
// is sampled and a graphics client 2 with exact busy time.
LedgerTick tick(std::int64_t wall_us, double util, std::optional<double> exact, double sampled_share = 0) {
  LedgerTick t;
  t.wall_us = kT0 + wall_us;
  t.utilization_ratio = util;
  t.power_watts = 300;
  t.process_samples_supported = true;
  LedgerProcess compute{1, owner("compute"), 1e9};
  LedgerProcess graphics{2, owner("graphics"), 2e9};
  graphics.busy_seconds = exact;
  t.processes = {compute, graphics};
  if (sampled_share > 0) t.process_samples.push_back({1, t.wall_us, sampled_share, 0, t.wall_us - 1'000'000});
  return t;
}

TEST(GpuLedgerExact, ExactBusyIsChargedAsItIsAndTheRestBySampledShares) {
  GpuLedger l(GpuLedgerOptions{100, 10'000'000});
  l.advance(tick(0, 0.5, 0.3));  // the first tick sets the cursor: nothing charged
  l.advance(tick(1'000'000, 0.8, 0.25, 0.55));
  const auto& o = l.owners();
  EXPECT_NEAR(o.at(owner("graphics")).busy_seconds, 0.25, 1e-12);
  EXPECT_NEAR(o.at(owner("compute")).busy_seconds, 0.8 - 0.25, 1e-12);
  EXPECT_NEAR(l.busy_seconds(), 0.8, 1e-12);
  EXPECT_EQ(o.count(unattributed_owner()), 0u);
  // Energy above idle follows busy time: (300 − 100) W × 1 s, 0.25 : 0.55.
  EXPECT_NEAR(o.at(owner("graphics")).energy_joules, 50 + 200 * 0.25 / 0.8, 1e-9);
  EXPECT_NEAR(o.at(owner("compute")).energy_joules, 50 + 200 * 0.55 / 0.8, 1e-9);
  EXPECT_NEAR(o.at(owner("graphics")).allocated_seconds, 0.5, 1e-12);
  EXPECT_NEAR(o.at(owner("graphics")).memory_byte_seconds, 2e9, 1e-3);
}

TEST(GpuLedgerExact, ExactTimeAbovePolledUtilizationRaisesTheGpusBusyTime) {
  // The polled value is an instant; the engine counter is the integral. A lone graphics client
  // busier than the poll says keeps its exact time.
  GpuLedger l(GpuLedgerOptions{0, 10'000'000});
  l.advance(tick(0, 0.2, std::nullopt));
  l.advance(tick(1'000'000, 0.2, 0.6));
  EXPECT_NEAR(l.owners().at(owner("graphics")).busy_seconds, 0.6, 1e-12);
  EXPECT_NEAR(l.busy_seconds(), 0.6, 1e-12);
  EXPECT_EQ(l.owners().at(owner("compute")).busy_seconds, 0);  // no sampled share: nothing left
}

TEST(GpuLedgerExact, AGpuWithOnlyExactClientsIsAsBusyAsTheirEngineTime) {
  // The polled utilization of a GPU used by graphics clients alone is an instant: its error would
  // go to __unattributed__, busy time and energy alike.
  GpuLedger l(GpuLedgerOptions{100, 10'000'000});
  LedgerTick t = tick(0, 0.5, 0.0);
  t.processes.erase(t.processes.begin());  // the graphics client alone
  l.advance(t);
  t = tick(1'000'000, 0.5, 0.3);
  t.processes.erase(t.processes.begin());
  l.advance(t);
  EXPECT_NEAR(l.owners().at(owner("graphics")).busy_seconds, 0.3, 1e-12);
  EXPECT_NEAR(l.busy_seconds(), 0.3, 1e-12);
  EXPECT_EQ(l.owners().count(unattributed_owner()), 0u);
  EXPECT_NEAR(l.owners().at(owner("graphics")).energy_joules, 300, 1e-9);
}

TEST(GpuLedgerExact, WithoutSharesTheRestIsUnattributed) {
  GpuLedger l(GpuLedgerOptions{0, 10'000'000});
  l.advance(tick(0, 0.5, std::nullopt));
  l.advance(tick(1'000'000, 0.5, 0.1));
  EXPECT_NEAR(l.owners().at(owner("graphics")).busy_seconds, 0.1, 1e-12);
  EXPECT_NEAR(l.owners().at(unattributed_owner()).busy_seconds, 0.4, 1e-12);
}

TEST(GpuLedgerExact, ExactTimeOfAGapIsDropped) {
  GpuLedger l(GpuLedgerOptions{0, 10'000'000});
  l.advance(tick(0, 0.5, std::nullopt));
  l.interrupt();
  l.advance(tick(1'000'000, 0.5, 0.4, 0.5));  // a failed collection before: a gap
  EXPECT_EQ(l.owners().count(owner("graphics")), 0u);
  l.advance(tick(2'000'000, 0.5, 0.2, 0.5));
  EXPECT_NEAR(l.owners().at(owner("graphics")).busy_seconds, 0.2, 1e-12);
  EXPECT_NEAR(l.owners().at(owner("compute")).busy_seconds, 0.3, 1e-12);
}

TEST(GpuLedgerExact, ExactTimeOfATickThatMovesNoTimeWaitsForTheNext) {
  GpuLedger l(GpuLedgerOptions{0, 10'000'000});
  l.advance(tick(0, 0.5, std::nullopt));
  l.advance(tick(0, 0.5, 0.05));  // same instant: nothing integrated yet
  l.advance(tick(1'000'000, 0.5, 0.15, 0.5));
  EXPECT_NEAR(l.owners().at(owner("graphics")).busy_seconds, 0.2, 1e-12);
}

TEST(GpuLedgerExact, AClientListedForTheFirstTimeKeepsItsTime) {
  // No start time and not listed before: not known to have been there, but its engine time is
  // its own.
  GpuLedger l(GpuLedgerOptions{0, 10'000'000});
  LedgerTick first = tick(0, 0.5, std::nullopt);
  first.processes.pop_back();
  l.advance(first);
  l.advance(tick(1'000'000, 0.5, 0.3, 0.5));
  EXPECT_NEAR(l.owners().at(owner("graphics")).busy_seconds, 0.3, 1e-12);
  EXPECT_NEAR(l.owners().at(owner("compute")).busy_seconds, 0.2, 1e-12);
  double allocated = 0;
  for (const auto& [o, t] : l.owners()) allocated += t.allocated_seconds;
  EXPECT_NEAR(allocated, l.covered_seconds(), 1e-12);
}

}  // namespace
}  // namespace gpumeter
