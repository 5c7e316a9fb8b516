#pragma once
// Plain C++ view of the kubelet pod-resources v1 List reply: only what gpumeter uses (pod and
// container names, device-plugin allocations). No protobuf or gRPC type appears here, so users
// of gpumeter_kubelet compile without the generated code.

#include <string>
#include <vector>

namespace gpumeter::kubelet {

// The kubelet's default socket (a DaemonSet mounts /var/lib/kubelet/pod-resources read-only).
inline constexpr const char* kDefaultSocketPath = "/var/lib/kubelet/pod-resources/kubelet.sock";

// One device plugin's allocation to one container, e.g. resource_name "nvidia.com/gpu",
// device_ids {"GPU-6f1c...", "GPU-8f2c...::3"}.
struct ContainerDevices {
  std::string resource_name;
  std::vector<std::string> device_ids;
  bool operator==(const ContainerDevices&) const = default;
};

struct ContainerResources {
  std::string name;
  std::vector<ContainerDevices> devices;
  bool operator==(const ContainerResources&) const = default;
};

struct PodResources {
  std::string name;
  std::string namespace_;
  std::vector<ContainerResources> containers;
  bool operator==(const PodResources&) const = default;
};

}  // namespace gpumeter::kubelet
