// Parsing `faults` (what happens to a GPU or the driver at a time) and `quirks` (driver
// oddities a scenario switches on).

#include <utility>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "abi/nvml_api.h"
#include "sim/scenario/driver.h"
#include "sim/scenario/nvml_functions.h"
#include "sim/scenario/scenario_parse_parts.h"
#include "sim/scenario/yaml_reader.h"

namespace gpumeter::sim::parse {

namespace {

// The NVML version string is "<cuda major>." followed by the driver version.
constexpr std::size_t kMaxDriverVersion = NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE - 4;

constexpr const char* kQuirkKinds =
    "call_error, process_record_layout, garbage_process_records, gpm_non_finite, silent_while_idle, "
    "no_capability, impossible_power_samples, gpm_batch_collapse, active_only_process_samples";

unsigned read_gpu(const Scenario& s, const MapReader& m) {
  if (s.gpus.empty()) m.fail("the scenario has no GPUs");
  return static_cast<unsigned>(read_unsigned(m.require("gpu"), m.path("gpu"), 0, s.gpus.size() - 1));
}

NvmlFunction read_device_function(const YAML::Node& node, const std::string& path) {
  std::string name = read_string(node, path);
  auto fn = nvml_function_from_name(name);
  if (!fn || nvml_function_kind(*fn) != NvmlFunctionKind::device)
    fail_at(node, path, fmt::format("'{}' is not an NVML device function the simulator exports", name));
  return *fn;
}

CallErrorCode read_call_error(const YAML::Node& node, const std::string& path) {
  std::string text = read_string(node, path);
  if (text == "unknown") return CallErrorCode::unknown;
  if (text == "not_supported") return CallErrorCode::not_supported;
  if (text == "no_permission") return CallErrorCode::no_permission;
  if (text == "timeout") return CallErrorCode::timeout;
  fail_at(node, path,
          fmt::format("unknown error '{}' (expected one of: unknown, not_supported, no_permission, timeout)", text));
}

Quirk parse_quirk(const Scenario& s, const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) fail_at(node, path, "expected a mapping with 'kind'");
  const YAML::Node& cnode = node;
  YAML::Node kind_node = cnode["kind"];
  if (!kind_node.IsDefined()) fail_at(node, path, fmt::format("missing required key 'kind' (one of: {})", kQuirkKinds));
  const std::string kind = read_string(kind_node, path + ".kind");
  Quirk q;
  auto reader = [&]() -> MapReader {
    if (kind == "call_error") {
      q.kind = QuirkKind::call_error;
      return MapReader(node, path, {"kind", "gpu", "at", "duration", "call", "error"});
    }
    if (kind == "process_record_layout") {
      q.kind = QuirkKind::process_record_layout;
      return MapReader(node, path, {"kind", "gpu", "at", "duration", "record_bytes"});
    }
    // The kinds that take no key of their own.
    for (auto [name, plain] : {std::pair{"garbage_process_records", QuirkKind::garbage_process_records},
                               std::pair{"gpm_non_finite", QuirkKind::gpm_non_finite},
                               std::pair{"silent_while_idle", QuirkKind::silent_while_idle},
                               std::pair{"no_capability", QuirkKind::no_capability},
                               std::pair{"impossible_power_samples", QuirkKind::impossible_power_samples},
                               std::pair{"gpm_batch_collapse", QuirkKind::gpm_batch_collapse},
                               std::pair{"active_only_process_samples", QuirkKind::active_only_process_samples}}) {
      if (kind != name) continue;
      q.kind = plain;
      return MapReader(node, path, {"kind", "gpu", "at", "duration"});
    }
    fail_at(kind_node, path + ".kind", fmt::format("unknown quirk kind '{}' (expected one of: {})", kind, kQuirkKinds));
  };
  const MapReader m = reader();
  if (m.has("gpu")) q.gpu = read_gpu(s, m);
  if (m.has("at")) q.at = read_duration(m.get("at"), m.path("at"));
  if (m.has("duration")) {
    q.duration = read_duration(m.get("duration"), m.path("duration"));
    if (q.duration <= 0) fail_at(m.get("duration"), m.path("duration"), "must be more than 0");
  }
  if (q.kind == QuirkKind::call_error) {
    q.call = std::string(nvml_function_name(read_device_function(m.require("call"), m.path("call"))));
    q.error = read_call_error(m.require("error"), m.path("error"));
  } else if (q.kind == QuirkKind::process_record_layout) {
    q.record_bytes = static_cast<unsigned>(read_unsigned(m.require("record_bytes"), m.path("record_bytes"), 0, 1024));
    if (q.record_bytes != 32 && q.record_bytes != 16) {
      fail_at(m.get("record_bytes"), m.path("record_bytes"),
              fmt::format("expected 32 (R535 records with usedGpuCcProtectedMemory) or 16 (v1 records), got {}",
                          q.record_bytes));
    }
  }
  return q;
}

// Fails for a fault an AMD GPU cannot have: what `gpumeter sim sysfs` can do to one is lose it
// and hang it (docs/rocm-behaviour.md).
void nvidia_only(const Scenario& s, const MapReader& m, unsigned gpu, const char* why) {
  if (s.is_amd(gpu)) fail_at(m.get("gpu"), m.path("gpu"), fmt::format("GPU {} is an AMD GPU: {}", gpu, why));
}

// `lost` or `unknown_errors` {gpu, at, duration}: a window of the GPU's calls failing.
void parse_window_fault(Scenario& s, const std::string& kind, const YAML::Node& node, const std::string& path) {
  MapReader m(node, path, {"kind", "gpu", "at", "duration"});
  WindowFault f{read_gpu(s, m), read_duration(m.require("at"), m.path("at")),
                read_duration(m.require("duration"), m.path("duration"))};
  if (kind == "unknown_errors") {
    nvidia_only(s, m, f.gpu,
                "unknown_errors is an NVML error window; the amdgpu tree cannot make a sysfs read fail the "
                "way the kernel does");
  }
  if (f.duration <= 0) fail_at(m.get("duration"), m.path("duration"), "must be more than 0");
  (kind == "lost" ? s.lost : s.unknown_errors).push_back(f);
}

// `hang` {gpu, at, seconds, call}: the GPU's calls (or one of them) block for a wall time.
void parse_hang_fault(Scenario& s, const YAML::Node& node, const std::string& path) {
  MapReader m(node, path, {"kind", "gpu", "at", "seconds", "call"});
  HangFault f;
  f.gpu = read_gpu(s, m);
  f.at = read_duration(m.require("at"), m.path("at"));
  f.wall_seconds = read_double(m.require("seconds"), m.path("seconds"), 0.001, 3600);
  if (m.has("call") && s.is_amd(f.gpu)) {
    // On an AMD GPU the one call a hang may name: its KFD process files block instead.
    f.call = read_string(m.get("call"), m.path("call"));
    if (f.call != kAmdProcessHangCall) {
      fail_at(m.get("call"), m.path("call"),
              fmt::format("GPU {} is an AMD GPU: a hang's call can only be {} (its KFD process files block); "
                          "without call, its gpu_metrics and power reads block",
                          f.gpu, kAmdProcessHangCall));
    }
  } else if (m.has("call")) {
    f.call = std::string(nvml_function_name(read_device_function(m.get("call"), m.path("call"))));
  }
  s.hangs.push_back(f);
}

// `xid` {gpu, at, code, mig}: an NVIDIA GPU's Xid event; with `mig`, inside that MIG instance,
// which must exist on the GPU at `at`.
void parse_xid_fault(Scenario& s, const YAML::Node& node, const std::string& path) {
  MapReader m(node, path, {"kind", "gpu", "at", "code", "mig"});
  XidFault f;
  f.gpu = read_gpu(s, m);
  f.at = read_duration(m.require("at"), m.path("at"));
  f.code = static_cast<unsigned>(read_unsigned(m.require("code"), m.path("code"), 1, 65535));
  nvidia_only(s, m, f.gpu, "an Xid is an NVIDIA driver event; amdgpu has none");
  if (m.has("mig")) {
    f.mig = resolve_mig(s, m.get("mig"), m.path("mig"));
    check_mig_event(s, m.get("mig"), m.path("mig"), f.gpu, f.mig, f.at);
  }
  s.xids.push_back(f);
}

// `driver_upgrade` {at, to}: the driver version changes at a time no other upgrade has.
void parse_driver_upgrade(Scenario& s, const YAML::Node& node, const std::string& path) {
  MapReader m(node, path, {"kind", "at", "to"});
  DriverUpgrade u;
  u.at = read_duration(m.require("at"), m.path("at"));
  u.to = read_bounded_string(m.require("to"), m.path("to"), kMaxDriverVersion);
  if (!driver_major(u.to)) {
    fail_at(m.get("to"), m.path("to"), fmt::format("expected a driver version such as 555.42.06, got '{}'", u.to));
  }
  for (const DriverUpgrade& other : s.driver_upgrades) {
    if (other.at == u.at) fail_at(m.get("at"), m.path("at"), "another driver_upgrade happens at the same time");
  }
  s.driver_upgrades.push_back(u);
}

}  // namespace

void parse_quirks(Scenario& s, const YAML::Node& node) {
  if (!node.IsSequence()) fail_at(node, "quirks", "expected a list of quirks");
  for (std::size_t i = 0; i < node.size(); ++i) s.quirks.push_back(parse_quirk(s, node[i], indexed("quirks", i)));
}

void parse_fault(Scenario& s, const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) fail_at(node, path, "expected a mapping with 'kind'");
  const YAML::Node& cnode = node;
  YAML::Node kind_node = cnode["kind"];
  if (!kind_node.IsDefined()) {
    fail_at(node, path,
            "missing required key 'kind' (one of: lost, hang, xid, unknown_errors, driver_reload, "
            "driver_upgrade, nvlink_down, nvlink_errors)");
  }
  std::string kind = read_string(kind_node, path + ".kind");
  if (parse_nvlink_fault(s, kind, node, path)) return;
  if (kind == "lost" || kind == "unknown_errors") {
    parse_window_fault(s, kind, node, path);
  } else if (kind == "hang") {
    parse_hang_fault(s, node, path);
  } else if (kind == "xid") {
    parse_xid_fault(s, node, path);
  } else if (kind == "driver_reload") {
    MapReader m(node, path, {"kind", "at"});
    s.driver_reloads.push_back(read_duration(m.require("at"), m.path("at")));
  } else if (kind == "driver_upgrade") {
    parse_driver_upgrade(s, node, path);
  } else {
    fail_at(kind_node, path + ".kind",
            fmt::format("unknown fault kind '{}' (expected one of: lost, hang, xid, unknown_errors, "
                        "driver_reload, driver_upgrade, nvlink_down, nvlink_errors)",
                        kind));
  }
}

}  // namespace gpumeter::sim::parse
