#pragma once
// The per-process series of one GPU: the latest values of its running processes; exited ones
// read 0 until the retention ends, so graphs drop to zero instead of holding a stale value.

#include <cstdint>
#include <map>
#include <vector>

#include "model/owner.h"
#include "ledger/drm_usage.h"
#include "model/reading.h"
#include "model/snapshot.h"

namespace gpumeter {

class ProcessSeries {
 public:
  // Records the processes of one reading, each with its full owner (`owners`, in the order of
  // `listed`), at `mono_us` on the monotonic clock. A DRM client's utilization comes from its
  // engine time (`drm`), a compute process's from the reading's per-process records.
  void record(const std::vector<GpuProcess>& listed, const std::vector<OwnerLabels>& owners, const DrmRound& drm,
              const UsageReading& usage, std::int64_t mono_us);
  // Zeroes the processes the reading at `mono_us` did not list, and drops those not listed for
  // longer than `retention_us`.
  void expire(std::int64_t mono_us, std::int64_t retention_us);
  void clear() { series_.clear(); }
  // Calls `f` with the latest values of each process, by pid.
  template <typename F>
  void for_each_latest(F f) const {
    for (const auto& [pid, s] : series_) f(s.latest);
  }

 private:
  struct Series {
    ProcessSnapshot latest;
    std::int64_t last_seen_us = 0;
  };
  std::map<unsigned, Series> series_;
};

}  // namespace gpumeter
