#include "sim/model/timeline.h"

#include <algorithm>

namespace gpumeter::sim {

GpuTimeline::GpuTimeline(const Scenario& scenario, unsigned gpu) : reloads_(scenario.driver_reloads) {
  for (std::size_t j = 0; j < scenario.jobs.size(); ++j) {
    const Job& job = scenario.jobs[j];
    Micros end = std::min(job.end, scenario.duration);
    if (job.start >= end) continue;
    for (std::size_t k = 0; k < job.gpus.size(); ++k) {
      if (job.gpus[k] != gpu) continue;
      entries_.push_back(Entry{static_cast<std::uint32_t>(j), job.pids[k], job.start, end, job.memory_bytes,
                               job.utilization});
    }
  }
}

Segment GpuTimeline::segment_at(Micros t) const {
  Segment s;
  s.start = t;
  for (const Entry& e : entries_) {
    if (t < e.start) {
      s.end = std::min(s.end, e.start);
      continue;
    }
    if (t >= e.end) continue;
    Micros rel = t - e.start;
    int u = percent_at(e.pattern, rel);
    Micros change = next_change(e.pattern, rel);
    s.end = std::min(s.end, e.end);
    if (change != kForever) s.end = std::min(s.end, e.start + change);
    s.jobs.push_back(JobShare{e.job, e.pid, u, e.memory_bytes});
    s.sum_percent += u;
    s.memory_bytes += e.memory_bytes;
  }
  s.util_percent = std::min(100, s.sum_percent);
  auto next_reload = std::upper_bound(reloads_.begin(), reloads_.end(), t);
  if (next_reload != reloads_.end()) s.end = std::min(s.end, *next_reload);
  s.driver_reload = std::binary_search(reloads_.begin(), reloads_.end(), t);
  return s;
}

}  // namespace gpumeter::sim
