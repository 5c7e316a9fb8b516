#include "render/series_cap.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <utility>

namespace gpumeter {

namespace {

constexpr std::string_view kProcessFamilies[] = {"gpu_process_memory_used_bytes", "gpu_process_utilization_ratio"};
// The NVLink collector's per-link traffic, in the order it is cut; the links' state and errors,
// which the NVLink alerts read, are kept.
constexpr std::string_view kNvlinkTraffic[] = {"gpu_nvlink_transmit_bytes_total", "gpu_nvlink_receive_bytes_total",
                                               "gpu_nvlink_speed_bytes_per_second"};

bool is_process_family(std::string_view name) {
  return std::find(std::begin(kProcessFamilies), std::end(kProcessFamilies), name) != std::end(kProcessFamilies);
}

std::string label_of(const MetricSample& s, std::string_view name) {
  for (const auto& [k, v] : s.labels) {
    if (k == name) return v;
  }
  return {};
}

using ProcessKey = std::pair<std::string, std::string>;  // the gpu and pid labels

ProcessKey process_key(const MetricSample& s) { return {label_of(s, "gpu"), label_of(s, "pid")}; }

// Cuts whole processes, the last in the per-process limit's order first, until `served` fits.
void cut_processes(std::vector<MetricFamily>& families, const Snapshot& snap, std::size_t budget, SeriesCut& cut) {
  std::map<ProcessKey, std::size_t> samples;
  for (const auto& f : families) {
    if (!is_process_family(f.name)) continue;
    for (const auto& s : f.samples) ++samples[process_key(s)];
  }
  if (samples.empty()) return;
  struct Ranked {
    std::size_t slot;
    const ProcessSnapshot* p;
  };
  std::vector<Ranked> ranked;
  for (std::size_t i = 0; i < snap.gpus.size(); ++i) {
    for (const auto& p : snap.gpus[i].processes) {
      if (p.series) ranked.push_back({i, &p});
    }
  }
  std::sort(ranked.begin(), ranked.end(),
            [](const Ranked& a, const Ranked& b) { return process_series_before(a.slot, *a.p, b.slot, *b.p); });
  std::set<ProcessKey> dropped;
  for (auto it = ranked.rbegin(); it != ranked.rend() && cut.served > budget; ++it) {
    ProcessKey key{std::to_string(snap.gpus[it->slot].identity.index), std::to_string(it->p->pid)};
    const auto n = samples.find(key);
    if (n == samples.end()) continue;
    dropped.insert(std::move(key));
    cut.served -= n->second;
    cut.dropped_by_kind["process"] += n->second;
  }
  for (auto& f : families) {
    if (!is_process_family(f.name)) continue;
    std::erase_if(f.samples, [&](const MetricSample& s) { return dropped.count(process_key(s)) > 0; });
  }
}

void cut_nvlink_traffic(std::vector<MetricFamily>& families, std::size_t budget, SeriesCut& cut) {
  for (std::string_view name : kNvlinkTraffic) {
    if (cut.served <= budget) return;
    for (auto& f : families) {
      if (f.name != name) continue;
      cut.served -= f.samples.size();
      cut.dropped_by_kind["nvlink"] += f.samples.size();
      f.samples.clear();
    }
  }
}

}  // namespace

SeriesCut cap_series(std::vector<MetricFamily>& families, const Snapshot& snap, std::size_t max_series) {
  SeriesCut cut;
  for (const auto& f : families) cut.wanted += f.samples.size();
  cut.served = cut.wanted;
  if (max_series == 0) return cut;
  const std::size_t budget = max_series > kSeriesCapReserved ? max_series - kSeriesCapReserved : 0;
  if (cut.served <= budget) return cut;
  cut_processes(families, snap, budget, cut);
  cut_nvlink_traffic(families, budget, cut);
  std::erase_if(families, [](const MetricFamily& f) { return f.samples.empty(); });
  cut.over = cut.served > budget;
  return cut;
}

std::vector<MetricFamily> series_cap_families(std::size_t max_series, const SeriesCut& cut) {
  if (max_series == 0) return {};
  MetricFamily limit{"gpumeter_series_limit",
                     "The cap on this exposition's series (exposition.max_series), the cap's own series included.",
                     MetricType::kGauge,
                     {{{}, static_cast<double>(max_series)}}};
  MetricFamily dropped{"gpumeter_series_limit_dropped",
                       "Series the cap left out of this exposition, by kind: process (per-process series, the "
                       "last in the per-process limit's order first) or nvlink (per-link NVLink traffic).",
                       MetricType::kGauge,
                       {}};
  for (const char* kind : kSeriesCutKinds) {
    dropped.samples.push_back({{{"kind", kind}}, static_cast<double>(cut.dropped(kind))});
  }
  std::vector<MetricFamily> out;
  out.push_back(std::move(limit));
  out.push_back(std::move(dropped));
  return out;
}

}  // namespace gpumeter
