#pragma once
// What a GPU model reports at an instant for a given utilization (the integrals are in
// counters.h, the driver's sample buffers in periods.h). These are the model's made-up physics:
// only power feeds an integral (energy), so only power has to be exact; the rest just has to
// be deterministic and plausible.

#include <cstdint>

#include "sim/scenario/scenario.h"
#include "sim/physics/timeline.h"

namespace gpumeter::sim {

// P = idle + (max - idle) * util, in milliwatts.
double power_milliwatts(const GpuModelSpec& m, int util_percent);

// Memory-controller activity as a fixed share (60%) of GPU activity, in whole percents.
int memory_util_percent(int util_percent);

struct InstantValues {
  unsigned util_percent = 0;
  unsigned memory_util_percent = 0;
  std::uint64_t memory_used_bytes = 0;  // allocated by jobs: v2 "used"
  unsigned power_mw = 0;
  unsigned temperature_c = 0;
  unsigned memory_temperature_c = 0;
  unsigned graphics_clock_mhz = 0;
  unsigned sm_clock_mhz = 0;
  unsigned memory_clock_mhz = 0;
  unsigned video_clock_mhz = 0;
  unsigned performance_state = 8;
  unsigned fan_percent = 0;  // meaningful only when the model has a fan
  unsigned long long clocks_event_reasons = 0;
};

// The values of model `m` throughout segment `s`.
InstantValues instant_values_for(const GpuModelSpec& m, const Segment& s);

// The clocks-event reasons a datacenter GPU reports as supported (all but display clocks).
inline constexpr unsigned long long kSupportedClocksEventReasons = 0xFFULL;

}  // namespace gpumeter::sim
