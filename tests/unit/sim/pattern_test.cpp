// Each pattern's values and edges, and the exact integral the timeline builds from them.

#include "sim/scenario/pattern.h"

#include <gtest/gtest.h>

#include "sim/physics/timeline.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

constexpr Micros S = kMicrosPerSecond;

// Sum of percent * seconds over [from, to), walking only the pattern's own edges.
double integral(const Pattern& p, Micros from, Micros to) {
  double sum = 0;
  for (Micros t = from; t < to;) {
    Micros next = std::min(next_change(p, t), to);
    EXPECT_GT(next, t);
    sum += percent_at(p, t) * to_seconds(next - t);
    t = next;
  }
  return sum;
}

TEST(Pattern, Constant) {
  Pattern p = ConstantPattern{42};
  EXPECT_EQ(percent_at(p, 0), 42);
  EXPECT_EQ(percent_at(p, 1000 * S), 42);
  EXPECT_EQ(next_change(p, 5), kForever);
  EXPECT_DOUBLE_EQ(integral(p, 0, 10 * S), 420);
}

TEST(Pattern, SquareWithDutyAndPhase) {
  // 80% for 5 s of every 20 s, 20% otherwise, edges shifted by 3 s.
  Pattern p = SquarePattern{80, 20, 20 * S, 5 * S, 3 * S};
  EXPECT_EQ(percent_at(p, 0), 20);
  EXPECT_EQ(percent_at(p, 3 * S - 1), 20);
  EXPECT_EQ(percent_at(p, 3 * S), 80);
  EXPECT_EQ(percent_at(p, 8 * S - 1), 80);
  EXPECT_EQ(percent_at(p, 8 * S), 20);
  EXPECT_EQ(percent_at(p, 23 * S), 80);
  EXPECT_EQ(next_change(p, 0), 3 * S);
  EXPECT_EQ(next_change(p, 3 * S), 8 * S);
  EXPECT_EQ(next_change(p, 8 * S), 23 * S);
  // Two whole periods: 2 * (5 * 80 + 15 * 20).
  EXPECT_DOUBLE_EQ(integral(p, 3 * S, 43 * S), 1400);
  // A square wave whose high part fills the period never changes.
  Pattern full = SquarePattern{70, 10, 10 * S, 10 * S, 0};
  EXPECT_EQ(percent_at(full, 7 * S), 70);
  EXPECT_EQ(next_change(full, 0), kForever);
}

TEST(Pattern, RampStepsAndHoldsItsEnd) {
  // 10% -> 90% over 8 s in 2 s steps: 10, 30, 50, 70, then 90 from 8 s on.
  Pattern p = RampPattern{10, 90, 8 * S, 2 * S};
  EXPECT_EQ(percent_at(p, 0), 10);
  EXPECT_EQ(percent_at(p, 2 * S - 1), 10);
  EXPECT_EQ(percent_at(p, 2 * S), 30);
  EXPECT_EQ(percent_at(p, 6 * S), 70);
  EXPECT_EQ(percent_at(p, 8 * S), 90);
  EXPECT_EQ(percent_at(p, 100 * S), 90);
  EXPECT_EQ(next_change(p, 7 * S), 8 * S);
  EXPECT_EQ(next_change(p, 8 * S), kForever);
  EXPECT_DOUBLE_EQ(integral(p, 0, 10 * S), 2 * (10 + 30 + 50 + 70) + 2 * 90);
  // Steps that do not divide the span land on whole percents.
  Pattern thirds = RampPattern{0, 100, 3 * S, S};
  EXPECT_EQ(percent_at(thirds, S), 33);
  EXPECT_EQ(percent_at(thirds, 2 * S), 67);
  // Ramping down.
  Pattern down = RampPattern{90, 10, 4 * S, S};
  EXPECT_EQ(percent_at(down, S), 70);
}

TEST(Pattern, TraceIsAStepFunction) {
  Pattern p = TracePattern{{{2 * S, 50}, {5 * S, 10}, {6 * S, 100}}};
  EXPECT_EQ(percent_at(p, 0), 0);  // before the first point
  EXPECT_EQ(percent_at(p, 2 * S), 50);
  EXPECT_EQ(percent_at(p, 5 * S - 1), 50);
  EXPECT_EQ(percent_at(p, 5 * S), 10);
  EXPECT_EQ(percent_at(p, 60 * S), 100);
  EXPECT_EQ(next_change(p, 0), 2 * S);
  EXPECT_EQ(next_change(p, 6 * S), kForever);
  EXPECT_DOUBLE_EQ(integral(p, 0, 10 * S), 3 * 50 + 1 * 10 + 4 * 100);
}

// Each pattern run as a job: the GPU's integral (truth) equals the pattern's own integral.
TEST(Pattern, TimelineIntegratesEveryPatternExactly) {
  const std::string base = std::string(testing::kModel) + "gpus: {count: 1, model: m}\njobs:\n";
  struct Case {
    const char* utilization;
    double busy_seconds;  // over [0, 100) with the job on [10, 70)
  };
  const Case cases[] = {
      {"0.37", 60 * 0.37},
      {"{pattern: square, high: 0.9, low: 0.1, period: 20, duty: 0.25, phase: 5}", 3 * (5 * 0.9 + 15 * 0.1)},
      {"{pattern: ramp, from: 0, to: 0.6, over: 30, step: 10}", 10 * 0.0 + 10 * 0.2 + 10 * 0.4 + 30 * 0.6},
      {"{pattern: trace, points: [[0, 0.5], [15, 0.25], [45, 1]]}", 15 * 0.5 + 30 * 0.25 + 15 * 1.0},
  };
  for (const Case& c : cases) {
    Scenario s = testing::parse_ok(
        base + "  - {name: j, start: 10, end: 70, gpus: [0], pid: 1, utilization: " + c.utilization + "}\n");
    GpuTimeline tl(s, 0);
    double busy = 0;
    tl.for_each_segment(
        0, 100 * S, [&](const Segment& seg) { busy += seg.util_percent / 100.0 * to_seconds(seg.end - seg.start); });
    EXPECT_NEAR(busy, c.busy_seconds, 1e-9) << c.utilization;
  }
}

}  // namespace
}  // namespace gpumeter::sim
