// The split of busy time between processes when their records are window averages.
#include "ledger/share_fit.h"

#include <gtest/gtest.h>

#include <random>

namespace gpumeter {
namespace {

double row_sum(const std::vector<std::vector<double>>& b, size_t p) {
  double s = 0;
  for (const auto& row : b) s += row[p];
  return s;
}

double col_sum(const std::vector<double>& row) {
  double s = 0;
  for (double v : row) s += v;
  return s;
}

TEST(ShareFit, OneProcessTakesEveryClaimedPeriodsBusyTime) {
  const auto b = fit_shares({{0.3, 0.0, 0.5}}, {0.9, 0.7, 0.4});
  EXPECT_NEAR(b[0][0], 0.9, 1e-12);
  EXPECT_EQ(b[0][1], 0.0) << "a period no record claims stays unclaimed";
  EXPECT_NEAR(b[0][2], 0.4, 1e-12);
}

TEST(ShareFit, AnUnchangingMixIsTheProportionalSplit) {
  // Shares 30:70 in every period, busy seconds varying: each period split 30:70.
  const std::vector<double> busy = {0.2, 1.0, 0.6, 0.9};
  std::vector<std::vector<double>> prior(2, std::vector<double>(busy.size()));
  for (size_t p = 0; p < busy.size(); ++p) {
    prior[0][p] = 0.3 * 0.2;
    prior[1][p] = 0.7 * 0.2;
  }
  const auto b = fit_shares(prior, busy);
  for (size_t p = 0; p < busy.size(); ++p) {
    EXPECT_NEAR(b[0][p], 0.3 * busy[p], 1e-9);
    EXPECT_NEAR(b[1][p], 0.7 * busy[p], 1e-9);
  }
}

TEST(ShareFit, AMixThatChangesInsideTheWindowKeepsEachProcessesRecordedTotal) {
  // Ten periods of 1 s at full load. "a" alone in the first five, then "b" at 60 %: a's record
  // averages to 70 % over all ten, b's to 60 % over its five.
  std::vector<std::vector<double>> prior(2, std::vector<double>(10, 0.0));
  for (size_t p = 0; p < 10; ++p) prior[0][p] = 0.7;
  for (size_t p = 5; p < 10; ++p) prior[1][p] = 0.6;
  const auto b = fit_shares(prior, std::vector<double>(10, 1.0));
  EXPECT_NEAR(col_sum(b[0]), 7.0, 1e-6);
  EXPECT_NEAR(col_sum(b[1]), 3.0, 1e-6);
  for (size_t p = 0; p < 5; ++p) EXPECT_NEAR(b[0][p], 1.0, 1e-9);
  for (size_t p = 5; p < 10; ++p) EXPECT_NEAR(b[0][p], 0.4, 1e-6);
}

TEST(ShareFit, PeriodTotalsAlwaysHoldAndNothingIsNegative) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t procs = 1 + rng() % 5, periods = 1 + rng() % 30;
    std::vector<std::vector<double>> prior(procs, std::vector<double>(periods));
    std::vector<double> busy(periods);
    for (size_t p = 0; p < periods; ++p) {
      busy[p] = rng() % 4 == 0 ? 0.0 : u(rng);
      for (size_t j = 0; j < procs; ++j) prior[j][p] = rng() % 3 == 0 ? 0.0 : u(rng);
    }
    const auto b = fit_shares(prior, busy);
    for (size_t p = 0; p < periods; ++p) {
      bool claimed = false;
      for (size_t j = 0; j < procs; ++j) {
        EXPECT_GE(b[j][p], 0.0);
        if (prior[j][p] == 0) {
          EXPECT_EQ(b[j][p], 0.0) << "a process is never placed where it had no record";
        }
        claimed = claimed || prior[j][p] > 0;
      }
      EXPECT_NEAR(row_sum(b, p), claimed ? busy[p] : 0.0, 1e-9) << trial;
    }
  }
}

// Active-only records: who ran in a period is what the device's busy fraction says.
TEST(ActiveSubset, TheDevicesBusyFractionTellsWhoRan) {
  // A bursty process at 40 % while active beside a steady one at 50 %.
  EXPECT_EQ(active_subset({0.4, 0.5}, 0.5), (std::vector<bool>{false, true}));
  EXPECT_EQ(active_subset({0.4, 0.5}, 0.9), (std::vector<bool>{true, true}));
  EXPECT_EQ(active_subset({0.4, 0.5}, 0.4), (std::vector<bool>{true, false}));
  // Both running fill the GPU: levels past a full GPU still fit it.
  EXPECT_EQ(active_subset({0.6, 0.5}, 1.0), (std::vector<bool>{true, true}));
}

TEST(ActiveSubset, AProcessIsTakenToHaveRunUnlessTheDeviceSaysOtherwise) {
  // Within the rounding of records and samples, the larger set.
  EXPECT_EQ(active_subset({0.01, 0.5}, 0.5), (std::vector<bool>{true, true}));
  EXPECT_EQ(active_subset({0.3}, 0.0), (std::vector<bool>{true}));
  EXPECT_EQ(active_subset({}, 0.5), (std::vector<bool>{}));
  // More processes than the search allows: every one.
  const std::vector<double> many(kMaxActiveChoice + 1, 0.05);
  EXPECT_EQ(active_subset(many, 0.1), std::vector<bool>(many.size(), true));
}

TEST(ActiveSubset, PicksTheClosestOfManySubsets) {
  const std::vector<double> levels{0.1, 0.2, 0.35, 0.05, 0.12};
  const std::vector<bool> ran = active_subset(levels, 0.47);
  double sum = 0;
  for (size_t j = 0; j < levels.size(); ++j) sum += ran[j] ? levels[j] : 0.0;
  EXPECT_NEAR(sum, 0.47, kActiveSlack + 1e-9);
}

TEST(LevelScales, ABurstysDilutedRecordIsScaledToWhatTheDeviceSays) {
  // "bursty" ran at 45 % in periods 5-14, but its record, with partial samples at the burst's
  // edges, reads 43 %; "steady" at 50 % ran throughout.
  std::vector<std::vector<double>> levels(2, std::vector<double>(15, 0.0));
  std::vector<double> busy(15, 0.5);
  for (size_t p = 0; p < 15; ++p) {
    levels[1][p] = 0.5;
    if (p >= 5) {
      levels[0][p] = 0.43;
      busy[p] = 0.95;
    }
  }
  const auto scale = level_scales(levels, busy, {false, true});
  EXPECT_NEAR(scale[0] * 0.43, 0.45, 2e-3);
  EXPECT_NEAR(scale[1] * 0.5, 0.5, 2e-3);
}

TEST(LevelScales, ProcessesThatAlwaysRanTogetherKeepTheirRecordsRatio) {
  // Only their sum is known: both factors stay equal, near what meets the sum.
  const std::vector<std::vector<double>> levels{std::vector<double>(10, 0.3), std::vector<double>(10, 0.5)};
  const auto scale = level_scales(levels, std::vector<double>(10, 0.84), {false, false});
  EXPECT_NEAR(scale[0], scale[1], 1e-9);
  EXPECT_NEAR(0.3 * scale[0] + 0.5 * scale[1], 0.84, 2e-3);
  EXPECT_EQ(level_scales({}, {0.5}, {}), std::vector<double>{});
}

TEST(ActiveLevels, ABurstThatStartsInsideAPeriodRunsThePartTheDeviceSays) {
  // "bursty" at 45 % from a quarter into period 3 on; its record, thinned by that first partial
  // sample, reads 43 %. "steady" at 50 % throughout.
  const std::vector<std::vector<double>> levels{std::vector<double>(8, 0.43), std::vector<double>(8, 0.5)};
  const std::vector<double> busy{0.5, 0.5, 0.5, 0.5 + 0.75 * 0.45, 0.95, 0.95, 0.95, 0.95};
  const auto fitted = active_levels(levels, busy);
  for (size_t p = 0; p < 3; ++p) EXPECT_EQ(fitted[0][p], 0.0);
  EXPECT_NEAR(fitted[0][3], 0.75 * 0.45, 1e-3);
  for (size_t p = 4; p < 8; ++p) EXPECT_NEAR(fitted[0][p], 0.45, 1e-3);
  for (size_t p = 0; p < 8; ++p) EXPECT_NEAR(fitted[1][p], 0.5, 1e-3);
}

TEST(ActiveLevels, BothChangingInOnePeriodKeepTheirRecords) {
  // Both start in period 1: which one ran less of it is unknown.
  const std::vector<std::vector<double>> levels{std::vector<double>(3, 0.3), std::vector<double>(3, 0.4)};
  const auto fitted = active_levels(levels, {0.0, 0.5, 0.7});
  EXPECT_EQ(fitted[0][0] + fitted[1][0], 0.0);
  EXPECT_GT(fitted[0][1], 0.0);
  EXPECT_GT(fitted[1][1], 0.0);
  EXPECT_NEAR(fitted[0][2] / fitted[1][2], 0.75, 1e-3);
}

}  // namespace
}  // namespace gpumeter
