#include "ledger/process_series.h"

#include <algorithm>

namespace gpumeter {

namespace {

// The average SM share of the per-process records of `pid`; 0 without any.
double average_sm(const std::vector<ProcessSample>& records, unsigned pid) {
  double sum = 0;
  int n = 0;
  for (const auto& smp : records) {
    if (smp.pid == pid) {
      sum += smp.sm_ratio;
      ++n;
    }
  }
  return n > 0 ? sum / n : 0.0;
}

}  // namespace

void ProcessSeries::record(const std::vector<GpuProcess>& listed, const std::vector<OwnerLabels>& owners,
                           const DrmRound& drm, const UsageReading& usage, std::int64_t mono_us) {
  for (size_t i = 0; i < listed.size(); ++i) {
    const auto& p = listed[i];
    Series& s = series_[p.pid];
    s.latest.pid = p.pid;
    s.latest.owner = owners[i];
    s.latest.memory_bytes = p.memory_bytes;
    s.latest.running = true;
    if (auto d = drm.by_pid.find(p.pid); d != drm.by_pid.end() && (p.types & kProcessCompute) == 0) {
      // A DRM client's utilization over the interval since its GPU's previous reading.
      if (drm.interval_s > 0) s.latest.utilization_ratio = std::min(1.0, d->second.busy_seconds / drm.interval_s);
    } else if (usage.process_samples_supported) {
      s.latest.utilization_ratio = average_sm(usage.process_samples, p.pid);
    }
    s.last_seen_us = mono_us;
  }
}

void ProcessSeries::expire(std::int64_t mono_us, std::int64_t retention_us) {
  for (auto it = series_.begin(); it != series_.end();) {
    Series& s = it->second;
    if (s.last_seen_us != mono_us) {
      s.latest.running = false;
      if (s.latest.memory_bytes) s.latest.memory_bytes = 0;
      if (s.latest.utilization_ratio) s.latest.utilization_ratio = 0;
      if (mono_us - s.last_seen_us > retention_us) {
        it = series_.erase(it);
        continue;
      }
    }
    ++it;
  }
}

}  // namespace gpumeter
