#pragma once
// The two exposition formats gpumeter serves. Both are rendered from the same families; they differ in
// metadata order, HELP escaping, counter naming and the OpenMetrics "# EOF" terminator.

#include <string_view>

namespace gpumeter {

enum class ExpositionFormat { kText004, kOpenMetrics100 };

inline constexpr std::string_view kText004ContentType = "text/plain; version=0.0.4; charset=utf-8";
inline constexpr std::string_view kOpenMetrics100ContentType =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

constexpr std::string_view content_type(ExpositionFormat format) {
  return format == ExpositionFormat::kOpenMetrics100 ? kOpenMetrics100ContentType : kText004ContentType;
}

}  // namespace gpumeter
