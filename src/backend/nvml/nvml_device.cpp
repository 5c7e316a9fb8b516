// The device collectors' NVML queries: one function per collector (docs/configuration.md#collectors),
// each run only when its collector is asked for and timed into DeviceReading::runs.

#include <algorithm>
#include <array>
#include <chrono>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <utility>
#include <vector>

#include "backend/nvml/nvml_backend.h"
#include "backend/nvml/nvml_internal.h"

namespace gpumeter {

namespace {

struct ClockEventReason {
  unsigned long long bit;
  const char* label;
};
constexpr std::array<ClockEventReason, 9> kClockEventReasons = {{
    {nvmlClocksEventReasonGpuIdle, "gpu_idle"},
    {nvmlClocksEventReasonApplicationsClocksSetting, "applications_clocks_setting"},
    {nvmlClocksEventReasonSwPowerCap, "sw_power_cap"},
    {nvmlClocksThrottleReasonHwSlowdown, "hw_slowdown"},
    {nvmlClocksEventReasonSyncBoost, "sync_boost"},
    {nvmlClocksEventReasonSwThermalSlowdown, "sw_thermal_slowdown"},
    {nvmlClocksThrottleReasonHwThermalSlowdown, "hw_thermal_slowdown"},
    {nvmlClocksThrottleReasonHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
    {nvmlClocksEventReasonDisplayClockSetting, "display_clock_setting"},
}};

// Whether the vGPU software is licensed, as DCGM reads it (DCGM_FI_DEV_VGPU_LICENSE_STATUS): 0
// where the system licenses no vGPU software (bare metal), else the vGPU feature's state; unset
// when no feature is the vGPU one.
std::optional<double> vgpu_licensed(const nvmlGridLicensableFeatures_t& f) {
  if (f.isGridLicenseSupported == 0) return 0.0;
  const unsigned n = std::min<unsigned>(f.licensableFeaturesCount, NVML_GRID_LICENSE_FEATURE_MAX_COUNT);
  for (unsigned i = 0; i < n; ++i) {
    const nvmlGridLicensableFeature_t& feature = f.gridLicensableFeatures[i];
    if (feature.featureCode == NVML_GRID_LICENSE_FEATURE_CODE_VGPU) return feature.featureState > 0 ? 1.0 : 0.0;
  }
  return std::nullopt;
}

}  // namespace

void NvmlBackend::collect_slow_values(Device& d, nvmlDevice_t h, CollectorId group, NvmlCollection& c) {
  const auto g = static_cast<size_t>(group);
  if (d.slow.valid.test(g) && steady_now() - d.slow.read_at[g] < kSlowValuesInterval) return;
  const NvmlSymbols& s = symbols_;
  Device::SlowValues& v = d.slow;
  bool complete = true;  // a call that failed is tried again at the next collection
  auto ok = [&](Call call, nvmlReturn_t rc, const char* name) {
    const bool good = c.ok(call, rc, name);
    if (!good && rc != NVML_ERROR_NOT_SUPPORTED) complete = false;
    return good;
  };
  switch (group) {
    case CollectorId::kDevice:
      v.power_limit_watts.reset();
      if (c.wanted(s.power_limit, kPowerLimit)) {
        unsigned mw = 0;
        if (ok(kPowerLimit, s.power_limit(h, &mw), "nvmlDeviceGetEnforcedPowerLimit")) {
          v.power_limit_watts = mw / 1000.0;
        }
      }
      v.vgpu_licensed.reset();
      if (c.wanted(s.vgpu_license, kVgpuLicense)) {
        nvmlGridLicensableFeatures_t f{};
        if (ok(kVgpuLicense, s.vgpu_license(h, &f), "nvmlDeviceGetGridLicensableFeatures_v4")) {
          v.vgpu_licensed = vgpu_licensed(f);
        }
      }
      break;
    case CollectorId::kPcie:
      v.pcie_link_generation.reset();
      v.pcie_link_width.reset();
      if (c.wanted(s.pcie_link_generation, kPcieGeneration)) {
        unsigned gen = 0;
        if (ok(kPcieGeneration, s.pcie_link_generation(h, &gen), "nvmlDeviceGetCurrPcieLinkGeneration")) {
          v.pcie_link_generation = gen;
        }
      }
      if (c.wanted(s.pcie_link_width, kPcieWidth)) {
        unsigned w = 0;
        if (ok(kPcieWidth, s.pcie_link_width(h, &w), "nvmlDeviceGetCurrPcieLinkWidth")) v.pcie_link_width = w;
      }
      break;
    case CollectorId::kClocks:
      v.supported_clock_events = ~0ULL;
      if (c.wanted(s.supported_clock_event_reasons, kSupportedClockEvents)) {
        unsigned long long m = 0;
        if (ok(kSupportedClockEvents, s.supported_clock_event_reasons(h, &m),
               "nvmlDeviceGetSupportedClocksEventReasons")) {
          v.supported_clock_events = m;
        }
      }
      break;
    case CollectorId::kEcc:
      v.remapped_rows.clear();
      if (c.wanted(s.remapped_rows, kRemappedRows)) {
        unsigned corr = 0, unc = 0, pending = 0, failure = 0;
        if (ok(kRemappedRows, s.remapped_rows(h, &corr, &unc, &pending, &failure), "nvmlDeviceGetRemappedRows")) {
          v.remapped_rows = {{"correctable", static_cast<double>(corr)},
                             {"uncorrectable", static_cast<double>(unc)},
                             {"pending", static_cast<double>(pending)},
                             {"failure", static_cast<double>(failure)}};
        }
      }
      break;
    case CollectorId::kNvlink:
      v.nvlink_count = 0;
      if (c.wanted(s.field_values, kNvlinkCount)) {
        nvmlFieldValue_t f{};
        f.fieldId = NVML_FI_DEV_NVLINK_LINK_COUNT;
        if (ok(kNvlinkCount, s.field_values(h, 1, &f), "nvmlDeviceGetFieldValues")) {
          // A GPU without NVLink answers the field with its own NOT_SUPPORTED: no links.
          if (auto n = field_as_double(f, c); n && *n > 0) v.nvlink_count = static_cast<unsigned>(*n);
        }
      }
      break;
    default:
      return;
  }
  v.valid.set(g, complete);
  v.read_at[g] = steady_now();
}

void NvmlBackend::collect_device(Device& d, nvmlDevice_t h, CollectScope scope, CollectorSet groups, NvmlCollection& c,
                                 DeviceReading& r) {
  // On a GPU in MIG mode the ledger bills each MIG device: their processes and activity are
  // usage too (GPM support was probed by the first full collection, which comes first).
  // A full collection reads the mode even where the MIG collector is off or not due, so that the
  // ledger never loses the MIG devices it bills.
  const bool ledger = groups.has(CollectorId::kLedger);
  // The ledger bills a MIG device's busy time by its GPM activity: sampled whenever the ledger is
  // on, and exported only with the profiling collector.
  const bool profiling = groups.has(CollectorId::kProfiling) || ledger;
  if (scope == CollectScope::kUsage) {
    collect_ledger_values(h, c, r);
    if (ledger && d.mig_enabled.value_or(false)) collect_mig(d, h, profiling, c, r);
    return;
  }
  // A full collection that does not read the device collector (its interval has not passed)
  // still reads what the ledger integrates.
  if (!groups.has(CollectorId::kDevice) && ledger) collect_ledger_values(h, c, r);
  if (!groups.has(CollectorId::kMig) && ledger) collect_mig(d, h, profiling, c, r);
  auto run = [&](CollectorId id, auto&& read) {
    if (groups.has(id)) r.runs.push_back(c.timed(id, read));
  };
  // The memory temperature is a field: with the PCIe collector on, it rides on that collector's
  // field-values call (one call is cheaper than two).
  const bool pcie = groups.has(CollectorId::kPcie);
  run(CollectorId::kDevice, [&] { collect_basics(d, h, /*memory_temperature=*/!pcie, c, r); });
  run(CollectorId::kClocks, [&] { collect_clocks(d, h, c, r); });
  run(CollectorId::kEcc, [&] { collect_ecc(d, h, c, r); });
  // Where the profiling collector samples GPM, GPM measures PCIe: probed first, so that the pcie
  // collector's fallback never reads a GPU whose GPM is about to.
  if (groups.has(CollectorId::kProfiling)) probe_gpm(d, h, c);
  const bool gpm_pcie = groups.has(CollectorId::kProfiling) && d.gpm_supported == true;
  run(CollectorId::kPcie, [&] {
    collect_pcie(d, h, groups.has(CollectorId::kDevice), c, r);
    serve_pcie_throughput(d, gpm_pcie, r);
  });
  run(CollectorId::kNvlink, [&] {
    collect_slow_values(d, h, CollectorId::kNvlink, c);
    collect_nvlinks(d, h, c, r);
  });
  // Before MIG: the instances' GPM needs the device's support probed.
  if (groups.has(CollectorId::kProfiling)) {
    run(CollectorId::kProfiling, [&] { collect_gpm(d, h, c, r); });
  } else {
    // Switched off: a later sample must not average over the time it was off.
    if (d.gpm.previous >= 0) free_gpm_pair(d.gpm);
    if (ledger) {
      probe_gpm(d, h, c);
    } else if (!d.mig_gpm.empty()) {
      free_gpm_samples(d);
    }
  }
  run(CollectorId::kMig, [&] { collect_mig(d, h, profiling, c, r); });
}

void NvmlBackend::collect_ledger_values(nvmlDevice_t h, NvmlCollection& c, DeviceReading& r) {
  const NvmlSymbols& s = symbols_;
  if (c.wanted(s.utilization, kUtilization)) {
    nvmlUtilization_t u{};
    if (c.ok(kUtilization, s.utilization(h, &u), "nvmlDeviceGetUtilizationRates")) {
      r.device.utilization_ratio = u.gpu / 100.0;
      r.device.memory_utilization_ratio = u.memory / 100.0;
    }
  }
  if (c.wanted(s.power_usage, kPowerUsage)) {
    unsigned mw = 0;
    if (c.ok(kPowerUsage, s.power_usage(h, &mw), "nvmlDeviceGetPowerUsage")) {
      r.device.power_watts = c.plausible_power(mw / 1000.0);
    }
  }
  if (c.wanted(s.total_energy, kEnergy)) {
    unsigned long long mj = 0;
    if (c.ok(kEnergy, s.total_energy(h, &mj), "nvmlDeviceGetTotalEnergyConsumption")) {
      r.device.energy_joules = static_cast<double>(mj) / 1000.0;
    }
  }
}

void NvmlBackend::collect_basics(Device& d, nvmlDevice_t h, bool memory_temperature, NvmlCollection& c,
                                 DeviceReading& r) {
  const NvmlSymbols& s = symbols_;
  // What the usage ledger reads comes first, as in a usage-only collection.
  collect_ledger_values(h, c, r);
  // v2 first: its "used" excludes driver-reserved memory and matches nvidia-smi.
  auto set_memory = [&r](unsigned long long total, unsigned long long used, unsigned long long free) {
    r.device.memory_total_bytes = static_cast<double>(total);
    r.device.memory_used_bytes = static_cast<double>(used);
    r.device.memory_free_bytes = static_cast<double>(free);
  };
  if (c.wanted(s.memory_v2, kMemoryV2)) {
    nvmlMemory_v2_t m{};
    m.version = nvmlMemory_v2;
    if (c.ok(kMemoryV2, s.memory_v2(h, &m), "nvmlDeviceGetMemoryInfo_v2")) {
      set_memory(m.total, m.used, m.free);
      r.device.memory_reserved_bytes = static_cast<double>(m.reserved);
    }
  }
  if (!r.device.memory_total_bytes && c.wanted(s.memory_v1, kMemoryV1)) {
    nvmlMemory_t m{};
    if (c.ok(kMemoryV1, s.memory_v1(h, &m), "nvmlDeviceGetMemoryInfo")) set_memory(m.total, m.used, m.free);
  }
  if (c.wanted(s.temperature, kTemperature)) {
    unsigned t = 0;
    if (c.ok(kTemperature, s.temperature(h, NVML_TEMPERATURE_GPU, &t), "nvmlDeviceGetTemperature")) {
      r.device.temperature_celsius.push_back({"gpu", static_cast<double>(t)});
    }
  }
  if (memory_temperature && c.wanted(s.field_values, kFieldValues)) {
    nvmlFieldValue_t f{};
    f.fieldId = NVML_FI_DEV_MEMORY_TEMP;
    if (c.ok(kFieldValues, s.field_values(h, 1, &f), "nvmlDeviceGetFieldValues")) {
      if (auto v = field_as_double(f, c)) r.device.temperature_celsius.push_back({"memory", *v});
    }
  }
  collect_slow_values(d, h, CollectorId::kDevice, c);
  r.device.power_limit_watts = d.slow.power_limit_watts;
  r.device.vgpu_licensed = d.slow.vgpu_licensed;
  if (c.wanted(s.fan_speed, kFanSpeed)) {
    unsigned pct = 0;
    if (c.ok(kFanSpeed, s.fan_speed(h, &pct), "nvmlDeviceGetFanSpeed")) r.device.fan_speed_ratio = pct / 100.0;
  }
  // The video engines, in percent of their sampling period (which is not kept).
  struct VideoQuery {
    nvmlDeviceGetEnumPair_fn fn;
    Call call;
    const char* name;
    std::optional<double> DeviceValues::*out;
  };
  for (const VideoQuery& q : {VideoQuery{s.encoder_utilization, kEncoderUtilization, "nvmlDeviceGetEncoderUtilization",
                                         &DeviceValues::encoder_utilization_ratio},
                              VideoQuery{s.decoder_utilization, kDecoderUtilization, "nvmlDeviceGetDecoderUtilization",
                                         &DeviceValues::decoder_utilization_ratio}}) {
    if (!c.wanted(q.fn, q.call)) continue;
    unsigned pct = 0, period_us = 0;
    if (c.ok(q.call, q.fn(h, &pct, &period_us), q.name)) r.device.*(q.out) = pct / 100.0;
  }
}

void NvmlBackend::collect_clocks(Device& d, nvmlDevice_t h, NvmlCollection& c, DeviceReading& r) {
  const NvmlSymbols& s = symbols_;
  collect_slow_values(d, h, CollectorId::kClocks, c);
  struct ClockQuery {
    Call call;
    unsigned type;
    const char* label;
  };
  for (const ClockQuery& q :
       {ClockQuery{kClockGraphics, NVML_CLOCK_GRAPHICS, "graphics"}, ClockQuery{kClockSm, NVML_CLOCK_SM, "sm"},
        ClockQuery{kClockMemory, NVML_CLOCK_MEM, "memory"}, ClockQuery{kClockVideo, NVML_CLOCK_VIDEO, "video"}}) {
    if (!c.wanted(s.clock_info, q.call)) continue;
    unsigned mhz = 0;
    if (c.ok(q.call, s.clock_info(h, q.type, &mhz), "nvmlDeviceGetClockInfo")) {
      r.clocks.hertz.push_back({q.label, mhz * 1e6});
    }
  }
  if (c.wanted(s.performance_state, kPerformanceState)) {
    unsigned p = NVML_PSTATE_UNKNOWN;
    if (c.ok(kPerformanceState, s.performance_state(h, &p), "nvmlDeviceGetPerformanceState") && p <= 15) {
      r.clocks.performance_state = p;
    }
  }
  if (c.wanted(s.clock_event_reasons, kClockEvents)) {
    unsigned long long current = 0;
    if (c.ok(kClockEvents, s.clock_event_reasons(h, &current), "nvmlDeviceGetCurrentClocksEventReasons")) {
      const unsigned long long supported = d.slow.supported_clock_events;
      for (const auto& reason : kClockEventReasons) {
        if ((supported & reason.bit) == 0) continue;
        r.clocks.event_active.push_back({reason.label, (current & reason.bit) != 0 ? 1.0 : 0.0});
      }
    }
  }
}

void NvmlBackend::collect_ecc(Device& d, nvmlDevice_t h, NvmlCollection& c, DeviceReading& r) {
  const NvmlSymbols& s = symbols_;
  collect_slow_values(d, h, CollectorId::kEcc, c);
  r.ecc.remapped_rows = d.slow.remapped_rows;
  struct EccQuery {
    Call call;
    unsigned type;
    const char* label;
  };
  for (const EccQuery& q : {EccQuery{kEccCorrected, NVML_MEMORY_ERROR_TYPE_CORRECTED, "corrected"},
                            EccQuery{kEccUncorrected, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, "uncorrected"}}) {
    if (!c.wanted(s.total_ecc_errors, q.call)) continue;
    unsigned long long n = 0;
    if (c.ok(q.call, s.total_ecc_errors(h, q.type, NVML_VOLATILE_ECC, &n), "nvmlDeviceGetTotalEccErrors")) {
      r.ecc.errors.push_back({q.label, static_cast<double>(n)});
    }
  }
}

void NvmlBackend::collect_pcie(Device& d, nvmlDevice_t h, bool memory_temperature, NvmlCollection& c,
                               DeviceReading& r) {
  const NvmlSymbols& s = symbols_;
  collect_slow_values(d, h, CollectorId::kPcie, c);
  r.pcie.link_generation = d.slow.pcie_link_generation;
  r.pcie.link_width = d.slow.pcie_link_width;
  if (c.wanted(s.pcie_replay_counter, kPcieReplay)) {
    unsigned v = 0;
    if (c.ok(kPcieReplay, s.pcie_replay_counter(h, &v), "nvmlDeviceGetPcieReplayCounter")) {
      r.pcie.replay_errors = v;
    }
  }
  if (c.wanted(s.field_values, kFieldValues)) {
    // One call for the values only the field API offers; each field has its own status.
    std::array<nvmlFieldValue_t, 3> f{};
    f[0].fieldId = NVML_FI_DEV_PCIE_COUNT_TX_BYTES;
    f[1].fieldId = NVML_FI_DEV_PCIE_COUNT_RX_BYTES;
    f[2].fieldId = NVML_FI_DEV_MEMORY_TEMP;
    const int n = memory_temperature ? 3 : 2;
    if (c.ok(kFieldValues, s.field_values(h, n, f.data()), "nvmlDeviceGetFieldValues")) {
      r.pcie.transmit_bytes = field_as_double(f[0], c);
      r.pcie.receive_bytes = field_as_double(f[1], c);
      if (memory_temperature) {
        if (auto v = field_as_double(f[2], c)) r.device.temperature_celsius.push_back({"memory", *v});
      }
      // Drivers before R555 answer both NOT_SUPPORTED; anything else (an error) teaches nothing.
      const nvmlReturn_t tx = f[0].nvmlReturn;
      if (tx == f[1].nvmlReturn && (tx == NVML_SUCCESS || tx == NVML_ERROR_NOT_SUPPORTED)) {
        d.pcie_byte_fields = tx == NVML_SUCCESS;
      }
    }
  }
  if (s.field_values == nullptr || c.unsupported(kFieldValues)) d.pcie_byte_fields = false;
}

void NvmlBackend::serve_pcie_throughput(Device& d, bool gpm_pcie, DeviceReading& r) {
  if (!pcie_reader_ || !d.pcie_byte_fields) return;
  // Exported as a gauge, never added up into the byte counters: a 20 ms sample a second would
  // count bytes no counter saw (docs/metrics.md, "PCIe throughput before R555").
  if (*d.pcie_byte_fields || gpm_pcie) {
    pcie_reader_->pause(d.index);
    return;
  }
  const ThroughputRates rates = pcie_reader_->serve(d.index);
  r.pcie.transmit_bytes_per_second = rates.transmit;
  r.pcie.receive_bytes_per_second = rates.receive;
}

// On the throughput reader's thread, not a worker's: each call measures for 20 ms before it
// returns. It takes the driver-call lock shared as a worker does, so a re-initialization waits
// for it, and reads the handle the GPU's worker acquired (none: the worker is acquiring it again).
ThroughputRead NvmlBackend::read_pcie_throughput(unsigned index) {
  std::shared_lock calls(calls_mu_);
  if (reinit_needed_ || !initialized_) return {};
  nvmlDevice_t h = nullptr;
  {
    std::lock_guard lock(handles_mu_);
    h = devices_.at(index)->handle;
  }
  if (h == nullptr) return {};
  ThroughputRead read;
  for (auto [counter, rate] : {std::pair{NVML_PCIE_UTIL_TX_BYTES, &ThroughputRates::transmit},
                               std::pair{NVML_PCIE_UTIL_RX_BYTES, &ThroughputRates::receive}}) {
    unsigned kb_per_second = 0;
    const nvmlReturn_t rc = symbols_.pcie_throughput(h, counter, &kb_per_second);
    if (rc == NVML_SUCCESS) {
      read.rates.*rate = kb_per_second * 1024.0;  // nvml.h's "KB" taken as 1024 bytes (an assumption)
    } else if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_NO_PERMISSION ||
               rc == NVML_ERROR_FUNCTION_NOT_FOUND) {
      return {.unsupported = true};  // a vGPU guest, a GPU before Maxwell
    } else {
      // A lost or reset GPU fails its worker's collection too, which reports it.
      if (!is_fatal(rc)) {
        std::lock_guard lock(status_mu_);
        ++status_.counters.call_errors[{index, "nvmlDeviceGetPcieThroughput", error_name(rc)}];
      }
      return {};
    }
  }
  return read;
}

}  // namespace gpumeter
