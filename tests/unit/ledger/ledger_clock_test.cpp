// The ledger against steps of the wall clock, which the driver's sample timestamps follow.
#include "ledger/ledger.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpumeter {
namespace {

constexpr std::int64_t kT0 = 1'700'000'000'000'000;  // µs
constexpr std::int64_t kPeriod = 200'000;
constexpr std::int64_t kHour = 3'600'000'000;

OwnerLabels owner(std::string project) {
  OwnerLabels o;
  o.project = std::move(project);
  return o;
}

// `periods` sample periods after `start` (sample clock), one process with half the GPU.
LedgerTick samples_tick(std::int64_t start, int periods, std::int64_t step_us = 0) {
  LedgerTick t;
  t.wall_us = start + periods * kPeriod;
  t.processes = {{7, owner("nlp"), 1e9}};
  t.utilization_samples_supported = true;
  t.power_samples_supported = true;
  t.process_samples_supported = true;
  t.clock_step_us = step_us;
  for (int i = 1; i <= periods; ++i) {
    const std::int64_t ts = start + i * kPeriod;
    t.utilization_samples.push_back({ts, 0.5});
    t.power_samples.push_back({ts, 200});
    t.process_samples.push_back({7, ts, 0.5, 0});
  }
  return t;
}

double allocated_sum(const GpuLedger& l) {
  double sum = 0;
  for (const auto& [o, t] : l.owners()) sum += t.allocated_seconds;
  return sum;
}

GpuLedger started() {
  GpuLedger l(GpuLedgerOptions{70, 10'000'000});
  l.advance(samples_tick(kT0 - kPeriod, 1));  // sets the cursor at kT0
  l.advance(samples_tick(kT0, 5));
  EXPECT_NEAR(l.covered_seconds(), 1.0, 1e-9);
  return l;
}

TEST(LedgerClock, AStepBackWhileRunningNeitherFreezesNorCountsTwice) {
  GpuLedger l = started();
  // The clock went back an hour; the next samples are stamped on the new clock.
  const std::int64_t resumed = kT0 + 5 * kPeriod - kHour;
  l.advance(samples_tick(resumed, 5, -kHour));
  EXPECT_NEAR(l.covered_seconds(), 2.0, 1e-9);  // the next five periods, once each
  EXPECT_EQ(l.gap_seconds(), 0);
  EXPECT_EQ(l.cursor_us(), resumed + 5 * kPeriod);
  l.advance(samples_tick(resumed + 5 * kPeriod, 5));
  EXPECT_NEAR(l.covered_seconds(), 3.0, 1e-9);
  EXPECT_NEAR(allocated_sum(l), l.covered_seconds(), 1e-9);
}

TEST(LedgerClock, AStepForwardWhileRunningIsNotAGap) {
  GpuLedger l = started();
  const std::int64_t resumed = kT0 + 5 * kPeriod + kHour;
  l.advance(samples_tick(resumed, 5, kHour));
  EXPECT_NEAR(l.covered_seconds(), 2.0, 1e-9);
  EXPECT_EQ(l.gap_seconds(), 0);
  EXPECT_NEAR(allocated_sum(l), l.covered_seconds(), 1e-9);
}

TEST(LedgerClock, SamplesLostAroundAStepAreAGapOfTheirRealLength) {
  GpuLedger l = started();
  // Back an hour, and the first 3 s of samples after the cursor were never read.
  const std::int64_t resumed = kT0 + 5 * kPeriod - kHour + 3'000'000;
  l.advance(samples_tick(resumed, 5, -kHour));
  EXPECT_NEAR(l.gap_seconds(), 3.2, 1e-9);  // up to the first sample read, which ends the hole
  EXPECT_NEAR(l.covered_seconds(), 1.8, 1e-9);
  EXPECT_NEAR(allocated_sum(l), l.covered_seconds(), 1e-9);
}

TEST(LedgerClock, AStepForwardDoesNotPruneOwners) {
  GpuLedger l = started();
  const std::int64_t step = 48 * kHour;  // longer than the default retention of 24 h
  // The process ended with the step: its owner is not charged after it, only __idle__.
  LedgerTick after = samples_tick(kT0 + 5 * kPeriod + step, 1, step);
  after.processes.clear();
  after.process_samples.clear();
  l.advance(after);
  ASSERT_TRUE(l.owners().count(owner("nlp")));
  const std::int64_t now = kT0 + 6 * kPeriod + step;
  EXPECT_EQ(l.prune(now - 24 * kHour), 0u);
  EXPECT_TRUE(l.owners().count(owner("nlp")));
  EXPECT_NEAR(allocated_sum(l), l.covered_seconds(), 1e-9);
}

// A state file saved under a clock an hour ahead: its cursor is in the future. The ledger must
// not wait an hour for the clock to catch up.
TEST(LedgerClock, AFutureCursorFromTheStateFileRestartsFromNow) {
  GpuLedger saved = started();
  auto l = GpuLedger::from_json(saved.to_json(), GpuLedgerOptions{70, 10'000'000});
  ASSERT_TRUE(l.ok());
  const std::int64_t now = kT0 - kHour;
  const AdvanceResult r = l->advance(samples_tick(now - 100 * kPeriod, 100));  // the whole buffer
  EXPECT_EQ(r.cursor_ahead_us, kT0 + 5 * kPeriod - now);
  EXPECT_EQ(l->cursor_us(), now);
  EXPECT_EQ(l->gaps(), saved.gaps() + 1);  // of unknown length
  const double covered = l->covered_seconds();
  l->advance(samples_tick(now, 5));
  EXPECT_NEAR(l->covered_seconds(), covered + 1.0, 1e-9);
  EXPECT_NEAR(allocated_sum(*l), l->covered_seconds(), 1e-9);
}

LedgerTick polled_tick(std::int64_t wall_us, std::int64_t step_us = 0) {
  LedgerTick t;
  t.wall_us = wall_us;
  t.processes = {{7, owner("nlp"), 1e9}};
  t.utilization_ratio = 0.5;
  t.power_watts = 200;
  t.clock_step_us = step_us;
  return t;
}

TEST(LedgerClock, PolledAStepBackWhileRunningKeepsIntegrating) {
  GpuLedger l(GpuLedgerOptions{70, 10'000'000});
  l.advance(polled_tick(kT0));
  l.advance(polled_tick(kT0 + 1'000'000));
  EXPECT_NEAR(l.covered_seconds(), 1.0, 1e-9);
  l.advance(polled_tick(kT0 + 2'000'000 - kHour, -kHour));
  EXPECT_NEAR(l.covered_seconds(), 2.0, 1e-9);
  EXPECT_EQ(l.gap_seconds(), 0);
}

TEST(LedgerClock, PolledAFutureCursorRestartsFromNow) {
  GpuLedger saved(GpuLedgerOptions{70, 10'000'000});
  saved.advance(polled_tick(kT0));
  saved.advance(polled_tick(kT0 + 1'000'000));
  auto l = GpuLedger::from_json(saved.to_json(), GpuLedgerOptions{70, 10'000'000});
  ASSERT_TRUE(l.ok());
  const AdvanceResult r = l->advance(polled_tick(kT0 - kHour));
  EXPECT_EQ(r.cursor_ahead_us, kHour + 1'000'000);
  l->advance(polled_tick(kT0 - kHour + 1'000'000));
  EXPECT_NEAR(l->covered_seconds(), 2.0, 1e-9);
}

TEST(LedgerClock, PolledASmallStepBackIsWaitedOutNotARestart) {
  GpuLedger l(GpuLedgerOptions{70, 10'000'000});
  l.advance(polled_tick(kT0));
  l.advance(polled_tick(kT0 + 1'000'000));
  const std::uint64_t gaps = l.gaps();
  // Below the step threshold: no step was reported, and it is no future cursor either.
  EXPECT_EQ(l.advance(polled_tick(kT0 + 900'000)).cursor_ahead_us, 0);
  EXPECT_EQ(l.gaps(), gaps);
  l.advance(polled_tick(kT0 + 2'000'000));
  EXPECT_NEAR(l.covered_seconds(), 2.0, 1e-9);
}

nlohmann::json valid_json() { return started().to_json(); }

// An amount that cannot be true restarts at 0 and is named, the rest kept; an integer that
// cannot be true, or a cursor, is structure and refuses the ledger.
TEST(LedgerClock, TheLoaderDropsAmountsThatCannotBeTrueAndRefusesBadStructure) {
  for (const char* key : {"covered_seconds", "busy_seconds", "energy_joules", "gap_seconds"}) {
    for (const nlohmann::json& bad : {nlohmann::json(-1e9), nlohmann::json(nullptr), nlohmann::json("12")}) {
      nlohmann::json j = valid_json();
      j[key] = bad;
      std::vector<std::string> dropped;
      auto l = GpuLedger::from_json(j, {}, &dropped);
      ASSERT_TRUE(l.ok()) << key << " " << l.error().message;
      ASSERT_EQ(dropped.size(), 1u) << key;
      EXPECT_NE(dropped[0].find(key), std::string::npos) << dropped[0];
      EXPECT_EQ(l->owners().size(), valid_json()["owners"].size()) << key;
    }
  }
  std::vector<std::string> dropped;
  nlohmann::json j = valid_json();
  j["owners"][0]["busy_seconds"] = -1;
  auto owner_bad = GpuLedger::from_json(j, {}, &dropped);
  ASSERT_TRUE(owner_bad.ok());
  EXPECT_EQ(owner_bad->owners().size(), j["owners"].size());
  j = valid_json();
  j["processes"][0]["memory_bytes"] = -5;
  EXPECT_TRUE(GpuLedger::from_json(j, {}, &dropped).ok());
  EXPECT_EQ(dropped.size(), 2u);
  j = valid_json();
  j["cursor_us"] = -1;
  EXPECT_FALSE(GpuLedger::from_json(j, {}).ok());
  j = valid_json();
  j.erase("covered_seconds");
  EXPECT_FALSE(GpuLedger::from_json(j, {}).ok());
}

TEST(LedgerClock, TheLoaderRejectsAnOwnerListedTwice) {
  nlohmann::json j = valid_json();
  ASSERT_FALSE(j["owners"].empty());
  j["owners"].push_back(j["owners"][0]);
  auto l = GpuLedger::from_json(j, {});
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.error().message.find("twice"), std::string::npos) << l.error().message;
}

}  // namespace
}  // namespace gpumeter
