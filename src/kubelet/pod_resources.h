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

// One device of a Dynamic Resource Allocation (DRA) claim prepared for a container, e.g.
// driver_name "gpu.nvidia.com", pool_name the node, device_name "gpu-0".
struct ClaimDevice {
  std::string driver_name;
  std::string pool_name;
  std::string device_name;
  bool operator==(const ClaimDevice&) const = default;
};

struct ContainerResources {
  std::string name;
  std::vector<ContainerDevices> devices;
  std::vector<ClaimDevice> claim_devices;  // DRA, every claim's devices (kubelets that report them)
  bool operator==(const ContainerResources&) const = default;
};

struct PodResources {
  std::string name;
  std::string namespace_;
  std::vector<ContainerResources> containers;
  bool operator==(const PodResources&) const = default;
};

}  // namespace gpumeter::kubelet
