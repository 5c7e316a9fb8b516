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

#include <vector>

namespace gpumeter {

// prior[j][p]: process j's share-seconds in period p from its records (its window's average
// share times the overlap), all >= 0; busy[p]: period p's busy seconds. Returns fitted[j][p]:
// in every period where some prior is positive, the fitted values add up to busy[p]; each
// process's fitted total matches its prior total, scaled so that the totals add up to the busy
// seconds of those periods, where the periods allow it. Periods without any prior stay 0.
std::vector<std::vector<double>> fit_shares(const std::vector<std::vector<double>>& prior,
                                            const std::vector<double>& busy);

}  // namespace gpumeter
