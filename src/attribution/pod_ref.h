#pragma once
// The Kubernetes pod and container a GPU is assigned to, as the kubelet's pod-resources API
// reports it.

#include <string>

namespace gpumeter {

struct PodRef {
  std::string namespace_;
  std::string pod;
  std::string container;
  bool operator==(const PodRef&) const = default;
};

}  // namespace gpumeter
