#pragma once
// Renders the per-instance MIG ground truth for `gpumeter sim truth`: the "mig" object of the
// JSON output, and a table after the other tables. Only scenarios with `mig:` show it.

#include <string>

#include <nlohmann/json.hpp>

#include "sim/truth/truth_mig.h"

namespace gpumeter::sim {

nlohmann::ordered_json mig_truth_to_json(const MigTruth& truth);
std::string mig_truth_to_table(const MigTruth& truth);

}  // namespace gpumeter::sim
