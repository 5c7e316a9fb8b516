#pragma once
// The metric data model: plain values, no I/O. The renderer turns families into text.

#include <string>
#include <utility>
#include <vector>

namespace gpumeter {

enum class MetricType { kGauge, kCounter };

using Labels = std::vector<std::pair<std::string, std::string>>;

struct MetricSample {
  Labels labels;
  double value = 0;
};

struct MetricFamily {
  std::string name;  // full Prometheus name; counters end in _total
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<MetricSample> samples;
  // The name is another exporter's (render/compat.h) and must reach Prometheus as written. A
  // counter named without _total is then typed unknown in OpenMetrics, whose counters' samples
  // must end in _total, instead of being renamed.
  bool foreign_name = false;
};

}  // namespace gpumeter
