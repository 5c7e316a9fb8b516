#include "sim/physics/instant_values.h"

#include <cmath>

#include "abi/nvml_api.h"

namespace gpumeter::sim {

namespace {

unsigned lerp_rounded(unsigned lo, unsigned hi, int util_percent) {
  double v = lo + (static_cast<double>(hi) - lo) * util_percent / 100.0;
  return static_cast<unsigned>(std::lround(v));
}

}  // namespace

double power_milliwatts(const GpuModelSpec& m, int util_percent) {
  return static_cast<double>(m.idle_power_mw) +
         static_cast<double>(m.max_power_mw - m.idle_power_mw) * util_percent / 100.0;
}

int memory_util_percent(int util_percent) { return (60 * util_percent + 50) / 100; }

InstantValues instant_values_for(const GpuModelSpec& m, const Segment& s) {
  InstantValues r;
  const int u = s.util_percent;
  const bool busy = u > 0;
  r.util_percent = static_cast<unsigned>(u);
  r.memory_util_percent = static_cast<unsigned>(memory_util_percent(u));
  r.memory_used_bytes = s.memory_bytes;
  r.power_mw = static_cast<unsigned>(std::llround(power_milliwatts(m, u)));
  r.temperature_c = lerp_rounded(m.idle_temperature_c, m.max_temperature_c, u);
  r.memory_temperature_c = r.temperature_c + m.memory_temperature_offset_c;
  r.graphics_clock_mhz = busy ? m.graphics_clock.max_mhz : m.graphics_clock.idle_mhz;
  r.sm_clock_mhz = busy ? m.sm_clock.max_mhz : m.sm_clock.idle_mhz;
  r.memory_clock_mhz = busy ? m.memory_clock.max_mhz : m.memory_clock.idle_mhz;
  r.video_clock_mhz = busy ? m.video_clock.max_mhz : m.video_clock.idle_mhz;
  r.performance_state = busy || !s.jobs.empty() ? 0 : 8;
  r.fan_percent = m.fan ? lerp_rounded(m.fan_idle_percent, m.fan_max_percent, u) : 0;
  r.clocks_event_reasons = busy ? 0ULL : static_cast<unsigned long long>(nvmlClocksEventReasonGpuIdle);
  return r;
}

}  // namespace gpumeter::sim
