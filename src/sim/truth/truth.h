#pragma once
// The scenario's exact ground truth over a window of scenario time: what an ideal agent's
// ledger would hold. Computed by walking the piecewise-constant timeline, so every figure is
// an exact sum over segments (up to floating-point rounding), with no sampling.
//
// Per GPU and segment of length d with n jobs present, utilization U, job shares u_j,
// S = sum u_j and power P = idle + (max - idle) * U:
//   GPU:  busy += U d, energy += P d, memory += mem d, allocated += [n > 0] d,
//         idle += [n = 0] d, idle_energy += [n = 0] P d
//   job:  allocated += d / n, busy += U u_j / S d (0 when S = 0), memory += mem_j d,
//         energy += (idle / n + (P - idle) u_j / S) d, of which idle_power_energy += idle / n d
// so that, per GPU, sum(job allocated) + idle = window, sum(job busy) = busy and
// sum(job energy) + idle_energy = energy.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/physics/profiling.h"
#include "sim/scenario/scenario.h"

namespace gpumeter::sim {

struct GpuTruth {
  unsigned gpu = 0;
  std::string uuid;
  double busy_seconds = 0;
  double energy_joules = 0;
  double idle_energy_joules = 0;
  double memory_byte_seconds = 0;
  double allocated_seconds = 0;
  double idle_seconds = 0;
  // GPM averages over the window (profiling.h), on GPUs that support GPM.
  bool gpm_supported = false;
  ProfileAverages profiling;
  // NVLink bytes over the window per link (empty without NVLink).
  std::vector<double> nvlink_tx_bytes, nvlink_rx_bytes;
};

struct JobTruth {
  std::size_t job = 0;  // index into Scenario::jobs
  std::string name;
  unsigned gpu = 0;
  std::string uuid;
  unsigned pid = 0;
  unsigned uid = 0;
  std::string cgroup;
  KubernetesRef kubernetes;  // empty when the job is not a pod
  std::vector<std::pair<std::string, std::string>> env;
  double allocated_seconds = 0;
  double busy_seconds = 0;
  double memory_byte_seconds = 0;
  double energy_joules = 0;
  // The part of energy_joules at the model's idle power (the ledger's idle energy, when
  // ledger.idle_power_watts is the model's idle power); the rest is the job's active energy.
  double idle_power_energy_joules = 0;
};

struct Truth {
  Micros from = 0;
  Micros to = 0;
  std::vector<GpuTruth> gpus;
  std::vector<JobTruth> jobs;  // (job, GPU) pairs present in the window, by job then GPU order
};

// Requires 0 <= from < to.
Truth compute_truth(const Scenario& scenario, Micros from, Micros to);

}  // namespace gpumeter::sim
