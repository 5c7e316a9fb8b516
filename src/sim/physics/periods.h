#pragma once
// One of the driver's sample buffers, as nvmlDeviceGetSamples sees it: one entry per period
// of scenario time, periods aligned to multiples of the period from time 0, each holding the
// exact average over its period; at most `depth` entries. Utilization and power have a buffer
// each, with their own period and depth. Averages are computed from integer
// percent-microsecond sums, so a period whose average is a whole percent reports it exactly,
// and then the sum of samples times the period equals the integral of utilization.
//
// A buffer with a busy period (SampleSpec::power_period_busy) has an irregular cadence: on the
// grid of busy periods from time 0, a sample ends every busy period in which the GPU was busy at
// some instant, and every `every`-th grid point whatever it did (every = period / busy period,
// rounded), so that an idle GPU is sampled about once a period. Each sample covers the time since
// the one before it.

#include <cstdint>
#include <deque>

#include "sim/scenario/scenario.h"
#include "sim/physics/timeline.h"

namespace gpumeter::sim {

struct Period {
  Micros start = 0, end = 0;  // covers [start, end); the sample is stamped with `end`
  unsigned util_percent = 0;
  unsigned memory_util_percent = 0;
  unsigned power_mw = 0;
};

class PeriodHistory {
 public:
  // `busy_period` 0: a sample every `period`; else the irregular cadence above.
  PeriodHistory(const GpuTimeline& timeline, const GpuModelSpec& model, Micros period, std::size_t depth,
                Micros busy_period = 0);

  // The complete periods ending at or before t, oldest first, at most depth() of them.
  // The reference stays valid until the next call.
  const std::deque<Period>& complete_until(Micros t);

  // The spacing of the grid samples end on: the period, or the busy period.
  Micros grid() const { return step_; }
  std::size_t depth() const { return depth_; }
  // The earliest instant the buffer still covers at time t (a regular buffer's).
  Micros oldest_instant(Micros t) const;

 private:
  Period compute(Micros start, Micros end) const;
  // Whether a sample ends at grid point k (k * step_): always on a regular buffer.
  bool sample_ends_at(std::int64_t k) const;

  const GpuTimeline& timeline_;
  const GpuModelSpec& model_;
  Micros step_;         // the grid
  std::int64_t every_;  // a sample at least every this many grid points
  std::size_t depth_;
  std::deque<Period> ring_;
};

}  // namespace gpumeter::sim
