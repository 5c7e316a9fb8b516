#pragma once
// One of the driver's sample buffers, as nvmlDeviceGetSamples sees it: one entry per period
// of scenario time, periods aligned to multiples of the period from time 0, each holding the
// exact average over its period; at most `depth` entries. Utilization and power have a buffer
// each, with their own period and depth. Averages are computed from integer
// percent-microsecond sums, so a period whose average is a whole percent reports it exactly,
// and then the sum of samples times the period equals the integral of utilization.

#include <cstdint>
#include <deque>

#include "sim/scenario/scenario.h"
#include "sim/physics/timeline.h"

namespace gpumeter::sim {

struct Period {
  std::int64_t index = 0;  // covers [index * period, (index + 1) * period)
  unsigned util_percent = 0;
  unsigned memory_util_percent = 0;
  unsigned power_mw = 0;
};

class PeriodHistory {
 public:
  PeriodHistory(const GpuTimeline& timeline, const GpuModelSpec& model, Micros period, std::size_t depth)
      : timeline_(timeline), model_(model), period_(period), depth_(depth) {}

  // The complete periods ending at or before t, oldest first, at most depth() of them.
  // The reference stays valid until the next call.
  const std::deque<Period>& complete_until(Micros t);

  Micros period() const { return period_; }
  std::size_t depth() const { return depth_; }
  // A period's end, the instant its sample is stamped with.
  Micros end_of(const Period& p) const { return (p.index + 1) * period_; }
  // The earliest instant the buffer still covers at time t.
  Micros oldest_instant(Micros t) const;

 private:
  Period compute(std::int64_t index) const;

  const GpuTimeline& timeline_;
  const GpuModelSpec& model_;
  Micros period_;
  std::size_t depth_;
  std::deque<Period> ring_;
};

}  // namespace gpumeter::sim
