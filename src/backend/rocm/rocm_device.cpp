// The device collectors' ROCm SMI queries: one reader per collector group, as nvml_device.cpp has
// them for NVIDIA GPUs, each run only when its collector is asked for.

#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "backend/rocm/rocm_internal.h"
#include "backend/rocm/rocm_values.h"

namespace gpumeter {

namespace {

// A PCIe transfer rate (T/s) as the generation that runs at it per lane.
std::optional<double> pcie_generation(std::uint64_t transfers_per_second) {
  static constexpr std::pair<std::uint64_t, int> kRates[] = {
      {2'500'000'000ULL, 1},  {5'000'000'000ULL, 2},  {8'000'000'000ULL, 3},  {16'000'000'000ULL, 4},
      {32'000'000'000ULL, 5}, {64'000'000'000ULL, 6}, {128'000'000'000ULL, 7}};
  for (auto [rate, gen] : kRates) {
    if (transfers_per_second == rate) return gen;
  }
  return std::nullopt;
}

// The current entry of a frequency table, rejecting what some iGPUs return with SUCCESS
// (an uninitialized `current`, an empty or overlong table), as btop does.
template <typename Freq>
std::optional<std::uint64_t> current_of(const Freq& f) {
  constexpr std::uint32_t kMax = sizeof(f.frequency) / sizeof(f.frequency[0]);
  if (f.num_supported == 0 || f.num_supported > kMax || f.current >= f.num_supported) return std::nullopt;
  return f.frequency[f.current];
}

bool unsupported(rsmi_status_t rc) { return rc == RSMI_STATUS_NOT_SUPPORTED || rc == RSMI_STATUS_NOT_YET_IMPLEMENTED; }

// A socket power in gpu_metrics that is no reading: 0xFFFF where the kernel filled nothing in
// (smu_cmn_init_soft_gpu_metrics fills the table with 0xFF first), 0 on an MI250X's secondary die
// (aldebaran_get_gpu_metrics: "Valid power data is available only from primary die").
bool socket_power_unset(std::uint16_t watts) { return watts == 0xFFFF || watts == 0; }

}  // namespace

// One collection of one AMD GPU: whether any call answered, and the first error. A GPU none of
// whose calls answer is down, also when they all say NOT_SUPPORTED: the 5.2.3 library answers
// that for a file that is missing (ENOENT), so a GPU whose sysfs files are gone says nothing else.
struct RocmBackend::Collection {
  RocmBackend& backend;
  unsigned device;
  bool answered = false;
  std::optional<Error> first_error;
  // gpu_metrics, read at most once (the power fallback and the throttle status).
  std::optional<rsmi_status_t> metrics_rc;
  rsmi_gpu_metrics_v5_t metrics{};

  // Records a call's outcome: true when it answered.
  bool ok(const char* call, rsmi_status_t rc) {
    if (rc == RSMI_STATUS_SUCCESS) {
      answered = true;
      return true;
    }
    if (!unsupported(rc)) {
      backend.note_call_error(device, call, rc);
      if (!first_error) first_error = Error{rc, backend.error_text(call, rc)};
    }
    return false;
  }

  // gpu_metrics as the 5.x library returns it, or null. Only the 5.x struct is declared here
  // (6.x rewrote rsmi_gpu_metrics_t): with a 6.x library the call is not made.
  const rsmi_gpu_metrics_v5_t* gpu_metrics() {
    const Symbols& s = *backend.sym_;
    if (s.gpu_metrics == nullptr || backend.abi_ != "5") return nullptr;
    if (!metrics_rc) {
      metrics_rc = s.gpu_metrics(device, &metrics);
      ok("rsmi_dev_gpu_metrics_info_get", *metrics_rc);
    }
    return *metrics_rc == RSMI_STATUS_SUCCESS ? &metrics : nullptr;
  }
};

Result<DeviceReading> RocmBackend::collect(unsigned device, CollectScope scope, CollectorSet groups) {
  if (device >= device_count_) return Error{RSMI_STATUS_INVALID_ARGS, fmt::format("no AMD GPU {}", device)};
  Collection c{*this, device};
  DeviceReading r;
  collect_ledger_values(device, c, r);
  const bool usage = groups.has(CollectorId::kLedger) || groups.has(CollectorId::kProcesses);
  if (scope == CollectScope::kUsage) {
    if (usage) collect_usage(device, r);
  } else {
    collect_basics(device, c, r);
    if (groups.has(CollectorId::kClocks)) collect_clocks(device, c, r);
    if (groups.has(CollectorId::kPcie)) collect_pcie(device, c, r);
    collect_fan(device, c, r);
    if (groups.has(CollectorId::kEcc)) collect_ecc(device, c, r);
    if (usage) collect_usage(device, r);
  }
  if (!c.answered && c.first_error) return *c.first_error;
  if (!c.answered) {
    return Error{RSMI_STATUS_NOT_SUPPORTED,
                 fmt::format("every ROCm SMI call on device {} returned NOT_SUPPORTED (as when its sysfs files are "
                             "gone)",
                             device)};
  }
  return r;
}

void RocmBackend::collect_ledger_values(unsigned device, Collection& c, DeviceReading& r) {
  const Symbols& s = *sym_;
  std::uint32_t pct = 0;
  if (s.busy != nullptr && c.ok("rsmi_dev_busy_percent_get", s.busy(device, &pct)))
    r.device.utilization_ratio = pct / 100.0;
  std::uint64_t u64 = 0;
  std::uint64_t total = 0;
  if (s.memory_total != nullptr &&
      c.ok("rsmi_dev_memory_total_get", s.memory_total(device, RSMI_MEM_TYPE_VRAM, &total))) {
    r.device.memory_total_bytes = static_cast<double>(total);
  }
  if (s.memory_usage != nullptr &&
      c.ok("rsmi_dev_memory_usage_get", s.memory_usage(device, RSMI_MEM_TYPE_VRAM, &u64))) {
    r.device.memory_used_bytes = static_cast<double>(u64);
    if (r.device.memory_total_bytes && total >= u64) r.device.memory_free_bytes = static_cast<double>(total - u64);
  }
  note_power_source(device, c, read_power(device, c, r));
  if (s.energy != nullptr) {
    std::uint64_t counter = 0, timestamp = 0;
    float resolution = 0;
    if (c.ok("rsmi_dev_energy_count_get", s.energy(device, &counter, &resolution, &timestamp)) && resolution > 0) {
      r.device.energy_joules = static_cast<double>(counter) * static_cast<double>(resolution) * 1e-6;
    }
  }
}

// The GPU's power, from the first source that answers. ROCm SMI 6.0 added two entry points
// beside rsmi_dev_power_ave_get, which reads hwmon power1_average only, because "current socket
// power is typically supported by newer devices, whereas average power is generally reported on
// older devices" (rocm_smi.h, rocm-6.2.2, which deprecates rsmi_dev_power_ave_get); amdgpu hides
// power1_average where the GPU has no average sensor (MI300X: smu_v13_0_6 answers only the
// current socket power). So, in ROCm SMI's own order of preference:
// 1. rsmi_dev_power_get: the library's choice, current socket power where the GPU has it, else
//    the average;
// 2. rsmi_dev_current_socket_power_get (power1_input), for a library exporting it alone;
// 3. rsmi_dev_power_ave_get (power1_average), all that a 5.x library has;
// 4. with a 5.x library, gpu_metrics' average_socket_power, whole watts: on MI300X the kernel
//    fills it with its current socket power, so Debian's 5.2.3, which has neither new entry
//    point, still reads the power of a GPU without power1_average (docs/rocm-behaviour.md).
// A source that answers NOT_SUPPORTED (or is missing) gives way to the next; any other status is
// counted and leaves the power out, as for every other value.
RocmBackend::PowerSource RocmBackend::read_power(unsigned device, Collection& c, DeviceReading& r) {
  const Symbols& s = *sym_;
  std::uint64_t uw = 0;
  std::optional<PowerSource> found;
  const auto settle = [&](PowerSource source, const char* call, rsmi_status_t rc) {
    if (c.ok(call, rc)) {
      r.device.power_watts = static_cast<double>(uw) / 1e6;
      found = source;
    } else if (!unsupported(rc)) {
      found = PowerSource::kFailed;
    }
    return found.has_value();
  };
  RSMI_POWER_TYPE type = RSMI_INVALID_POWER;
  if (s.power != nullptr && settle(PowerSource::kPowerGet, "rsmi_dev_power_get", s.power(device, &uw, &type)))
    return *found;
  if (s.socket_power != nullptr &&
      settle(PowerSource::kSocket, "rsmi_dev_current_socket_power_get", s.socket_power(device, &uw))) {
    return *found;
  }
  if (s.power_ave != nullptr && settle(PowerSource::kAverage, "rsmi_dev_power_ave_get", s.power_ave(device, 0, &uw)))
    return *found;
  const rsmi_gpu_metrics_v5_t* m = c.gpu_metrics();
  if (m != nullptr && !socket_power_unset(m->average_socket_power)) {
    r.device.power_watts = m->average_socket_power;
    return PowerSource::kGpuMetrics;
  }
  return m == nullptr && c.metrics_rc && !unsupported(*c.metrics_rc) ? PowerSource::kFailed : PowerSource::kNone;
}

void RocmBackend::note_power_source(unsigned device, const Collection& c, PowerSource source) {
  // A GPU none of whose calls answer is lost, and logged as such by the collector: no line here.
  if (source == PowerSource::kFailed || (source == PowerSource::kNone && !c.answered)) return;
  PowerSource& last = devices_[device].power_source;
  const auto degraded = [](PowerSource p) { return p == PowerSource::kGpuMetrics || p == PowerSource::kNone; };
  const PowerSource before = std::exchange(last, source);
  if (source == before || (!degraded(source) && !degraded(before))) return;
  const LogFields fields = {{"backend", "rocm_smi"}, {"device", std::to_string(device)}};
  if (source == PowerSource::kGpuMetrics) {
    log_.info("GPU power read from gpu_metrics, in whole watts: no ROCm SMI power entry point answered", fields);
  } else if (source == PowerSource::kNone) {
    log_.info("GPU power left out: no ROCm SMI power entry point nor gpu_metrics has it", fields);
  } else {
    log_.info("GPU power read through a ROCm SMI power entry point", fields);
  }
}

void RocmBackend::collect_basics(unsigned device, Collection& c, DeviceReading& r) {
  const Symbols& s = *sym_;
  std::uint32_t pct = 0;
  if (s.memory_busy != nullptr && c.ok("rsmi_dev_memory_busy_percent_get", s.memory_busy(device, &pct))) {
    r.device.memory_utilization_ratio = pct / 100.0;
  }
  if (s.temperature != nullptr) {
    static constexpr std::pair<std::uint32_t, const char*> kSensors[] = {
        {RSMI_TEMP_TYPE_EDGE, "gpu"}, {RSMI_TEMP_TYPE_JUNCTION, "junction"}, {RSMI_TEMP_TYPE_MEMORY, "memory"}};
    for (auto [sensor, label] : kSensors) {
      std::int64_t mc = 0;
      if (c.ok("rsmi_dev_temp_metric_get", s.temperature(device, sensor, RSMI_TEMP_CURRENT, &mc))) {
        r.device.temperature_celsius.push_back({label, static_cast<double>(mc) / 1000.0});
      }
    }
  }
  std::uint64_t uw = 0;
  if (s.power_cap != nullptr && c.ok("rsmi_dev_power_cap_get", s.power_cap(device, 0, &uw))) {
    r.device.power_limit_watts = uw / 1e6;
  }
}

void RocmBackend::collect_clocks(unsigned device, Collection& c, DeviceReading& r) {
  const Symbols& s = *sym_;
  if (s.clock != nullptr) {
    static constexpr std::pair<rsmi_clk_type_t, const char*> kClocks[] = {{RSMI_CLK_TYPE_SYS, "graphics"},
                                                                          {RSMI_CLK_TYPE_MEM, "memory"},
                                                                          {RSMI_CLK_TYPE_SOC, "soc"},
                                                                          {RSMI_CLK_TYPE_DF, "fabric"}};
    for (auto [type, label] : kClocks) {
      std::optional<std::uint64_t> hz;
      if (abi_ == "6") {
        rsmi_frequencies_v6_t f{};
        if (c.ok("rsmi_dev_gpu_clk_freq_get", s.clock(device, type, &f))) hz = current_of(f);
      } else {
        rsmi_frequencies_v5_t f{};
        if (c.ok("rsmi_dev_gpu_clk_freq_get", s.clock(device, type, &f))) hz = current_of(f);
      }
      if (hz) r.clocks.hertz.push_back({label, static_cast<double>(*hz)});
    }
  }
  if (const rsmi_gpu_metrics_v5_t* m = c.gpu_metrics())
    r.clocks.event_active = rocm::throttle_events(m->throttle_status);
  rsmi_dev_perf_level_t level = RSMI_DEV_PERF_LEVEL_UNKNOWN;
  if (s.perf_level != nullptr && c.ok("rsmi_dev_perf_level_get", s.perf_level(device, &level))) {
    r.clocks.performance_level = rocm::performance_levels(level);
  }
}

void RocmBackend::collect_pcie(unsigned device, Collection& c, DeviceReading& r) {
  const Symbols& s = *sym_;
  if (s.pcie_bandwidth != nullptr) {
    std::optional<std::uint64_t> rate;
    std::optional<std::uint32_t> lanes;
    if (abi_ == "6") {
      rsmi_pcie_bandwidth_v6_t b{};
      if (c.ok("rsmi_dev_pci_bandwidth_get", s.pcie_bandwidth(device, &b)) && (rate = current_of(b.transfer_rate)))
        lanes = b.lanes[b.transfer_rate.current];
    } else {
      rsmi_pcie_bandwidth_v5_t b{};
      if (c.ok("rsmi_dev_pci_bandwidth_get", s.pcie_bandwidth(device, &b)) && (rate = current_of(b.transfer_rate)))
        lanes = b.lanes[b.transfer_rate.current];
    }
    if (rate) r.pcie.link_generation = pcie_generation(*rate);
    if (lanes && *lanes > 0) r.pcie.link_width = *lanes;
  }
  if (pcie_) {
    const ThroughputRates rates = pcie_->serve(device);
    r.pcie.transmit_bytes_per_second = rates.transmit;
    r.pcie.receive_bytes_per_second = rates.receive;
  }
  std::uint64_t replays = 0;
  if (s.replay != nullptr && c.ok("rsmi_dev_pci_replay_counter_get", s.replay(device, &replays))) {
    r.pcie.replay_errors = static_cast<double>(replays);
  }
}

void RocmBackend::collect_fan(unsigned device, Collection& c, DeviceReading& r) {
  const Symbols& s = *sym_;
  if (s.fan == nullptr || s.fan_max == nullptr) return;
  std::int64_t speed = 0;
  std::uint64_t max = 0;
  if (c.ok("rsmi_dev_fan_speed_get", s.fan(device, 0, &speed)) &&
      c.ok("rsmi_dev_fan_speed_max_get", s.fan_max(device, 0, &max)) && max > 0 && speed >= 0) {
    r.device.fan_speed_ratio = static_cast<double>(speed) / static_cast<double>(max);
  }
}

void RocmBackend::collect_ecc(unsigned device, Collection& c, DeviceReading& r) {
  const Symbols& s = *sym_;
  std::uint64_t enabled = 0;
  if (s.ecc_enabled == nullptr || s.ecc_count == nullptr ||
      !c.ok("rsmi_dev_ecc_enabled_get", s.ecc_enabled(device, &enabled))) {
    return;
  }
  // Each block ECC covers (ras/features), counted apart (ras/<block>_err_count); the sums feed
  // what is vendor-neutral (the compat names).
  double corrected = 0, uncorrected = 0;
  for (const RsmiBlock& b : kRsmiBlocks) {
    if ((enabled & b.bit) == 0) continue;
    rsmi_error_count_t ec{};
    if (c.ok("rsmi_dev_ecc_count_get", s.ecc_count(device, b.bit, &ec))) {
      corrected += static_cast<double>(ec.correctable_err);
      uncorrected += static_cast<double>(ec.uncorrectable_err);
      r.ecc.block_errors.push_back(
          {b.name, static_cast<double>(ec.correctable_err), static_cast<double>(ec.uncorrectable_err)});
    }
  }
  if (!r.ecc.block_errors.empty()) r.ecc.errors = {{"corrected", corrected}, {"uncorrected", uncorrected}};
}

}  // namespace gpumeter
