#pragma once
// The agent's OwnerResolver: /proc/<pid> (cgroup, uid, allow-listed environment) through a
// cache keyed by (pid, start time), user names from the host's passwd, pod names from the
// kubelet pod-resources API (refreshed in the background, never on this path), HPC job ids
// from dcgm-exporter's job-mapping directory, and the project from the configured rules.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "attribution/hpc_jobs.h"
#include "attribution/pod_ref.h"
#include "attribution/procfs.h"
#include "attribution/project_rules.h"
#include "attribution/slurm_cgroups.h"
#include "kubelet/device_map.h"
#include "ledger/usage_tracker.h"
#include "util/clock.h"
#include "util/log.h"

namespace gpumeter {

struct HostOwnerResolverOptions {
  std::string procfs = "/proc";
  std::string rootfs = "/";
  std::vector<std::string> environment;  // allow-list
  std::string hpc_job_mapping_dir;       // "" when off
  // The mapping directory is read again at once when its modification time changes (a file
  // added, renamed or removed), and at least this often (a file rewritten in place); the Slurm
  // cgroups are read again this often.
  std::chrono::milliseconds hpc_refresh{10'000};
  // A read due within this much is made now. Reads happen on the collection thread, whose calls
  // land a few milliseconds early or late against the previous read: without a margin, a
  // refresh equal to the collection interval reads at every other collection, and a change is
  // seen up to two intervals late (docs/ledger.md, "Edges"). The agent sets half a collection
  // interval.
  std::chrono::milliseconds refresh_slack{0};
  // Slurm jobs' cgroups as a scheduler source (docs/attribution.md), read at most every
  // hpc_refresh less refresh_slack; off when slurm_cgroups.cgroup_root is empty.
  SlurmCgroupOptions slurm_cgroups{.cgroup_root = "", .procfs = "/proc", .environment = {}};
  // Scheduler policy: allocation() reports the kubelet's, the mapping's and the Slurm cgroups'
  // allocations.
  bool allocations = false;
  // The system clock, µs (the clock the driver stamps samples with); unset: the real one.
  const Clock* clock = nullptr;  // the wall clock; null: the system clock. Must outlive the resolver
  std::string kubelet_socket;    // "" when off
  kubelet::KubeletWatcher::Options kubelet;
  ProjectResolver rules;
  // A pid whose /proc entry cannot be read is retried after this long.
  std::chrono::milliseconds negative_ttl{5'000};
};

class HostOwnerResolver final : public OwnerResolver {
 public:
  HostOwnerResolver(HostOwnerResolverOptions options, Logger& log);
  ~HostOwnerResolver() override;

  void start();  // the kubelet watcher, when configured
  void stop();

  OwnerLabels resolve(unsigned pid, const DeviceIdentity& gpu) override;
  std::optional<std::int64_t> start_time_us(unsigned pid) const override;
  std::optional<AllocationState> allocation(const DeviceIdentity& gpu) override;
  void retain(const std::vector<unsigned>& live_pids) override;
  void contribute(AttributionStatus& status) const override;

  // Names processes by `rules` and reads `environment` (the allow-list) from now on (a config
  // reload): the owners already built are forgot, and when the allow-list changed, what was read
  // from /proc too, so every process is named again by the new rules at its next lookup.
  void update_rules(ProjectResolver rules, std::vector<std::string> environment);

  // The kubelet's containers allocated `gpu` in `map`: the entry of its uuid, else of its PCI
  // address, of its index, or of its DRA name (by device minor); a MIG device by its uuid only.
  // Matched by the identity's fields, whatever the vendor (docs/kubelet.md, "Device ids").
  static const std::vector<kubelet::DeviceOwner>* pods_of(const kubelet::DeviceMap& map, const DeviceIdentity& gpu);

 private:
  std::vector<std::string> hpc_jobs(const DeviceIdentity& gpu);
  // The mapped jobs of a GPU (by index or uuid) or of a MIG device (by its uuid). Under mu_.
  std::vector<std::string> jobs_of_locked(const DeviceIdentity& gpu) const;
  // Reads the mapping again when it may have changed; mu_ held.
  void refresh_hpc_locked();
  std::int64_t wall_clock_us() const;

  HostOwnerResolverOptions options_;  // rules and environment: see rules_ and cache_
  Logger& log_;
  std::unique_ptr<kubelet::KubeletWatcher> kubelet_;

  mutable std::mutex mu_;  // guards the members below
  // The project rules and the /proc reader for the allow-list in force; replaced, never changed,
  // by update_rules(), so that a lookup holds its own reference without the lock.
  std::shared_ptr<const ProjectResolver> rules_;
  std::shared_ptr<ProcessCache> cache_;
  bool hostname_allowed_ = false;  // HOSTNAME is read to tell pods apart; kept only if allow-listed
  // The lookups and errors of the caches replaced, so that their counters never go back.
  std::uint64_t lookups_before_ = 0, errors_before_ = 0;
  std::shared_ptr<ProcessCache> cache() const {
    std::lock_guard lock(mu_);
    return cache_;
  }
  std::unordered_map<unsigned, std::chrono::steady_clock::time_point> failed_;
  struct BuiltOwner {
    std::shared_ptr<const ProcessInfo> info;
    std::optional<PodRef> pod;
    std::vector<std::string> jobs;
    OwnerLabels owner;
  };
  std::map<std::pair<unsigned, std::string>, BuiltOwner> built_;  // by pid and GPU (or MIG device) uuid
  HpcJobMapping hpc_;
  std::chrono::steady_clock::time_point hpc_read_{};
  std::int64_t hpc_read_wall_us_ = 0;
  std::int64_t hpc_dir_mtime_ns_ = -1;
  std::map<std::string, std::int64_t> hpc_changed_us_;  // mapping file -> when its jobs last changed
  std::uint64_t hpc_jobs_dropped_ = 0;                  // ids beyond kMaxHpcJobsPerFile
  std::string hpc_error_;
  // Slurm jobs from their cgroups, and when they were read.
  std::vector<SlurmJobGpus> slurm_jobs_;
  std::chrono::steady_clock::time_point slurm_read_{};
  std::int64_t slurm_read_wall_us_ = 0;
  std::string slurm_error_;
  std::size_t slurm_left_out_ = 0, slurm_unreadable_ = 0;  // at the last read
  std::uint64_t slurm_jobs_dropped_ = 0;                   // jobs left out, counted as their number grew
  void refresh_slurm_locked();
  // Scheduler policy, per GPU index: each source's owners and when they last changed.
  struct SourceOwners {
    std::vector<OwnerLabels> owners;  // sorted
    std::int64_t since_us = 0;
    // Takes `owners` (sorted here) as changed at `at_us` when they differ.
    void update(std::vector<OwnerLabels> now, std::int64_t at_us);
  };
  struct GpuAllocation {
    std::shared_ptr<const kubelet::DeviceMap> map;  // the map `pods` were read from
    SourceOwners pods, mapped_jobs, slurm_jobs;
    // The project and user of an allocation, from the first process found inside it (by the
    // allocation's scheduler labels); `learned_since_us` is when the last one was learned.
    std::map<OwnerLabels, OwnerLabels> learned;
    std::int64_t learned_since_us = 0;
    AllocationState state;
  };
  // Notes `owner`, of a process on `gpu`, as the first of an allocation it is inside; mu_ held.
  void learn_locked(const DeviceIdentity& gpu, const OwnerLabels& owner);
  std::unordered_map<std::string, GpuAllocation> allocations_;  // by GPU (or MIG device) uuid
};

}  // namespace gpumeter
