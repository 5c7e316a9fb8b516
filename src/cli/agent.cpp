#include "cli/agent.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iterator>

#include <fmt/format.h>

#include "cli/version.h"
#include "cli/release.h"
#include "render/families.h"
#include "render/series_cap.h"
#include "transcript/recorder.h"
#include "util/duration.h"
#include "util/yaml_reader.h"

namespace gpumeter::cli {

namespace fs = std::filesystem;

namespace {

// Logs a refused flag as the agent always has, the message then the reason as `err`, and
// returns it with the exit code.
Error logged(Logger& log, const std::string& what, const Error& e, int exit_code = 2) {
  log.error(what, {{"err", e.message}});
  return Error{exit_code, what + ": " + e.message};
}

// --collect.interval and --config.reload-interval, within their bounds.
Result<void> read_intervals(const ServeOptions& o, AgentSettings& s, Logger& log) {
  auto interval = parse_duration(o.collect_interval);
  if (!interval) return logged(log, "bad flag --collect.interval", interval.error());
  if (interval->count() < 100 || interval->count() > 3'600'000) {
    return logged(log, "bad flag --collect.interval", Error{0, "must be between 100ms and 1h"});
  }
  auto reload = parse_duration(o.config_reload_interval);
  if (!reload) return logged(log, "bad flag --config.reload-interval", reload.error());
  if (reload->count() != 0 && reload->count() < 1000) {
    return logged(log, "bad flag --config.reload-interval", Error{0, "must be 0 (off) or at least 1s"});
  }
  s.interval = *interval;
  s.reload_interval = *reload;
  return {};
}

// Every flag and file, in the order the agent has always checked them; the first refused one is
// logged and returned.
Result<AgentSettings> read_settings(const ServeOptions& o, Logger& log) {
  AgentSettings s;
  if (auto ok = read_intervals(o, s, log); !ok) return ok.error();
  if (!o.web_config_file.empty()) {
    auto loaded = load_web_config(o.web_config_file);
    if (!loaded) return logged(log, "bad flag --web.config.file", loaded.error());
    s.http.web_config = std::make_shared<const WebConfig>(std::move(loaded).value());
  }
  auto config = load_agent_config(o.config_file);
  if (!config) return logged(log, "bad flag --config.file", config.error());
  if (!o.sim_scenario.empty()) {
    if (auto ok = check_sim_scenario(o.sim_scenario, o.nvml_library); !ok)
      return logged(log, "bad flag --sim.scenario", ok.error());
  }
  s.config = std::move(config).value();
  auto compat = compat_options(s.config, o.compat, o.compat_collectors);
  if (!compat) return logged(log, "bad compat settings", compat.error());
  s.compat = std::move(compat).value();
  auto plan = make_collection_plan(o.collectors, s.config.collectors, compat_collectors(s.compat));
  if (!plan) return logged(log, "bad collector settings", plan.error());
  s.plan = std::move(plan).value();
  log_compat(s.compat, s.plan.enabled, log);
  s.http.listen_address = o.listen_address;
  s.http.telemetry_path = o.telemetry_path;
  s.http.max_threads = o.max_requests;
  s.http.enable_lifecycle = o.enable_lifecycle;
  if (auto valid = validate_options(s.http); !valid) return logged(log, "bad flag", valid.error());
  return s;
}

// --nvml.record and its limits; none when the flag is not given.
Result<std::optional<transcript::RecordOptions>> record_options(const ServeOptions& o) {
  if (o.nvml_record.empty()) return std::optional<transcript::RecordOptions>();
  transcript::RecordOptions r;
  r.path = o.nvml_record;
  r.anonymize = o.nvml_record_anonymize;
  r.agent_version = std::string(kVersion);
  auto duration = parse_duration(o.nvml_record_duration);
  if (!duration || duration->count() <= 0)
    return Error{
        0, fmt::format("--nvml.record-duration: expected a duration such as 10m, got '{}'", o.nvml_record_duration)};
  r.duration = *duration;
  auto bytes = units::parse_byte_size(o.nvml_record_max_bytes);
  if (!bytes || *bytes < 4096)
    return Error{
        0, fmt::format("--nvml.record-max-bytes: expected a size of at least 4KiB, got '{}'", o.nvml_record_max_bytes)};
  r.max_bytes = *bytes;
  return std::optional<transcript::RecordOptions>(r);
}

// What the start says of the backends: NVML's state (ROCm SMI's is logged where it is made),
// and a warning when none is up.
void log_backend_states(const BackendStatus& nvml, const BackendStatus& rocm, Logger& log) {
  if (nvml.absent) {
    log.info("NVML backend absent", {{"reason", nvml.detail}});
  } else if (!nvml.up) {
    log.warn("NVML backend down; serving gpumeter_backend_up{backend=\"nvml\"} 0", {{"reason", nvml.detail}});
  }
  if (!nvml.up && !rocm.up) {
    log.warn("no GPU backend is up: nothing is measured, and /-/ready answers 503",
             {{"nvml", nvml.detail}, {"rocm_smi", rocm.detail}});
  }
}

// Ready when a backend is up: a node has NVIDIA GPUs, AMD GPUs or both, and the vendor it lacks
// is absent. Otherwise the reason names each backend's state.
Readiness readiness(const std::vector<Backend*>& backends, const ExpositionStore& store) {
  if (std::none_of(backends.begin(), backends.end(), [](Backend* b) { return b->status().up; })) {
    std::string why;
    for (Backend* b : backends) {
      const BackendStatus s = b->status();
      why += (why.empty() ? "" : "; ") + s.backend + (s.absent ? " absent: " : " down: ") + s.detail;
    }
    return {false, "no GPU backend is up (" + why + ")"};
  }
  if (!store.latest()) return {false, "no snapshot collected yet"};
  return {true, ""};
}

// The attribution sources and the allocation policy the agent starts with, logged.
void log_attribution(const HostOwnerResolverOptions& ro, const Config& config, Logger& log) {
  if (!ro.kubelet_socket.empty()) log.info("naming pods from the kubelet", {{"socket", ro.kubelet_socket}});
  if (!ro.slurm_cgroups.cgroup_root.empty()) {
    log.info("reading Slurm jobs' GPUs from their cgroups", {{"cgroup_root", ro.slurm_cgroups.cgroup_root}});
  }
  log.info("ledger allocation policy", {{"allocation", ro.allocations ? "scheduler" : "process"},
                                        {"configured", std::string(to_string(config.ledger.allocation))}});
}

}  // namespace

Result<std::unique_ptr<Agent>> Agent::create(const ServeOptions& o, Logger& log) {
  auto settings = read_settings(o, log);
  if (!settings) return settings.error();

  // Signals are handled by sigwait() in run_until_signal, so block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  log.info("starting gpumeter", {{"version", kVersion}, {"revision", kRevision}});
  auto record = record_options(o);
  if (!record) return logged(log, "bad flag --nvml.record", record.error());
  auto nvml = create_nvml_backend({o.nvml_library, o.sim_scenario, *record}, log);
  if (!nvml) return logged(log, "cannot start NVML", nvml.error(), 1);
  if (auto why = (*nvml)->restart_reason()) {
    return logged(log, "cannot start NVML; exiting for a restart", Error{kExitRestart, *why}, kExitRestart);
  }

  std::unique_ptr<Agent> agent(new Agent(o, log, std::move(settings).value(), signals, std::move(nvml).value()));
  if (auto loaded = agent->tracker_.load_state(); !loaded) return logged(log, "cannot start", loaded.error());
  return agent;
}

Agent::Agent(const ServeOptions& options, Logger& log, AgentSettings settings, sigset_t signals,
             std::unique_ptr<NvmlBackend> nvml)
    : options_(options),
      log_(log),
      settings_(std::move(settings)),
      signals_(signals),
      nvml_(std::move(nvml)),
      rocm_(create_rocm_backend(options_.rocm_library, options_.sysfs, log_)),
      backends_{nvml_.get(), rocm_.get()},
      resolver_options_(owner_resolver_options(settings_.config, options_.procfs, options_.rootfs, settings_.interval)),
      resolver_(resolver_options_, log_),
      drm_clients_(make_drm_scanner()),
      tracker_(tracker_options(), resolver_, log_),
      live_compat_(settings_.compat),
      reloader_({options_.config_file, options_.web_config_file}, {settings_.config, settings_.http.web_config},
                prepare_reload(), log_),
      reload_status_(reloader_.status()),
      store_(family_builder()),
      scheduler_(
          backends_, scheduler_options(),
          [this](std::shared_ptr<const Snapshot> s) {
            auto published = store_.publish(std::move(s));
            if (!published) log_.error("cannot render snapshot", {{"err", published.error().message}});
          },
          log_),
      server_(store_, http_options(), &log_) {
  log_backend_states(nvml_->status(), rocm_->status(), log_);
  log_attribution(resolver_options_, settings_.config, log_);
}

// Graphics clients of the AMD GPUs record exact engine time in DRM fdinfo; ROCm compute does
// not (docs/rocm-behaviour.md). Walked only where ROCm SMI found GPUs.
std::unique_ptr<DrmClientScanner> Agent::make_drm_scanner() {
  if (!rocm_->status().up || rocm_->device_count() == 0) return nullptr;
  log_.info("reading DRM clients' engine time from fdinfo", {{"procfs", options_.procfs}});
  return std::make_unique<DrmClientScanner>(DrmScanOptions{.procfs = options_.procfs});
}

UsageTrackerOptions Agent::tracker_options() {
  UsageTrackerOptions to = usage_tracker_options(settings_.config, settings_.interval, resolver_options_);
  to.state_file = options_.ledger_state_file;
  if (!to.state_file.empty()) {
    const fs::path dir = fs::path(to.state_file).parent_path();
    std::error_code ec;
    if (!dir.empty() && !fs::is_directory(dir, ec)) {
      log_.warn("ledger state directory missing; the ledger is kept in memory only (a restart resets it)",
                {{"path", to.state_file}});
      to.state_file.clear();
    }
  }
  to.drm_clients = drm_clients_.get();
  return to;
}

// A reload: the compat sets, the collection plan and the web config are checked first, and
// applied together only when all of them are good.
ConfigReloader::Prepare Agent::prepare_reload() {
  return [this](const ReloadedSettings& next) -> Result<std::function<void()>> {
    const ServeOptions& o = options_;
    auto next_compat = compat_options(next.config, o.compat, o.compat_collectors);
    if (!next_compat) return Error{0, "compat settings: " + next_compat.error().message};
    auto next_plan = make_collection_plan(o.collectors, next.config.collectors, compat_collectors(*next_compat));
    if (!next_plan) return Error{0, "collector settings: " + next_plan.error().message};
    const auto live = live_compat_.get();
    const std::pair<const CompatOptions*, CollectorSet> in_force{live.get(), scheduler_.plan()->enabled};
    log_compat(*next_compat, next_plan->enabled, log_, &in_force);
    if (next.web) {
      if (auto ok = check_web_config(*next.web); !ok) return ok.error();
    }
    return std::function<void()>(
        [this, next, c = std::move(next_compat).value(), p = std::move(next_plan).value()]() mutable {
          resolver_.update_rules(next.config.project.resolver, next.config.attribution.environment);
          live_compat_.set(std::move(c));
          if (*scheduler_.plan() != p) {
            log_.info("collectors", {{"enabled", p.enabled_names()}});
            scheduler_.set_plan(p);
          }
          if (auto ok = server_.set_web_config(next.web); !ok) {
            log_.error("cannot serve the new web config; the previous one stays", {{"err", ok.error().message}});
          }
        });
  };
}

namespace {

void append(std::vector<MetricFamily>& to, std::vector<MetricFamily> more) {
  to.insert(to.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
}

}  // namespace

// The families of a snapshot: gpumeter's own, the reloads', then the compat sets in force, cut
// to the series cap.
FamilyBuilder Agent::family_builder() {
  return [this](const Snapshot& s) {
    std::vector<MetricFamily> families = build_families(s);
    append(families, reload_families(*reload_status_));
    std::shared_ptr<const CompatOptions> compat = live_compat_.get();
    if (!compat->sets.empty()) append(families, build_compat_families(s, *compat));
    const std::size_t max = settings_.config.exposition.max_series;
    if (max == 0) return families;
    const SeriesCut cut = cap_series(families, s, max);
    log_series_cut(max, cut);
    append(families, series_cap_families(max, cut));
    return families;
  };
}

void Agent::log_series_cut(std::size_t max, const SeriesCut& cut) {
  const int state = cut.over ? 2 : cut.dropped() > 0 ? 1 : 0;
  if (series_cap_state_.exchange(state) == state) return;
  const std::string wanted = std::to_string(cut.wanted + kSeriesCapReserved);
  if (state == 0) {
    log_.info("series within exposition.max_series again", {{"max_series", std::to_string(max)}, {"series", wanted}});
  } else if (state == 1) {
    LogFields fields{{"max_series", std::to_string(max)}, {"series", wanted}};
    for (const char* kind : kSeriesCutKinds) {
      fields.emplace_back(std::string("dropped_") + kind, std::to_string(cut.dropped(kind)));
    }
    log_.warn("series over exposition.max_series; detail left out (gpumeter_series_limit_dropped)", fields);
  } else {
    log_.warn(
        "exposition.max_series is below the series never cut (the ledger, device values, compat sets, the "
        "agent's health); serving more than the cap",
        {{"max_series", std::to_string(max)}, {"series", std::to_string(cut.served + kSeriesCapReserved)}});
  }
}

CollectionSchedulerOptions Agent::scheduler_options() {
  CollectionSchedulerOptions c;
  c.interval = settings_.interval;
  c.observer = &tracker_;
  c.build = {kVersion, kRevision};
  c.plan = settings_.plan;
  log_.info("collectors", {{"enabled", settings_.plan.enabled_names()}});
  return c;
}

HttpServerOptions Agent::http_options() {
  HttpServerOptions h = settings_.http;
  h.readiness = [this] { return readiness(backends_, store_); };
  h.reload = [this]() { return reloader_.reload("/-/reload"); };
  h.release = [this](std::string_view query) -> Result<std::string> {
    auto period = release_period(query);
    if (!period) return period.error();
    return release_backends(backends_, *period, "/-/release", log_);
  };
  return h;
}

std::size_t Agent::stop_parts() {
  server_.stop();
  const std::size_t stuck = scheduler_.stop();
  tracker_.stop();  // the last checkpoint
  resolver_.stop();
  return stuck;
}

int Agent::run_until_signal() {
  resolver_.start();
  tracker_.start();
  scheduler_.start();
  if (auto started = server_.start(); !started) {
    log_.error("cannot serve HTTP", {{"address", options_.listen_address}, {"err", started.error().message}});
    if (stop_parts() > 0) _exit(1);
    return 1;
  }
  log_.info("collecting", {{"gpus", std::to_string(nvml_->device_count() + rocm_->device_count())},
                           {"interval", options_.collect_interval}});
  reloader_.start_watch(settings_.reload_interval);

  const std::optional<std::string> restart = wait_for_stop();
  reloader_.stop_watch();
  const std::size_t stuck = stop_parts();
  transcript::stop_recording("shutdown");
  if (stuck > 0) {
    // A thread is still inside the vendor library; unloading it now would crash that thread.
    log_.warn("GPU workers stuck in driver calls; exiting without NVML shutdown", {{"workers", std::to_string(stuck)}});
    _exit(restart ? kExitRestart : 0);
  }
  return restart ? kExitRestart : 0;
}

std::optional<std::string> Agent::wait_for_stop() {
  // Wakes once a second to see whether NVML can still be used in this process.
  const timespec second{1, 0};
  while (true) {
    const int sig = sigtimedwait(&signals_, nullptr, &second);
    if (sig == SIGHUP) {
      (void)reloader_.reload("SIGHUP");
    } else if (sig == SIGUSR1) {
      (void)release_backends(backends_, kDefaultRelease, "SIGUSR1", log_);
    } else if (sig == SIGINT || sig == SIGTERM) {
      log_.info("shutting down", {{"signal", sig == SIGINT ? "SIGINT" : "SIGTERM"}});
      return std::nullopt;
    } else if (auto why = nvml_->restart_reason()) {
      log_.error("NVML cannot be used again in this process; saving the ledger and exiting for a restart",
                 {{"err", *why}, {"exit_status", std::to_string(kExitRestart)}});
      return why;
    }
  }
}

}  // namespace gpumeter::cli
