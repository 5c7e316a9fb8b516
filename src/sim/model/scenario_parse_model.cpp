// Parsing `models.<id>`: a GPU model's physics, its product line and architecture, and its
// sample buffers.

#include <algorithm>
#include <iterator>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "nvml/nvml_api.h"
#include "sim/model/driver.h"
#include "sim/model/scenario_parse_parts.h"
#include "sim/model/yaml_reader.h"

namespace gpumeter::sim::parse {

namespace {

constexpr std::size_t kMaxName = NVML_DEVICE_NAME_V2_BUFFER_SIZE - 1;
constexpr std::size_t kMaxVbios = NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE - 1;

std::string architecture_list() {
  std::string out;
  for (auto a : kArchitectures) out += fmt::format("{}{}", out.empty() ? "" : ", ", a);
  return out;
}

// The product line decides defaults (a GeForce card has a fan and no ECC) and the
// architecture documented per-architecture behaviour; a name that does not say which
// architecture it is must be told.
void parse_product(GpuModelSpec& g, const MapReader& m) {
  if (m.has("profile")) {
    g.profile = read_string(m.get("profile"), m.path("profile"));
    if (g.profile != "datacenter" && g.profile != "geforce") {
      fail_at(m.get("profile"), m.path("profile"),
              fmt::format("unknown profile '{}' (expected datacenter or geforce)", g.profile));
    }
  }
  const bool geforce = g.profile == "geforce";
  if (!m.has("fan") && geforce) g.fan = true;
  g.ecc = !geforce;
  if (m.has("ecc")) {
    g.ecc = read_bool(m.get("ecc"), m.path("ecc"));
    if (g.ecc && geforce) fail_at(m.get("ecc"), m.path("ecc"), "a geforce GPU has no ECC");
  }
  if (m.has("architecture")) {
    g.architecture = read_string(m.get("architecture"), m.path("architecture"));
    if (std::find(std::begin(kArchitectures), std::end(kArchitectures), g.architecture) ==
        std::end(kArchitectures)) {
      fail_at(m.get("architecture"), m.path("architecture"),
              fmt::format("unknown architecture '{}' (expected one of: {})", g.architecture,
                          architecture_list()));
    }
  } else if (auto a = architecture_from_name(g.name)) {
    g.architecture = *a;
  } else {
    fail_at(m.node(), m.path("architecture"),
            fmt::format("cannot tell the architecture of '{}' from its name; add 'architecture' (one of: {})",
                        g.name, architecture_list()));
  }
}

SampleSpec parse_samples(const YAML::Node& node, const std::string& path) {
  MapReader m(node, path, {"utilization_period", "utilization_depth", "power_period", "power_depth"});
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
  if (m.has("power_depth"))
    s.power_depth = read_unsigned(m.get("power_depth"), m.path("power_depth"), 1, 10000);
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

}  // namespace

GpuModelSpec parse_model(const std::string& id, const YAML::Node& node, const std::string& path) {
  MapReader m(node, path,
              {"name", "memory", "memory_reserved", "power", "temperature", "clocks", "fan", "pcie",
               "vbios_version", "ecc", "profile", "architecture", "samples"});
  GpuModelSpec g;
  g.id = id;
  g.name = read_bounded_string(m.require("name"), m.path("name"), kMaxName);
  g.memory_total_bytes = read_bytes(m.require("memory"), m.path("memory"));
  if (g.memory_total_bytes == 0) fail_at(m.get("memory"), m.path("memory"), "must be more than 0");
  if (m.has("memory_reserved")) {
    g.memory_reserved_bytes = read_bytes(m.get("memory_reserved"), m.path("memory_reserved"));
    if (g.memory_reserved_bytes >= g.memory_total_bytes) {
      fail_at(m.get("memory_reserved"), m.path("memory_reserved"), "must be less than memory");
    }
  }

  MapReader power(m.require("power"), m.path("power"), {"limit", "idle", "max"});
  g.power_limit_mw = read_milliwatts(power.require("limit"), power.path("limit"));
  g.idle_power_mw = read_milliwatts(power.require("idle"), power.path("idle"));
  g.max_power_mw = read_milliwatts(power.require("max"), power.path("max"));
  if (g.power_limit_mw == 0) fail_at(power.get("limit"), power.path("limit"), "must be more than 0");
  if (g.idle_power_mw > g.max_power_mw) fail_at(power.get("idle"), power.path("idle"), "must not exceed max");
  if (g.max_power_mw > g.power_limit_mw)
    fail_at(power.get("max"), power.path("max"), "must not exceed limit");

  g.idle_temperature_c = 30;
  g.max_temperature_c = 75;
  g.memory_temperature_offset_c = 4;
  if (m.has("temperature")) {
    MapReader t(m.get("temperature"), m.path("temperature"), {"idle", "max", "memory_offset"});
    if (t.has("idle"))
      g.idle_temperature_c = static_cast<unsigned>(read_unsigned(t.get("idle"), t.path("idle"), 0, 150));
    if (t.has("max"))
      g.max_temperature_c = static_cast<unsigned>(read_unsigned(t.get("max"), t.path("max"), 0, 150));
    if (t.has("memory_offset")) {
      g.memory_temperature_offset_c =
          static_cast<unsigned>(read_unsigned(t.get("memory_offset"), t.path("memory_offset"), 0, 50));
    }
    if (g.idle_temperature_c > g.max_temperature_c) t.fail("idle must not exceed max");
  }

  MapReader clocks(m.require("clocks"), m.path("clocks"), {"graphics", "sm", "memory", "video"});
  g.graphics_clock = parse_clock(clocks.require("graphics"), clocks.path("graphics"));
  g.sm_clock = parse_clock(clocks.require("sm"), clocks.path("sm"));
  g.memory_clock = parse_clock(clocks.require("memory"), clocks.path("memory"));
  g.video_clock = parse_clock(clocks.require("video"), clocks.path("video"));

  if (m.has("fan")) {  // else parse_product decides
    YAML::Node fan = m.get("fan");
    if (fan.IsMap()) {
      MapReader f(fan, m.path("fan"), {"idle", "max"});
      g.fan = true;
      if (f.has("idle"))
        g.fan_idle_percent = static_cast<unsigned>(read_ratio_percent(f.get("idle"), f.path("idle")));
      if (f.has("max"))
        g.fan_max_percent = static_cast<unsigned>(read_ratio_percent(f.get("max"), f.path("max")));
      if (g.fan_idle_percent > g.fan_max_percent) f.fail("idle must not exceed max");
    } else {
      g.fan = read_bool(fan, m.path("fan"));
    }
  }

  g.pcie_tx_bytes_per_second = 2e9;
  g.pcie_rx_bytes_per_second = 4e9;
  if (m.has("pcie")) {
    MapReader p(
        m.get("pcie"), m.path("pcie"),
        {"generation", "width", "tx_bytes_per_second", "rx_bytes_per_second", "device_id", "subsystem_id"});
    if (p.has("generation")) {
      g.pcie_generation =
          static_cast<unsigned>(read_unsigned(p.get("generation"), p.path("generation"), 1, 7));
    }
    if (p.has("width"))
      g.pcie_width = static_cast<unsigned>(read_unsigned(p.get("width"), p.path("width"), 1, 32));
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
      g.pci_device_id = static_cast<unsigned>(dev << 16 | 0x10DE);
    }
    if (p.has("subsystem_id")) {
      g.pci_subsystem_id =
          static_cast<unsigned>(read_unsigned(p.get("subsystem_id"), p.path("subsystem_id"), 0, 0xFFFFFFFF));
    }
  }
  g.vbios_version = "00.00.00.00.00";
  if (m.has("vbios_version")) {
    g.vbios_version = read_bounded_string(m.get("vbios_version"), m.path("vbios_version"), kMaxVbios);
  }
  parse_product(g, m);
  if (m.has("samples")) g.samples = parse_samples(m.get("samples"), m.path("samples"));
  return g;
}

}  // namespace gpumeter::sim::parse
