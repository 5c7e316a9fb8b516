#pragma once
// Internal to src/kubelet: conversions between the generated v1 messages and the plain types.

#include <vector>

#include "kubelet/pod_resources.h"
#include "kubelet/proto/podresources_v1.pb.h"

namespace gpumeter::kubelet {

PodResources from_proto(const v1::PodResources& pod);
std::vector<PodResources> from_proto(const v1::ListPodResourcesResponse& response);

void to_proto(const PodResources& pod, v1::PodResources* out);
void to_proto(const std::vector<PodResources>& pods, v1::ListPodResourcesResponse* out);

}  // namespace gpumeter::kubelet
