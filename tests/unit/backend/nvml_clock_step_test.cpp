// The backend against a step of the wall clock, which the driver stamps its samples with.
#include <gtest/gtest.h>

#include <chrono>

#include "backend/clock_steps.h"
#include "backend/nvml/nvml_backend.h"
#include "fake_clock.h"
#include "fake_nvml.h"

namespace gpumeter {
namespace {

using namespace std::chrono_literals;
using fake::script;

constexpr std::int64_t kHour = 3'600'000'000;

nvmlSample_t sample(std::int64_t ts, unsigned percent) {
  nvmlSample_t s{};
  s.timeStamp = static_cast<unsigned long long>(ts);
  s.sampleValue.uiVal = percent;
  return s;
}

class ClockStepTest : public ::testing::Test {
 protected:
  void SetUp() override { fake::reset(); }
  std::unique_ptr<NvmlBackend> make() { return fake::backend_on(clock_, log_); }
  // `n` samples of 200 ms ending at the wall clock, in the buffer after what it holds.
  void sample_until_now(int n, unsigned percent) {
    for (int i = n - 1; i >= 0; --i)
      script().utilization_samples[0].push_back(sample(clock_.wall_us() - i * 200'000, percent));
  }
  void pass(std::chrono::microseconds d, std::int64_t step_us = 0) {
    clock_.advance(d);
    clock_.advance_wall(d + std::chrono::microseconds(step_us));
  }
  testing::FakeClock clock_;
  Logger log_{LogLevel::kError};
};

TEST_F(ClockStepTest, AStepBackMovesTheCursorsAndSkipsSamplesFromBeforeIt) {
  auto b = make();
  sample_until_now(10, 40);
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->usage.utilization_samples.size(), 10u);
  EXPECT_EQ(r->usage.clock_step_us, 0);
  // An hour back, then a second of samples on the new clock. The buffer still holds the old
  // ones, stamped an hour "ahead"; in the driver's order they come first.
  pass(1s, -kHour);
  sample_until_now(5, 70);
  r = b->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->usage.clock_step_us, -kHour);
  ASSERT_EQ(r->usage.utilization_samples.size(), 5u);  // not frozen until the clock catches up
  for (const auto& s : r->usage.utilization_samples) EXPECT_DOUBLE_EQ(s.value, 0.7);
  EXPECT_EQ(r->usage.utilization_samples.back().timestamp_us, clock_.wall_us());
  // The next reading takes only what is newer again, and sees no step.
  pass(400ms);
  sample_until_now(2, 70);
  r = b->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->usage.clock_step_us, 0);
  EXPECT_EQ(r->usage.utilization_samples.size(), 2u);
}

TEST_F(ClockStepTest, AStepForwardIsReportedAndItsSamplesRead) {
  auto b = make();
  sample_until_now(10, 40);
  ASSERT_TRUE(b->collect(0).ok());
  pass(1s, kHour);
  sample_until_now(5, 70);
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->usage.clock_step_us, kHour);
  EXPECT_EQ(r->usage.utilization_samples.size(), 5u);
}

// Steps each under the threshold add up: two steps of -0.24 s are one of -0.48 s at the second,
// and the samples they hid (stamped before the cursor) are read then.
TEST_F(ClockStepTest, SmallStepsAddUpToAStep) {
  auto b = make();
  sample_until_now(10, 40);
  ASSERT_TRUE(b->collect(0).ok());
  pass(1s, -240'000);
  sample_until_now(5, 60);
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->usage.clock_step_us, 0);  // within what a step may be
  pass(1s, -240'000);
  sample_until_now(5, 70);
  r = b->collect(0);
  ASSERT_TRUE(r.ok());
  // What slewing and reading the clocks allow (0.5 ms a second, 1 ms a reading) is not counted.
  EXPECT_EQ(r->usage.clock_step_us, -2 * (240'000 - 1'500));
  EXPECT_GE(r->usage.utilization_samples.size(), 5u);
  for (const auto& s : r->usage.utilization_samples) EXPECT_GE(s.value, 0.6);
}

TEST(WallClockSteps, SlewingAndJitterNeverAddUpWhileSmallStepsDo) {
  WallClockSteps steps;
  std::int64_t wall = 1'700'000'000'000'000;
  std::chrono::steady_clock::time_point steady{};
  EXPECT_EQ(steps.observe(wall, steady), 0);
  // A day of readings a second apart, slewing at the largest rate with jitter of either sign.
  for (int i = 0; i < 86'400; ++i) {
    steady += std::chrono::seconds(1);
    wall += 1'000'000 + 500 + (i % 2 == 0 ? 900 : -900);
    ASSERT_EQ(steps.observe(wall, steady), 0) << i;
  }
  // Then steps of +0.1 s: the third makes the excess reach 0.25 s.
  std::int64_t step = 0;
  int readings = 0;
  while (step == 0 && readings < 10) {
    steady += std::chrono::seconds(1);
    wall += 1'000'000 + 100'000;
    step = steps.observe(wall, steady);
    ++readings;
  }
  EXPECT_EQ(readings, 3);
  EXPECT_EQ(step, 3 * (100'000 - 1'500));
  // A large step is one at once, with what was pending.
  steady += std::chrono::seconds(1);
  wall += 1'000'000 + 100'000;
  EXPECT_EQ(steps.observe(wall, steady), 0);
  steady += std::chrono::seconds(1);
  wall += 1'000'000 - 3'600'000'000LL;
  EXPECT_EQ(steps.observe(wall, steady), -3'600'000'000LL + (100'000 - 1'500));
}

TEST_F(ClockStepTest, TimePassingOrSlewingIsNoStep) {
  auto b = make();
  sample_until_now(10, 40);
  ASSERT_TRUE(b->collect(0).ok());
  pass(5s, 2'000);  // 400 ppm of slewing
  sample_until_now(25, 40);
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->usage.clock_step_us, 0);
}

}  // namespace
}  // namespace gpumeter
