#include "sim/scenario/scenario_clock.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>

#include "util/file_read.h"

namespace gpumeter::sim {

ScenarioClock::ScenarioClock(double scale, std::string epoch_file)
    : scale_(scale), epoch_file_(std::move(epoch_file)), epoch_ns_(kHeld) {}

ScenarioClock::ScenarioClock(const ScenarioClock& other)
    : scale_(other.scale_), epoch_file_(other.epoch_file_), epoch_ns_(other.epoch_ns_.load()) {}

std::int64_t ScenarioClock::wall_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<std::int64_t> ScenarioClock::epoch_ns() const {
  std::int64_t e = epoch_ns_.load(std::memory_order_acquire);
  if (e != kHeld) return e;
  // Held: the file is read until it appears. Each caller may read it; all read the same value.
  auto from_file = read_epoch_file(epoch_file_);
  if (!from_file) return std::nullopt;
  epoch_ns_.compare_exchange_strong(e, *from_file, std::memory_order_acq_rel);
  return epoch_ns_.load(std::memory_order_acquire);
}

std::int64_t ScenarioClock::epoch_or_now_ns() const {
  if (auto e = epoch_ns()) return *e;
  return wall_now_ns();
}

Micros ScenarioClock::now() const {
  const auto epoch = epoch_ns();
  if (!epoch) return 0;
  const double elapsed_ns = static_cast<double>(wall_now_ns() - *epoch);
  return static_cast<Micros>(std::floor(elapsed_ns * scale_ / 1000.0));
}

std::int64_t ScenarioClock::unix_micros(Micros t) const {
  // Rounded down so that timestamps increase with t whatever the epoch's sub-microsecond part.
  // While held, scenario time 0 is now: the timestamps of time 0 follow the wall clock, and
  // continue without a step when the epoch is written.
  const std::int64_t epoch_ns = epoch_or_now_ns();
  const std::int64_t epoch_us = epoch_ns >= 0 ? epoch_ns / 1000 : -((-epoch_ns + 999) / 1000);
  return epoch_us + t;
}

std::int64_t ScenarioClock::wall_ns_at(Micros t) const {
  return epoch_or_now_ns() + static_cast<std::int64_t>(std::ceil(static_cast<double>(t) * 1000.0 / scale_));
}

std::optional<std::int64_t> read_epoch_file(const std::string& path) {
  auto text = read_regular_file(path, FileReadOptions{.max_bytes = 64});
  if (!text || text->empty()) return std::nullopt;
  char* end = nullptr;
  const double seconds = std::strtod(text->c_str(), &end);
  while (end != nullptr && (*end == '\n' || *end == ' ')) ++end;
  if (end == text->c_str() || end == nullptr || *end != '\0' || !std::isfinite(seconds) || seconds < 0) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(std::llround(seconds * 1e9));
}

}  // namespace gpumeter::sim
