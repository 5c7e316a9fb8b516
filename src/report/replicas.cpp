#include "report/replicas.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace gpumeter::report {

namespace {

Labels without(Labels labels, const std::vector<std::string>& names) {
  for (const auto& n : names) labels.erase(n);
  return labels;
}

std::size_t points_present(const CounterSeries& s) {
  return static_cast<std::size_t>(std::count(s.present.begin(), s.present.end(), true));
}

Labels replica_of(const Labels& labels, const std::vector<std::string>& replica_labels) {
  Labels out;
  for (const auto& n : replica_labels) {
    if (auto it = labels.find(n); it != labels.end()) out.insert(*it);
  }
  return out;
}

}  // namespace

Labels preferred_replica(const CounterData& data, const std::vector<std::string>& replica_labels) {
  std::map<Labels, std::size_t> points;
  for (const auto& s : data.series) points[replica_of(s.labels, replica_labels)] += points_present(s);
  Labels best;
  std::size_t most = 0;
  for (const auto& [replica, n] : points) {  // in label order: the first wins a tie
    if (!replica.empty() && n > most) {
      best = replica;
      most = n;
    }
  }
  return best;
}

ReplicaMerge keep_one_replica(CounterData& data, const std::vector<std::string>& replica_labels,
                              const Labels& preferred) {
  ReplicaMerge merge;
  const bool any = std::any_of(data.series.begin(), data.series.end(), [&](const CounterSeries& s) {
    return std::any_of(replica_labels.begin(), replica_labels.end(),
                       [&](const std::string& n) { return s.labels.count(n) > 0; });
  });
  if (!any) return merge;
  std::map<Labels, std::vector<std::size_t>> copies;  // labels without the replica's -> series
  for (std::size_t i = 0; i < data.series.size(); ++i) {
    copies[without(data.series[i].labels, replica_labels)].push_back(i);
  }
  std::vector<CounterSeries> kept;
  std::set<Labels> kept_labels;  // as read, replica labels included
  for (auto& [labels, indices] : copies) {
    merge.replicas = std::max(merge.replicas, indices.size());
    merge.dropped += indices.size() - 1;
    std::size_t best = indices.front();
    for (std::size_t i : indices) {
      const bool a_preferred = !preferred.empty() && replica_of(data.series[i].labels, replica_labels) == preferred;
      const bool b_preferred = !preferred.empty() && replica_of(data.series[best].labels, replica_labels) == preferred;
      const std::size_t a = points_present(data.series[i]), b = points_present(data.series[best]);
      if (a_preferred != b_preferred) {
        if (a_preferred) best = i;
      } else if (a > b || (a == b && data.series[i].labels < data.series[best].labels)) {
        best = i;
      }
    }
    kept_labels.insert(data.series[best].labels);
    CounterSeries s = std::move(data.series[best]);
    s.labels = labels;
    kept.push_back(std::move(s));
  }
  std::vector<ResetFound> resets;
  for (auto& r : data.resets) {
    if (!kept_labels.count(r.labels)) continue;
    r.labels = without(std::move(r.labels), replica_labels);
    resets.push_back(std::move(r));
  }
  std::map<std::uint64_t, std::uint64_t> owner_of;  // series as read -> as billed
  for (const auto& l : kept_labels) owner_of.emplace(series_id(l), series_id(without(l, replica_labels)));
  std::erase_if(data.pending, [&](const PendingStep& p) { return !owner_of.count(p.series); });
  for (auto& p : data.pending) p.owner = owner_of.at(p.series);
  data.series = std::move(kept);
  data.resets = std::move(resets);
  return merge;
}

}  // namespace gpumeter::report
