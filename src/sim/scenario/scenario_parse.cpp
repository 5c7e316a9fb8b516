#include "sim/scenario/scenario_parse.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "abi/nvml_api.h"
#include "sim/scenario/driver.h"
#include "sim/scenario/identifiers.h"
#include "sim/scenario/scenario_parse_parts.h"
#include "sim/scenario/units.h"
#include "sim/scenario/yaml_reader.h"

namespace gpumeter::sim {

std::string parse::read_bounded_string(const YAML::Node& node, std::string_view path, std::size_t max_len) {
  std::string s = read_string(node, path);
  if (s.empty()) fail_at(node, path, "must not be empty");
  if (s.size() > max_len) fail_at(node, path, fmt::format("must be at most {} characters", max_len));
  return s;
}

namespace {

using parse::read_bounded_string;

constexpr std::uint64_t kMaxPid = 4194304;  // Linux pid_max limit
// String lengths that fit NVML's buffers with the terminating NUL.
constexpr std::size_t kMaxUuid = NVML_DEVICE_UUID_V2_BUFFER_SIZE - 1;
constexpr std::size_t kMaxSerial = NVML_DEVICE_SERIAL_BUFFER_SIZE - 1;
// The NVML version string is "<cuda major>." followed by the driver version.
constexpr std::size_t kMaxDriverVersion = NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE - 4;

std::size_t model_index(const Scenario& s, const YAML::Node& node, const std::string& path) {
  std::string id = read_string(node, path);
  for (std::size_t i = 0; i < s.models.size(); ++i) {
    if (s.models[i].id == id) return i;
  }
  std::string known;
  for (const auto& m : s.models) known += fmt::format("{}{}", known.empty() ? "" : ", ", m.id);
  fail_at(node, path, fmt::format("unknown model '{}' (models: {})", id, known));
}

void parse_gpus(Scenario& s, const YAML::Node& node, const std::string& uuid_seed) {
  const std::string path = "gpus";
  if (node.IsMap()) {
    MapReader m(node, path, {"count", "model"});
    auto count = read_unsigned(m.require("count"), m.path("count"), 0, kMaxGpus);
    std::size_t model = model_index(s, m.require("model"), m.path("model"));
    for (unsigned i = 0; i < count; ++i) s.gpus.push_back(GpuSpec{model, {}, {}, {}});
  } else if (node.IsSequence()) {
    if (node.size() > kMaxGpus) fail_at(node, path, fmt::format("at most {} GPUs are supported", kMaxGpus));
    for (std::size_t i = 0; i < node.size(); ++i) {
      MapReader m(node[i], indexed(path, i), {"model", "uuid", "serial", "pci_bus_id"});
      GpuSpec g;
      g.model = model_index(s, m.require("model"), m.path("model"));
      if (m.has("uuid")) g.uuid = read_bounded_string(m.get("uuid"), m.path("uuid"), kMaxUuid);
      if (m.has("serial")) g.serial = read_bounded_string(m.get("serial"), m.path("serial"), kMaxSerial);
      if (m.has("pci_bus_id")) {
        std::string text = read_string(m.get("pci_bus_id"), m.path("pci_bus_id"));
        auto a = parse_pci_bus_id(text);
        if (!a) {
          fail_at(m.get("pci_bus_id"), m.path("pci_bus_id"),
                  fmt::format("expected a PCI bus id such as 00000000:18:00.0, got '{}'", text));
        }
        g.pci = *a;
      } else {
        g.pci = default_pci_address(static_cast<unsigned>(i));
      }
      s.gpus.push_back(g);
    }
  } else {
    fail_at(node, path, "expected a list of GPUs or a mapping {count, model}");
  }

  std::map<std::string, std::size_t> uuids, serials, buses;
  for (std::size_t i = 0; i < s.gpus.size(); ++i) {
    GpuSpec& g = s.gpus[i];
    auto idx = static_cast<unsigned>(i);
    if (g.uuid.empty()) g.uuid = default_uuid(uuid_seed, idx);
    if (g.serial.empty()) g.serial = default_serial(uuid_seed, idx);
    if (node.IsMap()) g.pci = default_pci_address(idx);
    const YAML::Node where = node.IsSequence() ? node[i] : node;
    if (!uuids.emplace(g.uuid, i).second) {
      fail_at(where, indexed(path, i), fmt::format("uuid {} is also used by gpus[{}]", g.uuid, uuids[g.uuid]));
    }
    if (!serials.emplace(g.serial, i).second) {
      fail_at(where, indexed(path, i), fmt::format("serial {} is also used by gpus[{}]", g.serial, serials[g.serial]));
    }
    std::string bus = format_pci_bus_id(g.pci);
    if (!buses.emplace(bus, i).second) {
      fail_at(where, indexed(path, i), fmt::format("pci_bus_id {} is also used by gpus[{}]", bus, buses[bus]));
    }
  }
}

// `pattern: square` {high, low, period, duty, phase}.
SquarePattern parse_square(const YAML::Node& node, const std::string& path) {
  MapReader m(node, path, {"pattern", "high", "low", "period", "duty", "phase"});
  SquarePattern sq;
  sq.high = read_ratio_percent(m.require("high"), m.path("high"));
  if (m.has("low")) sq.low = read_ratio_percent(m.get("low"), m.path("low"));
  sq.period = read_duration(m.require("period"), m.path("period"));
  if (sq.period <= 0) fail_at(m.get("period"), m.path("period"), "must be more than 0");
  sq.high_time = sq.period / 2;
  if (m.has("duty")) {
    std::string text = read_string(m.get("duty"), m.path("duty"));
    auto high_time = scale_decimal(text, static_cast<std::uint64_t>(sq.period));
    if (!high_time || *high_time > static_cast<std::uint64_t>(sq.period)) {
      fail_at(
          m.get("duty"), m.path("duty"),
          fmt::format("expected a ratio from 0 to 1 that splits the period into whole microseconds, got '{}'", text));
    }
    sq.high_time = static_cast<Micros>(*high_time);
  }
  if (m.has("phase")) sq.phase = read_duration(m.get("phase"), m.path("phase")) % sq.period;
  return sq;
}

// `pattern: ramp` {from, to, over, step}.
RampPattern parse_ramp(const YAML::Node& node, const std::string& path) {
  MapReader m(node, path, {"pattern", "from", "to", "over", "step"});
  RampPattern r;
  r.from = read_ratio_percent(m.require("from"), m.path("from"));
  r.to = read_ratio_percent(m.require("to"), m.path("to"));
  r.over = read_duration(m.require("over"), m.path("over"));
  if (r.over <= 0) fail_at(m.get("over"), m.path("over"), "must be more than 0");
  if (m.has("step")) {
    r.step = read_duration(m.get("step"), m.path("step"));
    if (r.step <= 0) fail_at(m.get("step"), m.path("step"), "must be more than 0");
  }
  return r;
}

// `pattern: trace` {points}: [time, ratio] pairs at strictly increasing times.
TracePattern parse_trace(const YAML::Node& node, const std::string& path) {
  MapReader m(node, path, {"pattern", "points"});
  YAML::Node points = m.require("points");
  std::string ppath = m.path("points");
  if (!points.IsSequence() || points.size() == 0) fail_at(points, ppath, "expected a non-empty list of [time, ratio]");
  TracePattern tr;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const YAML::Node pt = points[i];
    std::string ip = indexed(ppath, i);
    if (!pt.IsSequence() || pt.size() != 2) fail_at(pt, ip, "expected a pair [time, ratio]");
    Micros t = read_duration(pt[0], ip + "[0]");
    int u = read_ratio_percent(pt[1], ip + "[1]");
    if (!tr.points.empty() && t <= tr.points.back().first) {
      fail_at(pt[0], ip + "[0]", "times must increase strictly from point to point");
    }
    tr.points.emplace_back(t, u);
  }
  return tr;
}

Pattern parse_pattern(const YAML::Node& node, const std::string& path) {
  if (node.IsScalar()) return ConstantPattern{read_ratio_percent(node, path)};
  if (!node.IsMap()) fail_at(node, path, "expected a ratio such as 0.9 or a mapping with 'pattern'");
  const YAML::Node& cnode = node;
  YAML::Node kind_node = cnode["pattern"];
  if (!kind_node.IsDefined()) {
    fail_at(node, path, "missing required key 'pattern' (one of: constant, square, ramp, trace)");
  }
  std::string kind = read_string(kind_node, path + ".pattern");
  if (kind == "constant") {
    MapReader m(node, path, {"pattern", "value"});
    return ConstantPattern{read_ratio_percent(m.require("value"), m.path("value"))};
  }
  if (kind == "square") return parse_square(node, path);
  if (kind == "ramp") return parse_ramp(node, path);
  if (kind == "trace") return parse_trace(node, path);
  fail_at(kind_node, path + ".pattern",
          fmt::format("unknown pattern '{}' (expected one of: constant, square, ramp, trace)", kind));
}

// Kubernetes object names, as the API server validates them: a DNS label (RFC 1123) for
// namespaces and containers, a DNS subdomain for pods.
bool dns_label(std::string_view s, std::size_t max_len) {
  if (s.empty() || s.size() > max_len) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

bool dns_subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t dot = s.find('.', start);
    std::string_view label = s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (!dns_label(label, 63)) return false;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return true;
}

KubernetesRef parse_kubernetes(const YAML::Node& node, const std::string& path) {
  MapReader m(node, path, {"namespace", "pod", "container"});
  KubernetesRef k;
  k.namespace_ = read_string(m.require("namespace"), m.path("namespace"));
  k.pod = read_string(m.require("pod"), m.path("pod"));
  k.container = read_string(m.require("container"), m.path("container"));
  if (!dns_label(k.namespace_, 63)) {
    fail_at(m.get("namespace"), m.path("namespace"),
            fmt::format("'{}' is not a Kubernetes namespace name (lowercase letters, digits and '-', "
                        "at most 63, starting and ending with a letter or digit)",
                        k.namespace_));
  }
  if (!dns_subdomain(k.pod)) {
    fail_at(m.get("pod"), m.path("pod"),
            fmt::format("'{}' is not a Kubernetes pod name (lowercase letters, digits, '-' and '.', "
                        "at most 253)",
                        k.pod));
  }
  if (!dns_label(k.container, 63)) {
    fail_at(m.get("container"), m.path("container"),
            fmt::format("'{}' is not a Kubernetes container name (lowercase letters, digits and '-', "
                        "at most 63, starting and ending with a letter or digit)",
                        k.container));
  }
  return k;
}

// `users: {alice: 2050}`: user names as useradd accepts them, so each makes a valid
// /etc/passwd line. root (uid 0) is always written and cannot be redefined.
void parse_users(Scenario& s, const YAML::Node& node) {
  const std::string path = "users";
  if (!node.IsMap()) fail_at(node, path, "expected a mapping of user names to uids, e.g. {alice: 2050}");
  std::map<std::string, std::string> names;  // name -> path, for messages
  std::map<unsigned, std::string> uids;      // uid -> name
  for (const auto& kv : node) {
    const std::string name = read_string(kv.first, path);
    const std::string npath = path + "." + name;
    bool valid = !name.empty() && name.size() <= 32 && ((name[0] >= 'a' && name[0] <= 'z') || name[0] == '_');
    for (char c : name) {
      valid = valid && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.');
    }
    if (!valid) {
      fail_at(kv.first, path,
              fmt::format("'{}' is not a valid user name (a lowercase letter or '_', then lowercase letters, "
                          "digits, '_', '-' or '.', at most 32 characters)",
                          name));
    }
    if (name == "root") fail_at(kv.first, path, "'root' (uid 0) is always present and cannot be redefined");
    if (!names.emplace(name, npath).second) fail_at(kv.first, path, fmt::format("duplicate user '{}'", name));
    auto uid = static_cast<unsigned>(read_unsigned(kv.second, npath, 0, 4294967294U));
    if (uid == 0) fail_at(kv.second, npath, "uid 0 is root's, which is always present");
    if (auto it = uids.find(uid); it != uids.end()) {
      fail_at(kv.second, npath, fmt::format("uid {} is also used by user '{}'", uid, it->second));
    }
    uids.emplace(uid, name);
    s.users.emplace_back(name, uid);
  }
}

// A job's `gpus`: distinct indices of the scenario's GPUs.
void parse_job_gpus(Job& j, const MapReader& m, std::size_t gpu_count) {
  YAML::Node gpus = m.require("gpus");
  if (!gpus.IsSequence() || gpus.size() == 0) fail_at(gpus, m.path("gpus"), "expected a non-empty list of GPU indices");
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    std::string gp = indexed(m.path("gpus"), i);
    if (gpu_count == 0) fail_at(gpus[i], gp, "the scenario has no GPUs");
    auto g = static_cast<unsigned>(read_unsigned(gpus[i], gp, 0, gpu_count - 1));
    if (std::find(j.gpus.begin(), j.gpus.end(), g) != j.gpus.end()) {
      fail_at(gpus[i], gp, fmt::format("GPU {} is listed twice", g));
    }
    j.gpus.push_back(g);
  }
}

// A job's `pid` (one process on all its GPUs) or `pids` (one per GPU), after its gpus.
void parse_job_pids(Job& j, const MapReader& m) {
  if (m.has("pid") == m.has("pids")) m.fail("needs exactly one of 'pid' (one process) or 'pids' (one per GPU)");
  if (m.has("pid")) {
    auto pid = static_cast<unsigned>(read_unsigned(m.get("pid"), m.path("pid"), 1, kMaxPid));
    j.pids.assign(j.gpus.size(), pid);
    return;
  }
  YAML::Node pids = m.get("pids");
  if (!pids.IsSequence() || pids.size() != j.gpus.size()) {
    fail_at(pids, m.path("pids"), fmt::format("expected a list of {} pids, one per entry of gpus", j.gpus.size()));
  }
  for (std::size_t i = 0; i < pids.size(); ++i) {
    j.pids.push_back(static_cast<unsigned>(read_unsigned(pids[i], indexed(m.path("pids"), i), 1, kMaxPid)));
  }
}

// A job's `env`: its processes' environment, variable names once each.
void parse_job_env(Job& j, const MapReader& m) {
  YAML::Node env = m.get("env");
  if (!env.IsMap()) fail_at(env, m.path("env"), "expected a mapping of variable names to values");
  for (const auto& kv : env) {
    std::string key = read_string(kv.first, m.path("env"));
    if (key.empty() || key.find('=') != std::string::npos || key.find('\0') != std::string::npos) {
      fail_at(kv.first, m.path("env"), fmt::format("'{}' is not a valid variable name", key));
    }
    for (const auto& [seen, value] : j.env) {
      if (seen == key) fail_at(kv.first, m.path("env"), fmt::format("duplicate key '{}'", key));
    }
    std::string value = read_string(kv.second, m.path("env") + "." + key);
    if (value.find('\0') != std::string::npos)
      fail_at(kv.second, m.path("env") + "." + key, "must not contain a NUL character");
    j.env.emplace_back(key, std::move(value));
  }
}

// A job's `client`: compute, or graphics on AMD GPUs only.
void parse_job_client(Job& j, const MapReader& m, const Scenario& s) {
  const std::string client = read_string(m.get("client"), m.path("client"));
  if (client != "compute" && client != "graphics") {
    fail_at(m.get("client"), m.path("client"), fmt::format("must be compute or graphics, got '{}'", client));
  }
  j.graphics = client == "graphics";
  for (unsigned g : j.gpus) {
    if (j.graphics && s.model_of(g).vendor != "amd") {
      fail_at(m.get("client"), m.path("client"),
              fmt::format("a graphics client is modelled on AMD GPUs only (DRM fdinfo); GPU {} is {}", g,
                          s.model_of(g).vendor));
    }
  }
}

Job parse_job(const YAML::Node& node, const std::string& path, const Scenario& s) {
  MapReader m(node, path,
              {"name", "start", "end", "gpus", "pid", "pids", "uid", "cgroup", "cgroup_version", "kubernetes", "env",
               "memory", "utilization", "allocation", "mig", "profile", "nvlink", "client"});
  Job j;
  j.name = read_bounded_string(m.require("name"), m.path("name"), 256);
  if (m.has("start")) j.start = read_duration(m.get("start"), m.path("start"));
  if (m.has("end")) {
    j.end = read_duration(m.get("end"), m.path("end"));
    if (j.end <= j.start) fail_at(m.get("end"), m.path("end"), "must be later than start");
  }
  parse_job_gpus(j, m, s.gpus.size());
  parse_job_pids(j, m);
  if (m.has("uid")) j.uid = static_cast<unsigned>(read_unsigned(m.get("uid"), m.path("uid"), 0, 4294967294U));
  if (m.has("cgroup")) {
    j.cgroup = read_string(m.get("cgroup"), m.path("cgroup"));
    if (!j.cgroup.empty() && j.cgroup.front() != '/') fail_at(m.get("cgroup"), m.path("cgroup"), "must start with '/'");
  }
  if (m.has("cgroup_version")) {
    j.cgroup_version = static_cast<int>(read_unsigned(m.get("cgroup_version"), m.path("cgroup_version"), 1, 2));
  }
  if (m.has("kubernetes")) j.kubernetes = parse_kubernetes(m.get("kubernetes"), m.path("kubernetes"));
  if (m.has("env")) parse_job_env(j, m);
  if (m.has("memory")) j.memory_bytes = read_bytes(m.get("memory"), m.path("memory"));
  j.utilization = parse_pattern(m.require("utilization"), m.path("utilization"));
  if (m.has("allocation")) j.allocation = parse::resolve_allocation(s, m.get("allocation"), m.path("allocation"));
  if (m.has("mig")) j.mig = parse::resolve_mig(s, m.get("mig"), m.path("mig"));
  if (m.has("profile")) j.profile = parse::parse_job_profile(m.get("profile"), m.path("profile"));
  if (m.has("nvlink")) j.nvlink = parse::parse_job_nvlink(s, j.gpus, m.get("nvlink"), m.path("nvlink"));
  if (m.has("client")) parse_job_client(j, m, s);
  return j;
}

int parse_cuda_version(const YAML::Node& node, const std::string& path) {
  std::string text = read_string(node, path);
  std::size_t dot = text.find('.');
  if (dot == std::string::npos) {
    auto v = parse_unsigned(text);
    if (v && *v >= 1000 && *v < 1000000) return static_cast<int>(*v);
  } else {
    auto major = parse_unsigned(text.substr(0, dot));
    auto minor = parse_unsigned(text.substr(dot + 1));
    if (major && minor && *major < 1000 && *minor < 100) return static_cast<int>(*major * 1000 + *minor * 10);
  }
  fail_at(node, path, fmt::format("expected a CUDA version such as 12.4 or 12040, got '{}'", text));
}

Micros job_end(const Scenario& s, const Job& j) { return std::min(j.end, s.duration); }

// Memory that the jobs present at once hold on a GPU must fit in it, or readings go negative.
void check_memory(const Scenario& s, const std::vector<YAML::Node>& job_nodes) {
  for (unsigned g = 0; g < s.gpus.size(); ++g) {
    const GpuModelSpec& model = s.model_of(g);
    std::uint64_t capacity = model.memory_total_bytes - model.memory_reserved_bytes;
    struct Edge {
      Micros t;
      int delta;  // -1 end, +1 start: ends sort first at equal times
      std::size_t job;
    };
    std::vector<Edge> edges;
    for (std::size_t j = 0; j < s.jobs.size(); ++j) {
      const Job& job = s.jobs[j];
      if (std::find(job.gpus.begin(), job.gpus.end(), g) == job.gpus.end()) continue;
      if (job.start >= job_end(s, job)) continue;
      edges.push_back({job.start, +1, j});
      edges.push_back({job_end(s, job), -1, j});
    }
    std::sort(edges.begin(), edges.end(),
              [](const Edge& a, const Edge& b) { return a.t != b.t ? a.t < b.t : a.delta < b.delta; });
    std::uint64_t used = 0;
    for (const Edge& e : edges) {
      std::uint64_t mem = s.jobs[e.job].memory_bytes;
      if (e.delta < 0) {
        used -= mem;
        continue;
      }
      used += mem;
      if (used > capacity) {
        fail_at(job_nodes[e.job], indexed("jobs", e.job),
                fmt::format("jobs on GPU {} would hold {} bytes at {} s, more than its {} bytes", g, used,
                            to_seconds(e.t), capacity));
      }
    }
  }
}

// Two jobs that run at once must not share a pid: the agent would see one process.
void check_pids(const Scenario& s, const std::vector<YAML::Node>& job_nodes) {
  for (std::size_t b = 0; b < s.jobs.size(); ++b) {
    for (std::size_t a = 0; a < b; ++a) {
      const Job& ja = s.jobs[a];
      const Job& jb = s.jobs[b];
      if (std::max(ja.start, jb.start) >= std::min(job_end(s, ja), job_end(s, jb))) continue;
      for (unsigned pid : jb.pids) {
        if (std::find(ja.pids.begin(), ja.pids.end(), pid) != ja.pids.end()) {
          fail_at(job_nodes[b], indexed("jobs", b),
                  fmt::format("pid {} is also used by job '{}' (jobs[{}]) at the same time", pid, ja.name, a));
        }
      }
    }
  }
}

// The root's settings: versions, time scale and duration; returns `uuid_seed` ("" if absent).
std::string parse_settings(Scenario& s, const MapReader& m) {
  s.driver_version = "550.90.07";
  s.cuda_driver_version = 12040;
  if (m.has("description")) (void)read_string(m.get("description"), "description");
  if (m.has("driver_version")) {
    s.driver_version = read_bounded_string(m.get("driver_version"), "driver_version", kMaxDriverVersion);
    if (!driver_major(s.driver_version)) {
      fail_at(m.get("driver_version"), "driver_version",
              fmt::format("expected a driver version such as 550.90.07, got '{}'", s.driver_version));
    }
  }
  if (m.has("amdgpu_version")) {
    s.amdgpu_version = read_bounded_string(m.get("amdgpu_version"), "amdgpu_version", kMaxDriverVersion);
  }
  if (m.has("cuda_driver_version"))
    s.cuda_driver_version = parse_cuda_version(m.get("cuda_driver_version"), "cuda_driver_version");
  if (m.has("time_scale")) s.time_scale = read_double(m.get("time_scale"), "time_scale", 1e-6, 1e6);
  if (m.has("duration")) {
    s.duration = read_duration(m.get("duration"), "duration");
    if (s.duration <= 0) fail_at(m.get("duration"), "duration", "must be more than 0");
  }
  if (m.has("vgpu_license")) {
    const std::string v = read_string(m.get("vgpu_license"), "vgpu_license");
    if (v != "licensed" && v != "unlicensed") {
      fail_at(m.get("vgpu_license"), "vgpu_license",
              fmt::format("unknown licence state '{}' (expected one of: licensed, unlicensed)", v));
    }
    s.vgpu_license = v == "licensed";
  }
  std::string uuid_seed;
  if (m.has("uuid_seed")) uuid_seed = read_string(m.get("uuid_seed"), "uuid_seed");
  return uuid_seed;
}

// `models`: a mapping of model ids to models.
void parse_models(Scenario& s, const YAML::Node& models) {
  if (!models.IsMap() || models.size() == 0) fail_at(models, "models", "expected a mapping of model ids to models");
  for (const auto& kv : models) {
    std::string id = read_string(kv.first, "models");
    s.models.push_back(parse::parse_model(id, kv.second, "models." + id));
  }
}

// NVML numbers the NVIDIA GPUs from 0 and the agent numbers the AMD GPUs after them, so a GPU's
// index is the same in the scenario, in NVML and in the agent only when NVIDIA comes first.
void check_gpu_order(const Scenario& s, const YAML::Node& gpus) {
  for (unsigned i = 1; i < s.gpus.size(); ++i) {
    if (s.is_amd(i - 1) && !s.is_amd(i)) {
      fail_at(gpus, "gpus", fmt::format("GPU {} is NVIDIA but follows an AMD GPU; list the NVIDIA GPUs first", i));
    }
  }
}

// `jobs`, each named once; `job_nodes` receives each entry's node, for later messages.
void parse_jobs(Scenario& s, const YAML::Node& jobs, std::vector<YAML::Node>& job_nodes) {
  if (!jobs.IsSequence()) fail_at(jobs, "jobs", "expected a list of jobs");
  std::set<std::string> names;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    s.jobs.push_back(parse_job(jobs[i], indexed("jobs", i), s));
    job_nodes.push_back(jobs[i]);
    if (!names.insert(s.jobs.back().name).second) {
      fail_at(jobs[i]["name"], indexed("jobs", i) + ".name",
              fmt::format("job name '{}' is used twice", s.jobs.back().name));
    }
  }
}

// `faults`: a list of faults, each added to its kind's list.
void parse_faults(Scenario& s, const YAML::Node& faults) {
  if (!faults.IsSequence()) fail_at(faults, "faults", "expected a list of faults");
  for (std::size_t i = 0; i < faults.size(); ++i) parse::parse_fault(s, faults[i], indexed("faults", i));
}

// The fault lists in time order: Xids and driver upgrades stably, driver reloads once per
// instant.
void sort_faults(Scenario& s) {
  std::stable_sort(s.xids.begin(), s.xids.end(), [](const XidFault& a, const XidFault& b) { return a.at < b.at; });
  std::stable_sort(s.driver_upgrades.begin(), s.driver_upgrades.end(),
                   [](const DriverUpgrade& a, const DriverUpgrade& b) { return a.at < b.at; });
  std::sort(s.driver_reloads.begin(), s.driver_reloads.end());
  s.driver_reloads.erase(std::unique(s.driver_reloads.begin(), s.driver_reloads.end()), s.driver_reloads.end());
}

Scenario parse_root(const YAML::Node& root, const std::string& source) {
  if (!root.IsDefined() || root.IsNull()) {
    throw ScenarioError(YAML::Mark(), "the scenario is empty; expected a mapping with models and gpus");
  }
  MapReader m(
      root, "",
      {"description", "driver_version", "amdgpu_version", "cuda_driver_version", "time_scale", "duration", "uuid_seed",
       "vgpu_license", "models", "gpus", "mig", "users", "allocations", "jobs", "faults", "quirks"});
  Scenario s;
  s.source = source;
  const std::string uuid_seed = parse_settings(s, m);
  parse_models(s, m.require("models"));
  parse_gpus(s, m.require("gpus"), uuid_seed);
  check_gpu_order(s, m.get("gpus"));
  if (m.has("mig")) parse::parse_mig(s, m.get("mig"), uuid_seed);
  if (m.has("users")) parse_users(s, m.get("users"));
  std::vector<YAML::Node> allocation_nodes;
  if (m.has("allocations")) parse::parse_allocations(s, m.get("allocations"), allocation_nodes);
  std::vector<YAML::Node> job_nodes;
  if (m.has("jobs")) parse_jobs(s, m.get("jobs"), job_nodes);
  if (m.has("faults")) parse_faults(s, m.get("faults"));
  if (m.has("quirks")) parse::parse_quirks(s, m.get("quirks"));
  sort_faults(s);

  check_memory(s, job_nodes);
  check_pids(s, job_nodes);
  parse::check_allocation_jobs(s, job_nodes, allocation_nodes);
  parse::check_mig_holders(s, job_nodes, allocation_nodes);
  return s;
}

std::string located(const std::string& source, int line, int column, const std::string& message) {
  if (line < 0) return fmt::format("{}: {}", source, message);
  return fmt::format("{}:{}:{}: {}", source, line + 1, column + 1, message);
}

}  // namespace

KubernetesRef parse::parse_kubernetes_ref(const YAML::Node& node, const std::string& path) {
  return parse_kubernetes(node, path);
}

Result<Scenario> parse_scenario(std::string_view yaml_text, const std::string& source_name) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml_text));
    return parse_root(root, source_name);
  } catch (const ScenarioError& e) {
    return Error{0, located(source_name, e.line, e.column, e.what())};
  } catch (const YAML::Exception& e) {
    return Error{0, located(source_name, e.mark.line, e.mark.column, e.msg)};
  }
}

Result<Scenario> load_scenario(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Error{ENOENT, fmt::format("{}: no such file", path)};
  if (!std::filesystem::is_regular_file(path, ec)) return Error{EINVAL, fmt::format("{}: not a regular file", path)};
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{errno, fmt::format("{}: cannot open: {}", path, std::strerror(errno))};
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Error{EIO, fmt::format("{}: cannot read", path)};
  return parse_scenario(text.str(), path);
}

}  // namespace gpumeter::sim
