#pragma once
// Reading a scenario file. Errors come back as values whose message reads
// "file:line:col: field.path: what is wrong".

#include <string>
#include <string_view>

#include "sim/scenario/scenario.h"
#include "util/result.h"

namespace gpumeter::sim {

Result<Scenario> parse_scenario(std::string_view yaml_text, const std::string& source_name);
Result<Scenario> load_scenario(const std::string& path);

}  // namespace gpumeter::sim
