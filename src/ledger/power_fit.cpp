#include "ledger/power_fit.h"

#include <algorithm>
#include <cmath>

namespace gpumeter {

void PowerFit::add(double utilization, double watts, double seconds) {
  if (!(seconds > 0) || !std::isfinite(utilization) || !std::isfinite(watts)) return;
  const double keep = std::exp2(-seconds / kHalfLifeSeconds);
  for (double* sum : {&w_, &wu_, &wuu_, &wp_, &wup_}) *sum *= keep;
  w_ += seconds;
  wu_ += seconds * utilization;
  wuu_ += seconds * utilization * utilization;
  wp_ += seconds * watts;
  wup_ += seconds * utilization * watts;
}

std::optional<double> PowerFit::estimate(double utilization) const {
  if (!(w_ > 0)) return std::nullopt;
  const double mean_u = wu_ / w_, mean_p = wp_ / w_;
  const double variance = wuu_ / w_ - mean_u * mean_u;
  if (variance < kMinVariance) return std::max(0.0, mean_p);
  const double slope = (wup_ / w_ - mean_u * mean_p) / variance;
  return std::max(0.0, mean_p + slope * (utilization - mean_u));
}

}  // namespace gpumeter
