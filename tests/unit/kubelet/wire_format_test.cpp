// Wire compatibility with a real kubelet, checked without our .proto: bytes encoded by hand with
// the field numbers of upstream k8s.io/kubelet/pkg/apis/podresources/v1 decode to what they
// mean, and what the test server encodes is byte-for-byte what the hand encoder writes.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "kubelet/proto/podresources_v1.pb.h"
#include "kubelet/proto_convert.h"

namespace gpumeter::kubelet {
namespace {

// A minimal protobuf encoder: enough for strings, packed int64s and nested messages.
std::string varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string field(uint32_t number, const std::string& bytes) {  // wire type 2: length-delimited
  return varint(number << 3 | 2) + varint(bytes.size()) + bytes;
}
std::string field_varint(uint32_t number, uint64_t v) { return varint(number << 3 | 0) + varint(v); }

// Upstream numbering.
namespace up {
std::string container_devices(const std::string& resource, const std::vector<std::string>& ids,
                              const std::string& topology = "") {
  std::string m = field(1, resource);
  for (const auto& id : ids) m += field(2, id);
  if (!topology.empty()) m += field(3, topology);
  return m;
}
std::string container(const std::string& name, const std::vector<std::string>& devices, const std::string& extra = "") {
  std::string m = field(1, name);
  for (const auto& d : devices) m += field(2, d);
  return m + extra;
}
std::string pod(const std::string& name, const std::string& ns, const std::vector<std::string>& containers) {
  std::string m = field(1, name) + field(2, ns);
  for (const auto& c : containers) m += field(3, c);
  return m;
}
std::string list_response(const std::vector<std::string>& pods) {
  std::string m;
  for (const auto& p : pods) m += field(1, p);
  return m;
}
}  // namespace up

TEST(kubelet_wire_format, DecodesAnUpstreamEncodedReplyIncludingFieldsWeIgnore) {
  const std::string numa0 = field(1, field_varint(1, 0));                   // TopologyInfo{nodes: [{ID: 0}]}
  const std::string cpu_ids = field(3, varint(4) + varint(5) + varint(6));  // packed repeated int64
  const std::string memory = field(4, field(1, "memory") + field_varint(2, 1ull << 33) + field(3, numa0));
  const std::string dra = field(5, field(2, "claim-a") + field(3, "ml") +
                                       field(4, field(1, field(1, "nvidia.com/gpu=0")) + field(2, "gpu.nvidia.com") +
                                                    field(3, "node-1") + field(4, "gpu-0")));
  const std::string bytes = up::list_response({
      up::pod("train-0", "ml",
              {up::container("trainer", {up::container_devices("nvidia.com/gpu", {"GPU-aaaa", "GPU-bbbb"}, numa0)},
                             cpu_ids + memory + dra)}),
      up::pod("infer-a", "tenants",
              {up::container("server", {up::container_devices("nvidia.com/gpu", {"GPU-cccc::1"})})}),
  });

  v1::ListPodResourcesResponse response;
  ASSERT_TRUE(response.ParseFromString(bytes));
  const std::vector<PodResources> pods = from_proto(response);
  const std::vector<PodResources> want = {
      {"train-0",
       "ml",
       {{"trainer", {{"nvidia.com/gpu", {"GPU-aaaa", "GPU-bbbb"}}}, {{"gpu.nvidia.com", "node-1", "gpu-0"}}}}},
      {"infer-a", "tenants", {{"server", {{"nvidia.com/gpu", {"GPU-cccc::1"}}}, {}}}},
  };
  EXPECT_EQ(pods, want);
  // The fields gpumeter does not use were understood too, not kept as unknown fields.
  const auto& c = response.pod_resources(0).containers(0);
  EXPECT_EQ(c.cpu_ids_size(), 3);
  EXPECT_EQ(c.memory(0).size(), 1ull << 33);
  EXPECT_EQ(c.dynamic_resources(0).claim_resources(0).cdi_devices(0).name(), "nvidia.com/gpu=0");
  EXPECT_EQ(c.devices(0).topology().nodes_size(), 1);
}

TEST(kubelet_wire_format, EncodesWhatUpstreamWouldDecode) {
  const std::vector<PodResources> pods = {
      {"p", "ns", {{"c", {{"nvidia.com/gpu", {"GPU-1", "GPU-2::0"}}}}, {"side", {}}}},
  };
  v1::ListPodResourcesResponse response;
  to_proto(pods, &response);
  std::string encoded;
  ASSERT_TRUE(response.SerializeToString(&encoded));
  EXPECT_EQ(encoded, up::list_response(
                         {up::pod("p", "ns",
                                  {up::container("c", {up::container_devices("nvidia.com/gpu", {"GPU-1", "GPU-2::0"})}),
                                   up::container("side", {})})}));
}

TEST(kubelet_wire_format, ServiceAndMethodNamesMatchTheKubelet) {
  // gRPC calls "/<package>.<service>/<method>": the kubelet answers "/v1.PodResourcesLister/List".
  const auto* file = v1::ListPodResourcesRequest::descriptor()->file();
  EXPECT_EQ(file->package(), "v1");
  const auto* service = file->FindServiceByName("PodResourcesLister");
  ASSERT_NE(service, nullptr);
  EXPECT_EQ(service->full_name(), "v1.PodResourcesLister");
  const auto* list = service->FindMethodByName("List");
  ASSERT_NE(list, nullptr);
  EXPECT_EQ(list->input_type()->full_name(), "v1.ListPodResourcesRequest");
  EXPECT_EQ(list->output_type()->full_name(), "v1.ListPodResourcesResponse");
  EXPECT_NE(service->FindMethodByName("GetAllocatableResources"), nullptr);
  EXPECT_NE(service->FindMethodByName("Get"), nullptr);
}

}  // namespace
}  // namespace gpumeter::kubelet
