#pragma once
// A GPU process's owner labels from what is known about it: procfs (user, cgroup,
// allow-listed environment), the kubelet's pod for the GPU, the HPC job mapping for the GPU,
// and the project rules.

#include <string>
#include <vector>

#include "model/owner.h"
#include "attribution/pod_ref.h"
#include "attribution/procfs.h"
#include "attribution/project_rules.h"

namespace gpumeter {

// Number of hex digits of a runtime container id used as the container label outside
// Kubernetes, as `docker ps` shows it.
inline constexpr std::size_t kShortContainerIdLength = 12;

// The attributes project rules see (names in project_rules.h):
//   user, uid, comm, cgroup (the hierarchy path), systemd_unit, pod_uid, container_id,
//   namespace, pod, container (the labels below), hpc_job (the label below),
//   slurm_job (from the cgroup, else env SLURM_JOB_ID when allow-listed),
//   env.<NAME> for each allow-listed variable the process has (slurm_account reads
//   env.SLURM_JOB_ACCOUNT).
// `pod` may be null (no pod known for the GPU); `hpc_jobs` are the mapping's jobs for the GPU.
Attributes attributes_of(const ProcessInfo& p, const PodRef* pod, const std::vector<std::string>& hpc_jobs);

// user: the passwd name or the uid. namespace, pod, container: from `pod` when given;
// otherwise container is the first 12 hex digits of the runtime's container id (empty when
// not in a container). hpc_job: the Slurm job id from the cgroup, else the mapping's jobs
// joined with ",", else env SLURM_JOB_ID when allow-listed. project: from `rules`. A value
// longer than kMaxLabelValueBytes is left empty; rules still see it whole.
OwnerLabels build_owner(const ProcessInfo& p, const PodRef* pod, const std::vector<std::string>& hpc_jobs,
                        const ProjectResolver& rules);

// The owner of a scheduler allocation, which has no process: namespace, pod and container from
// the kubelet (`pod`, may be null), hpc_job for a Slurm job (may be empty), the user when the
// source knows it. The project comes from `rules` over these attributes alone (a rule reading a
// process's attribute, such as env.* or comm, finds it empty).
OwnerLabels build_allocation_owner(const PodRef* pod, const std::string& hpc_job, const std::string& user,
                                   const ProjectResolver& rules);

}  // namespace gpumeter
