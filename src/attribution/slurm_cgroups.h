#pragma once
// The GPUs Slurm allocated to each job on this node, read from the jobs' cgroups, with or
// without a process on the GPUs (docs/attribution.md, "Slurm allocations from cgroups").
//
// cgroup v1: <root>/devices/slurm[_<node>]/uid_<N>/job_<M>/devices.list, where NVIDIA GPU N is
// the character device 195:N. When the list shows `a *:* rwm` it does not say which GPUs the
// job holds (the kernel hides a default-allow cgroup's deny exceptions, and Slurm writes only
// per-device allow and deny lines), so the job's processes' environment decides, as on v2.
// cgroup v2: Slurm's device controller is an eBPF program, which cannot be read back, so the
// GPUs come from the environment of the job's processes, found through the cgroup.procs files
// under <root>/<slice>/[<node>_]slurmstepd.scope/<job>/. <job> is job_<M>, or, from Slurm 26.05
// on unless CgroupJobIdPaths=yes, the job's SLUID ("s" and 13 base-32 digits), which does not
// encode the job id: the id then comes from SLURM_JOB_ID in the allow-listed environment.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace gpumeter {

struct SlurmJobGpus {
  std::string job_id;             // "51300"
  std::string uid;                // "" when the layout does not say
  std::vector<std::string> gpus;  // GPU indices ("0") or UUIDs ("GPU-...") as the source names them
  std::string source;             // "cgroup-v1-devices" or "cgroup-v2-environ"; "cgroup-v1-environ"
                                  // when a v1 job's devices.list allows every device
  bool operator==(const SlurmJobGpus&) const = default;
};

struct SlurmCgroupOptions {
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string procfs = "/proc";
  std::vector<std::string> environment;  // the agent's environment allow-list
};

struct SlurmJobsRead {
  std::vector<SlurmJobGpus> jobs;  // sorted by job id; only jobs holding a GPU
  // Jobs left out: those holding a GPU past kMaxSlurmJobs, and job directories past
  // kMaxSlurmJobDirs (not read, so whether they hold a GPU is not known).
  std::size_t jobs_left_out = 0;
  // Jobs whose cgroups could not be read (another user's, mode 000): skipped, each on its own;
  // the first one's error says why.
  std::size_t jobs_unreadable = 0;
  std::string unreadable_error;
};

// The Slurm jobs on this node and the GPUs each holds. A missing cgroup tree or no Slurm jobs
// is an empty list, not an error; a tree that cannot be listed at all (the cgroup root, a
// Slurm root, a slice or a scope) is an Error. A job or process that disappears while it is
// read is left out, and so is a job with no GPU known (a directory a crashed slurmd left behind,
// with no process): it does not count against the bound. Symbolic links in the tree are never
// followed.
Result<SlurmJobsRead> read_slurm_job_gpus(const SlurmCgroupOptions& options);

// Bounds on one call. Jobs holding a GPU past kMaxSlurmJobs (in job-id order within each Slurm
// root) are left out and counted; a job whose GPUs are not known after kMaxSlurmPidsPerJob
// processes is listed with what they gave.
inline constexpr std::size_t kMaxSlurmJobs = 1024;
inline constexpr std::size_t kMaxSlurmJobDirs = 16384;  // job directories read per call, stale ones included
inline constexpr std::size_t kMaxSlurmPidsPerJob = 64;
inline constexpr std::size_t kMaxSlurmPids = 8192;       // processes read in all, per call
inline constexpr std::size_t kMaxSlurmJobCgroups = 256;  // cgroup directories walked per job
inline constexpr std::size_t kMaxSlurmCgroupFileBytes = 64 * 1024;

// NVIDIA's character device major: /dev/nvidia<N> is 195:N, /dev/nvidia-modeset 195:254 and
// /dev/nvidiactl 195:255.
inline constexpr unsigned kNvidiaMajor = 195;

// Parsers, exposed for tests.
struct DevicesListGpus {
  bool all = false;               // an entry covers every NVIDIA device (a *:*, c *:*, c 195:*)
  std::vector<std::string> gpus;  // GPU minors with r or w access, ascending
};
DevicesListGpus parse_devices_list(std::string_view text);

// "s" followed by 13 digits of Crockford's base 32 (0-9, A-Z without I, L, O, U).
bool is_sluid(std::string_view name);

// Whether an errno from opening, listing or reading a cgroup or /proc entry means that it went
// away while it was read (a job ended, a process exited): ENOENT, ENOTDIR, ESRCH, ELOOP, and
// ENODEV, which cgroupfs answers when a cgroup is removed between the open of one of its files
// and the read (Linux fs/kernfs/file.c, kernfs_seq_start; checked on the host of a real Slurm
// by tests/integration/test_slurm_real.py). Such a job or process is left out, not an error.
bool slurm_cgroup_entry_gone(int err);

// A comma-separated GPU list: indices when `indices` is true, GPU-/MIG- UUIDs otherwise. A
// value with any entry of the other kind, or malformed, gives nothing (a partly wrong list is
// not trusted). Repeats are dropped; order is kept.
std::vector<std::string> parse_gpu_list(std::string_view value, bool indices);

}  // namespace gpumeter
