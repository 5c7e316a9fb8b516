#pragma once
// The simulator's run-time settings, read from the environment of the process that loads
// it (an NVML library has no other way in). Parsed once per nvmlInit into a value, so the
// rest of the C layer never touches getenv.

#include <bitset>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/model/nvml_functions.h"
#include "util/result.h"

namespace gpumeter::sim {

struct SimEnv {
  std::string scenario_path;                    // GPUMETER_SIM_SCENARIO
  std::optional<double> epoch;                  // GPUMETER_SIM_EPOCH, unix seconds
  std::optional<double> time_scale;             // GPUMETER_SIM_TIME_SCALE
  std::bitset<kNvmlFunctionCount> unsupported;  // GPUMETER_SIM_UNSUPPORTED, functions
  std::vector<unsigned> unsupported_fields;     // GPUMETER_SIM_UNSUPPORTED, NVML_FI_* names
};

using EnvLookup = std::function<const char*(const char*)>;

Result<SimEnv> read_sim_env(const EnvLookup& getenv);

}  // namespace gpumeter::sim
