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
#include <cstdint>
#include <functional>
#include <limits>
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
  std::vector<double> increase;  // per step (N values), from step first + 1 on (see trim())
  std::vector<bool> present;     // per point (N+1): a sample within the point's range
  std::size_t first = 0;         // the steps before increase[0], all without an increase
};

// `s` with only the steps from its first increase to its last: a series of an owner lives in a
// few steps of a long period (19 of 241 on average in a 30-day bench), and a batch of GPUs
// holds thousands of series. Steps outside the range have no increase.
void trim(CounterSeries& s);

struct ResetFound {
  Labels labels;
  double after = 0;  // the reset happened in (after, at]: between these two raw samples
  double at = 0;
};

// A step of one series whose raw samples must be read before its increase is known, with what
// the walk knew entering it: a few numbers, so that a fleet's are kept while its GPUs are read
// batch by batch, and settled step by step for the whole fleet (CounterReader::settle), one
// request reading a step's raw samples of up to kMaxUuidsPerQuery GPUs whatever batch they were in.
struct PendingStep {
  std::uint64_t series = 0;  // series_id() of its labels as read
  std::uint64_t owner = 0;   // ... and of what it is billed as (keep_one_replica() drops replica labels)
  std::string uuid;
  std::size_t step = 0;                                        // 1..N
  double prev = 0, prev_at = 0, prev_earliest = 0;             // the walk entering the step
  double boundary = std::numeric_limits<double>::quiet_NaN();  // the value at the step's end point
};

// A pending step's increase.
struct SettledStep {
  std::uint64_t owner = 0;  // PendingStep::owner
  std::size_t step = 0;
  double increase = 0;
};

struct CounterData {
  std::vector<CounterSeries> series;
  std::vector<ResetFound> resets;
  // Read with read_deferred(): the steps left out of the series' increases, to be settled.
  std::vector<PendingStep> pending;
};

// The most uuids one query names (uuid=~"a|b|..."): VictoriaMetrics refuses a query longer than
// -search.maxQueryLen, 16 KiB by default; a GPU uuid with its separator is 41 bytes.
constexpr std::size_t kMaxUuidsPerQuery = 256;

// uuid -> step indices (1..N) whose raw samples must be read for every series of that GPU; or,
// as series flags, labels_key() -> the steps of that series alone.
using StepFlags = std::map<std::string, std::set<std::size_t>, std::less<>>;

class CounterReader {
 public:
  CounterReader(PromApi& api, std::vector<double> timeline, double step, double lookback,
                std::function<void(std::string_view)> progress = {});

  // `selector` is a metric name with optional matchers, e.g. gpu_busy_seconds_total{job="x"}.
  // `max_rate`: the most one series can count per second (1 for seconds of one GPU).
  // `only`: one more matcher every query carries but messages do not show (a batch of GPUs,
  // uuid=~"..."); empty for none.
  Result<CounterData> read(std::string_view selector, const StepFlags& flags = {}, double max_rate = 1.0);

  // As read(), without reading raw samples: the steps that need them are left out of the
  // series' increases and returned as `pending`. `only`: one more matcher every query carries
  // but messages do not show (a batch of GPUs, uuid=~"..."). `series_flags`: steps of single
  // series (reset_steps(..., true)).
  Result<CounterData> read_deferred(std::string_view selector, const StepFlags& flags, const StepFlags& series_flags,
                                    double max_rate, std::string_view only);
  // The increases of pending steps of `selector` (any batches'), from their raw samples: one
  // request per step and kMaxUuidsPerQuery GPUs; in step order. Only the steps i with i % lanes == lane, so
  // that `lanes` readers can share the work.
  Result<std::vector<SettledStep>> settle(std::string_view selector, const std::vector<PendingStep>& pending,
                                          double max_rate, std::size_t lane = 0, std::size_t lanes = 1);

  // From here on, raw samples come through the store's remote read API (PromApi::read_raw)
  // rather than the query API: read() and read_gpus() walk every sample of every series, so
  // nothing is left pending and no reset needs flagging (reset_steps() answers none, without a
  // request). Series without a uuid label are no ledger's, and are not read.
  void use_remote_read() { remote_ = true; }

  // The series of the metric `metric` on the GPUs `uuids`: read_deferred() with a matcher on
  // them, or every raw sample by remote read; each series trimmed to its steps with an increase
  // (trim()).
  Result<CounterData> read_gpus(std::string_view metric, const std::vector<std::string>& uuids, const StepFlags& flags,
                                const StepFlags& series_flags, double max_rate);

  // Steps holding the sample after a decrease of a counter of the metric, by `resets()` over
  // two steps (so a reset between the last sample of one step and the first of the next is
  // caught) less those over the step before: uuid -> step indices, or with `by_series`,
  // labels_key() -> step indices.
  Result<StepFlags> reset_steps(std::string_view selector, bool by_series = false);

  std::size_t steps() const { return timeline_.size() - 1; }
  const std::vector<double>& timeline() const { return timeline_; }

 private:
  // Appends to `out` the series of `metric` on the GPUs `uuids`, each walked from its raw
  // samples by remote read.
  Result<void> read_remote(std::string_view metric, const std::vector<std::string>& uuids, double max_rate,
                           CounterData& out);
  // A counter's name as messages show it, and the selector its queries use.
  struct Selector {
    std::string_view shown;
    std::string query;
  };
  // A counter's boundary values, each series' value before the period where it was born in
  // it, and the steps of each series whose raw samples are needed.
  struct Points {
    std::vector<std::vector<double>> values;  // per series, per point; NaN where none
    std::vector<Labels> labels;
    std::map<std::size_t, double> previous;
    std::vector<std::vector<bool>> flagged;  // per series, per point
  };
  Result<Points> read_series(const Selector& selector, const StepFlags& flags, const StepFlags& series_flags);
  Result<void> read_points(const Selector& selector, std::vector<std::vector<double>>& values,
                           std::vector<Labels>& labels, std::map<std::string, std::size_t>& index);
  Result<void> find_predecessors(const Selector& selector, const std::vector<std::size_t>& born,
                                 const std::vector<Labels>& labels, std::map<std::size_t, double>& previous);
  // (series key, step) -> the raw samples read for that step, as far as a walk needs them
  // (turning_points()).
  using RawSamples = std::map<std::pair<std::string, std::size_t>, std::vector<Sample>>;
  Result<RawSamples> read_raw(const Selector& selector, const std::vector<std::vector<bool>>& flagged,
                              const std::vector<Labels>& labels);
  Result<CounterData> walk_all(std::string_view selector, double max_rate, const Points& points,
                               const RawSamples* raw) const;
  // What the points and the raw reads know of one series.
  struct SeriesPoints {
    const Labels& labels;
    const std::vector<double>& values;  // per point; NaN where the series had no sample
    std::optional<double> previous;     // its last value before the period, when born inside it
    const std::vector<bool>& flagged;   // per point: its step's raw samples were read
  };
  // A series' increases per step, from its boundary values and the raw samples of its flagged
  // steps; the resets found are appended to `resets`. Without `raw`, flagged steps are left
  // out and appended to `pending` instead.
  Result<CounterSeries> walk(std::string_view selector, double max_rate, const SeriesPoints& series,
                             const RawSamples* raw, CounterData& out) const;

  PromApi& api_;
  std::vector<double> timeline_;
  double step_;
  double lookback_;
  std::function<void(std::string_view)> progress_;
  bool remote_ = false;
};

// `selector` with one more matcher: m{a="b"} and c=~"d" give m{a="b",c=~"d"}.
std::string with_matcher(std::string_view selector, std::string_view matcher);

// Of one series' raw samples in time order, those an increase walk needs: the first, the last,
// and both samples of every decrease. Between them the values never go down, so the walk adds
// the same increase from the kept samples alone (up to rounding), and memory grows with the
// resets, not with the samples a short scrape interval writes.
std::vector<Sample> turning_points(const std::vector<Sample>& samples);

}  // namespace gpumeter::report
