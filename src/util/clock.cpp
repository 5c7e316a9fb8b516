#include "util/clock.h"

namespace gpumeter {

const Clock& system_clock() {
  struct System final : Clock {
    time_point now() const override { return std::chrono::steady_clock::now(); }
    std::int64_t wall_us() const override {
      return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
    }
    bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, time_point deadline,
                    const std::function<bool()>& done) const override {
      return cv.wait_until(lock, deadline, done);
    }
  };
  static const System clock;
  return clock;
}

}  // namespace gpumeter
