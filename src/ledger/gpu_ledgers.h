#pragma once
// The ledgers of one GPU, and the routing of its readings to them: a whole GPU's readings go to
// its own ledger; in MIG mode each MIG device has a ledger (ledger/mig_ledgers.h) and the GPU's
// own bills the slices no instance holds.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ledger/ledger.h"
#include "ledger/mig_ledgers.h"
#include "model/reading.h"
#include "model/snapshot.h"
#include "util/result.h"

namespace gpumeter {

class GpuLedgers {
 public:
  // Starts afresh: a new GPU in the slot.
  void reset(const GpuLedgerOptions& options);
  // Resumes from the GPU's entry of the state file; an error (the entry cannot be used) leaves
  // the ledgers as they were.
  Result<void> restore(const nlohmann::json& entry, const GpuLedgerOptions& options);
  // Advances the GPU's own ledger by `tick`, or in MIG mode (`mig` set) every ledger of the GPU
  // by the round, with `options` for a whole GPU.
  AdvanceResult advance(const LedgerTick& tick, const std::optional<MigRound>& mig, const GpuLedgerOptions& options);
  // A collection failed.
  void interrupt();
  // Drops owners not charged since `before_wall_us`. Returns how many.
  std::size_t prune(std::int64_t before_wall_us);
  // Every ledger's owners and integrals, as scrapes see them.
  std::shared_ptr<const GpuLedgerSnapshot> snapshot(bool scheduler) const;
  // Adds the ledgers to the GPU's entry of the state document ("ledger", and "mig" where any).
  void save(nlohmann::json& entry) const;

 private:
  GpuLedger ledger_;  // in MIG mode, the slices no instance holds
  MigLedgers mig_;    // one ledger per MIG device, kept after the GPU leaves MIG mode
};

// The ledger tick of a whole GPU's reading at `wall_us`, with its processes' owners resolved.
LedgerTick ledger_tick(const DeviceReading& reading, std::int64_t wall_us, std::vector<LedgerProcess> processes,
                       std::optional<AllocationState> allocation);

// The round of a GPU in MIG mode at `wall_us`, without its units (MIG devices).
MigRound mig_round(const DeviceReading& reading, std::int64_t wall_us, bool scheduler);
// The identity of the MIG device `mig_uuid` on GPU `gpu`.
DeviceIdentity mig_unit_identity(const DeviceIdentity& gpu, const std::string& mig_uuid);
// The tick of one MIG device of a reading, without its processes and allocation: its labels,
// its slices of the GPU's `gpu_slices`, its SM activity.
MigUnitTick mig_unit_tick(const MigInstanceReading& m, double gpu_slices);

}  // namespace gpumeter
