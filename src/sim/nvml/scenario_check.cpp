// The one entry point of the simulated libnvidia-ml.so.1 that is not NVML's: the agent checks a
// --sim.scenario file with it at start, through the library it is about to load, so that the
// agent itself holds no simulator code (docs/architecture.md).

#include <cstddef>
#include <cstring>
#include <string>

#include "sim/scenario/scenario_parse.h"

// Reads and validates the scenario file at `path` as nvmlInit will. Returns 0 when it is good;
// otherwise 1, with the reason ("file:line:col: ...") in `message`, cut to `size` bytes with its
// terminating NUL.
extern "C" __attribute__((visibility("default"))) int gpumeter_sim_check_scenario(const char* path, char* message,
                                                                                  std::size_t size) {
  auto scenario = gpumeter::sim::load_scenario(path == nullptr ? "" : path);
  if (scenario) return 0;
  if (message != nullptr && size > 0) {
    const std::string& m = scenario.error().message;
    const std::size_t n = m.size() < size - 1 ? m.size() : size - 1;
    std::memcpy(message, m.data(), n);
    message[n] = '\0';
  }
  return 1;
}
