#include "sim/truth/truth.h"

#include <algorithm>
#include <map>

#include "sim/physics/instant_values.h"
#include "sim/physics/timeline.h"

namespace gpumeter::sim {

namespace {

void add_profile_truth(const Scenario& scenario, const GpuTimeline& timeline, GpuTruth& gt, Micros from, Micros to) {
  const GpuModelSpec& model = scenario.model_of(gt.gpu);
  if (model.vendor != "nvidia") return;
  ProfileIntegrator p(scenario, timeline, gt.gpu);
  const ProfileTotals a = p.at(from);
  const ProfileTotals b = p.at(to);
  gt.gpm_supported = gpm_supported(model);
  if (gt.gpm_supported) gt.profiling = profile_averages(a, b, to_seconds(to - from), model.nvlink.links);
  for (unsigned l = 0; l < model.nvlink.links; ++l) {
    gt.nvlink_tx_bytes.push_back(b.nvlink_tx[l] - a.nvlink_tx[l]);
    gt.nvlink_rx_bytes.push_back(b.nvlink_rx[l] - a.nvlink_rx[l]);
  }
}

}  // namespace

Truth compute_truth(const Scenario& scenario, Micros from, Micros to) {
  Truth truth;
  truth.from = from;
  truth.to = to;
  std::map<std::pair<std::size_t, unsigned>, JobTruth> jobs;  // ordered by job, then GPU
  for (unsigned g = 0; g < scenario.gpus.size(); ++g) {
    const GpuModelSpec& model = scenario.model_of(g);
    const double idle_w = static_cast<double>(model.idle_power_mw) / 1000.0;
    GpuTruth gt;
    gt.gpu = g;
    gt.uuid = scenario.gpus[g].uuid;
    GpuTimeline timeline(scenario, g);
    timeline.for_each_segment(from, to, [&](const Segment& s) {
      const double d = to_seconds(s.end - s.start);
      const double util = s.util_percent / 100.0;
      const double power_w = power_milliwatts(model, s.util_percent) / 1000.0;
      const auto n = static_cast<double>(s.jobs.size());
      gt.busy_seconds += util * d;
      gt.energy_joules += power_w * d;
      gt.memory_byte_seconds += static_cast<double>(s.memory_bytes) * d;
      if (s.jobs.empty()) {
        gt.idle_seconds += d;
        gt.idle_energy_joules += power_w * d;
        return;
      }
      gt.allocated_seconds += d;
      for (const JobShare& j : s.jobs) {
        JobTruth& jt = jobs[{j.job, g}];
        const double share = s.sum_percent > 0 ? static_cast<double>(j.percent) / s.sum_percent : 0.0;
        jt.allocated_seconds += d / n;
        jt.busy_seconds += util * share * d;
        jt.memory_byte_seconds += static_cast<double>(j.memory_bytes) * d;
        jt.energy_joules += (idle_w / n + (power_w - idle_w) * share) * d;
        jt.idle_power_energy_joules += idle_w / n * d;
        jt.pid = j.pid;
      }
    });
    add_profile_truth(scenario, timeline, gt, from, to);
    truth.gpus.push_back(gt);
  }
  for (auto& [key, jt] : jobs) {
    const Job& job = scenario.jobs[key.first];
    jt.job = key.first;
    jt.name = job.name;
    jt.gpu = key.second;
    jt.uuid = scenario.gpus[key.second].uuid;
    jt.uid = job.uid;
    jt.cgroup = job.cgroup;
    jt.kubernetes = job.kubernetes;
    jt.env = job.env;
    truth.jobs.push_back(std::move(jt));
  }
  return truth;
}

}  // namespace gpumeter::sim
