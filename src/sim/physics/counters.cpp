#include "sim/physics/counters.h"

#include <algorithm>

#include "sim/physics/instant_values.h"

namespace gpumeter::sim {

CounterIntegrator::CounterIntegrator(const GpuTimeline& timeline, const GpuModelSpec& model)
    : timeline_(timeline), model_(model) {
  restart_from(Checkpoint{0, {}}, 0);
  checkpoints_.push_back(Checkpoint{0, {}});
}

void CounterIntegrator::restart_from(const Checkpoint& c, std::size_t index) {
  current_ = timeline_.segment_at(c.start);
  at_start_ = c.totals;
  index_ = index;
  power_w_ = power_milliwatts(model_, current_.util_percent) / 1000.0;
}

void CounterIntegrator::seek(Micros t) {
  if (timeline_.version() != version_) {
    // Live processes changed: the segment we stand in may end sooner, or hold more.
    version_ = timeline_.version();
    current_ = timeline_.segment_at(current_.start);
    power_w_ = power_milliwatts(model_, current_.util_percent) / 1000.0;
  }
  if (t < current_.start) {
    auto it = std::upper_bound(checkpoints_.begin(), checkpoints_.end(), t,
                               [](Micros x, const Checkpoint& c) { return x < c.start; });
    std::size_t i = static_cast<std::size_t>(std::prev(it) - checkpoints_.begin());
    restart_from(checkpoints_[i], i * kCheckpointEvery);
  }
  while (t >= current_.end) {
    const double dt = to_seconds(current_.end - current_.start);
    Counters next = at_start_;
    next.busy_seconds += current_.util_percent / 100.0 * dt;
    next.energy_since_reload_joules += power_w_ * dt;
    current_ = timeline_.segment_at(current_.end);
    if (current_.driver_reload) next.energy_since_reload_joules = 0;
    at_start_ = next;
    power_w_ = power_milliwatts(model_, current_.util_percent) / 1000.0;
    ++index_;
    if (index_ % kCheckpointEvery == 0 && index_ / kCheckpointEvery == checkpoints_.size()) {
      checkpoints_.push_back(Checkpoint{current_.start, at_start_});
    }
  }
}

Counters CounterIntegrator::at(Micros t) {
  seek(t);
  const double dt = to_seconds(t - current_.start);
  Counters c = at_start_;
  c.busy_seconds += current_.util_percent / 100.0 * dt;
  c.energy_since_reload_joules += power_w_ * dt;
  return c;
}

const Segment& CounterIntegrator::segment(Micros t) {
  seek(t);
  return current_;
}

}  // namespace gpumeter::sim
