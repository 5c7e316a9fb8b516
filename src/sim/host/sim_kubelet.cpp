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

SimKubelet::SimKubelet(const Scenario& scenario, Micros lead)
    : time_sliced_(scenario.gpus.size(), false) {
  // Pods' allocations and jobs' windows in one list, allocations first, each in scenario order.
  for (const sim::Allocation& alloc : scenario.allocations) {
    const Micros end = std::min(alloc.end, scenario.duration);
    if (alloc.kubernetes.empty() || alloc.start >= end) continue;
    listings_.push_back(Listing{alloc.kubernetes, alloc.gpus, alloc.start, end, {}});
  }
  for (const Job& job : scenario.jobs) {
    const Micros end = std::min(job.end, scenario.duration);
    if (job.kubernetes.empty() || job.start >= end) continue;
    if (job.allocation != kNoAllocation && !scenario.allocations[job.allocation].kubernetes.empty()) continue;
    listings_.push_back(
        Listing{job.kubernetes, job.gpus, job.start - lead, end >= kForever - lead ? kForever : end + lead, {}});
  }
  // Per GPU: its allocations by start; replica numbers handed out as the plugin would.
  struct Slot {
    std::size_t listing;
    unsigned replica;
  };
  std::vector<std::map<std::size_t, unsigned>> replica(scenario.gpus.size());  // listing -> n
  for (unsigned g = 0; g < scenario.gpus.size(); ++g) {
    std::vector<std::size_t> on_gpu;
    for (std::size_t i = 0; i < listings_.size(); ++i) {
      const std::vector<unsigned>& gpus = listings_[i].gpus;
      if (std::find(gpus.begin(), gpus.end(), g) != gpus.end()) on_gpu.push_back(i);
    }
    std::stable_sort(on_gpu.begin(), on_gpu.end(),
                     [&](std::size_t a, std::size_t b) { return listings_[a].from < listings_[b].from; });
    std::vector<Slot> assigned;
    for (std::size_t i : on_gpu) {
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
          time_sliced_[g] = true;
        }
      }
      unsigned n = 0;
      if (same_container) {
        n = *same_container;
      } else {
        while (taken.count(n)) ++n;
      }
      assigned.push_back({i, n});
      replica[g][i] = n;
    }
  }
  for (std::size_t i = 0; i < listings_.size(); ++i) {
    Listing& a = listings_[i];
    for (unsigned g : a.gpus) {
      const std::string& uuid = scenario.gpus[g].uuid;
      a.device_ids.push_back(time_sliced_[g] ? fmt::format("{}::{}", uuid, replica[g][i]) : uuid);
    }
  }
}

std::vector<kubelet::PodResources> SimKubelet::pods_at(Micros t) const {
  t = std::max<Micros>(t, 0);
  // namespace, pod -> container -> device ids
  std::map<std::pair<std::string, std::string>, std::map<std::string, std::vector<std::string>>> pods;
  for (const Listing& a : listings_) {
    if (t < a.from || t >= a.to) continue;
    const KubernetesRef& k = a.ref;
    std::vector<std::string>& ids = pods[{k.namespace_, k.pod}][k.container];
    for (const std::string& id : a.device_ids) {
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    }
  }
  std::vector<kubelet::PodResources> out;
  for (auto& [pod_key, containers] : pods) {
    kubelet::PodResources pod;
    pod.namespace_ = pod_key.first;
    pod.name = pod_key.second;
    for (auto& [name, ids] : containers) {
      kubelet::ContainerResources c;
      c.name = name;
      c.devices.push_back(kubelet::ContainerDevices{kGpuResourceName, std::move(ids)});
      pod.containers.push_back(std::move(c));
    }
    out.push_back(std::move(pod));
  }
  return out;
}

}  // namespace gpumeter::sim
