#pragma once
// Exact increases of Prometheus counters over the steps of a period, from the values at the
// step boundaries, with counter resets found and resolved from raw samples only where they
// occurred. This is what makes a report exact where `increase()` extrapolates and
// `sum_over_time()` adds up samples.
//
// Definitions. V_s(t) is the last raw sample of series s at or before t. A series' increase
// over (t_a, t_b] is the sum, over its raw samples in that interval, of (v - previous) when
// v >= previous and of v when v < previous (a reset: the counter restarted from zero); the
// previous value of the first sample is the last sample before t_a, found as far back as the
// lookback reaches, else 0 (the series was born with the counter at zero). Increases so
// defined add up exactly over consecutive periods. A ledger counter restarts from zero, so a
// value below the previous one is a reset only when it is near zero: at most what the counter
// can have counted since the previous sample (`max_rate` per second, plus a minute). A larger
// one (a 10% dip) is no reset but data no ledger can have written, and reading fails.
//
// Method (docs/chargeback.md has the long form):
//   1. V at every point of the timeline: one range query `last_over_time(m[step])` for the
//      regular grid, and instant queries for the period's ends and price-change points. Each
//      point's range reaches back to the previous point, so every sample falls in some range.
//   2. Between consecutive known values of a series: v >= previous is a plain increase; a
//      drop, a reappearance after empty points, a series born inside the period that existed
//      before it, or a step where the caller flagged the GPU (its ledger restarted) could hide a
//      reset, so those spans alone are re-read as raw samples (`m{uuid="..."}[span]`).

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "report/prom_api.h"
#include "util/result.h"

namespace gpumeter::report {

// Points t_0 = from < t_1 < ... < t_N = to: the grid from + k*step, the extra points (price
// changes) and `to`. Step i is (t_{i-1}, t_i], i = 1..N.
std::vector<double> make_timeline(double from, double to, double step, const std::vector<double>& extra_points);

struct CounterSeries {
  Labels labels;
  std::vector<double> increase;  // per step (N values)
  std::vector<bool> present;     // per point (N+1): a sample within the point's range
};

struct ResetFound {
  Labels labels;
  double after = 0;  // the reset happened in (after, at]: between these two raw samples
  double at = 0;
};

struct CounterData {
  std::vector<CounterSeries> series;
  std::vector<ResetFound> resets;
};

// uuid -> step indices (1..N) whose raw samples must be read for every series of that GPU.
using StepFlags = std::map<std::string, std::set<std::size_t>, std::less<>>;

class CounterReader {
 public:
  CounterReader(PromApi& api, std::vector<double> timeline, double step, double lookback,
                std::function<void(std::string_view)> progress = {});

  // `selector` is a metric name with optional matchers, e.g. gpu_busy_seconds_total{job="x"}.
  // `max_rate`: the most one series can count per second (1 for seconds of one GPU).
  Result<CounterData> read(std::string_view selector, const StepFlags& flags = {}, double max_rate = 1.0);

  // Steps in which a counter of the metric decreased at least once, by `resets()` over two
  // steps so a reset between the last sample of one step and the first of the next is caught:
  // uuid -> step indices.
  Result<StepFlags> reset_steps(std::string_view selector);

  std::size_t steps() const { return timeline_.size() - 1; }
  const std::vector<double>& timeline() const { return timeline_; }

 private:
  Result<void> read_points(std::string_view selector, std::vector<std::vector<double>>& values,
                           std::vector<Labels>& labels, std::map<std::string, std::size_t>& index);
  Result<void> find_predecessors(std::string_view selector, const std::vector<std::size_t>& born,
                                 const std::vector<Labels>& labels, std::map<std::size_t, double>& previous);
  // (series key, step) -> the raw samples read for that step.
  using RawSamples = std::map<std::pair<std::string, std::size_t>, std::vector<Sample>>;
  // What the points and the raw reads know of one series.
  struct SeriesPoints {
    const Labels& labels;
    const std::vector<double>& values;  // per point; NaN where the series had no sample
    std::optional<double> previous;     // its last value before the period, when born inside it
    const std::vector<bool>& flagged;   // per point: its step's raw samples were read
  };
  // A series' increases per step, from its boundary values and the raw samples of its flagged
  // steps; the resets found are appended to `resets`.
  Result<CounterSeries> walk(std::string_view selector, double max_rate, const SeriesPoints& series,
                             const RawSamples& raw, std::vector<ResetFound>& resets) const;

  PromApi& api_;
  std::vector<double> timeline_;
  double step_;
  double lookback_;
  std::function<void(std::string_view)> progress_;
};

// The identity of a label set as one string (for maps).
std::string labels_key(const Labels& labels);

}  // namespace gpumeter::report
