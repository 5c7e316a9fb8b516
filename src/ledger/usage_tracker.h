#pragma once
// Turns each GPU's collections into owners, per-process series and ledger counters, and
// keeps the ledger on disk. It runs on the collection workers (one GPU each, so GPUs never
// wait for each other) and adds its results to every snapshot; the scrape path only reads
// those snapshots.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "attribution/drm_fdinfo.h"
#include "ledger/checkpointer.h"
#include "ledger/drm_accounting.h"
#include "ledger/fault_spans.h"
#include "ledger/gpu_ledgers.h"
#include "ledger/ledger.h"
#include "ledger/mig_ledgers.h"
#include "ledger/process_series.h"
#include "ledger/state_file.h"
#include "model/reading_observer.h"
#include "util/clock.h"
#include "util/log.h"

namespace gpumeter {

// Resolves a pid on a GPU to its owner. Implementations cache; they are called from several
// GPU workers at once.
class OwnerResolver {
 public:
  virtual ~OwnerResolver() = default;
  virtual OwnerLabels resolve(unsigned pid, const DeviceIdentity& gpu) = 0;
  // When a process resolved before started, on the system clock (µs since the Unix epoch), if
  // the host says: the ledger charges nobody for time before it. No I/O.
  virtual std::optional<std::int64_t> start_time_us(unsigned /*pid*/) const { return std::nullopt; }
  // Scheduler policy: the owners the scheduler's sources allocate `gpu` to now, and since when;
  // nullopt when no scheduler source is configured. Cheap: sources are read in the background,
  // or checked with one stat.
  virtual std::optional<AllocationState> allocation(const DeviceIdentity& /*gpu*/) { return std::nullopt; }
  // The pids still on some GPU; everything else may be forgotten.
  virtual void retain(const std::vector<unsigned>& live_pids) = 0;
  // Adds the resolver's own health (kubelet, lookups) to the snapshot.
  virtual void contribute(AttributionStatus& status) const = 0;
};

struct UsageTrackerOptions {
  // Owner labels kept on ledger series; the others are emptied (and so merged).
  std::set<std::string> labels = {"project", "user", "namespace", "pod", "container", "hpc_job"};
  std::chrono::milliseconds owner_retention{24 * 3600 * 1000};
  std::size_t max_process_series = 256;  // 0: no per-process series
  std::chrono::milliseconds process_retention{5 * 60 * 1000};
  std::map<std::string, double> idle_power_watts;  // by model name
  std::string state_file;                          // empty: no persistence
  std::chrono::milliseconds checkpoint_interval{5000};
  std::chrono::milliseconds max_gap{10000};
  // The allocation policy: scheduler (bill what the scheduler allocated) or process.
  bool scheduler = false;
  // The clocks: the wall clock (what the driver stamps samples with) and the monotonic one. Null:
  // the system clock; must outlive the tracker. The boot's id tells whether a monotonic reading in
  // the state file is comparable with now (unset: /proc/sys/kernel/random/boot_id).
  const Clock* clock = nullptr;
  std::function<std::string()> boot_id;
  // A checkpoint that keeps failing is logged once, then at most this often, with a count.
  std::chrono::milliseconds checkpoint_failure_log_interval{10 * 60 * 1000};
  // DRM clients (graphics, Vulkan, Mesa OpenCL) with exact engine time, matched to a GPU by its
  // PCI address; null: none. Each client's busy time is the increase of its engine counters
  // between two readings of its GPU; the GPU's other busy time is split by sampled shares.
  DrmClientSource* drm_clients = nullptr;
};

class UsageTracker final : public ReadingObserver {
 public:
  UsageTracker(UsageTrackerOptions options, OwnerResolver& resolver, Logger& log);
  ~UsageTracker() override;

  // Reads the state file. One that reads but cannot be used is set aside and reported, and
  // the ledger starts empty; one that cannot be read (or set aside) is an error: the agent
  // must not start and overwrite it. Until it is called and succeeds, nothing is written to
  // the state file: no checkpoint, at stop() either.
  Result<void> load_state();
  // Starts the checkpoint thread: a first checkpoint at once, another right after each GPU's
  // first reading (so that even a crash loop keeps each run's cursor and the time it read back
  // from the driver's buffers), then every interval.
  // stop() ends it and writes a last checkpoint.
  void start();
  void stop();
  Result<std::size_t> checkpoint();

  void on_reading(size_t slot, const DeviceIdentity& identity, const DeviceReading& reading) override;
  void on_failure(size_t slot, const DeviceIdentity& identity) override;
  void on_fault(size_t slot, const DeviceIdentity& identity) override;
  void contribute(Snapshot& snapshot) const override;

  OwnerLabels reduce(const OwnerLabels& owner) const;

 private:
  // One GPU slot: the GPU now in it, its ledgers, its per-process series and its DRM clients.
  struct Gpu {
    mutable std::mutex mu;
    std::string uuid;
    std::string model;
    GpuLedgers ledgers;  // its own, or in MIG mode its MIG devices' too
    // With a state file, the ledger values that scrapes see: those of the last checkpoint
    // written (or loaded). A restarted agent resumes from that file, so no value it ever
    // exported can be higher than what it resumes from, and Prometheus never sees a counter
    // go back (which it would read as a reset, billing the whole total again).
    std::shared_ptr<const GpuLedgerSnapshot> published;
    ProcessSeries processes;
    std::vector<unsigned> live_pids;  // on the GPU at its last reading, MIG devices' included
    GpuDrmClients drm;
    FaultSpans faults;  // when it was faulty
  };
  Gpu& gpu(size_t slot);
  // A reading of `g` succeeded at `now_us` with `pids` on it: fault spans end as they may.
  void note_answer(Gpu& g, const DeviceIdentity& id, std::int64_t now_us, const std::vector<unsigned>& pids);
  void note_clock_step(std::int64_t step_us, const std::string& uuid);
  // The ledger options of a GPU of `model`.
  GpuLedgerOptions ledger_options(const std::string& model) const;
  // Scheduler policy: the owners the scheduler allocates `unit` to, reduced, sorted and each
  // once; nullopt under the process policy.
  std::optional<AllocationState> allocation_of(const DeviceIdentity& unit);
  // In MIG mode, the round of the reading's MIG devices, their processes' owners resolved;
  // `mig_owners` gets each such process's full owner. nullopt for a whole GPU.
  std::optional<MigRound> resolve_mig_round(const DeviceIdentity& id, const DeviceReading& reading, std::int64_t now_us,
                                            std::map<unsigned, OwnerLabels>& mig_owners);
  // The ledger's processes of `listed`, owners reduced, with their exact busy time from `drm`;
  // `full_owners` gets each one's full owner. A MIG device's process keeps the owner it was
  // resolved to on its device.
  std::vector<LedgerProcess> resolve_processes(const DeviceIdentity& id, const DeviceReading& reading,
                                               const std::vector<GpuProcess>& listed, const DrmRound& drm,
                                               const std::map<unsigned, OwnerLabels>& mig_owners,
                                               std::vector<OwnerLabels>& full_owners);
  // A new GPU in the slot of `g` (first sight, or the board was replaced): its own ledgers,
  // resumed from the state file when it has them there. Called with g's lock held.
  void adopt(Gpu& g, const DeviceIdentity& id, const GpuLedgerOptions& options);
  // The GPUs' ledgers into the state document's "gpus", and what scrapes may see once it is
  // written.
  struct Saved {
    Gpu* gpu;
    std::string uuid;
    std::shared_ptr<const GpuLedgerSnapshot> ledger;
  };
  std::vector<Saved> save_gpus(nlohmann::json& gpus);

  UsageTrackerOptions options_;
  OwnerResolver& resolver_;
  Logger& log_;

  // Lock order: gpus_mu_ before a Gpu's mu; stats_mu_ alone or inside a Gpu's mu; the
  // checkpointer's locks inside any of them (checkpointer.h).
  mutable std::mutex gpus_mu_;  // guards the vector, not the entries
  std::vector<std::unique_ptr<Gpu>> gpus_;

  mutable std::mutex stats_mu_;
  mutable std::set<std::pair<size_t, unsigned>> excluded_;  // (slot, pid) cut by the per-process limit
  mutable std::map<std::string, uint64_t> dropped_;
  std::uint64_t clock_steps_ = 0;                    // steps seen by GPU readings, exported
  std::optional<std::int64_t> step_logged_mono_us_;  // when the last clock step was logged

  Checkpointer checkpointer_;  // after options_ and log_, which it refers to
};

}  // namespace gpumeter
