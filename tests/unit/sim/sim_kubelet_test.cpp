// The simulated kubelet's pod-resources List reply at scenario times: which pods, which
// containers, which device ids, with time-sliced GPUs as device-plugin replicas.

#include "sim/host/sim_kubelet.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace gpumeter::sim {
namespace {

constexpr Micros S = kMicrosPerSecond;

// GPU 0: one pod alone. GPU 1: time-sliced by three containers of two namespaces, one after
// another and overlapping, plus a process outside Kubernetes. GPUs 2-3: one container whose
// two processes are two jobs, and a second container of the same pod.
const std::string kScenario = std::string(testing::kModel) + R"(
gpus:
  - {model: m, uuid: GPU-0}
  - {model: m, uuid: GPU-1}
  - {model: m, uuid: GPU-2}
  - {model: m, uuid: GPU-3}
duration: 200
jobs:
  - {name: alone, gpus: [0], pid: 10, utilization: 0.5,
     kubernetes: {namespace: team-a, pod: solo, container: main}}
  - {name: b, start: 10, end: 50, gpus: [1], pid: 20, utilization: 0.3,
     kubernetes: {namespace: team-b, pod: notebook, container: jupyter}}
  - {name: c, start: 30, end: 80, gpus: [1], pid: 21, utilization: 0.3,
     kubernetes: {namespace: team-a, pod: eval, container: eval}}
  - {name: d, start: 70, end: 90, gpus: [1], pid: 22, utilization: 0.3,
     kubernetes: {namespace: team-b, pod: notebook-2, container: jupyter}}
  - {name: host, start: 0, gpus: [1], pid: 23, utilization: 0.05}
  - {name: w0, start: 100, end: 150, gpus: [2], pid: 30, utilization: 0.5,
     kubernetes: {namespace: team-a, pod: trainer, container: worker}}
  - {name: w1, start: 100, end: 150, gpus: [3], pid: 31, utilization: 0.5,
     kubernetes: {namespace: team-a, pod: trainer, container: worker}}
  - {name: side, start: 120, end: 130, gpus: [3], pid: 32, utilization: 0.1,
     kubernetes: {namespace: team-a, pod: trainer, container: metrics}}
)";

using kubelet::ContainerDevices;
using kubelet::ContainerResources;
using kubelet::PodResources;

PodResources pod(std::string ns, std::string name, std::vector<ContainerResources> containers) {
  return PodResources{std::move(name), std::move(ns), std::move(containers)};
}

ContainerResources container(std::string name, std::vector<std::string> ids) {
  return ContainerResources{std::move(name), {ContainerDevices{"nvidia.com/gpu", std::move(ids)}}};
}

std::string describe(const std::vector<PodResources>& pods) {
  std::string s;
  for (const auto& p : pods) {
    s += p.namespace_ + "/" + p.name + ":";
    for (const auto& c : p.containers) {
      s += " " + c.name + "[";
      for (const auto& d : c.devices) {
        for (const auto& id : d.device_ids) s += id + " ";
      }
      s += "]";
    }
    s += "\n";
  }
  return s;
}

TEST(SimKubelet, PodsPresentWithinTheLeadOfTheirJobs) {
  Scenario s = testing::parse_ok(kScenario);
  SimKubelet k(s, 5 * S);
  EXPECT_FALSE(k.time_sliced(0));
  EXPECT_TRUE(k.time_sliced(1));
  EXPECT_FALSE(k.time_sliced(2));
  EXPECT_TRUE(k.time_sliced(3));  // trainer/worker and trainer/metrics at once

  auto at = [&](double seconds) { return k.pods_at(static_cast<Micros>(seconds * S)); };
  // Only the lone pod: b comes 5 s before it starts. A GPU nobody shares keeps its plain UUID.
  EXPECT_EQ(at(0), (std::vector<PodResources>{pod("team-a", "solo", {container("main", {"GPU-0"})})}))
      << describe(at(0));
  EXPECT_EQ(at(-3), at(0));
  EXPECT_EQ(at(4.999999).size(), 1u);
  // b holds replica 0 of GPU 1 for its whole allocation, alone or not.
  EXPECT_EQ(at(5), (std::vector<PodResources>{pod("team-a", "solo", {container("main", {"GPU-0"})}),
                                              pod("team-b", "notebook", {container("jupyter", {"GPU-1::0"})})}))
      << describe(at(5));
  // c arrives while b holds replica 0, so takes 1; sorted by namespace, then pod name.
  EXPECT_EQ(at(40), (std::vector<PodResources>{pod("team-a", "eval", {container("eval", {"GPU-1::1"})}),
                                               pod("team-a", "solo", {container("main", {"GPU-0"})}),
                                               pod("team-b", "notebook", {container("jupyter", {"GPU-1::0"})})}))
      << describe(at(40));
  // b goes 5 s after it ends; c keeps replica 1; d, arriving at 65, takes the free 0.
  EXPECT_EQ(at(54.999999).size(), 3u);
  EXPECT_EQ(at(66), (std::vector<PodResources>{pod("team-a", "eval", {container("eval", {"GPU-1::1"})}),
                                               pod("team-a", "solo", {container("main", {"GPU-0"})}),
                                               pod("team-b", "notebook-2", {container("jupyter", {"GPU-1::0"})})}))
      << describe(at(66));
  // Two processes of one container are one container with both GPUs; another container of
  // the same pod is listed beside it. GPU 3 is time-sliced between them.
  EXPECT_EQ(
      at(125),
      (std::vector<PodResources>{
          pod("team-a", "solo", {container("main", {"GPU-0"})}),
          pod("team-a", "trainer", {container("metrics", {"GPU-3::1"}), container("worker", {"GPU-2", "GPU-3::0"})})}))
      << describe(at(125));
  // The scenario's end cuts every job; the lone pod goes 5 s later.
  EXPECT_EQ(at(204.999999).size(), 1u);
  EXPECT_TRUE(at(205).empty());
}

TEST(SimKubelet, ZeroLeadFollowsTheJobsExactly) {
  Scenario s = testing::parse_ok(kScenario);
  SimKubelet k(s, 0);
  EXPECT_EQ(k.pods_at(10 * S - 1).size(), 1u);
  EXPECT_EQ(k.pods_at(10 * S).size(), 2u);
  EXPECT_EQ(k.pods_at(50 * S - 1).size(), 3u);
  EXPECT_EQ(k.pods_at(50 * S).size(), 2u);
  // Without the lead, b and d do not meet c in a way that changes c's replica: c still got 1.
  EXPECT_EQ(k.pods_at(75 * S)[0], pod("team-a", "eval", {container("eval", {"GPU-1::1"})}));
}

TEST(SimKubelet, NoKubernetesJobsNoPods) {
  Scenario s = testing::parse_ok(std::string(testing::kModel) +
                                 "gpus: {count: 1, model: m}\njobs:\n"
                                 "  - {name: a, gpus: [0], pid: 1, utilization: 0.5}\n");
  SimKubelet k(s, 5 * S);
  EXPECT_TRUE(k.pods_at(0).empty());
  EXPECT_FALSE(k.time_sliced(0));
}

// AMD GPUs as AMD's device plugin lists them: amd.com/gpu, the sysfs PCI address, no replicas.
TEST(SimKubelet, AmdGpusByPciAddressUnderAmdResource) {
  Scenario s = testing::parse_ok(std::string(testing::kModel) + testing::kAmdModelEntry + R"(gpus:
  - {model: m, uuid: GPU-0}
  - {model: mi, pci_bus_id: "0000:C1:00.0"}
  - {model: mi, pci_bus_id: "0000:0A:00.0"}
duration: 100
jobs:
  - {name: mixed, start: 0, end: 50, gpus: [0, 1], pids: [10, 11], utilization: 0.5,
     kubernetes: {namespace: team-a, pod: both, container: main}}
  - {name: a, start: 10, end: 60, gpus: [2], pid: 20, utilization: 0.3,
     kubernetes: {namespace: team-b, pod: one, container: main}}
  - {name: b, start: 30, end: 70, gpus: [2], pid: 21, utilization: 0.3,
     kubernetes: {namespace: team-b, pod: two, container: main}}
)");
  ASSERT_TRUE(s.is_amd(1));
  EXPECT_EQ(amd_device_id(s.gpus[1].pci), "0000:c1:00.0");
  SimKubelet k(s, 0);
  EXPECT_FALSE(k.time_sliced(2)) << "AMD's plugin has no replicas";
  // One container holding an NVIDIA and an AMD GPU: each under its vendor's resource.
  EXPECT_EQ(
      k.pods_at(40 * S),
      (std::vector<PodResources>{
          pod("team-a", "both",
              {ContainerResources{
                  "main",
                  {ContainerDevices{"amd.com/gpu", {"0000:c1:00.0"}}, ContainerDevices{"nvidia.com/gpu", {"GPU-0"}}}}}),
          pod("team-b", "one", {ContainerResources{"main", {ContainerDevices{"amd.com/gpu", {"0000:0a:00.0"}}}}}),
          pod("team-b", "two", {ContainerResources{"main", {ContainerDevices{"amd.com/gpu", {"0000:0a:00.0"}}}}})}))
      << describe(k.pods_at(40 * S));
  EXPECT_EQ(k.pods_at(65 * S),
            (std::vector<PodResources>{pod(
                "team-b", "two", {ContainerResources{"main", {ContainerDevices{"amd.com/gpu", {"0000:0a:00.0"}}}}})}));
}

}  // namespace
}  // namespace gpumeter::sim
