#pragma once
// Capacity planning: the GPU-hours a group will hold over the next horizon, from the trend of
// the GPUs it held over the report's period (docs/chargeback.md, "Forecast").

#include <optional>
#include <vector>

#include "report/report_model.h"

namespace gpumeter::report {

struct DemandForecast {
  double gpus_at_end = 0;         // the fitted GPUs in use at the period's end
  double trend_gpus_per_day = 0;  // the fitted line's slope
  double gpu_hours = 0;           // over the horizon after the period's end
};

// Fits a least-squares line to the GPUs a group held in each step of the period (its allocated
// seconds over the step's length, placed at the step's middle, weighted by the step's length),
// and integrates the line over [end of the last step, + horizon_seconds], counting no negative
// demand where the line falls below zero. With one step of data the line is flat. Nullopt when
// no step has a length.
std::optional<DemandForecast> forecast_demand(const std::vector<double>& starts, const std::vector<double>& ends,
                                              const std::vector<double>& allocated_seconds, double horizon_seconds);

// The forecast of one report row from its allocated seconds per step of `timeline` (the steps'
// boundaries); priced at the row's cost per allocated GPU-hour over the period when `priced`.
std::optional<RowForecast> row_forecast(const std::vector<double>& timeline, const std::vector<double>& allocated_steps,
                                        double horizon_seconds, bool priced, const Row& row);

}  // namespace gpumeter::report
