#pragma once
// Scenario time: whole microseconds since the scenario's time 0. Integers keep pattern edges,
// fault windows and the 200 ms sample grid exact, so segment sums never drift.

#include <cstdint>
#include <limits>

namespace gpumeter::sim {

using Micros = std::int64_t;

inline constexpr Micros kMicrosPerSecond = 1'000'000;
inline constexpr Micros kForever = std::numeric_limits<Micros>::max();

inline constexpr double to_seconds(Micros us) { return static_cast<double>(us) / 1e6; }

}  // namespace gpumeter::sim
