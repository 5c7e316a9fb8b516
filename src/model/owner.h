#pragma once
// Who a GPU process belongs to. OwnerLabels are the label values every ledger counter and
// per-process series carries (PRODUCT.md); a label is empty when it does not apply.

#include <compare>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace gpumeter {

struct OwnerLabels {
  std::string project;
  std::string user;
  std::string namespace_;
  std::string pod;
  std::string container;
  std::string hpc_job;
  // Ledger owners only: kFaultValue on the part of an owner's usage that fell while its GPU was
  // faulty (docs/ledger.md, "Faulty GPUs"), served as the label `fault`; empty otherwise.
  std::string fault;
  auto operator<=>(const OwnerLabels&) const = default;
  bool operator==(const OwnerLabels&) const = default;
};

// The longest owner label value served. Values come from what a GPU's users control (their
// environment, their cgroup and process names, their pod names through the kubelet), and each one
// is copied into every series of its owner. A longer value is dropped, not cut: a cut-off job or
// pod name would name something else. 256 keeps every valid Kubernetes name (pods 253, namespaces
// and containers 63). Prometheus fails a whole scrape when one value exceeds its
// `label_value_length_limit`, so one user's value must never reach it.
inline constexpr std::size_t kMaxLabelValueBytes = 256;

// The reserved owners of the ledger.
inline constexpr const char* kIdleProject = "__idle__";
inline constexpr const char* kUnattributedProject = "__unattributed__";

// The value of an owner's `fault` label on time its GPU was faulty.
inline constexpr const char* kFaultValue = "true";

// The label names, in the order the exposition writes them (`fault` follows where set).
inline constexpr const char* kOwnerLabelNames[] = {"project", "user", "namespace", "pod", "container", "hpc_job"};

}  // namespace gpumeter
