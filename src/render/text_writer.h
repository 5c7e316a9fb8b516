#pragma once
// Writes metric families in Prometheus text 0.0.4 or OpenMetrics 1.0.0. Pure: no I/O, no clock.

#include <string>
#include <string_view>
#include <vector>

#include "model/metric_family.h"
#include "render/exposition_format.h"

namespace gpumeter {

// The families in the given order, each as one group with its metadata first. Does NOT write the
// OpenMetrics "# EOF" line: the per-scrape trailer (see prepared_exposition.h) comes after the body,
// and the terminator after that.
std::string render(const std::vector<MetricFamily>& families, ExpositionFormat format);

// Appends one family. A counter whose name ends in "_total" is written in OpenMetrics as family
// `name` without the suffix and samples `name_total`, as that format requires.
void append_family(std::string& out, const MetricFamily& family, ExpositionFormat format);

inline constexpr std::string_view kOpenMetricsEof = "# EOF\n";

// Escaping rules, exposed for tests. Invalid UTF-8 is replaced by U+FFFD first, because driver strings
// are not guaranteed to be UTF-8 and Prometheus rejects the whole scrape on one bad label value.
void append_label_value(std::string& out, std::string_view value);
void append_help_text(std::string& out, std::string_view help, ExpositionFormat format);

}  // namespace gpumeter
