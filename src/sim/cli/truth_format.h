#pragma once
// Renders ground truth for `gpumeter sim truth`: JSON with a stable key order for programs,
// an aligned table for people.

#include <string>

#include <nlohmann/json.hpp>

#include "sim/model/scenario.h"
#include "sim/model/truth.h"

namespace gpumeter::sim {

nlohmann::ordered_json truth_to_json(const Scenario& scenario, const Truth& truth);
std::string truth_to_table(const Truth& truth);

}  // namespace gpumeter::sim
