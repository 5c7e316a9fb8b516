#include "sim/model/gpu_sim.h"

#include <algorithm>
#include <cmath>

namespace gpumeter::sim {

namespace {

unsigned long long whole(double v) { return static_cast<unsigned long long>(std::floor(std::max(v, 0.0))); }

}  // namespace

SimGpu::SimGpu(const Scenario& scenario, unsigned index)
    : index_(index),
      spec_(scenario.gpus[index]),
      model_(scenario.model_of(index)),
      timeline_(scenario, index),
      counters_(timeline_, model_),
      periods_(timeline_, model_) {}

Reading SimGpu::reading(Micros t) { return reading_for(model_, counters_.segment(std::max<Micros>(t, 0))); }

// Rounded to the nearest millijoule rather than truncated: the exact energy is often a whole
// number of joules, and truncating x.9999999 would lose a millijoule to floating point.
unsigned long long SimGpu::energy_millijoules(Micros t) {
  return static_cast<unsigned long long>(
      std::llround(counters_.at(std::max<Micros>(t, 0)).energy_since_reload_joules * 1000.0));
}

double SimGpu::busy_seconds(Micros t) { return counters_.at(std::max<Micros>(t, 0)).busy_seconds; }

unsigned long long SimGpu::pcie_tx_bytes(Micros t) {
  return whole(busy_seconds(t) * model_.pcie_tx_bytes_per_second);
}

unsigned long long SimGpu::pcie_rx_bytes(Micros t) {
  return whole(busy_seconds(t) * model_.pcie_rx_bytes_per_second);
}

const std::vector<JobShare>& SimGpu::processes(Micros t) {
  return counters_.segment(std::max<Micros>(t, 0)).jobs;
}

}  // namespace gpumeter::sim
