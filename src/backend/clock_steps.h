#pragma once
// Steps of the wall clock (NTP stepping it, a VM restored, an operator's `date -s`), told apart
// from time passing by comparing how far the wall clock and the monotonic clock moved between
// two readings of one GPU. The driver stamps its samples with the wall clock, and the ledger
// integrates on it, so a step must move their cursors with it.
//
// A difference of kClockStepThresholdUs or more at one reading is a step at once. Smaller ones
// are what slewing (at most kMaxSlewPpm of the time passed) and reading the two clocks a moment
// apart (kClockReadJitterUs) allow, or small steps: what exceeds that allowance adds up, and is
// a step when the sum reaches the threshold. Thirty steps of -0.24 s a second, each under the
// threshold, were never seen before and lost 22 % of the time as neither covered nor gap.

#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>

namespace gpumeter {

inline constexpr std::int64_t kMaxSlewPpm = 500;  // adjtime()'s and NTP's largest slew rate
inline constexpr std::int64_t kClockReadJitterUs = 1'000;

class WallClockSteps {
 public:
  // The step (µs, + forward) to act on at a reading taken at `wall_us` (the system clock, µs
  // since the Unix epoch) and `steady`, or 0.
  std::int64_t observe(std::int64_t wall_us, std::chrono::steady_clock::time_point steady);

 private:
  std::optional<std::pair<std::int64_t, std::chrono::steady_clock::time_point>> last_;
  std::int64_t pending_us_ = 0;  // small steps seen and not yet acted on
};

}  // namespace gpumeter
