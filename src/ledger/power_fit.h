#pragma once
// A GPU's power as a function of its utilization, learnt from the periods the power sensor
// sampled, for the periods it did not: samples lost from a full buffer (a busy GPU fills NVML's
// 119-sample power buffer in about 4 s, docs/nvml-behaviour.md, "Power cadence") or a buffer
// that says nothing for a while.
//
// The estimate is the duration-weighted least-squares line P = a + b·U over the sampled periods,
// older periods weighing less (half as much per kHalfLifeSeconds of sampled time), so that it
// follows the workload. Where the periods' utilization hardly varies the line is not determined
// and the estimate is their mean power.

#include <optional>

namespace gpumeter {

class PowerFit {
 public:
  // Sampled time after which a period weighs half as much: an **assumption** (docs/ledger.md),
  // long enough to hold idle and busy periods, short enough to follow a new workload.
  static constexpr double kHalfLifeSeconds = 60;
  // Below this variance of the utilization (0..1, so one percentage point of standard
  // deviation, NVML's resolution), the slope is not determined.
  static constexpr double kMinVariance = 1e-4;

  // A period of `seconds` at `utilization` (0..1) whose power the sensor measured as `watts`.
  void add(double utilization, double watts, double seconds);
  // The power at `utilization`, never negative; unset before any period was added.
  std::optional<double> estimate(double utilization) const;

 private:
  double w_ = 0, wu_ = 0, wuu_ = 0, wp_ = 0, wup_ = 0;  // Σw, Σw·U, Σw·U², Σw·P, Σw·U·P
};

}  // namespace gpumeter
