#pragma once
// An immutable picture of the node at one moment. Collection workers produce it, the
// renderer and the landing page read it; scrapes never see anything else.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/collectors.h"
#include "model/owner.h"
#include "model/reading.h"

namespace gpumeter {

// A process on a GPU with its owner, for the bounded per-process series.
struct ProcessSnapshot {
  unsigned pid = 0;
  OwnerLabels owner;
  std::optional<double> memory_bytes;
  std::optional<double> utilization_ratio;  // SM share over the last collection
  bool running = true;                      // false while kept after exit
  bool series = true;                       // within processes.max_series: served as series
};

// The order in which processes keep their per-process series where a limit bounds them
// (processes.max_series, exposition.max_series): running before exited, then by memory, then by
// utilization, then by GPU (its slot) and pid.
inline bool process_series_before(std::size_t gpu_a, const ProcessSnapshot& a, std::size_t gpu_b,
                                  const ProcessSnapshot& b) {
  if (a.running != b.running) return a.running;
  const double am = a.memory_bytes.value_or(0), bm = b.memory_bytes.value_or(0);
  if (am != bm) return am > bm;
  const double au = a.utilization_ratio.value_or(0), bu = b.utilization_ratio.value_or(0);
  if (au != bu) return au > bu;
  return gpu_a != gpu_b ? gpu_a < gpu_b : a.pid < b.pid;
}

// The MIG device a ledger entry bills, as its series' labels; all empty for a whole GPU (and for
// the slices of a GPU in MIG mode that no instance holds).
struct MigUnitLabels {
  std::string mig_uuid;
  std::string gpu_instance;
  std::string compute_instance;
  std::string mig_profile;
  bool operator==(const MigUnitLabels&) const = default;
  auto operator<=>(const MigUnitLabels&) const = default;
};

// One owner's ledger counters on one GPU, or on one MIG device of it. Seconds are GPU-seconds:
// on a MIG device, each second counts its slices of the GPU's (3/7 for a 3g instance).
struct LedgerEntry {
  OwnerLabels owner;
  double allocated_seconds = 0;
  double busy_seconds = 0;
  double memory_byte_seconds = 0;
  double energy_joules = 0;
  double idle_allocated_seconds = 0;  // scheduler policy: allocated with none of its processes on the GPU
  double idle_energy_joules = 0;      // the part of energy_joules at the board's idle power
  MigUnitLabels mig;                  // the MIG device billed; empty for the GPU itself
};

struct GpuLedgerSnapshot {
  std::vector<LedgerEntry> owners;
  double covered_seconds = 0;
  double gap_seconds = 0;
  double foreign_seconds = 0;  // scheduler policy: a process outside every allocation on an allocated GPU
  bool scheduler = false;      // the allocation policy is scheduler
  // The GPU's model has an idle power (ledger.idle_power_watts), so its owners' energy is split
  // into idle and active: only then is the idle part served.
  bool idle_power = false;
};

struct GpuSnapshot {
  DeviceIdentity identity;                          // identity.index is the gpu label
  bool up = false;                                  // last collection succeeded and is not overdue
  std::string down_reason;                          // set when !up
  std::shared_ptr<const DeviceReading> reading;     // null when !up
  bool collect_success = false;                     // outcome of the last finished collection
  double collect_duration_seconds = 0;              // duration of the last finished collection
  double last_success_unix = 0;                     // when the reading was taken; 0 if never
  std::vector<CollectorRun> runs;                   // each enabled device collector's last run, in kCollectors order
  std::map<uint64_t, uint64_t> xid_counts;          // Xid code -> events since the agent started
  std::optional<uint64_t> last_xid;                 // the newest Xid's code, 0 before the first; unset: events off
  std::vector<ProcessSnapshot> processes;           // all of them; `series` marks the per-process limit
  std::shared_ptr<const GpuLedgerSnapshot> ledger;  // null when attribution is off
};

// The attribution pipeline's own health.
struct AttributionStatus {
  bool enabled = false;
  std::map<std::string, uint64_t> series_dropped;  // kind ("process", "owner") -> series removed by limits
  std::optional<bool> kubelet_up;                  // unset when the kubelet source is off
  double kubelet_last_success_unix = 0;
  bool checkpoint_enabled = false;
  bool checkpoint_success = false;
  double checkpoint_last_success_unix = 0;
  double checkpoint_duration_seconds = 0;
  uint64_t checkpoint_failures = 0;
  uint64_t state_dropped_values = 0;  // amounts of the state file read at start that could not be true
  uint64_t clock_steps = 0;           // steps of the wall clock seen by GPU readings (one per GPU)
  uint64_t owner_lookups = 0;
  uint64_t owner_lookup_errors = 0;
};

// A collector that is not run per GPU (the event wait).
struct CollectorStatus {
  std::string collector;  // e.g. "events"
  bool success = false;
  std::optional<double> duration_seconds;  // unset where a run has no duration (a blocking wait)
};

struct BuildInfo {
  std::string version;
  std::string revision;
};

struct Snapshot {
  double taken_unix = 0;  // wall time the snapshot was assembled
  BuildInfo build;
  std::vector<BackendStatus> backends;
  std::vector<GpuSnapshot> gpus;
  std::vector<CollectorStatus> collectors;          // non-device collectors
  CollectorSet enabled = CollectorSet::defaults();  // the collectors switched on
  AttributionStatus attribution;
};

}  // namespace gpumeter
