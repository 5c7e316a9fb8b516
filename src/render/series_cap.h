#pragma once
// The exposition's cap on its own series (`exposition.max_series`): a Prometheus whose
// `sample_limit` is exceeded fails the whole scrape, ledger included, so the agent keeps its body
// under a cap set below that limit by leaving detail out. Per-process series go first, a process
// at a time from the last in the per-process limit's order (model/snapshot.h), then the NVLink
// collector's per-link traffic, a family at a time. The ledger, the device values, the compat sets
// and the agent's health are never cut: a cap below them is exceeded, and says so.

#include <cstddef>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "model/metric_family.h"
#include "model/snapshot.h"

namespace gpumeter {

struct SeriesCut {
  std::size_t wanted = 0;                              // series before the cut
  std::size_t served = 0;                              // series after it
  std::map<std::string, std::size_t> dropped_by_kind;  // "process", "nvlink"
  bool over = false;                                   // still above the cap: nothing more may be cut
  std::size_t dropped() const { return wanted - served; }
  std::size_t dropped(const std::string& kind) const {
    const auto n = dropped_by_kind.find(kind);
    return n == dropped_by_kind.end() ? 0 : n->second;
  }
};

// Cuts `families` to at most `max_series` samples (0: no cap). `snap` is the snapshot they were
// built from: it ranks the processes.
SeriesCut cap_series(std::vector<MetricFamily>& families, const Snapshot& snap, std::size_t max_series);

// What the cap cuts, in order: the `kind` of gpumeter_series_limit_dropped.
inline constexpr const char* kSeriesCutKinds[] = {"process", "nvlink"};

// The cap's own families: `gpumeter_series_limit` and `gpumeter_series_limit_dropped{kind}`, for
// a cap that is set. Their series, and the per-scrape snapshot age, are what
// kSeriesCapReserved keeps free under the cap.
std::vector<MetricFamily> series_cap_families(std::size_t max_series, const SeriesCut& cut);
inline constexpr std::size_t kSeriesCapReserved = 1 + std::size(kSeriesCutKinds) + 1;  // limit, dropped, age

}  // namespace gpumeter
