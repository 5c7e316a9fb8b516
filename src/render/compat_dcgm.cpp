// dcgm-exporter's schema (3.x and 4.x, and the 1.x names) from gpumeter's readings. What each
// DCGM field is, in which unit, comes from DCGM's field reference and dcgm-exporter's counters
// files; docs/migrating.md has the table.

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "render/compat.h"
#include "render/compat_internal.h"

namespace gpumeter {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::optional<double> scaled(const std::optional<double>& v, double factor) {
  if (!v) return std::nullopt;
  return *v * factor;
}

// How a field's value is shared out when several pods or jobs use one GPU.
enum class Split { kRepeat, kBusy, kMemory };

using Reader = std::optional<double> (*)(const DeviceReading&);
using GpuReader = std::optional<double> (*)(const GpuSnapshot&);
using C = CollectorId;
struct MetricField {
  std::string_view field;
  CollectorId collector;  // the collector that reads it
  Split split;
  Reader read;                   // from a GPU's or a MIG instance's reading
  GpuReader read_gpu = nullptr;  // in place of `read`: from what the agent keeps per GPU
};

using R = const DeviceReading&;

std::optional<double> prof(R r, std::optional<double> ProfilingReading::*field) {
  if (!r.profiling) return std::nullopt;
  return (*r.profiling).*field;
}

// What a MIG instance has of a device's reading: its memory and its GPU instance's profiling.
DeviceReading instance_reading(const MigInstanceReading& m) {
  DeviceReading r;
  r.device.memory_total_bytes = m.memory_total_bytes;
  r.device.memory_used_bytes = m.memory_used_bytes;
  if (m.memory_total_bytes && m.memory_used_bytes)
    r.device.memory_free_bytes = *m.memory_total_bytes - *m.memory_used_bytes;
  r.profiling = m.profiling;
  return r;
}
const MetricField kMetricFields[] = {
    {"DCGM_FI_DEV_SM_CLOCK", C::kClocks, Split::kRepeat,
     [](R r) { return scaled(compat_labeled(r.clocks.hertz, "sm"), 1e-6); }},
    {"DCGM_FI_DEV_MEM_CLOCK", C::kClocks, Split::kRepeat,
     [](R r) { return scaled(compat_labeled(r.clocks.hertz, "memory"), 1e-6); }},
    {"DCGM_FI_DEV_VIDEO_CLOCK", C::kClocks, Split::kRepeat,
     [](R r) { return scaled(compat_labeled(r.clocks.hertz, "video"), 1e-6); }},
    {"DCGM_FI_DEV_GPU_TEMP", C::kDevice, Split::kRepeat,
     [](R r) { return compat_labeled(r.device.temperature_celsius, "gpu"); }},
    {"DCGM_FI_DEV_MEMORY_TEMP", C::kDevice, Split::kRepeat,
     [](R r) { return compat_labeled(r.device.temperature_celsius, "memory"); }},
    {"DCGM_FI_DEV_POWER_USAGE", C::kDevice, Split::kRepeat, [](R r) { return r.device.power_watts; }},
    {"DCGM_FI_DEV_POWER_MGMT_LIMIT", C::kDevice, Split::kRepeat, [](R r) { return r.device.power_limit_watts; }},
    {"DCGM_FI_DEV_VGPU_LICENSE_STATUS", C::kDevice, Split::kRepeat, [](R r) { return r.device.vgpu_licensed; }},
    {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", C::kDevice, Split::kRepeat,
     [](R r) { return scaled(r.device.energy_joules, 1e3); }},
    {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", C::kPcie, Split::kRepeat, [](R r) { return r.pcie.replay_errors; }},
    {"DCGM_FI_DEV_PCIE_LINK_GEN", C::kPcie, Split::kRepeat, [](R r) { return r.pcie.link_generation; }},
    {"DCGM_FI_DEV_PCIE_LINK_WIDTH", C::kPcie, Split::kRepeat, [](R r) { return r.pcie.link_width; }},
    {"DCGM_FI_DEV_GPU_UTIL", C::kDevice, Split::kBusy, [](R r) { return scaled(r.device.utilization_ratio, 100); }},
    {"DCGM_FI_DEV_MEM_COPY_UTIL", C::kDevice, Split::kRepeat,
     [](R r) { return scaled(r.device.memory_utilization_ratio, 100); }},
    {"DCGM_FI_DEV_ENC_UTIL", C::kDevice, Split::kRepeat,
     [](R r) { return scaled(r.device.encoder_utilization_ratio, 100); }},
    {"DCGM_FI_DEV_DEC_UTIL", C::kDevice, Split::kRepeat,
     [](R r) { return scaled(r.device.decoder_utilization_ratio, 100); }},
    {"DCGM_FI_DEV_FB_TOTAL", C::kDevice, Split::kRepeat,
     [](R r) { return scaled(r.device.memory_total_bytes, 1 / kMiB); }},
    {"DCGM_FI_DEV_FB_FREE", C::kDevice, Split::kRepeat,
     [](R r) { return scaled(r.device.memory_free_bytes, 1 / kMiB); }},
    {"DCGM_FI_DEV_FB_USED", C::kDevice, Split::kMemory,
     [](R r) { return scaled(r.device.memory_used_bytes, 1 / kMiB); }},
    {"DCGM_FI_DEV_FB_RESERVED", C::kDevice, Split::kRepeat,
     [](R r) { return scaled(r.device.memory_reserved_bytes, 1 / kMiB); }},
    {"DCGM_FI_DEV_FAN_SPEED", C::kDevice, Split::kRepeat, [](R r) { return scaled(r.device.fan_speed_ratio, 100); }},
    {"DCGM_FI_DEV_PSTATE", C::kClocks, Split::kRepeat, [](R r) { return r.clocks.performance_state; }},
    {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", C::kEcc, Split::kRepeat,
     [](R r) { return compat_labeled(r.ecc.errors, "corrected"); }},
    {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", C::kEcc, Split::kRepeat,
     [](R r) { return compat_labeled(r.ecc.errors, "uncorrected"); }},
    {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", C::kEcc, Split::kRepeat,
     [](R r) { return compat_labeled(r.ecc.remapped_rows, "correctable"); }},
    {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", C::kEcc, Split::kRepeat,
     [](R r) { return compat_labeled(r.ecc.remapped_rows, "uncorrectable"); }},
    {"DCGM_FI_DEV_ROW_REMAP_PENDING", C::kEcc, Split::kRepeat,
     [](R r) { return compat_labeled(r.ecc.remapped_rows, "pending"); }},
    {"DCGM_FI_DEV_ROW_REMAP_FAILURE", C::kEcc, Split::kRepeat,
     [](R r) { return compat_labeled(r.ecc.remapped_rows, "failure"); }},
    // DCGM's value is the newest Xid's code; 0 before the first since the agent started.
    {"DCGM_FI_DEV_XID_ERRORS", C::kEvents, Split::kRepeat, nullptr,
     [](const GpuSnapshot& g) -> std::optional<double> {
       if (!g.last_xid) return std::nullopt;
       return static_cast<double>(*g.last_xid);
     }},
    // Profiling (GPM in gpumeter): DCGM's ratios 0..1 and bytes per second, as gpumeter's. The
    // activity ratios are shared out as utilization is: OpenCost reads a container's GPU usage
    // from DCGM_FI_PROF_GR_ENGINE_ACTIVE.
    {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", C::kProfiling, Split::kBusy,
     [](R r) { return prof(r, &ProfilingReading::graphics_active_ratio); }},
    {"DCGM_FI_PROF_SM_ACTIVE", C::kProfiling, Split::kBusy,
     [](R r) { return prof(r, &ProfilingReading::sm_active_ratio); }},
    {"DCGM_FI_PROF_SM_OCCUPANCY", C::kProfiling, Split::kBusy,
     [](R r) { return prof(r, &ProfilingReading::sm_occupancy_ratio); }},
    {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", C::kProfiling, Split::kBusy,
     [](R r) { return prof(r, &ProfilingReading::tensor_active_ratio); }},
    {"DCGM_FI_PROF_DRAM_ACTIVE", C::kProfiling, Split::kBusy,
     [](R r) { return prof(r, &ProfilingReading::dram_active_ratio); }},
    {"DCGM_FI_PROF_PIPE_FP64_ACTIVE", C::kProfiling, Split::kBusy,
     [](R r) { return prof(r, &ProfilingReading::fp64_active_ratio); }},
    {"DCGM_FI_PROF_PIPE_FP32_ACTIVE", C::kProfiling, Split::kBusy,
     [](R r) { return prof(r, &ProfilingReading::fp32_active_ratio); }},
    {"DCGM_FI_PROF_PIPE_FP16_ACTIVE", C::kProfiling, Split::kBusy,
     [](R r) { return prof(r, &ProfilingReading::fp16_active_ratio); }},
    {"DCGM_FI_PROF_PCIE_TX_BYTES", C::kProfiling, Split::kRepeat,
     [](R r) { return prof(r, &ProfilingReading::pcie_transmit_bytes_per_second); }},
    {"DCGM_FI_PROF_PCIE_RX_BYTES", C::kProfiling, Split::kRepeat,
     [](R r) { return prof(r, &ProfilingReading::pcie_receive_bytes_per_second); }},
    {"DCGM_FI_PROF_NVLINK_TX_BYTES", C::kProfiling, Split::kRepeat,
     [](R r) { return prof(r, &ProfilingReading::nvlink_transmit_bytes_per_second); }},
    {"DCGM_FI_PROF_NVLINK_RX_BYTES", C::kProfiling, Split::kRepeat,
     [](R r) { return prof(r, &ProfilingReading::nvlink_receive_bytes_per_second); }},
    // DCGM's NVLink throughput of all links, both directions: the data counters' increase per
    // second over 1024 * 1000 (DCGM 4.6, DcgmCacheManager::ReadAndCacheNvLinkBandwidth, "MB/s"),
    // here from GPM's rates of the same data. A GPU's field, not a MIG instance's.
    {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", C::kProfiling, Split::kRepeat, nullptr,
     [](const GpuSnapshot& g) -> std::optional<double> {
       const auto tx = prof(*g.reading, &ProfilingReading::nvlink_transmit_bytes_per_second);
       const auto rx = prof(*g.reading, &ProfilingReading::nvlink_receive_bytes_per_second);
       if (!tx || !rx) return std::nullopt;
       return (*tx + *rx) / 1024 / 1000;
     }},
};

struct LabelField {
  std::string_view field;
  std::string DeviceIdentity::*member;
};
const LabelField kLabelFields[] = {
    {"DCGM_FI_DRIVER_VERSION", &DeviceIdentity::driver_version},
    {"DCGM_FI_DEV_VBIOS_VERSION", &DeviceIdentity::vbios_version},
    {"DCGM_FI_DEV_SERIAL", &DeviceIdentity::serial},
    {"DCGM_FI_DEV_NAME", &DeviceIdentity::model},
};

const MetricField* find_metric(std::string_view field) {
  for (const auto& f : kMetricFields) {
    if (f.field == field) return &f;
  }
  return nullptr;
}
const LabelField* find_label(std::string_view field) {
  for (const auto& f : kLabelFields) {
    if (f.field == field) return &f;
  }
  return nullptr;
}

// Why a field is not served, or "" when it is.
std::string why_unserved(const DcgmCounter& c) {
  const bool label = c.type == "label";
  if (label && find_label(c.field)) return "";
  if (!label && find_metric(c.field)) return "";
  if (label && find_metric(c.field)) return "a measured value, not a label";
  if (!label && find_label(c.field)) return "an identity string; list it with type label";
  if (c.field.starts_with("DCGM_FI_PROF_")) return "a profiling metric gpumeter does not read";
  if (c.field.starts_with("DCGM_EXP_")) return "a dcgm-exporter collector, not a DCGM field";
  return "not among the readings gpumeter takes";
}

// The 1.x names, each the DCGM field it was renamed from (dcgm-exporter's
// etc/1.x-compatibility-metrics.csv), plus dcgm_fb_total, which 1.x-era queries divide by.
struct OldName {
  const char* name;
  const char* field;
  MetricType type;
  const char* help;
};
const OldName kOldNames[] = {
    {"dcgm_sm_clock", "DCGM_FI_DEV_SM_CLOCK", MetricType::kGauge, "SM clock frequency (in MHz)."},
    {"dcgm_memory_clock", "DCGM_FI_DEV_MEM_CLOCK", MetricType::kGauge, "Memory clock frequency (in MHz)."},
    {"dcgm_memory_temp", "DCGM_FI_DEV_MEMORY_TEMP", MetricType::kGauge, "Memory temperature (in C)."},
    {"dcgm_gpu_temp", "DCGM_FI_DEV_GPU_TEMP", MetricType::kGauge, "GPU temperature (in C)."},
    {"dcgm_power_usage", "DCGM_FI_DEV_POWER_USAGE", MetricType::kGauge, "Power draw (in W)."},
    {"dcgm_total_energy_consumption", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", MetricType::kCounter,
     "Total energy consumption since boot (in mJ)."},
    {"dcgm_pcie_replay_counter", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", MetricType::kCounter,
     "Total number of PCIe retries."},
    {"dcgm_gpu_utilization", "DCGM_FI_DEV_GPU_UTIL", MetricType::kGauge, "GPU utilization (in %)."},
    {"dcgm_mem_copy_utilization", "DCGM_FI_DEV_MEM_COPY_UTIL", MetricType::kGauge, "Memory utilization (in %)."},
    {"dcgm_fb_free", "DCGM_FI_DEV_FB_FREE", MetricType::kGauge, "Framebuffer memory free (in MiB)."},
    {"dcgm_fb_used", "DCGM_FI_DEV_FB_USED", MetricType::kGauge, "Framebuffer memory used (in MiB)."},
    {"dcgm_fb_total", "DCGM_FI_DEV_FB_TOTAL", MetricType::kGauge, "Framebuffer memory total (in MiB)."},
};

// One series' owner on a GPU: the pod (namespace, pod, container) and HPC job its processes run
// in. All empty for a GPU no pod or job uses.
using OwnerKey = std::tuple<std::string, std::string, std::string, std::string>;

struct Slice {
  OwnerKey key;
  double busy_share = 1;
  double memory_share = 1;
};

// The series of one GPU. One owner (or none) gets the whole GPU, as dcgm-exporter shows it. With
// several, each gets its own series: utilization is split by the owners' SM shares and memory by
// their processes' memory, as the ledger splits busy seconds and memory, each normalised so
// that the series of a GPU add up to the device's value; when no process reports a share, by
// the number of processes, as the ledger splits allocated seconds.
std::vector<Slice> slices_of(const GpuSnapshot& g) {
  struct Acc {
    double sm = 0;
    double memory = 0;
    unsigned processes = 0;
  };
  std::map<OwnerKey, Acc> owners;
  unsigned n = 0;
  for (const auto& p : g.processes) {
    if (!p.running || !p.series) continue;  // within the per-process limit, which bounds these series too
    auto& a = owners[{p.owner.namespace_, p.owner.pod, p.owner.container, p.owner.hpc_job}];
    a.sm += p.utilization_ratio.value_or(0);
    a.memory += p.memory_bytes.value_or(0);
    ++a.processes;
    ++n;
  }
  if (owners.empty()) return {Slice{}};
  if (owners.size() == 1) return {Slice{owners.begin()->first}};
  double sm = 0, memory = 0;
  for (const auto& [key, a] : owners) {
    sm += a.sm;
    memory += a.memory;
  }
  std::vector<Slice> out;
  for (const auto& [key, a] : owners) {
    const double by_count = static_cast<double>(a.processes) / n;
    out.push_back({key, sm > 0 ? a.sm / sm : by_count, memory > 0 ? a.memory / memory : by_count});
  }
  return out;
}

bool is_nvidia(const DeviceIdentity& id) { return id.vendor.empty() || id.vendor == "nvidia"; }

// dcgm-exporter's labels, in its order. `label_fields` are the "label" lines of the counters file.
Labels series_labels(const GpuSnapshot& g, const Slice& s, const CompatOptions& o,
                     const std::vector<std::pair<std::string, const LabelField*>>& label_fields,
                     const MigInstanceReading* mig = nullptr) {
  const DeviceIdentity& id = g.identity;
  Labels l = {{"gpu", std::to_string(id.index)},
              {"UUID", id.uuid},
              {"pci_bus_id", id.pci_bus_id},
              {"device", fmt::format("nvidia{}", id.index)},
              {"modelName", id.model}};
  if (mig != nullptr) {  // a MIG instance: its GPU instance's profile ("3g.40gb", not "1c.3g.40gb") and id
    std::string_view profile = mig->profile;
    if (const auto dot = profile.find('.'); dot != std::string_view::npos && dot > 0 && profile[dot - 1] == 'c') {
      profile.remove_prefix(dot + 1);
    }
    l.emplace_back("GPU_I_PROFILE", std::string(profile));
    l.emplace_back("GPU_I_ID", std::to_string(mig->gpu_instance));
  }
  if (!o.hostname.empty()) l.emplace_back("Hostname", o.hostname);
  for (const auto& [name, field] : label_fields) l.emplace_back(name, id.*(field->member));
  const auto& [ns, pod, container, job] = s.key;
  if (!pod.empty()) {
    l.emplace_back("container", container);
    l.emplace_back("namespace", ns);
    l.emplace_back("pod", pod);
  }
  if (!job.empty()) l.emplace_back("hpc_job", job);
  return l;
}

struct Export {
  std::string name;
  MetricType type;
  std::string help;
  const MetricField* field;
};

void render_dcgm(const Snapshot& snap, const CompatOptions& o, const std::vector<Export>& exports,
                 std::vector<std::pair<std::string, const LabelField*>> label_fields, bool with_mig,
                 std::vector<MetricFamily>& out) {
  std::vector<MetricFamily> fams;
  for (const auto& e : exports) {
    MetricFamily f{e.name, e.help, e.type, {}};
    f.foreign_name = true;
    fams.push_back(std::move(f));
  }
  for (const auto& g : snap.gpus) {
    if (!g.up || !g.reading || !is_nvidia(g.identity)) continue;
    const std::vector<Slice> slices = slices_of(g);
    for (const auto& s : slices) {
      const Labels labels = series_labels(g, s, o, label_fields);
      for (std::size_t i = 0; i < exports.size(); ++i) {
        const MetricField& field = *exports[i].field;
        std::optional<double> v = field.read_gpu != nullptr ? field.read_gpu(g) : field.read(*g.reading);
        if (!v) continue;
        if (field.split == Split::kBusy) *v *= s.busy_share;
        if (field.split == Split::kMemory) *v *= s.memory_share;
        compat_add_sample(fams[i], labels, *v);
      }
    }
    // MIG instances: series of their own with GPU_I_PROFILE and GPU_I_ID, for what an instance has
    // (memory, profiling). Which pod holds a slice is not known here: no pod labels.
    if (!with_mig) continue;
    std::set<unsigned> gpu_instances;
    for (const auto& m : g.reading->mig.instances) {
      // dcgm-exporter keys a slice by GPU instance: one series for the compute instances of one.
      if (!gpu_instances.insert(m.gpu_instance).second) continue;
      const DeviceReading ir = instance_reading(m);
      const Labels labels = series_labels(g, Slice{}, o, label_fields, &m);
      for (std::size_t i = 0; i < exports.size(); ++i) {
        if (exports[i].field->read == nullptr) continue;  // a GPU's own, as its Xids and NVLink
        if (auto v = exports[i].field->read(ir)) compat_add_sample(fams[i], labels, *v);
      }
    }
  }
  for (auto& f : fams) {
    if (!f.samples.empty()) out.push_back(std::move(f));
  }
}

}  // namespace

std::vector<std::string> unserved_dcgm_fields(const DcgmCounters& counters, const CollectorSet& enabled) {
  std::vector<std::string> out;
  for (const auto& c : counters.counters) {
    std::string why = why_unserved(c);
    if (const MetricField* f = c.type == "label" ? nullptr : find_metric(c.field);
        why.empty() && f != nullptr && !enabled.has(f->collector)) {
      why = fmt::format("needs the {} collector, which the configuration switches off", collector_name(f->collector));
    }
    if (!why.empty()) out.push_back(fmt::format("{} ({})", c.field, why));
  }
  return out;
}

CollectorSet dcgm_field_collectors(const DcgmCounters& counters) {
  CollectorSet out;
  for (const auto& c : counters.counters) {
    if (c.type == "label" || !why_unserved(c).empty()) continue;
    out.set(find_metric(c.field)->collector);
  }
  return out;
}

void build_dcgm_exporter_families(const Snapshot& snap, const CompatOptions& o, std::vector<MetricFamily>& out) {
  std::vector<Export> exports;
  std::vector<std::pair<std::string, const LabelField*>> label_fields;
  for (const auto& c : o.counters.counters) {
    if (!why_unserved(c).empty()) continue;
    if (c.type == "label") {
      label_fields.emplace_back(c.field, find_label(c.field));
    } else {
      exports.push_back(
          {c.field, c.type == "counter" ? MetricType::kCounter : MetricType::kGauge, c.help, find_metric(c.field)});
    }
  }
  render_dcgm(snap, o, exports, std::move(label_fields), /*with_mig=*/true, out);
}

void build_dcgm_exporter_1x_families(const Snapshot& snap, const CompatOptions& o, std::vector<MetricFamily>& out) {
  std::vector<Export> exports;
  for (const auto& n : kOldNames) exports.push_back({n.name, n.type, n.help, find_metric(n.field)});
  render_dcgm(snap, o, exports, {}, /*with_mig=*/false, out);
}

}  // namespace gpumeter
