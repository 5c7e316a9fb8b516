#include "attribution/cgroup.h"

#include <array>
#include <vector>

// Plain string parsing rather than std::regex: the layouts are a handful of fixed prefixes
// and suffixes, and hand-written checks say exactly which ones are accepted.

namespace gpumeter {

std::string_view to_string(CgroupVersion v) {
  switch (v) {
    case CgroupVersion::kV1:
      return "v1";
    case CgroupVersion::kV2:
      return "v2";
    case CgroupVersion::kHybrid:
      return "hybrid";
    case CgroupVersion::kUnknown:
      break;
  }
  return "unknown";
}

std::string_view to_string(ContainerRuntime r) {
  switch (r) {
    case ContainerRuntime::kDocker:
      return "docker";
    case ContainerRuntime::kContainerd:
      return "containerd";
    case ContainerRuntime::kCrio:
      return "cri-o";
    case ContainerRuntime::kPodman:
      return "podman";
    case ContainerRuntime::kNone:
      break;
  }
  return "";
}

std::string_view to_string(PodQos q) {
  switch (q) {
    case PodQos::kGuaranteed:
      return "guaranteed";
    case PodQos::kBurstable:
      return "burstable";
    case PodQos::kBestEffort:
      return "besteffort";
    case PodQos::kNone:
      break;
  }
  return "";
}

namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

bool is_hex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// A pod uid as it appears after "pod": hex digits with '-' (cgroupfs) or '_' (systemd, which
// reserves '-' for nesting). Static pods have a 32-hex uid without separators.
bool valid_pod_uid(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

std::string normalize_pod_uid(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c == '_') c = '-';
  }
  return out;
}

enum class ScopeKind { kNotContainer, kContainer, kMonitor };

struct ContainerMatch {
  ScopeKind kind = ScopeKind::kNotContainer;
  ContainerRuntime runtime = ContainerRuntime::kNone;
  std::string_view id;
};

// "docker-<id>.scope", "cri-containerd-<id>.scope", "crio-<id>.scope" (or without ".scope",
// as the cgroupfs driver names them), "libpod-<id>.scope". The runtimes' monitor processes
// ("crio-conmon-<id>.scope", "libpod-conmon-<id>.scope") are recognised so that they are
// taken neither for the container nor for a systemd unit.
ContainerMatch match_container_component(std::string_view c) {
  std::string_view name = c;
  if (ends_with(name, ".scope")) name.remove_suffix(6);
  static constexpr std::array<std::string_view, 2> kMonitors = {"crio-conmon-", "libpod-conmon-"};
  for (std::string_view m : kMonitors) {
    if (starts_with(name, m) && is_hex64(name.substr(m.size()))) return {ScopeKind::kMonitor, {}, {}};
  }
  static constexpr std::array<std::pair<std::string_view, ContainerRuntime>, 4> kPrefixes = {{
      {"docker-", ContainerRuntime::kDocker},
      {"cri-containerd-", ContainerRuntime::kContainerd},
      {"crio-", ContainerRuntime::kCrio},
      {"libpod-", ContainerRuntime::kPodman},
  }};
  for (const auto& [prefix, runtime] : kPrefixes) {
    if (starts_with(name, prefix) && is_hex64(name.substr(prefix.size()))) {
      return {ScopeKind::kContainer, runtime, name.substr(prefix.size())};
    }
  }
  return {};
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    std::size_t p = s.find(sep);
    out.push_back(s.substr(0, p));
    if (p == std::string_view::npos) break;
    s.remove_prefix(p + 1);
  }
  return out;
}

struct PathParser {
  CgroupInfo info;
  bool in_kubepods = false;
  bool in_slurm = false;
  std::string_view parent;

  void kube_token(std::string_view t) {
    if (t == "burstable") {
      info.qos = PodQos::kBurstable;
    } else if (t == "besteffort") {
      info.qos = PodQos::kBestEffort;
    } else if (starts_with(t, "pod") && valid_pod_uid(t.substr(3))) {
      info.pod_uid = normalize_pod_uid(t.substr(3));
    }
  }

  void container(ContainerRuntime runtime, std::string_view id) {
    info.runtime = runtime;
    info.container_id = std::string(id);
  }

  void component(std::string_view c) {
    // containerd's systemd cgroup path notation "<slice>:<prefix>:<id>", seen where the
    // runtime's own cgroupsPath shows through (k3s, some nested setups).
    if (std::size_t colon = c.find(':'); colon != std::string_view::npos) {
      auto parts = split(c, ':');
      if (parts.size() == 3 && ends_with(parts[0], ".slice") && is_hex64(parts[2])) {
        component(parts[0]);
        std::string_view prefix = parts[1];
        ContainerRuntime r = prefix == "docker"   ? ContainerRuntime::kDocker
                             : prefix == "crio"   ? ContainerRuntime::kCrio
                             : prefix == "libpod" ? ContainerRuntime::kPodman
                                                  : ContainerRuntime::kContainerd;
        container(r, parts[2]);
        return;
      }
    }

    ContainerMatch m = match_container_component(c);
    if (m.kind == ScopeKind::kContainer) {
      container(m.runtime, m.id);
    } else if (m.kind == ScopeKind::kNotContainer && is_hex64(c)) {
      // A bare id: Docker's cgroupfs driver (/docker/<id>) or a Kubernetes cgroupfs-driver
      // pod (/kubepods/<qos>/pod<uid>/<id>).
      if (parent == "docker") {
        container(ContainerRuntime::kDocker, c);
      } else if (in_kubepods || parent == "k8s.io") {
        container(ContainerRuntime::kContainerd, c);
      }
    }

    // Kubernetes, systemd driver: kubepods.slice/kubepods-burstable.slice/
    // kubepods-burstable-pod<uid>.slice (kind prefixes with kubelet-).
    if (ends_with(c, ".slice")) {
      auto tokens = split(c.substr(0, c.size() - 6), '-');
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        if (tokens[i] != "kubepods") continue;
        in_kubepods = true;
        for (std::size_t j = i + 1; j < tokens.size(); ++j) kube_token(tokens[j]);
        break;
      }
    } else if (c == "kubepods") {  // cgroupfs driver
      in_kubepods = true;
    } else if (in_kubepods && (parent == "kubepods" || parent == "burstable" || parent == "besteffort")) {
      // /kubepods/<qos>/pod<uid>; guaranteed pods sit directly under /kubepods.
      if (c == "burstable" || c == "besteffort" || starts_with(c, "pod")) kube_token(c);
    }

    // Slurm: /slurm[_<node>]/uid_<N>/job_<M>/step_<S>/task_<T> (v1) and
    // /system.slice/slurmstepd.scope/job_<M>/step_<S>/user/task_<T> (v2).
    if (starts_with(c, "slurm")) {
      in_slurm = true;
    } else if (in_slurm) {
      if (starts_with(c, "uid_") && all_digits(c.substr(4))) {
        info.slurm_uid = std::string(c.substr(4));
      } else if (starts_with(c, "job_") && all_digits(c.substr(4))) {
        info.slurm_job = std::string(c.substr(4));
        info.slurm_step.clear();
      } else if (starts_with(c, "step_") && !info.slurm_job.empty() && c.size() > 5) {
        info.slurm_step = std::string(c.substr(5));
      }
    }

    if (m.kind == ScopeKind::kNotContainer && (ends_with(c, ".service") || ends_with(c, ".scope"))) {
      info.systemd_unit = std::string(c);
    }
    parent = c;
  }
};

int score(const CgroupInfo& i) {
  int s = 0;
  if (!i.container_id.empty()) s += 8;
  if (!i.pod_uid.empty()) s += 8;
  if (!i.slurm_job.empty()) s += 8;
  if (!i.slurm_uid.empty()) s += 1;
  if (!i.systemd_unit.empty()) s += 1;
  return s;
}

// Lower is preferred when two hierarchies carry as much information.
int rank(std::string_view hierarchy, std::string_view controllers) {
  if (hierarchy == "0" && controllers.empty()) return 0;
  if (controllers == "name=systemd") return 1;
  for (std::string_view c : split(controllers, ',')) {
    if (c == "cpu" || c == "cpuacct") return 2;
  }
  for (std::string_view c : split(controllers, ',')) {
    if (c == "memory") return 3;
  }
  for (std::string_view c : split(controllers, ',')) {
    if (c == "devices") return 4;
  }
  return 5;
}

}  // namespace

CgroupInfo parse_cgroup_path(std::string_view path) {
  PathParser p;
  p.info.path = std::string(path);
  for (std::string_view c : split(path, '/')) {
    if (!c.empty()) p.component(c);
  }
  if (!p.info.pod_uid.empty() && p.info.qos == PodQos::kNone) p.info.qos = PodQos::kGuaranteed;
  if (p.info.pod_uid.empty()) p.info.qos = PodQos::kNone;
  return p.info;
}

CgroupInfo parse_cgroup(std::string_view text) {
  bool v1 = false;
  bool v2 = false;
  CgroupInfo best;
  int best_score = -1;
  int best_rank = 0;
  for (std::string_view line : split(text, '\n')) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    std::size_t a = line.find(':');
    if (a == std::string_view::npos) continue;
    std::size_t b = line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    std::string_view hierarchy = line.substr(0, a);
    std::string_view controllers = line.substr(a + 1, b - a - 1);
    std::string_view path = line.substr(b + 1);
    if (!all_digits(hierarchy)) continue;
    bool unified = hierarchy == "0" && controllers.empty();
    (unified ? v2 : v1) = true;
    CgroupInfo info = parse_cgroup_path(path);
    int s = score(info);
    int r = rank(hierarchy, controllers);
    if (s > best_score || (s == best_score && r < best_rank)) {
      best = std::move(info);
      best_score = s;
      best_rank = r;
    }
  }
  best.version = v1 && v2 ? CgroupVersion::kHybrid
                 : v1     ? CgroupVersion::kV1
                 : v2     ? CgroupVersion::kV2
                          : CgroupVersion::kUnknown;
  return best;
}

}  // namespace gpumeter
