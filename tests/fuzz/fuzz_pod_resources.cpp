// The kubelet's pod-resources List reply as it arrives on the socket: protobuf bytes, converted
// to the plain types and turned into the GPU -> containers map.
#include <string>

#include <google/protobuf/stubs/logging.h>

#include "fuzz_check.h"
#include "kubelet/device_map.h"
#include "kubelet/proto/podresources_v1.pb.h"
#include "kubelet/proto_convert.h"

using namespace gpumeter;

// Protobuf logs every string field that is not UTF-8; the fuzzer makes millions of them.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  v1::ListPodResourcesResponse response;
  if (!response.ParseFromArray(data, static_cast<int>(size))) return 0;
  const std::vector<kubelet::PodResources> pods = kubelet::from_proto(response);
  FUZZ_CHECK(static_cast<int>(pods.size()) == response.pod_resources_size());

  // Converting back and forth keeps what gpumeter reads.
  v1::ListPodResourcesResponse back;
  kubelet::to_proto(pods, &back);
  FUZZ_CHECK(kubelet::from_proto(back) == pods);

  for (const auto& names :
       {std::vector<std::string>{}, std::vector<std::string>{"nvidia.com/gpu", "nvidia.com/mig-*"}}) {
    const kubelet::DeviceMap map = kubelet::build_device_map(pods, names);
    for (const auto& [device, owners] : map.by_device) {
      FUZZ_CHECK(!owners.empty());
      for (std::size_t i = 1; i < owners.size(); ++i) FUZZ_CHECK(owners[i - 1] < owners[i]);
      for (const auto& owner : owners) FUZZ_CHECK(kubelet::resource_selected(owner.resource_name, names));
    }
  }
  return 0;
}
