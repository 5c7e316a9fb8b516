#pragma once
// The one fake Clock of the unit tests: both clocks stand still until the test moves them, so a
// schedule, a backoff or a ledger's cursor can be checked call by call without waiting.

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "util/clock.h"

namespace gpumeter::testing {

class FakeClock final : public Clock {
 public:
  time_point now() const override { return time_point(std::chrono::nanoseconds(now_ns_.load())); }
  std::int64_t wall_us() const override { return wall_us_.load(); }
  bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, time_point deadline,
                  const std::function<bool()>& done) const override {
    {
      std::lock_guard g(mu_);
      deadlines_.insert(deadline);
    }
    // Polls in short real waits: advance() does not know which condition variable to notify.
    while (!done() && now() < deadline) cv.wait_for(lock, std::chrono::milliseconds(1));
    {
      std::lock_guard g(mu_);
      deadlines_.erase(deadlines_.find(deadline));
    }
    return done();
  }
  // Moves the monotonic clock; the wall clock stays.
  void advance(std::chrono::nanoseconds d) { now_ns_ += d.count(); }
  void set_now(time_point t) { now_ns_ = std::chrono::nanoseconds(t.time_since_epoch()).count(); }
  // Sets or moves the wall clock (µs since the Unix epoch); the monotonic clock stays.
  void set_wall_us(std::int64_t us) { wall_us_ = us; }
  void advance_wall(std::chrono::microseconds d) { wall_us_ += d.count(); }

  // How many threads wait for a time still ahead: once it equals the number of threads that
  // use the clock, each has done what was due and the clock may move on.
  int sleeping() const {
    std::lock_guard g(mu_);
    const auto t = now();
    int n = 0;
    for (const auto& d : deadlines_) n += d > t ? 1 : 0;
    return n;
  }
  // Waits (in real time, a generous limit only against a hang) until `threads` sleep.
  bool settle(int threads) const {
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (sleeping() != threads) {
      if (std::chrono::steady_clock::now() > limit) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

 private:
  mutable std::mutex mu_;
  mutable std::multiset<time_point> deadlines_;
  std::atomic<std::int64_t> now_ns_{std::chrono::nanoseconds(std::chrono::hours(1)).count()};
  std::atomic<std::int64_t> wall_us_{1'700'000'000'000'000};
};

}  // namespace gpumeter::testing
