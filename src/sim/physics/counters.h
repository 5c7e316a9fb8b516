#pragma once
// Cumulative counters of one GPU (busy seconds, energy since the last driver reload), kept
// incrementally: the integrator remembers the segment it stands in and the totals at its
// start, so a query at a later time only adds the segments crossed since the last query
// (O(1) amortized when time moves forward, as it does for a polling agent). A query at an
// earlier time restarts from the nearest checkpoint; checkpoints are taken every
// kCheckpointEvery segments, so memory stays small even for week-long scenarios.
//
// Totals at segment starts are always computed by the same additions in the same order, so
// a reading depends only on the time asked for, never on which times were asked before.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/scenario/scenario.h"
#include "sim/physics/timeline.h"

namespace gpumeter::sim {

struct Counters {
  double busy_seconds = 0;                // integral of utilization (ratio) since time 0
  double energy_since_reload_joules = 0;  // integral of power since time 0 or the last reload
};

class CounterIntegrator {
 public:
  CounterIntegrator(const GpuTimeline& timeline, const GpuModelSpec& model);

  Counters at(Micros t);             // t >= 0
  const Segment& segment(Micros t);  // the segment containing t

 private:
  static constexpr std::size_t kCheckpointEvery = 256;
  struct Checkpoint {
    Micros start;
    Counters totals;
  };

  void seek(Micros t);
  void restart_from(const Checkpoint& c, std::size_t index);

  const GpuTimeline& timeline_;
  const GpuModelSpec& model_;
  Segment current_;
  Counters at_start_;                    // totals at current_.start
  std::size_t index_ = 0;                // how many segments precede current_
  double power_w_ = 0;                   // power during current_
  std::uint64_t version_ = 0;            // the timeline's version() current_ was read at
  std::vector<Checkpoint> checkpoints_;  // checkpoints_[i] is the start of segment i * kCheckpointEvery
};

}  // namespace gpumeter::sim
