// GPM (GPU Performance Monitoring): support, sample buffers and metrics. A sample is a snapshot
// of the exact profiling integrals (profiling.h) of a GPU, or of one MIG GPU instance, at the
// last 100 ms refresh instant; nvmlGpmMetricsGet divides the differences of two samples of the
// same GPU or instance by the time between them.

#include <algorithm>
#include <limits>
#include <string_view>
#include <type_traits>

#include "sim/physics/profiling.h"
#include "sim/nvml/gpm_samples.h"
#include "sim/nvml/nvml_call.h"

using gpumeter::sim::device_call;
using gpumeter::sim::DeviceState;
using gpumeter::sim::kNoMigInstance;
using gpumeter::sim::Micros;
using gpumeter::sim::mig_call;
using gpumeter::sim::MigInstance;
using gpumeter::sim::ProfileIntegrator;
using gpumeter::sim::ProfileTotals;
using gpumeter::sim::Runtime;
using gpumeter::sim::Session;
using gpumeter::sim::system_call;
using Fn = gpumeter::sim::NvmlFunction;

namespace {

// [H] nvmlGpmMetricsGet: the interval between two samples "should be greater than 100ms due to
// the internal sample refresh rate"; a sample holds the counters of the last refresh.
constexpr Micros kGpmRefresh = 100'000;
constexpr double kMiB = 1024.0 * 1024.0;

enum class Kind { percent, pcie_tx, pcie_rx, nvlink_tx, nvlink_rx };

struct MetricDef {
  unsigned id;
  Kind kind;
  double ProfileTotals::*member;  // percent metrics
  const char* short_name;
  const char* long_name;
};

// The metrics the simulator models; the long names are the header's descriptions.
constexpr MetricDef kMetrics[] = {
    {NVML_GPM_METRIC_GRAPHICS_UTIL, Kind::percent, &ProfileTotals::graphics, "graphics_util",
     "Percentage of time any compute/graphics app was active on the GPU"},
    {NVML_GPM_METRIC_SM_UTIL, Kind::percent, &ProfileTotals::sm, "sm_util", "Percentage of SMs that were busy"},
    {NVML_GPM_METRIC_SM_OCCUPANCY, Kind::percent, &ProfileTotals::occupancy, "sm_occupancy",
     "Percentage of warps that were active vs theoretical maximum"},
    {NVML_GPM_METRIC_ANY_TENSOR_UTIL, Kind::percent, &ProfileTotals::tensor, "any_tensor_util",
     "Percentage of time the GPU's SMs were doing ANY tensor operations"},
    {NVML_GPM_METRIC_DRAM_BW_UTIL, Kind::percent, &ProfileTotals::dram, "dram_bw_util",
     "Percentage of DRAM bw used vs theoretical maximum"},
    {NVML_GPM_METRIC_FP64_UTIL, Kind::percent, &ProfileTotals::fp64, "fp64_util",
     "Percentage of time the GPU's SMs were doing non-tensor FP64 math"},
    {NVML_GPM_METRIC_FP32_UTIL, Kind::percent, &ProfileTotals::fp32, "fp32_util",
     "Percentage of time the GPU's SMs were doing non-tensor FP32 math"},
    {NVML_GPM_METRIC_FP16_UTIL, Kind::percent, &ProfileTotals::fp16, "fp16_util",
     "Percentage of time the GPU's SMs were doing non-tensor FP16 math"},
    {NVML_GPM_METRIC_PCIE_TX_PER_SEC, Kind::pcie_tx, nullptr, "pcie_tx_per_sec",
     "PCIe traffic from this GPU in MiB/sec"},
    {NVML_GPM_METRIC_PCIE_RX_PER_SEC, Kind::pcie_rx, nullptr, "pcie_rx_per_sec", "PCIe traffic to this GPU in MiB/sec"},
    {NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, Kind::nvlink_rx, nullptr, "nvlink_total_rx_per_sec",
     "NvLink read bandwidth for all links in MiB/sec"},
    {NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, Kind::nvlink_tx, nullptr, "nvlink_total_tx_per_sec",
     "NvLink write bandwidth for all links in MiB/sec"},
};

char* text(const char* s) { return const_cast<char*>(s); }

// The link of a per-link NVLink metric (NVLINK_L<n>_RX/TX_PER_SEC: 62 + 2n and 63 + 2n for
// links 0-17, 212 + 2(n - 18) and 213 + 2(n - 18) for links 18-35), or -1.
int per_link(unsigned id, bool& tx) {
  if (id >= 62 && id <= 97) {
    tx = (id - 62) % 2 == 1;
    return static_cast<int>((id - 62) / 2);
  }
  if (id >= 212 && id <= 247) {
    tx = (id - 212) % 2 == 1;
    return static_cast<int>(18 + (id - 212) / 2);
  }
  return -1;
}

// A GPU instance's samples carry no PCIe or NVLink traffic: both buses belong to the whole GPU
// (docs/nvml-behaviour.md, "GPM", an assumption).
void compute(nvmlGpmMetric_t& m, const nvmlGpmSample_st& a, const nvmlGpmSample_st& b, unsigned links) {
  const double dt = gpumeter::sim::to_seconds(b.at - a.at);
  const bool instance = a.mig != kNoMigInstance;
  m.value = 0;
  m.metricInfo.shortName = m.metricInfo.longName = m.metricInfo.unit = nullptr;
  if (m.metricId == 0 || m.metricId >= GPUMETER_NVML_GPM_METRIC_MAX) {
    m.nvmlReturn = NVML_ERROR_INVALID_ARGUMENT;
    return;
  }
  bool tx = false;
  if (int link = per_link(m.metricId, tx); link >= 0) {
    if (instance || static_cast<unsigned>(link) >= links) {
      m.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
      return;
    }
    const auto& x = tx ? a.totals.nvlink_tx : a.totals.nvlink_rx;
    const auto& y = tx ? b.totals.nvlink_tx : b.totals.nvlink_rx;
    m.value = std::max(0.0, (y[link] - x[link]) / dt / kMiB);
    m.metricInfo.unit = text("MiB/s");
    m.nvmlReturn = NVML_SUCCESS;
    return;
  }
  const MetricDef* def = nullptr;
  for (const MetricDef& d : kMetrics) {
    if (d.id == m.metricId) def = &d;
  }
  if (def == nullptr || (instance && def->kind != Kind::percent)) {  // a metric the simulator does not model
    m.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    return;
  }
  switch (def->kind) {
    case Kind::percent:
      m.value = std::clamp(100.0 * (b.totals.*def->member - a.totals.*def->member) / dt, 0.0, 100.0);
      break;
    case Kind::pcie_tx:
      m.value = std::max(0.0, (b.totals.pcie_tx - a.totals.pcie_tx) / dt / kMiB);
      break;
    case Kind::pcie_rx:
      m.value = std::max(0.0, (b.totals.pcie_rx - a.totals.pcie_rx) / dt / kMiB);
      break;
    case Kind::nvlink_tx:
      m.value = std::max(0.0, (b.totals.nvlink_tx_total(links) - a.totals.nvlink_tx_total(links)) / dt / kMiB);
      break;
    case Kind::nvlink_rx:
      m.value = std::max(0.0, (b.totals.nvlink_rx_total(links) - a.totals.nvlink_rx_total(links)) / dt / kMiB);
      break;
  }
  m.metricInfo.shortName = text(def->short_name);
  m.metricInfo.longName = text(def->long_name);
  m.metricInfo.unit = text(def->kind == Kind::percent ? "%" : "MiB/s");
  m.nvmlReturn = NVML_SUCCESS;
}

// Snapshots `p` at the last refresh instant into `sample`.
nvmlReturn_t take_sample(const DeviceState& d, ProfileIntegrator& p, std::size_t mig, Micros now,
                         nvmlGpmSample_t sample) {
  nvmlGpmSample_st value;
  value.filled = true;
  value.gpu = d.gpu.index();
  value.mig = mig;
  value.at = std::max<Micros>(now, 0) / kGpmRefresh * kGpmRefresh;
  value.totals = p.at(value.at);
  return Runtime::instance().gpm_samples().store(sample, value) ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t check_support(const DeviceState& d, nvmlGpmSupport_t* support) {
  if (support == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (support->version != NVML_GPM_SUPPORT_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  support->isSupportedDevice = gpumeter::sim::gpm_supported(d.gpu.model()) ? 1 : 0;
  return NVML_SUCCESS;
}

// A MIG device handle samples its GPU instance ([H] nvmlGpmSampleGet: "This API supports the
// device handle and MIG device handle"); the simulator models one compute instance per GPU
// instance, so the compute instance's activity is the GPU instance's.
nvmlReturn_t mig_sample(nvmlDevice_t device, nvmlGpmSample_t sample) {
  return mig_call(Fn::nvmlGpmSampleGet, device,
                  [&](Session&, DeviceState& d, const MigInstance&, std::size_t i, Micros now) -> nvmlReturn_t {
                    if (!gpumeter::sim::gpm_supported(d.gpu.model())) return NVML_ERROR_NOT_SUPPORTED;
                    ProfileIntegrator* p = d.gpu.instance_profiling(i);
                    if (p == nullptr) return NVML_ERROR_UNKNOWN;
                    return take_sample(d, *p, i, now, sample);
                  });
}

}  // namespace

// [H] nvmlGpmQueryDeviceSupport: "This API supports the device handle and MIG device handle";
// a MIG device answers as its parent.
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t* support) {
  if (gpumeter::sim::is_mig_handle(device)) {
    return mig_call(
        Fn::nvmlGpmQueryDeviceSupport, device,
        [&](Session&, DeviceState& d, const MigInstance&, std::size_t, Micros) { return check_support(d, support); });
  }
  return device_call(Fn::nvmlGpmQueryDeviceSupport, device,
                     [&](Session&, DeviceState& d, Micros) { return check_support(d, support); });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* sample) {
  return system_call(Fn::nvmlGpmSampleAlloc, [&](Session&) {
    if (sample == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *sample = Runtime::instance().gpm_samples().allocate();
    return NVML_SUCCESS;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
  return system_call(Fn::nvmlGpmSampleFree, [&](Session&) {
    return Runtime::instance().gpm_samples().free(sample) ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample) {
  if (gpumeter::sim::is_mig_handle(device)) return mig_sample(device, sample);
  return device_call(Fn::nvmlGpmSampleGet, device, [&](Session&, DeviceState& d, Micros now) -> nvmlReturn_t {
    if (!gpumeter::sim::gpm_supported(d.gpu.model())) return NVML_ERROR_NOT_SUPPORTED;
    return take_sample(d, d.gpu.profiling(), kNoMigInstance, now, sample);
  });
}

// The parent's handle and a GPU instance id. [H] names no error codes; as
// nvmlDeviceGetGpuInstanceById: NOT_SUPPORTED without MIG mode, NOT_FOUND for an id no live GPU
// instance has (one never created, or destroyed by a re-partition) (assumptions).
GPUMETER_NVML_EXPORT nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpu_instance_id,
                                                      nvmlGpmSample_t sample) {
  return device_call(Fn::nvmlGpmMigSampleGet, device, [&](Session& s, DeviceState& d, Micros now) -> nvmlReturn_t {
    if (!gpumeter::sim::gpm_supported(d.gpu.model())) return NVML_ERROR_NOT_SUPPORTED;
    const auto& plan = s.scenario().mig;
    if (!plan.enabled(d.gpu.index())) return NVML_ERROR_NOT_SUPPORTED;
    for (std::size_t i : plan.live(d.gpu.index(), now)) {
      if (plan.instances[i].gpu_instance_id != gpu_instance_id) continue;
      ProfileIntegrator* p = d.gpu.instance_profiling(i);
      if (p == nullptr) return NVML_ERROR_UNKNOWN;
      return take_sample(d, *p, i, now, sample);
    }
    return NVML_ERROR_NOT_FOUND;
  });
}

GPUMETER_NVML_EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* get) {
  return system_call(Fn::nvmlGpmMetricsGet, [&](Session& s) {
    if (get == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (get->version != NVML_GPM_METRICS_GET_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (get->numMetrics == 0 || get->numMetrics > GPUMETER_NVML_GPM_METRIC_MAX) return NVML_ERROR_INVALID_ARGUMENT;
    auto& table = Runtime::instance().gpm_samples();
    auto a = table.load(get->sample1);
    auto b = table.load(get->sample2);
    if (!a || !b || !a->filled || !b->filled) return NVML_ERROR_INVALID_ARGUMENT;
    if (a->gpu != b->gpu || a->gpu >= s.scenario().gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
    // Two samples of different GPU instances, or of an instance and the whole GPU, describe no
    // one device's interval (an assumption: [H] speaks of two samples of one device).
    if (a->mig != b->mig) return NVML_ERROR_INVALID_ARGUMENT;
    // sample1 is the older one; the same refresh twice, or the order reversed, gives no interval.
    if (b->at <= a->at) return NVML_ERROR_INVALID_ARGUMENT;
    const unsigned links = s.scenario().model_of(a->gpu).nvlink.links;
    for (unsigned i = 0; i < get->numMetrics; ++i) compute(get->metrics[i], *a, *b, links);
    // The gpm_non_finite quirk: every metric answered, as NaN (DCGM's GPM manager blanks a NaN
    // value, so NVIDIA's own client meets them: docs/nvml-behaviour.md).
    if (s.quirk(gpumeter::sim::QuirkKind::gpm_non_finite, a->gpu, s.now()) != nullptr) {
      for (unsigned i = 0; i < get->numMetrics; ++i) get->metrics[i].value = std::numeric_limits<double>::quiet_NaN();
    }
    // The gpm_batch_collapse quirk: a call asking for several metrics answers each with the
    // first one's value (the "metric value collapse" DataDog/datadog-agent#51935 reported of
    // batched requests; DCGM asks one metric per call).
    if (get->numMetrics > 1 && s.quirk(gpumeter::sim::QuirkKind::gpm_batch_collapse, a->gpu, s.now()) != nullptr) {
      for (unsigned i = 1; i < get->numMetrics; ++i) get->metrics[i].value = get->metrics[0].value;
    }
    return NVML_SUCCESS;
  });
}

static_assert(std::is_same_v<decltype(&nvmlGpmQueryDeviceSupport), nvmlGpmQueryDeviceSupport_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpmSampleAlloc), nvmlGpmSampleAlloc_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpmSampleFree), nvmlGpmSampleFree_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpmSampleGet), nvmlGpmSampleGet_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpmMigSampleGet), nvmlGpmMigSampleGet_fn>);
static_assert(std::is_same_v<decltype(&nvmlGpmMetricsGet), nvmlGpmMetricsGet_fn>);
