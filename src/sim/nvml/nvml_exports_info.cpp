// NVML entry points for the informational queries a typical client makes (pynvml's
// nvidia_smi.DeviceQuery, nvidia-smi -q): brand, modes, BAR1, thresholds, power limits, ECC
// mode and counters, retired pages, application and supported clocks, infoROM, accounting and
// process names. Each answers what a real driver answers for the simulated model: a value
// derived from the model, or NOT_SUPPORTED where nvml.h says the product lacks the feature.
// docs/nvml-behaviour.md gives the source of every choice.

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "sim/nvml/nvml_call.h"

using gpumeter::sim::copy_string;
using gpumeter::sim::device_call;
using gpumeter::sim::DeviceState;
using gpumeter::sim::GpuModelSpec;
using gpumeter::sim::Micros;
using gpumeter::sim::Session;
using gpumeter::sim::system_call;
using Fn = gpumeter::sim::NvmlFunction;

namespace {

constexpr unsigned long long kMiB = 1024ULL * 1024ULL;

bool geforce(const GpuModelSpec& m) { return m.profile == "geforce"; }

// Volta and Turing retire pages; Ampere and newer remap rows instead.
bool pre_ampere(const GpuModelSpec& m) { return m.architecture == "volta" || m.architecture == "turing"; }

// A product with ECC memory: GeForce boards have none unless the model says so.
bool has_ecc_memory(const GpuModelSpec& m) { return m.ecc || !geforce(m); }

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

unsigned brand_of(const GpuModelSpec& m) {
  std::string_view name = m.name;
  if (contains(name, "TITAN")) return NVML_BRAND_TITAN;
  if (geforce(m) || contains(name, "GeForce")) return NVML_BRAND_GEFORCE;
  if (contains(name, "Tesla")) return NVML_BRAND_TESLA;
  if (contains(name, "Quadro RTX")) return NVML_BRAND_QUADRO_RTX;
  if (contains(name, "Quadro")) return NVML_BRAND_QUADRO;
  if (contains(name, "RTX")) return NVML_BRAND_NVIDIA_RTX;
  return NVML_BRAND_NVIDIA;
}

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
  Thresholds t = geforce(m)                         ? Thresholds{98, 95, 90, 0}
                 : a == "volta"                     ? Thresholds{90, 87, 83, 85}
                 : a == "ga100"                     ? Thresholds{92, 89, 85, 95}
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

const char* inforom_image_of(const GpuModelSpec& m) {
  if (geforce(m)) return "G001.0000.02.04";
  const std::string& a = m.architecture;
  if (a == "volta") return "G503.0202.00.01";
  if (a == "turing") return "G183.0200.00.02";
  if (a == "ampere") return "G153.0200.00.01";
  if (a == "ga100") return "G503.0201.00.03";
  if (a == "ada") return "G193.0200.00.01";
  if (a == "blackwell") return "G525.0210.00.02";
  return "G520.0200.00.05";
}

const char* inforom_ecc_object_of(const GpuModelSpec& m) {
  if (pre_ampere(m)) return "5.0";
  if (m.architecture == "hopper" || m.architecture == "blackwell") return "7.16";
  return "6.16";
}

unsigned architecture_of(const GpuModelSpec& m) {
  const std::string& a = m.architecture;
  if (a == "volta") return NVML_DEVICE_ARCH_VOLTA;
  if (a == "turing") return NVML_DEVICE_ARCH_TURING;
  if (a == "ampere" || a == "ga100") return NVML_DEVICE_ARCH_AMPERE;
  if (a == "ada") return NVML_DEVICE_ARCH_ADA;
  if (a == "hopper") return NVML_DEVICE_ARCH_HOPPER;
  if (a == "blackwell") return NVML_DEVICE_ARCH_BLACKWELL;
  return NVML_DEVICE_ARCH_UNKNOWN;
}

// CUDA's compute capability by chip: GA100 is 8.0 and the other Ampere chips 8.6; datacenter
// Blackwell (B100/B200) is 10.0 and GeForce Blackwell 12.0.
std::pair<int, int> compute_capability_of(const GpuModelSpec& m) {
  const std::string& a = m.architecture;
  if (a == "volta") return {7, 0};
  if (a == "turing") return {7, 5};
  if (a == "ga100") return {8, 0};
  if (a == "ampere") return {8, 6};
  if (a == "ada") return {8, 9};
  if (a == "blackwell") return geforce(m) ? std::pair{12, 0} : std::pair{10, 0};
  return {9, 0};
}

// MIG exists on GA100, Hopper and Blackwell datacenter boards; no scenario enables it.
bool mig_capable(const GpuModelSpec& m) {
  return !geforce(m) && (m.architecture == "ga100" || m.architecture == "hopper" || m.architecture == "blackwell");
}

unsigned clock_max(const GpuModelSpec& m, unsigned type) {
  switch (type) {
    case NVML_CLOCK_GRAPHICS: return m.graphics_clock.max_mhz;
    case NVML_CLOCK_SM: return m.sm_clock.max_mhz;
    case NVML_CLOCK_MEM: return m.memory_clock.max_mhz;
    default: return m.video_clock.max_mhz;
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

// A device call with one unsigned out-parameter, which `get` fills or refuses.
template <typename Get>
nvmlReturn_t get_uint(Fn fn, nvmlDevice_t device, unsigned int* out, Get&& get) {
  return device_call(fn, device, [&](Session&, DeviceState& d, Micros now) -> nvmlReturn_t {
    if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    return get(d, now, *out);
  });
}

nvmlReturn_t not_supported(Fn fn, nvmlDevice_t device) {
  return device_call(fn, device, [](Session&, DeviceState&, Micros) { return NVML_ERROR_NOT_SUPPORTED; });
}

nvmlReturn_t value(unsigned v, unsigned& out) {
  out = v;
  return NVML_SUCCESS;
}

// A device call that answers the same value for every GPU.
nvmlReturn_t constant(Fn fn, nvmlDevice_t device, unsigned int* out, unsigned v) {
  return get_uint(fn, device, out, [v](DeviceState&, Micros, unsigned& o) { return value(v, o); });
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

nvmlReturn_t media_utilization(Fn fn, nvmlDevice_t device, unsigned int* utilization, unsigned int* period_us) {
  return device_call(fn, device, [&](Session&, DeviceState&, Micros) -> nvmlReturn_t {
    if (utilization == nullptr || period_us == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    // Simulated jobs are compute work; no video engine is ever busy.
    *utilization = 0;
    *period_us = 167'000;
    return NVML_SUCCESS;
  });
}

}  // namespace

// ---- identity and modes ----

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, unsigned int* type) {
  return get_uint(Fn::nvmlDeviceGetBrand, device, type,
                  [](DeviceState& d, Micros, unsigned& out) { return value(brand_of(d.gpu.model()), out); });
}

// Real boards report display mode enabled whether or not a monitor is attached (Tesla V100 and
// GeForce outputs of nvidia-smi -q alike); no simulated node runs an X server on its GPUs.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t device, unsigned int* display) {
  return constant(Fn::nvmlDeviceGetDisplayMode, device, display, NVML_FEATURE_ENABLED);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device, unsigned int* is_active) {
  return constant(Fn::nvmlDeviceGetDisplayActive, device, is_active, NVML_FEATURE_DISABLED);
}

// Datacenter nodes run nvidia-persistenced; a GeForce box keeps the driver's default (off).
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, unsigned int* mode) {
  return get_uint(Fn::nvmlDeviceGetPersistenceMode, device, mode, [](DeviceState& d, Micros, unsigned& out) {
    return value(geforce(d.gpu.model()) ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED, out);
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, unsigned int* mode) {
  return constant(Fn::nvmlDeviceGetComputeMode, device, mode, NVML_COMPUTEMODE_DEFAULT);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minor_number) {
  return get_uint(Fn::nvmlDeviceGetMinorNumber, device, minor_number,
                  [](DeviceState& d, Micros, unsigned& out) { return value(d.gpu.index(), out); });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMultiGpuBoard(nvmlDevice_t device, unsigned int* multi_gpu) {
  return constant(Fn::nvmlDeviceGetMultiGpuBoard, device, multi_gpu, 0);
}

// Unique per GPU of the node and stable: real boards report bus << 8 | device (0x600 for
// 00000000:06:00.0, 0x1e for 00000000:00:1E.0); the domain goes above them so that GPUs of two
// PCI domains stay distinct.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetBoardId(nvmlDevice_t device, unsigned int* board_id) {
  return get_uint(Fn::nvmlDeviceGetBoardId, device, board_id, [](DeviceState& d, Micros, unsigned& out) {
    const auto& pci = d.gpu.spec().pci;
    return value((pci.domain << 16) | (pci.bus << 8) | pci.device, out);
  });
}

// "For windows only": every Linux driver answers NOT_SUPPORTED.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetDriverModel(nvmlDevice_t device, unsigned int* /*current*/,
                                                           unsigned int* /*pending*/) {
  return not_supported(Fn::nvmlDeviceGetDriverModel, device);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetDriverModel_v2(nvmlDevice_t device, unsigned int* /*current*/,
                                                              unsigned int* /*pending*/) {
  return not_supported(Fn::nvmlDeviceGetDriverModel_v2, device);
}

// GPU operation modes exist on Kepler Tesla boards only.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuOperationMode(nvmlDevice_t device, unsigned int* /*current*/,
                                                                unsigned int* /*pending*/) {
  return not_supported(Fn::nvmlDeviceGetGpuOperationMode, device);
}

// Bridge chips sit on multi-GPU boards only; every simulated board carries one GPU.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetBridgeChipInfo(nvmlDevice_t device,
                                                              nvmlBridgeChipHierarchy_t* /*hierarchy*/) {
  return not_supported(Fn::nvmlDeviceGetBridgeChipInfo, device);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetInforomImageVersion(nvmlDevice_t device, char* version,
                                                                   unsigned int length) {
  return device_call(Fn::nvmlDeviceGetInforomImageVersion, device, [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
    return copy_string(inforom_image_of(d.gpu.model()), version, length);
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetInforomVersion(nvmlDevice_t device, unsigned int object,
                                                              char* version, unsigned int length) {
  return device_call(Fn::nvmlDeviceGetInforomVersion, device, [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
    const auto& m = d.gpu.model();
    if (object >= NVML_INFOROM_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
    switch (object) {
      case NVML_INFOROM_OEM: return copy_string(geforce(m) || pre_ampere(m) ? "1.1" : "2.1", version, length);
      case NVML_INFOROM_ECC:
        if (!has_ecc_memory(m)) return NVML_ERROR_NOT_SUPPORTED;
        return copy_string(inforom_ecc_object_of(m), version, length);
      default:
        // Kepler and newer need no power object; no simulated board encrypts DRAM.
        return NVML_ERROR_NOT_SUPPORTED;
    }
  });
}

// ---- memory and utilization ----

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t* bar1) {
  return device_call(Fn::nvmlDeviceGetBAR1MemoryInfo, device, [&](Session&, DeviceState& d, Micros now) -> nvmlReturn_t {
    if (bar1 == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
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
  return media_utilization(Fn::nvmlDeviceGetEncoderUtilization, device, utilization, sampling_period_us);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int* utilization,
                                                                  unsigned int* sampling_period_us) {
  return media_utilization(Fn::nvmlDeviceGetDecoderUtilization, device, utilization, sampling_period_us);
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
                                                                  unsigned int counter_type,
                                                                  unsigned int location,
                                                                  unsigned long long* count) {
  return device_call(Fn::nvmlDeviceGetMemoryErrorCounter, device, [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
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
                                                            unsigned int* page_count,
                                                            unsigned long long* addresses) {
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
  return device_call(Fn::nvmlDeviceGetRetiredPagesPendingStatus, device, [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
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
  return device_call(Fn::nvmlDeviceGetTemperatureThreshold, device, [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
    if (temp == nullptr || type >= NVML_TEMPERATURE_THRESHOLD_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
    const auto& m = d.gpu.model();
    const Thresholds t = thresholds_of(m);
    switch (type) {
      case NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: *temp = t.shutdown; return NVML_SUCCESS;
      case NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: *temp = t.slowdown; return NVML_SUCCESS;
      case NVML_TEMPERATURE_THRESHOLD_GPU_MAX: *temp = t.gpu_max; return NVML_SUCCESS;
      case NVML_TEMPERATURE_THRESHOLD_MEM_MAX:
        if (t.mem_max == 0) return NVML_ERROR_NOT_SUPPORTED;
        *temp = t.mem_max;
        return NVML_SUCCESS;
      // GeForce boards have a user-settable target temperature ("acoustic"); datacenter boards do not.
      case NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN:
      case NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR:
      case NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX:
        if (!geforce(m)) return NVML_ERROR_NOT_SUPPORTED;
        *temp = type == NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN    ? 65U
                : type == NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR ? 83U
                                                                   : t.gpu_max + 1;
        return NVML_SUCCESS;
      default: return NVML_ERROR_NOT_SUPPORTED;  // GPS_CURR
    }
  });
}

// Deprecated alias of nvmlDeviceGetPerformanceState.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerState(nvmlDevice_t device, unsigned int* pstate) {
  return get_uint(Fn::nvmlDeviceGetPowerState, device, pstate, [](DeviceState& d, Micros now, unsigned& out) {
    return value(d.gpu.reading(now).performance_state, out);
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
  return device_call(Fn::nvmlDeviceGetSupportedMemoryClocks, device, [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
    return copy_list(memory_clocks_of(d.gpu.model()), count, clocks_mhz);
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device,
                                                                       unsigned int memory_clock_mhz,
                                                                       unsigned int* count,
                                                                       unsigned int* clocks_mhz) {
  return device_call(Fn::nvmlDeviceGetSupportedGraphicsClocks, device, [&](Session&, DeviceState& d, Micros) -> nvmlReturn_t {
    const auto& m = d.gpu.model();
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const auto memory = memory_clocks_of(m);
    if (std::find(memory.begin(), memory.end(), memory_clock_mhz) == memory.end()) return NVML_ERROR_NOT_FOUND;
    return copy_list(graphics_clocks_of(m), count, clocks_mhz);
  });
}

// ---- architecture and MIG ----

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned int* arch) {
  return get_uint(Fn::nvmlDeviceGetArchitecture, device, arch,
                  [](DeviceState& d, Micros, unsigned& out) { return value(architecture_of(d.gpu.model()), out); });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  return device_call(Fn::nvmlDeviceGetCudaComputeCapability, device, [&](Session&, DeviceState& d, Micros) {
    if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    std::tie(*major, *minor) = compute_capability_of(d.gpu.model());
    return NVML_SUCCESS;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                                       unsigned int* pending) {
  return device_call(Fn::nvmlDeviceGetMigMode, device, [&](Session&, DeviceState& d, Micros) {
    if (!mig_capable(d.gpu.model())) return NVML_ERROR_NOT_SUPPORTED;
    if (current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *current = *pending = NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
  });
}

// ---- accounting ----

// Accounting is off unless an administrator turns it on (nvidia-smi -am 1); no scenario does.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetAccountingMode(nvmlDevice_t device, unsigned int* mode) {
  return constant(Fn::nvmlDeviceGetAccountingMode, device, mode, NVML_FEATURE_DISABLED);
}

// nvml.h says NOT_SUPPORTED "if ... accounting mode is disabled", but real drivers answer the
// buffer's size with accounting off (nvidia-smi -q prints 4000 next to "Accounting Mode:
// Disabled" on Tesla and GeForce boards alike).
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetAccountingBufferSize(nvmlDevice_t device, unsigned int* buffer_size) {
  return constant(Fn::nvmlDeviceGetAccountingBufferSize, device, buffer_size, 4000);
}

// Pids and stats need accounting on: "NOT_SUPPORTED if ... accounting mode is disabled".
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetAccountingPids(nvmlDevice_t device, unsigned int* /*count*/,
                                                              unsigned int* /*pids*/) {
  return not_supported(Fn::nvmlDeviceGetAccountingPids, device);
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlDeviceGetAccountingStats(nvmlDevice_t device, unsigned int /*pid*/,
                                                               nvmlAccountingStats_t* /*stats*/) {
  return not_supported(Fn::nvmlDeviceGetAccountingStats, device);
}

// ---- system ----

// The name a real driver reports is the process's command (argv[0]); a simulated job's process
// is started as the job's name (`gpumeter sim procfs` writes that as its cmdline). Processes
// exist from the job's start to its end, whatever their GPUs are doing.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char* name, unsigned int length) {
  return system_call(Fn::nvmlSystemGetProcessName, [&](Session& s) -> nvmlReturn_t {
    if (name == nullptr || length == 0) return NVML_ERROR_INVALID_ARGUMENT;
    const auto& sc = s.scenario();
    const Micros now = s.now();
    for (const auto& job : sc.jobs) {
      if (now < job.start || now >= std::min(job.end, sc.duration)) continue;
      if (std::find(job.pids.begin(), job.pids.end(), pid) == job.pids.end()) continue;
      // "Returned process name is cropped to provided length."
      const std::size_t n = std::min<std::size_t>(job.name.size(), length - 1);
      std::copy_n(job.name.data(), n, name);
      name[n] = '\0';
      return NVML_SUCCESS;
    }
    return NVML_ERROR_NOT_FOUND;
  });
}

static_assert(std::is_same_v<decltype(&nvmlDeviceGetBrand), nvmlDeviceGetEnum_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMinorNumber), nvmlDeviceGetUInt_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetBoardId), nvmlDeviceGetUInt_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetDriverModel_v2), nvmlDeviceGetEnumPair_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetEccMode), nvmlDeviceGetEnumPair_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetEncoderUtilization), nvmlDeviceGetEnumPair_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetPowerManagementLimitConstraints), nvmlDeviceGetEnumPair_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetBAR1MemoryInfo), nvmlDeviceGetBAR1MemoryInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetBridgeChipInfo), nvmlDeviceGetBridgeChipInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetInforomVersion), nvmlDeviceGetInforomVersion_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetInforomImageVersion), nvmlDeviceGetString_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMemoryErrorCounter), nvmlDeviceGetMemoryErrorCounter_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetRetiredPages), nvmlDeviceGetRetiredPages_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetTemperatureThreshold), nvmlDeviceGetTemperature_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetApplicationsClock), nvmlDeviceGetClockInfo_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetSupportedMemoryClocks), nvmlDeviceGetSupportedMemoryClocks_fn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetSupportedGraphicsClocks), nvmlDeviceGetSupportedGraphicsClocks_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetAccountingPids), nvmlDeviceGetAccountingPids_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetAccountingStats), nvmlDeviceGetAccountingStats_fn>);
static_assert(std::is_same_v<decltype(&nvmlSystemGetProcessName), nvmlSystemGetProcessName_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetArchitecture), nvmlDeviceGetEnum_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetCudaComputeCapability), nvmlDeviceGetCudaComputeCapability_fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMigMode), nvmlDeviceGetEnumPair_fn>);
