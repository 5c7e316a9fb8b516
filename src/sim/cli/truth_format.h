#pragma once
// Renders ground truth for `gpumeter sim truth`: JSON with a stable key order for programs,
// an aligned table for people.

#include <string>

#include <nlohmann/json.hpp>

#include "sim/scenario/scenario.h"
#include "sim/truth/truth.h"
#include "sim/truth/truth_scheduler.h"

namespace gpumeter::sim {

nlohmann::ordered_json truth_to_json(const Scenario& scenario, const Truth& truth);
std::string truth_to_table(const Truth& truth);

// Under the scheduler policy (`--policy scheduler`): the GPUs, then one entry per owner and GPU.
nlohmann::ordered_json scheduler_truth_to_json(const Scenario& scenario, const SchedulerTruth& truth);
std::string scheduler_truth_to_table(const Scenario& scenario, const SchedulerTruth& truth);

}  // namespace gpumeter::sim
