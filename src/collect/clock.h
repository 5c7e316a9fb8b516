#pragma once
// The time the collector schedules by, behind an interface so that tests can drive the
// schedule (full collections, buffer drains) step by step instead of waiting on a real clock.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace gpumeter {

class CollectorClock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  virtual ~CollectorClock() = default;
  virtual time_point now() const = 0;
  // Waits on `cv` (whose mutex `lock` holds) until `deadline` or until `done()` holds after a
  // notification; returns done().
  virtual bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, time_point deadline,
                          const std::function<bool()>& done) const = 0;
};

// std::chrono::steady_clock.
const CollectorClock& steady_collector_clock();

}  // namespace gpumeter
