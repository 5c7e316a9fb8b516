#pragma once
// The ground truth under the `scheduler` allocation policy: a GPU's time goes to the owners
// the scheduler allocated it to (`allocations:`), whether or not a process runs, and to the
// owners of processes found on it.
//
// Owners: an allocation (named by its `name`) owns the processes of the jobs that name it
// (`allocation:`); a job outside any allocation is its own owner (named by its `name`). Per
// GPU and segment of length d, the owners present are the allocations holding the GPU plus
// the owners of the jobs present; with n of them:
//   owner: allocated += d / n, busy += the busy seconds of its jobs' processes (as in the
//          process policy: U u_j / S d), idle_allocated += d / n when none of its processes
//          is present on the GPU
//   GPU:   allocated += [n > 0] d, idle += [n = 0] d, idle_energy += [n = 0] P d,
//          foreign += d when an allocation holds the GPU and a job of no allocation runs on it
// Busy, energy and memory of a GPU are those of the process policy. With no allocations the
// figures are the process policy's, each job its own owner.

#include <cstddef>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"
#include "sim/truth/truth.h"

namespace gpumeter::sim {

struct OwnerTruth {
  bool is_allocation = false;  // an allocation, else a job outside any allocation
  std::size_t index = 0;       // into Scenario::allocations or Scenario::jobs
  std::string name;
  unsigned gpu = 0;
  std::string uuid;
  double allocated_seconds = 0;
  double busy_seconds = 0;
  double idle_allocated_seconds = 0;
};

struct SchedulerTruth {
  Micros from = 0;
  Micros to = 0;
  std::vector<GpuTruth> gpus;           // allocated, idle and idle energy under this policy
  std::vector<double> foreign_seconds;  // per GPU
  // (owner, GPU) pairs with allocated seconds in the window: allocations in scenario order,
  // then jobs in scenario order, each by GPU index.
  std::vector<OwnerTruth> owners;
};

// Requires 0 <= from < to.
SchedulerTruth compute_scheduler_truth(const Scenario& scenario, Micros from, Micros to);

}  // namespace gpumeter::sim
