#include "sim/model/clock.h"

#include <chrono>
#include <cmath>

namespace gpumeter::sim {

std::int64_t ScenarioClock::wall_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Micros ScenarioClock::now() const {
  const double elapsed_ns = static_cast<double>(wall_now_ns() - epoch_ns_);
  return static_cast<Micros>(std::floor(elapsed_ns * scale_ / 1000.0));
}

std::int64_t ScenarioClock::unix_micros(Micros t) const {
  // Rounded down so that timestamps increase with t whatever the epoch's sub-microsecond part.
  const std::int64_t epoch_us = epoch_ns_ >= 0 ? epoch_ns_ / 1000 : -((-epoch_ns_ + 999) / 1000);
  return epoch_us + t;
}

std::int64_t ScenarioClock::wall_ns_at(Micros t) const {
  return epoch_ns_ + static_cast<std::int64_t>(std::ceil(static_cast<double>(t) * 1000.0 / scale_));
}

}  // namespace gpumeter::sim
