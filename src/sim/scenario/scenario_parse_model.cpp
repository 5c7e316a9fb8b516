// Parsing `models.<id>`: a GPU model's physics, its product line and architecture, and its
// sample buffers.

#include <algorithm>
#include <iterator>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "abi/nvml_api.h"
#include "sim/scenario/driver.h"
#include "sim/scenario/scenario_parse_parts.h"
#include "sim/scenario/yaml_reader.h"

namespace gpumeter::sim::parse {

namespace {

constexpr std::size_t kMaxName = NVML_DEVICE_NAME_V2_BUFFER_SIZE - 1;
constexpr std::size_t kMaxVbios = NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE - 1;

// AMD architectures: CDNA 2 (MI200), CDNA 3 (MI300), RDNA 3 (Radeon RX 7000).
constexpr std::string_view kAmdArchitectures[] = {"cdna2", "cdna3", "rdna3"};

template <typename List>
std::string list_text(const List& list) {
  std::string out;
  for (auto a : list) out += fmt::format("{}{}", out.empty() ? "" : ", ", a);
  return out;
}

std::optional<std::string> amd_architecture_from_name(std::string_view name) {
  if (name.find("MI300") != std::string_view::npos) return "cdna3";
  if (name.find("MI250") != std::string_view::npos || name.find("MI210") != std::string_view::npos) return "cdna2";
  if (name.find("RX 7") != std::string_view::npos) return "rdna3";
  return std::nullopt;
}

// The product line decides defaults (a GeForce card has a fan and no ECC) and the
// architecture documented per-architecture behaviour; a name that does not say which
// architecture it is must be told.
template <typename List>
void parse_architecture(GpuModelSpec& g, const MapReader& m, const List& known,
                        std::optional<std::string> (*from_name)(std::string_view)) {
  if (m.has("architecture")) {
    g.architecture = read_string(m.get("architecture"), m.path("architecture"));
    if (std::find(std::begin(known), std::end(known), g.architecture) == std::end(known)) {
      fail_at(m.get("architecture"), m.path("architecture"),
              fmt::format("unknown architecture '{}' (expected one of: {})", g.architecture, list_text(known)));
    }
  } else if (auto a = from_name(g.name)) {
    g.architecture = *a;
  } else {
    fail_at(m.node(), m.path("architecture"),
            fmt::format("cannot tell the architecture of '{}' from its name; add 'architecture' (one of: {})", g.name,
                        list_text(known)));
  }
}

void parse_product(GpuModelSpec& g, const MapReader& m) {
  const bool amd = g.vendor == "amd";
  // The consumer line of each vendor: a fan, no ECC.
  const char* consumer = amd ? "radeon" : "geforce";
  if (m.has("profile")) {
    g.profile = read_string(m.get("profile"), m.path("profile"));
    if (g.profile != "datacenter" && g.profile != consumer) {
      fail_at(m.get("profile"), m.path("profile"),
              fmt::format("unknown profile '{}' (expected datacenter or {})", g.profile, consumer));
    }
  }
  const bool consumer_line = g.profile == consumer;
  if (!m.has("fan") && consumer_line) g.fan = true;
  g.ecc = !consumer_line;
  if (m.has("ecc")) {
    g.ecc = read_bool(m.get("ecc"), m.path("ecc"));
    if (g.ecc && consumer_line) fail_at(m.get("ecc"), m.path("ecc"), fmt::format("a {} GPU has no ECC", consumer));
  }
  if (amd) {
    parse_architecture(g, m, kAmdArchitectures, amd_architecture_from_name);
  } else {
    parse_architecture(g, m, kArchitectures, architecture_from_name);
  }
}

SampleSpec parse_samples(const YAML::Node& node, const std::string& path) {
  MapReader m(node, path,
              {"utilization_period", "utilization_depth", "power_period", "power_depth", "power_period_busy"});
  SampleSpec s;
  // nvml.h: the utilization sample period is "between 1 second and 1/6 second, depending on
  // the product".
  if (m.has("utilization_period")) {
    s.utilization_period = read_duration(m.get("utilization_period"), m.path("utilization_period"));
    if (s.utilization_period < 166'666 || s.utilization_period > kMicrosPerSecond) {
      fail_at(m.get("utilization_period"), m.path("utilization_period"),
              "must be from 1/6 s (166666us) to 1 s, as nvml.h states");
    }
  }
  if (m.has("power_period")) {
    s.power_period = read_duration(m.get("power_period"), m.path("power_period"));
    if (s.power_period < 1'000 || s.power_period > kMicrosPerSecond)
      fail_at(m.get("power_period"), m.path("power_period"), "must be from 1ms to 1s");
  }
  if (m.has("utilization_depth")) {
    s.utilization_depth = read_unsigned(m.get("utilization_depth"), m.path("utilization_depth"), 1, 10000);
  }
  if (m.has("power_depth")) s.power_depth = read_unsigned(m.get("power_depth"), m.path("power_depth"), 1, 10000);
  if (m.has("power_period_busy")) {
    s.power_period_busy = read_duration(m.get("power_period_busy"), m.path("power_period_busy"));
    if (s.power_period_busy < 1'000 || s.power_period_busy > s.power_period) {
      fail_at(m.get("power_period_busy"), m.path("power_period_busy"), "must be from 1ms to power_period");
    }
  }
  return s;
}

ClockRange parse_clock(const YAML::Node& node, const std::string& path) {
  MapReader m(node, path, {"idle", "max"});
  ClockRange c;
  c.idle_mhz = static_cast<unsigned>(read_unsigned(m.require("idle"), m.path("idle"), 0, 100000));
  c.max_mhz = static_cast<unsigned>(read_unsigned(m.require("max"), m.path("max"), 1, 100000));
  if (c.idle_mhz > c.max_mhz) fail_at(m.get("idle"), m.path("idle"), "must not exceed max");
  return c;
}

// `power` {limit, idle, max}, idle <= max <= limit.
void parse_power(GpuModelSpec& g, const MapReader& m) {
  MapReader power(m.require("power"), m.path("power"), {"limit", "idle", "max"});
  g.power_limit_mw = read_milliwatts(power.require("limit"), power.path("limit"));
  g.idle_power_mw = read_milliwatts(power.require("idle"), power.path("idle"));
  g.max_power_mw = read_milliwatts(power.require("max"), power.path("max"));
  if (g.power_limit_mw == 0) fail_at(power.get("limit"), power.path("limit"), "must be more than 0");
  if (g.idle_power_mw > g.max_power_mw) fail_at(power.get("idle"), power.path("idle"), "must not exceed max");
  if (g.max_power_mw > g.power_limit_mw) fail_at(power.get("max"), power.path("max"), "must not exceed limit");
}

// `temperature` {idle, max, memory_offset}, each with a default.
void parse_temperature(GpuModelSpec& g, const MapReader& m) {
  g.idle_temperature_c = 30;
  g.max_temperature_c = 75;
  g.memory_temperature_offset_c = 4;
  if (!m.has("temperature")) return;
  MapReader t(m.get("temperature"), m.path("temperature"), {"idle", "max", "memory_offset"});
  if (t.has("idle")) g.idle_temperature_c = static_cast<unsigned>(read_unsigned(t.get("idle"), t.path("idle"), 0, 150));
  if (t.has("max")) g.max_temperature_c = static_cast<unsigned>(read_unsigned(t.get("max"), t.path("max"), 0, 150));
  if (t.has("memory_offset")) {
    g.memory_temperature_offset_c =
        static_cast<unsigned>(read_unsigned(t.get("memory_offset"), t.path("memory_offset"), 0, 50));
  }
  if (g.idle_temperature_c > g.max_temperature_c) t.fail("idle must not exceed max");
}

// `clocks` {graphics, sm, memory, video}: an AMD GPU has graphics and memory only.
void parse_clocks(GpuModelSpec& g, const MapReader& m) {
  const bool amd = g.vendor == "amd";
  MapReader clocks(m.require("clocks"), m.path("clocks"), {"graphics", "sm", "memory", "video"});
  g.graphics_clock = parse_clock(clocks.require("graphics"), clocks.path("graphics"));
  g.memory_clock = parse_clock(clocks.require("memory"), clocks.path("memory"));
  if (amd) {
    // amdgpu has one shader clock (sclk) and no separate SM or video clock.
    if (clocks.has("sm")) fail_at(clocks.get("sm"), clocks.path("sm"), "an AMD GPU has no SM clock; give graphics");
    if (clocks.has("video")) fail_at(clocks.get("video"), clocks.path("video"), "an AMD GPU has no video clock");
    g.sm_clock = g.graphics_clock;
    g.video_clock = g.graphics_clock;
  } else {
    g.sm_clock = parse_clock(clocks.require("sm"), clocks.path("sm"));
    g.video_clock = parse_clock(clocks.require("video"), clocks.path("video"));
  }
}

// `fan`: true or false, or {idle, max} for a GPU that has one; absent, parse_product decides.
void parse_fan(GpuModelSpec& g, const MapReader& m) {
  if (!m.has("fan")) return;
  YAML::Node fan = m.get("fan");
  if (fan.IsMap()) {
    MapReader f(fan, m.path("fan"), {"idle", "max"});
    g.fan = true;
    if (f.has("idle")) g.fan_idle_percent = static_cast<unsigned>(read_ratio_percent(f.get("idle"), f.path("idle")));
    if (f.has("max")) g.fan_max_percent = static_cast<unsigned>(read_ratio_percent(f.get("max"), f.path("max")));
    if (g.fan_idle_percent > g.fan_max_percent) f.fail("idle must not exceed max");
  } else {
    g.fan = read_bool(fan, m.path("fan"));
  }
}

// `pcie` {generation, width, tx/rx_bytes_per_second, device_id, subsystem_id}; an AMD model
// must give its device id.
void parse_pcie(GpuModelSpec& g, const MapReader& m) {
  const bool amd = g.vendor == "amd";
  g.pcie_tx_bytes_per_second = 2e9;
  g.pcie_rx_bytes_per_second = 4e9;
  if (m.has("pcie")) {
    MapReader p(m.get("pcie"), m.path("pcie"),
                {"generation", "width", "tx_bytes_per_second", "rx_bytes_per_second", "device_id", "subsystem_id"});
    if (p.has("generation")) {
      g.pcie_generation = static_cast<unsigned>(read_unsigned(p.get("generation"), p.path("generation"), 1, 7));
    }
    if (p.has("width")) g.pcie_width = static_cast<unsigned>(read_unsigned(p.get("width"), p.path("width"), 1, 32));
    if (p.has("tx_bytes_per_second")) {
      g.pcie_tx_bytes_per_second =
          static_cast<double>(read_bytes(p.get("tx_bytes_per_second"), p.path("tx_bytes_per_second")));
    }
    if (p.has("rx_bytes_per_second")) {
      g.pcie_rx_bytes_per_second =
          static_cast<double>(read_bytes(p.get("rx_bytes_per_second"), p.path("rx_bytes_per_second")));
    }
    if (p.has("device_id")) {
      auto dev = read_unsigned(p.get("device_id"), p.path("device_id"), 0, 0xFFFF);
      g.pci_device_id = static_cast<unsigned>(dev << 16 | (amd ? 0x1002 : 0x10DE));
    }
    if (p.has("subsystem_id")) {
      g.pci_subsystem_id =
          static_cast<unsigned>(read_unsigned(p.get("subsystem_id"), p.path("subsystem_id"), 0, 0xFFFFFFFF));
    }
  }
  if (amd && (g.pci_device_id >> 16) == 0) {
    fail_at(m.node(), m.path("pcie.device_id"), "an AMD model needs pcie.device_id (ROCm SMI names the GPU by it)");
  }
}

}  // namespace

GpuModelSpec parse_model(const std::string& id, const YAML::Node& node, const std::string& path) {
  MapReader m(node, path,
              {"vendor", "name", "memory", "memory_reserved", "power", "temperature", "clocks", "fan", "pcie",
               "vbios_version", "ecc", "profile", "architecture", "compute_units", "samples", "nvlink"});
  GpuModelSpec g;
  g.id = id;
  if (m.has("vendor")) {
    g.vendor = read_string(m.get("vendor"), m.path("vendor"));
    if (g.vendor != "nvidia" && g.vendor != "amd")
      fail_at(m.get("vendor"), m.path("vendor"), fmt::format("unknown vendor '{}' (expected nvidia or amd)", g.vendor));
  }
  const bool amd = g.vendor == "amd";
  g.name = read_bounded_string(m.require("name"), m.path("name"), kMaxName);
  g.memory_total_bytes = read_bytes(m.require("memory"), m.path("memory"));
  if (g.memory_total_bytes == 0) fail_at(m.get("memory"), m.path("memory"), "must be more than 0");
  if (m.has("memory_reserved")) {
    g.memory_reserved_bytes = read_bytes(m.get("memory_reserved"), m.path("memory_reserved"));
    if (g.memory_reserved_bytes >= g.memory_total_bytes) {
      fail_at(m.get("memory_reserved"), m.path("memory_reserved"), "must be less than memory");
    }
  }
  parse_power(g, m);
  parse_temperature(g, m);
  parse_clocks(g, m);
  if (m.has("compute_units")) {
    if (!amd) fail_at(m.get("compute_units"), m.path("compute_units"), "only an AMD model counts compute units");
    g.compute_units = static_cast<unsigned>(read_unsigned(m.get("compute_units"), m.path("compute_units"), 1, 4096));
  } else if (amd) {
    fail_at(m.node(), m.path("compute_units"), "an AMD model needs compute_units (KFD's cu_occupancy counts them)");
  }
  parse_fan(g, m);
  parse_pcie(g, m);
  g.vbios_version = "00.00.00.00.00";
  if (m.has("vbios_version")) {
    g.vbios_version = read_bounded_string(m.get("vbios_version"), m.path("vbios_version"), kMaxVbios);
  }
  parse_product(g, m);
  if (m.has("samples")) g.samples = parse_samples(m.get("samples"), m.path("samples"));
  if (m.has("nvlink")) {
    if (amd) fail_at(m.get("nvlink"), m.path("nvlink"), "an AMD GPU has no NVLink");
    g.nvlink = parse_nvlink_spec(m.get("nvlink"), m.path("nvlink"));
  }
  return g;
}

}  // namespace gpumeter::sim::parse
