#include "sim/physics/timeline.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace gpumeter::sim {

GpuTimeline::GpuTimeline(const Scenario& scenario, unsigned gpu, const LiveTable* live)
    : gpu_(gpu),
      live_(live),
      mig_slices_(scenario.mig.enabled(gpu) ? mig_compute_slices(scenario.model_of(gpu)) : 0),
      reloads_(scenario.driver_reloads) {
  for (std::size_t j = 0; j < scenario.jobs.size(); ++j) {
    const Job& job = scenario.jobs[j];
    Micros end = std::min(job.end, scenario.duration);
    if (job.start >= end) continue;
    for (std::size_t k = 0; k < job.gpus.size(); ++k) {
      if (job.gpus[k] != gpu) continue;
      const unsigned slices = job.mig == kNoMigInstance ? 0 : scenario.mig.instances[job.mig].slices;
      entries_.push_back(Entry{static_cast<std::uint32_t>(j), job.pids[k], job.start, end, job.memory_bytes,
                               job.utilization, job.mig, slices});
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
    s.jobs.push_back(JobShare{e.job, e.pid, u, e.memory_bytes, e.mig});
    s.sum_percent += u;
    s.memory_bytes += e.memory_bytes;
  }
  if (live_ != nullptr) add_live(t, s);
  s.util_percent = std::min(100, s.sum_percent);
  if (mig_slices_ > 0) {
    std::map<std::size_t, std::pair<int, unsigned>> per_instance;  // instance -> sum u_j, slices
    for (const Entry& e : entries_) {
      if (t < e.start || t >= e.end) continue;
      auto& [sum, slices] = per_instance[e.mig];
      sum += percent_at(e.pattern, t - e.start);
      slices = e.mig_slices;
    }
    int weighted = 0;  // percent x slices
    for (const auto& [instance, v] : per_instance) weighted += std::min(100, v.first) * static_cast<int>(v.second);
    s.util_percent = static_cast<int>(std::lround(weighted / static_cast<double>(mig_slices_)));
  }
  auto next_reload = std::upper_bound(reloads_.begin(), reloads_.end(), t);
  if (next_reload != reloads_.end()) s.end = std::min(s.end, *next_reload);
  s.driver_reload = std::binary_search(reloads_.begin(), reloads_.end(), t);
  return s;
}

// A live process counts as a job of its own, outside any MIG instance (the simulated CUDA
// driver offers whole GPUs only).
void GpuTimeline::add_live(Micros t, Segment& s) const {
  const auto set = live_->get();
  for (const LiveProcess& p : *set) {
    if (p.gpu != gpu_ || t >= p.end) continue;
    if (t < p.start) {
      s.end = std::min(s.end, p.start);
      continue;
    }
    const LiveState st = live_state_at(p, t);
    s.end = std::min({s.end, p.end, st.next_change});
    s.jobs.push_back(JobShare{kLiveJob, p.pid, st.percent, st.memory_bytes, kNoMigInstance});
    s.sum_percent += st.percent;
    s.memory_bytes += st.memory_bytes;
  }
}

}  // namespace gpumeter::sim
