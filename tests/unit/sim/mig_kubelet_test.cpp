// The simulated kubelet on a MIG GPU: pods on MIG instances get the instances' MIG UUIDs under
// the device plugin's "mixed" resource names, replicas when two pods share an instance; the
// non-MIG GPU beside keeps nvidia.com/gpu and its GPU UUID.

#include <gtest/gtest.h>

#include <map>

#include "mig_scenario.h"
#include "sim/host/sim_kubelet.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

constexpr Micros S = kMicrosPerSecond;

// "namespace/pod/container" -> its devices.
std::map<std::string, std::vector<kubelet::ContainerDevices>> listed(const SimKubelet& k, Micros t) {
  std::map<std::string, std::vector<kubelet::ContainerDevices>> out;
  for (const auto& pod : k.pods_at(t)) {
    for (const auto& c : pod.containers) out[pod.namespace_ + "/" + pod.name + "/" + c.name] = c.devices;
  }
  return out;
}

TEST(MigKubelet, PodsOnSlicesGetMigUuidsUnderTheProfileResource) {
  const Scenario s = testing::parse_ok(testing::mig_yaml());
  const SimKubelet kubelet(s, 0);
  const std::string train = s.mig.instances[s.mig.find("train")].uuid;
  const std::string infer = s.mig.instances[s.mig.find("infer")].uuid;
  const std::string merged = s.mig.instances[s.mig.find("merged")].uuid;

  auto at30 = listed(kubelet, 30 * S);
  using D = kubelet::ContainerDevices;
  EXPECT_EQ(at30["team-vision/train-a/trainer"], (std::vector<D>{{"nvidia.com/mig-3g.40gb", {train}}}));
  // Two pods of two namespaces share "infer": replicas, as the plugin hands out when sharing.
  EXPECT_EQ(at30["team-nlp/serve-b/server"], (std::vector<D>{{"nvidia.com/mig-2g.20gb", {infer + "::0"}}}));
  EXPECT_EQ(at30["team-speech/asr-c/asr"], (std::vector<D>{{"nvidia.com/mig-2g.20gb", {infer + "::1"}}}));
  // The non-MIG GPU is not time-sliced and keeps its resource.
  EXPECT_EQ(at30["team-vision/train-g/trainer"], (std::vector<D>{{"nvidia.com/gpu", {s.gpus[1].uuid}}}));
  EXPECT_FALSE(kubelet.time_sliced(1));
  // After the re-partition, the allocation holds the new 2g.20gb instance.
  auto at60 = listed(kubelet, 60 * S);
  EXPECT_EQ(at60["team-ml/nb-f/notebook"], (std::vector<D>{{"nvidia.com/mig-2g.20gb", {merged}}}));
  EXPECT_EQ(at60.count("team-ml/nb-f/notebook"), 1u);
  EXPECT_EQ(listed(kubelet, 46 * S).count("team-ml/nb-f/notebook"), 0u);
}

TEST(MigKubelet, ResourceNameFollowsTheMixedStrategy) {
  EXPECT_EQ(mig_resource_name("1g.10gb"), "nvidia.com/mig-1g.10gb");
  EXPECT_EQ(mig_resource_name("3g.20gb"), "nvidia.com/mig-3g.20gb");
}

}  // namespace
}  // namespace gpumeter::sim
