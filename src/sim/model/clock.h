#pragma once
// The map from wall time to scenario time that the NVML library and the host side share:
// t = (wall_now - epoch) * scale, in whole microseconds (rounded down).

#include <cstdint>

#include "sim/model/time.h"

namespace gpumeter::sim {

class ScenarioClock {
 public:
  // epoch_ns: the unix time, in nanoseconds, at which scenario time is 0.
  ScenarioClock(double scale, std::int64_t epoch_ns) : scale_(scale), epoch_ns_(epoch_ns) {}

  double scale() const { return scale_; }
  Micros now() const;                        // scenario time now, from the wall clock
  std::int64_t unix_micros(Micros t) const;  // simulated unix time of scenario time t
  std::int64_t wall_ns_at(Micros t) const;   // when scenario time t arrives on the wall clock

  static std::int64_t wall_now_ns();

 private:
  double scale_;
  std::int64_t epoch_ns_;
};

}  // namespace gpumeter::sim
