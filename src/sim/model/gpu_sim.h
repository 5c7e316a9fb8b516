#pragma once
// Everything NVML reports about one simulated GPU, as a function of scenario time. This is
// the model behind the C layer; it holds caches (the counter integrator and the sample
// buffer), so it is not thread-safe: the C layer serializes calls per GPU.

#include <cstdint>
#include <deque>
#include <vector>

#include "sim/model/counters.h"
#include "sim/model/periods.h"
#include "sim/model/readings.h"
#include "sim/model/scenario.h"
#include "sim/model/timeline.h"

namespace gpumeter::sim {

class SimGpu {
 public:
  SimGpu(const Scenario& scenario, unsigned index);
  SimGpu(const SimGpu&) = delete;
  SimGpu& operator=(const SimGpu&) = delete;

  unsigned index() const { return index_; }
  const GpuSpec& spec() const { return spec_; }
  const GpuModelSpec& model() const { return model_; }

  Reading reading(Micros t);
  unsigned long long energy_millijoules(Micros t);  // since time 0 or the last driver reload
  unsigned long long pcie_tx_bytes(Micros t);
  unsigned long long pcie_rx_bytes(Micros t);
  double busy_seconds(Micros t);

  // The jobs present at t, one entry per process on this GPU.
  const std::vector<JobShare>& processes(Micros t);

  const std::deque<Period>& periods(Micros t) { return periods_.complete_until(t); }

 private:
  unsigned index_;
  GpuSpec spec_;
  GpuModelSpec model_;
  GpuTimeline timeline_;
  CounterIntegrator counters_;
  PeriodHistory periods_;
};

}  // namespace gpumeter::sim
