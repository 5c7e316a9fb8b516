// DrmClientLedger: DRM clients' engine counters become busy time between a GPU's readings, and
// no increase is trusted beyond what the client could have used (ledger/drm_usage.h).

#include "ledger/drm_usage.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace gpumeter {
namespace {

constexpr std::int64_t kSecond = 1'000'000;

DrmClient client(std::uint64_t id, std::uint64_t busy_ns, unsigned engines = 2) {
  DrmClient c;
  c.pid = 20;
  c.pdev = "0000:c1:00.0";
  c.client_id = id;
  c.busy_ns = busy_ns;
  c.engines = engines;
  return c;
}

double busy(const DrmRound& r) { return r.by_pid.count(20) ? r.by_pid.at(20).busy_seconds : 0; }

// A client that appears after the GPU's first reading with its counter at 2^64-1 ns (584
// years) is billed at most the interval times its engines, plus one lag's worth.
TEST(DrmClientLedger, ANewClientsCounterIsBoundedByTheIntervalAndItsEngines) {
  DrmClientLedger l;
  std::int64_t t = 1'800'000'000 * kSecond;
  EXPECT_EQ(l.advance({}, t).interval_s, 0);
  t += 2 * kSecond;
  const DrmRound r = l.advance({client(7, UINT64_MAX)}, t);
  EXPECT_EQ(r.interval_s, 2);
  EXPECT_DOUBLE_EQ(busy(r), 6.0);  // (2 s + 1 s of lag) x 2 engines
  t += 2 * kSecond;
  EXPECT_DOUBLE_EQ(busy(l.advance({client(7, UINT64_MAX)}, t)), 0);
}

// A client seen before and missed by one scan is billed its increase when it comes back, not
// its whole counter again.
TEST(DrmClientLedger, AClientMissedByAScanIsRememberedNotBilledAgain) {
  DrmClientLedger l;
  std::int64_t t = 1'800'000'000 * kSecond;
  (void)l.advance({client(7, 0)}, t);
  double total = 0;
  for (std::uint64_t used : {1'000'000'000ull, 2'000'000'000ull}) {
    t += 2 * kSecond;
    total += busy(l.advance({client(7, used)}, t));
  }
  t += 2 * kSecond;
  total += busy(l.advance({}, t));  // its fd pointed away from /dev/dri
  t += 2 * kSecond;
  total += busy(l.advance({client(7, 8'000'000'000)}, t));
  EXPECT_DOUBLE_EQ(total, 8.0);  // not 8 + 2
}

// A small decrease is lag (held at the larger value); a large one is a counter that started
// again from zero, whose new use is billed.
TEST(DrmClientLedger, LagIsHeldAndARestartFromZeroIsCounted) {
  DrmClientLedger l;
  std::int64_t t = 1'800'000'000 * kSecond;
  (void)l.advance({client(7, 8'000'000'000)}, t);
  t += kSecond;
  EXPECT_DOUBLE_EQ(busy(l.advance({client(7, 7'900'000'000)}, t)), 0);
  t += kSecond;
  EXPECT_DOUBLE_EQ(busy(l.advance({client(7, 8'100'000'000)}, t)), 0.1);
  t += kSecond;
  EXPECT_DOUBLE_EQ(busy(l.advance({client(7, 0)}, t)), 0);
  t += kSecond;
  EXPECT_DOUBLE_EQ(busy(l.advance({client(7, 1'250'000'000)}, t)), 1.25);
}

// Counters read a moment stale (a scan shared between GPU workers, a simulated tree written
// every 100 ms) move by more than an interval's wall time at one reading and less at the next:
// the credit unused carries, so nothing is lost; a client never gets more than its wall time
// times its engines, plus one lag's worth, however long it runs.
TEST(DrmClientLedger, StaleReadsLoseNothingAndNoClientOutrunsTheWallClock) {
  DrmClientLedger l;
  std::int64_t t = 1'800'000'000 * kSecond;
  (void)l.advance({client(7, 0, 1)}, t);
  double total = 0;
  std::uint64_t counter = 0;
  for (int i = 0; i < 100; ++i) {
    t += 200'000;
    counter += i % 2 == 0 ? 100'000'000 : 300'000'000;  // 0.1 s, then 0.3 s, over 0.2 s each
    total += busy(l.advance({client(7, counter, 1)}, t));
  }
  EXPECT_NEAR(total, 20.0, 1e-9);
  // A planted counter that grows 10 s a reading is billed its 20 s of wall time, and at most one
  // lag's worth of credit it carried in (0.9 s here), not 1000 s.
  double planted = 0;
  for (int i = 0; i < 100; ++i) {
    t += 200'000;
    counter += 10'000'000'000;
    planted += busy(l.advance({client(7, counter, 1)}, t));
  }
  EXPECT_NEAR(planted, 20.9, 1e-9);
}

TEST(DrmClientLedger, ForgetsClientsNotSeenForLong) {
  DrmClientLedger l;
  std::int64_t t = 1'800'000'000 * kSecond;
  (void)l.advance({client(7, 1'000'000'000)}, t);
  t += kDrmClientMemoryUs + kSecond;
  (void)l.advance({}, t);
  t += kSecond;
  // Forgotten, so its counter counts as new again, within the bound of one interval.
  EXPECT_DOUBLE_EQ(busy(l.advance({client(7, 1'000'000'000)}, t)), 1.0);
}

}  // namespace
}  // namespace gpumeter
