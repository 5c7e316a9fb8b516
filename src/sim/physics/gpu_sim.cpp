#include "sim/physics/gpu_sim.h"

#include <algorithm>
#include <cmath>

namespace gpumeter::sim {

namespace {

unsigned long long whole(double v) { return static_cast<unsigned long long>(std::floor(std::max(v, 0.0))); }

}  // namespace

SimGpu::SimGpu(const Scenario& scenario, unsigned index, const LiveTable* live)
    : index_(index),
      spec_(scenario.gpus[index]),
      model_(scenario.model_of(index)),
      timeline_(scenario, index, live),
      counters_(timeline_, model_),
      profiling_(scenario, timeline_, index),
      utilization_samples_(timeline_, model_, model_.samples.utilization_period, model_.samples.utilization_depth),
      power_samples_(timeline_, model_, model_.samples.power_period, model_.samples.power_depth,
                     model_.samples.power_period_busy) {
  for (std::size_t i = 0; i < scenario.mig.instances.size(); ++i) {
    if (scenario.mig.instances[i].gpu == index)
      instance_profiling_.emplace(i, std::make_unique<ProfileIntegrator>(scenario, timeline_, index, i));
  }
}

ProfileIntegrator* SimGpu::instance_profiling(std::size_t instance) {
  auto it = instance_profiling_.find(instance);
  return it == instance_profiling_.end() ? nullptr : it->second.get();
}

InstantValues SimGpu::values_at(Micros t) {
  return instant_values_for(model_, counters_.segment(std::max<Micros>(t, 0)));
}

// Rounded to the nearest millijoule rather than truncated: the exact energy is often a whole
// number of joules, and truncating x.9999999 would lose a millijoule to floating point.
unsigned long long SimGpu::energy_millijoules(Micros t) {
  return static_cast<unsigned long long>(
      std::llround(counters_.at(std::max<Micros>(t, 0)).energy_since_reload_joules * 1000.0));
}

double SimGpu::energy_joules(Micros t) { return counters_.at(std::max<Micros>(t, 0)).energy_since_reload_joules; }

double SimGpu::busy_seconds(Micros t) { return counters_.at(std::max<Micros>(t, 0)).busy_seconds; }

unsigned long long SimGpu::pcie_tx_bytes(Micros t) { return whole(busy_seconds(t) * model_.pcie_tx_bytes_per_second); }

unsigned long long SimGpu::pcie_rx_bytes(Micros t) { return whole(busy_seconds(t) * model_.pcie_rx_bytes_per_second); }

const std::vector<JobShare>& SimGpu::processes(Micros t) { return counters_.segment(std::max<Micros>(t, 0)).jobs; }

std::vector<ProcessRecord> SimGpu::process_records(Micros now, Micros since, bool active_only) const {
  const PeriodHistory& u = utilization_samples_;
  if (active_only) return active_process_records(timeline_, now, since, u.oldest_instant(now), u.grid());
  return gpumeter::sim::process_records(timeline_, now, since, u.oldest_instant(now), u.grid());
}

namespace {

// The average utilization (ratio) over (t - window, t], clipped at time 0; empty: at t.
double average_util(const GpuTimeline& timeline, Micros t, Micros window) {
  t = std::max<Micros>(t, 0);
  const Micros from = std::max<Micros>(0, t - window);
  if (from >= t) return timeline.segment_at(t).util_percent / 100.0;
  double busy = 0;
  timeline.for_each_segment(
      from, t, [&](const Segment& s) { busy += s.util_percent / 100.0 * static_cast<double>(s.end - s.start); });
  return busy / static_cast<double>(t - from);
}

}  // namespace

unsigned SimGpu::average_power_mw(Micros t, Micros window) {
  const double u = average_util(timeline_, t, window);
  return static_cast<unsigned>(std::llround(static_cast<double>(model_.idle_power_mw) +
                                            static_cast<double>(model_.max_power_mw - model_.idle_power_mw) * u));
}

double SimGpu::pcie_tx_rate(Micros t, Micros window) {
  return average_util(timeline_, t, window) * model_.pcie_tx_bytes_per_second;
}

double SimGpu::pcie_rx_rate(Micros t, Micros window) {
  return average_util(timeline_, t, window) * model_.pcie_rx_bytes_per_second;
}

}  // namespace gpumeter::sim
