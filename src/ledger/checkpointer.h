#pragma once
// The usage tracker's state file: read once at start, where the GPUs' ledgers wait until each
// GPU appears, and written by a checkpoint thread. It keeps the checkpoints' health for the
// snapshot; the tracker gathers the GPUs' ledgers into each checkpoint.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "model/snapshot.h"
#include "util/log.h"
#include "util/result.h"

namespace gpumeter {

struct UsageTrackerOptions;

class Checkpointer {
 public:
  // `options` (state_file, the clocks, the intervals) outlive the checkpointer.
  Checkpointer(const UsageTrackerOptions& options, Logger& log);

  // Reads the state file (UsageTracker::load_state), moving the ledgers' times by the wall
  // clock's step while the agent was down.
  Result<void> load();
  // load() succeeded: the state file may be written.
  bool loaded() const { return loaded_; }
  // The state file's entry of the GPU `uuid`, taken out: it is no longer carried over.
  std::optional<nlohmann::json> take_restored(const std::string& uuid);

  // A new state document: its envelope and clocks, and under "gpus" the state file's GPUs not
  // seen yet (still starting, or gone), carried over.
  nlohmann::json document();
  // Writes `doc` to the state file atomically. Returns the bytes written.
  Result<std::size_t> write(const nlohmann::json& doc);
  // Notes how a checkpoint went (`took_s` seconds), and logs a failure as the options say.
  void note_result(const Result<std::size_t>& written, double took_s);
  // Adds the checkpoints' health to the snapshot's status.
  void contribute(AttributionStatus& status) const;

  // Starts the thread that calls `checkpoint` at once, on request(), and every interval (no
  // state file, not loaded, or started already: nothing).
  void start(std::function<void()> checkpoint);
  // A GPU was read for the first time: checkpoint now.
  void request();
  // Ends the thread. Returns false when it was stopped before.
  bool stop();

 private:
  // The wall clock's step while the agent was down, from the clocks saved in the state file
  // (same boot only); 0 below the step threshold or when it cannot be told.
  std::int64_t step_while_down(const nlohmann::json& clock);
  void run(const std::function<void()>& checkpoint);

  const UsageTrackerOptions& options_;
  Logger& log_;
  std::atomic<bool> loaded_{false};

  // Lock order: restored_mu_ is taken alone or inside a GPU's; status_mu_ alone or inside the
  // tracker's stats; stop_mu_ alone or innermost.
  std::mutex restored_mu_;
  nlohmann::json restored_;  // per-uuid ledgers from the state file, taken when the GPU appears

  mutable std::mutex status_mu_;
  bool ok_ = false;
  double last_unix_ = 0;
  double duration_ = 0;
  std::uint64_t failures_ = 0;               // exported, never reset
  std::uint64_t dropped_values_ = 0;         // amounts of the loaded file that could not be true
  std::uint64_t failures_since_logged_ = 0;  // of the current failing streak
  std::uint64_t failing_streak_ = 0;
  std::int64_t failure_logged_mono_us_ = 0;

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  bool requested_ = false;  // a GPU was read for the first time: checkpoint now
  std::thread thread_;
};

}  // namespace gpumeter
