#pragma once
// Per-process utilization as nvmlDeviceGetProcessUtilization reports it. The driver samples
// each process on its own grid (the utilization period, shifted by a per-process phase), so a
// record is stamped with that process's last sample time, not with the device's grid. A
// record is the average of the process's samples stamped after the caller's lastSeenTimeStamp;
// each sample measured the period before its stamp, so the first one's period may begin up to
// one period before lastSeenTimeStamp, at the process's previous sample.

#include <cstdint>
#include <vector>

#include "sim/scenario/time.h"
#include "sim/physics/timeline.h"

namespace gpumeter::sim {

struct ProcessRecord {
  std::uint32_t pid = 0;
  Micros time = 0;              // the process's last sample time at or before now, while it ran
  Micros window_start = 0;      // the record averages over (window_start, time]: from the grid
                                // point at or before the query's lastSeenTimeStamp
  unsigned sm_percent = 0;      // round(100 * avg(U * u_j / sum u)), time without it counting as 0
  unsigned memory_percent = 0;  // the same split of memory utilization
};

// The offset of a process's sample grid from the device's, a deterministic function of the
// pid in [0, period).
Micros process_phase(std::uint32_t pid, Micros period);

// One record per process that had a non-zero share of the GPU in its window, where
// from = max(since, oldest); a process whose last sample time is not after `from` has nothing
// new and gives no record. Records come in order of first presence.
std::vector<ProcessRecord> process_records(const GpuTimeline& timeline, Micros now, Micros since, Micros oldest,
                                           Micros period);

// The same query where the driver takes a process's sample only in a period it had a non-zero
// share of the GPU in (the active_only_process_samples quirk; nvml.h: a record for each process
// "that had some non-zero utilization during the last sample period"): a record is the average
// of the process's active samples stamped after `from`, stamped with the newest of them, so an
// idle process gives none and its timestamp goes stale (NVIDIA/go-nvml#51). window_start is
// where the period of its first such sample begins.
std::vector<ProcessRecord> active_process_records(const GpuTimeline& timeline, Micros now, Micros since, Micros oldest,
                                                  Micros period);

}  // namespace gpumeter::sim
