#pragma once
// Prometheus-style durations ("500ms", "1s", "1m30s", "2h", "1w"), the one syntax of every
// duration the agent reads, on its flags and in its config file: a sequence of whole numbers
// each with a unit ms, s, m, h, d (24h), w (7d) or y (365d), or a bare "0". Plain numbers
// other than 0 are rejected: "90" could mean seconds or milliseconds.

#include <chrono>
#include <string_view>

#include "util/result.h"

namespace gpumeter {

Result<std::chrono::milliseconds> parse_duration(std::string_view text);

}  // namespace gpumeter
