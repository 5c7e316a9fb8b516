// Parsing the profiling (GPM) and NVLink parts of a scenario: `models.<id>.nvlink`,
// `jobs[].profile`, `jobs[].nvlink` and the faults `nvlink_down` and `nvlink_errors`.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "abi/nvml_api.h"
#include "sim/scenario/scenario_parse_parts.h"
#include "sim/scenario/yaml_reader.h"

namespace gpumeter::sim::parse {

namespace {

// nvmlNvlinkVersion_t by the version's name ([H] nvmlNvlinkVersion_t).
constexpr std::pair<std::string_view, unsigned> kNvlinkVersions[] = {{"1.0", 1}, {"2.0", 2}, {"2.2", 3}, {"3.0", 4},
                                                                     {"3.1", 5}, {"4.0", 6}, {"5.0", 7}, {"6.0", 8}};

unsigned read_nvlink_version(const YAML::Node& node, const std::string& path) {
  std::string text = read_string(node, path);
  if (text.find('.') == std::string::npos) text += ".0";
  for (const auto& [name, value] : kNvlinkVersions) {
    if (name == text) return value;
  }
  fail_at(node, path,
          fmt::format("unknown NVLink version '{}' (expected one of: 1.0, 2.0, 2.2, 3.0, 3.1, 4.0, 5.0, 6.0)", text));
}

double read_rate(const MapReader& m, std::string_view key) {
  return static_cast<double>(read_bytes(m.get(key), m.path(key)));
}

}  // namespace

NvlinkSpec parse_nvlink_spec(const YAML::Node& node, const std::string& path) {
  MapReader m(node, path, {"links", "speed_mbps", "version", "tx", "rx"});
  NvlinkSpec n;
  n.links = static_cast<unsigned>(read_unsigned(m.require("links"), m.path("links"), 1, NVML_NVLINK_MAX_LINKS));
  n.speed_mbps = static_cast<unsigned>(read_unsigned(m.require("speed_mbps"), m.path("speed_mbps"), 1, 10'000'000));
  n.version = read_nvlink_version(m.require("version"), m.path("version"));
  const double capacity = static_cast<double>(n.links) * n.speed_mbps * 1e6;
  for (std::string_view key : {"tx", "rx"}) {
    if (!m.has(key)) continue;
    double rate = read_rate(m, key);
    if (rate > capacity) {
      fail_at(m.get(key), m.path(key),
              fmt::format("{} B/s exceeds the links' capacity, {} links of {} MBps", rate, n.links, n.speed_mbps));
    }
    (key == "tx" ? n.tx_bytes_per_second : n.rx_bytes_per_second) = rate;
  }
  return n;
}

JobProfile parse_job_profile(const YAML::Node& node, const std::string& path) {
  MapReader m(node, path, {"sm", "occupancy", "tensor", "dram", "fp64", "fp32", "fp16", "encoder", "decoder"});
  JobProfile p;
  auto read = [&](std::string_view key, double& out) {
    if (m.has(key)) out = read_double(m.get(key), m.path(key), 0, 1);
  };
  read("sm", p.sm);
  read("occupancy", p.occupancy);
  read("tensor", p.tensor);
  read("dram", p.dram);
  read("fp64", p.fp64);
  read("fp32", p.fp32);
  read("fp16", p.fp16);
  read("encoder", p.encoder);
  read("decoder", p.decoder);
  // Tensor and FP pipes work only while an SM does: their activity cannot exceed the SMs'.
  for (auto [key, value] : {std::pair<std::string_view, double>{"tensor", p.tensor},
                            {"fp64", p.fp64},
                            {"fp32", p.fp32},
                            {"fp16", p.fp16}}) {
    if (value > p.sm) {
      fail_at(m.has(key) ? m.get(key) : node, m.path(key),
              fmt::format("{} ({}) exceeds sm ({}): a pipe is active only while its SM is", key, value, p.sm));
    }
  }
  return p;
}

JobNvlink parse_job_nvlink(const Scenario& s, const std::vector<unsigned>& gpus, const YAML::Node& node,
                           const std::string& path) {
  MapReader m(node, path, {"tx", "rx"});
  JobNvlink n;
  if (m.has("tx")) n.tx_bytes_per_second = read_rate(m, "tx");
  if (m.has("rx")) n.rx_bytes_per_second = read_rate(m, "rx");
  for (unsigned g : gpus) {
    const NvlinkSpec& spec = s.model_of(g).nvlink;
    if (spec.links == 0) m.fail(fmt::format("GPU {} has no NVLink", g));
    const double capacity = static_cast<double>(spec.links) * spec.speed_mbps * 1e6;
    if (n.tx_bytes_per_second > capacity || n.rx_bytes_per_second > capacity) {
      m.fail(fmt::format("exceeds the capacity of GPU {}'s links, {} of {} MBps", g, spec.links, spec.speed_mbps));
    }
  }
  return n;
}

bool parse_nvlink_fault(Scenario& s, const std::string& kind, const YAML::Node& node, const std::string& path) {
  if (kind != "nvlink_down" && kind != "nvlink_errors") return false;
  const bool down = kind == "nvlink_down";
  MapReader m = down ? MapReader(node, path, {"kind", "gpu", "link", "at", "duration"})
                     : MapReader(node, path, {"kind", "gpu", "link", "at", "type", "count"});
  if (s.gpus.empty()) m.fail("the scenario has no GPUs");
  NvlinkFault f;
  f.down = down;
  f.gpu = static_cast<unsigned>(read_unsigned(m.require("gpu"), m.path("gpu"), 0, s.gpus.size() - 1));
  const unsigned links = s.model_of(f.gpu).nvlink.links;
  if (links == 0) fail_at(m.get("gpu"), m.path("gpu"), fmt::format("GPU {} has no NVLink", f.gpu));
  f.link = static_cast<unsigned>(read_unsigned(m.require("link"), m.path("link"), 0, links - 1));
  f.at = read_duration(m.require("at"), m.path("at"));
  if (down) {
    if (m.has("duration")) {
      f.duration = read_duration(m.get("duration"), m.path("duration"));
      if (f.duration <= 0) fail_at(m.get("duration"), m.path("duration"), "must be more than 0");
    }
  } else {
    std::string type = read_string(m.require("type"), m.path("type"));
    if (type == "replay") {
      f.type = NvlinkErrorType::replay;
    } else if (type == "recovery") {
      f.type = NvlinkErrorType::recovery;
    } else if (type == "crc") {
      f.type = NvlinkErrorType::crc;
    } else {
      fail_at(m.get("type"), m.path("type"),
              fmt::format("unknown NVLink error type '{}' (expected one of: replay, recovery, crc)", type));
    }
    f.count = read_unsigned(m.require("count"), m.path("count"), 1, 1'000'000'000);
  }
  s.nvlink_faults.push_back(f);
  return true;
}

}  // namespace gpumeter::sim::parse
