#pragma once
// The ledgers of a GPU in MIG mode. The unit that is allocated is the MIG device (a compute
// instance), so each has a ledger of its own that bills its slices of the GPU (LedgerTick::weight:
// 3/7 for a 3g instance), beside the GPU's own ledger, which bills the slices no instance holds
// to __idle__. Per GPU, the seconds of all of them add up to the GPU's seconds.
//
// NVML gives a MIG device no sample buffers and no power, so its ledger is polled at each
// round, and per interval of length d with the GPU's average power P (from its energy counter),
// configured idle power I, instance weights w_i (slices of the GPU's) and GPM SM activities U_i:
//   busy of instance i:  U_i · w_i · d GPU-seconds (0 where GPM gives no activity: A100)
//   power of instance i: min(P, I) · w_i + (P − min(P, I)) · w_i U_i / Σ w_k U_k
//   the free slices:     min(P, I) · w_free
// (the power above idle is split by slice share when no instance is active). NVML measures no
// per-instance power: this split is an estimate, documented as one in docs/ledger.md.
// Inside an instance, its owners share it like the processes of a whole GPU without per-process
// utilization: allocation by presence, busy time to a lone process, else unattributed.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ledger/ledger.h"
#include "model/snapshot.h"
#include "util/result.h"

namespace gpumeter {

// One MIG device as one round read it, its processes' owners resolved.
struct MigUnitTick {
  MigUnitLabels labels;            // labels.mig_uuid keys the unit
  double weight = 0;               // its GPU instance's slices of the GPU's
  std::optional<double> activity;  // GPM SM activity of its GPU instance, 0..1
  std::vector<LedgerProcess> processes;
  std::optional<AllocationState> allocation;  // scheduler policy
};

// The GPU's average power over an interval split between its MIG devices (as `units`) and the
// slices no instance holds, as the top of this file says. The parts add up to `power_w`.
struct MigPowerSplit {
  std::vector<double> unit_watts;
  double free_watts = 0;
};
MigPowerSplit split_mig_power(double power_w, double idle_w, const std::vector<MigUnitTick>& units, double free_weight);

// One round of a GPU in MIG mode, as the ledgers need it.
struct MigRound {
  std::int64_t wall_us = 0;
  std::int64_t clock_step_us = 0;
  std::optional<double> energy_joules;  // the GPU's energy counter
  std::optional<double> power_watts;    // polled, where the counter cannot say
  std::vector<MigUnitTick> units;
  // The scheduler policy: the GPU's own ledger is allocated to nobody in MIG mode.
  bool scheduler = false;
  std::vector<FaultSpan> faults;  // when the GPU was faulty: every instance was (LedgerTick::faults)
};

class MigLedgers {
 public:
  // Advances the GPU's own ledger `gpu` (the free slices) and every unit of the round; a unit
  // seen for the first time bills from the previous round on (it was created inside it). The
  // first round of MIG mode only starts the clocks. `options.idle_power_watts` is the whole
  // GPU's idle power.
  // Returns what the GPU's own ledger found out about its clock.
  AdvanceResult advance(GpuLedger& gpu, const MigRound& round, const GpuLedgerOptions& options);
  // A collection failed: every unit restarts its integration at its next round.
  void interrupt();
  // The GPU left MIG mode: the units stay (their counters are served until retention drops
  // their owners), the clocks stop.
  void leave();
  // The wall clock stepped by `step_us` while the agent was down (GpuLedger::rebase).
  void rebase(std::int64_t step_us);
  // Drops owners not charged since `before_wall_us`, and units left with none. Returns how many
  // owners.
  std::size_t prune(std::int64_t before_wall_us);
  bool empty() const { return units_.empty(); }

  // Adds each unit's owners (with its labels) and integrals to `out`.
  void append(GpuLedgerSnapshot& out) const;
  nlohmann::json to_json() const;
  // As GpuLedger::from_json, each MIG device's dropped amounts prefixed with its uuid.
  static Result<MigLedgers> from_json(const nlohmann::json& j, const GpuLedgerOptions& options,
                                      std::vector<std::string>* dropped = nullptr);

 private:
  struct Unit {
    MigUnitLabels labels;
    double weight = 0;
    GpuLedger ledger;
  };
  // The GPU's average power since the previous round, where known.
  std::optional<double> average_power(const MigRound& round) const;
  // Advances the GPU's own ledger over the slices no instance holds (`free` of the GPU), at
  // `watts` of the GPU's power.
  static AdvanceResult advance_free(GpuLedger& gpu, const MigRound& round, const GpuLedgerOptions& options, double free,
                                    std::optional<double> watts);
  // Advances one MIG device's ledger, made on its first round, at `watts` of the GPU's power.
  void advance_unit(const MigUnitTick& u, const MigRound& round, const GpuLedgerOptions& options,
                    std::optional<double> watts);

  std::map<std::string, Unit> units_;  // by MIG uuid
  std::optional<std::int64_t> last_wall_us_;
  std::optional<double> last_energy_;
};

}  // namespace gpumeter
