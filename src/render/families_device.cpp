// The device collectors' families (model/collectors.h), and gpu_up and gpu_info.

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "render/families_internal.h"

namespace gpumeter::family_builders {

Labels mig_labels(const DeviceIdentity& id, const MigInstanceReading& m) {
  Labels l = device_labels(id);
  l.emplace_back(kMigLabels[0], m.uuid);
  l.emplace_back(kMigLabels[1], std::to_string(m.gpu_instance));
  l.emplace_back(kMigLabels[2], std::to_string(m.compute_instance));
  l.emplace_back(kMigLabels[3], m.profile);
  return l;
}

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

void add_identity_families(FamilyList& fams, const Snapshot& snap) {
  auto& up =
      fams.add("gpu_up", kGauge, "1 if the last collection of this GPU succeeded and is not overdue, 0 otherwise.");
  auto& info =
      fams.add("gpu_info", kGauge, "Identity of the GPU, always 1. A label is empty when the backend cannot tell.");
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
}

namespace {

// A reading-based family is described by the collector's reading group it reads (a member of
// DeviceReading) and the group's member: an optional value (one series per GPU) or labeled values
// (one series per label value). `instances` also reads each MIG instance.
using InstanceField = std::optional<double> MigInstanceReading::*;

template <typename Group>
struct ReadingSpec {
  const char* name;
  MetricType type;
  const char* help;
  std::optional<double> Group::*field = nullptr;
  const char* label = nullptr;  // the label of labeled_field's values
  std::vector<LabeledValue> Group::*labeled_field = nullptr;
  InstanceField instances = nullptr;
};

template <typename Group>
constexpr ReadingSpec<Group> scalar(const char* name, MetricType type, const char* help,
                                    std::optional<double> Group::*field, InstanceField instances = nullptr) {
  return {name, type, help, field, nullptr, nullptr, instances};
}

template <typename Group>
constexpr ReadingSpec<Group> labeled(const char* name, MetricType type, const char* help, const char* label,
                                     std::vector<LabeledValue> Group::*field) {
  return {name, type, help, nullptr, label, field, nullptr};
}

// Reading-based families take only GPUs that are up and have a reading: whole GPUs first, then
// the MIG instances.
template <typename Group>
MetricFamily& add_reading_family(FamilyList& fams, const Snapshot& snap, Group DeviceReading::*group,
                                 const ReadingSpec<Group>& s) {
  auto& f = fams.add(s.name, s.type, s.help);
  for (const auto& g : snap.gpus) {
    if (!g.up || !g.reading) continue;
    const Group& r = (*g.reading).*group;
    if (s.field != nullptr && r.*(s.field)) add_sample(f, device_labels(g.identity), *(r.*(s.field)));
    if (s.labeled_field == nullptr) continue;
    for (const auto& lv : r.*(s.labeled_field)) {
      add_sample(f, with(device_labels(g.identity), s.label, lv.label), lv.value);
    }
  }
  if (s.instances == nullptr) return f;
  for (const auto& g : snap.gpus) {
    if (!g.up || !g.reading) continue;
    for (const auto& m : g.reading->mig.instances) {
      if (m.*(s.instances)) add_sample(f, mig_labels(g.identity, m), *(m.*(s.instances)));
    }
  }
  pad_mig_labels(f);
  return f;
}

template <typename Group>
void add_reading_families(FamilyList& fams, const Snapshot& snap, Group DeviceReading::*group,
                          std::span<const ReadingSpec<Group>> specs) {
  for (const ReadingSpec<Group>& s : specs) add_reading_family(fams, snap, group, s);
}

using D = DeviceValues;
using C = ClockValues;
using E = EccValues;
using X = PcieValues;
using I = MigInstanceReading;

// The device collector's. The memory families also hold each MIG instance's memory (its GPU
// instance's), which the mig collector reads.
constexpr ReadingSpec<D> kDeviceFamilies[] = {
    scalar("gpu_utilization_ratio", kGauge,
           "Fraction of the last sample period during which one or more kernels ran on the GPU, 0..1.",
           &D::utilization_ratio),
    scalar("gpu_memory_utilization_ratio", kGauge,
           "Fraction of the last sample period during which device memory was read or written, 0..1.",
           &D::memory_utilization_ratio),
    scalar("gpu_encoder_utilization_ratio", kGauge,
           "Fraction of the driver's sample period during which the video encoder (NVENC) was busy, 0..1.",
           &D::encoder_utilization_ratio),
    scalar("gpu_decoder_utilization_ratio", kGauge,
           "Fraction of the driver's sample period during which the video decoder (NVDEC) was busy, 0..1.",
           &D::decoder_utilization_ratio),
    scalar("gpu_memory_total_bytes", kGauge, "Total device memory in bytes (of the GPU, or of a MIG instance).",
           &D::memory_total_bytes, &I::memory_total_bytes),
    scalar("gpu_memory_used_bytes", kGauge, "Allocated device memory in bytes (of the GPU, or of a MIG instance).",
           &D::memory_used_bytes, &I::memory_used_bytes),
    scalar("gpu_memory_free_bytes", kGauge, "Unallocated device memory in bytes.", &D::memory_free_bytes),
    scalar("gpu_memory_reserved_bytes", kGauge,
           "Device memory the driver and firmware set aside, in bytes: neither used nor free.",
           &D::memory_reserved_bytes),
    labeled("gpu_temperature_celsius", kGauge, "Temperature in degrees Celsius, by sensor.", "sensor",
            &D::temperature_celsius),
    scalar("gpu_power_watts", kGauge, "Power draw in watts.", &D::power_watts),
    scalar("gpu_power_limit_watts", kGauge, "Power management limit in watts.", &D::power_limit_watts),
    scalar("gpu_energy_joules_total", kCounter, "Energy consumed by the GPU in joules since the driver was loaded.",
           &D::energy_joules),
};
// The device collector's too, after the clocks' in the exposition.
constexpr ReadingSpec<D> kDeviceFanFamilies[] = {
    scalar("gpu_fan_speed_ratio", kGauge, "Fan speed as a fraction of its maximum; may exceed 1 on some boards.",
           &D::fan_speed_ratio),
};

// The clocks collector's.
constexpr ReadingSpec<C> kClocksFamilies[] = {
    labeled("gpu_clock_hertz", kGauge, "Current clock frequency in hertz, by clock domain.", "clock", &C::hertz),
    scalar("gpu_performance_state", kGauge, "Performance state (P-state): 0 is maximum performance, 15 minimum.",
           &C::performance_state),
    labeled("gpu_performance_level", kGauge,
            "1 on the GPU's current performance level (AMD's power_dpm_force_performance_level), 0 on the others.",
            "level", &C::performance_level),
};
// The clocks collector's too, after the pcie collector's in the exposition.
constexpr ReadingSpec<C> kClockEventFamilies[] = {
    labeled("gpu_clock_event_active", kGauge,
            "1 while a clock event (throttle reason) holds the clocks down, 0 otherwise; only reasons "
            "the GPU reports.",
            "reason", &C::event_active),
};

// The pcie collector's (its throughput, where the backend measures it outside GPM, is with the
// profiling families).
constexpr ReadingSpec<X> kPcieFamilies[] = {
    scalar("gpu_pcie_link_generation", kGauge, "Current PCIe link generation.", &X::link_generation),
    scalar("gpu_pcie_link_width", kGauge, "Current PCIe link width in lanes.", &X::link_width),
    scalar("gpu_pcie_replay_errors_total", kCounter, "PCIe replay events since the driver was loaded.",
           &X::replay_errors),
    scalar("gpu_pcie_transmit_bytes_total", kCounter,
           "Bytes transmitted by the GPU over PCIe, as counted by the driver.", &X::transmit_bytes),
    scalar("gpu_pcie_receive_bytes_total", kCounter, "Bytes received by the GPU over PCIe, as counted by the driver.",
           &X::receive_bytes),
};

// The ecc collector's.
constexpr ReadingSpec<E> kEccErrorsFamily =
    labeled("gpu_ecc_errors_total", kCounter,
            "ECC memory errors since the driver was loaded (volatile counts), by severity (and by block on AMD GPUs).",
            "severity", &E::errors);
constexpr ReadingSpec<E> kRemappedRowsFamily =
    labeled("gpu_remapped_rows", kGauge, "Device memory rows remapped, by kind.", "kind", &E::remapped_rows);

// A profiling family: GPM, averaged between the backend's last two samples, of whole GPUs, then of
// the MIG instances (the activity of their GPU instance).
using P = ProfilingReading;
using ProfilingField = std::optional<double> P::*;
struct ProfilingSpec {
  const char* name;
  const char* help;
  const char* label;  // nullptr: one series per GPU
  std::vector<std::pair<const char*, ProfilingField>> fields;
};

void add_profiling_family(FamilyList& fams, const Snapshot& snap, const ProfilingSpec& spec) {
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
      // Measured outside GPM (ROCm SMI's pcie_bw; NVML's 20 ms sample before R555), read by the
      // pcie collector.
      ProfilingReading pcie;
      pcie.pcie_transmit_bytes_per_second = g.reading->pcie.transmit_bytes_per_second;
      pcie.pcie_receive_bytes_per_second = g.reading->pcie.receive_bytes_per_second;
      add(device_labels(g.identity), pcie);
    }
    for (const auto& m : g.reading->mig.instances) {
      if (m.profiling) add(mig_labels(g.identity, m), *m.profiling);
    }
  }
  pad_mig_labels(f);
}

}  // namespace

void add_device_families(FamilyList& fams, const Snapshot& snap) {
  add_reading_families<D>(fams, snap, &DeviceReading::device, kDeviceFamilies);
}
void add_device_fan_families(FamilyList& fams, const Snapshot& snap) {
  add_reading_families<D>(fams, snap, &DeviceReading::device, kDeviceFanFamilies);
}
void add_clocks_families(FamilyList& fams, const Snapshot& snap) {
  add_reading_families<C>(fams, snap, &DeviceReading::clocks, kClocksFamilies);
}
void add_clock_event_families(FamilyList& fams, const Snapshot& snap) {
  add_reading_families<C>(fams, snap, &DeviceReading::clocks, kClockEventFamilies);
}
void add_pcie_families(FamilyList& fams, const Snapshot& snap) {
  add_reading_families<X>(fams, snap, &DeviceReading::pcie, kPcieFamilies);
}

// ECC errors, per GPU or per block, and remapped rows.
void add_ecc_families(FamilyList& fams, const Snapshot& snap) {
  MetricFamily& f = add_reading_family(fams, snap, &DeviceReading::ecc, kEccErrorsFamily);
  // A GPU whose errors are counted per block (ROCm SMI) has its blocks' series instead of the
  // sums: sum by (gpu, severity) gives the same totals for both vendors.
  for (const auto& g : snap.gpus) {
    if (!g.up || !g.reading || g.reading->ecc.block_errors.empty()) continue;
    const std::string gpu = std::to_string(g.identity.index);
    std::erase_if(f.samples, [&](const MetricSample& s) { return !s.labels.empty() && s.labels[0].second == gpu; });
    for (const BlockErrors& b : g.reading->ecc.block_errors) {
      const Labels base = with(device_labels(g.identity), "block", b.block);
      add_sample(f, with(base, "severity", "corrected"), b.corrected);
      add_sample(f, with(base, "severity", "uncorrected"), b.uncorrected);
    }
  }
  add_reading_family(fams, snap, &DeviceReading::ecc, kRemappedRowsFamily);
}

// The profiling collector's (and the pcie collector's throughput where GPM does not measure it).
void add_profiling_families(FamilyList& fams, const Snapshot& snap) {
  const ProfilingSpec specs[] = {
      {"gpu_graphics_engine_active_ratio",
       "Fraction of time a compute or graphics context was active on the GPU, 0..1 (GPM).",
       nullptr,
       {{"", &P::graphics_active_ratio}}},
      {"gpu_sm_active_ratio",
       "Fraction of the SMs that were busy, averaged over the sample period, 0..1 (GPM).",
       nullptr,
       {{"", &P::sm_active_ratio}}},
      {"gpu_sm_occupancy_ratio",
       "Warps resident on the SMs as a fraction of the maximum, 0..1 (GPM).",
       nullptr,
       {{"", &P::sm_occupancy_ratio}}},
      {"gpu_tensor_active_ratio",
       "Fraction of time any tensor pipe was active, 0..1 (GPM).",
       nullptr,
       {{"", &P::tensor_active_ratio}}},
      {"gpu_dram_active_ratio",
       "Device memory bandwidth used as a fraction of the peak, 0..1 (GPM).",
       nullptr,
       {{"", &P::dram_active_ratio}}},
      {"gpu_pipe_active_ratio",
       "Fraction of time a floating-point pipe was active, by pipe, 0..1 (GPM).",
       "pipe",
       {{"fp64", &P::fp64_active_ratio}, {"fp32", &P::fp32_active_ratio}, {"fp16", &P::fp16_active_ratio}}},
      {"gpu_pcie_throughput_bytes_per_second",
       "PCIe throughput in bytes per second, by direction (GPM; without GPM the driver's sample: over 20 ms on "
       "NVIDIA drivers before R555, over one second on AMD GPUs).",
       "direction",
       {{"transmit", &P::pcie_transmit_bytes_per_second}, {"receive", &P::pcie_receive_bytes_per_second}}},
      {"gpu_nvlink_throughput_bytes_per_second",
       "NVLink throughput over all links in bytes per second, by direction (GPM).",
       "direction",
       {{"transmit", &P::nvlink_transmit_bytes_per_second}, {"receive", &P::nvlink_receive_bytes_per_second}}},
  };
  for (const ProfilingSpec& spec : specs) add_profiling_family(fams, snap, spec);
}

// The nvlink collector's, per link.
void add_nvlink_families(FamilyList& fams, const Snapshot& snap) {
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
}

// The mig collector's: the mode, the GPU's slices and each instance's share of them.
void add_mig_families(FamilyList& fams, const Snapshot& snap) {
  auto& mig_enabled = fams.add("gpu_mig_enabled", kGauge, "1 if MIG mode is enabled on the GPU, 0 otherwise.");
  auto& mig_slices =
      fams.add("gpu_mig_slices", kGauge, "Slices of the whole GPU in MIG mode (7 on A100 and H100, 4 on A30).");
  auto& instance_slices =
      fams.add("gpu_mig_instance_slices", kGauge, "Slices of the GPU held by the MIG instance's GPU instance.");
  for (const auto& g : snap.gpus) {
    if (!g.up || !g.reading) continue;
    const DeviceReading& r = *g.reading;
    if (r.mig.enabled) add_sample(mig_enabled, device_labels(g.identity), *r.mig.enabled ? 1 : 0);
    if (r.mig.slices) add_sample(mig_slices, device_labels(g.identity), *r.mig.slices);
    for (const auto& m : r.mig.instances) {
      if (m.slices > 0) add_sample(instance_slices, mig_labels(g.identity, m), m.slices);
    }
  }
}

}  // namespace gpumeter::family_builders
