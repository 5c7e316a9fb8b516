#include "ledger/usage_tracker.h"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

#include "util/thread_name.h"

namespace gpumeter {

namespace {

std::int64_t system_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Fixed for the life of a boot, so of the process: read once.
const std::string& system_boot_id() {
  static const std::string id = [] {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string line;
    std::getline(in, line);
    return line;
  }();
  return id;
}

std::string seconds_text(std::int64_t us) { return fmt::format("{:.3f}", static_cast<double>(us) / 1e6); }

}  // namespace

UsageTracker::UsageTracker(UsageTrackerOptions options, OwnerResolver& resolver, Logger& log)
    : options_(std::move(options)), resolver_(resolver), log_(log) {}

UsageTracker::~UsageTracker() { stop(); }

std::int64_t UsageTracker::wall_now_us() const {
  return options_.wall_clock_us ? options_.wall_clock_us() : system_now_us();
}

std::int64_t UsageTracker::monotonic_now_us() const {
  if (options_.monotonic_us) return options_.monotonic_us();
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void UsageTracker::note_clock_step(std::int64_t step_us, const std::string& uuid) {
  // Every GPU sees the same step at its next reading: it is logged once.
  const std::int64_t mono = monotonic_now_us();
  std::lock_guard slock(stats_mu_);
  ++clock_steps_;
  if (step_logged_mono_us_ && mono - *step_logged_mono_us_ < 30'000'000) return;
  step_logged_mono_us_ = mono;
  log_.warn("wall clock stepped; the ledger follows it",
            {{"step_seconds", seconds_text(step_us)}, {"gpu_uuid", uuid}});
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

namespace {

std::shared_ptr<const GpuLedgerSnapshot> ledger_snapshot(const GpuLedger& ledger, const MigLedgers& mig,
                                                         bool scheduler) {
  auto ls = std::make_shared<GpuLedgerSnapshot>();
  ls->scheduler = scheduler;
  ls->covered_seconds = ledger.covered_seconds();
  ls->gap_seconds = ledger.gap_seconds();
  ls->foreign_seconds = ledger.foreign_seconds();
  for (const auto& [owner, t] : ledger.owners()) {
    ls->owners.push_back({owner, t.allocated_seconds, t.busy_seconds, t.memory_byte_seconds, t.energy_joules,
                          t.idle_allocated_seconds});
  }
  mig.append(*ls);
  return ls;
}

}  // namespace

Result<void> UsageTracker::load_state() {
  if (options_.state_file.empty()) return {};
  auto loaded = load_ledger_state(options_.state_file);
  // Only a file that was read (or set aside, or is absent) may be written over: one that was
  // refused is left as it is, which the error says (docs/ledger.md).
  state_loaded_ = !loaded.fatal;
  if (loaded.fatal) {
    return Error{2, "cannot use the ledger state file (it is left as it is; fix it, move it away, or choose another "
                    "--ledger.state-file): " + loaded.problem};
  }
  if (!loaded.problem.empty()) {
    log_.error("ledger state file unusable; set aside, starting an empty ledger",
               {{"path", options_.state_file}, {"err", loaded.problem}, {"moved_to", loaded.set_aside_path}});
    return {};
  }
  if (loaded.document.is_null()) {
    log_.info("no ledger state yet; starting an empty ledger", {{"path", options_.state_file}});
    return {};
  }
  // Within one boot, the monotonic clock saved with the file says how far the wall clock
  // stepped while the agent was down: the cursors move with it, as for a step seen live.
  const auto& clock = loaded.document.value("clock", nlohmann::json::object());
  const std::string boot = options_.boot_id ? options_.boot_id() : system_boot_id();
  if (clock.is_object() && !boot.empty() && clock.value("boot_id", "") == boot &&
      clock.contains("wall_us") && clock["wall_us"].is_number_integer() && clock.contains("monotonic_us") &&
      clock["monotonic_us"].is_number_integer()) {
    const std::int64_t then = clock["wall_us"].get<std::int64_t>() - clock["monotonic_us"].get<std::int64_t>();
    const std::int64_t step = (wall_now_us() - monotonic_now_us()) - then;
    if (step >= kClockStepThresholdUs || step <= -kClockStepThresholdUs) {
      step_while_down_us_ = step;
      log_.warn("wall clock stepped while the agent was down; the ledger follows it",
                {{"path", options_.state_file}, {"step_seconds", seconds_text(step)}});
    }
  }
  nlohmann::json gpus = std::move(loaded.document["gpus"]);
  if (step_while_down_us_ != 0) {
    // Every GPU's, also those not seen again this run (their entries are carried over).
    for (auto& [uuid, entry] : gpus.items()) {
      auto l = GpuLedger::from_json(entry["ledger"], {});
      if (!l) continue;  // checked when the file was read
      l->rebase(step_while_down_us_);
      entry["ledger"] = l->to_json();
      if (!entry.contains("mig")) continue;
      auto m = MigLedgers::from_json(entry["mig"], {});
      if (!m) continue;  // checked when the file was read
      m->rebase(step_while_down_us_);
      entry["mig"] = m->to_json();
    }
  }
  std::lock_guard lock(restored_mu_);
  restored_ = std::move(gpus);
  log_.info("ledger state loaded", {{"path", options_.state_file}, {"gpus", std::to_string(restored_.size())}});
  return {};
}

DrmRound UsageTracker::drm_use(Gpu& g, const DeviceIdentity& id, std::int64_t now_us) {
  if (options_.drm_clients == nullptr) return {};
  const std::string pdev = normalize_pci_address(id.pci_bus_id);
  if (pdev.empty()) return {};
  auto clients = options_.drm_clients->clients(pdev);
  if (!clients) return {};  // the counters are cumulative: the next reading covers this one too
  std::lock_guard lock(g.mu);
  if (g.drm_uuid != id.uuid) {
    g.drm_uuid = id.uuid;
    g.drm.reset();
  }
  return g.drm.advance(*clients, now_us);
}

void UsageTracker::on_reading(size_t slot, const DeviceIdentity& id, const DeviceReading& reading) {
  if (id.uuid.empty()) return;  // not identified yet: nothing to key the ledger by
  Gpu& g = gpu(slot);
  const std::int64_t now = wall_now_us();
  const std::int64_t mono = monotonic_now_us();
  if (reading.usage.clock_step_us != 0) note_clock_step(reading.usage.clock_step_us, id.uuid);

  // Owners are resolved outside the GPU's lock: a slow /proc read must not block a scrape's
  // snapshot assembly.
  // After the processes: an allocation takes its project and user from the first of them.
  auto allocation_of = [&](const DeviceIdentity& unit) {
    std::optional<AllocationState> a;
    if (!options_.scheduler) return a;
    a = resolver_.allocation(unit);
    if (a) {
      for (auto& o : a->owners) o = reduce(o);
      std::sort(a->owners.begin(), a->owners.end());
      a->owners.erase(std::unique(a->owners.begin(), a->owners.end()), a->owners.end());
    }
    return a;
  };
  // A GPU in MIG mode is billed by MIG device (ledger/mig_ledgers.h); its own ledger bills the
  // slices no instance holds.
  std::optional<MigRound> mig;
  std::map<unsigned, OwnerLabels> mig_owners;  // the full owner of each MIG device's process
  if (reading.mig_enabled.value_or(false)) {
    mig.emplace();
    mig->wall_us = now;
    mig->clock_step_us = reading.usage.clock_step_us;
    mig->energy_joules = reading.energy_joules;
    mig->power_watts = reading.power_watts;
    mig->scheduler = options_.scheduler;
    // The GPU's compute slices in MIG mode (7 on A100 and H100, 4 on A30); 7 where NVML gave no
    // instance profile.
    const double gpu_slices = reading.mig_slices.value_or(7);
    for (const auto& m : reading.mig_instances) {
      if (m.uuid.empty()) continue;
      DeviceIdentity unit = id;
      unit.uuid = m.uuid;
      unit.parent_uuid = id.uuid;
      unit.device_minor.reset();  // the parent's: it names the whole GPU
      MigUnitTick t;
      t.labels = {m.uuid, std::to_string(m.gpu_instance), std::to_string(m.compute_instance), m.profile};
      const unsigned slices = m.compute_slices > 0 ? m.compute_slices : m.slices;
      t.weight = gpu_slices > 0 ? std::min(1.0, slices / gpu_slices) : 0.0;
      if (m.profiling) t.activity = m.profiling->sm_active_ratio;
      for (const auto& p : m.processes.value_or(std::vector<GpuProcess>{})) {
        OwnerLabels owner = resolver_.resolve(p.pid, unit);
        t.processes.push_back({p.pid, reduce(owner), p.memory_bytes.value_or(0), resolver_.start_time_us(p.pid)});
        mig_owners.emplace(p.pid, std::move(owner));
      }
      t.allocation = allocation_of(unit);
      mig->units.push_back(std::move(t));
    }
  }
  // The GPU's own processes (on a GPU in MIG mode, its list of every instance's processes, for
  // the per-process series: each named as its MIG device's), then the DRM clients the backend
  // does not list, with their exact busy time.
  const DrmRound drm_round = mig ? DrmRound{} : drm_use(g, id, now);
  const std::map<unsigned, DrmUse>& drm = drm_round.by_pid;
  const double drm_interval_s = drm_round.interval_s;
  std::vector<LedgerProcess> procs;
  std::vector<OwnerLabels> full_owners;
  std::vector<GpuProcess> listed;
  if (reading.usage.processes) listed = *reading.usage.processes;
  for (const auto& client : drm) {  // not a structured binding: clang 14 (the fuzz build) cannot capture one
    const unsigned pid = client.first;
    if (std::none_of(listed.begin(), listed.end(), [&](const GpuProcess& p) { return p.pid == pid; })) {
      listed.push_back({pid, client.second.memory_bytes, kProcessGraphics});
    }
  }
  const std::size_t backend_listed = reading.usage.processes ? reading.usage.processes->size() : 0;
  for (std::size_t i = 0; i < listed.size(); ++i) {
    const GpuProcess& p = listed[i];
    auto known = mig_owners.find(p.pid);
    OwnerLabels owner = known != mig_owners.end() ? known->second : resolver_.resolve(p.pid, id);
    procs.push_back({p.pid, reduce(owner), p.memory_bytes.value_or(0), resolver_.start_time_us(p.pid)});
    // A DRM client the backend does not list: its engine time is all of its busy time. One the
    // backend lists (a ROCm process with the render node open) keeps its sampled share, plus any
    // engine time it has.
    if (auto d = drm.find(p.pid); d != drm.end() && (i >= backend_listed || d->second.busy_seconds > 0)) {
      procs.back().busy_seconds = d->second.busy_seconds;
    }
    full_owners.push_back(std::move(owner));
  }
  std::optional<AllocationState> allocation;
  if (!mig) allocation = allocation_of(id);

  std::lock_guard lock(g.mu);
  GpuLedgerOptions lo;
  if (auto it = options_.idle_power_watts.find(id.model); it != options_.idle_power_watts.end()) {
    lo.idle_power_watts = it->second;
  }
  lo.max_gap_us = std::chrono::duration_cast<std::chrono::microseconds>(options_.max_gap).count();
  lo.scheduler = options_.scheduler;
  if (g.uuid != id.uuid) {
    // A new GPU in this slot (first sight, or the board was replaced): its own ledger, resumed
    // from the state file when it has one there.
    if (!g.uuid.empty()) {
      log_.warn("GPU changed; starting its ledger afresh", {{"gpu", std::to_string(id.index)},
                                                          {"old_uuid", g.uuid}, {"uuid", id.uuid}});
    }
    g.uuid = id.uuid;
    g.ledger = GpuLedger(lo);
    g.mig = MigLedgers();
    g.published.reset();
    g.processes.clear();
    std::lock_guard rlock(restored_mu_);
    if (restored_.is_object() && restored_.contains(id.uuid)) {
      const nlohmann::json& entry = restored_[id.uuid];
      auto restored = GpuLedger::from_json(entry["ledger"], lo);
      auto mig = entry.contains("mig") ? MigLedgers::from_json(entry["mig"], lo) : Result<MigLedgers>(MigLedgers());
      if (restored && mig) {
        g.ledger = std::move(restored).value();
        g.mig = std::move(mig).value();
        g.published = ledger_snapshot(g.ledger, g.mig, options_.scheduler);
      } else {
        log_.error("ledger state for a GPU unusable; starting it afresh",
                   {{"uuid", id.uuid}, {"err", restored ? mig.error().message : restored.error().message}});
      }
      restored_.erase(id.uuid);
    }
    {
      std::lock_guard slock(stop_mu_);
      checkpoint_requested_ = true;
    }
    stop_cv_.notify_all();
  }
  g.model = id.model;
  g.ledger.set_options(lo);

  LedgerTick tick;
  tick.wall_us = now;
  tick.processes = procs;
  tick.utilization_samples_supported = reading.usage.utilization_samples_supported;
  tick.utilization_samples = reading.usage.utilization_samples;
  tick.power_samples_supported = reading.usage.power_samples_supported;
  tick.power_samples = reading.usage.power_samples;
  tick.process_samples_supported = reading.usage.process_samples_supported;
  tick.process_samples = reading.usage.process_samples;
  tick.utilization_ratio = reading.utilization_ratio;
  tick.power_watts = reading.power_watts;
  tick.energy_joules = reading.energy_joules;
  tick.clock_step_us = reading.usage.clock_step_us;
  tick.allocation = std::move(allocation);
  AdvanceResult advanced;
  if (mig) {
    advanced = g.mig.advance(g.ledger, *mig, lo);
  } else {
    g.mig.leave();
    advanced = g.ledger.advance(tick);
  }
  if (advanced.cursor_ahead_us > 0) {
    log_.warn("ledger cursor ahead of the GPU's clock (the wall clock went back while the agent was down); "
              "integration restarts from now, the time in between is a gap",
              {{"gpu_uuid", id.uuid}, {"ahead_seconds", seconds_text(advanced.cursor_ahead_us)}});
  }

  const auto retention_us = std::chrono::duration_cast<std::chrono::microseconds>(options_.owner_retention).count();
  if (std::size_t pruned = g.ledger.prune(now - retention_us) + g.mig.prune(now - retention_us)) {
    std::lock_guard slock(stats_mu_);
    dropped_["owner"] += pruned;
  }

  // Per-process series: latest values of running processes; exited ones read 0 until the
  // retention ends, so graphs drop to zero instead of holding a stale value.
  g.live_pids.clear();
  for (size_t i = 0; i < procs.size(); ++i) {
    const auto& p = listed[i];
    ProcessSeries& s = g.processes[p.pid];
    s.latest.pid = p.pid;
    s.latest.owner = full_owners[i];
    s.latest.memory_bytes = p.memory_bytes;
    s.latest.running = true;
    if (auto d = drm.find(p.pid); d != drm.end() && (p.types & kProcessCompute) == 0) {
      // A DRM client's utilization over the interval since its GPU's previous reading.
      if (drm_interval_s > 0) s.latest.utilization_ratio = std::min(1.0, d->second.busy_seconds / drm_interval_s);
    } else if (reading.usage.process_samples_supported) {
      double sum = 0;
      int n = 0;
      for (const auto& smp : reading.usage.process_samples) {
        if (smp.pid == p.pid) {
          sum += smp.sm_ratio;
          ++n;
        }
      }
      s.latest.utilization_ratio = n > 0 ? sum / n : 0.0;
    }
    s.last_seen_us = mono;
    g.live_pids.push_back(p.pid);
  }
  for (const auto& [pid, owner] : mig_owners) g.live_pids.push_back(pid);
  const auto proc_retention_us =
      std::chrono::duration_cast<std::chrono::microseconds>(options_.process_retention).count();
  for (auto it = g.processes.begin(); it != g.processes.end();) {
    ProcessSeries& s = it->second;
    if (s.last_seen_us != mono) {
      s.latest.running = false;
      if (s.latest.memory_bytes) s.latest.memory_bytes = 0;
      if (s.latest.utilization_ratio) s.latest.utilization_ratio = 0;
      if (mono - s.last_seen_us > proc_retention_us) {
        it = g.processes.erase(it);
        continue;
      }
    }
    ++it;
  }
}

void UsageTracker::on_failure(size_t slot, const DeviceIdentity& id) {
  Gpu& g = gpu(slot);
  std::lock_guard lock(g.mu);
  if (!g.uuid.empty() && g.uuid == id.uuid) {
    g.ledger.interrupt();
    g.mig.interrupt();
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
      snap.gpus[i].ledger = options_.state_file.empty() ? ledger_snapshot(g.ledger, g.mig, options_.scheduler) : g.published;
      live.insert(live.end(), g.live_pids.begin(), g.live_pids.end());
      // A down GPU's processes are those of its last collection, memory and utilization
      // included: they are neither served nor counted against the per-process limit.
      if (!snap.gpus[i].up) continue;
      for (const auto& [pid, s] : g.processes) candidates.push_back({i, s.latest});
    }
  }
  // The per-process limit: running before exited, then by memory, then by utilization.
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.p.running != b.p.running) return a.p.running;
    double am = a.p.memory_bytes.value_or(0), bm = b.p.memory_bytes.value_or(0);
    if (am != bm) return am > bm;
    double au = a.p.utilization_ratio.value_or(0), bu = b.p.utilization_ratio.value_or(0);
    if (au != bu) return au > bu;
    return std::pair(a.slot, a.p.pid) < std::pair(b.slot, b.p.pid);
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
  st.checkpoint_enabled = !options_.state_file.empty();
  st.checkpoint_success = checkpoint_ok_;
  st.checkpoint_last_success_unix = checkpoint_last_unix_;
  st.checkpoint_duration_seconds = checkpoint_duration_;
  st.checkpoint_failures = checkpoint_failures_;
  st.clock_steps = clock_steps_;
  resolver_.contribute(st);
  std::sort(live.begin(), live.end());
  live.erase(std::unique(live.begin(), live.end()), live.end());
  resolver_.retain(live);
}

Result<std::size_t> UsageTracker::checkpoint() {
  if (options_.state_file.empty()) return std::size_t{0};
  if (!state_loaded_) return Error{0, "the ledger state file was not loaded, so it is not written: " + options_.state_file};
  const auto begin = std::chrono::steady_clock::now();
  nlohmann::json doc;
  doc["format"] = kLedgerStateFormat;
  doc["version"] = kLedgerStateVersion;
  const std::int64_t wall = wall_now_us();
  doc["saved_unix"] = static_cast<double>(wall) / 1e6;
  // Read back at start: within one boot, says how far the wall clock stepped meanwhile.
  doc["clock"] = {{"boot_id", options_.boot_id ? options_.boot_id() : system_boot_id()},
                  {"wall_us", wall},
                  {"monotonic_us", monotonic_now_us()}};
  nlohmann::json gpus = nlohmann::json::object();
  {
    // GPUs from the state file not seen yet (still starting, or gone) are carried over.
    std::lock_guard rlock(restored_mu_);
    if (restored_.is_object()) gpus = restored_;
  }
  // What this checkpoint saves, taken under the same lock as the JSON so the two agree.
  struct Saved {
    Gpu* gpu;
    std::string uuid;
    std::shared_ptr<const GpuLedgerSnapshot> ledger;
  };
  std::vector<Saved> saved;
  {
    std::lock_guard lock(gpus_mu_);
    for (size_t i = 0; i < gpus_.size(); ++i) {
      Gpu& g = *gpus_[i];
      std::lock_guard glock(g.mu);
      if (g.uuid.empty()) continue;
      gpus[g.uuid] = {{"index", i}, {"model", g.model}, {"ledger", g.ledger.to_json()}};
      if (!g.mig.empty()) gpus[g.uuid]["mig"] = g.mig.to_json();
      saved.push_back({&g, g.uuid, ledger_snapshot(g.ledger, g.mig, options_.scheduler)});
    }
  }
  doc["gpus"] = std::move(gpus);
  // Owner labels are valid UTF-8 where they are made (owner_builder.cpp); a driver's model name
  // need not be, and one bad byte must not stop every checkpoint.
  auto written = write_file_atomic(options_.state_file, doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  if (written) {
    // Only now may scrapes see these values: they are what a restart resumes from.
    std::lock_guard lock(gpus_mu_);
    for (auto& s : saved) {
      std::lock_guard glock(s.gpu->mu);
      if (s.gpu->uuid == s.uuid) s.gpu->published = std::move(s.ledger);  // not replaced meanwhile
    }
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  std::lock_guard slock(stats_mu_);
  checkpoint_duration_ = took;
  if (written) {
    if (failing_streak_ > 0) {
      log_.info("ledger state saved again", {{"path", options_.state_file},
                                             {"failed_checkpoints", std::to_string(failing_streak_)}});
    } else if (checkpoint_last_unix_ == 0) {
      log_.info("ledger state saved", {{"path", options_.state_file}, {"bytes", std::to_string(*written)}});
    }
    checkpoint_last_unix_ = static_cast<double>(wall_now_us()) / 1e6;
    checkpoint_ok_ = true;
    failing_streak_ = 0;
    failures_since_logged_ = 0;
  } else {
    // The first failure is logged; a failure that persists (a full disk, a read-only mount),
    // once per checkpoint_failure_log_interval with how many failed since.
    ++checkpoint_failures_;
    ++failing_streak_;
    ++failures_since_logged_;
    const std::int64_t mono = monotonic_now_us();
    const auto every_us =
        std::chrono::duration_cast<std::chrono::microseconds>(options_.checkpoint_failure_log_interval).count();
    if (failing_streak_ == 1 || mono - failure_logged_mono_us_ >= every_us) {
      log_.error("cannot save the ledger state", {{"path", options_.state_file},
                                                  {"err", written.error().message},
                                                  {"failed_checkpoints", std::to_string(failures_since_logged_)}});
      failure_logged_mono_us_ = mono;
      failures_since_logged_ = 0;
    }
    checkpoint_ok_ = false;
  }
  return written;
}

void UsageTracker::start() {
  if (options_.state_file.empty() || !state_loaded_ || thread_.joinable()) return;
  thread_ = std::thread([this] {
    name_this_thread("gm-checkpoint");
    run_checkpoints();
  });
}

void UsageTracker::run_checkpoints() {
  // The first checkpoint at once (a state file that cannot be written shows at start), then
  // one when a GPU is read for the first time, then every interval.
  std::unique_lock lock(stop_mu_);
  while (!stopping_) {
    checkpoint_requested_ = false;
    lock.unlock();
    (void)checkpoint();  // it logs its own failures
    lock.lock();
    stop_cv_.wait_for(lock, options_.checkpoint_interval, [this] { return stopping_ || checkpoint_requested_; });
  }
}

void UsageTracker::stop() {
  {
    std::lock_guard lock(stop_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (!options_.state_file.empty() && state_loaded_) (void)checkpoint();
}

}  // namespace gpumeter
