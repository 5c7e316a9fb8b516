// Profiling metrics from GPU Performance Monitoring (GPM, Hopper and newer) and the NVLink field
// values. Both are read at every full collection: GPM is activity over the time since the
// previous collection, and the NVLink byte and error counters move all the time. Only the link
// count, which changes with the hardware, is in the slow class (nvml_backend.cpp).

#include <array>

#include "backend/nvml/nvml_internal.h"

namespace gpumeter {

namespace {

// The GPM metrics gpumeter asks for, and where each goes. Percent metrics become ratios, MiB/s
// metrics bytes per second ([H] nvmlGpmMetricId_t: "Percentage", "MiB/sec").
struct GpmMetricSpec {
  unsigned id;
  std::optional<double> ProfilingReading::*field;
  double scale;
};
constexpr double kPercent = 0.01;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr std::array<GpmMetricSpec, 12> kGpmMetricSpecs = {{
    {NVML_GPM_METRIC_GRAPHICS_UTIL, &ProfilingReading::graphics_active_ratio, kPercent},
    {NVML_GPM_METRIC_SM_UTIL, &ProfilingReading::sm_active_ratio, kPercent},
    {NVML_GPM_METRIC_SM_OCCUPANCY, &ProfilingReading::sm_occupancy_ratio, kPercent},
    {NVML_GPM_METRIC_ANY_TENSOR_UTIL, &ProfilingReading::tensor_active_ratio, kPercent},
    {NVML_GPM_METRIC_DRAM_BW_UTIL, &ProfilingReading::dram_active_ratio, kPercent},
    {NVML_GPM_METRIC_FP64_UTIL, &ProfilingReading::fp64_active_ratio, kPercent},
    {NVML_GPM_METRIC_FP32_UTIL, &ProfilingReading::fp32_active_ratio, kPercent},
    {NVML_GPM_METRIC_FP16_UTIL, &ProfilingReading::fp16_active_ratio, kPercent},
    {NVML_GPM_METRIC_PCIE_TX_PER_SEC, &ProfilingReading::pcie_transmit_bytes_per_second, kMiB},
    {NVML_GPM_METRIC_PCIE_RX_PER_SEC, &ProfilingReading::pcie_receive_bytes_per_second, kMiB},
    {NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, &ProfilingReading::nvlink_transmit_bytes_per_second, kMiB},
    {NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, &ProfilingReading::nvlink_receive_bytes_per_second, kMiB},
}};

}  // namespace

std::optional<ProfilingReading> NvmlBackend::gpm_step(GpmPair& p,
                                                      const std::function<nvmlReturn_t(nvmlGpmSample_t)>& take,
                                                      Call call, const char* call_name, NvmlCollection& c) {
  const NvmlSymbols& s = symbols_;
  if (p.sample[0] == nullptr || p.sample[1] == nullptr) {
    if (!c.wanted(s.gpm_sample_alloc, kGpmSampleAlloc)) return std::nullopt;
    for (auto& smp : p.sample) {
      if (smp != nullptr) continue;
      if (!c.ok(kGpmSampleAlloc, s.gpm_sample_alloc(&smp), "nvmlGpmSampleAlloc")) {
        smp = nullptr;
        return std::nullopt;  // the one allocated stays with the pair until it is freed
      }
    }
    p.previous = -1;
  }
  if (!c.wanted(take, call)) return std::nullopt;
  const int next = p.previous == 0 ? 1 : 0;
  if (!c.ok(call, take(p.sample[next]), call_name)) {
    p.previous = -1;  // the next sample starts a new pair
    return std::nullopt;
  }
  const int previous = p.previous;
  p.previous = next;
  if (previous < 0) return std::nullopt;  // the first sample: nothing to compare it with yet
  if (!c.wanted(s.gpm_metrics_get, kGpmMetrics)) return std::nullopt;
  // One metric per call, as NVIDIA's DCGM asks (DcgmGpmManager sets numMetrics = 1): a batch has
  // been reported to answer collapsed values (DataDog/datadog-agent#51935). The call computes
  // from the two samples already taken (docs/nvml-behaviour.md).
  // 13 KiB: on the heap, not the worker's stack.
  auto get = std::make_unique<nvmlGpmMetricsGet_t>();
  ProfilingReading out;
  bool answered = false;
  for (const GpmMetricSpec& spec : kGpmMetricSpecs) {
    *get = nvmlGpmMetricsGet_t{};
    get->version = NVML_GPM_METRICS_GET_VERSION;
    get->numMetrics = 1;
    get->sample1 = p.sample[previous];
    get->sample2 = p.sample[next];
    get->metrics[0].metricId = spec.id;
    if (!c.wanted(s.gpm_metrics_get, kGpmMetrics)) break;
    if (!c.ok(kGpmMetrics, s.gpm_metrics_get(get.get()), "nvmlGpmMetricsGet")) continue;
    answered = true;
    const nvmlGpmMetric_t& m = get->metrics[0];
    // Each metric has its own status; a driver may answer some and not others.
    if (m.metricId != spec.id || m.nvmlReturn != NVML_SUCCESS) continue;
    if (auto v = c.finite(m.value, "nvmlGpmMetricsGet")) out.*(spec.field) = *v * spec.scale;
  }
  if (!answered) return std::nullopt;
  return out;
}

void NvmlBackend::free_gpm_pair(GpmPair& p) {
  for (auto& smp : p.sample) {
    if (smp != nullptr && symbols_.gpm_sample_free != nullptr) symbols_.gpm_sample_free(smp);
    smp = nullptr;
  }
  p.previous = -1;
}

void NvmlBackend::free_gpm_samples(Device& d) {
  free_gpm_pair(d.gpm);
  for (auto& [gi, m] : d.mig_gpm) free_gpm_pair(m.pair);
  d.mig_gpm.clear();
}

void NvmlBackend::collect_gpm(Device& d, nvmlDevice_t h, NvmlCollection& c, DeviceReading& r) {
  const NvmlSymbols& s = symbols_;
  if (!s.has_gpm()) return;
  probe_gpm(d, h, c);
  r.profiling_supported = d.gpm_supported;
  if (d.gpm_supported != true) return;
  r.profiling = gpm_step(
      d.gpm, [&](nvmlGpmSample_t smp) { return s.gpm_sample_get(h, smp); }, kGpmSample, "nvmlGpmSampleGet", c);
  // GPM answers its NVLink rates on a GPU without NVLink too, as 0: absent there, as the links are.
  if (r.profiling) {
    collect_slow_values(d, h, CollectorId::kNvlink, c);
    if (d.slow.nvlink_count == 0) {
      r.profiling->nvlink_transmit_bytes_per_second.reset();
      r.profiling->nvlink_receive_bytes_per_second.reset();
    }
  }
}

void NvmlBackend::probe_gpm(Device& d, nvmlDevice_t h, NvmlCollection& c) {
  const NvmlSymbols& s = symbols_;
  if (!s.has_gpm()) return;
  if (!d.gpm_supported && c.wanted(s.gpm_query_device_support, kGpmSupport)) {
    nvmlGpmSupport_t support{};
    support.version = NVML_GPM_SUPPORT_VERSION;
    const nvmlReturn_t rc = s.gpm_query_device_support(h, &support);
    if (c.ok(kGpmSupport, rc, "nvmlGpmQueryDeviceSupport")) {
      d.gpm_supported = support.isSupportedDevice != 0;
    } else if (c.unsupported(kGpmSupport)) {
      d.gpm_supported = false;
    }  // any other error: asked again at the next collection
  }
}

void NvmlBackend::collect_nvlinks(Device& d, nvmlDevice_t h, NvmlCollection& c, DeviceReading& r) {
  const NvmlSymbols& s = symbols_;
  // Per link one call: every field answers with its own status.
  enum { kState, kSpeed, kTx, kRx, kReplay, kRecovery, kCrc, kFields };
  for (unsigned link = 0; link < d.slow.nvlink_count && link < NVML_NVLINK_MAX_LINKS; ++link) {
    if (!c.wanted(s.field_values, kNvlinkFields)) return;
    std::array<nvmlFieldValue_t, kFields> f{};
    f[kState].fieldId = NVML_FI_DEV_NVLINK_GET_STATE;
    f[kSpeed].fieldId = NVML_FI_DEV_NVLINK_GET_SPEED;
    f[kTx].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
    f[kRx].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
    f[kReplay].fieldId = NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY;
    f[kRecovery].fieldId = NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY;
    f[kCrc].fieldId = NVML_FI_DEV_NVLINK_ERROR_DL_CRC;
    for (auto& v : f) v.scopeId = link;
    if (!c.ok(kNvlinkFields, s.field_values(h, kFields, f.data()), "nvmlDeviceGetFieldValues")) continue;
    NvlinkReading l;
    l.link = link;
    if (auto v = field_as_double(f[kState], c)) l.active = *v == static_cast<double>(NVML_FEATURE_ENABLED);
    if (auto v = field_as_double(f[kSpeed], c)) l.speed_bytes_per_second = *v * 1e6;  // MBps ([H])
    if (auto v = field_as_double(f[kTx], c)) l.transmit_bytes = *v * 1024;            // KiB ([H])
    if (auto v = field_as_double(f[kRx], c)) l.receive_bytes = *v * 1024;
    for (auto [i, type] : {std::pair{kReplay, "replay"}, std::pair{kRecovery, "recovery"}, std::pair{kCrc, "crc"}}) {
      if (auto v = field_as_double(f[i], c)) l.errors.push_back({type, *v});
    }
    if (l.active || l.speed_bytes_per_second || l.transmit_bytes || l.receive_bytes || !l.errors.empty()) {
      r.nvlinks.push_back(std::move(l));
    }
  }
}

}  // namespace gpumeter
