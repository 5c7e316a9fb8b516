#include "config/config.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <iterator>
#include <limits>
#include <set>

#include "model/owner.h"
#include "attribution/procfs.h"
#include "render/compat.h"
#include "util/duration.h"
#include "util/file_read.h"
#include "util/yaml_reader.h"

namespace gpumeter {

using std::chrono::milliseconds;

std::string KubeletConfig::effective_socket(std::string_view rootfs) const {
  switch (mode) {
    case Mode::kOff:
      return "";
    case Mode::kPath:
      return socket;
    case Mode::kAuto:
      break;
  }
  std::string path(rootfs.empty() ? "/" : rootfs);
  if (path.back() != '/') path += '/';
  path += kDefaultKubeletSocket;
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? path : "";
}

std::string AttributionConfig::slurm_cgroup_root(std::string_view rootfs) const {
  if (slurm_cgroups != "auto") return slurm_cgroups;
  std::string root(rootfs);
  if (!root.empty() && root.back() == '/') root.pop_back();
  return root + "/sys/fs/cgroup";
}

std::string_view to_string(AllocationPolicy policy) {
  switch (policy) {
    case AllocationPolicy::kScheduler:
      return "scheduler";
    case AllocationPolicy::kProcess:
      return "process";
    case AllocationPolicy::kAuto:
      break;
  }
  return "auto";
}

AllocationPolicy effective_allocation(const Config& config, std::string_view kubelet_socket) {
  if (config.ledger.allocation != AllocationPolicy::kAuto) return config.ledger.allocation;
  const bool scheduler_source = !kubelet_socket.empty() || !config.attribution.hpc_job_mapping_dir.empty() ||
                                !config.attribution.slurm_cgroups.empty();
  return scheduler_source ? AllocationPolicy::kScheduler : AllocationPolicy::kProcess;
}

bool LedgerConfig::keeps_label(std::string_view name) const {
  return std::find(labels.begin(), labels.end(), name) != labels.end();
}

namespace {

constexpr std::size_t kMaxConfigBytes = 1 << 20;

// A section that is absent or written with no value ("ledger:") keeps its defaults.
bool present(const YAML::Node& n) { return n.IsDefined() && !n.IsNull(); }

std::string format_ms(milliseconds d) {
  auto ms = d.count();
  if (ms == 0) return "0s";
  if (ms % 86'400'000 == 0) return fmt::format("{}d", ms / 86'400'000);
  if (ms % 3'600'000 == 0) return fmt::format("{}h", ms / 3'600'000);
  if (ms % 60'000 == 0) return fmt::format("{}m", ms / 60'000);
  if (ms % 1000 == 0) return fmt::format("{}s", ms / 1000);
  return fmt::format("{}ms", ms);
}

// The flags' syntax (util/duration.h), so that one duration means the same wherever it is written.
milliseconds read_ms(const YAML::Node& node, std::string_view path, milliseconds min, milliseconds max) {
  const std::string& text = read_scalar(node, path, "a duration");
  auto parsed = parse_duration(text);
  if (!parsed) {
    fail_at(node, path,
            fmt::format("expected a duration such as 500ms, 10s, 1m30s or 1d (units ms, s, m, h, d, w, y), got '{}'",
                        text));
  }
  milliseconds v = *parsed;
  if (v < min || v > max) {
    fail_at(node, path,
            fmt::format("must be between {} and {}, got '{}'", format_ms(min), format_ms(max), node.Scalar()));
  }
  return v;
}

std::string read_absolute_path(const YAML::Node& node, std::string_view path) {
  std::string s = read_string(node, path);
  if (!s.empty() && s.front() != '/') fail_at(node, path, fmt::format("must be an absolute path, got '{}'", s));
  return s;
}

void parse_kubelet(const YAML::Node& node, std::string path, KubeletConfig& k) {
  MapReader m(node, std::move(path), {"socket", "refresh_interval", "timeout", "max_message_size", "resource_names"});
  if (m.has("socket")) {
    std::string s = read_string(m.get("socket"), m.path("socket"));
    if (s == "auto") {
      k.mode = KubeletConfig::Mode::kAuto;
    } else if (s.empty() || s == "off") {
      k.mode = KubeletConfig::Mode::kOff;
    } else if (s.front() == '/') {
      k.mode = KubeletConfig::Mode::kPath;
      k.socket = s;
    } else {
      fail_at(m.get("socket"), m.path("socket"), fmt::format("expected auto, off or an absolute path, got '{}'", s));
    }
  }
  if (m.has("refresh_interval")) {
    k.refresh_interval =
        read_ms(m.get("refresh_interval"), m.path("refresh_interval"), milliseconds(1000), milliseconds(3'600'000));
  }
  if (m.has("timeout")) {
    k.timeout = read_ms(m.get("timeout"), m.path("timeout"), milliseconds(100), milliseconds(60'000));
  }
  if (m.has("max_message_size")) {
    YAML::Node n = m.get("max_message_size");
    std::uint64_t v = read_bytes(n, m.path("max_message_size"));
    if (v < (4ULL << 10) || v > (1ULL << 30)) {
      fail_at(n, m.path("max_message_size"), fmt::format("must be between 4KiB and 1GiB, got '{}'", n.Scalar()));
    }
    k.max_message_size = v;
  }
  if (m.has("resource_names")) {
    YAML::Node n = m.get("resource_names");
    std::string p = m.path("resource_names");
    auto names = read_string_list(n, p);
    if (names.empty()) fail_at(n, p, "must name at least one resource (to turn the kubelet off, set socket: off)");
    std::set<std::string> seen;
    for (std::size_t i = 0; i < names.size(); ++i) {
      const std::string& r = names[i];
      bool bad = r.empty() || std::any_of(r.begin(), r.end(), [](char c) {
                   return c == ' ' || c == '\t' || static_cast<unsigned char>(c) < 0x20;
                 });
      if (bad) fail_at(n[i], indexed(p, i), fmt::format("'{}' is not a resource name such as nvidia.com/gpu", r));
      if (!seen.insert(r).second) fail_at(n[i], indexed(p, i), fmt::format("duplicate resource name '{}'", r));
    }
    k.resource_names = std::move(names);
  }
}

void parse_attribution(const YAML::Node& node, AttributionConfig& a) {
  MapReader m(node, "attribution",
              {"environment", "hpc_job_mapping_dir", "kubelet", "slurm_cgroups", "slurm_refresh_interval"});
  if (m.has("slurm_refresh_interval")) {
    a.slurm_refresh_interval = read_ms(m.get("slurm_refresh_interval"), m.path("slurm_refresh_interval"),
                                       milliseconds(1000), milliseconds(3'600'000));
  }
  if (m.has("slurm_cgroups")) {
    const std::string s = read_string(m.get("slurm_cgroups"), m.path("slurm_cgroups"));
    if (s == "off" || s.empty()) {
      a.slurm_cgroups.clear();
    } else if (s == "auto") {
      a.slurm_cgroups = "auto";
    } else {
      a.slurm_cgroups = read_absolute_path(m.get("slurm_cgroups"), m.path("slurm_cgroups"));
    }
  }
  if (m.has("environment")) {
    YAML::Node n = m.get("environment");
    std::string p = m.path("environment");
    auto names = read_string_list(n, p);
    std::set<std::string> seen;
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (!valid_env_name(names[i])) {
        fail_at(n[i], indexed(p, i),
                fmt::format("'{}' is not an environment variable name (letters, digits and _, not starting "
                            "with a digit)",
                            names[i]));
      }
      if (!seen.insert(names[i]).second) fail_at(n[i], indexed(p, i), fmt::format("duplicate name '{}'", names[i]));
    }
    a.environment = std::move(names);
  }
  if (m.has("hpc_job_mapping_dir")) {
    a.hpc_job_mapping_dir = read_absolute_path(m.get("hpc_job_mapping_dir"), m.path("hpc_job_mapping_dir"));
  }
  if (present(m.get("kubelet"))) parse_kubelet(m.get("kubelet"), m.path("kubelet"), a.kubelet);
}

void parse_project(const YAML::Node& node, const AttributionConfig& attribution, ProjectConfig& pc) {
  MapReader m(node, "project", {"default", "rules"});
  if (m.has("default")) {
    pc.default_project = read_string(m.get("default"), m.path("default"));
    if (pc.default_project.size() > kMaxLabelValueBytes) {
      fail_at(
          m.get("default"), m.path("default"),
          fmt::format("{} bytes long; a label value is at most {}", pc.default_project.size(), kMaxLabelValueBytes));
    }
  }
  std::vector<ProjectRule> rules;
  YAML::Node list = m.get("rules");
  if (present(list)) {
    std::string p = m.path("rules");
    if (!list.IsSequence()) fail_at(list, p, "expected a list of rules such as [{source: user}]");
    for (std::size_t i = 0; i < list.size(); ++i) {
      MapReader r(list[i], indexed(p, i), {"source", "match", "project", "map"});
      ProjectRuleSpec spec;
      spec.source = read_string(r.require("source"), r.path("source"));
      if (r.has("match")) spec.match = read_string(r.get("match"), r.path("match"));
      if (r.has("project")) spec.project = read_string(r.get("project"), r.path("project"));
      if (r.has("map")) {
        std::map<std::string, std::string> table;
        for (const MapEntry& e : read_entries(r.get("map"), r.path("map"))) {
          table.emplace(e.key, read_string(e.value, e.path));
        }
        spec.map = std::move(table);
      }
      std::string_view variable = attribute_env_variable(spec.source);
      if (!variable.empty() && valid_env_name(variable) &&
          std::find(attribution.environment.begin(), attribution.environment.end(), variable) ==
              attribution.environment.end()) {
        fail_at(r.get("source"), r.path("source"),
                fmt::format("'{}' reads the environment variable {}, which attribution.environment does not "
                            "allow; add it there",
                            spec.source, variable));
      }
      pc.rules.push_back(spec);
      auto rule = ProjectRule::compile(std::move(spec));
      if (!rule) {
        std::string_view field;
        switch (static_cast<RuleField>(rule.error().code)) {
          case RuleField::kSource:
            field = "source";
            break;
          case RuleField::kMatch:
            field = "match";
            break;
          case RuleField::kProject:
            field = "project";
            break;
          case RuleField::kMap:
            field = "map";
            break;
        }
        YAML::Node at = r.get(field);
        fail_at(at.IsDefined() ? at : r.node(), r.path(field), rule.error().message);
      }
      rules.push_back(std::move(*rule));
    }
  }
  pc.resolver = ProjectResolver(std::move(rules), pc.default_project);
}

void parse_ledger(const YAML::Node& node, LedgerConfig& l) {
  MapReader m(node, "ledger", {"allocation", "checkpoint_interval", "labels", "owner_retention", "idle_power_watts"});
  if (m.has("allocation")) {
    const std::string s = read_string(m.get("allocation"), m.path("allocation"));
    if (s == "scheduler") {
      l.allocation = AllocationPolicy::kScheduler;
    } else if (s == "process") {
      l.allocation = AllocationPolicy::kProcess;
    } else if (s == "auto") {
      l.allocation = AllocationPolicy::kAuto;
    } else {
      fail_at(m.get("allocation"), m.path("allocation"),
              fmt::format("unknown allocation policy '{}' (expected scheduler, process or auto)", s));
    }
  }
  if (m.has("checkpoint_interval")) {
    l.checkpoint_interval = read_ms(m.get("checkpoint_interval"), m.path("checkpoint_interval"), milliseconds(1000),
                                    milliseconds(3'600'000));
  }
  if (m.has("labels")) {
    YAML::Node n = m.get("labels");
    std::string p = m.path("labels");
    auto names = read_string_list(n, p);
    std::set<std::string> seen;
    for (std::size_t i = 0; i < names.size(); ++i) {
      auto known = std::find(std::begin(kOwnerLabelNames), std::end(kOwnerLabelNames), names[i]);
      if (known == std::end(kOwnerLabelNames)) {
        fail_at(n[i], indexed(p, i),
                fmt::format("unknown owner label '{}' (expected some of: project, user, namespace, pod, "
                            "container, hpc_job)",
                            names[i]));
      }
      if (!seen.insert(names[i]).second) fail_at(n[i], indexed(p, i), fmt::format("duplicate label '{}'", names[i]));
    }
    if (seen.count("project") == 0) {
      fail_at(n, p, "must include project (the ledger's __idle__ and __unattributed__ owners are projects)");
    }
    l.labels.clear();
    for (const char* name : kOwnerLabelNames) {
      if (seen.count(name) != 0) l.labels.emplace_back(name);
    }
  }
  if (m.has("owner_retention")) {
    l.owner_retention = read_ms(m.get("owner_retention"), m.path("owner_retention"), milliseconds(60'000),
                                milliseconds(400LL * 24 * 3'600'000));
  }
  if (m.has("idle_power_watts")) {
    for (const MapEntry& e : read_entries(m.get("idle_power_watts"), m.path("idle_power_watts"))) {
      if (e.key.empty()) fail_at(e.key_node, m.path("idle_power_watts"), "a model name must not be empty");
      double w =
          read_double(e.value, e.path, std::numeric_limits<double>::lowest(), std::numeric_limits<double>::max());
      if (w <= 0) fail_at(e.value, e.path, fmt::format("must be more than 0 watts, got '{}'", e.value.Scalar()));
      if (w > 100'000)
        fail_at(e.value, e.path, fmt::format("must be at most 100000 watts, got '{}'", e.value.Scalar()));
      l.idle_power_watts.emplace(e.key, w);
    }
  }
}

void parse_processes(const YAML::Node& node, ProcessesConfig& p) {
  MapReader m(node, "processes", {"max_series", "retention"});
  if (m.has("max_series")) {
    p.max_series = static_cast<unsigned>(read_unsigned(m.get("max_series"), m.path("max_series"), 0, 100'000));
  }
  if (m.has("retention")) {
    p.retention = read_ms(m.get("retention"), m.path("retention"), milliseconds(0), milliseconds(24 * 3'600'000));
  }
}

void parse_exposition(const YAML::Node& node, ExpositionConfig& e) {
  MapReader m(node, "exposition", {"max_series"});
  if (m.has("max_series")) {
    e.max_series = read_unsigned(m.get("max_series"), m.path("max_series"), 0, 10'000'000);
    if (e.max_series > 0 && e.max_series < 100) {
      fail_at(m.get("max_series"), m.path("max_series"),
              fmt::format("must be 0 (no cap) or at least 100, got {}", e.max_series));
    }
  }
}

bool read_bool(const YAML::Node& node, std::string_view path) {
  if (node.IsScalar()) {
    if (node.Scalar() == "true") return true;
    if (node.Scalar() == "false") return false;
  }
  fail_at(node, path,
          fmt::format("expected true or false, got '{}'", node.IsScalar() ? node.Scalar() : "a collection"));
  return false;
}

void parse_collectors(const YAML::Node& node, CollectorsConfig& out) {
  static_assert(kCollectorCount == 10, "list every collector below");
  MapReader m(node, "collectors",
              {"device", "clocks", "ecc", "pcie", "nvlink", "profiling", "mig", "processes", "ledger", "events"});
  for (const auto& c : kCollectors) {
    if (!m.has(c.name)) continue;
    const std::string path = m.path(c.name);
    YAML::Node n = m.get(c.name);
    if (!present(n)) continue;
    // The others run with the collections they ride on: no interval of their own.
    MapReader e = c.per_device ? MapReader(n, path, {"enabled", "interval"}) : MapReader(n, path, {"enabled"});
    CollectorSettings& settings = out[static_cast<size_t>(c.id)];
    if (e.has("enabled")) settings.enabled = read_bool(e.get("enabled"), e.path("enabled"));
    if (e.has("interval")) {
      settings.interval = read_ms(e.get("interval"), e.path("interval"), milliseconds(0), milliseconds(3'600'000));
    }
  }
}

void parse_compat(const YAML::Node& node, CompatConfig& c) {
  MapReader m(node, "compat", {"sets", "collectors", "hostname"});
  if (m.has("sets")) {
    YAML::Node n = m.get("sets");
    std::string p = m.path("sets");
    auto names = read_string_list(n, p);
    std::set<std::string> seen;
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (auto set = parse_compat_set(names[i]); !set) fail_at(n[i], indexed(p, i), set.error().message);
      if (!seen.insert(names[i]).second) fail_at(n[i], indexed(p, i), fmt::format("duplicate set '{}'", names[i]));
    }
    c.sets = std::move(names);
  }
  if (m.has("collectors")) c.collectors = read_absolute_path(m.get("collectors"), m.path("collectors"));
  if (m.has("hostname")) {
    c.hostname_set = true;
    c.hostname = read_string(m.get("hostname"), m.path("hostname"));
    if (c.hostname.size() > kMaxLabelValueBytes) {
      fail_at(m.get("hostname"), m.path("hostname"),
              fmt::format("{} bytes long; a label value is at most {}", c.hostname.size(), kMaxLabelValueBytes));
    }
  }
}

}  // namespace

Result<Config> parse_config(std::string_view yaml, std::string source_name) {
  try {
    std::vector<YAML::Node> docs = load_documents(yaml);
    Config c;
    if (docs.size() > 1) fail_at(docs[1], "", fmt::format("expected one YAML document, found {}", docs.size()));
    if (docs.empty() || docs[0].IsNull()) return c;
    const YAML::Node& root = docs[0];
    if (!root.IsMap()) {
      fail_at(root, "",
              "expected a mapping with some of the keys attribution, project, ledger, processes, exposition, "
              "compat, collectors");
    }
    MapReader top(root, "", {"attribution", "project", "ledger", "processes", "exposition", "compat", "collectors"});
    if (present(top.get("attribution"))) parse_attribution(top.get("attribution"), c.attribution);
    if (present(top.get("project"))) parse_project(top.get("project"), c.attribution, c.project);
    if (present(top.get("ledger"))) parse_ledger(top.get("ledger"), c.ledger);
    if (present(top.get("processes"))) parse_processes(top.get("processes"), c.processes);
    if (present(top.get("exposition"))) parse_exposition(top.get("exposition"), c.exposition);
    if (present(top.get("compat"))) parse_compat(top.get("compat"), c.compat);
    if (present(top.get("collectors"))) parse_collectors(top.get("collectors"), c.collectors);
    return c;
  } catch (const YamlError& e) {
    return to_error(source_name, e);
  } catch (const YAML::Exception& e) {
    return to_error(source_name, e);
  }
}

Result<std::string> read_config_file(const std::string& path) {
  auto text = read_regular_file(path, {.max_bytes = kMaxConfigBytes});
  if (!text)
    return Error{text.error().code, fmt::format("{}: cannot read the config file: {}", path, text.error().message)};
  return text;
}

Result<Config> load_config(const std::string& path) {
  auto text = read_config_file(path);
  if (!text) return text.error();
  return parse_config(*text, path);
}

}  // namespace gpumeter
