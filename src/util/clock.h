#pragma once
// The agent's time: one interface for the monotonic clock (schedules, backoff, deadlines) and the
// wall clock (what NVML stamps its samples with, the ledger's cursors, ages), so that tests drive
// every part with one fake (tests/unit/fake_clock.h) instead of waiting on real time.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

namespace gpumeter {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  // The monotonic clock.
  virtual time_point now() const = 0;
  // The wall clock, µs since the Unix epoch.
  virtual std::int64_t wall_us() const = 0;
  // Waits on `cv` (whose mutex `lock` holds) until `deadline` on now()'s clock, or until `done()`
  // holds after a notification; returns done().
  virtual bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, time_point deadline,
                          const std::function<bool()>& done) const = 0;

  // The monotonic clock in µs, and the wall clock in Unix seconds.
  std::int64_t monotonic_us() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(now().time_since_epoch()).count();
  }
  double wall_seconds() const { return static_cast<double>(wall_us()) / 1e6; }
};

// std::chrono::steady_clock and std::chrono::system_clock.
const Clock& system_clock();

}  // namespace gpumeter
