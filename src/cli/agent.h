#pragma once
// The node agent that `gpumeter serve` runs: every part it is made of, owned in the order it is
// built, so that nothing refers to a part before it exists and everything stops in reverse.

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "cli/agent_setup.h"
#include "cli/config_reload.h"
#include "cli/serve.h"
#include "collect/collection_scheduler.h"
#include "http/exposition_store.h"
#include "http/http_server.h"
#include "render/series_cap.h"
#include "util/log.h"
#include "util/result.h"

namespace gpumeter::cli {

// The compat sets served, replaced by a reload; each snapshot renders with those in force when
// it is first scraped.
class LiveCompat {
 public:
  explicit LiveCompat(CompatOptions o) : options_(std::make_shared<const CompatOptions>(std::move(o))) {}
  std::shared_ptr<const CompatOptions> get() const {
    std::lock_guard lock(mu_);
    return options_;
  }
  void set(CompatOptions o) {
    auto next = std::make_shared<const CompatOptions>(std::move(o));
    std::lock_guard lock(mu_);
    options_ = std::move(next);
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const CompatOptions> options_;
};

// The flags and files of `serve`, read and checked before any part is built.
struct AgentSettings {
  std::chrono::milliseconds interval{1000};
  std::chrono::milliseconds reload_interval{0};
  Config config;
  CollectionPlan plan;
  CompatOptions compat;
  HttpServerOptions http;
};

class Agent {
 public:
  // The exit status asking the service manager for a new process: NVML cannot be used again in
  // this one (nvmlInit_v2 failing at start after its retries, or the driver changed under it).
  static constexpr int kExitRestart = 3;

  // Reads and checks the flags and files, then builds every part; no thread runs yet. Each
  // failure is logged where it is found, and the error's code is the exit code: 2 for a bad
  // flag, file or ledger state, 1 when NVML cannot be started, kExitRestart when its library
  // loads but nvmlInit_v2 keeps failing.
  static Result<std::unique_ptr<Agent>> create(const ServeOptions& options, Logger& log);

  // Starts the parts and serves until SIGINT or SIGTERM, reloading at each SIGHUP, or until NVML
  // cannot be used again in this process; then stops them in reverse (the ledger saved) and
  // returns the exit code (1 when the HTTP server cannot start, kExitRestart for NVML). A worker
  // stuck in the driver makes it exit the process at once, without unloading the library.
  int run_until_signal();

  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

 private:
  Agent(const ServeOptions& options, Logger& log, AgentSettings settings, sigset_t signals,
        std::unique_ptr<NvmlBackend> nvml);

  // What the constructor derives from the parts built before: the tracker's options (the state
  // file, the DRM scanner), the reload step, the renderer, the collector's options and sink, the
  // HTTP server's hooks.
  std::unique_ptr<DrmClientScanner> make_drm_scanner();
  UsageTrackerOptions tracker_options();
  ConfigReloader::Prepare prepare_reload();
  FamilyBuilder family_builder();
  void log_series_cut(std::size_t max, const SeriesCut& cut);
  CollectionSchedulerOptions scheduler_options();
  HttpServerOptions http_options();
  // Stops the parts in reverse; returns the number of GPU workers stuck in the driver.
  std::size_t stop_parts();
  // Handles signals until one asks the agent to stop (nullopt), or NVML's restart reason.
  std::optional<std::string> wait_for_stop();

  const ServeOptions options_;
  Logger& log_;
  AgentSettings settings_;
  sigset_t signals_;
  std::unique_ptr<NvmlBackend> nvml_;
  std::unique_ptr<RocmBackend> rocm_;
  std::vector<Backend*> backends_;
  HostOwnerResolverOptions resolver_options_;
  HostOwnerResolver resolver_;
  std::unique_ptr<DrmClientScanner> drm_clients_;
  UsageTracker tracker_;
  LiveCompat live_compat_;
  ConfigReloader reloader_;
  std::shared_ptr<ReloadStatus> reload_status_;
  // What the series cap did at the last render: 0 nothing, 1 left detail out, 2 could not meet
  // the cap; each change is logged once.
  std::atomic<int> series_cap_state_{0};
  ExpositionStore store_;
  CollectionScheduler scheduler_;
  HttpServer server_;
};

}  // namespace gpumeter::cli
