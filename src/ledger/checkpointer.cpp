#include "ledger/checkpointer.h"

#include <chrono>

#include "ledger/ledger.h"
#include "ledger/mig_ledgers.h"
#include "ledger/state_file.h"
#include "ledger/tracker_clock.h"
#include "ledger/usage_tracker.h"
#include "util/thread_name.h"

namespace gpumeter {

namespace {

// Moves the times of every GPU's ledgers in `gpus` (the state file's, by uuid) by `step_us`.
void rebase_entries(nlohmann::json& gpus, std::int64_t step_us) {
  for (auto& [uuid, entry] : gpus.items()) {
    auto l = GpuLedger::from_json(entry["ledger"], {});
    if (!l) continue;  // checked when the file was read
    l->rebase(step_us);
    entry["ledger"] = l->to_json();
    if (!entry.contains("mig")) continue;
    auto m = MigLedgers::from_json(entry["mig"], {});
    if (!m) continue;  // checked when the file was read
    m->rebase(step_us);
    entry["mig"] = m->to_json();
  }
}

}  // namespace

Checkpointer::Checkpointer(const UsageTrackerOptions& options, Logger& log) : options_(options), log_(log) {}

Result<void> Checkpointer::load() {
  if (options_.state_file.empty()) return {};
  auto loaded = load_ledger_state(options_.state_file);
  // Only a file that was read (or set aside, or is absent) may be written over: one that was
  // refused is left as it is, which the error says (docs/ledger.md).
  loaded_ = !loaded.fatal;
  if (loaded.fatal) {
    return Error{2,
                 "cannot use the ledger state file (it is left as it is; fix it, move it away, or choose another "
                 "--ledger.state-file): " +
                     loaded.problem};
  }
  if (!loaded.problem.empty()) {
    log_.error("ledger state file unusable; set aside, starting an empty ledger",
               {{"path", options_.state_file}, {"err", loaded.problem}, {"moved_to", loaded.set_aside_path}});
    return {};
  }
  if (!loaded.dropped.empty()) {
    // Each one, so that what restarted at 0 can be found; the rest of the file is resumed.
    for (const auto& d : loaded.dropped) {
      log_.warn("ledger state: an amount that cannot be true restarts at 0",
                {{"path", options_.state_file}, {"value", d}});
    }
    std::lock_guard lock(status_mu_);
    dropped_values_ = loaded.dropped.size();
  }
  if (loaded.document.is_null()) {
    log_.info("no ledger state yet; starting an empty ledger", {{"path", options_.state_file}});
    return {};
  }
  const std::int64_t step = step_while_down(loaded.document.value("clock", nlohmann::json::object()));
  nlohmann::json gpus = std::move(loaded.document["gpus"]);
  // Every GPU's, also those not seen again this run (their entries are carried over).
  if (step != 0) rebase_entries(gpus, step);
  std::lock_guard lock(restored_mu_);
  restored_ = std::move(gpus);
  log_.info("ledger state loaded", {{"path", options_.state_file}, {"gpus", std::to_string(restored_.size())}});
  return {};
}

std::int64_t Checkpointer::step_while_down(const nlohmann::json& clock) {
  // Within one boot, the monotonic clock saved with the file says how far the wall clock
  // stepped while the agent was down: the cursors move with it, as for a step seen live.
  const std::string boot = boot_id(options_);
  if (!clock.is_object() || boot.empty() || clock.value("boot_id", "") != boot || !clock.contains("wall_us") ||
      !clock["wall_us"].is_number_integer() || !clock.contains("monotonic_us") ||
      !clock["monotonic_us"].is_number_integer()) {
    return 0;
  }
  const std::int64_t then = clock["wall_us"].get<std::int64_t>() - clock["monotonic_us"].get<std::int64_t>();
  const std::int64_t step = (wall_now_us(options_) - monotonic_now_us(options_)) - then;
  if (step < kClockStepThresholdUs && step > -kClockStepThresholdUs) return 0;
  log_.warn("wall clock stepped while the agent was down; the ledger follows it",
            {{"path", options_.state_file}, {"step_seconds", seconds_text(step)}});
  return step;
}

std::optional<nlohmann::json> Checkpointer::take_restored(const std::string& uuid) {
  std::lock_guard lock(restored_mu_);
  if (!restored_.is_object() || !restored_.contains(uuid)) return std::nullopt;
  nlohmann::json entry = std::move(restored_[uuid]);
  restored_.erase(uuid);
  return entry;
}

nlohmann::json Checkpointer::document() {
  nlohmann::json doc;
  doc["format"] = kLedgerStateFormat;
  doc["version"] = kLedgerStateVersion;
  const std::int64_t wall = wall_now_us(options_);
  doc["saved_unix"] = static_cast<double>(wall) / 1e6;
  // Read back at start: within one boot, says how far the wall clock stepped meanwhile.
  doc["clock"] = {{"boot_id", boot_id(options_)}, {"wall_us", wall}, {"monotonic_us", monotonic_now_us(options_)}};
  doc["gpus"] = nlohmann::json::object();
  std::lock_guard lock(restored_mu_);
  if (restored_.is_object()) doc["gpus"] = restored_;
  return doc;
}

Result<std::size_t> Checkpointer::write(const nlohmann::json& doc) {
  // Owner labels are valid UTF-8 where they are made (owner_builder.cpp); a driver's model name
  // need not be, and one bad byte must not stop every checkpoint.
  return write_file_atomic(options_.state_file, doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void Checkpointer::note_result(const Result<std::size_t>& written, double took_s) {
  std::lock_guard lock(status_mu_);
  duration_ = took_s;
  if (written) {
    if (failing_streak_ > 0) {
      log_.info("ledger state saved again",
                {{"path", options_.state_file}, {"failed_checkpoints", std::to_string(failing_streak_)}});
    } else if (last_unix_ == 0) {
      log_.info("ledger state saved", {{"path", options_.state_file}, {"bytes", std::to_string(*written)}});
    }
    last_unix_ = static_cast<double>(wall_now_us(options_)) / 1e6;
    ok_ = true;
    failing_streak_ = 0;
    failures_since_logged_ = 0;
    return;
  }
  // The first failure is logged; a failure that persists (a full disk, a read-only mount),
  // once per checkpoint_failure_log_interval with how many failed since.
  ++failures_;
  ++failing_streak_;
  ++failures_since_logged_;
  const std::int64_t mono = monotonic_now_us(options_);
  const auto every_us =
      std::chrono::duration_cast<std::chrono::microseconds>(options_.checkpoint_failure_log_interval).count();
  if (failing_streak_ == 1 || mono - failure_logged_mono_us_ >= every_us) {
    log_.error("cannot save the ledger state", {{"path", options_.state_file},
                                                {"err", written.error().message},
                                                {"failed_checkpoints", std::to_string(failures_since_logged_)}});
    failure_logged_mono_us_ = mono;
    failures_since_logged_ = 0;
  }
  ok_ = false;
}

void Checkpointer::contribute(AttributionStatus& st) const {
  std::lock_guard lock(status_mu_);
  st.checkpoint_enabled = !options_.state_file.empty();
  st.checkpoint_success = ok_;
  st.checkpoint_last_success_unix = last_unix_;
  st.checkpoint_duration_seconds = duration_;
  st.checkpoint_failures = failures_;
  st.state_dropped_values = dropped_values_;
}

void Checkpointer::start(std::function<void()> checkpoint) {
  if (options_.state_file.empty() || !loaded_ || thread_.joinable()) return;
  thread_ = std::thread([this, checkpoint = std::move(checkpoint)] {
    name_this_thread("gm-checkpoint");
    run(checkpoint);
  });
}

void Checkpointer::run(const std::function<void()>& checkpoint) {
  // The first checkpoint at once (a state file that cannot be written shows at start), then
  // one when a GPU is read for the first time, then every interval.
  std::unique_lock lock(stop_mu_);
  while (!stopping_) {
    requested_ = false;
    lock.unlock();
    checkpoint();
    lock.lock();
    stop_cv_.wait_for(lock, options_.checkpoint_interval, [this] { return stopping_ || requested_; });
  }
}

void Checkpointer::request() {
  {
    std::lock_guard lock(stop_mu_);
    requested_ = true;
  }
  stop_cv_.notify_all();
}

bool Checkpointer::stop() {
  {
    std::lock_guard lock(stop_mu_);
    if (stopping_) return false;
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  return true;
}

}  // namespace gpumeter
