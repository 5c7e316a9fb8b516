#pragma once
// Exact parsing of the quantities a scenario file writes as text: byte sizes ("81559MiB"),
// durations ("1h30m", "0.2", "500ms") and utilization ratios ("0.95"). Decimals are scaled
// with integer arithmetic, so "0.2" seconds is exactly 200000 us and never 199999.

#include <cstdint>
#include <optional>
#include <string_view>

#include "sim/scenario/time.h"

namespace gpumeter::sim {

// A plain non-negative decimal ("12", "1.25") times `unit`, if the product is whole.
std::optional<std::uint64_t> scale_decimal(std::string_view text, std::uint64_t unit);

// An integer or a number with a unit: B, kB/KB, MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB.
std::optional<std::uint64_t> parse_byte_size(std::string_view text);

// Seconds as a plain number, or number+unit terms: us, ms, s, m, h, d ("1h30m").
std::optional<Micros> parse_duration(std::string_view text);

// A ratio in [0, 1] that is a whole number of percent ("0.95"), or a percentage ("95%").
std::optional<int> parse_ratio_percent(std::string_view text);

// A finite floating-point number in the C locale.
std::optional<double> parse_double(std::string_view text);

// An unsigned integer, decimal or 0x-prefixed hexadecimal.
std::optional<std::uint64_t> parse_unsigned(std::string_view text);

}  // namespace gpumeter::sim
