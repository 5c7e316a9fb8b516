// The power of each period: what the power samples say over the time each stands for, and for
// time no sample covers (lost from a full buffer), the GPU's own power against utilization.
#include <gtest/gtest.h>

#include "ledger/ledger.h"

namespace gpumeter {
namespace {

constexpr std::int64_t kT0 = 1'700'000'000'000'000;  // µs
constexpr std::int64_t kPeriod = 200'000;
constexpr unsigned kPid = 7;

// The simulator's H100: 70 W idle, 690 W at full load.
double watts(double u) { return 70 + 620 * u; }

OwnerLabels owner_a() {
  OwnerLabels o;
  o.project = "a";
  return o;
}

// One period of a tick: its utilization, whether a power sample ends with it, and whether the
// process ran in it (a record of its share).
struct P {
  double util;
  bool power = true;
  bool ran = false;
};

// A tick of the periods after `start`, the process listed at its end when `listed`, the energy
// counter at `counter` joules.
LedgerTick tick_of(std::int64_t start, const std::vector<P>& periods, bool listed, double counter) {
  LedgerTick t;
  t.wall_us = start + static_cast<std::int64_t>(periods.size()) * kPeriod;
  if (listed) t.processes = {{kPid, owner_a(), 0}};
  t.utilization_samples_supported = t.power_samples_supported = t.process_samples_supported = true;
  for (std::size_t i = 0; i < periods.size(); ++i) {
    const std::int64_t ts = start + static_cast<std::int64_t>(i + 1) * kPeriod;
    t.utilization_samples.push_back({ts, periods[i].util});
    if (periods[i].power) t.power_samples.push_back({ts, watts(periods[i].util)});
    if (periods[i].ran) t.process_samples.push_back({kPid, ts, periods[i].util, 0});
  }
  t.power_watts = watts(periods.back().util);  // polled at the tick's end
  t.energy_joules = counter;
  return t;
}

GpuLedger started_ledger() {
  GpuLedger l(GpuLedgerOptions{0, 10'000'000});
  l.advance(tick_of(kT0 - kPeriod, {{0.0}}, false, 1000));
  EXPECT_EQ(l.cursor_us(), kT0);
  return l;
}

TEST(LedgerPower, TimeLostFromThePowerBufferGetsThePowerOfItsUtilization) {
  // The process runs at 90 % from the middle of one reading into the next, whose oldest power
  // samples have left the buffer: that second of its time is charged 628 W, what the sampled
  // periods say the GPU draws at 90 %, not the idle power polled at the reading's end.
  GpuLedger l = started_ledger();
  const double busy = watts(0.9) * 1.0, idle = watts(0) * 1.0;
  std::vector<P> first(5, P{0.0});
  first.insert(first.end(), 5, P{0.9, true, true});
  l.advance(tick_of(kT0, first, true, 1000 + idle + busy));
  std::vector<P> second(5, P{0.9, false, true});  // lost from the power buffer
  second.insert(second.end(), 5, P{0.0});
  l.advance(tick_of(kT0 + 10 * kPeriod, second, false, 1000 + 2 * (idle + busy)));
  EXPECT_NEAR(l.owners().at(owner_a()).energy_joules, 2 * busy, 1e-6);
  EXPECT_NEAR(l.owners().at(idle_owner()).energy_joules, 2 * idle, 1e-6);
  EXPECT_NEAR(l.energy_joules(), 2 * (idle + busy), 1e-6) << "the counter stays the reference";
}

TEST(LedgerPower, ASampleStandsForTheTimeSinceTheOneBeforeIt) {
  // An idle GPU's driver samples power about once a second: the sample at the end of the
  // second stands for the whole of it, not for its last utilization period alone.
  GpuLedger l = started_ledger();
  std::vector<P> periods = {{0.5}, {0.0, false}, {0.0, false}, {0.0, false}, {0.0}};
  LedgerTick t = tick_of(kT0, periods, false, 0);
  t.energy_joules.reset();  // the samples alone make the energy
  t.power_watts = 500;      // a polled instant that would be wrong for the idle time
  l.advance(t);
  EXPECT_NEAR(l.energy_joules(), watts(0.5) * 0.2 + watts(0) * 0.8, 1e-6);
}

TEST(LedgerPower, WithoutAnyPowerSampleThePolledPowerStands) {
  GpuLedger l = started_ledger();
  LedgerTick t = tick_of(kT0, std::vector<P>(5, P{0.5, false}), false, 0);
  t.energy_joules.reset();
  t.power_watts = 300;
  l.advance(t);
  EXPECT_NEAR(l.energy_joules(), 300, 1e-6);
}

}  // namespace
}  // namespace gpumeter
