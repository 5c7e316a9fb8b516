#pragma once
// Per-process utilization as nvmlDeviceGetProcessUtilization reports it. The driver samples
// each process on its own grid (the utilization period, shifted by a per-process phase), so a
// record is stamped with that process's last sample time, not with the device's grid. A
// record is the process's average share of the GPU since the caller's lastSeenTimeStamp.

#include <cstdint>
#include <vector>

#include "sim/model/time.h"
#include "sim/model/timeline.h"

namespace gpumeter::sim {

struct ProcessRecord {
  std::uint32_t pid = 0;
  Micros time = 0;              // the process's last sample time at or before now
  Micros window_start = 0;      // the record averages over (window_start, time]
  unsigned sm_percent = 0;      // round(100 * avg(U * u_j / sum u)), time without it counting as 0
  unsigned memory_percent = 0;  // the same split of memory utilization
};

// The offset of a process's sample grid from the device's, a deterministic function of the
// pid in [0, period).
Micros process_phase(std::uint32_t pid, Micros period);

// One record per process that had a non-zero share of the GPU at some instant in
// (from, now], where from = max(since, oldest); a process whose last sample time is not after
// `from` has nothing new and gives no record. Records come in order of first activity.
std::vector<ProcessRecord> process_records(const GpuTimeline& timeline, Micros now, Micros since,
                                           Micros oldest, Micros period);

}  // namespace gpumeter::sim
