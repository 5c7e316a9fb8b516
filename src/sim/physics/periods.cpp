#include "sim/physics/periods.h"

#include <algorithm>
#include <cmath>

#include "sim/physics/instant_values.h"

namespace gpumeter::sim {

namespace {

unsigned round_div(std::int64_t num, std::int64_t den) { return static_cast<unsigned>((2 * num + den) / (2 * den)); }

}  // namespace

Micros PeriodHistory::oldest_instant(Micros t) const {
  const std::int64_t end = std::max<Micros>(t, 0) / period_;
  return std::max<std::int64_t>(0, end - static_cast<std::int64_t>(depth_)) * period_;
}

const std::deque<Period>& PeriodHistory::complete_until(Micros t) {
  const std::int64_t end = std::max<Micros>(t, 0) / period_;  // periods [0, end) are complete
  const std::int64_t begin = std::max<std::int64_t>(0, end - static_cast<std::int64_t>(depth_));
  if (!ring_.empty() && ring_.back().index >= end) ring_.clear();  // time went backwards
  while (!ring_.empty() && ring_.front().index < begin) ring_.pop_front();
  std::int64_t next = ring_.empty() ? begin : ring_.back().index + 1;
  for (; next < end; ++next) ring_.push_back(compute(next));
  return ring_;
}

Period PeriodHistory::compute(std::int64_t index) const {
  Period p;
  p.index = index;
  std::int64_t busy = 0;      // percent * us
  std::int64_t mem_busy = 0;  // percent * us
  timeline_.for_each_segment(index * period_, (index + 1) * period_, [&](const Segment& s) {
    const std::int64_t d = s.end - s.start;
    busy += static_cast<std::int64_t>(s.util_percent) * d;
    mem_busy += static_cast<std::int64_t>(memory_util_percent(s.util_percent)) * d;
  });
  p.util_percent = round_div(busy, period_);
  p.memory_util_percent = round_div(mem_busy, period_);
  const double avg_power = static_cast<double>(model_.idle_power_mw) +
                           static_cast<double>(model_.max_power_mw - model_.idle_power_mw) * static_cast<double>(busy) /
                               (100.0 * static_cast<double>(period_));
  p.power_mw = static_cast<unsigned>(std::llround(avg_power));
  return p;
}

}  // namespace gpumeter::sim
