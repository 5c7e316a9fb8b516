#pragma once
// The map from wall time to scenario time that the NVML library and the host side share:
// t = (wall_now - epoch) * scale, in whole microseconds (rounded down).
//
// The epoch is fixed when the clock is made, or held: given a file, scenario time stands at 0
// until the file exists, and its content (unix seconds) is then the epoch. A test starts every
// simulated peer on one held file and writes it once they are all ready, so that no job starts
// before the agent can see it, however slowly the machine started them.

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "sim/scenario/time.h"

namespace gpumeter::sim {

class ScenarioClock {
 public:
  // epoch_ns: the unix time, in nanoseconds, at which scenario time is 0.
  ScenarioClock(double scale, std::int64_t epoch_ns) : scale_(scale), epoch_ns_(epoch_ns) {}
  // Held until `epoch_file` exists (GPUMETER_SIM_EPOCH_FILE).
  ScenarioClock(double scale, std::string epoch_file);
  ScenarioClock(const ScenarioClock& other);
  ScenarioClock& operator=(const ScenarioClock&) = delete;

  double scale() const { return scale_; }
  Micros now() const;                        // scenario time now, from the wall clock; 0 while held
  std::int64_t unix_micros(Micros t) const;  // simulated unix time of scenario time t
  // When scenario time t arrives on the wall clock; while held, as if scenario time began now.
  std::int64_t wall_ns_at(Micros t) const;
  // The epoch (unix ns), or nullopt while the clock is held.
  std::optional<std::int64_t> epoch_ns() const;

  static std::int64_t wall_now_ns();

 private:
  static constexpr std::int64_t kHeld = INT64_MIN;
  // The epoch, or the wall time now while held (scenario time 0 is then always now).
  std::int64_t epoch_or_now_ns() const;

  double scale_;
  std::string epoch_file_;
  // Read from any thread of the process that loads the library; set once, when the file appears.
  mutable std::atomic<std::int64_t> epoch_ns_;
};

// The epoch in an epoch file: its unix seconds (fractions allowed) as nanoseconds; nullopt while
// the file is missing, empty or not (yet) a number.
std::optional<std::int64_t> read_epoch_file(const std::string& path);

}  // namespace gpumeter::sim
