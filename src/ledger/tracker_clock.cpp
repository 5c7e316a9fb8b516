#include "ledger/tracker_clock.h"

#include <chrono>
#include <fstream>

#include <fmt/format.h>

#include "ledger/usage_tracker.h"

namespace gpumeter {

namespace {

// Fixed for the life of a boot, so of the process: read once.
const std::string& system_boot_id() {
  static const std::string id = [] {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string line;
    std::getline(in, line);
    return line;
  }();
  return id;
}

}  // namespace

std::int64_t wall_now_us(const UsageTrackerOptions& options) {
  return (options.clock ? *options.clock : system_clock()).wall_us();
}

std::int64_t monotonic_now_us(const UsageTrackerOptions& options) {
  return (options.clock ? *options.clock : system_clock()).monotonic_us();
}

std::string boot_id(const UsageTrackerOptions& options) {
  return options.boot_id ? options.boot_id() : system_boot_id();
}

std::string seconds_text(std::int64_t us) { return fmt::format("{:.3f}", static_cast<double>(us) / 1e6); }

}  // namespace gpumeter
