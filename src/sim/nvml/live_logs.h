#pragma once
// Reads the logs the simulated CUDA driver's processes append (sim/physics/live.h) into the
// session's LiveTable. Called by the fault gate before every device call, so a process is on
// its GPU from the first call after its context exists, and a kernel from the first call after
// its launch. A process that dies without destroying its context leaves the GPU when the next
// call finds its pid gone (or, found dead at first sight, at the last event of its log).

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "sim/scenario/scenario_clock.h"
#include "sim/physics/live.h"

namespace gpumeter::sim {

class LiveLogReader {
 public:
  explicit LiveLogReader(std::string dir) : dir_(std::move(dir)) {}

  // Reads what was appended since the last call and publishes the new set into `table`.
  void refresh(const ScenarioClock& clock, LiveTable& table);

 private:
  struct File {
    std::uint64_t offset = 0;
    std::string partial;  // a line not yet ended
    LiveLog log;
    bool seen_alive = false;
    bool dead = false;
  };
  // Reads one log's new bytes; true when anything changed.
  bool read_file(std::uint32_t pid, File& f);
  bool check_alive(std::uint32_t pid, File& f);

  std::string dir_;
  std::mutex mu_;
  std::map<std::uint32_t, File> files_;
  bool dirty_ = false;             // read but not yet published (the clock was held)
  std::int64_t next_scan_ns_ = 0;  // while the directory is missing, when to look again
};

}  // namespace gpumeter::sim
