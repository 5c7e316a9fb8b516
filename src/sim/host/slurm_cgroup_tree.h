#pragma once
// The cgroup trees Slurm keeps for its jobs, for `gpumeter sim procfs --slurm-cgroup`: what
// src/attribution/slurm_cgroups.h reads, under <dir>/sys/fs/cgroup, over each Slurm allocation's
// exact span [start, end) (no lead: slurmstepd creates the job's cgroup when the job starts on
// the node and removes it when it ends).
//
//   v1            devices/slurm_<node>/uid_<uid>/job_<id>/, as Slurm 22.05 writes it with
//                 ConstrainDevices=yes (verified on a real one): `a *:* rwm` in every devices.list,
//                 the job's processes in step_<s>/task_0/cgroup.procs
//   v1-whitelist  devices/slurm/uid_<uid>/job_<id>/devices.list: "c 195:<gpu> rwm" per GPU, then
//                 nvidia-modeset and nvidiactl, the explicit list of a default-deny cgroup (an
//                 older Slurm's form; no step directories)
//   v2            system.slice/slurmstepd.scope/job_<id>/ (Slurm before 26.05, or CgroupJobIdPaths=yes)
//   v2-sluid      system.slice/slurmstepd.scope/<SLUID>/ (Slurm 26.05's default)
//
// On v2 a job's directory holds step_batch/{slurm,user/task_0}/cgroup.procs, the batch script's
// pid, and step_<n>/{slurm,user/task_0}/cgroup.procs for each of the scenario's jobs of the
// allocation (its steps, numbered in scenario order) while it runs; on v1 step_batch/task_0 and
// step_<n>/task_0 in the same way, each level with its devices.list. The batch script is a
// process of its own (see slurm_batch_jobs), whose environment has SLURM_JOB_ID,
// SLURM_JOB_GPUS and CUDA_VISIBLE_DEVICES renumbered from 0, as with ConstrainDevices=yes.
//
// Every change is atomic for a reader (sim/host/tree_files.h): a job's directory appears and
// goes whole; while it lives, its steps' directories appear and go whole inside it, and its own
// files are replaced in one rename, as a real node's cgroup tree changes. A reader walking a job
// always finds it complete.

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/scenario/scenario.h"
#include "util/result.h"

namespace gpumeter::sim {

enum class SlurmCgroupLayout { kNone, kV1, kV1Whitelist, kV2, kV2Sluid };
std::string_view to_string(SlurmCgroupLayout l);  // "none", "v1", "v1-whitelist", "v2", "v2-sluid"
std::optional<SlurmCgroupLayout> parse_slurm_cgroup_layout(std::string_view s);

// The node's name in the v1 root slurm_<node>: a Slurm built with multiple-slurmd support, as
// Debian's is, names it after the node (slurmd -N, else the host name).
inline constexpr const char* kSlurmNodeName = "node0";

// The cgroup root under a procfs output directory.
inline constexpr const char* kCgroupRoot = "sys/fs/cgroup";

// The SLUID standing for a Slurm job id: "s" and 13 digits of Crockford's base 32, derived
// from the id alone (a real SLUID encodes the cluster and the submission time instead).
std::string sluid_of(std::string_view job_id);

// The batch script of each Slurm allocation, as scenario jobs with no GPU: one process over
// the allocation's span, in its job's step_batch cgroup. Pids are the first free ones from
// kFirstBatchPid up. Empty for kNone.
inline constexpr unsigned kFirstBatchPid = 4000000;  // below Linux's largest pid_max, 4194304
std::vector<Job> slurm_batch_jobs(const Scenario& scenario, SlurmCgroupLayout layout);

// A job directory's files: path relative to the directory -> content.
using CgroupFiles = std::map<std::string, std::string>;

class SlurmCgroupTree {
 public:
  // `scenario` must already hold the batch jobs (slurm_batch_jobs) and outlive the tree. Takes
  // over the job directories an earlier writer left (the first sync() replaces or removes them).
  static Result<std::unique_ptr<SlurmCgroupTree>> open(const std::filesystem::path& dir, const Scenario& scenario,
                                                       SlurmCgroupLayout layout);

  // Makes the tree hold exactly the job directories of the allocations that contain t.
  Result<void> sync(Micros t);

  // The earliest allocation or step edge after t; kForever if none.
  Micros next_change_after(Micros t) const;

  // The job directories after the last sync(), relative to <dir>/sys/fs/cgroup, with their files.
  const std::map<std::string, CgroupFiles>& present() const { return present_; }

  // The job directories and files for scenario time t.
  std::map<std::string, CgroupFiles> wanted_at(Micros t) const;

 private:
  SlurmCgroupTree(std::filesystem::path root, const Scenario& scenario, SlurmCgroupLayout layout);
  // Creates the job's directory whole, or (given what it holds now) updates it in place.
  Result<void> write_job(const std::string& rel, const CgroupFiles& files, const CgroupFiles* old);
  Result<void> remove_job(const std::string& rel);

  std::filesystem::path root_;
  const Scenario& scenario_;
  SlurmCgroupLayout layout_;
  std::vector<Micros> edges_;
  std::map<std::string, CgroupFiles> present_;
};

}  // namespace gpumeter::sim
