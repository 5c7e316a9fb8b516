#include "ledger/host_owner_resolver.h"

#include <sys/stat.h>

#include <algorithm>
#include <limits>
#include <thread>

#include "attribution/owner_builder.h"

namespace gpumeter {

namespace {

std::vector<std::string> with_hostname(std::vector<std::string> allow) {
  if (std::find(allow.begin(), allow.end(), "HOSTNAME") == allow.end()) allow.push_back("HOSTNAME");
  return allow;
}

bool allows_hostname(const std::vector<std::string>& allow) {
  return std::find(allow.begin(), allow.end(), "HOSTNAME") != allow.end();
}

// Whether a source last read at `last` (never, when it is the epoch) is to be read again `now`.
bool read_due(std::chrono::steady_clock::time_point last, std::chrono::steady_clock::time_point now,
              std::chrono::milliseconds refresh, std::chrono::milliseconds slack) {
  if (last == std::chrono::steady_clock::time_point{}) return true;
  return now - last >= std::max(refresh - slack, std::chrono::milliseconds(0));
}

}  // namespace

HostOwnerResolver::HostOwnerResolver(HostOwnerResolverOptions options, Logger& log)
    : options_(std::move(options)),
      log_(log),
      rules_(std::make_shared<const ProjectResolver>(options_.rules)),
      cache_(std::make_shared<ProcessCache>(
          ProcfsReader(options_.procfs, options_.rootfs, with_hostname(options_.environment)))),
      hostname_allowed_(allows_hostname(options_.environment)) {
  if (!options_.kubelet_socket.empty()) {
    auto ko = options_.kubelet;
    ko.socket_path = options_.kubelet_socket;
    kubelet_ = std::make_unique<kubelet::KubeletWatcher>(ko, log_);
  }
}

HostOwnerResolver::~HostOwnerResolver() { stop(); }

void HostOwnerResolver::start() {
  if (!kubelet_) return;
  kubelet_->start();
  // Give the first List a moment before the first collection: a restarted agent re-integrates
  // the driver's sample buffer at once, and those periods should carry pod names like the rest.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::min<std::chrono::milliseconds>(options_.kubelet.timeout, std::chrono::seconds(3));
  while (!kubelet_->latest() && kubelet_->stats().failures == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void HostOwnerResolver::stop() {
  if (kubelet_) kubelet_->stop();
}

void HostOwnerResolver::update_rules(ProjectResolver rules, std::vector<std::string> environment) {
  auto next_rules = std::make_shared<const ProjectResolver>(std::move(rules));
  std::shared_ptr<ProcessCache> next_cache;
  const bool same_environment = environment == options_.environment;
  if (!same_environment) {
    next_cache =
        std::make_shared<ProcessCache>(ProcfsReader(options_.procfs, options_.rootfs, with_hostname(environment)));
  }
  std::lock_guard lock(mu_);
  rules_ = std::move(next_rules);
  if (next_cache) {
    lookups_before_ += cache_->hits() + cache_->misses();
    errors_before_ += cache_->errors();
    cache_ = std::move(next_cache);
  }
  hostname_allowed_ = allows_hostname(environment);
  options_.environment = std::move(environment);
  built_.clear();
  failed_.clear();
  // Allocations are named again from their sources by the new rules, and their processes'
  // projects learned again.
  for (auto& [index, a] : allocations_) {
    a.map = nullptr;
    a.learned.clear();
  }
}

std::int64_t HostOwnerResolver::wall_clock_us() const {
  return (options_.clock ? *options_.clock : system_clock()).wall_us();
}

void HostOwnerResolver::refresh_hpc_locked() {
  // One stat tells whether a file was added, renamed into place or removed: the directory's
  // modification time moves. The time of that change is when the jobs changed: a new file's
  // own modification time, or the directory's for a removal.
  struct stat dir {};
  const bool dir_ok = ::stat(options_.hpc_job_mapping_dir.c_str(), &dir) == 0;
  const std::int64_t dir_mtime_ns =
      dir_ok ? std::int64_t{dir.st_mtim.tv_sec} * 1'000'000'000 + dir.st_mtim.tv_nsec : -1;
  const auto now = std::chrono::steady_clock::now();
  const bool read_before = hpc_read_ != std::chrono::steady_clock::time_point{};
  if (dir_mtime_ns == hpc_dir_mtime_ns_ && !read_due(hpc_read_, now, options_.hpc_refresh, options_.refresh_slack)) {
    return;
  }
  const std::int64_t wall_us = wall_clock_us();
  auto m = read_hpc_job_mapping(options_.hpc_job_mapping_dir);
  if (!m) {
    if (m.error().message != hpc_error_) {
      hpc_error_ = m.error().message;
      log_.warn("cannot read the HPC job mapping directory", {{"err", hpc_error_}});
    }
    m = HpcJobMapping{};
  } else {
    hpc_error_.clear();
  }
  // A change happened after the previous read and by now; a file's or directory's time outside
  // that span (a clock step, a copied file) is clamped into it.
  auto when = [&](std::int64_t mtime_ns) {
    const std::int64_t lo = read_before ? hpc_read_wall_us_ : std::numeric_limits<std::int64_t>::min();
    return std::clamp(mtime_ns < 0 ? wall_us : mtime_ns / 1000, lo, wall_us);
  };
  auto note = [&](const std::string& file, const std::vector<std::string>* jobs) {
    if (jobs != nullptr) {
      struct stat f {};
      const std::string path = options_.hpc_job_mapping_dir + "/" + file;
      hpc_changed_us_[file] =
          when(::stat(path.c_str(), &f) == 0 ? std::int64_t{f.st_mtim.tv_sec} * 1'000'000'000 + f.st_mtim.tv_nsec : -1);
    } else {
      hpc_changed_us_[file] = when(dir_mtime_ns);
    }
  };
  for (const auto& [file, jobs] : m->files) {
    auto old = hpc_.files.find(file);
    if (old != hpc_.files.end() && old->second == jobs) continue;
    note(file, &jobs);
    // Counted once per content of a file, not at each read of it.
    if (auto d = m->dropped.find(file); d != m->dropped.end()) hpc_jobs_dropped_ += d->second;
  }
  for (const auto& [file, jobs] : hpc_.files) {
    if (!m->files.contains(file)) note(file, nullptr);
  }
  if (m->links_skipped + m->files_skipped > 0 &&
      (m->links_skipped != hpc_.links_skipped || m->files_skipped != hpc_.files_skipped)) {
    log_.warn(
        "HPC job mapping files skipped: symbolic links and other non-regular files are not read, nor "
        "files beyond the limit",
        {{"dir", options_.hpc_job_mapping_dir},
         {"not_regular", std::to_string(m->links_skipped)},
         {"beyond_limit", std::to_string(m->files_skipped)}});
  }
  hpc_ = std::move(m).value();
  hpc_read_ = now;
  hpc_read_wall_us_ = wall_us;
  hpc_dir_mtime_ns_ = dir_mtime_ns;
}

std::vector<std::string> HostOwnerResolver::hpc_jobs(const DeviceIdentity& gpu) {
  if (options_.hpc_job_mapping_dir.empty()) return {};
  std::lock_guard lock(mu_);
  refresh_hpc_locked();
  return jobs_of_locked(gpu);
}

std::vector<std::string> HostOwnerResolver::jobs_of_locked(const DeviceIdentity& gpu) const {
  if (gpu.parent_uuid.empty()) return hpc_jobs_for_gpu(hpc_, gpu.index, gpu.uuid);
  // A MIG device is named by its own uuid only: its parent's index names the whole GPU.
  auto it = hpc_.files.find(gpu.uuid);
  return it == hpc_.files.end() ? std::vector<std::string>{} : it->second;
}

const std::vector<kubelet::DeviceOwner>* HostOwnerResolver::pods_of(const kubelet::DeviceMap& map,
                                                                    const DeviceIdentity& gpu) {
  if (auto it = map.by_device.find(gpu.uuid); it != map.by_device.end()) return &it->second;
  // A MIG device is named by its "MIG-…" uuid only; the index and minor name its parent.
  if (!gpu.parent_uuid.empty()) return nullptr;
  // Plugins that name a GPU by its PCI address (AMD's): compared in one spelling, so that the
  // kubelet's "0000:c1:00.0" is the same slot as NVML's "00000000:C1:00.0".
  if (auto pci = kubelet::canonical_pci_address(gpu.pci_bus_id)) {
    if (auto it = map.by_device.find(*pci); it != map.by_device.end()) return &it->second;
  }
  if (auto it = map.by_device.find(std::to_string(gpu.index)); it != map.by_device.end()) return &it->second;
  if (gpu.device_minor) {
    if (auto it = map.by_device.find(kubelet::dra_gpu_key(*gpu.device_minor)); it != map.by_device.end()) {
      return &it->second;
    }
  }
  return nullptr;
}

void HostOwnerResolver::SourceOwners::update(std::vector<OwnerLabels> now, std::int64_t at_us) {
  std::sort(now.begin(), now.end());
  now.erase(std::unique(now.begin(), now.end()), now.end());
  if (now == owners) return;
  owners = std::move(now);
  since_us = at_us;
}

void HostOwnerResolver::refresh_slurm_locked() {
  const auto now = std::chrono::steady_clock::now();
  if (!read_due(slurm_read_, now, options_.hpc_refresh, options_.refresh_slack)) return;
  slurm_read_ = now;
  slurm_read_wall_us_ = wall_clock_us();
  auto jobs = read_slurm_job_gpus(options_.slurm_cgroups);
  if (jobs) {
    // Said, and counted, when it changes: not at every read of the same tree.
    if (jobs->jobs_left_out != slurm_left_out_ || jobs->jobs_unreadable != slurm_unreadable_) {
      if (jobs->jobs_left_out > slurm_left_out_) slurm_jobs_dropped_ += jobs->jobs_left_out - slurm_left_out_;
      if (jobs->jobs_left_out + jobs->jobs_unreadable > 0) {
        log_.warn("Slurm jobs' cgroups read in part; the jobs left out hold no allocation here",
                  {{"left_out", std::to_string(jobs->jobs_left_out)},
                   {"unreadable", std::to_string(jobs->jobs_unreadable)},
                   {"err", jobs->unreadable_error}});
      }
      slurm_left_out_ = jobs->jobs_left_out;
      slurm_unreadable_ = jobs->jobs_unreadable;
    }
    slurm_jobs_ = std::move(jobs->jobs);
    slurm_error_.clear();
  } else if (jobs.error().message != slurm_error_) {
    // The jobs last read are kept: an unreadable tree says nothing about who holds a GPU.
    slurm_error_ = jobs.error().message;
    log_.warn("cannot read the Slurm jobs' cgroups", {{"err", slurm_error_}});
  }
}

void HostOwnerResolver::learn_locked(const DeviceIdentity& gpu, const OwnerLabels& owner) {
  if (!options_.allocations) return;
  auto it = allocations_.find(gpu.uuid);
  if (it == allocations_.end()) return;
  GpuAllocation& a = it->second;
  for (const SourceOwners* src : {&a.pods, &a.mapped_jobs, &a.slurm_jobs}) {
    for (const OwnerLabels& o : src->owners) {
      if (!allocation_owns(o, owner) || a.learned.contains(o)) continue;
      a.learned.emplace(o, owner);
      a.learned_since_us = wall_clock_us();
    }
  }
}

std::optional<AllocationState> HostOwnerResolver::allocation(const DeviceIdentity& gpu) {
  const bool slurm = !options_.slurm_cgroups.cgroup_root.empty();
  if (!options_.allocations || (!kubelet_ && options_.hpc_job_mapping_dir.empty() && !slurm)) return std::nullopt;
  std::shared_ptr<const kubelet::DeviceMap> map = kubelet_ ? kubelet_->latest() : nullptr;
  std::lock_guard lock(mu_);
  const ProjectResolver& rules = *rules_;
  GpuAllocation& a = allocations_[gpu.uuid];
  if (map && map != a.map) {
    // A pod's allocation is seen when the List that first shows it returns: up to one refresh
    // interval after it began (docs/ledger.md, "Edges").
    std::vector<OwnerLabels> pods;
    if (const auto* owners = pods_of(*map, gpu)) {
      for (const auto& o : *owners) {
        const PodRef ref{o.namespace_, o.pod, o.container};
        pods.push_back(build_allocation_owner(&ref, "", "", rules));
      }
    }
    a.pods.update(std::move(pods),
                  std::chrono::duration_cast<std::chrono::microseconds>(map->fetched_at.time_since_epoch()).count());
    a.map = std::move(map);
  }
  auto job_owners = [&](const std::vector<std::string>& ids) {
    std::vector<OwnerLabels> out;
    for (const auto& j : ids) out.push_back(build_allocation_owner(nullptr, j, "", rules));
    return out;
  };
  if (!options_.hpc_job_mapping_dir.empty()) {
    refresh_hpc_locked();
    // A mapping file changed when it was written (its own time) or removed (the directory's).
    std::int64_t changed = 0;
    for (const std::string& file : {gpu.parent_uuid.empty() ? std::to_string(gpu.index) : gpu.uuid, gpu.uuid}) {
      if (auto it = hpc_changed_us_.find(file); it != hpc_changed_us_.end()) changed = std::max(changed, it->second);
    }
    a.mapped_jobs.update(job_owners(jobs_of_locked(gpu)), changed);
  }
  if (slurm) {
    refresh_slurm_locked();
    // Slurm numbers GPUs by their device minor (/dev/nvidia<N>); without one, by the index.
    // A MIG device by its uuid only.
    const std::string number =
        gpu.parent_uuid.empty() ? std::to_string(gpu.device_minor.value_or(gpu.index)) : gpu.uuid;
    std::vector<std::string> ids;
    for (const auto& job : slurm_jobs_) {
      if (std::find(job.gpus.begin(), job.gpus.end(), number) != job.gpus.end() ||
          std::find(job.gpus.begin(), job.gpus.end(), gpu.uuid) != job.gpus.end()) {
        ids.push_back(job.job_id);
      }
    }
    // Seen at a read: the change happened since the one before, up to one refresh earlier.
    a.slurm_jobs.update(job_owners(ids), slurm_read_wall_us_);
  }
  // Each allocation as the scheduler names it, with the project and user of its first process
  // where one was found: the rules over the process's attributes (its environment, its uid) say
  // more than those over a pod's or a job's names alone.
  std::vector<OwnerLabels> owners;
  std::erase_if(a.learned, [&](const auto& kv) {
    for (const SourceOwners* src : {&a.pods, &a.mapped_jobs, &a.slurm_jobs}) {
      if (std::binary_search(src->owners.begin(), src->owners.end(), kv.first)) return false;
    }
    return true;  // the allocation ended: what a new one of the same name runs is not known yet
  });
  for (const SourceOwners* src : {&a.pods, &a.mapped_jobs, &a.slurm_jobs}) {
    for (OwnerLabels o : src->owners) {
      if (auto it = a.learned.find(o); it != a.learned.end()) {
        o.project = it->second.project;
        o.user = it->second.user;
      }
      owners.push_back(std::move(o));
    }
  }
  std::sort(owners.begin(), owners.end());
  owners.erase(std::unique(owners.begin(), owners.end()), owners.end());
  if (owners != a.state.owners) {
    a.state =
        AllocationState{std::move(owners),
                        std::max({a.pods.since_us, a.mapped_jobs.since_us, a.slurm_jobs.since_us, a.learned_since_us})};
  }
  return a.state;
}

std::optional<std::int64_t> HostOwnerResolver::start_time_us(unsigned pid) const {
  auto info = cache()->peek(pid);
  if (!info) return std::nullopt;
  return info->start_unix_us;
}

OwnerLabels HostOwnerResolver::resolve(unsigned pid, const DeviceIdentity& gpu) {
  std::shared_ptr<ProcessCache> cache;
  std::shared_ptr<const ProjectResolver> rules;
  bool hostname_allowed = false;
  {
    std::lock_guard lock(mu_);
    cache = cache_;
    rules = rules_;
    hostname_allowed = hostname_allowed_;
    if (auto it = failed_.find(pid); it != failed_.end()) {
      if (std::chrono::steady_clock::now() - it->second < options_.negative_ttl) return unattributed_owner();
      failed_.erase(it);
    }
  }
  auto info = cache->lookup(pid);
  if (!info) {
    std::lock_guard lock(mu_);
    failed_[pid] = std::chrono::steady_clock::now();
    log_.debug("cannot read the owner of a GPU process", {{"pid", std::to_string(pid)}, {"err", info.error().message}});
    return unattributed_owner();
  }
  const ProcessInfo& p = **info;

  // A process in a pod cgroup on a GPU the kubelet has allocated: name its pod. Time-sliced
  // GPUs list several pods; the process's HOSTNAME (the pod name by default) picks one.
  std::optional<PodRef> pod;
  if (kubelet_ && !p.cgroup.pod_uid.empty()) {
    if (auto map = kubelet_->latest()) {
      const std::vector<kubelet::DeviceOwner>* owners = pods_of(*map, gpu);
      if (owners != nullptr && !owners->empty()) {
        const kubelet::DeviceOwner* match = nullptr;
        if (owners->size() == 1) {
          match = &owners->front();
        } else if (const std::string* host = p.env_value("HOSTNAME")) {
          for (const auto& o : *owners) {
            if (o.pod == *host) match = &o;
          }
        }
        if (match != nullptr) pod = PodRef{match->namespace_, match->pod, match->container};
      }
    }
  }
  std::vector<std::string> jobs = hpc_jobs(gpu);
  // The owner is a function of what was read, the pod and the jobs: built again only when one
  // of them changed, not every round.
  const std::pair<unsigned, std::string> key{pid, gpu.uuid};
  {
    std::lock_guard lock(mu_);
    if (auto it = built_.find(key);
        it != built_.end() && it->second.info == *info && it->second.pod == pod && it->second.jobs == jobs) {
      learn_locked(gpu, it->second.owner);
      return it->second.owner;
    }
  }
  OwnerLabels owner;
  if (!hostname_allowed && p.env_value("HOSTNAME") != nullptr) {
    ProcessInfo filtered = p;
    std::erase_if(filtered.env, [](const auto& kv) { return kv.first == "HOSTNAME"; });
    owner = build_owner(filtered, pod ? &*pod : nullptr, jobs, *rules);
  } else {
    owner = build_owner(p, pod ? &*pod : nullptr, jobs, *rules);
  }
  std::lock_guard lock(mu_);
  // A reload between the lookup and here: this owner was built by the rules it replaced.
  if (rules != rules_) return owner;
  built_[key] = BuiltOwner{*info, std::move(pod), std::move(jobs), owner};
  learn_locked(gpu, owner);
  return owner;
}

void HostOwnerResolver::retain(const std::vector<unsigned>& live_pids) {
  std::lock_guard lock(mu_);
  cache_->prune(live_pids);
  std::erase_if(failed_,
                [&](const auto& kv) { return !std::binary_search(live_pids.begin(), live_pids.end(), kv.first); });
  std::erase_if(
      built_, [&](const auto& kv) { return !std::binary_search(live_pids.begin(), live_pids.end(), kv.first.first); });
}

void HostOwnerResolver::contribute(AttributionStatus& st) const {
  {
    std::lock_guard lock(mu_);
    st.owner_lookups = lookups_before_ + cache_->hits() + cache_->misses();
    st.owner_lookup_errors = errors_before_ + cache_->errors();
    if (hpc_jobs_dropped_ > 0) st.series_dropped["hpc_job"] += hpc_jobs_dropped_;
    if (slurm_jobs_dropped_ > 0) st.series_dropped["slurm_job"] += slurm_jobs_dropped_;
  }
  if (kubelet_) {
    auto s = kubelet_->stats();
    st.kubelet_up = s.up;
    if (s.last_success) {
      st.kubelet_last_success_unix = std::chrono::duration<double>(s.last_success->time_since_epoch()).count();
    }
  }
}

}  // namespace gpumeter
