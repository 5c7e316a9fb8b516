#pragma once
// `gpumeter rules --pricing FILE`: Prometheus recording rules for prices and live cost rates.

#include <string>

#include "pricing/pricing.h"

namespace gpumeter::pricing {

// The rule file's YAML text. It passes `promtool check rules`.
std::string render_rules(const Pricing& pricing);

}  // namespace gpumeter::pricing
