#pragma once
// Sample values as both exposition formats expect them, independent of the C and C++ locales.

#include <string>

namespace gpumeter {

// Integers up to 2^53 in magnitude print as plain integers ("85520809984"), because every such
// integer is exact in a double and byte counters read best that way. Everything else prints as the
// shortest text that parses back to the same double. NaN, +Inf and -Inf print as "NaN", "+Inf", "-Inf".
void append_sample_value(std::string& out, double value);

// Fixed-point with `decimals` digits, for human-facing text such as the landing page.
void append_fixed(std::string& out, double value, int decimals);

}  // namespace gpumeter
