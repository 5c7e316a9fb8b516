#pragma once
// How the busy time of a run of device periods is split between the processes present.
//
// Two measurements must both hold. The device's utilization samples give each period's busy
// seconds; a process's per-process records give its busy seconds over each record's window, as
// the window's average share. Splitting each period by the window-average shares breaks the
// second whenever the mix changes inside a window: a process that ran alone for part of its
// window carries that share into the part it shared, and takes busy time from the others.
//
// fit_shares() keeps the first exactly and the second as closely as the periods allow: it scales
// the records' share-seconds to each period's busy seconds and each process's total to what its
// records say, in turn (iterative proportional fitting), starting from the window-average split,
// so where nothing changes inside a window the result is that split.

#include <cstddef>
#include <vector>

namespace gpumeter {

// prior[j][p]: process j's share-seconds in period p from its records (its window's average
// share times the overlap), all >= 0; busy[p]: period p's busy seconds. Returns fitted[j][p]:
// in every period where some prior is positive, the fitted values add up to busy[p]; each
// process's fitted total matches its prior total, scaled so that the totals add up to the busy
// seconds of those periods, where the periods allow it. Periods without any prior stay 0.
std::vector<std::vector<double>> fit_shares(const std::vector<std::vector<double>>& prior,
                                            const std::vector<double>& busy);

// Where a driver averages a process's record over only the periods it was active in (nvml.h:
// a record for each process "that had some non-zero utilization during the last sample
// period"), a record's share times its window overstates a process that idled in part of it,
// and the fit would hand that process its neighbours' busy time. What tells who ran in a period
// is then the device's own busy fraction: `levels[j]` is process j's share while active (its
// record's share over the part of the period its window covers), `busy` the period's busy
// fraction. Returns which processes ran: the subset whose levels add up closest to `busy`;
// among subsets within kActiveSlack of the closest, the largest (a process is taken to have
// run unless the device says otherwise). Every process when there are more than
// kMaxActiveChoice (the search is over every subset).
inline constexpr double kActiveSlack = 0.02;  // two whole percents: records and samples are rounded
inline constexpr std::size_t kMaxActiveChoice = 12;
std::vector<bool> active_subset(const std::vector<double>& levels, double busy);

// An active-only record is the mean of a process's samples, and the samples at the edges of a
// burst are active for part of their period only: the mean understates the process's level
// while it ran, and a bursty process would lose busy time to a steady neighbour whose record
// has no such edge. Over a run of periods, with levels[j][p] process j's level where it ran
// (0 where it did not) and busy[p] each period's busy fraction, returns the factor for each
// process's levels that meets the busy fractions best (least squares), drawn towards 1 by
// kLevelRidge where the periods cannot tell the processes apart (they ran in the same ones:
// then all get the same factor, and keep their records' ratio). A process that ran through
// every period of the run (`steady[j]`) has no partial sample in its record: it is drawn
// kSteadyPull times as hard, so that a bursty neighbour's record is the one corrected. 1 for
// every process when there are more than kMaxActiveChoice.
inline constexpr double kLevelRidge = 1e-2;
inline constexpr double kSteadyPull = 1e3;
inline constexpr double kMinLevelScale = 0.5, kMaxLevelScale = 2.0;
std::vector<double> level_scales(const std::vector<std::vector<double>>& levels, const std::vector<double>& busy,
                                 const std::vector<bool>& steady);

// The three together, over a run of periods: levels[j][p] is process j's level from its records
// in period p (0: no record there), busy[p] the period's busy fraction. Each period's subset
// comes from active_subset(). A period in which some process starts or stops running (it ran in
// the period and not in one beside it, or the reverse) is an edge: a burst starts or ends inside
// a period, not on its boundary. The factors come from level_scales() over the other periods.
// In an edge where exactly one process changes, it ran the part of the period that makes up
// the busy fraction the others leave. Returns each process's fitted level in each period: its
// scaled level times the part of the period it ran, 0 where it did not run.
std::vector<std::vector<double>> active_levels(const std::vector<std::vector<double>>& levels,
                                               const std::vector<double>& busy);

}  // namespace gpumeter
