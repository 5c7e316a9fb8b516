#pragma once
// Who a GPU process belongs to. OwnerLabels are the label values every ledger counter and
// per-process series carries (PRODUCT.md); a label is empty when it does not apply.

#include <compare>
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
  auto operator<=>(const OwnerLabels&) const = default;
  bool operator==(const OwnerLabels&) const = default;
};

// The reserved owners of the ledger.
inline constexpr const char* kIdleProject = "__idle__";
inline constexpr const char* kUnattributedProject = "__unattributed__";

// The label names, in the order the exposition writes them.
inline constexpr const char* kOwnerLabelNames[] = {"project", "user", "namespace", "pod", "container", "hpc_job"};

}  // namespace gpumeter
