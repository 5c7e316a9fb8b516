#include "sim/physics/periods.h"

#include <algorithm>
#include <cmath>

#include "sim/physics/instant_values.h"

namespace gpumeter::sim {

namespace {

unsigned round_div(std::int64_t num, std::int64_t den) { return static_cast<unsigned>((2 * num + den) / (2 * den)); }

}  // namespace

PeriodHistory::PeriodHistory(const GpuTimeline& timeline, const GpuModelSpec& model, Micros period, std::size_t depth,
                             Micros busy_period)
    : timeline_(timeline),
      model_(model),
      step_(busy_period > 0 ? busy_period : period),
      every_(busy_period > 0 ? std::max<std::int64_t>(1, (period + busy_period / 2) / busy_period) : 1),
      depth_(depth) {}

Micros PeriodHistory::oldest_instant(Micros t) const {
  const std::int64_t end = std::max<Micros>(t, 0) / step_;
  return std::max<std::int64_t>(0, end - static_cast<std::int64_t>(depth_)) * step_;
}

bool PeriodHistory::sample_ends_at(std::int64_t k) const {
  if (every_ == 1 || k % every_ == 0) return true;
  bool busy = false;
  timeline_.for_each_segment((k - 1) * step_, k * step_, [&](const Segment& s) { busy = busy || s.util_percent > 0; });
  return busy;
}

const std::deque<Period>& PeriodHistory::complete_until(Micros t) {
  const std::int64_t last = std::max<Micros>(t, 0) / step_;              // grid points up to `last` have passed
  if (!ring_.empty() && ring_.back().end > last * step_) ring_.clear();  // time went backwards
  // Where the next sample starts: after the newest one kept, or, with nothing kept, at a grid
  // point where a sample surely ended, far enough back to fill the buffer.
  std::int64_t k = 0;
  if (!ring_.empty()) {
    k = ring_.back().end / step_;
  } else {
    const std::int64_t back = static_cast<std::int64_t>(depth_) * every_;
    k = std::max<std::int64_t>(0, (last - back) / every_ * every_);
  }
  for (std::int64_t from = k; ++k <= last;) {
    if (!sample_ends_at(k)) continue;
    ring_.push_back(compute(from * step_, k * step_));
    from = k;
    if (ring_.size() > depth_) ring_.pop_front();
  }
  return ring_;
}

Period PeriodHistory::compute(Micros start, Micros end) const {
  Period p;
  p.start = start;
  p.end = end;
  std::int64_t busy = 0;      // percent * us
  std::int64_t mem_busy = 0;  // percent * us
  timeline_.for_each_segment(start, end, [&](const Segment& s) {
    const std::int64_t d = s.end - s.start;
    busy += static_cast<std::int64_t>(s.util_percent) * d;
    mem_busy += static_cast<std::int64_t>(memory_util_percent(s.util_percent)) * d;
  });
  const std::int64_t length = end - start;
  p.util_percent = round_div(busy, length);
  p.memory_util_percent = round_div(mem_busy, length);
  const double avg_power =
      static_cast<double>(model_.idle_power_mw) + static_cast<double>(model_.max_power_mw - model_.idle_power_mw) *
                                                      static_cast<double>(busy) / (100.0 * static_cast<double>(length));
  p.power_mw = static_cast<unsigned>(std::llround(avg_power));
  return p;
}

}  // namespace gpumeter::sim
