#include "report/forecast.h"

#include <gtest/gtest.h>

namespace gpumeter::report {
namespace {

constexpr double kDay = 86400;

TEST(Forecast, ExactLineThroughStepMeansOfALinearLoad) {
  // 1 GPU growing by 0.1 a day over 10 daily steps: step i holds 1 + 0.1 (i + 0.5) GPUs on average.
  std::vector<double> starts, ends, allocated;
  for (int i = 0; i < 10; ++i) {
    starts.push_back(i * kDay);
    ends.push_back((i + 1) * kDay);
    allocated.push_back((1 + 0.1 * (i + 0.5)) * kDay);
  }
  auto f = forecast_demand(starts, ends, allocated, 10 * kDay);
  ASSERT_TRUE(f);
  EXPECT_NEAR(f->gpus_at_end, 2.0, 1e-12);
  EXPECT_NEAR(f->trend_gpus_per_day, 0.1, 1e-12);
  EXPECT_NEAR(f->gpu_hours, (2.0 + 0.1 * 5) * 10 * 24, 1e-9);  // the mean over the horizon: 2.5 GPUs
}

TEST(Forecast, AShortLastStepWeighsLess) {
  // Two full days at 1 GPU and a last hour at 5: the hour barely moves the line.
  auto f = forecast_demand({0, kDay, 2 * kDay}, {kDay, 2 * kDay, 2 * kDay + 3600}, {kDay, kDay, 5 * 3600}, kDay);
  ASSERT_TRUE(f);
  EXPECT_GT(f->gpus_at_end, 1.0);
  EXPECT_LT(f->gpus_at_end, 1.5);
}

TEST(Forecast, NoNegativeDemandPastWhereTheLineReachesZero) {
  // 2 GPUs falling by 1 a day: at the end (day 2) the line gives 0.5 GPUs and reaches 0 half a day
  // later; the rest of the horizon adds nothing.
  auto f = forecast_demand({0, kDay}, {kDay, 2 * kDay}, {2 * kDay, 1 * kDay}, 10 * kDay);
  ASSERT_TRUE(f);
  EXPECT_NEAR(f->trend_gpus_per_day, -1.0, 1e-12);
  EXPECT_NEAR(f->gpus_at_end, 0.5, 1e-12);
  EXPECT_NEAR(f->gpu_hours, 3.0, 1e-9);  // a triangle: 0.5 GPUs falling to 0 over 12 h
}

TEST(Forecast, OneStepIsFlatAndNoStepIsNothing) {
  auto f = forecast_demand({0}, {kDay}, {0.25 * kDay}, 2 * kDay);
  ASSERT_TRUE(f);
  EXPECT_DOUBLE_EQ(f->trend_gpus_per_day, 0);
  EXPECT_NEAR(f->gpu_hours, 0.25 * 48, 1e-12);
  EXPECT_FALSE(forecast_demand({}, {}, {}, kDay));
  EXPECT_FALSE(forecast_demand({kDay}, {kDay}, {0}, kDay));
}

}  // namespace
}  // namespace gpumeter::report
