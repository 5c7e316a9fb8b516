#include "kubelet/proto_convert.h"

namespace gpumeter::kubelet {

PodResources from_proto(const v1::PodResources& pod) {
  PodResources out;
  out.name = pod.name();
  out.namespace_ = pod.namespace_();
  out.containers.reserve(pod.containers_size());
  for (const auto& c : pod.containers()) {
    ContainerResources& container = out.containers.emplace_back();
    container.name = c.name();
    container.devices.reserve(c.devices_size());
    for (const auto& d : c.devices()) {
      ContainerDevices& devices = container.devices.emplace_back();
      devices.resource_name = d.resource_name();
      devices.device_ids.assign(d.device_ids().begin(), d.device_ids().end());
    }
    for (const auto& claim : c.dynamic_resources()) {
      for (const auto& r : claim.claim_resources()) {
        container.claim_devices.push_back({r.driver_name(), r.pool_name(), r.device_name()});
      }
    }
  }
  return out;
}

std::vector<PodResources> from_proto(const v1::ListPodResourcesResponse& response) {
  std::vector<PodResources> pods;
  pods.reserve(response.pod_resources_size());
  for (const auto& p : response.pod_resources()) pods.push_back(from_proto(p));
  return pods;
}

void to_proto(const PodResources& pod, v1::PodResources* out) {
  out->set_name(pod.name);
  out->set_namespace_(pod.namespace_);
  for (const auto& c : pod.containers) {
    auto* container = out->add_containers();
    container->set_name(c.name);
    for (const auto& d : c.devices) {
      auto* devices = container->add_devices();
      devices->set_resource_name(d.resource_name);
      for (const auto& id : d.device_ids) devices->add_device_ids(id);
    }
    if (!c.claim_devices.empty()) {
      auto* claim = container->add_dynamic_resources();
      claim->set_claim_name(c.name + "-gpus");
      claim->set_claim_namespace(pod.namespace_);
      for (const auto& d : c.claim_devices) {
        auto* r = claim->add_claim_resources();
        r->set_driver_name(d.driver_name);
        r->set_pool_name(d.pool_name);
        r->set_device_name(d.device_name);
      }
    }
  }
}

void to_proto(const std::vector<PodResources>& pods, v1::ListPodResourcesResponse* out) {
  out->mutable_pod_resources()->Reserve(static_cast<int>(pods.size()));
  for (const auto& p : pods) to_proto(p, out->add_pod_resources());
}

}  // namespace gpumeter::kubelet
