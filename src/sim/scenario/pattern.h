#pragma once
// Utilization patterns of a job. Every pattern is piecewise constant in whole percents, and
// next_change() names the next edge, so integrals are exact sums over segments.
// Pattern time is relative to the job's start.

#include <utility>
#include <variant>
#include <vector>

#include "sim/scenario/time.h"

namespace gpumeter::sim {

struct ConstantPattern {
  int percent = 0;
};

// `high` for the first `high_time` of every period, `low` for the rest, shifted by `phase`.
struct SquarePattern {
  int high = 0;
  int low = 0;
  Micros period = 1;
  Micros high_time = 0;
  Micros phase = 0;  // in [0, period)
};

// from `from` to `to` over `over`, holding each value for `step`; `to` from `over` on.
struct RampPattern {
  int from = 0;
  int to = 0;
  Micros over = 1;
  Micros step = kMicrosPerSecond;
};

// A step function through (time, percent) points; 0 before the first point.
struct TracePattern {
  std::vector<std::pair<Micros, int>> points;  // strictly increasing times
};

using Pattern = std::variant<ConstantPattern, SquarePattern, RampPattern, TracePattern>;

// The value at pattern time t >= 0, in percent.
int percent_at(const Pattern& p, Micros t);

// The first pattern time after t at which the value may change, or kForever.
Micros next_change(const Pattern& p, Micros t);

}  // namespace gpumeter::sim
