#pragma once
// Turns a Snapshot into the metric families gpumeter exposes, in a fixed order. Pure and
// deterministic: the same snapshot always gives the same families, which the golden files rely on.

#include <vector>

#include "model/metric_family.h"
#include "model/snapshot.h"

namespace gpumeter {

// Every family with at least one sample. Reading-based families only take GPUs that are up and have
// a reading; an unset optional or an absent vector entry yields no sample (never a placeholder).
// gpu_up, gpu_info, gpu_xid_errors_total and the per-GPU collector metrics cover down GPUs too.
// Counter samples that are NaN or negative are dropped: they cannot be a valid counter value, and an
// OpenMetrics parser rejects the whole exposition on one of them.
std::vector<MetricFamily> build_families(const Snapshot& snapshot);

// The one family added per scrape, after the prepared body (see prepared_exposition.h).
inline constexpr const char* kSnapshotAgeFamily = "gpumeter_snapshot_age_seconds";
MetricFamily snapshot_age_family(double age_seconds);

}  // namespace gpumeter
