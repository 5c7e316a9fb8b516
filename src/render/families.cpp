#include "render/families.h"

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
  scalar({"gpu_memory_total_bytes", kGauge, "Total device memory in bytes.", &R::memory_total_bytes});
  scalar({"gpu_memory_used_bytes", kGauge, "Allocated device memory in bytes.", &R::memory_used_bytes});
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
           "ECC memory errors since the driver was loaded (volatile counts), by severity.", "severity",
           &R::ecc_errors});
  labeled({"gpu_remapped_rows", kGauge, "Device memory rows remapped, by kind.", "kind", &R::remapped_rows});

  auto& xid = fams.add("gpu_xid_errors_total", kCounter,
                       "Xid error events reported by the driver since the agent started, by Xid code.");
  for (const auto& g : snap.gpus) {
    for (const auto& [code, count] : g.xid_counts) {
      add_sample(xid, with(device_labels(g.identity), "xid", std::to_string(code)),
                 static_cast<double>(count));
    }
  }

  auto& build =
      fams.add("gpumeter_build_info", kGauge, "Version and revision of the gpumeter agent, always 1.");
  add_sample(build, {{"version", snap.build.version}, {"revision", snap.build.revision}}, 1);

  auto& backend = fams.add("gpumeter_backend_up", kGauge,
                           "1 if the GPU backend's vendor library is loaded and initialized, 0 otherwise.");
  for (const auto& b : snap.backends) add_sample(backend, {{"backend", b.backend}}, b.up ? 1 : 0);

  // Device collectors carry gpu/uuid; the others carry them empty so the family keeps one label set.
  auto& success = fams.add("gpumeter_collector_success", kGauge,
                           "1 if the collector's last finished run succeeded, 0 otherwise.");
  auto& duration = fams.add("gpumeter_collector_duration_seconds", kGauge,
                            "Duration of the collector's last finished run in seconds.");
  for (const auto& g : snap.gpus) {
    Labels l = {
        {"collector", "device"}, {"gpu", std::to_string(g.identity.index)}, {"uuid", g.identity.uuid}};
    add_sample(success, l, g.collect_success ? 1 : 0);
    add_sample(duration, std::move(l), g.collect_duration_seconds);
  }
  for (const auto& c : snap.collectors) {
    Labels l = {{"collector", c.collector}, {"gpu", ""}, {"uuid", ""}};
    add_sample(success, l, c.success ? 1 : 0);
    add_sample(duration, std::move(l), c.duration_seconds);
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
