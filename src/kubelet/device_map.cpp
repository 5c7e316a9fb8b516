#include "kubelet/device_map.h"

#include <algorithm>
#include <cstdio>

#include "kubelet/pod_resources_client.h"
#include "util/thread_name.h"

namespace gpumeter::kubelet {

std::string_view strip_replica_suffix(std::string_view device_id) {
  const std::size_t pos = device_id.rfind("::");
  if (pos == std::string_view::npos || pos == 0 || pos + 2 == device_id.size()) return device_id;
  const std::string_view replica = device_id.substr(pos + 2);
  if (!std::all_of(replica.begin(), replica.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return device_id;
  }
  return device_id.substr(0, pos);
}

bool resource_selected(std::string_view resource_name, const std::vector<std::string>& patterns) {
  if (patterns.empty()) return true;
  for (const std::string& pattern : patterns) {
    if (!pattern.empty() && pattern.back() == '*') {
      if (resource_name.starts_with(std::string_view(pattern).substr(0, pattern.size() - 1))) return true;
    } else if (resource_name == pattern) {
      return true;
    }
  }
  return false;
}

std::optional<std::string> canonical_pci_address(std::string_view text) {
  // domain ':' bus ':' device '.' function, each field hex; bus and device two digits, the
  // function one.
  auto hex = [](std::string_view field, std::size_t min_digits, std::size_t max_digits) -> std::optional<unsigned> {
    if (field.size() < min_digits || field.size() > max_digits) return std::nullopt;
    unsigned v = 0;
    for (char c : field) {
      unsigned d = 0;
      if (c >= '0' && c <= '9') {
        d = static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        d = static_cast<unsigned>(c - 'A' + 10);
      } else {
        return std::nullopt;
      }
      v = v * 16 + d;
    }
    return v;
  };
  const std::size_t c1 = text.find(':');
  if (c1 == std::string_view::npos) return std::nullopt;
  const std::size_t c2 = text.find(':', c1 + 1);
  if (c2 == std::string_view::npos) return std::nullopt;
  const std::size_t dot = text.find('.', c2 + 1);
  if (dot == std::string_view::npos) return std::nullopt;
  const auto domain = hex(text.substr(0, c1), 1, 8);
  const auto bus = hex(text.substr(c1 + 1, c2 - c1 - 1), 2, 2);
  const auto device = hex(text.substr(c2 + 1, dot - c2 - 1), 2, 2);
  const auto function = hex(text.substr(dot + 1), 1, 1);
  if (!domain || !bus || !device || !function || *device > 0x1f || *function > 7) return std::nullopt;
  char out[32];
  std::snprintf(out, sizeof out, "%04x:%02x:%02x.%x", *domain, *bus, *device, *function);
  return std::string(out);
}

std::string dra_gpu_key(unsigned device_minor) { return "gpu-" + std::to_string(device_minor); }

namespace {

// "gpu-<digits>", the DRA driver's name of a whole GPU.
bool is_dra_gpu_name(std::string_view name) {
  if (!name.starts_with("gpu-") || name.size() == 4 || name.size() > 4 + 10) return false;
  return std::all_of(name.begin() + 4, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

DeviceMap build_device_map(const std::vector<PodResources>& pods, const std::vector<std::string>& resource_names) {
  DeviceMap map;
  map.fetched_at = std::chrono::system_clock::now();
  for (const PodResources& pod : pods) {
    for (const ContainerResources& container : pod.containers) {
      for (const ContainerDevices& devices : container.devices) {
        if (!resource_selected(devices.resource_name, resource_names)) continue;
        for (const std::string& id : devices.device_ids) {
          const std::string_view device = strip_replica_suffix(id);
          if (device.empty()) continue;
          const std::optional<std::string> pci = canonical_pci_address(device);
          map.by_device[pci ? *pci : std::string(device)].push_back(
              DeviceOwner{pod.namespace_, pod.name, container.name, devices.resource_name});
        }
      }
      for (const ClaimDevice& d : container.claim_devices) {
        if (d.driver_name != kNvidiaDraDriver || !is_dra_gpu_name(d.device_name)) continue;
        map.by_device[d.device_name].push_back(DeviceOwner{pod.namespace_, pod.name, container.name, d.driver_name});
      }
    }
  }
  // A container holding two replicas of one GPU is one owner of it; the kubelet's pod order is
  // arbitrary, so sort for a stable result.
  for (auto& [device, owners] : map.by_device) {
    std::sort(owners.begin(), owners.end());
    owners.erase(std::unique(owners.begin(), owners.end()), owners.end());
  }
  return map;
}

KubeletWatcher::KubeletWatcher(Options options, Logger& log)
    : options_(std::move(options)),
      log_(log),
      client_(std::make_unique<PodResourcesClient>(options_.socket_path, options_.max_message_bytes)) {}

KubeletWatcher::~KubeletWatcher() { stop(); }

void KubeletWatcher::start() {
  std::lock_guard lock(mu_);
  if (started_ || stopping_) return;
  started_ = true;
  thread_ = std::thread([this] {
    name_this_thread("gm-kubelet");
    run();
  });
}

void KubeletWatcher::stop() {
  std::lock_guard stop_lock(stop_mu_);
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  client_->shutdown();  // a List in flight returns CANCELLED now instead of at its deadline
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const DeviceMap> KubeletWatcher::latest() const {
  std::lock_guard lock(mu_);
  return latest_;
}

KubeletWatcher::Stats KubeletWatcher::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void KubeletWatcher::run() {
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    refresh();
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, options_.refresh_interval, [this] { return stopping_; })) return;
  }
}

namespace {

std::string age_text(std::chrono::system_clock::time_point since) {
  const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now() - since);
  return std::to_string(age.count() / 1000) + "." + std::to_string(age.count() % 1000 / 100) + "s";
}

}  // namespace

void KubeletWatcher::refresh() {
  const auto t0 = std::chrono::steady_clock::now();
  auto result = client_->list(options_.timeout);
  const auto duration = std::chrono::steady_clock::now() - t0;

  std::shared_ptr<const DeviceMap> map;
  std::size_t pods = 0;
  if (result.ok()) {
    pods = result->size();
    map = std::make_shared<const DeviceMap>(build_device_map(*result, options_.resource_names));
  }

  enum class Transition { kNone, kFirstUp, kRecovered, kDown } transition = Transition::kNone;
  std::optional<std::chrono::system_clock::time_point> kept_since;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;  // the call was cancelled by stop(); not a kubelet failure
    stats_.last_duration = duration;
    if (map) {
      if (stats_.successes == 0) transition = Transition::kFirstUp;
      if (logged_down_) transition = Transition::kRecovered;
      logged_down_ = false;
      ++stats_.successes;
      stats_.last_success = map->fetched_at;
      stats_.up = true;
      latest_ = map;
    } else {
      ++stats_.failures;
      stats_.last_error = result.error().message;
      stats_.up = false;
      if (!logged_down_) transition = Transition::kDown;
      logged_down_ = true;
      kept_since = stats_.last_success;
    }
  }

  const std::string socket = options_.socket_path;
  switch (transition) {
    case Transition::kFirstUp:
    case Transition::kRecovered:
      log_.info(
          transition == Transition::kFirstUp ? "kubelet pod-resources API up" : "kubelet pod-resources API recovered",
          {{"socket", socket}, {"pods", std::to_string(pods)}, {"devices", std::to_string(map->by_device.size())}});
      break;
    case Transition::kDown:
      log_.warn("kubelet pod-resources API unavailable; keeping the last device map and retrying",
                {{"socket", socket},
                 {"err", result.error().message},
                 {"map_age", kept_since ? age_text(*kept_since) : "none"},
                 {"retry_interval", std::to_string(options_.refresh_interval.count()) + "ms"}});
      break;
    case Transition::kNone:
      if (!map && log_.enabled(LogLevel::kDebug)) {
        log_.debug("kubelet pod-resources List failed", {{"socket", socket}, {"err", result.error().message}});
      }
      break;
  }
}

}  // namespace gpumeter::kubelet
