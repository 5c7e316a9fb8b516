#include "render/compat.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include "render/compat_internal.h"

namespace gpumeter {

Result<CompatSet> parse_compat_set(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kCompatSetNames); ++i) {
    if (kCompatSetNames[i] == name) return static_cast<CompatSet>(i);
  }
  return Error{0,
               fmt::format("unknown compat set '{}' (expected dcgm-exporter, dcgm-exporter-1.x or nvidia-smi)", name)};
}

std::string_view compat_set_name(CompatSet set) { return kCompatSetNames[static_cast<std::size_t>(set)]; }

bool CompatOptions::has(CompatSet set) const { return std::find(sets.begin(), sets.end(), set) != sets.end(); }

namespace {

// The nvidia-smi exporters name a GPU by its UUID in lower case without the "GPU-" prefix
// (utkuozdemir/nvidia_gpu_exporter, the most used of them).
std::string smi_uuid(const std::string& uuid) {
  std::string s = uuid.starts_with("GPU-") ? uuid.substr(4) : uuid;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

using Reader = std::optional<double> (*)(const DeviceReading&);
struct SmiFamily {
  const char* name;
  MetricType type;
  const char* help;
  Reader read;
};

using R = const DeviceReading&;
std::optional<double> times(const std::optional<double>& v, double f) {
  return v ? std::optional<double>(*v * f) : std::nullopt;
}

// utkuozdemir/nvidia_gpu_exporter's names for the values gpumeter reads (its nvidia-smi query
// fields, in base units), and the _percent utilization of the older nvidia-smi exporters.
const SmiFamily kSmiFamilies[] = {
    {"nvidia_smi_utilization_gpu_ratio", MetricType::kGauge, "utilization.gpu as a ratio 0..1.",
     [](R r) { return r.device.utilization_ratio; }},
    {"nvidia_smi_utilization_memory_ratio", MetricType::kGauge, "utilization.memory as a ratio 0..1.",
     [](R r) { return r.device.memory_utilization_ratio; }},
    {"nvidia_smi_utilization_gpu_percent", MetricType::kGauge, "utilization.gpu in percent.",
     [](R r) { return times(r.device.utilization_ratio, 100); }},
    {"nvidia_smi_utilization_memory_percent", MetricType::kGauge, "utilization.memory in percent.",
     [](R r) { return times(r.device.memory_utilization_ratio, 100); }},
    {"nvidia_smi_memory_total_bytes", MetricType::kGauge, "memory.total in bytes.",
     [](R r) { return r.device.memory_total_bytes; }},
    {"nvidia_smi_memory_used_bytes", MetricType::kGauge, "memory.used in bytes.",
     [](R r) { return r.device.memory_used_bytes; }},
    {"nvidia_smi_memory_free_bytes", MetricType::kGauge, "memory.free in bytes.",
     [](R r) { return r.device.memory_free_bytes; }},
    {"nvidia_smi_temperature_gpu", MetricType::kGauge, "temperature.gpu in degrees Celsius.",
     [](R r) { return compat_labeled(r.device.temperature_celsius, "gpu"); }},
    {"nvidia_smi_temperature_memory", MetricType::kGauge, "temperature.memory in degrees Celsius.",
     [](R r) { return compat_labeled(r.device.temperature_celsius, "memory"); }},
    {"nvidia_smi_power_draw_watts", MetricType::kGauge, "power.draw in watts.",
     [](R r) { return r.device.power_watts; }},
    {"nvidia_smi_power_limit_watts", MetricType::kGauge, "power.limit in watts.",
     [](R r) { return r.device.power_limit_watts; }},
    {"nvidia_smi_energy_joules_total", MetricType::kCounter,
     "Energy consumed by the GPU in joules since the driver was loaded.", [](R r) { return r.device.energy_joules; }},
    {"nvidia_smi_clocks_current_graphics_clock_hz", MetricType::kGauge, "clocks.current.graphics in hertz.",
     [](R r) { return compat_labeled(r.clocks.hertz, "graphics"); }},
    {"nvidia_smi_clocks_current_sm_clock_hz", MetricType::kGauge, "clocks.current.sm in hertz.",
     [](R r) { return compat_labeled(r.clocks.hertz, "sm"); }},
    {"nvidia_smi_clocks_current_memory_clock_hz", MetricType::kGauge, "clocks.current.memory in hertz.",
     [](R r) { return compat_labeled(r.clocks.hertz, "memory"); }},
    {"nvidia_smi_clocks_current_video_clock_hz", MetricType::kGauge, "clocks.current.video in hertz.",
     [](R r) { return compat_labeled(r.clocks.hertz, "video"); }},
    {"nvidia_smi_fan_speed_ratio", MetricType::kGauge, "fan.speed as a ratio.",
     [](R r) { return r.device.fan_speed_ratio; }},
    {"nvidia_smi_pstate", MetricType::kGauge, "pstate as a number: 0 is maximum performance.",
     [](R r) { return r.clocks.performance_state; }},
};

void build_nvidia_smi_families(const Snapshot& snap, std::vector<MetricFamily>& out) {
  MetricFamily info{"nvidia_smi_gpu_info",
                    "A metric with a constant '1' value labeled by the GPU's identity.",
                    MetricType::kGauge,
                    {}};
  MetricFamily index{"nvidia_smi_index", "index of the GPU.", MetricType::kGauge, {}};
  std::vector<MetricFamily> fams;
  for (const auto& s : kSmiFamilies) fams.push_back(MetricFamily{s.name, s.help, s.type, {}});
  for (const auto& g : snap.gpus) {
    if (!g.up || !g.reading || !(g.identity.vendor.empty() || g.identity.vendor == "nvidia")) continue;
    const DeviceIdentity& id = g.identity;
    const Labels l = {{"uuid", smi_uuid(id.uuid)}};
    compat_add_sample(info,
                      {{"uuid", smi_uuid(id.uuid)},
                       {"name", id.model},
                       {"driver_version", id.driver_version},
                       {"vbios_version", id.vbios_version},
                       {"pci_bus_id", id.pci_bus_id},
                       {"serial", id.serial},
                       {"index", std::to_string(id.index)}},
                      1);
    compat_add_sample(index, l, id.index);
    for (std::size_t i = 0; i < std::size(kSmiFamilies); ++i) {
      if (auto v = kSmiFamilies[i].read(*g.reading)) compat_add_sample(fams[i], l, *v);
    }
  }
  if (!info.samples.empty()) out.push_back(std::move(info));
  if (!index.samples.empty()) out.push_back(std::move(index));
  for (auto& f : fams) {
    if (!f.samples.empty()) out.push_back(std::move(f));
  }
}

}  // namespace

std::vector<MetricFamily> build_compat_families(const Snapshot& snapshot, const CompatOptions& options) {
  std::vector<MetricFamily> out;
  for (CompatSet set : options.sets) {
    switch (set) {
      case CompatSet::kDcgmExporter:
        build_dcgm_exporter_families(snapshot, options, out);
        break;
      case CompatSet::kDcgmExporter1x:
        build_dcgm_exporter_1x_families(snapshot, options, out);
        break;
      case CompatSet::kNvidiaSmi:
        build_nvidia_smi_families(snapshot, out);
        break;
    }
  }
  return out;
}

}  // namespace gpumeter
