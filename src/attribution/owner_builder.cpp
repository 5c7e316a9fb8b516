#include "attribution/owner_builder.h"

#include "util/utf8.h"

namespace gpumeter {

namespace {

std::string join(const std::vector<std::string>& parts, char sep) {
  std::string out;
  for (const auto& p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

// A label value as every output writes it: bytes that are not UTF-8 replaced by U+FFFD (a GPU's
// users control these values, and the state file and the JSON API must stay UTF-8), then left
// empty when it is over-long (see kMaxLabelValueBytes). Replaced here, once, so that the ledger
// keys an owner by the same value every output and a restarted agent see.
std::string bounded(std::string_view value) {
  std::string valid = valid_utf8(value);
  return valid.size() <= kMaxLabelValueBytes ? valid : std::string();
}

std::string env_or_empty(const ProcessInfo& p, std::string_view name) {
  const std::string* v = p.env_value(name);
  return v ? *v : std::string();
}

// Whether the process's cgroup places it outside every batch job: in a Kubernetes pod, or in a
// user's login session (an ssh or desktop session that no job adopted, as pam_slurm_adopt
// would). The mapping names the jobs of a GPU, not of each process on it; such a process only
// shares the GPU. A container is not excluded: sites run jobs in containers.
bool outside_batch_jobs(const CgroupInfo& c) {
  const std::string_view unit = c.systemd_unit;
  return !c.pod_uid.empty() || (unit.starts_with("session-") && unit.ends_with(".scope"));
}

std::string hpc_job_of(const ProcessInfo& p, const std::vector<std::string>& hpc_jobs) {
  if (!p.cgroup.slurm_job.empty()) return p.cgroup.slurm_job;
  if (!outside_batch_jobs(p.cgroup)) {
    std::string mapped = join(hpc_jobs, ',');
    if (!mapped.empty()) return mapped;
  }
  return env_or_empty(p, "SLURM_JOB_ID");
}

OwnerLabels owner_from(const Attributes& a, const ProjectResolver& rules) {
  OwnerLabels o;
  o.project = rules.resolve(a);  // a rule's result is made valid and bounded there; the default at load
  o.user = bounded(a.get("user"));
  o.namespace_ = bounded(a.get("namespace"));
  o.pod = bounded(a.get("pod"));
  o.container = bounded(a.get("container"));
  o.hpc_job = bounded(a.get("hpc_job"));
  return o;
}

}  // namespace

Attributes attributes_of(const ProcessInfo& p, const PodRef* pod, const std::vector<std::string>& hpc_jobs) {
  Attributes a;
  for (const auto& [name, value] : p.env) a.set(std::string(kEnvAttributePrefix) + name, value);
  a.set("user", p.user);
  a.set("uid", std::to_string(p.uid));
  a.set("comm", p.comm);
  a.set("cgroup", p.cgroup.path);
  a.set("systemd_unit", p.cgroup.systemd_unit);
  a.set("pod_uid", p.cgroup.pod_uid);
  a.set("container_id", p.cgroup.container_id);
  if (pod != nullptr) {
    a.set("namespace", pod->namespace_);
    a.set("pod", pod->pod);
    a.set("container", pod->container);
  } else {
    a.set("namespace", "");
    a.set("pod", "");
    a.set("container", p.cgroup.container_id.substr(0, kShortContainerIdLength));
  }
  a.set("hpc_job", hpc_job_of(p, hpc_jobs));
  a.set("slurm_job", p.cgroup.slurm_job.empty() ? env_or_empty(p, "SLURM_JOB_ID") : p.cgroup.slurm_job);
  return a;
}

OwnerLabels build_owner(const ProcessInfo& p, const PodRef* pod, const std::vector<std::string>& hpc_jobs,
                        const ProjectResolver& rules) {
  return owner_from(attributes_of(p, pod, hpc_jobs), rules);
}

OwnerLabels build_allocation_owner(const PodRef* pod, const std::string& hpc_job, const std::string& user,
                                   const ProjectResolver& rules) {
  Attributes a;
  a.set("user", user);
  if (pod != nullptr) {
    a.set("namespace", pod->namespace_);
    a.set("pod", pod->pod);
    a.set("container", pod->container);
  }
  a.set("hpc_job", hpc_job);
  a.set("slurm_job", hpc_job);
  return owner_from(a, rules);
}

}  // namespace gpumeter
