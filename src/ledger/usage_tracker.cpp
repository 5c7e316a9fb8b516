#include "ledger/usage_tracker.h"

#include <algorithm>

#include "ledger/tracker_clock.h"

namespace gpumeter {

namespace {

std::int64_t to_us(std::chrono::milliseconds ms) {
  return std::chrono::duration_cast<std::chrono::microseconds>(ms).count();
}

}  // namespace

UsageTracker::UsageTracker(UsageTrackerOptions options, OwnerResolver& resolver, Logger& log)
    : options_(std::move(options)), resolver_(resolver), log_(log), checkpointer_(options_, log_) {}

UsageTracker::~UsageTracker() { stop(); }

void UsageTracker::note_clock_step(std::int64_t step_us, const std::string& uuid) {
  // Every GPU sees the same step at its next reading: it is logged once.
  const std::int64_t mono = monotonic_now_us(options_);
  std::lock_guard slock(stats_mu_);
  ++clock_steps_;
  if (step_logged_mono_us_ && mono - *step_logged_mono_us_ < 30'000'000) return;
  step_logged_mono_us_ = mono;
  log_.warn("wall clock stepped; the ledger follows it", {{"step_seconds", seconds_text(step_us)}, {"gpu_uuid", uuid}});
}

OwnerLabels UsageTracker::reduce(const OwnerLabels& o) const {
  // The reserved owners keep their project whatever the label set.
  if (o.project == kIdleProject || o.project == kUnattributedProject) return o;
  OwnerLabels r;
  auto keep = [&](const char* name) { return options_.labels.count(name) > 0; };
  if (keep("project")) r.project = o.project;
  if (keep("user")) r.user = o.user;
  if (keep("namespace")) r.namespace_ = o.namespace_;
  if (keep("pod")) r.pod = o.pod;
  if (keep("container")) r.container = o.container;
  if (keep("hpc_job")) r.hpc_job = o.hpc_job;
  return r;
}

UsageTracker::Gpu& UsageTracker::gpu(size_t slot) {
  std::lock_guard lock(gpus_mu_);
  while (gpus_.size() <= slot) gpus_.push_back(std::make_unique<Gpu>());
  return *gpus_[slot];
}

Result<void> UsageTracker::load_state() { return checkpointer_.load(); }

void UsageTracker::on_reading(size_t slot, const DeviceIdentity& id, const DeviceReading& reading) {
  if (id.uuid.empty()) return;  // not identified yet: nothing to key the ledger by
  Gpu& g = gpu(slot);
  const std::int64_t now = wall_now_us(options_);
  const std::int64_t mono = monotonic_now_us(options_);
  if (reading.usage.clock_step_us != 0) note_clock_step(reading.usage.clock_step_us, id.uuid);

  // Owners are resolved outside the GPU's lock: a slow /proc read must not block a scrape's
  // snapshot assembly.
  std::map<unsigned, OwnerLabels> mig_owners;  // the full owner of each MIG device's process
  std::optional<MigRound> mig = resolve_mig_round(id, reading, now, mig_owners);
  // The GPU's own processes (on a GPU in MIG mode, its list of every instance's processes, for
  // the per-process series: each named as its MIG device's), then the DRM clients the backend
  // does not list, with their exact busy time.
  const DrmRound drm = mig ? DrmRound{} : g.drm.use(options_.drm_clients, id, now);
  const std::vector<GpuProcess> listed = with_drm_clients(reading.usage.processes, drm);
  std::vector<OwnerLabels> full_owners;
  std::vector<LedgerProcess> procs = resolve_processes(id, reading, listed, drm, mig_owners, full_owners);
  // After the processes: an allocation takes its project and user from the first of them.
  std::optional<AllocationState> allocation;
  if (!mig) allocation = allocation_of(id);

  std::lock_guard lock(g.mu);
  const GpuLedgerOptions lo = ledger_options(id.model);
  if (g.uuid != id.uuid) adopt(g, id, lo);
  g.model = id.model;
  std::vector<unsigned> pids;
  for (const auto& p : listed) pids.push_back(p.pid);
  for (const auto& [pid, owner] : mig_owners) pids.push_back(pid);
  note_answer(g, id, now, pids);
  LedgerTick tick = ledger_tick(reading, now, std::move(procs), std::move(allocation));
  tick.faults = g.faults.spans(now);
  if (mig) mig->faults = tick.faults;
  const AdvanceResult advanced = g.ledgers.advance(tick, mig, lo);
  if (advanced.cursor_ahead_us > 0) {
    log_.warn(
        "ledger cursor ahead of the GPU's clock (the wall clock went back while the agent was down); "
        "integration restarts from now, the time in between is a gap",
        {{"gpu_uuid", id.uuid}, {"ahead_seconds", seconds_text(advanced.cursor_ahead_us)}});
  }
  if (advanced.active_only_record_age_us > 0) {
    log_.info(
        "this GPU's per-process utilization records average only the samples in which a process was "
        "active; busy time is split by who the GPU's busy fraction says ran (docs/ledger.md)",
        {{"gpu_uuid", id.uuid}, {"record_age_seconds", seconds_text(advanced.active_only_record_age_us)}});
  }
  if (std::size_t pruned = g.ledgers.prune(now - to_us(options_.owner_retention))) {
    std::lock_guard slock(stats_mu_);
    dropped_["owner"] += pruned;
  }
  g.processes.record(listed, full_owners, drm, reading.usage, mono);
  g.live_pids = std::move(pids);
  g.processes.expire(mono, to_us(options_.process_retention));
}

GpuLedgerOptions UsageTracker::ledger_options(const std::string& model) const {
  GpuLedgerOptions lo;
  if (auto it = options_.idle_power_watts.find(model); it != options_.idle_power_watts.end()) {
    lo.idle_power_watts = it->second;
  }
  lo.max_gap_us = to_us(options_.max_gap);
  lo.scheduler = options_.scheduler;
  return lo;
}

std::optional<AllocationState> UsageTracker::allocation_of(const DeviceIdentity& unit) {
  std::optional<AllocationState> a;
  if (!options_.scheduler) return a;
  a = resolver_.allocation(unit);
  if (a) {
    for (auto& o : a->owners) o = reduce(o);
    std::sort(a->owners.begin(), a->owners.end());
    a->owners.erase(std::unique(a->owners.begin(), a->owners.end()), a->owners.end());
  }
  return a;
}

std::optional<MigRound> UsageTracker::resolve_mig_round(const DeviceIdentity& id, const DeviceReading& reading,
                                                        std::int64_t now_us,
                                                        std::map<unsigned, OwnerLabels>& mig_owners) {
  // A GPU in MIG mode is billed by MIG device (ledger/mig_ledgers.h); its own ledger bills the
  // slices no instance holds.
  if (!reading.mig.enabled.value_or(false)) return std::nullopt;
  MigRound round = mig_round(reading, now_us, options_.scheduler);
  // The GPU's compute slices in MIG mode (7 on A100 and H100, 4 on A30); 7 where NVML gave no
  // instance profile.
  const double gpu_slices = reading.mig.slices.value_or(7);
  for (const auto& m : reading.mig.instances) {
    if (m.uuid.empty()) continue;
    const DeviceIdentity unit = mig_unit_identity(id, m.uuid);
    MigUnitTick t = mig_unit_tick(m, gpu_slices);
    for (const auto& p : m.processes.value_or(std::vector<GpuProcess>{})) {
      OwnerLabels owner = resolver_.resolve(p.pid, unit);
      t.processes.push_back({p.pid, reduce(owner), p.memory_bytes.value_or(0), resolver_.start_time_us(p.pid)});
      mig_owners.emplace(p.pid, std::move(owner));
    }
    t.allocation = allocation_of(unit);
    round.units.push_back(std::move(t));
  }
  return round;
}

std::vector<LedgerProcess> UsageTracker::resolve_processes(const DeviceIdentity& id, const DeviceReading& reading,
                                                           const std::vector<GpuProcess>& listed, const DrmRound& drm,
                                                           const std::map<unsigned, OwnerLabels>& mig_owners,
                                                           std::vector<OwnerLabels>& full_owners) {
  std::vector<LedgerProcess> procs;
  const std::size_t backend_listed = reading.usage.processes ? reading.usage.processes->size() : 0;
  for (std::size_t i = 0; i < listed.size(); ++i) {
    const GpuProcess& p = listed[i];
    auto known = mig_owners.find(p.pid);
    OwnerLabels owner = known != mig_owners.end() ? known->second : resolver_.resolve(p.pid, id);
    procs.push_back({p.pid, reduce(owner), p.memory_bytes.value_or(0), resolver_.start_time_us(p.pid)});
    procs.back().busy_seconds = drm_busy_seconds(drm, p.pid, i < backend_listed);
    full_owners.push_back(std::move(owner));
  }
  return procs;
}

void UsageTracker::adopt(Gpu& g, const DeviceIdentity& id, const GpuLedgerOptions& lo) {
  if (!g.uuid.empty()) {
    log_.warn("GPU changed; starting its ledger afresh",
              {{"gpu", std::to_string(id.index)}, {"old_uuid", g.uuid}, {"uuid", id.uuid}});
  }
  g.uuid = id.uuid;
  g.ledgers.reset(lo);
  g.published.reset();
  g.processes.clear();
  if (const std::optional<nlohmann::json> entry = checkpointer_.take_restored(id.uuid)) {
    if (auto restored = g.ledgers.restore(*entry, lo)) {
      g.published = g.ledgers.snapshot(options_.scheduler);
    } else {
      log_.error("ledger state for a GPU unusable; starting it afresh",
                 {{"uuid", id.uuid}, {"err", restored.error().message}});
    }
  }
  checkpointer_.request();
}

void UsageTracker::on_failure(size_t slot, const DeviceIdentity& id) {
  Gpu& g = gpu(slot);
  std::lock_guard lock(g.mu);
  if (g.uuid.empty() || g.uuid != id.uuid) return;
  g.ledgers.interrupt();
  if (!g.faults.failing()) {
    log_.warn("GPU not answering: its time is faulty (fault=\"true\") until it answers again", {{"gpu_uuid", id.uuid}});
  }
  g.faults.failed(wall_now_us(options_));
}

void UsageTracker::on_fault(size_t slot, const DeviceIdentity& id) {
  Gpu& g = gpu(slot);
  std::lock_guard lock(g.mu);
  if (g.uuid.empty() || g.uuid != id.uuid) return;
  if (g.faults.struck(wall_now_us(options_), g.live_pids)) {
    log_.warn(
        "an error that kills work struck the GPU: its time is faulty (fault=\"true\") until the processes "
        "on it have left",
        {{"gpu_uuid", id.uuid}, {"processes", std::to_string(g.live_pids.size())}});
  }
}

void UsageTracker::note_answer(Gpu& g, const DeviceIdentity& id, std::int64_t now_us,
                               const std::vector<unsigned>& pids) {
  const FaultSpans::Ended ended = g.faults.answered(now_us, pids);
  if (ended.failure) log_.info("GPU answers again: its time is no longer faulty", {{"gpu_uuid", id.uuid}});
  if (ended.strike) {
    log_.info("the processes an error struck have left the GPU: its time is no longer faulty", {{"gpu_uuid", id.uuid}});
  }
}

void UsageTracker::contribute(Snapshot& snap) const {
  struct Candidate {
    size_t slot;
    ProcessSnapshot p;
  };
  std::vector<Candidate> candidates;
  std::vector<unsigned> live;
  {
    std::lock_guard lock(gpus_mu_);
    for (size_t i = 0; i < gpus_.size() && i < snap.gpus.size(); ++i) {
      const Gpu& g = *gpus_[i];
      std::lock_guard glock(g.mu);
      if (g.uuid.empty() || g.uuid != snap.gpus[i].identity.uuid) continue;
      // Without a state file there is nothing to resume from, so live values are safe.
      snap.gpus[i].ledger = options_.state_file.empty() ? g.ledgers.snapshot(options_.scheduler) : g.published;
      live.insert(live.end(), g.live_pids.begin(), g.live_pids.end());
      // A down GPU's processes are those of its last collection, memory and utilization
      // included: they are neither served nor counted against the per-process limit.
      if (!snap.gpus[i].up) continue;
      g.processes.for_each_latest([&](const ProcessSnapshot& p) { candidates.push_back({i, p}); });
    }
  }
  // The per-process limit keeps the first processes in this order.
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return process_series_before(a.slot, a.p, b.slot, b.p);
  });
  std::lock_guard slock(stats_mu_);
  std::set<std::pair<size_t, unsigned>> excluded;
  for (size_t k = 0; k < candidates.size(); ++k) {
    auto& c = candidates[k];
    // Every process is in the snapshot (the JSON API lists who is on a GPU); the limit bounds
    // only the per-process series.
    c.p.series = k < options_.max_process_series;
    if (!c.p.series) {
      auto key = std::pair(c.slot, c.p.pid);
      if (!excluded_.count(key)) ++dropped_["process"];
      excluded.insert(key);
    }
    snap.gpus[c.slot].processes.push_back(std::move(c.p));
  }
  excluded_ = std::move(excluded);
  for (auto& g : snap.gpus) {
    std::sort(g.processes.begin(), g.processes.end(),
              [](const ProcessSnapshot& a, const ProcessSnapshot& b) { return a.pid < b.pid; });
  }
  AttributionStatus& st = snap.attribution;
  st.enabled = true;
  st.series_dropped = dropped_;
  st.series_dropped.try_emplace("process", 0);
  st.series_dropped.try_emplace("owner", 0);
  checkpointer_.contribute(st);
  st.clock_steps = clock_steps_;
  resolver_.contribute(st);
  std::sort(live.begin(), live.end());
  live.erase(std::unique(live.begin(), live.end()), live.end());
  resolver_.retain(live);
}

Result<std::size_t> UsageTracker::checkpoint() {
  if (options_.state_file.empty()) return std::size_t{0};
  if (!checkpointer_.loaded()) {
    return Error{0, "the ledger state file was not loaded, so it is not written: " + options_.state_file};
  }
  const auto begin = std::chrono::steady_clock::now();
  nlohmann::json doc = checkpointer_.document();
  std::vector<Saved> saved = save_gpus(doc["gpus"]);
  auto written = checkpointer_.write(doc);
  if (written) {
    // Only now may scrapes see these values: they are what a restart resumes from.
    std::lock_guard lock(gpus_mu_);
    for (auto& s : saved) {
      std::lock_guard glock(s.gpu->mu);
      if (s.gpu->uuid == s.uuid) s.gpu->published = std::move(s.ledger);  // not replaced meanwhile
    }
  }
  checkpointer_.note_result(written, std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
  return written;
}

std::vector<UsageTracker::Saved> UsageTracker::save_gpus(nlohmann::json& gpus) {
  // What this checkpoint saves, taken under the same lock as the JSON so the two agree.
  std::vector<Saved> saved;
  std::lock_guard lock(gpus_mu_);
  for (size_t i = 0; i < gpus_.size(); ++i) {
    Gpu& g = *gpus_[i];
    std::lock_guard glock(g.mu);
    if (g.uuid.empty()) continue;
    gpus[g.uuid] = {{"index", i}, {"model", g.model}};
    g.ledgers.save(gpus[g.uuid]);
    saved.push_back({&g, g.uuid, g.ledgers.snapshot(options_.scheduler)});
  }
  return saved;
}

void UsageTracker::start() {
  checkpointer_.start([this] { (void)checkpoint(); });  // it logs its own failures
}

void UsageTracker::stop() {
  if (!checkpointer_.stop()) return;
  if (!options_.state_file.empty() && checkpointer_.loaded()) (void)checkpoint();
}

}  // namespace gpumeter
