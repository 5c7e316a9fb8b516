#include "sim/host/sim_kubelet.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace gpumeter::sim {

namespace {

using ContainerKey = std::tuple<std::string, std::string, std::string>;  // namespace, pod, container

ContainerKey key_of(const KubernetesRef& k) { return {k.namespace_, k.pod, k.container}; }

}  // namespace

SimKubelet::SimKubelet(const Scenario& scenario, Micros lead) : time_sliced_(scenario.gpus.size(), false) {
  add_listings(scenario, lead);
  // One device: a GPU (listings without a MIG instance) or a MIG instance (listings on it).
  for (unsigned g = 0; g < scenario.gpus.size(); ++g) {
    std::vector<std::size_t> on_gpu;
    for (std::size_t i = 0; i < listings_.size(); ++i) {
      const std::vector<unsigned>& gpus = listings_[i].gpus;
      if (listings_[i].mig == kNoMigInstance && std::find(gpus.begin(), gpus.end(), g) != gpus.end())
        on_gpu.push_back(i);
    }
    if (scenario.is_amd(g)) {
      // AMD's plugin: the GPU's PCI address, in every container that holds it (no replicas).
      const std::string id = amd_device_id(scenario.gpus[g].pci);
      for (std::size_t i : on_gpu) listings_[i].devices.emplace_back(kAmdGpuResourceName, id);
      continue;
    }
    time_sliced_[g] = list_device(on_gpu, kGpuResourceName, scenario.gpus[g].uuid);
  }
  // A MIG instance is its own device: its MIG UUID, under its profile's resource, time-sliced
  // (replicas) as a GPU is when two containers hold it at once.
  for (std::size_t m = 0; m < scenario.mig.instances.size(); ++m) {
    std::vector<std::size_t> on_instance;
    for (std::size_t i = 0; i < listings_.size(); ++i) {
      if (listings_[i].mig == m) on_instance.push_back(i);
    }
    if (on_instance.empty()) continue;
    const MigInstance& inst = scenario.mig.instances[m];
    list_device(on_instance, mig_resource_name(inst.profile_name), inst.uuid);
  }
}

void SimKubelet::add_listings(const Scenario& scenario, Micros lead) {
  for (const sim::Allocation& alloc : scenario.allocations) {
    const Micros end = std::min(alloc.end, scenario.duration);
    if (alloc.kubernetes.empty() || alloc.start >= end) continue;
    listings_.push_back(Listing{alloc.kubernetes, alloc.gpus, alloc.start, end, alloc.mig, {}});
  }
  for (const Job& job : scenario.jobs) {
    const Micros end = std::min(job.end, scenario.duration);
    if (job.kubernetes.empty() || job.start >= end) continue;
    if (job.allocation != kNoAllocation && !scenario.allocations[job.allocation].kubernetes.empty()) continue;
    listings_.push_back(Listing{
        job.kubernetes, job.gpus, job.start - lead, end >= kForever - lead ? kForever : end + lead, job.mig, {}});
  }
}

bool SimKubelet::list_device(std::vector<std::size_t> holders, const std::string& resource, const std::string& id) {
  // The holders by start; replica numbers handed out as the plugin would.
  struct Slot {
    std::size_t listing;
    unsigned replica;
  };
  bool sliced = false;
  std::stable_sort(holders.begin(), holders.end(),
                   [&](std::size_t a, std::size_t b) { return listings_[a].from < listings_[b].from; });
  std::vector<Slot> assigned;
  for (std::size_t i : holders) {
    const Listing& a = listings_[i];
    const ContainerKey key = key_of(a.ref);
    std::set<unsigned> taken;
    std::optional<unsigned> same_container;
    for (const Slot& s : assigned) {
      const Listing& b = listings_[s.listing];
      if (b.to <= a.from) continue;  // b started no later than a; overlapping iff it ends after
      if (key_of(b.ref) == key) {
        same_container = s.replica;  // two processes of one container share its allocation
      } else {
        taken.insert(s.replica);
        sliced = true;
      }
    }
    unsigned n = 0;
    if (same_container) {
      n = *same_container;
    } else {
      while (taken.count(n)) ++n;
    }
    assigned.push_back({i, n});
  }
  for (const Slot& s : assigned)
    listings_[s.listing].devices.emplace_back(resource, sliced ? fmt::format("{}::{}", id, s.replica) : id);
  return sliced;
}

std::string amd_device_id(const PciAddress& pci) {
  return fmt::format("{:04x}:{:02x}:{:02x}.0", pci.domain, pci.bus, pci.device);
}

std::string mig_resource_name(const std::string& profile) { return "nvidia.com/mig-" + profile; }

std::vector<kubelet::PodResources> SimKubelet::pods_at(Micros t) const {
  t = std::max<Micros>(t, 0);
  // namespace, pod -> container -> resource -> device ids
  std::map<std::pair<std::string, std::string>, std::map<std::string, std::map<std::string, std::vector<std::string>>>>
      pods;
  for (const Listing& a : listings_) {
    if (t < a.from || t >= a.to) continue;
    const KubernetesRef& k = a.ref;
    auto& resources = pods[{k.namespace_, k.pod}][k.container];
    for (const auto& [resource, id] : a.devices) {
      std::vector<std::string>& ids = resources[resource];
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    }
  }
  std::vector<kubelet::PodResources> out;
  for (auto& [pod_key, containers] : pods) {
    kubelet::PodResources pod;
    pod.namespace_ = pod_key.first;
    pod.name = pod_key.second;
    for (auto& [name, resources] : containers) {
      kubelet::ContainerResources c;
      c.name = name;
      for (auto& [resource, ids] : resources) c.devices.push_back(kubelet::ContainerDevices{resource, std::move(ids)});
      pod.containers.push_back(std::move(c));
    }
    out.push_back(std::move(pod));
  }
  return out;
}

}  // namespace gpumeter::sim
