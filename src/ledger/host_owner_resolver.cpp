#include "ledger/host_owner_resolver.h"

#include <algorithm>
#include <thread>

#include "attribution/owner_builder.h"

namespace gpumeter {

namespace {

std::vector<std::string> with_hostname(std::vector<std::string> allow) {
  if (std::find(allow.begin(), allow.end(), "HOSTNAME") == allow.end()) allow.push_back("HOSTNAME");
  return allow;
}

}  // namespace

HostOwnerResolver::HostOwnerResolver(HostOwnerResolverOptions options, Logger& log)
    : options_(std::move(options)),
      log_(log),
      hostname_allowed_(std::find(options_.environment.begin(), options_.environment.end(), "HOSTNAME") !=
                        options_.environment.end()),
      cache_(ProcfsReader(options_.procfs, options_.rootfs, with_hostname(options_.environment))) {
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
  const auto deadline = std::chrono::steady_clock::now() + std::min<std::chrono::milliseconds>(
                                                                options_.kubelet.timeout, std::chrono::seconds(3));
  while (!kubelet_->latest() && kubelet_->stats().failures == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void HostOwnerResolver::stop() {
  if (kubelet_) kubelet_->stop();
}

std::vector<std::string> HostOwnerResolver::hpc_jobs(const DeviceIdentity& gpu) {
  if (options_.hpc_job_mapping_dir.empty()) return {};
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (hpc_read_ == std::chrono::steady_clock::time_point{} || now - hpc_read_ >= options_.hpc_refresh) {
    hpc_read_ = now;
    auto m = read_hpc_job_mapping(options_.hpc_job_mapping_dir);
    if (m) {
      hpc_ = std::move(m).value();
      hpc_error_.clear();
    } else if (m.error().message != hpc_error_) {
      hpc_error_ = m.error().message;
      hpc_.clear();
      log_.warn("cannot read the HPC job mapping directory", {{"err", hpc_error_}});
    }
  }
  return hpc_jobs_for_gpu(hpc_, gpu.index, gpu.uuid);
}

std::optional<std::int64_t> HostOwnerResolver::start_time_us(unsigned pid) const {
  auto info = cache_.peek(pid);
  if (!info) return std::nullopt;
  return info->start_unix_us;
}

OwnerLabels HostOwnerResolver::resolve(unsigned pid, const DeviceIdentity& gpu) {
  {
    std::lock_guard lock(mu_);
    if (auto it = failed_.find(pid); it != failed_.end()) {
      if (std::chrono::steady_clock::now() - it->second < options_.negative_ttl) return unattributed_owner();
      failed_.erase(it);
    }
  }
  auto info = cache_.lookup(pid);
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
      const std::vector<kubelet::DeviceOwner>* owners = nullptr;
      for (const std::string& key : {gpu.uuid, std::to_string(gpu.index)}) {
        if (auto it = map->by_device.find(key); it != map->by_device.end()) {
          owners = &it->second;
          break;
        }
      }
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
  const std::uint64_t key = (std::uint64_t{pid} << 32) | gpu.index;
  {
    std::lock_guard lock(mu_);
    if (auto it = built_.find(key);
        it != built_.end() && it->second.info == *info && it->second.pod == pod && it->second.jobs == jobs) {
      return it->second.owner;
    }
  }
  OwnerLabels owner;
  if (!hostname_allowed_ && p.env_value("HOSTNAME") != nullptr) {
    ProcessInfo filtered = p;
    std::erase_if(filtered.env, [](const auto& kv) { return kv.first == "HOSTNAME"; });
    owner = build_owner(filtered, pod ? &*pod : nullptr, jobs, options_.rules);
  } else {
    owner = build_owner(p, pod ? &*pod : nullptr, jobs, options_.rules);
  }
  std::lock_guard lock(mu_);
  built_[key] = BuiltOwner{*info, std::move(pod), std::move(jobs), owner};
  return owner;
}

void HostOwnerResolver::retain(const std::vector<unsigned>& live_pids) {
  cache_.prune(live_pids);
  std::lock_guard lock(mu_);
  std::erase_if(failed_, [&](const auto& kv) {
    return !std::binary_search(live_pids.begin(), live_pids.end(), kv.first);
  });
  std::erase_if(built_, [&](const auto& kv) {
    return !std::binary_search(live_pids.begin(), live_pids.end(), static_cast<unsigned>(kv.first >> 32));
  });
}

void HostOwnerResolver::contribute(AttributionStatus& st) const {
  st.owner_lookups = cache_.hits() + cache_.misses();
  st.owner_lookup_errors = cache_.errors();
  if (kubelet_) {
    auto s = kubelet_->stats();
    st.kubelet_up = s.up;
    if (s.last_success) {
      st.kubelet_last_success_unix = std::chrono::duration<double>(s.last_success->time_since_epoch()).count();
    }
  }
}

}  // namespace gpumeter
