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

}  // namespace
}  // namespace gpumeter
