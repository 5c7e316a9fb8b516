#pragma once
// The driver's sample buffer, as nvmlDeviceGetSamples and nvmlDeviceGetProcessUtilization see
// it: one entry per 200 ms period of scenario time, aligned to multiples of 200 ms, holding
// the exact average over that period. Averages are computed from integer percent-microsecond
// sums, so a period whose average is a whole percent reports it exactly, and then the sum of
// samples times 0.2 s equals the integral of utilization.

#include <cstdint>
#include <deque>
#include <vector>

#include "sim/model/scenario.h"
#include "sim/model/timeline.h"

namespace gpumeter::sim {

struct ProcessShare {
  std::uint32_t pid = 0;
  unsigned sm_percent = 0;      // round(100 * avg(util * u_j / sum u))
  unsigned memory_percent = 0;  // the same split of memory utilization
};

struct Period {
  std::int64_t index = 0;  // covers [index * kPeriod, (index + 1) * kPeriod)
  unsigned util_percent = 0;
  unsigned memory_util_percent = 0;
  unsigned power_mw = 0;
  std::vector<ProcessShare> processes;  // jobs present at some time in the period
};

class PeriodHistory {
 public:
  static constexpr Micros kPeriod = 200'000;
  static constexpr std::size_t kDepth = 100;

  PeriodHistory(const GpuTimeline& timeline, const GpuModelSpec& model)
      : timeline_(timeline), model_(model) {}

  // The complete periods ending at or before t, oldest first, at most kDepth of them.
  // The reference stays valid until the next call.
  const std::deque<Period>& complete_until(Micros t);

  // A period's end, the instant its sample is stamped with.
  static Micros end_of(const Period& p) { return (p.index + 1) * kPeriod; }

 private:
  Period compute(std::int64_t index) const;

  const GpuTimeline& timeline_;
  const GpuModelSpec& model_;
  std::deque<Period> ring_;
};

}  // namespace gpumeter::sim
