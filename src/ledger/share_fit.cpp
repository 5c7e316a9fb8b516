#include "ledger/share_fit.h"

#include <algorithm>
#include <cmath>

namespace gpumeter {

namespace {

constexpr int kMaxRounds = 50;
constexpr double kTolerance = 1e-9;  // relative, on each process's total

}  // namespace

std::vector<std::vector<double>> fit_shares(const std::vector<std::vector<double>>& prior,
                                            const std::vector<double>& busy) {
  std::vector<std::vector<double>> b = prior;
  const size_t procs = b.size();
  const size_t periods = busy.size();
  if (procs == 0) return b;
  for (auto& row : b) row.resize(periods, 0.0);

  // Periods some record claims, and what each process's records say it used in them.
  std::vector<bool> claimed(periods, false);
  double claimed_busy = 0;
  for (size_t p = 0; p < periods; ++p) {
    for (size_t j = 0; j < procs; ++j) claimed[p] = claimed[p] || b[j][p] > 0;
    if (claimed[p]) claimed_busy += std::max(0.0, busy[p]);
  }
  std::vector<double> target(procs, 0.0);
  double target_sum = 0;
  for (size_t j = 0; j < procs; ++j) {
    for (size_t p = 0; p < periods; ++p) target[j] += b[j][p];
    target_sum += target[j];
  }
  if (target_sum <= 0 || claimed_busy <= 0) {
    for (auto& row : b) std::fill(row.begin(), row.end(), 0.0);
    return b;
  }
  // Whole-percent rounding makes the records' sum differ from the device's: the device's wins.
  for (double& t : target) t *= claimed_busy / target_sum;

  auto scale_periods = [&] {
    for (size_t p = 0; p < periods; ++p) {
      double sum = 0;
      for (size_t j = 0; j < procs; ++j) sum += b[j][p];
      const double want = std::max(0.0, busy[p]);
      if (sum <= 0) continue;
      for (size_t j = 0; j < procs; ++j) b[j][p] *= want / sum;
    }
  };
  for (int round = 0; round < kMaxRounds; ++round) {
    scale_periods();
    double worst = 0;
    for (size_t j = 0; j < procs; ++j) {
      double sum = 0;
      for (size_t p = 0; p < periods; ++p) sum += b[j][p];
      if (sum <= 0 || target[j] <= 0) continue;
      worst = std::max(worst, std::abs(sum - target[j]) / target[j]);
      for (size_t p = 0; p < periods; ++p) b[j][p] *= target[j] / sum;
    }
    if (worst < kTolerance) break;
  }
  // The device's busy seconds per period hold exactly, whatever the records allowed.
  scale_periods();
  return b;
}

}  // namespace gpumeter
