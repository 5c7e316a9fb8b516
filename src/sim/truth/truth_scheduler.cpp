#include "sim/truth/truth_scheduler.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "sim/physics/instant_values.h"
#include "sim/physics/timeline.h"

namespace gpumeter::sim {

namespace {

// (0, allocation index) or (1, job index): allocations sort first.
using OwnerKey = std::pair<int, std::size_t>;

OwnerKey owner_of_job(const Scenario& s, std::size_t job) {
  const std::size_t a = s.jobs[job].allocation;
  return a == kNoAllocation ? OwnerKey{1, job} : OwnerKey{0, a};
}

Micros end_in(const Scenario& s, Micros end) { return std::min(end, s.duration); }

using OwnerMap = std::map<std::tuple<int, std::size_t, unsigned>, OwnerTruth>;  // kind, index, GPU

// The allocations holding GPU g (`held`), and the instants in [from, to] where that set changes.
std::vector<Micros> allocation_edges(const Scenario& scenario, unsigned g, Micros from, Micros to,
                                     std::vector<std::size_t>& held) {
  std::vector<Micros> edges{from, to};
  for (std::size_t a = 0; a < scenario.allocations.size(); ++a) {
    const Allocation& alloc = scenario.allocations[a];
    if (std::find(alloc.gpus.begin(), alloc.gpus.end(), g) == alloc.gpus.end()) continue;
    held.push_back(a);
    for (Micros e : {alloc.start, end_in(scenario, alloc.end)}) {
      if (e > from && e < to) edges.push_back(e);
    }
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  return edges;
}

// One segment of GPU g while the allocations `allocated` hold it: the GPU's sums, time with
// processes outside any allocation on an allocated GPU (`foreign`), and each present owner's
// share of the time and of the activity.
void add_segment(const Scenario& scenario, unsigned g, const std::vector<OwnerKey>& allocated, const Segment& s,
                 GpuTruth& gt, double& foreign, OwnerMap& owners) {
  const double d = to_seconds(s.end - s.start);
  const double util = s.util_percent / 100.0;
  const double power_w = power_milliwatts(scenario.model_of(g), s.util_percent) / 1000.0;
  gt.busy_seconds += util * d;
  gt.energy_joules += power_w * d;
  gt.memory_byte_seconds += static_cast<double>(s.memory_bytes) * d;
  std::vector<OwnerKey> present = allocated;
  std::vector<OwnerKey> with_process;
  bool has_foreign = false;
  for (const JobShare& j : s.jobs) {
    const OwnerKey k = owner_of_job(scenario, j.job);
    has_foreign = has_foreign || k.first == 1;
    if (std::find(present.begin(), present.end(), k) == present.end()) present.push_back(k);
    if (std::find(with_process.begin(), with_process.end(), k) == with_process.end()) with_process.push_back(k);
  }
  if (present.empty()) {
    gt.idle_seconds += d;
    gt.idle_energy_joules += power_w * d;
    return;
  }
  gt.allocated_seconds += d;
  if (has_foreign && !allocated.empty()) foreign += d;
  const double share_of_time = d / static_cast<double>(present.size());
  for (const OwnerKey& k : present) {
    OwnerTruth& o = owners[{k.first, k.second, g}];
    o.allocated_seconds += share_of_time;
    if (std::find(with_process.begin(), with_process.end(), k) == with_process.end())
      o.idle_allocated_seconds += share_of_time;
  }
  for (const JobShare& j : s.jobs) {
    const OwnerKey k = owner_of_job(scenario, j.job);
    const double share = s.sum_percent > 0 ? static_cast<double>(j.percent) / s.sum_percent : 0.0;
    owners[{k.first, k.second, g}].busy_seconds += util * share * d;
  }
}

}  // namespace

SchedulerTruth compute_scheduler_truth(const Scenario& scenario, Micros from, Micros to) {
  SchedulerTruth truth;
  truth.from = from;
  truth.to = to;
  OwnerMap owners;
  for (unsigned g = 0; g < scenario.gpus.size(); ++g) {
    GpuTruth gt;
    gt.gpu = g;
    gt.uuid = scenario.gpus[g].uuid;
    double foreign = 0;
    std::vector<std::size_t> held;
    const std::vector<Micros> edges = allocation_edges(scenario, g, from, to, held);
    GpuTimeline timeline(scenario, g);
    for (std::size_t e = 0; e + 1 < edges.size(); ++e) {
      std::vector<OwnerKey> allocated;
      for (std::size_t a : held) {
        const Allocation& alloc = scenario.allocations[a];
        if (alloc.start <= edges[e] && edges[e] < end_in(scenario, alloc.end)) allocated.push_back({0, a});
      }
      timeline.for_each_segment(edges[e], edges[e + 1],
                                [&](const Segment& s) { add_segment(scenario, g, allocated, s, gt, foreign, owners); });
    }
    truth.gpus.push_back(gt);
    truth.foreign_seconds.push_back(foreign);
  }
  for (auto& [key, o] : owners) {
    const auto& [kind, index, gpu] = key;
    o.is_allocation = kind == 0;
    o.index = index;
    o.name = o.is_allocation ? scenario.allocations[index].name : scenario.jobs[index].name;
    o.gpu = gpu;
    o.uuid = scenario.gpus[gpu].uuid;
    truth.owners.push_back(std::move(o));
  }
  return truth;
}

}  // namespace gpumeter::sim
