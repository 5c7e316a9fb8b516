#pragma once
// The usage tracker's clocks (UsageTrackerOptions::clock, boot_id): the options' where set, else
// the system's.

#include <cstdint>
#include <string>

namespace gpumeter {

struct UsageTrackerOptions;

// The wall clock, µs since the Unix epoch.
std::int64_t wall_now_us(const UsageTrackerOptions& options);
// A monotonic clock, µs.
std::int64_t monotonic_now_us(const UsageTrackerOptions& options);
// The boot's id: a monotonic reading is comparable with another of the same boot only.
std::string boot_id(const UsageTrackerOptions& options);
// A span of µs as seconds with three decimals, as the tracker's log messages give it.
std::string seconds_text(std::int64_t us);

}  // namespace gpumeter
