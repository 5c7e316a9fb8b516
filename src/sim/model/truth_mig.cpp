#include "sim/model/truth_mig.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "sim/model/readings.h"
#include "sim/model/timeline.h"

namespace gpumeter::sim {

namespace {

using OwnerKey = std::pair<int, std::size_t>;  // (0, allocation) or (1, job): allocations first

Micros end_in(const Scenario& s, Micros end) { return std::min(end, s.duration); }

OwnerKey owner_of_job(const Scenario& s, std::size_t job, bool scheduler) {
  const std::size_t a = s.jobs[job].allocation;
  return scheduler && a != kNoAllocation ? OwnerKey{0, a} : OwnerKey{1, job};
}

}  // namespace

MigTruth compute_mig_truth(const Scenario& scenario, Micros from, Micros to, bool scheduler) {
  MigTruth truth;
  const MigPlan& plan = scenario.mig;
  std::map<std::size_t, MigInstanceTruth> instances;
  std::map<std::size_t, std::map<OwnerKey, MigOwnerTruth>> owners;  // instance -> owner
  for (unsigned g = 0; g < scenario.gpus.size(); ++g) {
    if (!plan.enabled(g)) continue;
    const GpuModelSpec& model = scenario.model_of(g);
    const double idle_w = static_cast<double>(model.idle_power_mw) / 1000.0;
    const unsigned gpu_slices = mig_compute_slices(model);
    MigGpuTruth gt;
    gt.gpu = g;
    gt.uuid = scenario.gpus[g].uuid;
    gt.slices = gpu_slices;
    std::vector<Micros> edges = plan.edges(g, from, to);
    if (scheduler) {
      for (const Allocation& a : scenario.allocations) {
        if (a.mig == kNoMigInstance || plan.instances[a.mig].gpu != g) continue;
        for (Micros e : {a.start, end_in(scenario, a.end)}) {
          if (e > from && e < to) edges.push_back(e);
        }
      }
    }
    edges.push_back(from);
    edges.push_back(to);
    std::sort(edges.begin(), edges.end());
    edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
    GpuTimeline timeline(scenario, g);
    for (std::size_t e = 0; e + 1 < edges.size(); ++e) {
      const std::vector<std::size_t> live = plan.live(g, edges[e]);
      std::map<std::size_t, std::vector<OwnerKey>> held;  // instance -> allocations holding it
      if (scheduler) {
        for (std::size_t a = 0; a < scenario.allocations.size(); ++a) {
          const Allocation& al = scenario.allocations[a];
          if (al.mig != kNoMigInstance && al.start <= edges[e] && edges[e] < end_in(scenario, al.end))
            held[al.mig].push_back({0, a});
        }
      }
      timeline.for_each_segment(edges[e], edges[e + 1], [&](const Segment& s) {
        const double d = to_seconds(s.end - s.start);
        const double power_w = power_milliwatts(model, s.util_percent) / 1000.0;
        const double dynamic_w = power_w - idle_w;
        gt.slice_seconds += gpu_slices * d;
        gt.energy_joules += power_w * d;
        unsigned used_slices = 0;
        double active = 0;  // sum of w_k min(100, S_k), in percent x slices / the GPU's slices
        std::map<std::size_t, int> sums;
        for (const JobShare& j : s.jobs) sums[j.mig] += j.percent;
        for (std::size_t i : live) {
          used_slices += plan.instances[i].slices;
          active += plan.instances[i].slices * std::min(100, sums[i]) / static_cast<double>(gpu_slices);
        }
        gt.unallocated_slice_seconds += (gpu_slices - used_slices) * d;
        gt.unallocated_energy_joules +=
            idle_w * (gpu_slices - used_slices) / static_cast<double>(gpu_slices) * d;
        for (std::size_t i : live) {
          const MigInstance& m = plan.instances[i];
          MigInstanceTruth& it = instances[i];
          const double w = m.slices / static_cast<double>(gpu_slices);
          const int sum = sums[i];
          const double util = std::min(100, sum) / 100.0;
          const double idle_energy = idle_w * w * d;
          const double dynamic_energy = active > 0 ? dynamic_w * (w * std::min(100, sum)) / active * d : 0.0;
          it.seconds += d;
          it.slice_seconds += m.slices * d;
          it.busy_seconds += util * d;
          it.energy_joules += idle_energy + dynamic_energy;
          std::vector<OwnerKey> present = held[i];
          for (const JobShare& j : s.jobs) {
            if (j.mig != i) continue;
            it.memory_byte_seconds += static_cast<double>(j.memory_bytes) * d;
            const OwnerKey k = owner_of_job(scenario, j.job, scheduler);
            if (std::find(present.begin(), present.end(), k) == present.end()) present.push_back(k);
          }
          if (present.empty()) {
            it.idle_seconds += d;
            it.idle_energy_joules += idle_energy + dynamic_energy;
            continue;
          }
          it.allocated_seconds += d;
          const auto n = static_cast<double>(present.size());
          for (const OwnerKey& k : present) {
            MigOwnerTruth& o = owners[i][k];
            o.allocated_seconds += d / n;
            o.energy_joules += idle_energy / n;
          }
          for (const JobShare& j : s.jobs) {
            if (j.mig != i) continue;
            MigOwnerTruth& o = owners[i][owner_of_job(scenario, j.job, scheduler)];
            const double share = sum > 0 ? static_cast<double>(j.percent) / sum : 0.0;
            o.busy_seconds += util * share * d;
            o.memory_byte_seconds += static_cast<double>(j.memory_bytes) * d;
            o.energy_joules += dynamic_energy * share;
          }
        }
      });
    }
    truth.gpus.push_back(gt);
  }
  std::map<unsigned, std::unique_ptr<GpuTimeline>> timelines;  // for the instances' GPM
  for (auto& [i, it] : instances) {
    const MigInstance& m = plan.instances[i];
    it.instance = i;
    it.name = m.name;
    it.uuid = m.uuid;
    it.gpu = m.gpu;
    it.gpu_uuid = scenario.gpus[m.gpu].uuid;
    it.gpu_instance_id = m.gpu_instance_id;
    it.compute_instance_id = m.compute_instance_id;
    it.profile = m.profile_name;
    it.slices = m.slices;
    it.start = std::max(m.start, from);
    it.end = std::min(m.end, to);
    const GpuModelSpec& model = scenario.model_of(m.gpu);
    it.gpm_supported = gpm_supported(model);
    if (it.gpm_supported && it.end > it.start) {
      auto& timeline = timelines[m.gpu];
      if (!timeline) timeline = std::make_unique<GpuTimeline>(scenario, m.gpu);
      ProfileIntegrator p(scenario, *timeline, m.gpu, i);
      const ProfileTotals a = p.at(it.start);
      const ProfileTotals b = p.at(it.end);
      it.profiling = profile_averages(a, b, to_seconds(it.end - it.start), model.nvlink.links);
    }
    for (auto& [k, o] : owners[i]) {
      o.is_allocation = k.first == 0;
      o.index = k.second;
      o.name = o.is_allocation ? scenario.allocations[k.second].name : scenario.jobs[k.second].name;
      it.owners.push_back(std::move(o));
    }
    truth.instances.push_back(std::move(it));
  }
  return truth;
}

}  // namespace gpumeter::sim
