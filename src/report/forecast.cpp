#include "report/forecast.h"

#include <algorithm>
#include <cstddef>

namespace gpumeter::report {

namespace {

// The integral of max(0, a + b t) over [0, h].
double positive_integral(double a, double b, double h) {
  if (b == 0) return a > 0 ? a * h : 0;
  const double zero = -a / b;  // where the line crosses 0
  double lo = 0, hi = h;
  if (b > 0)
    lo = std::clamp(zero, 0.0, h);
  else
    hi = std::clamp(zero, 0.0, h);
  if (hi <= lo) return 0;
  return a * (hi - lo) + b * (hi * hi - lo * lo) / 2;
}

}  // namespace

std::optional<DemandForecast> forecast_demand(const std::vector<double>& starts, const std::vector<double>& ends,
                                              const std::vector<double>& allocated_seconds, double horizon_seconds) {
  const std::size_t n = std::min({starts.size(), ends.size(), allocated_seconds.size()});
  double weight = 0, mean_x = 0, mean_y = 0;
  double end = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double w = ends[i] - starts[i];
    if (w <= 0) continue;
    weight += w;
    mean_x += w * (starts[i] + ends[i]) / 2;
    mean_y += allocated_seconds[i];  // w x (allocated / w)
    end = std::max(end, ends[i]);
  }
  if (weight <= 0) return std::nullopt;
  mean_x /= weight;
  mean_y /= weight;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double w = ends[i] - starts[i];
    if (w <= 0) continue;
    const double dx = (starts[i] + ends[i]) / 2 - mean_x;
    sxx += w * dx * dx;
    sxy += w * dx * (allocated_seconds[i] / w - mean_y);
  }
  const double slope = sxx > 0 ? sxy / sxx : 0;  // GPUs per second
  DemandForecast f;
  f.gpus_at_end = mean_y + slope * (end - mean_x);
  f.trend_gpus_per_day = slope * 86400;
  f.gpu_hours = positive_integral(f.gpus_at_end, slope, horizon_seconds) / 3600;
  return f;
}

std::optional<RowForecast> row_forecast(const std::vector<double>& timeline, const std::vector<double>& allocated_steps,
                                        double horizon_seconds, bool priced, const Row& row) {
  std::vector<double> starts, ends;
  for (std::size_t i = 1; i < timeline.size(); ++i) {
    starts.push_back(timeline[i - 1]);
    ends.push_back(timeline[i]);
  }
  auto f = forecast_demand(starts, ends, allocated_steps, horizon_seconds);
  if (!f) return std::nullopt;
  RowForecast out{f->gpus_at_end, f->trend_gpus_per_day, f->gpu_hours, std::nullopt};
  if (priced && row.usage.allocated_seconds > 0) {
    out.cost = row.cost.total() / (row.usage.allocated_seconds / 3600) * f->gpu_hours;
  }
  return out;
}

}  // namespace gpumeter::report
