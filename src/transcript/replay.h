#pragma once
// The simulator's replay of an NVML transcript (recorder.h): a scenario that names a recording
// (`replay: FILE`) makes `gpumeter serve --sim.scenario` run on it, as DCGM's fake NVML replays
// recorded states. The n-th call with the same function, handles and inputs (timestamps aside)
// answers what the driver answered to the n-th such call, so a replay does not depend on how
// its calls fall in time; the driver's timestamps are moved by the time between the recording's
// first call and the replay's. A sample buffer (nvmlDeviceGetSamples) answers every sample the
// recording had seen by the answer its call stands for that is newer than the caller's
// lastSeenTimeStamp, as a real buffer does. Once a key's answers are used up, it answers as its
// last call did, and no new sample or per-process record comes. Events come when the replay's
// clock passes their recorded time.

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
