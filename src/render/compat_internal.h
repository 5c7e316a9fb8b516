#pragma once
// Shared by the compat renderers (compat.cpp, compat_dcgm.cpp); not part of the module's API.

#include <optional>
#include <string_view>
#include <vector>

#include "model/metric_family.h"
#include "model/snapshot.h"
#include "render/compat.h"

namespace gpumeter {

// As in families.cpp: a counter value that is NaN or negative is left out.
inline void compat_add_sample(MetricFamily& f, Labels labels, double value) {
  if (f.type == MetricType::kCounter && !(value >= 0)) return;
  f.samples.push_back(MetricSample{std::move(labels), value});
}

// The value of a labeled reading (a sensor, a clock) or nothing.
inline std::optional<double> compat_labeled(const std::vector<LabeledValue>& values, std::string_view label) {
  for (const auto& v : values) {
    if (v.label == label) return v.value;
  }
  return std::nullopt;
}

void build_dcgm_exporter_families(const Snapshot& snap, const CompatOptions& o, std::vector<MetricFamily>& out);
void build_dcgm_exporter_1x_families(const Snapshot& snap, const CompatOptions& o, std::vector<MetricFamily>& out);

}  // namespace gpumeter
