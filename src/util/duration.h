#pragma once
// Prometheus-style durations ("500ms", "1s", "1m30s", "2h"), as used by exporter flags.

#include <chrono>
#include <string_view>

#include "util/result.h"

namespace gpumeter {

Result<std::chrono::milliseconds> parse_duration(std::string_view text);

}  // namespace gpumeter
