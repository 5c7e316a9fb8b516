// NVML entry points for the informational queries a typical client makes (pynvml's
// nvidia_smi.DeviceQuery, nvidia-smi -q), second half: what the board can do and where its
// limits lie (BAR1, video engines, ECC mode and counters, retired pages, temperature
// thresholds, power limits, application and supported clocks). nvml_exports_info.cpp has the
// first half. docs/nvml-behaviour.md gives the source of every choice.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "sim/nvml/nvml_exports_info.h"
#include "sim/physics/profiling.h"

using gpumeter::sim::device_call;
using gpumeter::sim::DeviceState;
using gpumeter::sim::GpuModelSpec;
using gpumeter::sim::Micros;
using gpumeter::sim::Session;
using namespace gpumeter::sim::info;

namespace {

constexpr unsigned long long kMiB = 1024ULL * 1024ULL;

// BAR1 maps the whole framebuffer on datacenter boards (the next power of two); GeForce and
// Turing datacenter boards keep the legacy 256 MiB window.
unsigned long long bar1_total(const GpuModelSpec& m) {
  if (geforce(m) || m.architecture == "turing") return 256 * kMiB;
  unsigned long long total = 256 * kMiB;
  while (total < m.memory_total_bytes) total *= 2;
  return total;
}

struct Thresholds {
  unsigned shutdown, slowdown, gpu_max, mem_max;  // mem_max 0: no memory threshold (GDDR boards)
};

Thresholds thresholds_of(const GpuModelSpec& m) {
  const std::string& a = m.architecture;
  Thresholds t = geforce(m)                          ? Thresholds{98, 95, 90, 0}
                 : a == "volta"                      ? Thresholds{90, 87, 83, 85}
                 : a == "ga100"                      ? Thresholds{92, 89, 85, 95}
                 : a == "hopper" || a == "blackwell" ? Thresholds{92, 89, 87, 95}
                                                     : Thresholds{98, 95, 88, 0};  // GDDR: Turing, GA10x, Ada
  // A model whose own maximum reaches the table's limits would be throttling at full load;
  // keep the thresholds above what the model ever reports.
  if (t.gpu_max <= m.max_temperature_c) {
    t.gpu_max = m.max_temperature_c + 2;
    t.slowdown = std::max(t.slowdown, t.gpu_max + 2);
    t.shutdown = std::max(t.shutdown, t.slowdown + 3);
  }
  return t;
}

unsigned whole_watts_mw(std::int64_t mw) { return static_cast<unsigned>(mw / 1000 * 1000); }

unsigned min_power_limit_mw(const GpuModelSpec& m) {
  std::int64_t floor = geforce(m) ? m.power_limit_mw / 3 : m.power_limit_mw / 4;
  return whole_watts_mw(std::max(floor, m.idle_power_mw));
}

unsigned max_power_limit_mw(const GpuModelSpec& m) {
  return geforce(m) ? whole_watts_mw(m.power_limit_mw * 4 / 3) : static_cast<unsigned>(m.power_limit_mw);
}

unsigned clock_max(const GpuModelSpec& m, unsigned type) {
  switch (type) {
    case NVML_CLOCK_GRAPHICS:
      return m.graphics_clock.max_mhz;
    case NVML_CLOCK_SM:
      return m.sm_clock.max_mhz;
    case NVML_CLOCK_MEM:
      return m.memory_clock.max_mhz;
    default:
      return m.video_clock.max_mhz;
  }
}

// HBM datacenter boards run their memory at one clock; GeForce boards also offer the idle one.
std::vector<unsigned> memory_clocks_of(const GpuModelSpec& m) {
  std::vector<unsigned> clocks{m.memory_clock.max_mhz};
  if (geforce(m) && m.memory_clock.idle_mhz < m.memory_clock.max_mhz) clocks.push_back(m.memory_clock.idle_mhz);
  return clocks;
}

// Graphics clocks in 15 MHz steps from the maximum down to the idle clock, as real boards list
// them (highest first).
std::vector<unsigned> graphics_clocks_of(const GpuModelSpec& m) {
  std::vector<unsigned> clocks;
  for (unsigned c = m.graphics_clock.max_mhz; c >= m.graphics_clock.idle_mhz && c >= 15; c -= 15) {
    clocks.push_back(c);
  }
  if (clocks.empty()) clocks.push_back(m.graphics_clock.max_mhz);
  return clocks;
}

// NVML's list protocol: *count below the number answers INSUFFICIENT_SIZE with the number.
nvmlReturn_t copy_list(const std::vector<unsigned>& values, unsigned int* count, unsigned int* out) {
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto n = static_cast<unsigned>(values.size());
  if (*count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (n > 0 && out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::copy(values.begin(), values.end(), out);
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t application_clock(Fn fn, nvmlDevice_t device, unsigned int type, unsigned int* mhz) {
  return device_call(fn, device, [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
    const auto& m = d.gpu.model();
    if (geforce(m)) return NVML_ERROR_NOT_SUPPORTED;
    if (mhz == nullptr || type > NVML_CLOCK_VIDEO) return NVML_ERROR_INVALID_ARGUMENT;
    *mhz = clock_max(m, type);
    return NVML_SUCCESS;
  });
}

// The video engine's load at the call: its rate in the GPU's profile integrator, from the jobs'
// `encoder` or `decoder` profile fractions (0 by default: jobs are compute work). On a GPU in MIG
// mode the engines belong to the instances: NOT_SUPPORTED on the parent (an assumption, as for
// its utilization).
nvmlReturn_t media_utilization(Fn fn, nvmlDevice_t device, double gpumeter::sim::ProfileTotals::*engine,
                               unsigned int* utilization, unsigned int* period_us) {
  return device_call(fn, device, [&](Session& s, DeviceState& d, Micros now) -> nvmlReturn_t {
    if (utilization == nullptr || period_us == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (s.scenario().mig.enabled(d.gpu.index())) return NVML_ERROR_NOT_SUPPORTED;
    const double busy = d.gpu.profiling().rate_at(now).*engine;
    *utilization = static_cast<unsigned>(std::lround(std::min(busy, 1.0) * 100));
    *period_us = 167'000;
    return NVML_SUCCESS;
  });
}

}  // namespace

// ---- memory and utilization ----

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t* bar1) {
  return device_call(Fn::nvmlDeviceGetBAR1MemoryInfo, device,
                     [&](Session& s, DeviceState& d, Micros now) -> nvmlReturn_t {
                       if (bar1 == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
                       if (s.refuses_unprivileged(d.gpu.index(), now)) return NVML_ERROR_NO_PERMISSION;
                       // The driver maps a little for itself, and each CUDA context a little more.
                       const unsigned long long used = (1 + 2 * d.gpu.processes(now).size()) * kMiB;
                       bar1->bar1Total = bar1_total(d.gpu.model());
                       bar1->bar1Used = std::min(used, bar1->bar1Total);
                       bar1->bar1Free = bar1->bar1Total - bar1->bar1Used;
                       return NVML_SUCCESS;
                     });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int* utilization,
                                                                  unsigned int* sampling_period_us) {
  return media_utilization(Fn::nvmlDeviceGetEncoderUtilization, device, &gpumeter::sim::ProfileTotals::encoder,
                           utilization, sampling_period_us);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int* utilization,
                                                                  unsigned int* sampling_period_us) {
  return media_utilization(Fn::nvmlDeviceGetDecoderUtilization, device, &gpumeter::sim::ProfileTotals::decoder,
                           utilization, sampling_period_us);
}

// ---- ECC ----

// ECC mode is a property of boards with ECC memory; `ecc: false` on a datacenter model is ECC
// turned off, which the board still reports.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, unsigned int* current,
                                                       unsigned int* pending) {
  return device_call(Fn::nvmlDeviceGetEccMode, device, [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
    const auto& m = d.gpu.model();
    if (!has_ecc_memory(m)) return NVML_ERROR_NOT_SUPPORTED;
    if (current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *current = *pending = m.ecc ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t device, unsigned int error_type,
                                                                  unsigned int counter_type, unsigned int location,
                                                                  unsigned long long* count) {
  return device_call(
      Fn::nvmlDeviceGetMemoryErrorCounter, device, [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
        const auto& m = d.gpu.model();
        // "Requires ECC Mode to be enabled."
        if (!m.ecc) return NVML_ERROR_NOT_SUPPORTED;
        if (count == nullptr || error_type > NVML_MEMORY_ERROR_TYPE_UNCORRECTED || counter_type > NVML_AGGREGATE_ECC ||
            location >= NVML_MEMORY_LOCATION_COUNT) {
          return NVML_ERROR_INVALID_ARGUMENT;
        }
        // Texture memory has no ECC counter since Volta; the CBU counter exists on Volta only.
        if (location == NVML_MEMORY_LOCATION_TEXTURE_MEMORY || location == NVML_MEMORY_LOCATION_TEXTURE_SHM ||
            (location == NVML_MEMORY_LOCATION_CBU && m.architecture != "volta")) {
          return NVML_ERROR_NOT_SUPPORTED;
        }
        *count = 0;
        return NVML_SUCCESS;
      });
}

// Pages are retired on Volta and Turing boards with ECC on; Ampere and newer remap rows instead
// (nvmlDeviceGetRemappedRows).
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, unsigned int cause,
                                                            unsigned int* page_count, unsigned long long* addresses) {
  return device_call(Fn::nvmlDeviceGetRetiredPages, device, [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
    const auto& m = d.gpu.model();
    if (!m.ecc || !pre_ampere(m)) return NVML_ERROR_NOT_SUPPORTED;
    if (page_count == nullptr || cause >= NVML_PAGE_RETIREMENT_CAUSE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
    if (*page_count > 0 && addresses == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *page_count = 0;
    return NVML_SUCCESS;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                                         unsigned int* is_pending) {
  return device_call(Fn::nvmlDeviceGetRetiredPagesPendingStatus, device,
                     [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
                       const auto& m = d.gpu.model();
                       if (!m.ecc || !pre_ampere(m)) return NVML_ERROR_NOT_SUPPORTED;
                       if (is_pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
                       *is_pending = NVML_FEATURE_DISABLED;
                       return NVML_SUCCESS;
                     });
}

// ---- temperature and power ----

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, unsigned int type,
                                                                    unsigned int* temp) {
  return device_call(Fn::nvmlDeviceGetTemperatureThreshold, device,
                     [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
                       if (temp == nullptr || type >= NVML_TEMPERATURE_THRESHOLD_COUNT)
                         return NVML_ERROR_INVALID_ARGUMENT;
                       const auto& m = d.gpu.model();
                       const Thresholds t = thresholds_of(m);
                       switch (type) {
                         case NVML_TEMPERATURE_THRESHOLD_SHUTDOWN:
                           *temp = t.shutdown;
                           return NVML_SUCCESS;
                         case NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
                           *temp = t.slowdown;
                           return NVML_SUCCESS;
                         case NVML_TEMPERATURE_THRESHOLD_GPU_MAX:
                           *temp = t.gpu_max;
                           return NVML_SUCCESS;
                         case NVML_TEMPERATURE_THRESHOLD_MEM_MAX:
                           if (t.mem_max == 0) return NVML_ERROR_NOT_SUPPORTED;
                           *temp = t.mem_max;
                           return NVML_SUCCESS;
                         // GeForce boards have a user-settable target temperature ("acoustic"); datacenter boards do
                         // not.
                         case NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN:
                         case NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR:
                         case NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX:
                           if (!geforce(m)) return NVML_ERROR_NOT_SUPPORTED;
                           *temp = type == NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN    ? 65U
                                   : type == NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR ? 83U
                                                                                      : t.gpu_max + 1;
                           return NVML_SUCCESS;
                         default:
                           return NVML_ERROR_NOT_SUPPORTED;  // GPS_CURR
                       }
                     });
}

// Deprecated alias of nvmlDeviceGetPerformanceState.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerState(nvmlDevice_t device, unsigned int* pstate) {
  return get_uint(Fn::nvmlDeviceGetPowerState, device, pstate, [](DeviceState& d, Micros now, unsigned& out) {
    return value(d.gpu.values_at(now).performance_state, out);
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementMode(nvmlDevice_t device, unsigned int* mode) {
  return constant(Fn::nvmlDeviceGetPowerManagementMode, device, mode, NVML_FEATURE_ENABLED);
}

// The scenario's limit is the one the board booted with: nobody in a scenario changes it.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device,
                                                                           unsigned int* default_limit) {
  return get_uint(Fn::nvmlDeviceGetPowerManagementDefaultLimit, device, default_limit,
                  [](DeviceState& d, Micros, unsigned& out) {
                    return value(static_cast<unsigned>(d.gpu.model().power_limit_mw), out);
                  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device,
                                                                               unsigned int* min_limit,
                                                                               unsigned int* max_limit) {
  return device_call(Fn::nvmlDeviceGetPowerManagementLimitConstraints, device,
                     [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
                       if (min_limit == nullptr || max_limit == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
                       const auto& m = d.gpu.model();
                       *min_limit = min_power_limit_mw(m);
                       *max_limit = max_power_limit_mw(m);
                       return NVML_SUCCESS;
                     });
}

// ---- clocks ----

// Nobody sets application clocks in a scenario, so they stay at the boards' default, the
// maximum. GeForce boards do not support application clocks.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t device, unsigned int type,
                                                                 unsigned int* mhz) {
  return application_clock(Fn::nvmlDeviceGetApplicationsClock, device, type, mhz);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t device, unsigned int type,
                                                                        unsigned int* mhz) {
  return application_clock(Fn::nvmlDeviceGetDefaultApplicationsClock, device, type, mhz);
}

// Pascal and newer control boost through application clocks, not this switch.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetAutoBoostedClocksEnabled(nvmlDevice_t device,
                                                                        unsigned int* /*is_enabled*/,
                                                                        unsigned int* /*default_is_enabled*/) {
  return not_supported(Fn::nvmlDeviceGetAutoBoostedClocksEnabled, device);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t device, unsigned int* count,
                                                                     unsigned int* clocks_mhz) {
  return device_call(Fn::nvmlDeviceGetSupportedMemoryClocks, device,
                     [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
                       return copy_list(memory_clocks_of(d.gpu.model()), count, clocks_mhz);
                     });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device,
                                                                       unsigned int memory_clock_mhz,
                                                                       unsigned int* count, unsigned int* clocks_mhz) {
  return device_call(Fn::nvmlDeviceGetSupportedGraphicsClocks, device,
                     [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
                       const auto& m = d.gpu.model();
                       if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
                       const auto memory = memory_clocks_of(m);
                       if (std::find(memory.begin(), memory.end(), memory_clock_mhz) == memory.end())
                         return NVML_ERROR_NOT_FOUND;
                       return copy_list(graphics_clocks_of(m), count, clocks_mhz);
                     });
}
static_assert(std::is_same_v<decltype(&nvmlDeviceGetEccMode), nvmlDeviceGetEnumPair_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetEncoderUtilization), nvmlDeviceGetEnumPair_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetPowerManagementLimitConstraints), nvmlDeviceGetEnumPair_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetBAR1MemoryInfo), nvmlDeviceGetBAR1MemoryInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMemoryErrorCounter), nvmlDeviceGetMemoryErrorCounter_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetRetiredPages), nvmlDeviceGetRetiredPages_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetTemperatureThreshold), nvmlDeviceGetTemperature_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetApplicationsClock), nvmlDeviceGetClockInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetSupportedMemoryClocks), nvmlDeviceGetSupportedMemoryClocks_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetSupportedGraphicsClocks), nvmlDeviceGetSupportedGraphicsClocks_fn>);
