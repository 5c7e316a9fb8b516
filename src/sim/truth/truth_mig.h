#pragma once
// The ground truth per MIG instance (`gpumeter sim truth` on a scenario with `mig:`): the unit
// the ledger bills on a GPU in MIG mode is the instance, which carries its share of the GPU
// (its compute slices of the GPU's G: 7 on A100 and H100, 4 on A30).
//
// Per GPU in MIG mode and segment of length d: each live instance i has compute slices s_i,
// weight w_i = s_i / G, the percents u_j of the jobs on it with sum S_i and activity
// U_i = min(100, S_i) / 100. The GPU's utilization is round(sum w_i min(100, S_i)) percent (see
// timeline.h) and its power P = idle + (max - idle) U. NVML measures no power per instance, so
// the GPU's energy is split as an estimate: idle power by slice share, the rest by activity:
//   instance: seconds += d, slice_seconds += s_i d, busy += U_i d, memory += sum mem_j d,
//             energy += (idle w_i + (P - idle) w_i U_i / sum_k w_k U_k) d  (no second term when
//             no instance is active), allocated += [n_i > 0] d, idle += [n_i = 0] d
//   owner on i (n_i owners present): allocated += d / n_i, busy += U_i u_j / S_i d (0 when S_i
//             = 0), memory += mem_j d, energy += (instance idle energy) / n_i + (instance
//             dynamic energy) u_j / S_i
//   GPU:      slice_seconds += G d, unallocated_slice_seconds += (G - sum s_i) d,
//             unallocated_energy += idle (G - sum s_i) / G d
// so that per GPU sum(instance slice_seconds) + unallocated = window x G and sum(instance
// energy) + unallocated energy = the GPU's energy; per instance sum(owner allocated) + idle =
// seconds. Owners: under the process policy each job (by name); under the scheduler policy as
// in truth_scheduler.h, allocations holding the instance (`mig:`) included.
//
// On GPUs with GPM (Hopper and newer) each instance also carries its GPM averages over its life
// in the window (profiling.h, integrating only its own jobs, not weighted by slices): what
// nvmlGpmMigSampleGet's samples at `start` and `end` give. No PCIe or NVLink per instance.

#include <cstddef>
#include <string>
#include <vector>

#include "sim/physics/profiling.h"
#include "sim/scenario/scenario.h"

namespace gpumeter::sim {

struct MigOwnerTruth {
  bool is_allocation = false;  // an allocation, else a job outside any allocation
  std::size_t index = 0;       // into Scenario::allocations or Scenario::jobs
  std::string name;
  double allocated_seconds = 0;
  double busy_seconds = 0;       // time busy: its jobs' utilization
  double sm_active_seconds = 0;  // SM activity (GPM SM_UTIL), what NVML measures on MIG
  double memory_byte_seconds = 0;
  double energy_joules = 0;
};

struct MigInstanceTruth {
  std::size_t instance = 0;  // into Scenario::mig.instances
  std::string name;
  std::string uuid;
  unsigned gpu = 0;
  std::string gpu_uuid;
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
  std::string profile;
  unsigned slices = 0;
  Micros start = 0;  // its existence, clipped to the window
  Micros end = 0;
  double seconds = 0;
  double slice_seconds = 0;
  double allocated_seconds = 0;
  double idle_seconds = 0;
  double busy_seconds = 0;       // time busy: min(1, the sum of its jobs' utilization)
  double sm_active_seconds = 0;  // SM activity (GPM SM_UTIL), what NVML measures on MIG
  double memory_byte_seconds = 0;
  double energy_joules = 0;
  double idle_energy_joules = 0;      // while no owner held it
  std::vector<MigOwnerTruth> owners;  // allocations in scenario order, then jobs
  bool gpm_supported = false;
  ProfileAverages profiling;  // over [start, end), when gpm_supported
};

struct MigGpuTruth {
  unsigned gpu = 0;
  std::string uuid;
  unsigned slices = 0;       // G, the GPU's compute slices
  double slice_seconds = 0;  // window x G
  double unallocated_slice_seconds = 0;
  double energy_joules = 0;
  double unallocated_energy_joules = 0;
};

struct MigTruth {
  std::vector<MigGpuTruth> gpus;            // GPUs in MIG mode, by index
  std::vector<MigInstanceTruth> instances;  // instances alive in the window, in plan order
};

// Requires 0 <= from < to. `scheduler`: the scheduler allocation policy's owners.
MigTruth compute_mig_truth(const Scenario& scenario, Micros from, Micros to, bool scheduler);

}  // namespace gpumeter::sim
