#pragma once
// What a process's cgroup path says about its owner: the container runtime and container id,
// the Kubernetes pod uid and QoS class, the Slurm job, and the systemd unit. Parsed from the
// text of /proc/<pid>/cgroup, for cgroup v2 ("0::/path"), v1 ("N:controllers:/path" lines)
// and hybrid layouts.

#include <string>
#include <string_view>

namespace gpumeter {

enum class CgroupVersion { kUnknown, kV1, kV2, kHybrid };
enum class ContainerRuntime { kNone, kDocker, kContainerd, kCrio, kPodman };
enum class PodQos { kNone, kGuaranteed, kBurstable, kBestEffort };

std::string_view to_string(CgroupVersion v);     // "unknown", "v1", "v2", "hybrid"
std::string_view to_string(ContainerRuntime r);  // "", "docker", "containerd", "cri-o", "podman"
std::string_view to_string(PodQos q);            // "", "guaranteed", "burstable", "besteffort"

struct CgroupInfo {
  CgroupVersion version = CgroupVersion::kUnknown;
  std::string path;  // the hierarchy path the fields below were read from; "" when none

  ContainerRuntime runtime = ContainerRuntime::kNone;
  std::string container_id;  // 64 lowercase hex digits, "" when not in a container

  std::string pod_uid;  // Kubernetes pod uid with '-' separators, "" when not in a pod
  PodQos qos = PodQos::kNone;

  std::string slurm_job;   // Slurm job id ("4242"), "" when not in a Slurm job
  std::string slurm_step;  // "0", "batch", "extern", "interactive"; "" when absent
  std::string slurm_uid;   // from the v1 layout's uid_<N> folder; "" when absent

  std::string systemd_unit;  // innermost *.service or *.scope that is not a container's scope

  bool operator==(const CgroupInfo&) const = default;
};

// Never fails: unknown layouts give a CgroupInfo with only `version` and `path` set.
// Among v1 hierarchies the path that carries the most owner information is used (a Slurm
// job's memory or devices path over name=systemd's slurmd.service, for example); on ties,
// the v2 path, then name=systemd, cpu,cpuacct, memory, devices, then the rest.
CgroupInfo parse_cgroup(std::string_view proc_pid_cgroup_text);

// The owner fields of one hierarchy path ("/kubepods/burstable/pod<uid>/<id>").
CgroupInfo parse_cgroup_path(std::string_view path);

}  // namespace gpumeter
