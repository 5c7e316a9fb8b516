#pragma once
// Other exporters' schemas, rendered from the same Snapshot as gpumeter's own families, so that
// dashboards, alerts and tools written for them keep working (docs/migrating.md). Each set is
// chosen on its own; none replaces gpumeter's families, it is added after them.
//   dcgm-exporter      DCGM_FI_* fields chosen by a counters file, dcgm-exporter's labels
//   dcgm-exporter-1.x  the dcgm_* names of dcgm-exporter 1.x (and its --use-old-namespace)
//   nvidia-smi         the nvidia_smi_* names of the nvidia-smi exporters

#include <string>
#include <string_view>
#include <vector>

#include "model/collectors.h"
#include "model/metric_family.h"
#include "model/snapshot.h"
#include "render/dcgm_counters.h"
#include "util/result.h"

namespace gpumeter {

enum class CompatSet { kDcgmExporter, kDcgmExporter1x, kNvidiaSmi };

inline constexpr std::string_view kCompatSetNames[] = {"dcgm-exporter", "dcgm-exporter-1.x", "nvidia-smi"};

Result<CompatSet> parse_compat_set(std::string_view name);
std::string_view compat_set_name(CompatSet set);

struct CompatOptions {
  std::vector<CompatSet> sets;  // each at most once, in the order they are rendered
  // The fields of the dcgm-exporter set; only those served are rendered (serve_dcgm_counters).
  DcgmCounters counters = default_dcgm_counters();
  // dcgm-exporter's "Hostname" label; empty leaves it out (its --no-hostname).
  std::string hostname;

  bool has(CompatSet set) const;
};

// The fields of `counters` gpumeter cannot serve with the `enabled` collectors, in file order,
// each "FIELD (why)". The agent logs them once at start; they are left out of the exposition,
// never faked.
std::vector<std::string> unserved_dcgm_fields(const DcgmCounters& counters, const CollectorSet& enabled);

// The collectors that read the fields of `counters` gpumeter serves: the agent switches them on
// unless a flag or the configuration switches them off.
CollectorSet dcgm_field_collectors(const DcgmCounters& counters);

// The families of every chosen set, in the order of options.sets. Pure and deterministic.
std::vector<MetricFamily> build_compat_families(const Snapshot& snapshot, const CompatOptions& options);

}  // namespace gpumeter
