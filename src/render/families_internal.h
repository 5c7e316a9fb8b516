#pragma once
// What families.cpp and families_device.cpp share: the list families are added to, the labels
// of GPUs and MIG instances, and each device collector's builder. Not part of the module's API.

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "model/metric_family.h"
#include "model/snapshot.h"

namespace gpumeter::family_builders {

// Families in the order they are added; a deque so that references handed out stay valid. Only
// families that received a sample are kept.
class FamilyList {
 public:
  MetricFamily& add(std::string name, MetricType type, std::string help) {
    families_.push_back(MetricFamily{std::move(name), std::move(help), type, {}});
    return families_.back();
  }

  std::vector<MetricFamily> take() && {
    std::vector<MetricFamily> out;
    out.reserve(families_.size());
    for (auto& f : families_) {
      if (!f.samples.empty()) out.push_back(std::move(f));
    }
    return out;
  }

 private:
  std::deque<MetricFamily> families_;
};

inline constexpr MetricType kGauge = MetricType::kGauge;
inline constexpr MetricType kCounter = MetricType::kCounter;

inline void add_sample(MetricFamily& f, Labels labels, double value) {
  if (f.type == MetricType::kCounter && !(value >= 0)) return;  // also drops NaN
  f.samples.push_back(MetricSample{std::move(labels), value});
}

inline Labels device_labels(const DeviceIdentity& id) { return {{"gpu", std::to_string(id.index)}, {"uuid", id.uuid}}; }

inline Labels with(Labels labels, std::string name, std::string value) {
  labels.emplace_back(std::move(name), std::move(value));
  return labels;
}

// A MIG instance's series: its parent's gpu and uuid, and which instance it is.
inline constexpr const char* kMigLabels[] = {"mig_uuid", "gpu_instance", "compute_instance", "mig_profile"};
Labels mig_labels(const DeviceIdentity& id, const MigInstanceReading& m);

// A family holding MIG instances keeps one label set: its whole-GPU samples carry the MIG labels
// empty (to Prometheus the same series as without them), placed where an instance has them.
void pad_mig_labels(MetricFamily& f);

// gpu_up and gpu_info: every GPU, down ones too.
void add_identity_families(FamilyList& fams, const Snapshot& snap);

// The device collectors' families (collectors.h). Those read from a reading take only GPUs that
// are up and have one. The device and clocks collectors come in two parts each: the exposition's
// order is older than the collectors, and keeps the fan speed after the clocks and the clock
// events after the PCIe link.
void add_device_families(FamilyList& fams, const Snapshot& snap);      // utilization to energy
void add_device_fan_families(FamilyList& fams, const Snapshot& snap);  // the fan speed
void add_clocks_families(FamilyList& fams, const Snapshot& snap);      // clocks, performance state and level
void add_clock_event_families(FamilyList& fams, const Snapshot& snap);
void add_pcie_families(FamilyList& fams, const Snapshot& snap);
void add_ecc_families(FamilyList& fams, const Snapshot& snap);
void add_profiling_families(FamilyList& fams, const Snapshot& snap);
void add_nvlink_families(FamilyList& fams, const Snapshot& snap);
void add_mig_families(FamilyList& fams, const Snapshot& snap);

}  // namespace gpumeter::family_builders
