#pragma once
// `gpumeter serve --nvml.record FILE`: a transcript of every NVML call the agent makes, for a
// bounded time and size. The recorder is a SymbolSource in front of the real library: each
// entry point it hands out calls the driver, then writes one JSON line (calls.h, codec.h):
//   {"t": monotonic ns, "wall": unix ns, "fn": name, "args": [...], "rc": status, "us": call µs}
// after a first line that describes the recording. With anonymize, serials, UUIDs and pids are
// replaced consistently (host names are never recorded). The file is complete JSON lines at
// every moment, closed by an "end" line saying why it stopped.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/dynamic_library.h"
#include "util/result.h"

namespace gpumeter::transcript {

struct RecordOptions {
  std::string path;
  std::chrono::milliseconds duration{std::chrono::minutes(10)};
  std::uint64_t max_bytes = 256ULL << 20;
  bool anonymize = false;
  std::string agent_version;
};

// Wraps `inner`. One recording per process: the entry points it hands out are process-wide.
Result<std::unique_ptr<SymbolSource>> recording_source(std::unique_ptr<SymbolSource> inner,
                                                       const RecordOptions& options);

// Ends the recording (an "end" line) and closes the file; later calls go to the driver only.
void stop_recording(const char* reason);

}  // namespace gpumeter::transcript
