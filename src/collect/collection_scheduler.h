#pragma once
// Schedules collection: one worker thread per GPU (a hung driver call stalls only that GPU),
// one thread per backend for device events, and a publisher that assembles an immutable
// Snapshot each interval and hands it to a sink. Nothing here runs on the scrape path.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "util/clock.h"
#include "collect/collection_plan.h"
#include "model/reading_observer.h"
#include "model/snapshot.h"
#include "util/log.h"

namespace gpumeter {

// Driver sample buffers hold about 100 samples: 20 s at the simulator's 200 ms period, as
// little as ~17 s on a real driver. Between full collections the worker reads the usage part
// (CollectScope::kUsage) at least this often, so no --collect.interval lets a buffer overflow
// and the ledger's totals do not depend on the interval.
inline constexpr std::chrono::milliseconds kUsageDrainInterval{5000};

struct CollectionSchedulerOptions {
  std::chrono::milliseconds interval{1000};
  BuildInfo build;
  ReadingObserver* observer = nullptr;  // must outlive the collector
  // Usage-only collections come every min(interval, usage_interval); none at all when the
  // interval is no longer than this.
  std::chrono::milliseconds usage_interval = kUsageDrainInterval;
  const Clock* clock = nullptr;  // the system clock when unset; must outlive the collector
  // Which collectors run, and how often the device collectors read (every one by default);
  // set_plan() replaces it while the collector runs.
  CollectionPlan plan;
};

using SnapshotSink = std::function<void(std::shared_ptr<const Snapshot>)>;

class CollectionScheduler {
 public:
  // Backends must outlive the collector.
  CollectionScheduler(std::vector<Backend*> backends, CollectionSchedulerOptions options, SnapshotSink sink,
                      Logger& log);
  ~CollectionScheduler();
  CollectionScheduler(const CollectionScheduler&) = delete;
  CollectionScheduler& operator=(const CollectionScheduler&) = delete;

  void start();
  // Stops and joins every thread, waiting at most `grace` for each. A worker stuck in a
  // driver call is detached instead, so shutdown never hangs on a dead GPU; the return value
  // counts those. When it is non-zero the caller must exit the process without destroying
  // the backends (the stuck call still runs inside the vendor library).
  size_t stop(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));

  // Assembles a snapshot from the latest results now (also used by the publisher thread).
  std::shared_ptr<const Snapshot> assemble() const;

  // Takes effect at each GPU's next collection (a config reload's collector settings).
  void set_plan(CollectionPlan plan);
  std::shared_ptr<const CollectionPlan> plan() const;

 private:
  struct Slot;
  // What a worker logs of its GPU's collections: transitions only.
  struct WorkerLog {
    std::string gpu;
    bool was_ok = true;
    std::string last_error;
    // After a full collection: null when it succeeded, else its error.
    void outcome(const std::string* error, Logger& log);
  };
  // A GPU's worker: full collections once a round, usage-only ones in between.
  void run_worker(Slot& slot, size_t index);
  // A usage-only collection, for the ledger alone.
  void drain_usage(Slot& slot, size_t index, uint64_t round);
  // A full collection of round `round`: the due collectors read, the result kept in the slot.
  void collect_full(Slot& slot, size_t index, uint64_t round, WorkerLog& worker_log);
  // Identifies the GPU if it has not been yet.
  void identify_if_needed(Slot& slot);
  // Each collector's last run and last read after a full collection (slot locked).
  void note_collector_runs(Slot& slot, const CollectionPlan& plan, const CollectorSet& groups,
                           const Result<DeviceReading>& result);
  // A successful reading made whole: collectors switched off cleared, those not due carried over
  // from the last reading (slot locked).
  void complete_reading(Slot& slot, const CollectionPlan& plan, const CollectorSet& groups, DeviceReading& r);
  // Hands a collection's outcome to the observer (identifying the GPU again first if due).
  void observe(Slot& slot, size_t index, const Result<DeviceReading>& result);
  // Identifies the GPU again after a failure (a driver upgrade changes what gpu_info says).
  void reidentify(Slot& slot);
  const Clock& clock() const { return *options_.clock; }
  void run_events(Backend& backend, size_t first_slot);
  void run_publisher();
  bool wait_until(std::chrono::steady_clock::time_point t);

  std::vector<Backend*> backends_;
  CollectionSchedulerOptions options_;
  SnapshotSink sink_;
  Logger& log_;
  std::vector<std::shared_ptr<Slot>> slots_;
  mutable std::mutex plan_mu_;
  std::shared_ptr<const CollectionPlan> plan_;
  // The device collectors due in a full collection at `now`, with the usage part when the
  // ledger or the per-process series are on.
  CollectorSet due_groups(const Slot& slot, const CollectionPlan& plan,
                          std::chrono::steady_clock::time_point now) const;

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  struct Thread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  void spawn(std::string name, std::function<void()> fn);
  std::vector<Thread> threads_;
  // Round bookkeeping lets the publisher run as soon as every live worker has finished.
  // Workers wake it only when its round is complete: once a round, not once per GPU.
  mutable std::mutex round_mu_;
  std::condition_variable round_cv_;
  std::atomic<uint64_t> awaited_round_{0};
  // Every worker not stuck in an older round has finished `round` (or the collector stops).
  bool round_complete(uint64_t round);
  // The event wait's last outcome: -1 not waited yet, 0 failed, 1 answered (an event or none).
  std::atomic<int> events_ok_{-1};
};

}  // namespace gpumeter
