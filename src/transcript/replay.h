#pragma once
// The simulator's replay of an NVML transcript (recorder.h): a scenario that names a recording
// (`replay: FILE`) makes `gpumeter serve --sim.scenario` run on it, as DCGM's fake NVML replays
// recorded states. Each entry point the recording holds answers what the driver answered to the
// same call (function, handles and inputs, timestamps aside) at the same time since the first
// call, with the driver's timestamps moved to now; sample buffers (nvmlDeviceGetSamples) answer
// every recorded sample newer than the caller's lastSeenTimeStamp, as a real buffer does. After
// the recording's end, every call answers as its last call did, and no new sample comes.

#include <memory>
#include <string>

#include "backend/dynamic_library.h"
#include "util/result.h"

namespace gpumeter::transcript {

// The transcript at `path` as a library. One replay per process.
Result<std::unique_ptr<SymbolSource>> replay_source(const std::string& path);

// What a recording holds ("N calls of M functions over S s"), or why it cannot be replayed.
Result<std::string> describe_recording(const std::string& path);

// The recording a scenario file names (`replay: FILE`, relative to the scenario's folder), or
// "" when it is an ordinary scenario (or no YAML at all, which the scenario parser reports).
Result<std::string> replay_of_scenario(const std::string& scenario_path);

}  // namespace gpumeter::transcript
