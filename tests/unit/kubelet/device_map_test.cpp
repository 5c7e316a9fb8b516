// build_device_map and the replica-suffix rule, without gRPC.

#include "kubelet/device_map.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kubelet_test_support.h"

namespace gpumeter::kubelet {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::kUuidA;
using testing::kUuidB;
using testing::kUuidC;

TEST(kubelet_device_map, StripsOnlyNumericReplicaSuffixes) {
  EXPECT_EQ(strip_replica_suffix("GPU-abc::0"), "GPU-abc");
  EXPECT_EQ(strip_replica_suffix("GPU-abc::17"), "GPU-abc");
  EXPECT_EQ(strip_replica_suffix("GPU-abc"), "GPU-abc");
  EXPECT_EQ(strip_replica_suffix("3"), "3");
  EXPECT_EQ(strip_replica_suffix("3::1"), "3");
  EXPECT_EQ(strip_replica_suffix("MIG-5a7c1e2f-1b2c-5d3e-8f4a-0b1c2d3e4f5a"),
            "MIG-5a7c1e2f-1b2c-5d3e-8f4a-0b1c2d3e4f5a");
  // Not a replica suffix: kept whole.
  EXPECT_EQ(strip_replica_suffix("GPU-abc::"), "GPU-abc::");
  EXPECT_EQ(strip_replica_suffix("GPU-abc::x1"), "GPU-abc::x1");
  EXPECT_EQ(strip_replica_suffix("::1"), "::1");
  EXPECT_EQ(strip_replica_suffix(""), "");
}

TEST(kubelet_device_map, MapsWholeAndSharedGpusToTheirContainers) {
  const DeviceMap map = build_device_map(testing::sample_node(), {"nvidia.com/gpu"});
  ASSERT_EQ(map.by_device.size(), 3u);
  EXPECT_THAT(map.by_device.at(kUuidA), ElementsAre(DeviceOwner{"ml", "train-0", "trainer", "nvidia.com/gpu"}));
  EXPECT_THAT(map.by_device.at(kUuidB), ElementsAre(DeviceOwner{"ml", "train-0", "trainer", "nvidia.com/gpu"}));
  // Two time-sliced replicas of one GPU: one physical id, both pods.
  EXPECT_THAT(map.by_device.at(kUuidC), ElementsAre(DeviceOwner{"tenants", "infer-a", "server", "nvidia.com/gpu"},
                                                    DeviceOwner{"tenants", "infer-b", "server", "nvidia.com/gpu"}));
  EXPECT_EQ(map.by_device.count(std::string(kUuidC) + "::0"), 0u);
}

TEST(kubelet_device_map, DraClaimsOfWholeNvidiaGpusAreKeyedByTheirMinor) {
  PodResources pod{"notebook", "team-vision", {}};
  ContainerResources c;
  c.name = "lab";
  c.claim_devices = {{"gpu.nvidia.com", "node-1", "gpu-3"},
                     {"gpu.nvidia.com", "node-1", "gpu-0-mig-1g10gb-0"},  // a MIG slice: not a whole GPU
                     {"gpu.example.com", "node-1", "gpu-1"},              // another driver
                     {"gpu.nvidia.com", "node-1", "gpu-"}};
  pod.containers.push_back(c);
  const DeviceMap map = build_device_map({pod}, {"nvidia.com/gpu"});
  ASSERT_EQ(map.by_device.size(), 1u);
  EXPECT_THAT(map.by_device.at(dra_gpu_key(3)),
              ElementsAre(DeviceOwner{"team-vision", "notebook", "lab", "gpu.nvidia.com"}));
}

TEST(kubelet_device_map, EmptyResourceNamesKeepsEveryResource) {
  const DeviceMap map = build_device_map(testing::sample_node(), {});
  EXPECT_EQ(map.by_device.size(), 5u);
  EXPECT_THAT(map.by_device.at("hca0"),
              ElementsAre(DeviceOwner{"ml", "train-0", "trainer", "rdma/hca_shared_devices_a"}));
  EXPECT_THAT(map.by_device.at("nic-3"), ElementsAre(DeviceOwner{"infra", "net-0", "agent", "example.com/nic"}));
}

TEST(kubelet_device_map, FiltersByEveryListedResourceName) {
  std::vector<PodResources> pods = {
      {"mig-0", "ml", {{"main", {{"nvidia.com/mig-1g.10gb", {"MIG-11111111-2222-5333-8444-555555555555"}}}}}},
      {"gpu-0", "ml", {{"main", {{"nvidia.com/gpu", {kUuidA}}}}}},
      {"amd-0", "ml", {{"main", {{"amd.com/gpu", {"0000:c1:00.0"}}}}}},
      {"fpga-0", "ml", {{"main", {{"example.com/fpga", {"fpga0"}}}}}},
  };
  const DeviceMap map = build_device_map(pods, {"nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "amd.com/gpu"});
  std::vector<std::string> ids;
  for (const auto& [id, owners] : map.by_device) ids.push_back(id);
  EXPECT_THAT(ids, ElementsAre("0000:c1:00.0", kUuidA, "MIG-11111111-2222-5333-8444-555555555555"));
}

TEST(kubelet_device_map, PciAddressesInOneSpelling) {
  EXPECT_EQ(canonical_pci_address("0000:c1:00.0"), "0000:c1:00.0");
  EXPECT_EQ(canonical_pci_address("0000:C1:00.0"), "0000:c1:00.0");
  EXPECT_EQ(canonical_pci_address("00000000:C1:00.0"), "0000:c1:00.0");  // as NVML prints it
  EXPECT_EQ(canonical_pci_address("0:03:1f.7"), "0000:03:1f.7");
  EXPECT_EQ(canonical_pci_address("10000:e2:00.1"), "10000:e2:00.1");  // a VMD domain
  for (const char* not_pci : {"", "0", "GPU-6f1c4a2e-0b9d-4c51-8e3f-2d7a9b1c0e11", "0x8a1c3e5f7b2d4e60",
                              "amd-0000:c1:00.0", "0000:c1:00", "0000:c1:00.0.0", "0000:c1:20.0", "0000:c1:00.8",
                              "000000000:c1:00.0", "0000:1:00.0", "0000:c1:0g.0", "gpu-3", "0000:c1:00.0::1"}) {
    EXPECT_EQ(canonical_pci_address(not_pci), std::nullopt) << not_pci;
  }
}

TEST(kubelet_device_map, PciAddressIdsAreKeptInOneSpelling) {
  // AMD's plugin names a GPU by its sysfs PCI address; another plugin may spell it otherwise.
  std::vector<PodResources> pods = {
      {"train-0", "ml", {{"main", {{"amd.com/gpu", {"0000:c1:00.0", "0000:C2:00.0"}}}}}},
      {"infer-0", "ml", {{"main", {{"amd.com/gpu", {"00000000:c1:00.0"}}}}}},
  };
  const DeviceMap map = build_device_map(pods, {"amd.com/gpu"});
  std::vector<std::string> ids;
  for (const auto& [id, owners] : map.by_device) ids.push_back(id);
  EXPECT_THAT(ids, ElementsAre("0000:c1:00.0", "0000:c2:00.0"));
  EXPECT_THAT(map.by_device.at("0000:c1:00.0"), ElementsAre(DeviceOwner{"ml", "infer-0", "main", "amd.com/gpu"},
                                                            DeviceOwner{"ml", "train-0", "main", "amd.com/gpu"}));
}

TEST(kubelet_device_map, ResourcePatterns) {
  EXPECT_TRUE(resource_selected("anything", {}));
  EXPECT_TRUE(resource_selected("nvidia.com/gpu", {"nvidia.com/gpu"}));
  EXPECT_FALSE(resource_selected("nvidia.com/gpu.shared", {"nvidia.com/gpu"}));
  EXPECT_TRUE(resource_selected("nvidia.com/mig-1g.10gb", {"nvidia.com/gpu", "nvidia.com/mig-*"}));
  EXPECT_TRUE(resource_selected("nvidia.com/mig-3g.40gb", {"nvidia.com/mig-*"}));
  EXPECT_FALSE(resource_selected("nvidia.com/gpu", {"nvidia.com/mig-*"}));
  EXPECT_TRUE(resource_selected("x", {"*"}));
  EXPECT_FALSE(resource_selected("nvidia.com/gpu", {""}));

  std::vector<PodResources> pods = {
      {"a", "ml", {{"main", {{"nvidia.com/mig-1g.10gb", {"MIG-aaaaaaaa-0000-5000-8000-000000000001"}}}}}},
      {"b", "ml", {{"main", {{"nvidia.com/mig-3g.40gb", {"MIG-aaaaaaaa-0000-5000-8000-000000000002"}}}}}},
      {"c", "ml", {{"main", {{"nvidia.com/gpu", {kUuidA}}}}}},
  };
  EXPECT_EQ(build_device_map(pods, {"nvidia.com/mig-*"}).by_device.size(), 2u);
  EXPECT_EQ(build_device_map(pods, {"nvidia.com/gpu", "nvidia.com/mig-*"}).by_device.size(), 3u);
}

TEST(kubelet_device_map, IndexStyleIdsAndMultipleContainers) {
  // deviceIDStrategy=index: ids are GPU indices. One pod, two containers, one GPU each, and a
  // second pod on the same GPU index through time-slicing.
  std::vector<PodResources> pods = {
      {"multi",
       "research",
       {{"worker-a", {{"nvidia.com/gpu", {"0"}}}}, {"worker-b", {{"nvidia.com/gpu", {"1"}}}}, {"logger", {}}}},
      {"shared", "research", {{"main", {{"nvidia.com/gpu", {"1::2"}}}}}},
  };
  const DeviceMap map = build_device_map(pods, {"nvidia.com/gpu"});
  ASSERT_EQ(map.by_device.size(), 2u);
  EXPECT_THAT(map.by_device.at("0"), ElementsAre(DeviceOwner{"research", "multi", "worker-a", "nvidia.com/gpu"}));
  EXPECT_THAT(map.by_device.at("1"), ElementsAre(DeviceOwner{"research", "multi", "worker-b", "nvidia.com/gpu"},
                                                 DeviceOwner{"research", "shared", "main", "nvidia.com/gpu"}));
}

TEST(kubelet_device_map, ContainerWithTwoReplicasOfOneGpuIsOneOwner) {
  std::vector<PodResources> pods = {
      {"greedy",
       "tenants",
       {{"main", {{"nvidia.com/gpu", {std::string(kUuidC) + "::0", std::string(kUuidC) + "::3"}}}}}},
      {"other", "tenants", {{"main", {{"nvidia.com/gpu", {std::string(kUuidC) + "::1"}}}}}},
  };
  const DeviceMap map = build_device_map(pods, {"nvidia.com/gpu"});
  EXPECT_THAT(map.by_device.at(kUuidC), ElementsAre(DeviceOwner{"tenants", "greedy", "main", "nvidia.com/gpu"},
                                                    DeviceOwner{"tenants", "other", "main", "nvidia.com/gpu"}));
}

TEST(kubelet_device_map, SameContainerNameInTwoNamespacesStaysApart) {
  std::vector<PodResources> pods = {
      {"job", "team-b", {{"main", {{"nvidia.com/gpu", {std::string(kUuidA) + "::1"}}}}}},
      {"job", "team-a", {{"main", {{"nvidia.com/gpu", {std::string(kUuidA) + "::0"}}}}}},
  };
  const DeviceMap map = build_device_map(pods, {});
  EXPECT_THAT(map.by_device.at(kUuidA), ElementsAre(DeviceOwner{"team-a", "job", "main", "nvidia.com/gpu"},
                                                    DeviceOwner{"team-b", "job", "main", "nvidia.com/gpu"}));
}

TEST(kubelet_device_map, EmptyReplyAndEmptyIds) {
  EXPECT_THAT(build_device_map({}, {}).by_device, IsEmpty());
  std::vector<PodResources> pods = {{"p", "ns", {{"c", {{"nvidia.com/gpu", {""}}}}}}};
  EXPECT_THAT(build_device_map(pods, {}).by_device, IsEmpty());
}

TEST(kubelet_device_map, FetchedAtIsNow) {
  const auto before = std::chrono::system_clock::now();
  const DeviceMap map = build_device_map(testing::sample_node(), {});
  EXPECT_GE(map.fetched_at, before);
  EXPECT_LE(map.fetched_at, std::chrono::system_clock::now());
}

}  // namespace
}  // namespace gpumeter::kubelet
