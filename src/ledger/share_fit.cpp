#include "ledger/share_fit.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

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

std::vector<bool> active_subset(const std::vector<double>& levels, double busy) {
  const std::size_t n = levels.size();
  std::vector<bool> out(n, true);
  if (n < 2 || n > kMaxActiveChoice) return out;
  const std::uint32_t all = (1U << n) - 1;
  std::vector<double> error(all + 1, 0.0);
  double best = std::numeric_limits<double>::infinity();
  for (std::uint32_t mask = 1; mask <= all; ++mask) {
    double sum = 0;
    for (std::size_t j = 0; j < n; ++j) {
      if ((mask >> j) & 1U) sum += levels[j];
    }
    // A GPU cannot be more than fully busy: levels that add up past it all fit a full GPU.
    error[mask] = std::abs(std::min(sum, 1.0) - busy);
    best = std::min(best, error[mask]);
  }
  std::uint32_t chosen = all;
  int chosen_size = -1;
  for (std::uint32_t mask = all; mask >= 1; --mask) {
    const int size = std::popcount(mask);
    if (error[mask] <= best + kActiveSlack &&
        (size > chosen_size || (size == chosen_size && error[mask] < error[chosen]))) {
      chosen = mask;
      chosen_size = size;
    }
  }
  for (std::size_t j = 0; j < n; ++j) out[j] = ((chosen >> j) & 1U) != 0;
  return out;
}

std::vector<double> level_scales(const std::vector<std::vector<double>>& levels, const std::vector<double>& busy,
                                 const std::vector<bool>& steady) {
  const size_t n = levels.size();
  std::vector<double> scale(n, 1.0);
  if (n == 0 || n > kMaxActiveChoice) return scale;
  // The normal equations of min Σ_p (busy_p − Σ_j s_j·l_jp)² + λ·Σ_j ℓ_j·(s_j − 1)², ℓ_j
  // being j's mean level where it ran: weighted so, processes the periods cannot tell apart get
  // the same factor and keep their records' ratio. Solved by Gaussian elimination with partial
  // pivoting: a system of at most kMaxActiveChoice unknowns.
  std::vector<std::vector<double>> m(n, std::vector<double>(n + 1, 0.0));
  for (size_t j = 0; j < n; ++j) {
    for (size_t k = 0; k < n; ++k) {
      for (size_t p = 0; p < busy.size(); ++p) m[j][k] += levels[j][p] * levels[k][p];
    }
    double sum = 0;
    int ran = 0;
    for (double l : levels[j]) {
      sum += l;
      ran += l > 0 ? 1 : 0;
    }
    const double ridge = kLevelRidge * (ran > 0 ? sum / ran : 1.0) * (steady[j] ? kSteadyPull : 1.0);
    m[j][j] += ridge;
    m[j][n] = ridge;
    for (size_t p = 0; p < busy.size(); ++p) m[j][n] += levels[j][p] * busy[p];
  }
  for (size_t c = 0; c < n; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < n; ++r) {
      if (std::abs(m[r][c]) > std::abs(m[pivot][c])) pivot = r;
    }
    std::swap(m[c], m[pivot]);
    for (size_t r = c + 1; r < n; ++r) {
      const double f = m[r][c] / m[c][c];  // the ridge makes the matrix positive definite
      for (size_t k = c; k <= n; ++k) m[r][k] -= f * m[c][k];
    }
  }
  for (size_t c = n; c-- > 0;) {
    double v = m[c][n];
    for (size_t k = c + 1; k < n; ++k) v -= m[c][k] * scale[k];
    scale[c] = v / m[c][c];
  }
  // A level is a process's share of a period: a factor past these bounds is a misfit, not an edge.
  for (double& s : scale) s = std::clamp(s, kMinLevelScale, kMaxLevelScale);
  return scale;
}

namespace {

using Grid = std::vector<std::vector<bool>>;  // [process][period]

// Who ran in each period: active_subset() of the processes with a level there.
Grid ran_by_period(const std::vector<std::vector<double>>& levels, const std::vector<double>& busy) {
  Grid ran(levels.size(), std::vector<bool>(busy.size(), false));
  for (size_t p = 0; p < busy.size(); ++p) {
    std::vector<size_t> sampled;
    std::vector<double> level;
    for (size_t j = 0; j < levels.size(); ++j) {
      if (levels[j][p] <= 0) continue;
      sampled.push_back(j);
      level.push_back(levels[j][p]);
    }
    const std::vector<bool> chosen = active_subset(level, busy[p]);
    for (size_t k = 0; k < sampled.size(); ++k) ran[sampled[k]][p] = chosen[k];
  }
  return ran;
}

// The process that starts or stops in each period, if one does; `mixed`: more than one may.
struct Edges {
  std::vector<std::optional<size_t>> process;
  std::vector<bool> mixed;
};

Edges find_edges(const std::vector<std::vector<double>>& levels, const std::vector<double>& busy, const Grid& ran) {
  const size_t periods = busy.size();
  // Whether j's running changes beside p: the first and last periods of the run have one neighbour.
  auto changes = [&](size_t j, size_t p) {
    return levels[j][p] > 0 &&
           ((p > 0 && ran[j][p - 1] != ran[j][p]) || (p + 1 < periods && ran[j][p + 1] != ran[j][p]));
  };
  Edges out{std::vector<std::optional<size_t>>(periods), std::vector<bool>(periods, false)};
  for (size_t p = 0; p < periods; ++p) {
    std::vector<size_t> changers;
    double sum = 0;
    for (size_t j = 0; j < levels.size(); ++j) {
      if (changes(j, p)) changers.push_back(j);
      if (ran[j][p]) sum += levels[j][p];
    }
    // A subset that misses the busy fraction: the one process that could make up the
    // difference changed in this period (at a run's first or last period, the only sign).
    const double missing = busy[p] - std::min(sum, 1.0);
    std::vector<size_t> candidates;
    for (size_t j = 0; j < levels.size() && std::abs(missing) > kActiveSlack; ++j) {
      if (levels[j][p] > 0 && ran[j][p] == (missing < 0)) candidates.push_back(j);
    }
    if (candidates.size() > 1) std::erase_if(candidates, [&](size_t j) { return !changes(j, p); });
    const std::vector<size_t>& changed = candidates.empty() ? changers : candidates;
    if (changed.empty()) continue;
    out.process[p] = changed.front();
    out.mixed[p] = changed.size() > 1;
  }
  return out;
}

}  // namespace

std::vector<std::vector<double>> active_levels(const std::vector<std::vector<double>>& levels,
                                               const std::vector<double>& busy) {
  const size_t procs = levels.size();
  const size_t periods = busy.size();
  const Grid ran = ran_by_period(levels, busy);
  const Edges edges = find_edges(levels, busy, ran);
  // The factors, from the periods without an edge. Steady: ran in every period of the run, so
  // no start or stop thinned its record.
  std::vector<std::vector<double>> clean(procs, std::vector<double>(periods, 0.0));
  std::vector<double> clean_busy(periods, 0.0);
  std::vector<bool> steady(procs, true);
  for (size_t p = 0; p < periods; ++p) {
    for (size_t j = 0; j < procs; ++j) steady[j] = steady[j] && ran[j][p] && edges.process[p] != j;
    if (edges.process[p]) continue;
    clean_busy[p] = busy[p];
    for (size_t j = 0; j < procs; ++j) clean[j][p] = ran[j][p] ? levels[j][p] : 0.0;
  }
  const std::vector<double> scale = level_scales(clean, clean_busy, steady);
  std::vector<std::vector<double>> out(procs, std::vector<double>(periods, 0.0));
  for (size_t p = 0; p < periods; ++p) {
    const std::optional<size_t> edge = edges.process[p];
    double others = 0;
    for (size_t j = 0; j < procs; ++j) {
      if (ran[j][p]) out[j][p] = scale[j] * levels[j][p];
      if (ran[j][p] && edge != j) others += out[j][p];
    }
    if (!edge || edges.mixed[p]) continue;
    const double full = scale[*edge] * levels[*edge][p];
    // A full GPU: the shares changed, not the part of the period.
    if (others + full > 1.0 || full <= 0) continue;
    out[*edge][p] = full * std::clamp((busy[p] - others) / full, 0.0, 1.0);
  }
  return out;
}

}  // namespace gpumeter
