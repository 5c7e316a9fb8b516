// CounterReader against an in-memory API: exact increases under resets, gaps, series born
// inside the period, price-change points, and periods that tile; checked against the
// definition computed from every raw sample.
#include <gtest/gtest.h>

#include <algorithm>

#include <random>

#include <fmt/format.h>

#include "fake_prom_api.h"
#include "report/counter_reader.h"

namespace gpumeter::report {
namespace {

using testing::FakePromApi;
using testing::RawSeries;

constexpr double kHuge = 1e9;

// The definition: the sum over the samples in (a, b] of v - prev, or v after a drop; prev
// starts at the last sample at or before a, else 0.
double brute_increase(const std::vector<Sample>& samples, double a, double b) {
  double prev = 0, total = 0;
  for (const auto& s : samples) {
    if (s.t <= a) {
      prev = s.v;
      continue;
    }
    if (s.t > b) break;
    total += s.v >= prev ? s.v - prev : s.v;
    prev = s.v;
  }
  return total;
}

RawSeries counter(std::string uuid, std::string project, std::vector<Sample> samples) {
  return RawSeries{"m_total", {{"uuid", std::move(uuid)}, {"project", std::move(project)}}, std::move(samples)};
}

// How totals() reads: as the report reads the ledger's own counters; as it reads owners on the
// query API (the raw reads left to settle(), the reset steps flagged per series); or every raw
// sample by remote read.
enum class Mode { kRead, kDeferred, kRemote };

// Per project.
std::map<std::string, double> totals(FakePromApi& api, double a, double b, double step, std::vector<double> extra = {},
                                     Mode mode = Mode::kRead) {
  const bool deferred = mode == Mode::kDeferred;
  api.remote_read = mode == Mode::kRemote;
  CounterReader reader(api, make_timeline(a, b, step, extra), step, kHuge);
  if (mode == Mode::kRemote) reader.use_remote_read();
  auto flags = reader.reset_steps("m_total", deferred);
  EXPECT_TRUE(flags.ok());
  const StepFlags none;
  auto data = deferred ? reader.read_deferred("m_total", none, flags.ok() ? *flags : none, 1.0, "")
                       : reader.read("m_total", flags.ok() ? *flags : StepFlags{});
  EXPECT_TRUE(data.ok()) << (data.ok() ? "" : data.error().message);
  std::map<std::string, double> out;
  if (!data.ok()) return out;
  for (const auto& s : data->series) {
    double sum = 0;
    for (double x : s.increase) sum += x;
    out[s.labels.at("project")] += sum;
  }
  auto settled = reader.settle("m_total", data->pending, 1.0);
  EXPECT_TRUE(settled.ok()) << (settled.ok() ? "" : settled.error().message);
  EXPECT_TRUE(deferred || data->pending.empty());
  std::map<std::uint64_t, std::string> project;
  for (const auto& s : data->series) project[series_id(s.labels)] = s.labels.at("project");
  if (settled.ok()) {
    for (const auto& x : *settled) out[project.at(x.owner)] += x.increase;
  }
  return out;
}

TEST(Timeline, GridExtraPointsAndEnd) {
  auto t = make_timeline(100, 400, 100, {250, 100, 400, 500, 300});
  EXPECT_EQ(t, (std::vector<double>{100, 200, 250, 300, 400}));
  EXPECT_EQ(make_timeline(0, 50, 100, {}), (std::vector<double>{0, 50}));
}

TEST(CounterReader, PlainIncreaseIsTheDifferenceOfBoundaryValues) {
  FakePromApi api;
  std::vector<Sample> s;
  for (int t = 0; t <= 1000; t += 10) s.push_back({double(t), t * 2.0});
  api.data.push_back(counter("GPU-a", "p", s));
  auto got = totals(api, 95, 905, 60);
  EXPECT_DOUBLE_EQ(got["p"], 900 * 2.0 - 90 * 2.0);  // last sample <= 905 minus last <= 95
}

TEST(CounterReader, ResetHiddenInsideAStepIsFoundFromRawSamples) {
  FakePromApi api;
  // 100 -> 150, then the agent restarts from zero and climbs past 150 inside one step.
  api.data.push_back(counter("GPU-a", "p", {{0, 100}, {10, 150}, {20, 5}, {30, 170}, {40, 180}}));
  auto got = totals(api, 0, 40, 40);
  EXPECT_DOUBLE_EQ(got["p"], 50 + 5 + 165 + 10);
  EXPECT_DOUBLE_EQ(got["p"], brute_increase(api.data[0].samples, 0, 40));
}

// A reset needs the raw samples of one step: the one holding the sample after the drop, whether
// the sample before it is in the same step or the step before (the walk enters with it).
TEST(CounterReader, AResetFlagsOnlyTheStepOfTheSampleAfterIt) {
  struct Case {
    double before_t, after_t;
    std::set<std::size_t> steps;
  };
  for (const Case& c : {Case{240, 250, {3}}, Case{290, 310, {4}}, Case{-10, 10, {1}}, Case{390, 400, {4}}}) {
    FakePromApi api;
    std::vector<Sample> samples;
    for (double t = -50; t <= 500; t += 10) {
      if (t <= c.before_t) samples.push_back({t, 100 + t});
      if (t >= c.after_t) samples.push_back({t, t - c.after_t});
    }
    api.data.push_back(counter("GPU-a", "p", samples));
    CounterReader reader(api, make_timeline(0, 500, 100, {}), 100, kHuge);
    for (bool by_series : {false, true}) {
      auto flags = reader.reset_steps("m_total", by_series);
      ASSERT_TRUE(flags.ok());
      ASSERT_EQ(flags->size(), 1u);
      EXPECT_EQ(flags->begin()->second, c.steps) << c.before_t << " " << by_series;
    }
  }
  // The end off the grid is asked alone and flags the steps it overlaps.
  FakePromApi api;
  api.data.push_back(counter("GPU-a", "p", {{400, 50}, {430, 60}, {440, 1}, {450, 2}}));
  CounterReader reader(api, make_timeline(0, 450, 100, {}), 100, kHuge);
  auto flags = reader.reset_steps("m_total");
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(flags->at("GPU-a"), (std::set<std::size_t>{4, 5}));
}

TEST(CounterReader, SeriesAbsentAcrossTheStartContinuesFromItsLastValue) {
  FakePromApi api;
  // Last sample long before the period (agent down with its state), back inside it.
  api.data.push_back(counter("GPU-a", "p", {{0, 1000}, {10, 1010}, {5000, 1020}, {5010, 1030}}));
  auto got = totals(api, 4000, 6000, 60);
  EXPECT_DOUBLE_EQ(got["p"], 20);  // not 1030: the 1010 before the period is not billed again
  EXPECT_DOUBLE_EQ(totals(api, 4000, 6000, 60, {}, Mode::kRemote)["p"], 20);
}

TEST(CounterReader, SeriesBornInsideThePeriodStartsFromZero) {
  FakePromApi api;
  api.data.push_back(counter("GPU-a", "new", {{500, 3}, {510, 13}}));
  EXPECT_DOUBLE_EQ(totals(api, 0, 1000, 100)["new"], 13);
  EXPECT_DOUBLE_EQ(totals(api, 0, 1000, 100, {}, Mode::kRemote)["new"], 13);
}

TEST(CounterReader, OwnerReturningFromZeroAfterAGapIsAReset) {
  FakePromApi api;
  // Pruned after retention, back later from zero: climbs past the old value in its first step.
  api.data.push_back(counter("GPU-a", "p", {{0, 0}, {10, 40}, {2000, 10}, {2005, 60}}));
  auto got = totals(api, 0, 3000, 100);
  EXPECT_DOUBLE_EQ(got["p"], 40 + 10 + 50);
  EXPECT_DOUBLE_EQ(totals(api, 0, 3000, 100, {}, Mode::kRemote)["p"], 40 + 10 + 50);
}

// A 10% dip in the middle of every series was read as "restarted from zero" and billed half as
// much again. A ledger counter restarts from zero, so a decrease is a reset only when the new
// value is no more than the counter can have counted since the sample before (max_rate per
// second, here 1, plus a minute); a larger one is an error naming the series.
TEST(CounterReader, ADecreaseThatIsNoRestartFromZeroIsAnError) {
  for (double dip_t : {600.0, 615.0}) {  // on a boundary of the timeline and inside a step
    FakePromApi api;
    std::vector<Sample> s;
    for (int t = 0; t <= 1200; t += 15) s.push_back({double(t), t >= dip_t ? 0.9 * t : double(t)});
    api.data.push_back(counter("GPU-a", "p", s));
    CounterReader reader(api, make_timeline(0, 1200, 300, {}), 300, kHuge);
    auto flags = reader.reset_steps("m_total");
    ASSERT_TRUE(flags.ok());
    auto data = reader.read("m_total", *flags);
    ASSERT_FALSE(data.ok()) << dip_t;
    const std::string want = fmt::format(
        "m_total{{project=\"p\",uuid=\"GPU-a\"}} went down from {} (at {:.3f}) to {} "
        "(at {:.3f}); a ledger counter only goes down when it restarts from zero",
        dip_t - 15, dip_t - 15, 0.9 * dip_t, dip_t);
    EXPECT_NE(data.error().message.find(want), std::string::npos) << data.error().message;
  }
}

// What is near zero depends on how fast the counter can grow: with max_rate 1, 80 is a restart
// 30 s after the sample before (it can have counted 90), and 100 is not.
TEST(CounterReader, NearZeroIsWhatTheCounterCanHaveCountedSinceTheSampleBefore) {
  for (double after : {80.0, 100.0}) {
    FakePromApi api;
    api.data.push_back(counter("GPU-a", "p", {{0, 0}, {20, 1000}, {50, after}, {60, after + 10}}));
    CounterReader reader(api, make_timeline(0, 60, 60, {}), 60, kHuge);
    auto data = reader.read("m_total", *reader.reset_steps("m_total"));
    if (after == 80.0) {
      ASSERT_TRUE(data.ok()) << data.error().message;
      EXPECT_DOUBLE_EQ(data->series.at(0).increase.at(0), 1000 + 90);
      ASSERT_EQ(data->resets.size(), 1u);
      EXPECT_DOUBLE_EQ(data->resets[0].after, 20);
      EXPECT_DOUBLE_EQ(data->resets[0].at, 50);
    } else {
      ASSERT_FALSE(data.ok());
      EXPECT_NE(data.error().message.find("100 is more than it can have counted since (90 at most)"), std::string::npos)
          << data.error().message;
    }
    // A counter that can count ten times as fast may have restarted either way.
    CounterReader fast(api, make_timeline(0, 60, 60, {}), 60, kHuge);
    EXPECT_TRUE(fast.read("m_total", *fast.reset_steps("m_total"), 10).ok());
  }
}

TEST(CounterReader, RandomHistoriesMatchTheDefinitionAndTile) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 40; ++round) {
    FakePromApi api;
    std::uniform_real_distribution<double> u(0, 1);
    const int series = 1 + static_cast<int>(u(rng) * 6);
    for (int k = 0; k < series; ++k) {
      std::vector<Sample> s;
      double t = u(rng) * 2000, v = u(rng) < 0.5 ? 0 : u(rng) * 500;
      s.push_back({std::round(t * 1000) / 1000, v});
      const double end = t + u(rng) * 20000;
      while (t < end) {
        t += 1 + u(rng) * 30;
        if (u(rng) < 0.01) t += u(rng) * 3000;  // a gap
        if (u(rng) < 0.02) {
          v = u(rng) * std::min(20.0, t - s.back().t);  // a reset: at most 1/s since the sample before
        } else {
          v += u(rng) * 40;
        }
        s.push_back({std::round(t * 1000) / 1000, v});
      }
      api.data.push_back(counter("GPU-" + std::to_string(k % 3), "p" + std::to_string(k), s));
    }
    const double a = std::round(u(rng) * 10000), b = a + 1 + std::round(u(rng) * 12000);
    const double step = 30 + std::round(u(rng) * 600);
    const double mid = std::round((a + u(rng) * (b - a)) * 1000) / 1000;
    auto whole = totals(api, a, b, step, {mid});
    auto deferred = totals(api, a, b, step, {mid}, Mode::kDeferred);
    auto remote = totals(api, a, b, step, {mid}, Mode::kRemote);
    auto remote_left = totals(api, a, mid, step, {}, Mode::kRemote);
    auto remote_right = totals(api, mid, b, step, {}, Mode::kRemote);
    auto left = totals(api, a, mid, step);
    auto right = totals(api, mid, b, step);
    for (const auto& s : api.data) {
      const std::string p = s.labels.at("project");
      const double want = brute_increase(s.samples, a, b);
      ASSERT_NEAR(whole[p], want, 1e-9 * std::max(1.0, want)) << "round " << round << " " << p;
      ASSERT_NEAR(deferred[p], want, 1e-9 * std::max(1.0, want)) << "round " << round << " " << p;
      ASSERT_NEAR(remote[p], want, 1e-9 * std::max(1.0, want)) << "round " << round << " " << p;
      ASSERT_NEAR(remote_left[p] + remote_right[p], want, 1e-9 * std::max(1.0, want)) << "round " << round << " " << p;
      ASSERT_NEAR(left[p] + right[p], want, 1e-9 * std::max(1.0, want)) << "round " << round << " " << p;
    }
  }
}

// A walk over the kept samples adds what a walk over all of them does: a month of 30 s samples
// with two resets keeps six.
TEST(CounterReader, TurningPointsKeepWhatAWalkNeeds) {
  std::vector<Sample> all;
  double v = 5;
  for (int i = 0; i < 86400; ++i) {
    v = (i == 1000 || i == 50000) ? 0.5 : v + 0.25;
    all.push_back({30.0 * i, v});
  }
  auto kept = turning_points(all);
  ASSERT_EQ(kept.size(), 6u);
  EXPECT_EQ(kept.front().t, 0);
  EXPECT_EQ(kept[1].t, 30.0 * 999);
  EXPECT_EQ(kept[2].v, 0.5);
  EXPECT_EQ(kept.back().t, all.back().t);
  auto increase = [](const std::vector<Sample>& s) {
    double total = 0;
    for (std::size_t i = 1; i < s.size(); ++i) total += s[i].v >= s[i - 1].v ? s[i].v - s[i - 1].v : s[i].v;
    return total;
  };
  EXPECT_NEAR(increase(kept), increase(all), 1e-9 * increase(all));
  EXPECT_EQ(turning_points({{1, 2}}).size(), 1u);
  EXPECT_TRUE(turning_points({}).empty());
}

TEST(CounterReader, UnexpectedTimestampsFromTheApiAreAnError) {
  class ShiftedApi final : public PromApi {
   public:
    Result<std::vector<Series>> query(std::string_view, double t) override {
      return std::vector<Series>{{{{"uuid", "GPU-a"}}, {{t, 1}}}};
    }
    Result<std::vector<Series>> query_range(std::string_view, double start, double, double) override {
      return std::vector<Series>{{{{"uuid", "GPU-a"}}, {{start + 7, 1}}}};
    }
    Result<std::vector<Series>> raw_samples(std::string_view, double, double upto) override {
      return std::vector<Series>{{{{"uuid", "GPU-a"}}, {{upto, 1}}}};
    }
    Result<std::vector<Labels>> series(std::string_view, double, double) override { return std::vector<Labels>{}; }
    Result<std::vector<std::string>> label_values(std::string_view, const std::vector<std::string>&, double,
                                                  double) override {
      return std::vector<std::string>{"GPU-a"};
    }
    std::string backend() override { return "shifted"; }
  } api;
  CounterReader reader(api, make_timeline(0, 1000, 100, {}), 100, kHuge);
  auto data = reader.read("m_total");
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.error().message.find("not a point that was asked for"), std::string::npos);
}

// One corrupt sample of −1000 turned 135 s into 1294 s with exit 0: a negative counter sample
// is refused, wherever it is read (a grid point, a raw sample where a reset could hide).
TEST(CounterReader, NegativeSamplesAreAnErrorNotABill) {
  for (double bad_t : {300.0, 250.0}) {
    FakePromApi api;
    api.data.push_back(counter("GPU-a", "p", {{100, 10}, {200, 20}, {bad_t, -1000}, {400, 40}}));
    CounterReader reader(api, make_timeline(0, 500, 100, {}), 100, kHuge);
    auto flags = reader.reset_steps("m_total");
    auto data = flags.ok() ? reader.read("m_total", *flags) : Result<CounterData>(flags.error());
    ASSERT_FALSE(data.ok()) << bad_t;
    EXPECT_NE(data.error().message.find("has the sample -1000"), std::string::npos) << data.error().message;
    EXPECT_NE(data.error().message.find("uuid=\"GPU-a\""), std::string::npos) << data.error().message;
  }
}

// Read by remote read, every sample is walked: the same data is billed or refused alike.
TEST(CounterReader, RemoteReadJudgesDecreasesAndNegativeSamplesAlike) {
  auto read = [](std::vector<Sample> samples) {
    FakePromApi api;
    api.remote_read = true;
    api.data.push_back(counter("GPU-a", "p", std::move(samples)));
    CounterReader reader(api, make_timeline(0, 1200, 300, {}), 300, kHuge);
    reader.use_remote_read();
    return reader.read("m_total");
  };
  std::vector<Sample> dip;
  for (int t = 0; t <= 1200; t += 15) dip.push_back({double(t), t >= 615 ? 0.9 * t : double(t)});
  auto dipped = read(dip);
  ASSERT_FALSE(dipped.ok());
  EXPECT_NE(dipped.error().message.find("went down from 600 (at 600.000) to 553.5 (at 615.000)"), std::string::npos)
      << dipped.error().message;

  auto negative = read({{100, 10}, {200, 20}, {250, -1000}, {400, 40}});
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().message.find("has the sample -1000"), std::string::npos) << negative.error().message;

  auto restarted = read({{0, 0}, {20, 1000}, {50, 80}, {60, 90}});
  ASSERT_TRUE(restarted.ok()) << restarted.error().message;
  EXPECT_DOUBLE_EQ(restarted->series.at(0).increase.at(0), 1000 + 90);
  ASSERT_EQ(restarted->resets.size(), 1u);
  EXPECT_DOUBLE_EQ(restarted->resets[0].after, 20);
  EXPECT_DOUBLE_EQ(restarted->resets[0].at, 50);
}

// Remote read marks the points whose step holds a sample, as the query path's boundary values do.
TEST(CounterReader, RemoteReadPresenceIsPerStep) {
  FakePromApi api;
  api.remote_read = true;
  api.data.push_back(counter("GPU-a", "p", {{-50, 1}, {150, 2}, {160, 3}, {450, 4}}));
  CounterReader reader(api, make_timeline(0, 500, 100, {}), 100, kHuge);
  reader.use_remote_read();
  auto data = reader.read("m_total");
  ASSERT_TRUE(data.ok()) << data.error().message;
  ASSERT_EQ(data->series.size(), 1u);
  EXPECT_EQ(data->series[0].present, (std::vector<bool>{true, false, true, false, false, true}));
  EXPECT_EQ(data->series[0].increase, (std::vector<double>{0, 2, 0, 0, 1}));
}

TEST(CounterReader, TrimKeepsTheStepsFromTheFirstIncreaseToTheLast) {
  CounterSeries s{{}, {0, -0.0, 1, 0, 2, 0}, {}};
  trim(s);
  EXPECT_EQ(s.first, 2u);
  EXPECT_EQ(s.increase, (std::vector<double>{1, 0, 2}));
  CounterSeries idle{{}, {0, 0, 0}, {}};
  trim(idle);
  EXPECT_TRUE(idle.increase.empty());
}

// A batch's series keep their increases at the same steps as read() gives them, whichever way
// they are read.
TEST(CounterReader, ReadGpusKeepsEachSeriesFromItsFirstIncreaseToItsLast) {
  for (Mode mode : {Mode::kDeferred, Mode::kRemote}) {
    FakePromApi api;
    api.remote_read = mode == Mode::kRemote;
    api.data.push_back(
        counter("GPU-a", "p", {{300, 0}, {310, 5}, {420, 30}, {500, 30}, {600, 30}, {700, 30}, {800, 30}, {900, 30}}));
    api.data.push_back(counter("GPU-b", "q", {{0, 1}, {100, 2}, {250, 2}}));
    CounterReader reader(api, make_timeline(0, 900, 100, {}), 100, kHuge);
    if (mode == Mode::kRemote) reader.use_remote_read();
    auto dense = reader.read("m_total", {});
    auto batch = reader.read_gpus("m_total", {"GPU-a", "GPU-b"}, {}, {}, 1.0);
    ASSERT_TRUE(dense.ok() && batch.ok());
    ASSERT_TRUE(batch->pending.empty());
    ASSERT_EQ(batch->series.size(), 2u);
    for (const auto& s : batch->series) {
      const auto same = std::find_if(dense->series.begin(), dense->series.end(),
                                     [&](const CounterSeries& d) { return d.labels == s.labels; });
      ASSERT_NE(same, dense->series.end());
      std::vector<double> steps(9, 0.0);
      for (std::size_t k = 0; k < s.increase.size(); ++k) steps.at(s.first + k) = s.increase[k];
      EXPECT_EQ(steps, same->increase);
      EXPECT_LT(s.increase.size(), 9u);
    }
  }
}

}  // namespace
}  // namespace gpumeter::report
