// The ledger against a synthetic driver with real NVML semantics: one per-process record per
// query, the process's average since the query's lastSeenTimeStamp, stamped with the process's
// own last sample time (off the device's sample grid).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "ledger/ledger.h"

namespace gpumeter {
namespace {

constexpr std::int64_t kT0 = 1'700'000'000'000'000;  // µs, a multiple of the period
constexpr std::int64_t kPeriod = 200'000;
constexpr double kIdleW = 60;

OwnerLabels owner(const std::string& project) {
  OwnerLabels o;
  o.project = project;
  return o;
}

struct SyntheticProcess {
  unsigned pid;
  std::string project;
  int percent;            // SM share, whole percent (what the driver reports)
  std::int64_t offset;    // its samples are stamped at k·period + offset
  std::int64_t start_us;  // runs over [start, end) of the run's clock
  std::int64_t end_us;
  double memory_bytes;
};

// Device utilization of the period ending at kT0 + k·period: varies every period.
double utilization(std::int64_t k) { return 0.35 + 0.6 * static_cast<double>((k * 7919) % 101) / 100.0; }
double power(std::int64_t k) { return 90 + 250 * utilization(k); }

class SyntheticDriver {
 public:
  explicit SyntheticDriver(std::vector<SyntheticProcess> procs) : procs_(std::move(procs)) {}

  bool running(const SyntheticProcess& p, std::int64_t t) const { return t - kT0 >= p.start_us && t - kT0 < p.end_us; }

  // One collection at time `now` (µs): what a backend passing the newest record time as
  // lastSeenTimeStamp, and the newest sample times to nvmlDeviceGetSamples, reads.
  LedgerTick query(std::int64_t now) {
    LedgerTick t;
    t.wall_us = now;
    t.utilization_samples_supported = t.power_samples_supported = t.process_samples_supported = true;
    for (std::int64_t k = (samples_seen_ - kT0) / kPeriod + 1; kT0 + k * kPeriod <= now; ++k) {
      t.utilization_samples.push_back({kT0 + k * kPeriod, utilization(k)});
      t.power_samples.push_back({kT0 + k * kPeriod, power(k)});
      samples_seen_ = kT0 + k * kPeriod;
    }
    std::int64_t newest = last_seen_;
    for (const auto& p : procs_) {
      if (running(p, now)) t.processes.push_back({p.pid, owner(p.project), p.memory_bytes});
      // The process's last sample in (lastSeen, now] while it ran; none: no record.
      std::int64_t last = 0;
      for (std::int64_t ts = (now - p.offset) / kPeriod * kPeriod + p.offset; ts > last_seen_; ts -= kPeriod) {
        if (ts <= now && running(p, ts - 1)) {
          last = ts;
          break;
        }
        if (ts < kT0 + p.start_us) break;
      }
      if (last == 0) continue;
      t.process_samples.push_back({p.pid, last, p.percent / 100.0, 0, last_seen_});
      newest = std::max(newest, last);
    }
    last_seen_ = newest;
    return t;
  }

 private:
  std::vector<SyntheticProcess> procs_;
  std::int64_t last_seen_ = 0;
  std::int64_t samples_seen_ = kT0 - 20'000'000;  // the buffer holds history before the agent
};

// The exact per-owner integrals of the synthetic load over the periods ending in (from, to].
std::map<OwnerLabels, LedgerTotals> truth(const std::vector<SyntheticProcess>& procs, std::int64_t from,
                                          std::int64_t to) {
  std::map<OwnerLabels, LedgerTotals> out;
  const double d = static_cast<double>(kPeriod) / 1e6;
  for (std::int64_t k = (from - kT0) / kPeriod + 1; kT0 + k * kPeriod <= to; ++k) {
    const std::int64_t mid = kT0 + k * kPeriod - kPeriod / 2;
    std::vector<const SyntheticProcess*> on;
    double sum = 0;
    for (const auto& p : procs) {
      if (mid - kT0 >= p.start_us && mid - kT0 < p.end_us) {
        on.push_back(&p);
        sum += p.percent;
      }
    }
    const double u = utilization(k), w = power(k);
    if (on.empty()) {
      out[idle_owner()].allocated_seconds += d;
      out[idle_owner()].energy_joules += w * d;
      out[unattributed_owner()].busy_seconds += u * d;
      continue;
    }
    for (const auto* p : on) {
      auto& t = out[owner(p->project)];
      const double share = sum > 0 ? p->percent / sum : 0;
      t.allocated_seconds += d / static_cast<double>(on.size());
      t.busy_seconds += u * d * share;
      t.memory_byte_seconds += p->memory_bytes * d;
      t.energy_joules += (kIdleW / static_cast<double>(on.size()) + (w - kIdleW) * share) * d;
    }
    if (sum == 0) out[unattributed_owner()].busy_seconds += u * d;
  }
  return out;
}

struct Replay {
  GpuLedger ledger{GpuLedgerOptions{kIdleW, 10'000'000}};
  std::int64_t started_at = 0;
};

// Queries every `spacing` for `length`, at a jittered offset from the device's sample grid.
Replay replay(const std::vector<SyntheticProcess>& procs, std::int64_t spacing, std::int64_t length) {
  SyntheticDriver driver(procs);
  Replay r;
  for (std::int64_t t = 0; t <= length; t += spacing) {
    r.ledger.advance(driver.query(kT0 + t + 37'000));
    if (t == 0) r.started_at = r.ledger.cursor_us();
  }
  EXPECT_EQ(r.started_at, kT0);
  return r;
}

void expect_totals_near(const std::map<OwnerLabels, LedgerTotals>& got, const std::map<OwnerLabels, LedgerTotals>& want,
                        double rel, const std::string& what) {
  for (const auto& [o, w] : want) {
    SCOPED_TRACE(what + " owner " + o.project);
    auto it = got.find(o);
    const LedgerTotals g = it != got.end() ? it->second : LedgerTotals{};
    EXPECT_NEAR(g.allocated_seconds, w.allocated_seconds, rel * std::max(1.0, w.allocated_seconds));
    EXPECT_NEAR(g.busy_seconds, w.busy_seconds, rel * std::max(1.0, w.busy_seconds));
    EXPECT_NEAR(g.memory_byte_seconds, w.memory_byte_seconds, rel * std::max(1.0, w.memory_byte_seconds));
    EXPECT_NEAR(g.energy_joules, w.energy_joules, rel * std::max(1.0, w.energy_joules));
  }
  for (const auto& [o, g] : got) {
    if (!want.count(o)) {
      SCOPED_TRACE(what + " unexpected owner " + o.project);
      EXPECT_NEAR(g.busy_seconds + g.allocated_seconds, 0, rel);
    }
  }
}

const std::vector<SyntheticProcess> kSteady = {
    // Samples stamped at three offsets within the device period: each query's window starts
    // at the latest, so the two others have a hole to carry their share over.
    // They started before the agent, so its first reading already has their records.
    {11, "a", 45, 30'000, -60'000'000, 1'000'000'000, 2e9},
    {12, "b", 30, 110'000, -60'000'000, 1'000'000'000, 4e9},
    {13, "c", 15, 170'000, -60'000'000, 1'000'000'000, 1e9},
    {14, "idle", 0, 90'000, -60'000'000, 1'000'000'000, 3e9},  // 0 %: present, never busy
};

TEST(GpuLedgerWindows, OwnerTotalsAreExactAndTheSameAtEveryQuerySpacing) {
  const std::int64_t length = 120'000'000;
  for (std::int64_t spacing : {1'000'000, 5'000'000, 30'000'000}) {
    Replay r = replay(kSteady, spacing, length);
    const std::string what = "spacing " + std::to_string(spacing / 1000) + " ms";
    EXPECT_NEAR(r.ledger.covered_seconds(), 120.0, 1e-9) << what;
    EXPECT_EQ(r.ledger.gaps(), 0u) << what;
    expect_totals_near(r.ledger.owners(), truth(kSteady, r.started_at, r.ledger.cursor_us()), 1e-9, what);
    EXPECT_FALSE(r.ledger.owners().count(unattributed_owner())) << what;
  }
}

TEST(GpuLedgerWindows, ALoneProcessKeepsItsBusyTimeAcrossTheHoleBeforeTheNextWindow) {
  // Two processes whose samples are stamped 150 ms apart: the later one's record sets the next
  // window start, so the earlier one has a 150 ms hole per query in which only its carried
  // share places the busy time.
  std::vector<SyntheticProcess> procs = {{21, "early", 60, 20'000, -60'000'000, 1'000'000'000, 0},
                                         {22, "late", 0, 170'000, -60'000'000, 1'000'000'000, 0}};
  // "late" is listed and sampled at 0 %: it sets the window start but takes no busy time.
  Replay r = replay(procs, 5'000'000, 60'000'000);
  const auto& early = r.ledger.owners().at(owner("early"));
  EXPECT_NEAR(early.busy_seconds, r.ledger.busy_seconds(), 1e-9);
  EXPECT_FALSE(r.ledger.owners().count(unattributed_owner()));
}

TEST(GpuLedgerWindows, ACarriedShareEndsWithinTheBound) {
  // "a" stops; "b" keeps running at 0 % so windows keep advancing. Busy time after a's last
  // sample and the carry bound has no share: it is unattributed, not charged to "a".
  std::vector<SyntheticProcess> procs = {{31, "a", 50, 30'000, -60'000'000, 10'000'000, 0},
                                         {32, "b", 0, 150'000, -60'000'000, 1'000'000'000, 0}};
  Replay r = replay(procs, 5'000'000, 30'000'000);
  const auto want = truth(procs, r.started_at, r.ledger.cursor_us());
  const double a_busy = r.ledger.owners().at(owner("a")).busy_seconds;
  const double bound = kCarryDevicePeriods * 0.2 * 0.95;  // 1.5 periods at the highest utilization
  EXPECT_GE(a_busy, want.at(owner("a")).busy_seconds - 1e-9);
  EXPECT_LE(a_busy, want.at(owner("a")).busy_seconds + bound);
  EXPECT_GT(want.at(unattributed_owner()).busy_seconds, 10.0);  // 20 s with no share at all
  EXPECT_NEAR(r.ledger.owners().at(unattributed_owner()).busy_seconds, want.at(unattributed_owner()).busy_seconds,
              bound);
}

TEST(GpuLedgerWindows, AListedProcessWithoutARecordHadNoShareInThatWindow) {
  GpuLedger l(GpuLedgerOptions{0, 10'000'000});
  auto tick = [&](std::int64_t from, int periods, std::vector<ProcessSample> recs) {
    LedgerTick t;
    t.wall_us = from + periods * kPeriod;
    t.processes = {{1, owner("a"), 0}, {2, owner("b"), 0}};
    t.utilization_samples_supported = t.power_samples_supported = t.process_samples_supported = true;
    for (int i = 1; i <= periods; ++i) {
      t.utilization_samples.push_back({from + i * kPeriod, 0.8});
      t.power_samples.push_back({from + i * kPeriod, 100});
    }
    t.process_samples = std::move(recs);
    return t;
  };
  l.advance(tick(kT0 - kPeriod, 1, {}));
  // First window: both ran. Second window: only b has a record.
  l.advance(tick(kT0, 25, {{1, kT0 + 25 * kPeriod, 0.4, 0, kT0}, {2, kT0 + 25 * kPeriod, 0.4, 0, kT0}}));
  l.advance(tick(kT0 + 25 * kPeriod, 25, {{2, kT0 + 50 * kPeriod, 0.8, 0, kT0 + 25 * kPeriod}}));
  EXPECT_NEAR(l.owners().at(owner("a")).busy_seconds, 0.8 * 5 / 2, 1e-9);
  EXPECT_NEAR(l.owners().at(owner("b")).busy_seconds, 0.8 * 5 / 2 + 0.8 * 5, 1e-9);
  EXPECT_NEAR(l.owners().at(owner("a")).allocated_seconds, 5.0, 1e-9);  // still listed: present
}

TEST(GpuLedgerWindows, SharesThatDoNotAddUpToUtilizationSplitItInProportion) {
  GpuLedger l(GpuLedgerOptions{100, 10'000'000});
  LedgerTick first;
  first.wall_us = kT0;
  first.utilization_samples_supported = first.power_samples_supported = first.process_samples_supported = true;
  first.utilization_samples = {{kT0, 0}};
  l.advance(first);
  LedgerTick t;
  t.wall_us = kT0 + 5 * kPeriod;
  t.processes = {{1, owner("a"), 0}, {2, owner("b"), 0}, {3, owner("c"), 0}};
  t.utilization_samples_supported = t.power_samples_supported = t.process_samples_supported = true;
  for (int i = 1; i <= 5; ++i) {
    t.utilization_samples.push_back({kT0 + i * kPeriod, 1.0});
    t.power_samples.push_back({kT0 + i * kPeriod, 400});
  }
  // Three equal jobs on a full GPU: the driver rounds each to 33 %, 99 % in all.
  for (unsigned pid : {1u, 2u, 3u}) t.process_samples.push_back({pid, kT0 + 5 * kPeriod, 0.33, 0, kT0});
  l.advance(t);
  for (const char* p : {"a", "b", "c"}) {
    EXPECT_NEAR(l.owners().at(owner(p)).busy_seconds, 1.0 / 3, 1e-12) << p;
    EXPECT_NEAR(l.owners().at(owner(p)).energy_joules, 400.0 / 3, 1e-9) << p;
  }
  EXPECT_FALSE(l.owners().count(unattributed_owner()));
}

TEST(GpuLedgerWindows, AProcessJoiningInsideAWindowDoesNotLoseBusyTimeToTheOther) {
  // A full GPU. "a" runs alone for 1 s, then "b" starts and takes 60 % of it for 1 s. One query
  // at 2 s: a's record averages its 100 % and its 40 % to 70 %; b's window starts at its start.
  // Split period by period with the window averages, a would keep 0.7 / 1.3 of the shared
  // second (1.54 s in all); the records say 1.4 s and 0.6 s.
  GpuLedger l(GpuLedgerOptions{0, 10'000'000});
  LedgerTick first;
  first.wall_us = kT0;
  first.utilization_samples_supported = first.power_samples_supported = first.process_samples_supported = true;
  first.utilization_samples = {{kT0, 1.0}};
  first.processes = {{1, owner("a"), 0, kT0 - 1'000'000}};
  l.advance(first);
  LedgerTick t;
  t.wall_us = kT0 + 10 * kPeriod;
  t.utilization_samples_supported = t.power_samples_supported = t.process_samples_supported = true;
  for (int i = 1; i <= 10; ++i) {
    t.utilization_samples.push_back({kT0 + i * kPeriod, 1.0});
    t.power_samples.push_back({kT0 + i * kPeriod, 300});
  }
  t.processes = {{1, owner("a"), 0, kT0 - 1'000'000}, {2, owner("b"), 0, kT0 + 5 * kPeriod}};
  t.process_samples = {{1, kT0 + 10 * kPeriod, 0.70, 0, kT0}, {2, kT0 + 10 * kPeriod, 0.60, 0, kT0}};
  l.advance(t);
  EXPECT_NEAR(l.owners().at(owner("a")).busy_seconds, 1.4, 1e-6);
  EXPECT_NEAR(l.owners().at(owner("b")).busy_seconds, 0.6, 1e-6);
  EXPECT_NEAR(l.owners().at(owner("a")).busy_seconds + l.owners().at(owner("b")).busy_seconds, l.busy_seconds(), 1e-12);
}

TEST(GpuLedgerWindows, EdgesInsideAWindowStayWithinOneWindow) {
  // A process that starts and stops between queries is placed by its listing and its record
  // window only: what it is charged may differ from the truth by at most one query window of
  // allocation at each edge, and the device's invariants stay exact.
  std::vector<SyntheticProcess> procs = {{41, "long", 40, 60'000, -60'000'000, 1'000'000'000, 1e9},
                                         {42, "short", 40, 140'000, 12'300'000, 31'700'000, 1e9}};
  for (std::int64_t spacing : {1'000'000, 5'000'000}) {
    Replay r = replay(procs, spacing, 60'000'000);
    auto want = truth(procs, r.started_at, r.ledger.cursor_us());
    const double window = static_cast<double>(spacing) / 1e6;
    const auto& got = r.ledger.owners().at(owner("short"));
    EXPECT_NEAR(got.allocated_seconds, want.at(owner("short")).allocated_seconds, 2 * window) << spacing;
    double alloc = 0, busy = 0;
    for (const auto& [o, t] : r.ledger.owners()) {
      alloc += t.allocated_seconds;
      busy += t.busy_seconds;
    }
    EXPECT_NEAR(alloc, r.ledger.covered_seconds(), 1e-9);
    EXPECT_NEAR(busy, r.ledger.busy_seconds(), 1e-9);
  }
}

TEST(GpuLedgerWindows, InvariantsHoldForRandomLoadsAndIrregularQueries) {
  // Processes that come and go with random shares and sample offsets, read at irregular
  // spacings: whatever the split, owners add up to the device's integrals exactly.
  for (unsigned seed : {1u, 2u, 3u, 4u, 5u}) {
    std::mt19937 rng(seed);
    auto uniform = [&](std::int64_t lo, std::int64_t hi) {
      return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
    };
    std::vector<SyntheticProcess> procs;
    for (unsigned i = 0; i < 6; ++i) {
      const std::int64_t start = uniform(-10'000'000, 50'000'000);
      procs.push_back({100 + i, "p" + std::to_string(i % 4), static_cast<int>(uniform(0, 60)), uniform(1, kPeriod - 1),
                       start, start + uniform(1'000'000, 60'000'000), 1e9 * static_cast<double>(i + 1)});
    }
    SyntheticDriver driver(procs);
    GpuLedger l(GpuLedgerOptions{kIdleW, 10'000'000});
    std::int64_t t = kT0 + 37'000;
    l.advance(driver.query(t));
    const std::int64_t from = l.cursor_us();
    while (t < kT0 + 90'000'000) {
      t += uniform(300'000, 7'000'000);
      l.advance(driver.query(t));
    }
    double busy = 0, energy = 0;
    for (std::int64_t k = (from - kT0) / kPeriod + 1; kT0 + k * kPeriod <= l.cursor_us(); ++k) {
      busy += utilization(k) * 0.2;
      energy += power(k) * 0.2;
    }
    double alloc_sum = 0, busy_sum = 0, energy_sum = 0;
    for (const auto& [o, tot] : l.owners()) {
      alloc_sum += tot.allocated_seconds;
      busy_sum += tot.busy_seconds;
      energy_sum += tot.energy_joules;
      EXPECT_GE(tot.busy_seconds, 0) << seed;
      EXPECT_GE(tot.energy_joules, 0) << seed;
    }
    const double covered = static_cast<double>(l.cursor_us() - from) / 1e6;
    EXPECT_EQ(l.gaps(), 0u) << seed;
    EXPECT_NEAR(l.covered_seconds(), covered, 1e-9 * covered) << seed;
    EXPECT_NEAR(alloc_sum, covered, 1e-9 * covered) << seed;
    EXPECT_NEAR(busy_sum, busy, 1e-9 * busy) << seed;
    EXPECT_NEAR(energy_sum, energy, 1e-9 * energy) << seed;
  }
}

}  // namespace
}  // namespace gpumeter
