#pragma once
// Everything NVML reports about one simulated GPU, as a function of scenario time. This is
// the model behind the C layer; it holds caches (the counter integrator and the sample
// buffer), so it is not thread-safe: the C layer serializes calls per GPU.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "sim/physics/counters.h"
#include "sim/physics/periods.h"
#include "sim/physics/process_utilization.h"
#include "sim/physics/profiling.h"
#include "sim/physics/instant_values.h"
#include "sim/scenario/scenario.h"
#include "sim/physics/timeline.h"

namespace gpumeter::sim {

class SimGpu {
 public:
  // `live`: processes of real programs on the simulated CUDA driver (live.h), or null.
  SimGpu(const Scenario& scenario, unsigned index, const LiveTable* live = nullptr);
  SimGpu(const SimGpu&) = delete;
  SimGpu& operator=(const SimGpu&) = delete;

  unsigned index() const { return index_; }
  const GpuSpec& spec() const { return spec_; }
  const GpuModelSpec& model() const { return model_; }

  InstantValues values_at(Micros t);
  unsigned long long energy_millijoules(Micros t);  // since time 0 or the last driver reload
  double energy_joules(Micros t);                   // the same, unrounded
  unsigned long long pcie_tx_bytes(Micros t);
  unsigned long long pcie_rx_bytes(Micros t);
  double busy_seconds(Micros t);

  // GPM integrals and NVLink counters (profiling.h).
  ProfileIntegrator& profiling() { return profiling_; }
  // The GPM integrals of one MIG instance of this GPU (index into Scenario::mig.instances), or
  // nullptr for an instance of another GPU.
  ProfileIntegrator* instance_profiling(std::size_t instance);

  // The jobs present at t, one entry per process on this GPU.
  const std::vector<JobShare>& processes(Micros t);

  // The sample buffers: utilization (GPU and memory) and power, each with its own period.
  PeriodHistory& utilization_samples() { return utilization_samples_; }
  PeriodHistory& power_samples() { return power_samples_; }

  // Per-process records at `now` since scenario time `since`, within the utilization buffer;
  // `active_only`: of the samples of periods each process was active in only
  // (active_process_records).
  std::vector<ProcessRecord> process_records(Micros now, Micros since, bool active_only) const;

  // Average power over (t - window, t] (clipped at time 0), in mW, rounded; the
  // instantaneous power when the window is empty.
  unsigned average_power_mw(Micros t, Micros window);

  // Average PCIe rates over (t - window, t] in bytes per second.
  double pcie_tx_rate(Micros t, Micros window);
  double pcie_rx_rate(Micros t, Micros window);

 private:
  unsigned index_;
  GpuSpec spec_;
  GpuModelSpec model_;
  GpuTimeline timeline_;
  CounterIntegrator counters_;
  ProfileIntegrator profiling_;
  std::map<std::size_t, std::unique_ptr<ProfileIntegrator>> instance_profiling_;  // this GPU's instances
  PeriodHistory utilization_samples_;
  PeriodHistory power_samples_;
};

}  // namespace gpumeter::sim
