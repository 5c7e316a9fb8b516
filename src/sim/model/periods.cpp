#include "sim/model/periods.h"

#include <algorithm>
#include <cmath>

#include "sim/model/readings.h"

namespace gpumeter::sim {

namespace {

unsigned round_div(std::int64_t num, std::int64_t den) {
  return static_cast<unsigned>((2 * num + den) / (2 * den));
}

}  // namespace

const std::deque<Period>& PeriodHistory::complete_until(Micros t) {
  const std::int64_t end = std::max<Micros>(t, 0) / kPeriod;  // periods [0, end) are complete
  const std::int64_t begin = std::max<std::int64_t>(0, end - static_cast<std::int64_t>(kDepth));
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
  struct Share {
    std::uint32_t job;
    std::uint32_t pid;
    double sm;   // percent * us
    double mem;  // percent * us
  };
  std::vector<Share> shares;
  timeline_.for_each_segment(index * kPeriod, (index + 1) * kPeriod, [&](const Segment& s) {
    const std::int64_t d = s.end - s.start;
    const int mem_util = memory_util_percent(s.util_percent);
    busy += static_cast<std::int64_t>(s.util_percent) * d;
    mem_busy += static_cast<std::int64_t>(mem_util) * d;
    for (const JobShare& j : s.jobs) {
      auto it = std::find_if(shares.begin(), shares.end(), [&](const Share& x) { return x.job == j.job; });
      if (it == shares.end()) it = shares.insert(shares.end(), Share{j.job, j.pid, 0, 0});
      if (s.sum_percent > 0) {
        const double fraction = static_cast<double>(j.percent) / s.sum_percent;
        it->sm += s.util_percent * fraction * static_cast<double>(d);
        it->mem += mem_util * fraction * static_cast<double>(d);
      }
    }
  });
  p.util_percent = round_div(busy, kPeriod);
  p.memory_util_percent = round_div(mem_busy, kPeriod);
  const double avg_power = static_cast<double>(model_.idle_power_mw) +
                           static_cast<double>(model_.max_power_mw - model_.idle_power_mw) *
                               static_cast<double>(busy) / (100.0 * kPeriod);
  p.power_mw = static_cast<unsigned>(std::llround(avg_power));
  for (const Share& s : shares) {
    p.processes.push_back(ProcessShare{s.pid, static_cast<unsigned>(std::lround(s.sm / kPeriod)),
                                       static_cast<unsigned>(std::lround(s.mem / kPeriod))});
  }
  return p;
}

}  // namespace gpumeter::sim
