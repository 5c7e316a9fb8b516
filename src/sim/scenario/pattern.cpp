#include "sim/scenario/pattern.h"

#include <algorithm>

namespace gpumeter::sim {

namespace {

// Rounds num/den to the nearest integer, halves away from zero; den > 0.
Micros round_div(Micros num, Micros den) {
  return num >= 0 ? (2 * num + den) / (2 * den) : -((-2 * num + den) / (2 * den));
}

Micros positive_mod(Micros a, Micros m) {
  Micros r = a % m;
  return r < 0 ? r + m : r;
}

bool square_is_constant(const SquarePattern& s) {
  return s.high == s.low || s.high_time <= 0 || s.high_time >= s.period;
}

int ramp_value(const RampPattern& r, Micros t) {
  if (t >= r.over) return r.to;
  Micros stepped = (t / r.step) * r.step;
  return r.from + static_cast<int>(round_div(static_cast<Micros>(r.to - r.from) * stepped, r.over));
}

}  // namespace

int percent_at(const Pattern& p, Micros t) {
  return std::visit(
      [t](const auto& v) -> int {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, ConstantPattern>) {
          return v.percent;
        } else if constexpr (std::is_same_v<T, SquarePattern>) {
          if (square_is_constant(v)) return v.high_time >= v.period ? v.high : v.low;
          return positive_mod(t - v.phase, v.period) < v.high_time ? v.high : v.low;
        } else if constexpr (std::is_same_v<T, RampPattern>) {
          return ramp_value(v, t);
        } else {
          auto it = std::upper_bound(v.points.begin(), v.points.end(), t,
                                     [](Micros x, const auto& pt) { return x < pt.first; });
          return it == v.points.begin() ? 0 : std::prev(it)->second;
        }
      },
      p);
}

Micros next_change(const Pattern& p, Micros t) {
  return std::visit(
      [t](const auto& v) -> Micros {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, ConstantPattern>) {
          return kForever;
        } else if constexpr (std::is_same_v<T, SquarePattern>) {
          if (square_is_constant(v)) return kForever;
          Micros r = positive_mod(t - v.phase, v.period);
          return r < v.high_time ? t + (v.high_time - r) : t + (v.period - r);
        } else if constexpr (std::is_same_v<T, RampPattern>) {
          if (t >= v.over) return kForever;
          return std::min((t / v.step + 1) * v.step, v.over);
        } else {
          auto it = std::upper_bound(v.points.begin(), v.points.end(), t,
                                     [](Micros x, const auto& pt) { return x < pt.first; });
          return it == v.points.end() ? kForever : it->first;
        }
      },
      p);
}

}  // namespace gpumeter::sim
