// The ledger against a synthetic driver that samples a process only in periods it was active in
// (docs/ledger.md, "Per-process records"): a bursty process's record is its share while it ran,
// and must not take its steady neighbour's busy time.
#include <gtest/gtest.h>

#include <map>

#include "ledger/ledger.h"

namespace gpumeter {
namespace {

constexpr std::int64_t kT0 = 1'700'000'000'000'000;  // µs, a multiple of the period
constexpr std::int64_t kPeriod = 200'000;

OwnerLabels owner(const std::string& project) {
  OwnerLabels o;
  o.project = project;
  return o;
}

// "bursty" (pid 1) at 40 % on [k·7 s + 0.5 s, k·7 s + 3.3 s), idle otherwise; "steady" (pid 2) at
// 50 % throughout. The device is busy by their sum; each is sampled on the device's grid.
bool bursty_active(std::int64_t period_end) {
  const std::int64_t mid = (period_end - kT0 - kPeriod / 2) % 7'000'000;
  return mid >= 500'000 && mid < 3'300'000;
}
double utilization(std::int64_t period_end) { return 0.5 + (bursty_active(period_end) ? 0.4 : 0.0); }

class ActiveOnlyDriver {
 public:
  LedgerTick query(std::int64_t now) {
    LedgerTick t;
    t.wall_us = now;
    t.utilization_samples_supported = t.power_samples_supported = t.process_samples_supported = true;
    std::int64_t bursty_last = 0;
    std::int64_t steady_last = 0;
    for (std::int64_t ts = samples_seen_ + kPeriod; ts <= now; ts += kPeriod) {
      t.utilization_samples.push_back({ts, utilization(ts)});
      t.power_samples.push_back({ts, 100 + 300 * utilization(ts)});
      samples_seen_ = ts;
    }
    for (std::int64_t ts = (last_seen_ / kPeriod + 1) * kPeriod; ts <= now; ts += kPeriod) {
      if (bursty_active(ts)) bursty_last = ts;
      steady_last = ts;
    }
    t.processes = {{1, owner("bursty"), 1e9}, {2, owner("steady"), 1e9}};
    const std::int64_t from = last_seen_;
    if (bursty_last > 0) t.process_samples.push_back({1, bursty_last, 0.4, 0, from});
    if (steady_last > 0) t.process_samples.push_back({2, steady_last, 0.5, 0, from});
    last_seen_ = std::max({last_seen_, bursty_last, steady_last});
    return t;
  }

 private:
  std::int64_t last_seen_ = kT0 - 2 * kPeriod;
  std::int64_t samples_seen_ = kT0 - 2 * kPeriod;
};

TEST(GpuLedgerActiveRecords, ABurstyProcessDoesNotTakeItsNeighboursBusyTime) {
  for (std::int64_t spacing : {1'000'000, 5'000'000}) {
    SCOPED_TRACE("spacing " + std::to_string(spacing / 1000) + " ms");
    ActiveOnlyDriver driver;
    GpuLedger ledger{GpuLedgerOptions{60, 10'000'000}};
    // The first burst ends inside a window: its stale record tells the ledger which driver it
    // has. From the second cycle on (14 s), every burst's start and end lie inside windows.
    std::map<OwnerLabels, LedgerTotals> before;
    std::int64_t from = 0;
    int told = 0;  // ticks that said the records are active-only: one
    for (std::int64_t t = 0; t <= 70'000'000; t += spacing) {
      if (ledger.advance(driver.query(kT0 + t + 37'000)).active_only_record_age_us > 0) ++told;
      if (from == 0 && ledger.cursor_us() >= kT0 + 14'000'000) {
        before = ledger.owners();
        from = ledger.cursor_us();
      }
    }
    ASSERT_GT(from, 0);
    EXPECT_EQ(told, 1);
    double want_bursty = 0;
    double want_steady = 0;
    for (std::int64_t ts = from + kPeriod; ts <= ledger.cursor_us(); ts += kPeriod) {
      want_bursty += bursty_active(ts) ? 0.4 * 0.2 : 0.0;
      want_steady += 0.5 * 0.2;
    }
    const double bursty = ledger.owners().at(owner("bursty")).busy_seconds - before[owner("bursty")].busy_seconds;
    const double steady = ledger.owners().at(owner("steady")).busy_seconds - before[owner("steady")].busy_seconds;
    EXPECT_NEAR(bursty, want_bursty, 1e-6);
    EXPECT_NEAR(steady, want_steady, 1e-6);
  }
}

}  // namespace
}  // namespace gpumeter
