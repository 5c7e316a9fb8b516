#pragma once
// What the simulated node's kubelet reports (`gpumeter sim kubelet`): the pod-resources v1
// List reply at a scenario time. Pure logic, no gRPC: the subcommand serves it.
//
// Each job with a `kubernetes` reference is one container's allocation of its GPUs during
// [start - lead, end + lead), the same window `gpumeter sim procfs` gives its pids, listed as
// each GPU's vendor's device plugin lists it (docs/kubelet.md, "Device ids"):
// - an NVIDIA GPU under `nvidia.com/gpu`, by its UUID; a job or allocation on a MIG instance
//   (`mig:`) holds that instance instead: its MIG UUID, under nvidia.com/mig-<profile>. A GPU
//   that two different containers hold at the same time somewhere in the scenario is
//   time-sliced: as the NVIDIA device plugin does with a sharing configuration, every
//   allocation of it, for its whole window, is a replica "<uuid>::<n>", n the lowest replica
//   number not held by another container at the allocation's start (a container keeps its
//   replica while it holds the GPU);
// - an AMD GPU under `amd.com/gpu`, by its PCI address as sysfs spells it ("0000:c1:00.0"): AMD's
//   plugin (ROCm/k8s-device-plugin) names each GPU after its folder in
//   /sys/module/amdgpu/drivers/pci:amdgpu/. That plugin shares no GPU (it has no replicas): a
//   scenario that puts two containers on one AMD GPU at once gets the plain address in both.
//
// An allocation of a pod (`allocations:` with `kubernetes`) is listed over exactly its span
// [start, end), with no lead, whether or not a process runs: that is what the kubelet reports
// while the pod holds its devices. Jobs that run in it (`allocation:`) add nothing of their own.

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "kubelet/pod_resources.h"
#include "sim/scenario/identifiers.h"
#include "sim/scenario/scenario.h"

namespace gpumeter::sim {

inline constexpr const char* kGpuResourceName = "nvidia.com/gpu";
inline constexpr const char* kAmdGpuResourceName = "amd.com/gpu";

// The id AMD's device plugin gives the GPU at `pci`: its sysfs PCI address, "0000:c1:00.0".
std::string amd_device_id(const PciAddress& pci);

// The resource NVIDIA's device plugin advertises a MIG device of `profile` under with its
// "mixed" MIG strategy: "nvidia.com/mig-3g.40gb".
std::string mig_resource_name(const std::string& profile);

class SimKubelet {
 public:
  SimKubelet(const Scenario& scenario, Micros lead);

  // Pods sorted by namespace and name, containers by name; t < 0 counts as 0.
  std::vector<kubelet::PodResources> pods_at(Micros t) const;

  // Whether a GPU's device ids carry replica suffixes (never for an AMD GPU).
  bool time_sliced(unsigned gpu) const { return time_sliced_.at(gpu); }

 private:
  // One container's hold on GPUs over [from, to): a job's window, or a pod's allocation.
  struct Listing {
    KubernetesRef ref;
    std::vector<unsigned> gpus;
    Micros from, to;
    std::size_t mig = kNoMigInstance;  // the MIG instance held, if any
    // (resource, device id) in `gpus` order: nvidia.com/gpu, amd.com/gpu, or the MIG
    // instance's nvidia.com/mig-<profile>.
    std::vector<std::pair<std::string, std::string>> devices;
  };
  // Pods' allocations and jobs' windows, allocations first, each in scenario order.
  void add_listings(const Scenario& scenario, Micros lead);
  // Lists the device `id` under `resource` in each of `holders` (indices into listings_): as
  // replicas "<id>::<n>" when two containers hold it at once; returns whether they do.
  bool list_device(std::vector<std::size_t> holders, const std::string& resource, const std::string& id);

  std::vector<Listing> listings_;
  std::vector<bool> time_sliced_;
};

}  // namespace gpumeter::sim
