#pragma once
// The agent's OwnerResolver: /proc/<pid> (cgroup, uid, allow-listed environment) through a
// cache keyed by (pid, start time), user names from the host's passwd, pod names from the
// kubelet pod-resources API (refreshed in the background, never on this path), HPC job ids
// from dcgm-exporter's job-mapping directory, and the project from the configured rules.

#include <chrono>
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
#include "kubelet/device_map.h"
#include "ledger/usage_tracker.h"
#include "util/log.h"

namespace gpumeter {

struct HostOwnerResolverOptions {
  std::string procfs = "/proc";
  std::string rootfs = "/";
  std::vector<std::string> environment;  // allow-list
  std::string hpc_job_mapping_dir;       // "" when off
  std::chrono::milliseconds hpc_refresh{10'000};
  std::string kubelet_socket;            // "" when off
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
  void retain(const std::vector<unsigned>& live_pids) override;
  void contribute(AttributionStatus& status) const override;

 private:
  std::vector<std::string> hpc_jobs(const DeviceIdentity& gpu);

  HostOwnerResolverOptions options_;
  Logger& log_;
  bool hostname_allowed_ = false;  // HOSTNAME is read to tell pods apart; kept only if allow-listed
  ProcessCache cache_;
  std::unique_ptr<kubelet::KubeletWatcher> kubelet_;

  std::mutex mu_;  // guards the members below
  std::unordered_map<unsigned, std::chrono::steady_clock::time_point> failed_;
  struct BuiltOwner {
    std::shared_ptr<const ProcessInfo> info;
    std::optional<PodRef> pod;
    std::vector<std::string> jobs;
    OwnerLabels owner;
  };
  std::unordered_map<std::uint64_t, BuiltOwner> built_;  // by pid << 32 | GPU index
  HpcJobMapping hpc_;
  std::chrono::steady_clock::time_point hpc_read_{};
  std::string hpc_error_;
};

}  // namespace gpumeter
