#pragma once
// The simulator's run-time settings, read from the environment of the process that loads
// it (an NVML library has no other way in). Parsed once per nvmlInit into a value, so the
// rest of the C layer never touches getenv.

#include <bitset>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/scenario/scenario_clock.h"
#include "sim/scenario/nvml_functions.h"
#include "sim/scenario/scenario.h"
#include "util/result.h"

namespace gpumeter::sim {

// GPUMETER_SIM_LIE=<metric>:<offset>: a planted fault for self-checks. The process whose
// environment holds it is told `metric` off by `offset` (in the metric's NVML unit), while
// every other process sees the truth. The one metric so far: temperature (°C).
struct SimLie {
  std::string metric;
  double offset = 0;
};

struct SimEnv {
  std::string scenario_path;                    // GPUMETER_SIM_SCENARIO
  std::optional<double> epoch;                  // GPUMETER_SIM_EPOCH, unix seconds
  std::string epoch_file;                       // GPUMETER_SIM_EPOCH_FILE: a held clock (scenario_clock.h)
  std::optional<double> time_scale;             // GPUMETER_SIM_TIME_SCALE
  std::bitset<kNvmlFunctionCount> unsupported;  // GPUMETER_SIM_UNSUPPORTED, functions
  std::vector<unsigned> unsupported_fields;     // GPUMETER_SIM_UNSUPPORTED, NVML_FI_* names
  // GPUMETER_SIM_CUDA_DIR, where the simulated CUDA driver's processes log (live.h); unset:
  // $TMPDIR (or /tmp)/gpumeter-sim-cuda-<hash of the scenario file's real path>, so that a
  // `gpumeter burn` and a `gpumeter serve` on the same scenario meet.
  std::string cuda_dir;
  SimLie lie;  // GPUMETER_SIM_LIE
};

using EnvLookup = std::function<const char*(const char*)>;

Result<SimEnv> read_sim_env(const EnvLookup& getenv);

// What a simulated library (NVML, CUDA) loads when a program initializes it: the settings in
// the environment and the scenario they name. The error is the line the library prints:
// "<bad variable>" or "invalid scenario: file:line:col: ...".
struct SimSetup {
  SimEnv env;
  Scenario scenario;
};
Result<SimSetup> load_sim_setup(const EnvLookup& getenv);

// The scenario clock these settings give, at `scale`: held on the epoch file, else at the epoch,
// else at `default_epoch_ns`.
ScenarioClock scenario_clock(const SimEnv& env, double scale, std::int64_t default_epoch_ns);

}  // namespace gpumeter::sim
