#pragma once
// Which containers each GPU is allocated to, from the kubelet's pod-resources API, kept fresh by
// a background thread so that nothing on the scrape or sampling path ever waits on the kubelet.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kubelet/pod_resources.h"
#include "util/log.h"

namespace gpumeter::kubelet {

class PodResourcesClient;

struct DeviceOwner {
  std::string namespace_;
  std::string pod;
  std::string container;
  std::string resource_name;
  bool operator==(const DeviceOwner&) const = default;
  auto operator<=>(const DeviceOwner&) const = default;
};

// GPU id -> every container it is allocated to, sorted, each container once.
// The id is what the device plugin reported with any replica suffix removed: a UUID such as
// "GPU-6f1c...", a MIG device UUID "MIG-...", a GPU index as a string ("0") for plugins
// configured with deviceIDStrategy=index, or a PCI address (AMD's plugin), kept in the form
// canonical_pci_address gives. Time-sliced and MPS replicas from the NVIDIA device
// plugin are reported as "GPU-<uuid>::<n>"; they all map to "GPU-<uuid>", so a GPU shared by
// two pods lists both.
struct DeviceMap {
  std::map<std::string, std::vector<DeviceOwner>> by_device;
  std::chrono::system_clock::time_point fetched_at;
};

// "GPU-abc::3" -> "GPU-abc". Only a "::" followed by decimal digits to the end is a replica
// suffix; any other id is returned unchanged.
std::string_view strip_replica_suffix(std::string_view device_id);

// A PCI address in one spelling: "%04x:%02x:%02x.%x", lower case ("0000:c1:00.0"). Accepts a
// domain of 1 to 8 hex digits and either case ("00000000:C1:00.0", as NVML prints it, gives
// "0000:c1:00.0"); nullopt for anything that is not a PCI address.
std::optional<std::string> canonical_pci_address(std::string_view text);

// Whether `resource_name` is selected by `patterns`: an entry matches the name exactly, or,
// when it ends in '*', every name that starts with the part before the '*'
// ("nvidia.com/mig-*" selects each MIG profile's resource). No patterns selects everything.
bool resource_selected(std::string_view resource_name, const std::vector<std::string>& patterns);

// NVIDIA's DRA driver (gpu.nvidia.com) names a whole GPU "gpu-<minor>", the minor number of its
// /dev/nvidia<N> (GpuInfo.CanonicalName in kubernetes-sigs/dra-driver-nvidia-gpu's
// cmd/gpu-kubelet-plugin/deviceinfo.go). The map keys such a claim device by that name.
inline constexpr std::string_view kNvidiaDraDriver = "gpu.nvidia.com";
std::string dra_gpu_key(unsigned device_minor);  // "gpu-<minor>"

// Builds the map from a List reply, keeping only devices whose resource_name is selected by
// resource_names (see resource_selected; e.g. {"nvidia.com/gpu", "nvidia.com/mig-*"}); an empty
// resource_names keeps every resource. DRA claim devices of kNvidiaDraDriver named like a whole
// GPU (dra_gpu_key) are kept too, with the driver's name as their resource_name; other claim
// devices (MIG slices, other drivers) are not GPUs this map knows. fetched_at is now.
DeviceMap build_device_map(const std::vector<PodResources>& pods, const std::vector<std::string>& resource_names);

// Calls List every refresh_interval on a background thread and publishes an immutable DeviceMap.
//
// - latest() never blocks on the kubelet: it copies a shared_ptr under a short mutex.
// - On failure the previous map stays published (its fetched_at ages; the agent exports that
//   age), the failure is counted, and one warn line is logged when the state goes from up to
//   down (and one info line when it comes back), not one per retry.
// - stop() cancels a List in flight and joins the thread. It returns promptly: the cancel takes
//   effect at once, and even a call that ignored it is bounded by `timeout`.
class KubeletWatcher {
 public:
  struct Options {
    std::string socket_path = kDefaultSocketPath;
    std::chrono::milliseconds refresh_interval{10000};
    std::chrono::milliseconds timeout{5000};
    std::size_t max_message_bytes = 16 << 20;
    std::vector<std::string> resource_names;  // see resource_selected; empty = every resource
  };

  struct Stats {
    uint64_t successes = 0;
    uint64_t failures = 0;
    std::optional<std::chrono::system_clock::time_point> last_success;
    std::string last_error;                     // of the latest failure; kept after a recovery
    bool up = false;                            // the latest attempt succeeded
    std::chrono::nanoseconds last_duration{0};  // of the latest attempt
  };

  KubeletWatcher(Options options, Logger& log);
  ~KubeletWatcher();  // stop()
  KubeletWatcher(const KubeletWatcher&) = delete;
  KubeletWatcher& operator=(const KubeletWatcher&) = delete;

  // Starts the thread; its first List runs at once. Calling start() twice, or after stop(),
  // does nothing.
  void start();
  void stop();

  std::shared_ptr<const DeviceMap> latest() const;  // nullptr until the first success
  Stats stats() const;
  const Options& options() const { return options_; }

 private:
  void run();
  void refresh();

  Options options_;
  Logger& log_;
  std::unique_ptr<PodResourcesClient> client_;

  std::mutex stop_mu_;     // serializes stop()
  mutable std::mutex mu_;  // guards everything below
  std::shared_ptr<const DeviceMap> latest_;
  Stats stats_;
  bool logged_down_ = false;  // a down state has been logged and not yet a recovery
  bool started_ = false;
  bool stopping_ = false;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace gpumeter::kubelet
