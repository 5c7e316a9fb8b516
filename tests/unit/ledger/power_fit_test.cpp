// The estimate of a GPU's power for the periods its power sensor did not sample.
#include "ledger/power_fit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace gpumeter {
namespace {

TEST(PowerFit, NothingSampledEstimatesNothing) {
  PowerFit f;
  EXPECT_FALSE(f.estimate(0.5));
  f.add(0.5, 300, 0);  // no time: no period
  EXPECT_FALSE(f.estimate(0.5));
}

TEST(PowerFit, APowerLinearInUtilizationIsFoundExactly) {
  // P = 70 + 620·U, as the simulator's H100 draws; periods of unequal length.
  PowerFit f;
  f.add(0.0, 70, 2.0);
  f.add(0.9, 70 + 620 * 0.9, 0.2);
  f.add(0.3, 70 + 620 * 0.3, 0.6);
  for (double u : {0.0, 0.2, 0.6, 0.8, 1.0}) EXPECT_NEAR(*f.estimate(u), 70 + 620 * u, 1e-9) << u;
}

// How much of its weight a period keeps after `seconds` more of sampled time.
double kept(double seconds) { return std::exp2(-seconds / PowerFit::kHalfLifeSeconds); }

TEST(PowerFit, LongerPeriodsWeighMore) {
  // Two readings at 0 % disagree; the line passes through their duration-weighted mean (each
  // faded by the time sampled after it) and the reading at 100 %.
  PowerFit f;
  f.add(0.0, 90, 3.0);
  f.add(0.0, 130, 1.0);
  f.add(1.0, 400, 1.0);
  const double w90 = 3.0 * kept(2.0), w130 = 1.0 * kept(1.0);
  const double idle = (90 * w90 + 130 * w130) / (w90 + w130);
  EXPECT_NEAR(idle, 100, 0.5) << "three times the weight, less a little fading";
  EXPECT_NEAR(*f.estimate(0.0), idle, 1e-9);
  EXPECT_NEAR(*f.estimate(0.5), (idle + 400) / 2, 1e-9);
}

TEST(PowerFit, OneUtilizationGivesTheMeanPower) {
  PowerFit f;
  f.add(0.6, 400, 1.0);
  f.add(0.6, 500, 3.0);
  const double mean = (400 * kept(3.0) + 500 * 3.0) / (kept(3.0) + 3.0);
  EXPECT_NEAR(*f.estimate(0.6), mean, 1e-9);
  EXPECT_NEAR(*f.estimate(0.0), mean, 1e-9) << "no slope to extrapolate along";
}

TEST(PowerFit, OlderPeriodsFadeWithSampledTime) {
  // A workload drawing 300 W at full load, then one drawing 500 W: after many half-lives of the
  // second, the estimate is the second's.
  PowerFit f;
  f.add(0.0, 100, 10);
  f.add(1.0, 300, 10);
  EXPECT_NEAR(*f.estimate(1.0), 300, 1e-9);
  for (int i = 0; i < 100; ++i) {
    f.add(0.0, 100, PowerFit::kHalfLifeSeconds / 10);
    f.add(1.0, 500, PowerFit::kHalfLifeSeconds / 10);
  }
  EXPECT_NEAR(*f.estimate(1.0), 500, 1e-3);
  EXPECT_NEAR(*f.estimate(0.0), 100, 1e-3);
}

TEST(PowerFit, AnEstimateIsNeverNegative) {
  PowerFit f;
  f.add(0.5, 10, 1);
  f.add(1.0, 400, 1);
  EXPECT_EQ(*f.estimate(0.0), 0.0);
}

TEST(PowerFit, NonFiniteReadingsAreIgnored) {
  PowerFit f;
  f.add(0.5, 200, 1);
  f.add(0.5, std::numeric_limits<double>::quiet_NaN(), 1);
  f.add(std::numeric_limits<double>::infinity(), 200, 1);
  EXPECT_NEAR(*f.estimate(0.5), 200, 1e-9);
}

}  // namespace
}  // namespace gpumeter
