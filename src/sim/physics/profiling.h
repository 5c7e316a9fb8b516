#pragma once
// Profiling (GPM) and NVLink counters of one GPU, as exact integrals over scenario time.
//
// Per segment of the GPU's timeline, with jobs j present at utilization u_j and S = sum u_j,
// job j is busy a fraction b_j = u_j / max(100, S) of the time (so sum b_j is the GPU's
// utilization U, as in truth.h). Each GPM activity is the busy time weighted by the job's
// profile fraction (JobProfile): SM-active seconds += b_j * sm_j * d, tensor += b_j * tensor_j
// * d, and so on; the graphics engine is active sum b_j * d (the GPU's busy seconds). PCIe bytes
// are the busy seconds times the model's PCIe rates (as the PCIe counters of gpu_sim.h), NVLink
// bytes b_j times the job's (or the model's) NVLink rate, spread evenly over the links that are
// up (a link in an `nvlink_down` window carries nothing).
//
// The integrator walks pieces: the timeline's segments, cut further at the GPU's NVLink fault
// edges. It keeps the totals at the start of the current piece, so a query only adds whole pieces
// crossed since the last one and a reading depends only on the time asked for. A query earlier
// than the current piece restarts from time 0 (the agent only moves forward).
//
// MIG: on a GPU in MIG mode the instances run side by side on their own SMs, so a job shares
// its instance's time only: with S_i the sum of the percents of instance i's jobs, b_j = u_j /
// max(100, S_i). The whole GPU weighs each instance by its compute slices of the GPU's (as the parent's
// utilization does, timeline.h). An integrator built for one instance (`instance`, an index into
// Scenario::mig.instances) integrates only that instance's jobs, unweighted: its activity is
// the instance's own, U_i = min(100, S_i) / 100 as truth_mig.h defines it, and its metrics are
// percentages of the instance's SMs and memory bandwidth. Its PCIe and NVLink bytes stay 0: the
// buses are the whole GPU's (docs/nvml-behaviour.md, "GPM").

#include <array>
#include <cstdint>
#include <vector>

#include "abi/nvml_api.h"
#include "sim/scenario/scenario.h"
#include "sim/physics/timeline.h"

namespace gpumeter::sim {

struct ProfileTotals {
  // Seconds of activity since time 0 (the video engines', encoder and decoder, are not GPM's).
  double graphics = 0, sm = 0, occupancy = 0, tensor = 0, dram = 0, fp64 = 0, fp32 = 0, fp16 = 0;
  double encoder = 0, decoder = 0;
  // Bytes since time 0.
  double pcie_tx = 0, pcie_rx = 0;
  std::array<double, NVML_NVLINK_MAX_LINKS> nvlink_tx{}, nvlink_rx{};

  double nvlink_tx_total(unsigned links) const;
  double nvlink_rx_total(unsigned links) const;
};

// GPM is "for Hopper or newer fully supported devices" ([H] nvmlGpmQueryDeviceSupport).
bool gpm_supported(const GpuModelSpec& model);

class ProfileIntegrator {
 public:
  // The timeline must outlive the integrator; the scenario is copied from. `instance`: the MIG
  // instance whose jobs alone are integrated, or kNoMigInstance for the whole GPU.
  ProfileIntegrator(const Scenario& scenario, const GpuTimeline& timeline, unsigned gpu,
                    std::size_t instance = kNoMigInstance);

  ProfileTotals at(Micros t);  // t >= 0
  // The rates at t: seconds of each activity per second (bytes per second for PCIe and NVLink).
  ProfileTotals rate_at(Micros t) const { return piece_at(t).rate; }

  // NVLink state and counters as NVML serves them (fields 138/139, 161-163, 165).
  bool link_up(unsigned link, Micros t) const;
  // KiB since time 0 or the last driver reload, rounded down.
  std::uint64_t nvlink_tx_kib(unsigned link, Micros t);
  std::uint64_t nvlink_rx_kib(unsigned link, Micros t);
  // Errors of one type on one link since time 0 or the last driver reload.
  std::uint64_t nvlink_errors(unsigned link, NvlinkErrorType type, Micros t) const;

 public:
  struct JobRates {
    JobProfile profile;
    double nvlink_tx = 0, nvlink_rx = 0;  // bytes per second at 100%
  };

 private:
  struct Piece {
    Micros start = 0, end = kForever;
    ProfileTotals rate;  // per second
  };

  Piece piece_at(Micros t) const;
  Micros last_reload(Micros t) const;  // the last driver reload at or before t, or 0
  const ProfileTotals& at_reload(Micros reload);

  const GpuTimeline& timeline_;
  std::size_t instance_ = kNoMigInstance;
  NvlinkSpec nvlink_;
  double pcie_tx_rate_ = 0, pcie_rx_rate_ = 0;
  std::vector<JobRates> jobs_;
  // Each MIG instance's compute slices over its GPU's (Scenario::mig.instances).
  std::vector<double> instance_shares_;
  std::vector<NvlinkFault> faults_;                              // this GPU's
  std::vector<Micros> edges_;                                    // sorted instants at which a link goes down or up
  std::vector<Micros> reloads_;                                  // sorted
  std::vector<std::pair<Micros, ProfileTotals>> reload_totals_;  // cached totals at reloads
  Piece current_;
  std::uint64_t version_ = 0;  // the timeline's version() current_ was read at
  ProfileTotals at_start_;
};

// Average GPM values and NVLink bytes of one GPU over [from, to), for `sim truth`.
struct ProfileAverages {
  double graphics = 0, sm = 0, occupancy = 0, tensor = 0, dram = 0, fp64 = 0, fp32 = 0, fp16 = 0;  // percent
  double pcie_tx = 0, pcie_rx = 0, nvlink_tx = 0, nvlink_rx = 0;                                   // MiB/s
};
ProfileAverages profile_averages(const ProfileTotals& a, const ProfileTotals& b, double seconds, unsigned links);

}  // namespace gpumeter::sim
