#pragma once
// Reloading the agent's configuration without a restart (docs/configuration.md, "Reloading"):
// SIGHUP, POST /-/reload with --web.enable-lifecycle, and a periodic check of the files' content
// (a Kubernetes ConfigMap volume swaps its files through a "..data" symlink) all call
// ConfigReloader::reload(). It reads --config.file and --web.config.file again, validates both,
// then applies everything or nothing: a bad file is refused with its reason and the
// configuration in force stays. Settings that cannot change while the agent runs are named in a
// warning and take effect at the next restart.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "config/config.h"
#include "http/web_config.h"
#include "model/metric_family.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/result.h"

namespace gpumeter::cli {

// What a reload read: the agent config (defaults when no file is given) and the web config
// (null when no file is given).
struct ReloadedSettings {
  Config config;
  std::shared_ptr<const WebConfig> web;
};

// The config keys that differ between `before` and `after` and are only read at start (the
// kubelet, the HPC job mapping, the Slurm cgroups, the ledger, the per-process limits), in
// file order, each once, as docs/configuration.md names them. The project rules, the
// environment allow-list and the compat section are applied live and never listed.
std::vector<std::string> restart_only_changes(const Config& before, const Config& after);

// The outcome of the last reload, for the self-metrics.
struct ReloadStatus {
  std::atomic<bool> successful{true};
  std::atomic<double> success_unix{0};  // the last successful load, the start counting as one
};

// gpumeter_config_last_reload_successful and gpumeter_config_last_reload_success_timestamp_seconds.
std::vector<MetricFamily> reload_families(const ReloadStatus& status);

class ConfigReloader {
 public:
  struct Files {
    std::string config_file;      // --config.file; "" for the defaults
    std::string web_config_file;  // --web.config.file; "" for plain HTTP
  };
  // Validates what parsing alone cannot (the compat settings, that the TLS files load) and
  // returns the action that applies `settings`, or the reason they are refused. The action
  // runs only when every check passed, and is expected not to fail.
  using Prepare = std::function<Result<std::function<void()>>(const ReloadedSettings& settings)>;

  // `current` is what is in force (read at start); `clock` is the wall clock of the status's
  // times (null: the system clock; it must outlive the reloader). The files' content now is taken as the content in
  // force.
  ConfigReloader(Files files, ReloadedSettings current, Prepare prepare, Logger& log, const Clock* clock = nullptr);
  ~ConfigReloader();  // stops the periodic check
  ConfigReloader(const ConfigReloader&) = delete;
  ConfigReloader& operator=(const ConfigReloader&) = delete;

  // Reads both files again and applies them, or none of it. One at a time: a second caller
  // waits for the first. `trigger` ("SIGHUP", "/-/reload", "file change") is logged. A file is
  // read with the checks of the start (a regular file of at most 1 MiB), and a web config that
  // would turn basic auth or TLS off is refused: that takes a restart.
  Result<void> reload(std::string_view trigger);

  // Whether either file's content differs from what the last reload (or the start) read. A
  // file that cannot be read counts as changed, so that the reload says why.
  bool files_changed() const;

  // Every `interval`, reloads when files_changed(). Does nothing for a zero interval.
  void start_watch(std::chrono::milliseconds interval);
  void stop_watch();

  const std::shared_ptr<ReloadStatus>& status() const { return status_; }

 private:
  // The settings of the files as last read (config_seen_, web_seen_), checked against those in
  // force.
  Result<ReloadedSettings> parse_files() const;
  double now() const;

  const Files files_;
  Prepare prepare_;
  Logger& log_;
  const Clock& clock_;
  std::shared_ptr<ReloadStatus> status_ = std::make_shared<ReloadStatus>();

  mutable std::mutex mu_;  // one reload at a time; guards the members below
  ReloadedSettings current_;
  // The content the last reload read ("" for no file), or why it could not be read.
  Result<std::string> config_seen_ = std::string(), web_seen_ = std::string();

  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool watch_stop_ = false;
  std::thread watch_;
};

}  // namespace gpumeter::cli
