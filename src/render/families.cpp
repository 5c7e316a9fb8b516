#include "render/families.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <string>
#include <utility>

namespace gpumeter {

namespace {

// Families in the order they are added; a deque so that references handed out stay valid. Only
// families that received a sample are kept.
class FamilyList {
 public:
  MetricFamily& add(std::string name, MetricType type, std::string help) {
    families_.push_back(MetricFamily{std::move(name), std::move(help), type, {}});
    return families_.back();
  }
  MetricFamily* last() { return &families_.back(); }

  std::vector<MetricFamily> take() && {
    std::vector<MetricFamily> out;
    out.reserve(families_.size());
    for (auto& f : families_) {
      if (!f.samples.empty()) out.push_back(std::move(f));
    }
    return out;
  }

 private:
  std::deque<MetricFamily> families_;
};

void add_sample(MetricFamily& f, Labels labels, double value) {
  if (f.type == MetricType::kCounter && !(value >= 0)) return;  // also drops NaN
  f.samples.push_back(MetricSample{std::move(labels), value});
}

Labels device_labels(const DeviceIdentity& id) {
  return {{"gpu", std::to_string(id.index)}, {"uuid", id.uuid}};
}

Labels with(Labels labels, std::string name, std::string value) {
  labels.emplace_back(std::move(name), std::move(value));
  return labels;
}

// A MIG instance's series: its parent's gpu and uuid, and which instance it is.
constexpr const char* kMigLabels[] = {"mig_uuid", "gpu_instance", "compute_instance", "mig_profile"};
Labels mig_labels(const DeviceIdentity& id, const MigInstanceReading& m) {
  Labels l = device_labels(id);
  l.emplace_back(kMigLabels[0], m.uuid);
  l.emplace_back(kMigLabels[1], std::to_string(m.gpu_instance));
  l.emplace_back(kMigLabels[2], std::to_string(m.compute_instance));
  l.emplace_back(kMigLabels[3], m.profile);
  return l;
}

Labels owner_labels(Labels l, const OwnerLabels& o) {
  l.emplace_back("project", o.project);
  l.emplace_back("user", o.user);
  l.emplace_back("namespace", o.namespace_);
  l.emplace_back("pod", o.pod);
  l.emplace_back("container", o.container);
  l.emplace_back("hpc_job", o.hpc_job);
  return l;
}

// A ledger entry's labels: its GPU's, its MIG device's where it bills one, then its owner's.
Labels ledger_labels(const DeviceIdentity& id, const LedgerEntry& e) {
  Labels l = device_labels(id);
  if (!e.mig.mig_uuid.empty()) {
    l.emplace_back(kMigLabels[0], e.mig.mig_uuid);
    l.emplace_back(kMigLabels[1], e.mig.gpu_instance);
    l.emplace_back(kMigLabels[2], e.mig.compute_instance);
    l.emplace_back(kMigLabels[3], e.mig.mig_profile);
  }
  return owner_labels(std::move(l), e.owner);
}

// A family holding MIG instances keeps one label set: its whole-GPU samples carry the MIG labels
// empty (to Prometheus the same series as without them), placed where an instance has them.
void pad_mig_labels(MetricFamily& f) {
  const bool any = std::any_of(f.samples.begin(), f.samples.end(), [](const MetricSample& s) {
    return std::any_of(s.labels.begin(), s.labels.end(), [](const auto& kv) { return kv.first == kMigLabels[0]; });
  });
  if (!any) return;
  for (auto& s : f.samples) {
    if (std::any_of(s.labels.begin(), s.labels.end(), [](const auto& kv) { return kv.first == kMigLabels[0]; })) {
      continue;
    }
    // After gpu and uuid, before any label of the family's own (pipe, direction).
    auto at = s.labels.begin() + std::min<std::ptrdiff_t>(2, static_cast<std::ptrdiff_t>(s.labels.size()));
    for (auto it = std::rbegin(kMigLabels); it != std::rend(kMigLabels); ++it) at = s.labels.insert(at, {*it, ""});
  }
}

// A reading-based family is described by the member it reads.
using OptionalField = std::optional<double> DeviceReading::*;
using LabeledField = std::vector<LabeledValue> DeviceReading::*;

struct ScalarSpec {
  const char* name;
  MetricType type;
  const char* help;
  OptionalField field;
};

struct LabeledSpec {
  const char* name;
  MetricType type;
  const char* help;
  const char* label;
  LabeledField field;
};

constexpr MetricType kGauge = MetricType::kGauge;
constexpr MetricType kCounter = MetricType::kCounter;

}  // namespace

std::vector<MetricFamily> build_families(const Snapshot& snap) {
  FamilyList fams;

  auto& up = fams.add("gpu_up", kGauge,
                      "1 if the last collection of this GPU succeeded and is not overdue, 0 otherwise.");
  auto& info = fams.add("gpu_info", kGauge,
                        "Identity of the GPU, always 1. A label is empty when the backend cannot tell.");
  for (const auto& g : snap.gpus) {
    const auto& id = g.identity;
    add_sample(up, device_labels(id), g.up ? 1 : 0);
    Labels l = device_labels(id);
    l.emplace_back("vendor", id.vendor);
    l.emplace_back("model", id.model);
    l.emplace_back("pci_bus_id", id.pci_bus_id);
    l.emplace_back("driver_version", id.driver_version);
    l.emplace_back("vbios_version", id.vbios_version);
    add_sample(info, std::move(l), 1);
  }

  // The output keeps the order of the calls below.
  auto scalar = [&](const ScalarSpec& s) {
    auto& f = fams.add(s.name, s.type, s.help);
    for (const auto& g : snap.gpus) {
      if (!g.up || !g.reading) continue;
      const auto& v = (*g.reading).*(s.field);
      if (v) add_sample(f, device_labels(g.identity), *v);
    }
  };
  auto labeled = [&](const LabeledSpec& s) {
    auto& f = fams.add(s.name, s.type, s.help);
    for (const auto& g : snap.gpus) {
      if (!g.up || !g.reading) continue;
      for (const auto& lv : (*g.reading).*(s.field)) {
        add_sample(f, with(device_labels(g.identity), s.label, lv.label), lv.value);
      }
    }
  };

  using R = DeviceReading;
  scalar({"gpu_utilization_ratio", kGauge,
          "Fraction of the last sample period during which one or more kernels ran on the GPU, 0..1.",
          &R::utilization_ratio});
  scalar({"gpu_memory_utilization_ratio", kGauge,
          "Fraction of the last sample period during which device memory was read or written, 0..1.",
          &R::memory_utilization_ratio});
  // Memory of whole GPUs, and of each MIG instance (its GPU instance's memory).
  auto with_instances = [&](const ScalarSpec& spec, std::optional<double> MigInstanceReading::*field) {
    scalar(spec);
    MetricFamily* f = fams.last();
    for (const auto& g : snap.gpus) {
      if (!g.up || !g.reading) continue;
      for (const auto& m : g.reading->mig_instances) {
        if (m.*field) add_sample(*f, mig_labels(g.identity, m), *(m.*field));
      }
    }
    pad_mig_labels(*f);
  };
  with_instances({"gpu_memory_total_bytes", kGauge, "Total device memory in bytes (of the GPU, or of a MIG instance).",
                  &R::memory_total_bytes},
                 &MigInstanceReading::memory_total_bytes);
  with_instances({"gpu_memory_used_bytes", kGauge, "Allocated device memory in bytes (of the GPU, or of a MIG instance).",
                  &R::memory_used_bytes},
                 &MigInstanceReading::memory_used_bytes);
  scalar({"gpu_memory_free_bytes", kGauge, "Unallocated device memory in bytes.", &R::memory_free_bytes});
  labeled({"gpu_temperature_celsius", kGauge, "Temperature in degrees Celsius, by sensor.", "sensor",
           &R::temperature_celsius});
  scalar({"gpu_power_watts", kGauge, "Power draw in watts.", &R::power_watts});
  scalar({"gpu_power_limit_watts", kGauge, "Power management limit in watts.", &R::power_limit_watts});
  scalar({"gpu_energy_joules_total", kCounter,
          "Energy consumed by the GPU in joules since the driver was loaded.", &R::energy_joules});
  labeled({"gpu_clock_hertz", kGauge, "Current clock frequency in hertz, by clock domain.", "clock",
           &R::clock_hertz});
  scalar({"gpu_performance_state", kGauge,
          "Performance state (P-state): 0 is maximum performance, 15 minimum.", &R::performance_state});
  labeled({"gpu_performance_level", kGauge,
           "1 on the GPU's current performance level (AMD's power_dpm_force_performance_level), 0 on the others.",
           "level", &R::performance_level});
  scalar({"gpu_fan_speed_ratio", kGauge,
          "Fan speed as a fraction of its maximum; may exceed 1 on some boards.", &R::fan_speed_ratio});
  scalar({"gpu_pcie_link_generation", kGauge, "Current PCIe link generation.", &R::pcie_link_generation});
  scalar({"gpu_pcie_link_width", kGauge, "Current PCIe link width in lanes.", &R::pcie_link_width});
  scalar({"gpu_pcie_replay_errors_total", kCounter, "PCIe replay events since the driver was loaded.",
          &R::pcie_replay_errors});
  scalar({"gpu_pcie_transmit_bytes_total", kCounter,
          "Bytes transmitted by the GPU over PCIe, as counted by the driver.", &R::pcie_transmit_bytes});
  scalar({"gpu_pcie_receive_bytes_total", kCounter,
          "Bytes received by the GPU over PCIe, as counted by the driver.", &R::pcie_receive_bytes});
  labeled({"gpu_clock_event_active", kGauge,
           "1 while a clock event (throttle reason) holds the clocks down, 0 otherwise; only reasons "
           "the GPU reports.",
           "reason", &R::clock_event_active});
  labeled({"gpu_ecc_errors_total", kCounter,
           "ECC memory errors since the driver was loaded (volatile counts), by severity (and by block on AMD GPUs).",
           "severity", &R::ecc_errors});
  {
    // A GPU whose errors are counted per block (ROCm SMI) has its blocks' series instead of the
    // sums: sum by (gpu, severity) gives the same totals for both vendors.
    MetricFamily& f = *fams.last();
    for (const auto& g : snap.gpus) {
      if (!g.up || !g.reading || g.reading->ecc_block_errors.empty()) continue;
      const std::string gpu = std::to_string(g.identity.index);
      std::erase_if(f.samples, [&](const MetricSample& s) { return !s.labels.empty() && s.labels[0].second == gpu; });
      for (const BlockErrors& b : g.reading->ecc_block_errors) {
        const Labels base = with(device_labels(g.identity), "block", b.block);
        add_sample(f, with(base, "severity", "corrected"), b.corrected);
        add_sample(f, with(base, "severity", "uncorrected"), b.uncorrected);
      }
    }
  }
  labeled({"gpu_remapped_rows", kGauge, "Device memory rows remapped, by kind.", "kind", &R::remapped_rows});

  // GPM profiling, averaged between the backend's last two samples: whole GPUs, then the MIG
  // instances (the activity of their GPU instance).
  using P = ProfilingReading;
  using ProfilingField = std::optional<double> P::*;
  struct ProfilingSpec {
    const char* name;
    const char* help;
    const char* label;  // nullptr: one series per GPU
    std::vector<std::pair<const char*, ProfilingField>> fields;
  };
  const ProfilingSpec profiling_specs[] = {
      {"gpu_graphics_engine_active_ratio", "Fraction of time a compute or graphics context was active on the GPU, 0..1 (GPM).",
       nullptr, {{"", &P::graphics_active_ratio}}},
      {"gpu_sm_active_ratio", "Fraction of the SMs that were busy, averaged over the sample period, 0..1 (GPM).",
       nullptr, {{"", &P::sm_active_ratio}}},
      {"gpu_sm_occupancy_ratio", "Warps resident on the SMs as a fraction of the maximum, 0..1 (GPM).", nullptr,
       {{"", &P::sm_occupancy_ratio}}},
      {"gpu_tensor_active_ratio", "Fraction of time any tensor pipe was active, 0..1 (GPM).", nullptr,
       {{"", &P::tensor_active_ratio}}},
      {"gpu_dram_active_ratio", "Device memory bandwidth used as a fraction of the peak, 0..1 (GPM).", nullptr,
       {{"", &P::dram_active_ratio}}},
      {"gpu_pipe_active_ratio", "Fraction of time a floating-point pipe was active, by pipe, 0..1 (GPM).", "pipe",
       {{"fp64", &P::fp64_active_ratio}, {"fp32", &P::fp32_active_ratio}, {"fp16", &P::fp16_active_ratio}}},
      {"gpu_pcie_throughput_bytes_per_second",
       "PCIe throughput in bytes per second, by direction (GPM; on AMD GPUs the driver's estimate over one second).",
       "direction", {{"transmit", &P::pcie_transmit_bytes_per_second}, {"receive", &P::pcie_receive_bytes_per_second}}},
      {"gpu_nvlink_throughput_bytes_per_second",
       "NVLink throughput over all links in bytes per second, by direction (GPM).", "direction",
       {{"transmit", &P::nvlink_transmit_bytes_per_second}, {"receive", &P::nvlink_receive_bytes_per_second}}},
  };
  for (const ProfilingSpec& spec : profiling_specs) {
    auto& f = fams.add(spec.name, kGauge, spec.help);
    auto add = [&](const Labels& base, const ProfilingReading& p) {
      for (const auto& [value, field] : spec.fields) {
        if (!(p.*field)) continue;
        add_sample(f, spec.label == nullptr ? base : with(base, spec.label, value), *(p.*field));
      }
    };
    for (const auto& g : snap.gpus) {
      if (!g.up || !g.reading) continue;
      if (g.reading->profiling) add(device_labels(g.identity), *g.reading->profiling);
      if (spec.fields[0].second == &P::pcie_transmit_bytes_per_second && !g.reading->profiling) {
        // Measured outside GPM (ROCm SMI's pcie_bw), read by the pcie collector.
        ProfilingReading pcie;
        pcie.pcie_transmit_bytes_per_second = g.reading->pcie_transmit_bytes_per_second;
        pcie.pcie_receive_bytes_per_second = g.reading->pcie_receive_bytes_per_second;
        add(device_labels(g.identity), pcie);
      }
      for (const auto& m : g.reading->mig_instances) {
        if (m.profiling) add(mig_labels(g.identity, m), *m.profiling);
      }
    }
    pad_mig_labels(f);
  }

  // NVLink, per link.
  auto& nvlink_up = fams.add("gpu_nvlink_up", kGauge, "1 if the NVLink is active, 0 otherwise.");
  auto& nvlink_speed =
      fams.add("gpu_nvlink_speed_bytes_per_second", kGauge, "Speed of the NVLink in bytes per second.");
  auto& nvlink_tx = fams.add("gpu_nvlink_transmit_bytes_total", kCounter,
                             "Data bytes transmitted over the NVLink since the driver was loaded.");
  auto& nvlink_rx = fams.add("gpu_nvlink_receive_bytes_total", kCounter,
                             "Data bytes received over the NVLink since the driver was loaded.");
  auto& nvlink_errors = fams.add("gpu_nvlink_errors_total", kCounter,
                                 "NVLink errors since the driver was loaded, by type (replay, recovery, crc).");
  for (const auto& g : snap.gpus) {
    if (!g.up || !g.reading) continue;
    for (const auto& l : g.reading->nvlinks) {
      const Labels base = with(device_labels(g.identity), "link", std::to_string(l.link));
      if (l.active) add_sample(nvlink_up, base, *l.active ? 1 : 0);
      if (l.speed_bytes_per_second) add_sample(nvlink_speed, base, *l.speed_bytes_per_second);
      if (l.transmit_bytes) add_sample(nvlink_tx, base, *l.transmit_bytes);
      if (l.receive_bytes) add_sample(nvlink_rx, base, *l.receive_bytes);
      for (const auto& e : l.errors) add_sample(nvlink_errors, with(base, "type", e.label), e.value);
    }
  }

  // MIG: the mode, the GPU's slices and each instance's share of them.
  auto& mig_enabled = fams.add("gpu_mig_enabled", kGauge, "1 if MIG mode is enabled on the GPU, 0 otherwise.");
  auto& mig_slices = fams.add("gpu_mig_slices", kGauge, "Slices of the whole GPU in MIG mode (7 on A100 and H100, 4 on A30).");
  auto& instance_slices = fams.add("gpu_mig_instance_slices", kGauge,
                                   "Slices of the GPU held by the MIG instance's GPU instance.");
  for (const auto& g : snap.gpus) {
    if (!g.up || !g.reading) continue;
    const DeviceReading& r = *g.reading;
    if (r.mig_enabled) add_sample(mig_enabled, device_labels(g.identity), *r.mig_enabled ? 1 : 0);
    if (r.mig_slices) add_sample(mig_slices, device_labels(g.identity), *r.mig_slices);
    for (const auto& m : r.mig_instances) {
      if (m.slices > 0) add_sample(instance_slices, mig_labels(g.identity, m), m.slices);
    }
  }

  auto& xid = fams.add("gpu_xid_errors_total", kCounter,
                       "Xid error events reported by the driver since the agent started, by Xid code.");
  for (const auto& g : snap.gpus) {
    for (const auto& [code, count] : g.xid_counts) {
      add_sample(xid, with(device_labels(g.identity), "xid", std::to_string(code)),
                 static_cast<double>(count));
    }
  }

  // Per-process series (bounded by the tracker) and the ledger, with owner labels.
  auto& pmem = fams.add("gpu_process_memory_used_bytes", kGauge,
                        "Device memory used by the process in bytes (0 for a while after it exits).");
  auto& putil = fams.add("gpu_process_utilization_ratio", kGauge,
                         "The process's share of the GPU's SM time over the last collection, 0..1.");
  for (const auto& g : snap.gpus) {
    // A down GPU's processes are whatever its last collection saw: not served as current.
    if (!g.up) continue;
    for (const auto& p : g.processes) {
      if (!p.series) continue;
      Labels l = owner_labels(with(device_labels(g.identity), "pid", std::to_string(p.pid)), p.owner);
      if (p.memory_bytes) add_sample(pmem, l, *p.memory_bytes);
      if (p.utilization_ratio) add_sample(putil, std::move(l), *p.utilization_ratio);
    }
  }
  struct LedgerSpec {
    const char* name;
    const char* help;
    double LedgerEntry::*field;
  };
  for (const LedgerSpec& spec : {
           LedgerSpec{"gpu_allocated_seconds_total",
                      "Seconds of the GPU allocated to the owner: each second is split evenly among the "
                      "processes present or, under the scheduler allocation policy, among the owners it is "
                      "allocated to, used or not, and those of processes outside the allocation; seconds with "
                      "none go to project=\"__idle__\".",
                      &LedgerEntry::allocated_seconds},
           LedgerSpec{"gpu_busy_seconds_total",
                      "Integral of GPU utilization in seconds, split by each owner's SM share; what cannot be "
                      "placed goes to project=\"__unattributed__\".",
                      &LedgerEntry::busy_seconds},
           LedgerSpec{"gpu_memory_byte_seconds_total", "Integral of the owner's device memory in byte-seconds.",
                      &LedgerEntry::memory_byte_seconds},
           LedgerSpec{"gpu_attributed_energy_joules_total",
                      "GPU energy in joules charged to the owner: idle power split as "
                      "gpu_allocated_seconds_total splits each second, the rest by busy share.",
                      &LedgerEntry::energy_joules},
       }) {
    auto& f = fams.add(spec.name, kCounter, spec.help);
    for (const auto& g : snap.gpus) {
      if (!g.ledger) continue;
      for (const auto& e : g.ledger->owners) add_sample(f, ledger_labels(g.identity, e), e.*(spec.field));
    }
    pad_mig_labels(f);
  }
  // Scheduler policy only: under the process policy nobody holds a GPU without a process.
  auto& idle_allocated = fams.add("gpu_idle_allocated_seconds_total", kCounter,
                                  "Seconds of the GPU allocated to the owner by the scheduler while none of its "
                                  "processes was on it (part of gpu_allocated_seconds_total).");
  auto& covered = fams.add("gpumeter_ledger_covered_seconds_total", kCounter,
                           "Seconds of this GPU's time the ledger has integrated; equals the sum of "
                           "gpu_allocated_seconds_total over its owners.");
  auto& gaps = fams.add("gpumeter_ledger_gap_seconds_total", kCounter,
                        "Seconds of this GPU's time the ledger could not integrate (agent down or GPU "
                        "unreachable for longer than the driver's sample buffer).");
  auto& foreign = fams.add("gpumeter_ledger_foreign_seconds_total", kCounter,
                           "Seconds a process outside every allocation ran on this GPU while the scheduler had "
                           "allocated it to someone; it shares the time with the allocation's owners.");
  for (const auto& g : snap.gpus) {
    if (!g.ledger) continue;
    add_sample(covered, device_labels(g.identity), g.ledger->covered_seconds);
    add_sample(gaps, device_labels(g.identity), g.ledger->gap_seconds);
    if (!g.ledger->scheduler) continue;
    add_sample(foreign, device_labels(g.identity), g.ledger->foreign_seconds);
    for (const auto& e : g.ledger->owners) {
      if (e.owner.project == kIdleProject || e.owner.project == kUnattributedProject) continue;
      add_sample(idle_allocated, ledger_labels(g.identity, e), e.idle_allocated_seconds);
    }
  }
  pad_mig_labels(idle_allocated);

  auto& build =
      fams.add("gpumeter_build_info", kGauge, "Version and revision of the gpumeter agent, always 1.");
  add_sample(build, {{"version", snap.build.version}, {"revision", snap.build.revision}}, 1);

  auto& backend = fams.add("gpumeter_backend_up", kGauge,
                           "1 if the GPU backend's vendor library is loaded and initialized, 0 if it is down. "
                           "Absent backends have no series here.");
  auto& absent = fams.add("gpumeter_backend_absent", kGauge,
                          "1 for a GPU backend the node has no use for: none of its vendor's GPUs, or none of "
                          "its library (NVML not found; no AMD GPU for ROCm SMI).");
  for (const auto& b : snap.backends) {
    if (b.absent) {
      add_sample(absent, {{"backend", b.backend}}, 1);
    } else {
      add_sample(backend, {{"backend", b.backend}}, b.up ? 1 : 0);
    }
  }
  auto& call_errors = fams.add("gpumeter_backend_call_errors_total", kCounter,
                               "Driver queries that failed and left one value out while the GPU stayed up, by "
                               "call and error.");
  auto& dropped_records = fams.add("gpumeter_backend_dropped_records_total", kCounter,
                                   "Per-process utilization records dropped because they cannot be true, by "
                                   "reason.");
  auto& reinits = fams.add("gpumeter_backend_reinitializations_total", kCounter,
                           "Times the vendor library was initialized again without a restart (e.g. after a "
                           "driver upgrade).");
  for (const auto& b : snap.backends) {
    for (const auto& [key, n] : b.counters.call_errors) {
      const auto& [gpu, call, error] = key;
      add_sample(call_errors, {{"backend", b.backend}, {"gpu", std::to_string(gpu)}, {"call", call}, {"error", error}},
                 static_cast<double>(n));
    }
    for (const auto& [key, n] : b.counters.dropped_records) {
      add_sample(dropped_records, {{"backend", b.backend}, {"gpu", std::to_string(key.first)}, {"reason", key.second}},
                 static_cast<double>(n));
    }
    if (b.up || b.counters.reinitializations > 0) {
      add_sample(reinits, {{"backend", b.backend}}, static_cast<double>(b.counters.reinitializations));
    }
  }

  // Device collectors carry gpu/uuid; the others carry them empty so the family keeps one label set.
  auto& success = fams.add("gpumeter_collector_success", kGauge,
                           "1 if the collector's last finished run succeeded, 0 otherwise.");
  auto& duration = fams.add("gpumeter_collector_duration_seconds", kGauge,
                            "Duration of the collector's last finished run in seconds.");
  for (const auto& g : snap.gpus) {
    const std::string gpu = std::to_string(g.identity.index);
    const bool timed = std::any_of(g.runs.begin(), g.runs.end(),
                                   [](const CollectorRun& run) { return collector_info(run.collector).per_device; });
    if (!timed) {  // a backend that does not time its device collectors: the collection as a whole
      Labels l = {{"collector", "device"}, {"gpu", gpu}, {"uuid", g.identity.uuid}};
      add_sample(success, l, g.collect_success ? 1 : 0);
      add_sample(duration, std::move(l), g.collect_duration_seconds);
    }
    for (const CollectorRun& run : g.runs) {
      Labels l = {{"collector", std::string(collector_name(run.collector))}, {"gpu", gpu}, {"uuid", g.identity.uuid}};
      add_sample(success, l, run.success ? 1 : 0);
      add_sample(duration, std::move(l), run.duration_seconds);
    }
  }
  for (const auto& c : snap.collectors) {
    Labels l = {{"collector", c.collector}, {"gpu", ""}, {"uuid", ""}};
    add_sample(success, l, c.success ? 1 : 0);
    if (c.duration_seconds) add_sample(duration, std::move(l), *c.duration_seconds);
  }

  const AttributionStatus& at = snap.attribution;
  if (at.enabled) {
    auto& dropped = fams.add("gpumeter_series_dropped_total", kCounter,
                             "Series removed by cardinality limits, by kind: process (beyond the per-process "
                             "limit), owner (ledger owners idle longer than the retention), hpc_job (job ids "
                             "beyond 64 in one mapping file) or slurm_job (jobs beyond the Slurm cgroup reader's "
                             "bounds).");
    for (const auto& [kind, n] : at.series_dropped) add_sample(dropped, {{"kind", kind}}, static_cast<double>(n));
    if (at.kubelet_up) {
      auto& kup = fams.add("gpumeter_kubelet_up", kGauge,
                           "1 if the last kubelet pod-resources List succeeded, 0 otherwise.");
      add_sample(kup, {}, *at.kubelet_up ? 1 : 0);
      if (at.kubelet_last_success_unix > 0) {
        auto& age = fams.add("gpumeter_kubelet_data_age_seconds", kGauge,
                             "Age of the kubelet pod-resources data used to name pods, in seconds.");
        add_sample(age, {}, std::max(0.0, snap.taken_unix - at.kubelet_last_success_unix));
      }
    }
    if (at.checkpoint_enabled) {
      auto& ok = fams.add("gpumeter_ledger_checkpoint_success", kGauge,
                          "1 if the last save of the ledger state succeeded, 0 otherwise.");
      add_sample(ok, {}, at.checkpoint_success ? 1 : 0);
      auto& last = fams.add("gpumeter_ledger_checkpoint_timestamp_seconds", kGauge,
                            "Unix time of the last successful save of the ledger state.");
      if (at.checkpoint_last_success_unix > 0) add_sample(last, {}, at.checkpoint_last_success_unix);
      auto& dur = fams.add("gpumeter_ledger_checkpoint_duration_seconds", kGauge,
                           "Duration of the last save of the ledger state in seconds.");
      add_sample(dur, {}, at.checkpoint_duration_seconds);
      auto& failed = fams.add("gpumeter_ledger_checkpoint_failures_total", kCounter,
                              "Saves of the ledger state that failed.");
      add_sample(failed, {}, static_cast<double>(at.checkpoint_failures));
    }
    auto& steps = fams.add("gpumeter_ledger_clock_steps_total", kCounter,
                           "Steps of the wall clock (NTP, a VM restore) the ledger followed, counted once per GPU.");
    add_sample(steps, {}, static_cast<double>(at.clock_steps));
  }

  return std::move(fams).take();
}

MetricFamily snapshot_age_family(double age_seconds) {
  return MetricFamily{kSnapshotAgeFamily,
                      "Seconds between the assembly of the served snapshot and this scrape.",
                      MetricType::kGauge,
                      {MetricSample{{}, age_seconds}}};
}

}  // namespace gpumeter
