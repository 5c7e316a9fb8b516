// NVML entry points for device metrics: utilization, memory, temperature, power and energy,
// clocks, fan, PCIe, clocks-event reasons, ECC and field values.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <type_traits>

#include "sim/scenario/driver.h"
#include "sim/physics/instant_values.h"
#include "sim/nvml/nvlink_fields.h"
#include "sim/nvml/nvml_call.h"
#include "sim/nvml/nvml_exports_mig.h"

using gpumeter::sim::device_call;
using gpumeter::sim::DeviceState;
using gpumeter::sim::InstantValues;
using gpumeter::sim::Micros;
using gpumeter::sim::Session;
using Fn = gpumeter::sim::NvmlFunction;

namespace {

// A device call that copies one value computed from the GPU at the current time into *out.
template <typename T, typename Get>
nvmlReturn_t get_value(Fn fn, nvmlDevice_t device, T* out, Get&& get) {
  return device_call(fn, device, [&](Session&, DeviceState& d, Micros now) {
    if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *out = static_cast<T>(get(d, now));
    return NVML_SUCCESS;
  });
}

constexpr Micros kPowerAverageWindow = gpumeter::sim::kMicrosPerSecond;

// A field the driver branch does not have answers NOT_SUPPORTED in its own nvmlReturn.
bool field_exists(const Session& s, const DeviceState& d, unsigned field_id) {
  switch (field_id) {
    case NVML_FI_DEV_PCIE_COUNT_TX_BYTES:
    case NVML_FI_DEV_PCIE_COUNT_RX_BYTES:
      return s.driver_major() >= gpumeter::sim::kBranchPcieByteFields;
    // The average is "supported on Ampere (except GA100) or newer", the instant "on all
    // architectures" (nvml.h, the field comments).
    case NVML_FI_DEV_POWER_AVERAGE:
      return s.driver_major() >= gpumeter::sim::kBranchPowerFields &&
             gpumeter::sim::power_usage_is_averaged(d.gpu.model().architecture);
    case NVML_FI_DEV_POWER_INSTANT:
      return s.driver_major() >= gpumeter::sim::kBranchPowerFields;
    // NVML reports no memory temperature for GeForce boards (jelmd/nvmex#1: exposed on V100
    // and A100, not on RTX 2080 Ti; TheTumultuousUnicornOfDarkness/CPU-X#259: not on RTX 30).
    case NVML_FI_DEV_MEMORY_TEMP:
      return d.gpu.model().profile != "geforce";
    default:
      return true;
  }
}

unsigned clock_of(const InstantValues& r, unsigned type) {
  switch (type) {
    case NVML_CLOCK_GRAPHICS:
      return r.graphics_clock_mhz;
    case NVML_CLOCK_SM:
      return r.sm_clock_mhz;
    case NVML_CLOCK_MEM:
      return r.memory_clock_mhz;
    default:
      return r.video_clock_mhz;
  }
}

unsigned max_clock_of(const gpumeter::sim::GpuModelSpec& m, unsigned type) {
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

}  // namespace

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  return device_call(Fn::nvmlDeviceGetUtilizationRates, device, [&](Session& s, DeviceState& d, Micros now) {
    if (utilization == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    // nvml.h: "not currently supported" on a GPU in MIG mode.
    if (s.scenario().mig.enabled(d.gpu.index())) return NVML_ERROR_NOT_SUPPORTED;
    // nvmlUtilization_t: "percent of time over the past sample period": the newest complete
    // period of the utilization buffer; before the first one, the load at the call.
    const auto& periods = d.gpu.utilization_samples().complete_until(now);
    if (periods.empty()) {
      InstantValues r = d.gpu.values_at(now);
      utilization->gpu = r.util_percent;
      utilization->memory = r.memory_util_percent;
    } else {
      utilization->gpu = periods.back().util_percent;
      utilization->memory = periods.back().memory_util_percent;
    }
    return NVML_SUCCESS;
  });
}

// v1 "used" includes memory the driver reserves; v2 separates it, as real drivers do.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  if (gpumeter::sim::is_mig_handle(device)) return gpumeter::sim::mig::memory_info(device, memory);
  return device_call(Fn::nvmlDeviceGetMemoryInfo, device, [&](Session& s, DeviceState& d, Micros now) {
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (s.refuses_unprivileged(d.gpu.index(), now)) return NVML_ERROR_NO_PERMISSION;
    const auto& m = d.gpu.model();
    memory->total = m.memory_total_bytes;
    memory->used = m.memory_reserved_bytes + d.gpu.values_at(now).memory_used_bytes;
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  if (gpumeter::sim::is_mig_handle(device)) return gpumeter::sim::mig::memory_info_v2(device, memory);
  return device_call(Fn::nvmlDeviceGetMemoryInfo_v2, device, [&](Session& s, DeviceState& d, Micros now) {
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (s.refuses_unprivileged(d.gpu.index(), now)) return NVML_ERROR_NO_PERMISSION;
    // Real drivers answer a wrong version (often the bare number 2) this way, not with
    // ARGUMENT_VERSION_MISMATCH.
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_FUNCTION_NOT_FOUND;
    const auto& m = d.gpu.model();
    memory->total = m.memory_total_bytes;
    memory->reserved = m.memory_reserved_bytes;
    memory->used = d.gpu.values_at(now).memory_used_bytes;
    memory->free = memory->total - memory->reserved - memory->used;
    return NVML_SUCCESS;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, unsigned int sensor,
                                                           unsigned int* temp) {
  return device_call(Fn::nvmlDeviceGetTemperature, device, [&](Session& s, DeviceState& d, Micros now) {
    if (temp == nullptr || sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    const double told = d.gpu.values_at(now).temperature_c + s.lie("temperature");
    *temp = static_cast<unsigned>(std::max(0.0, std::round(told)));
    return NVML_SUCCESS;
  });
}

// nvml.h: "On Ampere (except GA100) or newer GPUs, the API returns power averaged over 1 sec
// interval. On GA100 and older architectures, instantaneous power is returned."
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  return get_value(Fn::nvmlDeviceGetPowerUsage, device, power, [](DeviceState& d, Micros now) {
    return gpumeter::sim::power_usage_is_averaged(d.gpu.model().architecture)
               ? d.gpu.average_power_mw(now, kPowerAverageWindow)
               : d.gpu.values_at(now).power_mw;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* limit) {
  return get_value(Fn::nvmlDeviceGetEnforcedPowerLimit, device, limit,
                   [](DeviceState& d, Micros) { return d.gpu.model().power_limit_mw; });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int* limit) {
  return get_value(Fn::nvmlDeviceGetPowerManagementLimit, device, limit,
                   [](DeviceState& d, Micros) { return d.gpu.model().power_limit_mw; });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* energy) {
  return get_value(Fn::nvmlDeviceGetTotalEnergyConsumption, device, energy,
                   [](DeviceState& d, Micros now) { return d.gpu.energy_millijoules(now); });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, unsigned int type, unsigned int* clock) {
  return device_call(Fn::nvmlDeviceGetClockInfo, device, [&](Session&, DeviceState& d, Micros now) {
    if (clock == nullptr || type > NVML_CLOCK_VIDEO) return NVML_ERROR_INVALID_ARGUMENT;
    *clock = clock_of(d.gpu.values_at(now), type);
    return NVML_SUCCESS;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, unsigned int type,
                                                            unsigned int* clock) {
  return device_call(Fn::nvmlDeviceGetMaxClockInfo, device, [&](Session&, DeviceState& d, Micros) {
    if (clock == nullptr || type > NVML_CLOCK_VIDEO) return NVML_ERROR_INVALID_ARGUMENT;
    *clock = max_clock_of(d.gpu.model(), type);
    return NVML_SUCCESS;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, unsigned int* state) {
  return get_value(Fn::nvmlDeviceGetPerformanceState, device, state,
                   [](DeviceState& d, Micros now) { return d.gpu.values_at(now).performance_state; });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int* speed) {
  return device_call(Fn::nvmlDeviceGetFanSpeed, device, [&](Session&, DeviceState& d, Micros now) {
    if (!d.gpu.model().fan) return NVML_ERROR_NOT_SUPPORTED;
    if (speed == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *speed = d.gpu.values_at(now).fan_percent;
    return NVML_SUCCESS;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int* gen) {
  return get_value(Fn::nvmlDeviceGetCurrPcieLinkGeneration, device, gen,
                   [](DeviceState& d, Micros) { return d.gpu.model().pcie_generation; });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int* width) {
  return get_value(Fn::nvmlDeviceGetCurrPcieLinkWidth, device, width,
                   [](DeviceState& d, Micros) { return d.gpu.model().pcie_width; });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int* gen) {
  return get_value(Fn::nvmlDeviceGetMaxPcieLinkGeneration, device, gen,
                   [](DeviceState& d, Micros) { return d.gpu.model().pcie_generation; });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int* width) {
  return get_value(Fn::nvmlDeviceGetMaxPcieLinkWidth, device, width,
                   [](DeviceState& d, Micros) { return d.gpu.model().pcie_width; });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int* value) {
  return get_value(Fn::nvmlDeviceGetPcieReplayCounter, device, value, [](DeviceState&, Micros) { return 0U; });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int values_count,
                                                           nvmlFieldValue_t* values) {
  return device_call(Fn::nvmlDeviceGetFieldValues, device, [&](Session& s, DeviceState& d, Micros now) {
    if (values == nullptr || values_count <= 0) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < values_count; ++i) {
      nvmlFieldValue_t& v = values[i];
      v.timestamp = s.unix_micros(now);
      v.latencyUsec = 0;
      v.value.ullVal = 0;
      v.nvmlReturn = NVML_SUCCESS;
      if (s.field_unsupported(v.fieldId) || !field_exists(s, d, v.fieldId)) {
        v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        continue;
      }
      if (gpumeter::sim::fill_nvlink_field(d, now, v)) continue;
      switch (v.fieldId) {
        case NVML_FI_DEV_MEMORY_TEMP:
          v.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
          v.value.uiVal = d.gpu.values_at(now).memory_temperature_c;
          break;
        case NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
          v.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
          v.value.ullVal = d.gpu.energy_millijoules(now);
          break;
        case NVML_FI_DEV_PCIE_COUNT_TX_BYTES:
          v.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
          v.value.ullVal = d.gpu.pcie_tx_bytes(now);
          break;
        case NVML_FI_DEV_PCIE_COUNT_RX_BYTES:
          v.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
          v.value.ullVal = d.gpu.pcie_rx_bytes(now);
          break;
        case NVML_FI_DEV_POWER_AVERAGE:
          v.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
          v.value.uiVal = d.gpu.average_power_mw(now, kPowerAverageWindow);
          break;
        case NVML_FI_DEV_POWER_INSTANT:
          v.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
          v.value.uiVal = d.gpu.values_at(now).power_mw;
          break;
        default:
          v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
      }
    }
    return NVML_SUCCESS;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                                         unsigned long long* reasons) {
  return get_value(Fn::nvmlDeviceGetCurrentClocksEventReasons, device, reasons,
                   [](DeviceState& d, Micros now) { return d.gpu.values_at(now).clocks_event_reasons; });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                                            unsigned long long* reasons) {
  return get_value(Fn::nvmlDeviceGetCurrentClocksThrottleReasons, device, reasons,
                   [](DeviceState& d, Micros now) { return d.gpu.values_at(now).clocks_event_reasons; });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t device,
                                                                           unsigned long long* supported) {
  return get_value(Fn::nvmlDeviceGetSupportedClocksEventReasons, device, supported,
                   [](DeviceState&, Micros) { return gpumeter::sim::kSupportedClocksEventReasons; });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(nvmlDevice_t device,
                                                                              unsigned long long* supported) {
  return get_value(Fn::nvmlDeviceGetSupportedClocksThrottleReasons, device, supported,
                   [](DeviceState&, Micros) { return gpumeter::sim::kSupportedClocksEventReasons; });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, unsigned int error_type,
                                                              unsigned int counter_type, unsigned long long* count) {
  return device_call(Fn::nvmlDeviceGetTotalEccErrors, device, [&](Session&, DeviceState& d, Micros) {
    if (!d.gpu.model().ecc) return NVML_ERROR_NOT_SUPPORTED;
    if (count == nullptr || error_type > NVML_MEMORY_ERROR_TYPE_UNCORRECTED || counter_type > NVML_AGGREGATE_ECC) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    *count = 0;
    return NVML_SUCCESS;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* corr_rows,
                                                            unsigned int* unc_rows, unsigned int* is_pending,
                                                            unsigned int* failure_occurred) {
  return device_call(Fn::nvmlDeviceGetRemappedRows, device, [&](Session& s, DeviceState& d, Micros) {
    // nvml.h: "For Ampere or newer fully supported devices"; Volta and Turing retire pages
    // instead (nvmlDeviceGetRetiredPages). "NOT_SUPPORTED If MIG is enabled" (its note: "on
    // MIG-enabled GPUs with active instances"; the simulator's MIG GPUs are enabled for the whole
    // run, and always have instances but for an empty layout, taken as having them).
    const std::string& arch = d.gpu.model().architecture;
    if (arch == "volta" || arch == "turing") return NVML_ERROR_NOT_SUPPORTED;
    if (s.scenario().mig.enabled(d.gpu.index())) return NVML_ERROR_NOT_SUPPORTED;
    if (!d.gpu.model().ecc) return NVML_ERROR_NOT_SUPPORTED;
    if (corr_rows == nullptr || unc_rows == nullptr || is_pending == nullptr || failure_occurred == nullptr) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    *corr_rows = *unc_rows = *is_pending = *failure_occurred = 0;
    return NVML_SUCCESS;
  });
}

// nvml.h: "a byte counter over a 20ms interval", in KB/s. The call takes that long on a real
// driver, so it sleeps 20 ms of wall time (outside the device lock: other calls on the GPU go
// on meanwhile), then reports the average rate over the last 20 ms of scenario time. A KB is
// taken as 1024 bytes (an assumption: the header does not say).
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, unsigned int counter,
                                                              unsigned int* value) {
  constexpr Micros kWindow = 20'000;
  try {
    auto session = gpumeter::sim::Runtime::instance().session();
    if (!session) return NVML_ERROR_UNINITIALIZED;
    auto index = gpumeter::sim::Runtime::instance().index_of(device);
    if (!index || *index >= session->device_count()) return NVML_ERROR_INVALID_ARGUMENT;
    if (nvmlReturn_t r = session->enter(Fn::nvmlDeviceGetPcieThroughput, *index); r != NVML_SUCCESS) return r;
    if (value == nullptr || (counter != NVML_PCIE_UTIL_TX_BYTES && counter != NVML_PCIE_UTIL_RX_BYTES))
      return NVML_ERROR_INVALID_ARGUMENT;
    std::this_thread::sleep_for(std::chrono::microseconds(kWindow));
    DeviceState& d = session->device(*index);
    std::lock_guard lock(d.mu);
    const Micros now = session->now();
    const double rate =
        counter == NVML_PCIE_UTIL_TX_BYTES ? d.gpu.pcie_tx_rate(now, kWindow) : d.gpu.pcie_rx_rate(now, kWindow);
    *value = static_cast<unsigned>(std::llround(rate / 1024.0));
    return NVML_SUCCESS;
  } catch (...) {
    return NVML_ERROR_UNKNOWN;
  }
}

static_assert(std::is_same_v<decltype(&nvmlDeviceGetPcieThroughput), nvmlDeviceGetPcieThroughput_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetUtilizationRates), nvmlDeviceGetUtilizationRates_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMemoryInfo), nvmlDeviceGetMemoryInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMemoryInfo_v2), nvmlDeviceGetMemoryInfo_v2_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetTemperature), nvmlDeviceGetTemperature_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetPowerUsage), nvmlDeviceGetUInt_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetTotalEnergyConsumption), nvmlDeviceGetULongLong_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetClockInfo), nvmlDeviceGetClockInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetTotalEccErrors), nvmlDeviceGetTotalEccErrors_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetRemappedRows), nvmlDeviceGetRemappedRows_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetFieldValues), nvmlDeviceGetFieldValues_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetCurrentClocksEventReasons), nvmlDeviceGetULongLong_fn>);
