#include "backend/clock_steps.h"

#include "model/reading.h"

namespace gpumeter {

namespace {

bool is_step(std::int64_t us) { return us >= kClockStepThresholdUs || us <= -kClockStepThresholdUs; }

}  // namespace

std::int64_t WallClockSteps::observe(std::int64_t wall_us, std::chrono::steady_clock::time_point steady) {
  if (!last_) {
    last_ = {wall_us, steady};
    return 0;
  }
  const std::int64_t steady_moved =
      std::chrono::duration_cast<std::chrono::microseconds>(steady - last_->second).count();
  const std::int64_t diff = (wall_us - last_->first) - steady_moved;
  last_ = {wall_us, steady};
  if (is_step(diff)) {
    const std::int64_t step = diff + pending_us_;
    pending_us_ = 0;
    return step;
  }
  const std::int64_t allowed = steady_moved * kMaxSlewPpm / 1'000'000 + kClockReadJitterUs;
  if (diff > allowed) pending_us_ += diff - allowed;
  if (diff < -allowed) pending_us_ += diff + allowed;
  if (!is_step(pending_us_)) return 0;
  const std::int64_t step = pending_us_;
  pending_us_ = 0;
  return step;
}

}  // namespace gpumeter
