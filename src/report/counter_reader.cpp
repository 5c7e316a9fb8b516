#include "report/counter_reader.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

namespace gpumeter::report {
namespace {

constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();

// "selector{label=\"value\",...}" for messages.
std::string series_text(std::string_view selector, const Labels& labels) {
  std::string shown;
  for (const auto& [k, v] : labels) shown += fmt::format("{}{}=\"{}\"", shown.empty() ? "" : ",", k, v);
  return fmt::format("{}{{{}}}", selector, shown);
}

// Ledger counters start at 0 and only grow: a negative or non-finite sample is corrupt data
// (a bad write, a foreign series), and an exact report refuses it rather than adding it up.
std::optional<Error> bad_sample(std::string_view selector, const Labels& labels, const Sample& x) {
  if (std::isfinite(x.v) && x.v >= 0) return std::nullopt;
  return Error{0, fmt::format("{} has the sample {} at {:.3f}; a counter of the ledger is never negative or "
                              "infinite, so the data cannot be billed",
                              series_text(selector, labels), x.v, x.t)};
}
// Two times closer than this are the same point (the API rounds to milliseconds).
constexpr double kSameTime = 1e-3;
// Uuids per regex in one request, so URLs and regexes stay small.
constexpr std::size_t kUuidsPerRequest = 64;
// Uuids per request for the raw samples of one step. Such a request reads one step's samples of
// the flagged GPUs only, so fewer, larger requests save round trips; but VictoriaMetrics refuses
// a query longer than -search.maxQueryLen, 16 KiB by default, and 256 uuids are about 10.5 KiB.
constexpr std::size_t kUuidsPerSettle = kMaxUuidsPerQuery;
// GPUs per remote read request: the answer streams, so this only sets how many requests a
// fleet takes, as a query batch of 64 does.
constexpr std::size_t kUuidsPerRemoteRead = 64;
// What a restarted counter may hold beyond max_rate x the time since the sample before it: a
// restarted agent's first reading can reach back into the driver's sample buffer (about 20 s),
// and the agent's clock and the store's may differ by seconds.
constexpr double kResetSlackSeconds = 60;

// One series' values in time order, added up into increases per step by the definition in
// counter_reader.h. A value below the one before is a reset only when it is near zero: no more
// than the counter can have counted since the earliest time the previous value can have been
// sampled. Anything else is a decrease no ledger makes, and an error.
class IncreaseWalk {
 public:
  IncreaseWalk(std::string_view selector, const Labels& labels, double max_rate, std::size_t steps)
      : selector_(selector), labels_(labels), max_rate_(max_rate), increase_(steps, 0.0) {}

  // The value before the first step, sampled at `at` or no earlier than `earliest`.
  void start(double value, double at, double earliest) {
    prev_ = value;
    prev_at_ = at;
    prev_earliest_ = earliest;
  }

  // `value`, sampled at `at` or no earlier than `earliest`, in step `step` (1-based).
  std::optional<Error> advance(double value, double at, double earliest, std::size_t step,
                               std::vector<ResetFound>& resets) {
    if (value >= prev_) [[likely]] {  // every sample but a reset's: kept small, to be inlined
      increase_[step - 1] += value - prev_;
      start(value, at, earliest);
      return std::nullopt;
    }
    return drop(value, at, earliest, step, resets);
  }

  double last() const { return prev_; }
  double last_at() const { return prev_at_; }
  double last_earliest() const { return prev_earliest_; }
  std::vector<double> increases() && { return std::move(increase_); }

 private:
  // A value below the previous one: a restart from zero when near zero, else an error.
  [[gnu::noinline]] std::optional<Error> drop(double value, double at, double earliest, std::size_t step,
                                              std::vector<ResetFound>& resets) {
    const double most = max_rate_ * (at - prev_earliest_ + kResetSlackSeconds);
    if (value > most) {
      return Error{0, fmt::format("{} went down from {} (at {:.3f}) to {} (at {:.3f}); a ledger counter only "
                                  "goes down when it restarts from zero, and {} is more than it can have "
                                  "counted since ({} at most), so the data cannot be billed",
                                  series_text(selector_, labels_), prev_, prev_at_, value, at, value, most)};
    }
    increase_[step - 1] += value;
    resets.push_back(ResetFound{labels_, prev_at_, at});
    start(value, at, earliest);
    return std::nullopt;
  }

  std::string_view selector_;
  const Labels& labels_;
  double max_rate_;
  std::vector<double> increase_;
  double prev_ = 0, prev_at_ = 0, prev_earliest_ = 0;
};

std::string uuid_of(const Labels& labels) {
  auto it = labels.find("uuid");
  return it == labels.end() ? std::string() : it->second;
}

template <typename T>
std::vector<std::vector<T>> chunks(const std::vector<T>& all, std::size_t size) {
  std::vector<std::vector<T>> out;
  for (std::size_t i = 0; i < all.size(); i += size) {
    out.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(i),
                     all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), i + size)));
  }
  return out;
}

}  // namespace

std::string with_matcher(std::string_view selector, std::string_view matcher) {
  if (!selector.empty() && selector.back() == '}') {
    std::string out(selector.substr(0, selector.size() - 1));
    if (out.back() != '{') out += ',';
    return out + std::string(matcher) + "}";
  }
  return fmt::format("{}{{{}}}", selector, matcher);
}

std::vector<Sample> turning_points(const std::vector<Sample>& samples) {
  std::vector<Sample> kept;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const bool edge = i == 0 || i + 1 == samples.size();
    const bool drop = i > 0 && samples[i].v < samples[i - 1].v;
    const bool before_drop = i + 1 < samples.size() && samples[i + 1].v < samples[i].v;
    if (edge || drop || before_drop) kept.push_back(samples[i]);
  }
  return kept;
}

std::vector<double> make_timeline(double from, double to, double step, const std::vector<double>& extra_points) {
  std::vector<double> points{from};
  for (long long k = 1;; ++k) {
    double t = from + static_cast<double>(k) * step;
    if (t >= to - kSameTime) break;
    points.push_back(t);
  }
  for (double t : extra_points) {
    if (t > from + kSameTime && t < to - kSameTime) points.push_back(t);
  }
  points.push_back(to);
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end(), [](double a, double b) { return b - a < kSameTime; }),
               points.end());
  return points;
}

CounterReader::CounterReader(PromApi& api, std::vector<double> timeline, double step, double lookback,
                             std::function<void(std::string_view)> progress)
    : api_(api), timeline_(std::move(timeline)), step_(step), lookback_(lookback), progress_(std::move(progress)) {}

Result<void> CounterReader::read_points(const Selector& selector, std::vector<std::vector<double>>& values,
                                        std::vector<Labels>& labels, std::map<std::string, std::size_t>& index) {
  const std::size_t points = timeline_.size();
  auto store = [&](std::vector<Series>& result, auto point_of) -> Result<void> {
    for (auto& s : result) {
      auto key = labels_key(s.labels);
      auto [it, inserted] = index.emplace(key, labels.size());
      if (inserted) {
        labels.push_back(std::move(s.labels));
        values.emplace_back(points, kMissing);
      }
      for (const auto& sample : s.samples) {
        if (auto e = bad_sample(selector.shown, labels[it->second], sample)) return *e;
        auto p = point_of(sample.t);
        if (!p) {
          return Error{0, fmt::format("{}: the API answered for time {:.3f}, which is not a point that was asked for",
                                      selector.shown, sample.t)};
        }
        values[it->second][*p] = sample.v;
      }
    }
    return {};
  };
  auto exact_point = [&](double t) -> std::optional<std::size_t> {
    auto it = std::lower_bound(timeline_.begin(), timeline_.end(), t - kSameTime);
    if (it == timeline_.end() || std::abs(*it - t) > kSameTime) return std::nullopt;
    return static_cast<std::size_t>(it - timeline_.begin());
  };

  // The regular grid in one range query; every other point (the ends, price changes) alone.
  std::vector<std::size_t> grid, others;
  for (std::size_t i = 1; i < points; ++i) {
    double k = (timeline_[i] - timeline_[0]) / step_;
    (std::abs(k - std::round(k)) * step_ < kSameTime ? grid : others).push_back(i);
  }
  const std::string last = fmt::format("last_over_time({}[{}])", selector.query, promql_range(step_));
  auto first = api_.query(last, timeline_[0]);
  if (!first) return first.error();
  if (auto ok = store(*first, [](double) { return std::optional<std::size_t>(0); }); !ok) return ok;
  if (!grid.empty()) {
    auto range = api_.query_range(last, timeline_[grid.front()], timeline_[grid.back()], step_);
    if (!range) return range.error();
    if (auto ok = store(*range, exact_point); !ok) return ok;
  }
  for (std::size_t i : others) {
    auto expr = fmt::format("last_over_time({}[{}])", selector.query, promql_range(timeline_[i] - timeline_[i - 1]));
    auto one = api_.query(expr, timeline_[i]);
    if (!one) return one.error();
    if (auto ok = store(*one, [i](double) { return std::optional<std::size_t>(i); }); !ok) return ok;
  }
  return {};
}

Result<void> CounterReader::find_predecessors(const Selector& selector, const std::vector<std::size_t>& born,
                                              const std::vector<Labels>& labels,
                                              std::map<std::size_t, double>& previous) {
  if (born.empty() || lookback_ <= step_) return {};
  std::map<std::string, std::vector<std::size_t>> by_uuid;
  for (std::size_t s : born) by_uuid[uuid_of(labels[s])].push_back(s);
  std::vector<std::string> uuids;
  for (const auto& [u, _] : by_uuid) uuids.push_back(u);
  std::map<std::string, std::size_t> wanted;
  for (std::size_t s : born) wanted.emplace(labels_key(labels[s]), s);

  const double from = timeline_[0];
  for (const auto& group : chunks(uuids, kUuidsPerRequest)) {
    const std::string sel = with_matcher(selector.query, "uuid=~" + promql_string(exact_alternation(group)));
    // The series index first: cheap, and it rules out most series born in the period.
    auto existed = api_.series(sel, from - lookback_, from);
    if (!existed) return existed.error();
    bool any = false;
    for (auto& l : *existed) {
      l.erase("__name__");
      if (wanted.count(labels_key(l))) any = true;
    }
    if (!any) continue;
    auto last = api_.query(fmt::format("last_over_time({}[{}])", sel, promql_range(lookback_)), from);
    if (!last) return last.error();
    for (const auto& s : *last) {
      auto it = wanted.find(labels_key(s.labels));
      if (it != wanted.end() && !s.samples.empty()) {
        if (auto e = bad_sample(selector.shown, s.labels, s.samples.back())) return *e;
        previous[it->second] = s.samples.back().v;
      }
    }
  }
  return {};
}

Result<StepFlags> CounterReader::reset_steps(std::string_view selector, bool by_series) {
  if (remote_) return StepFlags{};
  // Resets over two steps ending at t, less those over the one step ending at t - step, are the
  // drops whose later sample lies in (t - step, t]: the raw samples of the steps there are all a
  // walk needs, as it enters them with the value before the drop.
  const std::string over_two = fmt::format("resets({}[{}]) > 0", selector, promql_range(2 * step_));
  const std::string over_one = fmt::format("resets({}[{}]) > 0", selector, promql_range(step_));
  StepFlags flags;
  auto flag = [&](const std::vector<Series>& two, const std::vector<Series>& one) {
    std::map<std::pair<std::string, std::int64_t>, double> earlier;  // (series, ms) -> resets over one step
    for (const auto& s : one) {
      const std::string key = labels_key(s.labels);
      for (const auto& x : s.samples) earlier[{key, std::llround((x.t + step_) * 1000)}] = x.v;
    }
    for (const auto& s : two) {
      const std::string key = labels_key(s.labels);
      for (const auto& x : s.samples) {
        auto it = earlier.find({key, std::llround(x.t * 1000)});
        if (x.v <= (it == earlier.end() ? 0.0 : it->second)) continue;
        auto& steps = flags[by_series ? key : uuid_of(s.labels)];
        for (std::size_t i = 1; i < timeline_.size(); ++i) {
          if (timeline_[i] > x.t - step_ + kSameTime && timeline_[i - 1] < x.t - kSameTime) steps.insert(i);
        }
      }
    }
  };
  // The grid in two range queries; the end, when it is off the grid, in two instant ones.
  double last = timeline_[0];
  if (timeline_[0] + step_ <= timeline_.back() + kSameTime) {
    const double first = timeline_[0] + step_;
    last = first + std::floor((timeline_.back() - first + kSameTime) / step_) * step_;
    auto two = api_.query_range(over_two, first, last, step_);
    if (!two) return two.error();
    auto one = api_.query_range(over_one, timeline_[0], last - step_, step_);
    if (!one) return one.error();
    flag(*two, *one);
  }
  if (timeline_.back() - last > kSameTime) {
    auto two = api_.query(over_two, timeline_.back());
    if (!two) return two.error();
    auto one = api_.query(over_one, timeline_.back() - step_);
    if (!one) return one.error();
    flag(*two, *one);
  }
  return flags;
}

Result<CounterSeries> CounterReader::walk(std::string_view selector, double max_rate, const SeriesPoints& series,
                                          const RawSamples* raw, CounterData& out) const {
  const std::size_t points = timeline_.size();
  const std::string key = labels_key(series.labels);
  const auto& v = series.values;
  CounterSeries cs{series.labels, {}, std::vector<bool>(points, false)};
  for (std::size_t i = 0; i < points; ++i) cs.present[i] = !std::isnan(v[i]);
  IncreaseWalk walk(selector, series.labels, max_rate, points - 1);
  // A boundary value is the last sample within the step before its point; the previous value,
  // the last within the lookback.
  if (!std::isnan(v[0])) {
    walk.start(v[0], timeline_[0], timeline_[0] - step_);
  } else if (series.previous) {
    walk.start(*series.previous, timeline_[0], timeline_[0] - lookback_);
  }
  const std::uint64_t id = raw ? 0 : series_id(series.labels);
  for (std::size_t i = 1; i < points; ++i) {
    if (series.flagged[i] && !raw) {
      // Left to settle(), which walks the step's raw samples from here; the walk goes on from
      // the step's boundary value, as it would after them.
      out.pending.push_back(
          PendingStep{id, id, uuid_of(series.labels), i, walk.last(), walk.last_at(), walk.last_earliest(), v[i]});
      if (!std::isnan(v[i])) walk.start(v[i], timeline_[i], timeline_[i] - step_);
      continue;
    }
    if (series.flagged[i]) {
      if (auto it = raw->find({key, i}); it != raw->end()) {
        for (const auto& sample : it->second) {
          if (auto e = walk.advance(sample.v, sample.t, sample.t, i, out.resets)) return *e;
        }
      }
    }
    // The boundary value is authoritative (and all there is for an unflagged step).
    if (!std::isnan(v[i]) && (v[i] != walk.last() || !series.flagged[i])) {
      if (auto e = walk.advance(v[i], timeline_[i], timeline_[i] - step_, i, out.resets)) return *e;
    }
  }
  cs.increase = std::move(walk).increases();
  return cs;
}

// The raw samples of every flagged step: one request per step and group of GPUs, so the
// number of requests grows with the steps that need them, not with the series.
Result<CounterReader::RawSamples> CounterReader::read_raw(const Selector& selector,
                                                          const std::vector<std::vector<bool>>& flagged,
                                                          const std::vector<Labels>& labels) {
  std::map<std::size_t, std::set<std::string>> uuids_by_step;
  std::set<std::pair<std::string, std::size_t>> wanted;  // (series key, step)
  for (std::size_t s = 0; s < labels.size(); ++s) {
    for (std::size_t i = 1; i < flagged[s].size(); ++i) {
      if (!flagged[s][i]) continue;
      uuids_by_step[i].insert(uuid_of(labels[s]));
      wanted.emplace(labels_key(labels[s]), i);
    }
  }
  RawSamples raw;
  std::size_t requests = 0;
  for (const auto& [i, uuids] : uuids_by_step) {
    for (const auto& group : chunks(std::vector<std::string>(uuids.begin(), uuids.end()), kUuidsPerRequest)) {
      const std::string sel = with_matcher(selector.query, "uuid=~" + promql_string(exact_alternation(group)));
      auto answer = api_.raw_samples(sel, timeline_[i - 1], timeline_[i]);
      if (!answer) return answer.error();
      ++requests;
      for (auto& series : *answer) {
        auto key = labels_key(series.labels);
        if (!wanted.count({key, i})) continue;
        for (const auto& sample : series.samples) {
          if (auto e = bad_sample(selector.shown, series.labels, sample)) return *e;
        }
        raw.emplace(std::pair(std::move(key), i), turning_points(series.samples));
      }
    }
  }
  if (progress_ && requests) {
    progress_(fmt::format("{}: {} requests for raw samples where a reset could hide", selector.shown, requests));
  }
  return raw;
}

Result<CounterReader::Points> CounterReader::read_series(const Selector& selector, const StepFlags& flags,
                                                         const StepFlags& series_flags) {
  const std::size_t n = timeline_.size() - 1;
  Points out;
  std::map<std::string, std::size_t> index;
  if (auto ok = read_points(selector, out.values, out.labels, index); !ok) return ok.error();

  // Series that first appear inside the period: did they exist before it?
  std::vector<std::size_t> born;
  for (std::size_t s = 0; s < out.values.size(); ++s) {
    if (std::isnan(out.values[s][0])) born.push_back(s);
  }
  if (auto ok = find_predecessors(selector, born, out.labels, out.previous); !ok) return ok.error();

  // Which steps of which series need their raw samples.
  out.flagged.assign(out.values.size(), std::vector<bool>(n + 1, false));
  for (std::size_t s = 0; s < out.values.size(); ++s) {
    const auto& v = out.values[s];
    auto& flagged = out.flagged[s];
    for (const auto* found : {&flags, &series_flags}) {
      const auto it =
          found == &flags ? flags.find(uuid_of(out.labels[s])) : series_flags.find(labels_key(out.labels[s]));
      if (it == found->end()) continue;
      for (std::size_t i : it->second) {
        if (i >= 1 && i <= n) flagged[i] = true;
      }
    }
    const auto previous = out.previous.find(s);
    std::size_t last_i = 0;
    bool known = !std::isnan(v[0]) || previous != out.previous.end();
    double last = !std::isnan(v[0]) ? v[0] : (previous != out.previous.end() ? previous->second : 0.0);
    bool seen = !std::isnan(v[0]);
    for (std::size_t i = 1; i <= n; ++i) {
      if (std::isnan(v[i])) continue;
      // Only step i can hold the reset: an empty point means no sample in its whole step.
      if (v[i] < last || (seen && i - last_i > 1) || (!seen && known)) flagged[i] = true;
      last = v[i];
      last_i = i;
      seen = known = true;
    }
  }
  return out;
}

Result<CounterData> CounterReader::read(std::string_view selector, const StepFlags& flags, double max_rate) {
  if (remote_) {
    if (progress_) progress_(fmt::format("reading {} by remote read", selector));
    const std::vector<std::string> matches{std::string(selector)};
    auto uuids = api_.label_values("uuid", matches, timeline_[0] - step_, timeline_.back());
    if (!uuids) return uuids.error();
    CounterData out;
    for (const auto& group : chunks(*uuids, kUuidsPerRemoteRead)) {
      if (auto ok = read_remote(selector, group, max_rate, out); !ok) return ok.error();
    }
    return out;
  }
  const Selector sel{selector, std::string(selector)};
  if (progress_) progress_(fmt::format("reading {} at {} points", selector, timeline_.size()));
  auto points = read_series(sel, flags, {});
  if (!points) return points.error();
  auto raw = read_raw(sel, points->flagged, points->labels);
  if (!raw) return raw.error();
  return walk_all(selector, max_rate, *points, &*raw);
}

Result<CounterData> CounterReader::read_deferred(std::string_view selector, const StepFlags& flags,
                                                 const StepFlags& series_flags, double max_rate,
                                                 std::string_view only) {
  const Selector sel{selector, only.empty() ? std::string(selector) : with_matcher(selector, only)};
  auto points = read_series(sel, flags, series_flags);
  if (!points) return points.error();
  return walk_all(selector, max_rate, *points, nullptr);
}

void trim(CounterSeries& s) {
  const auto nonzero = [](double x) { return x != 0; };
  const auto a = std::find_if(s.increase.begin(), s.increase.end(), nonzero);
  const auto b = std::find_if(s.increase.rbegin(), s.increase.rend(), nonzero).base();
  s.first += static_cast<std::size_t>(a - s.increase.begin());
  s.increase = a < b ? std::vector<double>(a, b) : std::vector<double>();
}

Result<CounterData> CounterReader::read_gpus(std::string_view metric, const std::vector<std::string>& uuids,
                                             const StepFlags& flags, const StepFlags& series_flags, double max_rate) {
  Result<CounterData> out = CounterData{};
  if (!remote_) {
    out = read_deferred(metric, flags, series_flags, max_rate, "uuid=~" + promql_string(exact_alternation(uuids)));
  } else if (auto ok = read_remote(metric, uuids, max_rate, *out); !ok) {
    return ok.error();
  }
  if (out) {
    for (auto& s : out->series) trim(s);
  }
  return out;
}

// Every sample of every series from the step before the period on, walked by the definition
// in counter_reader.h: the last sample at or before the period's start starts the walk, and
// each later one is added in the step whose range holds it. A series with none there may have
// had one earlier, within the lookback: as on the query path, find_predecessors() looks for it
// (the series index first), and its first increase is corrected by it. Times compare in whole
// milliseconds, the stores' resolution.
Result<void> CounterReader::read_remote(std::string_view metric, const std::vector<std::string>& uuids, double max_rate,
                                        CounterData& out) {
  const std::size_t points = timeline_.size();
  // The points in whole milliseconds, as the samples' times are (ms / 1000.0 on both sides).
  std::vector<double> at(points);
  for (std::size_t i = 0; i < points; ++i) at[i] = static_cast<double>(std::llround(timeline_[i] * 1000)) / 1000.0;
  struct Born {
    std::size_t series;  // in out.series
    Sample first;
    std::size_t step;
  };
  std::vector<Born> born;
  auto each = [&](Series&& s) -> Result<void> {
    CounterSeries cs{std::move(s.labels), {}, std::vector<bool>(points, false)};
    IncreaseWalk walk(metric, cs.labels, max_rate, points - 1);
    std::optional<Born> first;
    std::size_t i = 1;
    for (const auto& x : s.samples) {
      if (auto e = bad_sample(metric, cs.labels, x)) return *e;
      if (x.t <= at[0]) {
        cs.present[0] = true;
        walk.start(x.v, x.t, x.t);
        continue;
      }
      while (i + 1 < points && x.t > at[i]) ++i;
      if (x.t > at[i]) break;
      if (!cs.present[0] && !first) first = Born{out.series.size(), x, i};
      cs.present[i] = true;
      if (auto e = walk.advance(x.v, x.t, x.t, i, out.resets)) return *e;
    }
    if (std::find(cs.present.begin(), cs.present.end(), true) == cs.present.end()) return {};
    if (first) born.push_back(*first);
    cs.increase = std::move(walk).increases();
    out.series.push_back(std::move(cs));
    return {};
  };
  if (auto ok = api_.read_raw(metric, uuids, timeline_[0] - step_, timeline_.back(), each); !ok) return ok;
  if (born.empty()) return {};

  std::vector<Labels> labels;
  std::vector<std::size_t> indices;
  for (const auto& b : born) {
    indices.push_back(labels.size());
    labels.push_back(out.series[b.series].labels);
  }
  std::map<std::size_t, double> previous;
  const Selector selector{metric, std::string(metric)};
  if (auto ok = find_predecessors(selector, indices, labels, previous); !ok) return ok;
  // The first sample's increase from the previous value rather than from zero, judged as
  // IncreaseWalk judges every step (a restart from zero, or a decrease no ledger makes).
  for (const auto& [k, value] : previous) {
    const Born& b = born[k];
    IncreaseWalk walk(metric, labels[k], max_rate, 1);
    walk.start(value, timeline_[0], timeline_[0] - lookback_);
    if (auto e = walk.advance(b.first.v, b.first.t, b.first.t, 1, out.resets)) return *e;
    out.series[b.series].increase[b.step - 1] += std::move(walk).increases()[0] - b.first.v;
  }
  return {};
}

Result<CounterData> CounterReader::walk_all(std::string_view selector, double max_rate, const Points& points,
                                            const RawSamples* raw) const {
  CounterData out;
  for (std::size_t s = 0; s < points.values.size(); ++s) {
    auto p = points.previous.find(s);
    const SeriesPoints points_of_s{points.labels[s], points.values[s],
                                   p == points.previous.end() ? std::nullopt : std::optional<double>(p->second),
                                   points.flagged[s]};
    auto series = walk(selector, max_rate, points_of_s, raw, out);
    if (!series) return series.error();
    out.series.push_back(std::move(*series));
  }
  return out;
}

Result<std::vector<SettledStep>> CounterReader::settle(std::string_view selector,
                                                       const std::vector<PendingStep>& pending, double max_rate,
                                                       std::size_t lane, std::size_t lanes) {
  std::map<std::size_t, std::vector<const PendingStep*>> by_step;
  for (const auto& p : pending) {
    if (p.step % lanes == lane) by_step[p.step].push_back(&p);
  }
  std::vector<SettledStep> out;
  std::vector<ResetFound> resets;  // an owner's restart is no news: the warnings are the ledger's
  std::size_t requests = 0;
  for (const auto& [i, steps] : by_step) {
    std::map<std::uint64_t, const PendingStep*> wanted;
    std::set<std::string> uuids;
    for (const PendingStep* p : steps) {
      wanted.emplace(p->series, p);
      uuids.insert(p->uuid);
    }
    for (const auto& group : chunks(std::vector<std::string>(uuids.begin(), uuids.end()), kUuidsPerSettle)) {
      const std::string sel = with_matcher(selector, "uuid=~" + promql_string(exact_alternation(group)));
      auto answer = api_.raw_samples(sel, timeline_[i - 1], timeline_[i]);
      if (!answer) return answer.error();
      ++requests;
      for (auto& series : *answer) {
        auto it = wanted.find(series_id(series.labels));
        if (it == wanted.end()) continue;
        const PendingStep& p = *it->second;
        wanted.erase(it);
        IncreaseWalk walk(selector, series.labels, max_rate, 1);
        walk.start(p.prev, p.prev_at, p.prev_earliest);
        for (const auto& sample : series.samples) {
          if (auto e = bad_sample(selector, series.labels, sample)) return *e;
        }
        for (const auto& sample : turning_points(series.samples)) {
          if (auto e = walk.advance(sample.v, sample.t, sample.t, 1, resets)) return *e;
        }
        if (!std::isnan(p.boundary) && p.boundary != walk.last()) {
          if (auto e = walk.advance(p.boundary, timeline_[i], timeline_[i] - step_, 1, resets)) return *e;
        }
        out.push_back(SettledStep{p.owner, i, std::move(walk).increases()[0]});
      }
    }
    // A step with no raw sample: its boundary value, if any, is the one it was entered with (a
    // sample at the step's start), else the answers disagree.
    for (const auto& [id, p] : wanted) {
      if (!std::isnan(p->boundary) && p->boundary != p->prev) {
        return Error{0, fmt::format("{}: a series of GPU {} has the value {} at {:.3f} but no raw sample between "
                                    "{:.3f} and then; the answers are inconsistent, so the data cannot be billed",
                                    selector, p->uuid, p->boundary, timeline_[i], timeline_[i - 1])};
      }
    }
  }
  if (progress_ && requests) {
    progress_(fmt::format("{}: {} requests for raw samples where a reset could hide", selector, requests));
  }
  return out;
}

}  // namespace gpumeter::report
