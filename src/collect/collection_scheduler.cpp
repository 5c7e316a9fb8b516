#include "collect/collection_scheduler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <cstdio>
#include <map>

#include "util/thread_name.h"

namespace gpumeter {

namespace {
double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }
double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

struct CollectionScheduler::Slot {
  Backend* backend = nullptr;
  unsigned device = 0;  // the backend's own index
  // The agent's GPU index (the `gpu` label): slots are numbered across the backends in their
  // order (NVML first), so every GPU of a mixed node has one index of its own.
  unsigned gpu = 0;

  mutable std::mutex mu;  // guards everything below
  DeviceIdentity identity;
  bool identified = false;
  bool attempted = false;  // at least one collection finished
  std::string error;
  std::shared_ptr<const DeviceReading> reading;  // set exactly when the last collection succeeded
  std::chrono::steady_clock::time_point last_end{};
  double duration = 0;
  double last_success_unix = 0;
  uint64_t completed_round = 0;
  bool busy = false;
  uint64_t busy_round = 0;
  bool reidentify = false;  // a collection failed since the GPU was last identified
  std::map<uint64_t, uint64_t> xids;
  uint64_t last_xid = 0;  // the newest Xid's code; 0 before the first
  // Each device collector's last successful read (the collector's clock), and its last run.
  std::array<std::optional<std::chrono::steady_clock::time_point>, kCollectorCount> last_read;
  std::array<std::optional<CollectorRun>, kCollectorCount> runs;
};

CollectionScheduler::CollectionScheduler(std::vector<Backend*> backends, CollectionSchedulerOptions options,
                                         SnapshotSink sink, Logger& log)
    : backends_(std::move(backends)), options_(std::move(options)), sink_(std::move(sink)), log_(log) {
  if (options_.clock == nullptr) options_.clock = &system_clock();
  plan_ = std::make_shared<const CollectionPlan>(options_.plan);
  for (Backend* b : backends_) {
    for (unsigned i = 0; i < b->device_count(); ++i) {
      auto s = std::make_shared<Slot>();
      s->backend = b;
      s->device = i;
      s->gpu = static_cast<unsigned>(slots_.size());
      s->identity.vendor = b->status().vendor;
      slots_.push_back(std::move(s));
    }
  }
}

CollectionScheduler::~CollectionScheduler() { stop(); }

void CollectionScheduler::set_plan(CollectionPlan plan) {
  auto next = std::make_shared<const CollectionPlan>(plan);
  std::lock_guard lock(plan_mu_);
  plan_ = std::move(next);
}

std::shared_ptr<const CollectionPlan> CollectionScheduler::plan() const {
  std::lock_guard lock(plan_mu_);
  return plan_;
}

CollectorSet CollectionScheduler::due_groups(const Slot& slot, const CollectionPlan& plan,
                                             std::chrono::steady_clock::time_point now) const {
  CollectorSet due;
  for (const auto& c : kCollectors) {
    if (!plan.has(c.id)) continue;
    const auto i = static_cast<size_t>(c.id);
    // A collector with an interval is read again at the first collection at least that long
    // after its last read; one never read (or failed) at once.
    due.set(c.id, !c.per_device || !slot.last_read[i] || now - *slot.last_read[i] >= plan.interval[i]);
  }
  return due;
}

void CollectionScheduler::spawn(std::string name, std::function<void()> fn) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread t([name = std::move(name), fn = std::move(fn), done] {
    name_this_thread(name);
    fn();
    done->store(true);
  });
  threads_.push_back({std::move(t), std::move(done)});
}

void CollectionScheduler::start() {
  for (size_t i = 0; i < slots_.size(); ++i) {
    spawn("gm-gpu-" + std::to_string(i), [this, slot = slots_[i], i] { run_worker(*slot, i); });
  }
  size_t first = 0;
  for (Backend* b : backends_) {
    if (b->supports_events()) spawn("gm-events", [this, b, first] { run_events(*b, first); });
    first += b->device_count();
  }
  spawn("gm-publisher", [this] { run_publisher(); });
}

size_t CollectionScheduler::stop(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(stop_mu_);
    if (stopping_ && threads_.empty()) return 0;
    stopping_ = true;
  }
  stop_cv_.notify_all();
  { std::lock_guard wake(round_mu_); }
  round_cv_.notify_all();
  size_t abandoned = 0;
  auto deadline = std::chrono::steady_clock::now() + grace;
  for (auto& t : threads_) {
    while (!t.done->load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (t.done->load()) {
      t.thread.join();
    } else {
      t.thread.detach();
      ++abandoned;
    }
  }
  threads_.clear();
  return abandoned;
}

bool CollectionScheduler::wait_until(std::chrono::steady_clock::time_point t) {
  std::unique_lock lock(stop_mu_);
  return !clock().wait_until(stop_cv_, lock, t, [this] { return stopping_; });
}

void CollectionScheduler::reidentify(Slot& slot) {
  auto id = slot.backend->identify(slot.device);
  if (!id) return;  // tried again after the next success
  std::lock_guard lock(slot.mu);
  if (id->uuid != slot.identity.uuid || id->driver_version != slot.identity.driver_version) {
    log_.info("GPU identified again",
              {{"gpu", std::to_string(slot.gpu)}, {"uuid", id->uuid}, {"driver_version", id->driver_version}});
  }
  slot.identity = std::move(id).value();
  slot.identified = true;
  slot.reidentify = false;
}

void CollectionScheduler::observe(Slot& slot, size_t index, const Result<DeviceReading>& result) {
  bool reidentify;
  bool identified;
  std::string known_driver;
  {
    std::lock_guard lock(slot.mu);
    if (!result.ok()) slot.reidentify = true;
    reidentify = result.ok() && slot.reidentify;
    identified = slot.identified;
    known_driver = slot.identity.driver_version;
  }
  // On the first success after a failure, or when the backend now reports another driver: a
  // driver upgrade (the backend initialises the library again by itself, sometimes before any
  // collection fails) or a replaced board changes the identity.
  if (result.ok() && !reidentify && identified) {
    const std::string driver = slot.backend->status().driver_version;
    reidentify = !driver.empty() && driver != known_driver;
  }
  if (reidentify) this->reidentify(slot);
  if (options_.observer == nullptr) return;
  const auto p = plan();
  const bool ledger = p->has(CollectorId::kLedger);
  const bool processes = p->has(CollectorId::kProcesses);
  if (!ledger && !processes) return;
  DeviceIdentity identity;
  {
    std::lock_guard lock(slot.mu);
    identity = slot.identity;
  }
  identity.index = slot.gpu;
  const auto begin = std::chrono::steady_clock::now();
  if (result.ok()) {
    options_.observer->on_reading(index, identity, *result);
  } else {
    options_.observer->on_failure(index, identity);
  }
  const double observed = seconds(std::chrono::steady_clock::now() - begin);
  // The processes collector's run is the backend's read of them; the ledger's, the observer's
  // work on the reading (owners and the ledger's advance). Both are reported from this pass,
  // whether it was a full collection or a usage-only one.
  std::lock_guard lock(slot.mu);
  auto& process_run = slot.runs[static_cast<size_t>(CollectorId::kProcesses)];
  if (!processes) {
    process_run.reset();
  } else if (!result.ok()) {
    process_run = CollectorRun{CollectorId::kProcesses, false, 0.0};
  } else {
    for (const CollectorRun& run : result->runs) {
      if (run.collector == CollectorId::kProcesses) process_run = run;
    }
  }
  auto& ledger_run = slot.runs[static_cast<size_t>(CollectorId::kLedger)];
  if (ledger) {
    ledger_run = CollectorRun{CollectorId::kLedger, result.ok(), observed};
  } else {
    ledger_run.reset();
  }
}

void CollectionScheduler::drain_usage(Slot& slot, size_t index, uint64_t round) {
  {
    // Counted in the last full collection's round: if it hangs, the publisher sees this GPU
    // stuck and does not hold the other GPUs' snapshot back for it.
    std::lock_guard lock(slot.mu);
    slot.busy = true;
    slot.busy_round = round - 1;
  }
  // Only the ledger sees it: the snapshot keeps the full collection's reading, and whether
  // the GPU is up is for the next full collection to say.
  if (const auto p = plan(); p->has(CollectorId::kLedger)) {
    observe(slot, index, slot.backend->collect(slot.device, CollectScope::kUsage, p->enabled));
  }
  std::lock_guard lock(slot.mu);
  slot.busy = false;
}

void CollectionScheduler::identify_if_needed(Slot& slot) {
  {
    std::lock_guard lock(slot.mu);
    if (slot.identified) return;
  }
  auto id = slot.backend->identify(slot.device);
  if (id) {
    std::lock_guard lock(slot.mu);
    slot.identity = std::move(id).value();
    slot.identified = true;
    slot.reidentify = false;
  }
}

void CollectionScheduler::note_collector_runs(Slot& slot, const CollectionPlan& plan, const CollectorSet& groups,
                                              const Result<DeviceReading>& result) {
  for (const auto& c : kCollectors) {
    const auto i = static_cast<size_t>(c.id);
    if (!plan.has(c.id) || !c.per_device) {
      if (!plan.has(c.id)) slot.runs[i].reset();  // else set by observe()
      slot.last_read[i].reset();
    } else if (groups.has(c.id) && !result.ok()) {
      slot.runs[i] = CollectorRun{c.id, false, slot.duration};
      slot.last_read[i].reset();
    }
  }
  if (!result.ok()) return;
  for (const CollectorRun& run : result->runs) {
    const auto i = static_cast<size_t>(run.collector);
    if (!groups.has(run.collector) || !collector_info(run.collector).per_device) continue;
    slot.runs[i] = run;
    if (run.success) {
      slot.last_read[i] = slot.last_end;
    } else {
      slot.last_read[i].reset();
    }
  }
}

void CollectionScheduler::complete_reading(Slot& slot, const CollectionPlan& plan, const CollectorSet& groups,
                                           DeviceReading& r) {
  for (const auto& c : kCollectors) {
    if (!c.per_device) continue;
    const auto i = static_cast<size_t>(c.id);
    if (!plan.has(c.id)) {
      clear_collector(c.id, r);
    } else if (!groups.has(c.id)) {
      if (slot.reading) carry_forward(c.id, *slot.reading, r);
    } else if (std::none_of(r.runs.begin(), r.runs.end(),
                            [&](const CollectorRun& run) { return run.collector == c.id; })) {
      // A backend that does not time its collectors (ROCm SMI): read, with no run to report.
      slot.runs[i].reset();
      slot.last_read[i] = slot.last_end;
    }
  }
  r.runs.clear();  // kept in the slot: the snapshot carries every collector's last run
}

void CollectionScheduler::collect_full(Slot& slot, size_t index, uint64_t round, WorkerLog& worker_log) {
  {
    std::lock_guard lock(slot.mu);
    slot.busy = true;
    slot.busy_round = round;
  }
  identify_if_needed(slot);
  const auto current_plan = plan();
  CollectorSet groups;
  {
    std::lock_guard lock(slot.mu);
    groups = due_groups(slot, *current_plan, clock().now());
  }
  auto begin = std::chrono::steady_clock::now();
  auto result = slot.backend->collect(slot.device, CollectScope::kFull, groups);
  auto end = std::chrono::steady_clock::now();
  observe(slot, index, result);
  const std::optional<std::string> failure =
      result.ok() ? std::nullopt : std::optional<std::string>(result.error().message);
  {
    std::lock_guard lock(slot.mu);
    slot.busy = false;
    slot.attempted = true;
    slot.last_end = clock().now();
    slot.duration = seconds(end - begin);
    slot.completed_round = round;
    note_collector_runs(slot, *current_plan, groups, result);
    if (result.ok()) {
      complete_reading(slot, *current_plan, groups, *result);
      slot.reading = std::make_shared<const DeviceReading>(std::move(result).value());
      slot.last_success_unix = unix_now();
      slot.error.clear();
    } else {
      slot.reading.reset();
      slot.error = result.error().message;
    }
  }
  if (round_complete(awaited_round_.load())) {
    {
      std::lock_guard wake(round_mu_);  // pairs with the publisher's predicate check
    }
    round_cv_.notify_all();
  }
  worker_log.outcome(failure ? &*failure : nullptr, log_);
}

void CollectionScheduler::WorkerLog::outcome(const std::string* error, Logger& log) {
  // Transitions only: a GPU that stays broken must not flood the log.
  if (error == nullptr && !was_ok) {
    log.info("GPU collection recovered", {{"gpu", gpu}});
  } else if (error != nullptr && (was_ok || *error != last_error)) {
    log.warn("GPU collection failed", {{"gpu", gpu}, {"err", *error}});
    last_error = *error;
  }
  was_ok = error == nullptr;
}

void CollectionScheduler::run_worker(Slot& slot, size_t index) {
  const auto interval = options_.interval;
  const auto drain = std::min(interval, options_.usage_interval);
  const auto t0 = clock().now();
  WorkerLog worker_log{std::to_string(slot.gpu)};
  uint64_t round = 0;
  auto next_usage = t0 + interval;  // none before the first full collection
  for (;;) {
    const auto full_at = t0 + round * interval;
    if (next_usage < full_at) {
      if (!wait_until(next_usage)) return;
      drain_usage(slot, index, round);
      next_usage += drain;
      // After a stall, drain once now rather than replay every missed drain.
      while (next_usage <= clock().now()) next_usage += drain;
      continue;
    }
    if (!wait_until(full_at)) return;
    collect_full(slot, index, round, worker_log);
    // Rounds missed while a call hung are skipped, not replayed.
    const auto now = clock().now();
    uint64_t due = static_cast<uint64_t>((now - t0) / interval) + 1;
    round = std::max(round + 1, due);
    next_usage = full_at + drain;
    while (next_usage <= now) next_usage += drain;
  }
}

void CollectionScheduler::run_events(Backend& backend, size_t first_slot) {
  std::string last_error;
  while (true) {
    {
      std::lock_guard lock(stop_mu_);
      if (stopping_) return;
    }
    if (!plan()->has(CollectorId::kEvents)) {
      if (!wait_until(clock().now() + options_.interval)) return;
      continue;
    }
    // An event ends the wait at once; the timeout only bounds how long a stop waits for this
    // thread (within stop()'s grace), so it is long: each wait costs two context switches.
    auto ev = backend.wait_event(std::chrono::milliseconds(1000));
    events_ok_.store(ev.ok() ? 1 : 0);
    if (!ev) {
      if (!backend.supports_events()) return;
      if (ev.error().message != last_error) {
        log_.warn("device event wait failed", {{"backend", backend.status().backend}, {"err", ev.error().message}});
        last_error = ev.error().message;
      }
      if (!wait_until(clock().now() + options_.interval)) return;
      continue;
    }
    last_error.clear();
    if (!ev->has_value()) continue;
    const DeviceEvent& e = **ev;
    if (first_slot + e.device >= slots_.size()) continue;
    Slot& slot = *slots_[first_slot + e.device];
    DeviceIdentity identity;
    {
      std::lock_guard lock(slot.mu);
      ++slot.xids[e.code];
      slot.last_xid = e.code;
      identity = slot.identity;
    }
    identity.index = slot.gpu;
    if (e.kills_work && options_.observer != nullptr) options_.observer->on_fault(first_slot + e.device, identity);
    LogFields fields{{"gpu", std::to_string(slot.gpu)}};
    if (e.gpu_instance) fields.emplace_back("gpu_instance", std::to_string(*e.gpu_instance));
    fields.emplace_back("xid", std::to_string(e.code));
    log_.warn("Xid error", fields);
  }
}

std::shared_ptr<const Snapshot> CollectionScheduler::assemble() const {
  auto snap = std::make_shared<Snapshot>();
  snap->taken_unix = unix_now();
  snap->build = options_.build;
  for (Backend* b : backends_) snap->backends.push_back(b->status());
  const auto now = clock().now();
  const auto overdue_after = 2 * options_.interval;
  const auto current_plan = plan();
  snap->enabled = current_plan->enabled;
  for (const auto& sp : slots_) {
    const Slot& s = *sp;
    GpuSnapshot g;
    std::lock_guard lock(s.mu);
    g.identity = s.identity;
    g.identity.index = s.gpu;
    g.collect_success = s.reading != nullptr;
    g.collect_duration_seconds = s.duration;
    g.last_success_unix = s.last_success_unix;
    if (current_plan->has(CollectorId::kEvents)) {
      g.xid_counts = s.xids;
      g.last_xid = s.last_xid;
    }
    for (const auto& run : s.runs) {
      if (run) g.runs.push_back(*run);
    }
    if (!s.attempted) {
      g.down_reason = s.busy ? "first collection has not finished" : "not collected yet";
    } else if (!s.reading) {
      g.down_reason = s.error;
    } else if (now - s.last_end > overdue_after) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "collection overdue: last finished %.1f s ago (a driver call may be hung)",
                    seconds(now - s.last_end));
      g.down_reason = buf;
    } else {
      g.up = true;
      g.reading = s.reading;
    }
    snap->gpus.push_back(std::move(g));
  }
  // The event wait blocks until an event comes: it has an outcome, not a duration.
  if (const int events = events_ok_.load(); events >= 0 && current_plan->has(CollectorId::kEvents)) {
    snap->collectors.push_back({std::string(collector_name(CollectorId::kEvents)), events == 1, std::nullopt});
  }
  const bool ledger = current_plan->has(CollectorId::kLedger);
  const bool processes = current_plan->has(CollectorId::kProcesses);
  if (options_.observer != nullptr && (ledger || processes)) {
    options_.observer->contribute(*snap);
    for (auto& g : snap->gpus) {
      if (!ledger) g.ledger.reset();
      if (!processes) g.processes.clear();
    }
  }
  return snap;
}

bool CollectionScheduler::round_complete(uint64_t round) {
  {
    std::lock_guard stop_lock(stop_mu_);
    if (stopping_) return true;
  }
  for (const auto& sp : slots_) {
    std::lock_guard slot_lock(sp->mu);
    const bool done = sp->attempted && sp->completed_round >= round;
    const bool stuck = sp->busy && sp->busy_round < round;
    if (!done && !stuck) return false;
  }
  return true;
}

void CollectionScheduler::run_publisher() {
  const auto interval = options_.interval;
  const auto t0 = clock().now();
  for (uint64_t round = 0;; ++round) {
    const auto tick = t0 + round * interval;
    if (!wait_until(tick)) return;
    // Publish as soon as every worker that is not stuck in an older round has finished this
    // one, and at the latest half an interval after the tick.
    {
      awaited_round_.store(round);
      std::unique_lock lock(round_mu_);
      clock().wait_until(round_cv_, lock, tick + interval / 2, [&] { return round_complete(round); });
    }
    {
      std::lock_guard lock(stop_mu_);
      if (stopping_) return;
    }
    sink_(assemble());
    // After a long stall, resume at the next tick rather than publishing a burst.
    auto elapsed = clock().now() - t0;
    round = std::max<uint64_t>(round, static_cast<uint64_t>(elapsed / interval));
  }
}

}  // namespace gpumeter
