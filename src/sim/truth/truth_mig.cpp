#include "sim/truth/truth_mig.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "sim/physics/instant_values.h"
#include "sim/physics/live.h"
#include "sim/physics/timeline.h"

namespace gpumeter::sim {

namespace {

using OwnerKey = std::pair<int, std::size_t>;  // (0, allocation) or (1, job): allocations first

Micros end_in(const Scenario& s, Micros end) { return std::min(end, s.duration); }

OwnerKey owner_of_job(const Scenario& s, std::size_t job, bool scheduler) {
  const std::size_t a = s.jobs[job].allocation;
  return scheduler && a != kNoAllocation ? OwnerKey{0, a} : OwnerKey{1, job};
}

// The sums per instance and per owner of an instance, as the GPUs' segments are walked.
struct MigAccount {
  const Scenario& scenario;
  bool scheduler;
  std::map<std::size_t, MigInstanceTruth> instances;
  std::map<std::size_t, std::map<OwnerKey, MigOwnerTruth>> owners;  // instance -> owner
};

// An instance's part of one segment.
struct InstanceSegment {
  double d = 0;     // the segment's seconds
  int sum = 0;      // S_i, the sum of the percents of its jobs
  double util = 0;  // U_i
  double idle_energy = 0;
  double dynamic_energy = 0;
};

// The instants in [from, to] where GPU g's layout changes, or, under the scheduler policy, the
// allocations holding its instances do.
std::vector<Micros> gpu_edges(const MigAccount& acc, unsigned g, Micros from, Micros to) {
  const Scenario& scenario = acc.scenario;
  std::vector<Micros> edges = scenario.mig.edges(g, from, to);
  if (acc.scheduler) {
    for (const Allocation& a : scenario.allocations) {
      if (a.mig == kNoMigInstance || scenario.mig.instances[a.mig].gpu != g) continue;
      for (Micros e : {a.start, end_in(scenario, a.end)}) {
        if (e > from && e < to) edges.push_back(e);
      }
    }
  }
  edges.push_back(from);
  edges.push_back(to);
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  return edges;
}

// Under the scheduler policy, the allocations holding each instance at t (none under the
// process policy).
std::map<std::size_t, std::vector<OwnerKey>> holders_at(const MigAccount& acc, Micros t) {
  std::map<std::size_t, std::vector<OwnerKey>> held;  // instance -> allocations holding it
  if (!acc.scheduler) return held;
  const Scenario& scenario = acc.scenario;
  for (std::size_t a = 0; a < scenario.allocations.size(); ++a) {
    const Allocation& al = scenario.allocations[a];
    if (al.mig != kNoMigInstance && al.start <= t && t < end_in(scenario, al.end)) held[al.mig].push_back({0, a});
  }
  return held;
}

// Instance i's time, activity, memory and energy over a segment, split among the owners
// present on it: those holding it (`present`) and those of its jobs.
void add_instance_segment(MigAccount& acc, std::size_t i, const Segment& s, const InstanceSegment& p,
                          std::vector<OwnerKey> present) {
  const MigInstance& m = acc.scenario.mig.instances[i];
  MigInstanceTruth& it = acc.instances[i];
  const double d = p.d;
  it.seconds += d;
  it.slice_seconds += m.slices * d;
  it.busy_seconds += p.util * d;
  it.energy_joules += p.idle_energy + p.dynamic_energy;
  // SM activity: each job's part of the instance's time (its percent of at least 100) times the
  // fraction of SMs it keeps busy, as the instance's GPM integrator counts it (profiling.cpp).
  auto sm_active = [&](const JobShare& j) {
    const double sm = j.job == kLiveJob ? JobProfile{}.sm : acc.scenario.jobs[j.job].profile.sm;
    return j.percent / static_cast<double>(std::max(100, p.sum)) * sm * d;
  };
  for (const JobShare& j : s.jobs) {
    if (j.mig != i) continue;
    it.sm_active_seconds += sm_active(j);
    it.memory_byte_seconds += static_cast<double>(j.memory_bytes) * d;
    const OwnerKey k = owner_of_job(acc.scenario, j.job, acc.scheduler);
    if (std::find(present.begin(), present.end(), k) == present.end()) present.push_back(k);
  }
  if (present.empty()) {
    it.idle_seconds += d;
    it.idle_energy_joules += p.idle_energy + p.dynamic_energy;
    return;
  }
  it.allocated_seconds += d;
  const auto n = static_cast<double>(present.size());
  for (const OwnerKey& k : present) {
    MigOwnerTruth& o = acc.owners[i][k];
    o.allocated_seconds += d / n;
    o.energy_joules += p.idle_energy / n;
  }
  for (const JobShare& j : s.jobs) {
    if (j.mig != i) continue;
    MigOwnerTruth& o = acc.owners[i][owner_of_job(acc.scenario, j.job, acc.scheduler)];
    const double share = p.sum > 0 ? static_cast<double>(j.percent) / p.sum : 0.0;
    o.busy_seconds += p.util * share * d;
    o.sm_active_seconds += sm_active(j);
    o.memory_byte_seconds += static_cast<double>(j.memory_bytes) * d;
    o.energy_joules += p.dynamic_energy * share;
  }
}

// One segment of a GPU in MIG mode with instances `live`: the GPU's slice time and energy, what
// no instance takes of them, and each live instance's part (held: holders_at).
void add_segment(MigAccount& acc, const GpuModelSpec& model, const std::vector<std::size_t>& live,
                 std::map<std::size_t, std::vector<OwnerKey>>& held, const Segment& s, MigGpuTruth& gt) {
  const MigPlan& plan = acc.scenario.mig;
  const double idle_w = static_cast<double>(model.idle_power_mw) / 1000.0;
  const unsigned gpu_slices = mig_compute_slices(model);
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
  gt.unallocated_energy_joules += idle_w * (gpu_slices - used_slices) / static_cast<double>(gpu_slices) * d;
  for (std::size_t i : live) {
    const double w = plan.instances[i].slices / static_cast<double>(gpu_slices);
    InstanceSegment p;
    p.d = d;
    p.sum = sums[i];
    p.util = std::min(100, p.sum) / 100.0;
    p.idle_energy = idle_w * w * d;
    p.dynamic_energy = active > 0 ? dynamic_w * (w * std::min(100, p.sum)) / active * d : 0.0;
    add_instance_segment(acc, i, s, p, held[i]);
  }
}

// GPU g in MIG mode over [from, to): its own sums, and its instances' and their owners' in acc.
MigGpuTruth gpu_truth(MigAccount& acc, unsigned g, Micros from, Micros to) {
  const Scenario& scenario = acc.scenario;
  const GpuModelSpec& model = scenario.model_of(g);
  MigGpuTruth gt;
  gt.gpu = g;
  gt.uuid = scenario.gpus[g].uuid;
  gt.slices = mig_compute_slices(model);
  const std::vector<Micros> edges = gpu_edges(acc, g, from, to);
  GpuTimeline timeline(scenario, g);
  for (std::size_t e = 0; e + 1 < edges.size(); ++e) {
    const std::vector<std::size_t> live = scenario.mig.live(g, edges[e]);
    std::map<std::size_t, std::vector<OwnerKey>> held = holders_at(acc, edges[e]);
    timeline.for_each_segment(edges[e], edges[e + 1],
                              [&](const Segment& s) { add_segment(acc, model, live, held, s, gt); });
  }
  return gt;
}

// Instance i's identity, its life clipped to [from, to), its GPM averages over that life where
// the GPU has GPM (timelines: one per GPU, made when first needed) and its owners.
void finish_instance(const MigAccount& acc, std::size_t i, MigInstanceTruth& it,
                     std::map<OwnerKey, MigOwnerTruth>& owners,
                     std::map<unsigned, std::unique_ptr<GpuTimeline>>& timelines, Micros from, Micros to) {
  const Scenario& scenario = acc.scenario;
  const MigInstance& m = scenario.mig.instances[i];
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
  for (auto& [k, o] : owners) {
    o.is_allocation = k.first == 0;
    o.index = k.second;
    o.name = o.is_allocation ? scenario.allocations[k.second].name : scenario.jobs[k.second].name;
    it.owners.push_back(std::move(o));
  }
}

}  // namespace

MigTruth compute_mig_truth(const Scenario& scenario, Micros from, Micros to, bool scheduler) {
  MigTruth truth;
  MigAccount acc{scenario, scheduler, {}, {}};
  for (unsigned g = 0; g < scenario.gpus.size(); ++g) {
    if (scenario.mig.enabled(g)) truth.gpus.push_back(gpu_truth(acc, g, from, to));
  }
  std::map<unsigned, std::unique_ptr<GpuTimeline>> timelines;  // for the instances' GPM
  for (auto& [i, it] : acc.instances) {
    finish_instance(acc, i, it, acc.owners[i], timelines, from, to);
    truth.instances.push_back(std::move(it));
  }
  return truth;
}

}  // namespace gpumeter::sim
