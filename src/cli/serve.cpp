#include "cli/serve.h"

#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "cli/agent_setup.h"
#include "cli/collector_flags.h"
#include "cli/config_reload.h"
#include "cli/version.h"
#include "collect/collector.h"
#include "http/exposition_store.h"
#include "http/http_server.h"
#include "render/families.h"
#include "transcript/recorder.h"
#include "util/duration.h"
#include "util/log.h"
#include "util/yaml_reader.h"

namespace gpumeter::cli {

namespace fs = std::filesystem;

void setup_serve_command(CLI::App& cmd, ServeOptions& o, int& exit_code) {
  cmd.add_option("--web.listen-address", o.listen_address,
                 "Address to listen on for metrics and the web interface (\":9400\" = all interfaces, the "
                 "port dcgm-exporter uses, so gpumeter can replace it in place)")
      ->capture_default_str();
  cmd.add_option("--web.telemetry-path", o.telemetry_path, "Path under which to expose metrics")
      ->capture_default_str();
  cmd.add_option("--web.config.file", o.web_config_file,
                 "Web configuration file in the Prometheus exporter-toolkit format: TLS (cert_file, key_file, "
                 "client_auth_type, client_ca_file, min/max_version), basic_auth_users (bcrypt), response headers");
  cmd.add_option("--web.max-requests", o.max_requests,
                 "Requests handled off the HTTP event loop at once (password checks, /-/ready, the landing page); "
                 "beyond this they get 503 at once. Scrapes of the telemetry path do not count")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1024u));
  cmd.add_option("--collect.interval", o.collect_interval,
                 "How often each GPU is sampled. 1s matches NVML's own averaging windows (power is a 1 s "
                 "average on Ampere and newer; utilization samples span 1/6 to 1 s), so every sample is "
                 "fresh and none is skipped, and a dead GPU shows as down within 2 s (100ms to 1h)")
      ->capture_default_str();
  cmd.add_option("--log.level", o.log_level, "Only log messages with the given severity or above")
      ->capture_default_str()
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  cmd.add_option("--log.format", o.log_format, "Output format of log messages")
      ->capture_default_str()
      ->check(CLI::IsMember({"logfmt", "json"}));
  cmd.add_option("--path.procfs", o.procfs,
                 "procfs mountpoint: /proc/<pid>/cgroup, status and environ of GPU processes name their owners")
      ->capture_default_str();
  cmd.add_option("--path.sysfs", o.sysfs, "sysfs mountpoint (not read yet)")->capture_default_str();
  cmd.add_option("--path.rootfs", o.rootfs,
                 "Where the host's root file system is (\"/host\" in a container): etc/passwd for user names, "
                 "the kubelet's pod-resources socket")
      ->capture_default_str();
  cmd.add_option("--config.file", o.config_file,
                 "Agent configuration (YAML): owner attribution, project rules, ledger and per-process "
                 "limits. See docs/configuration.md; every key has a default")
      ->check(CLI::ExistingFile);
  cmd.add_option("--ledger.state-file", o.ledger_state_file,
                 "Where the usage ledger is saved (atomically, every checkpoint interval and at shutdown) so "
                 "a restart resumes every counter; \"\" keeps it in memory only")
      ->capture_default_str();
  cmd.add_option("--nvml.library", o.nvml_library,
                 "Path of the NVML library to load (default: libnvidia-ml.so.1, then libnvidia-ml.so, from "
                 "the dynamic linker's search path)");
  cmd.add_option("--rocm.library", o.rocm_library,
                 "Path of the ROCm SMI library to load for AMD GPUs (default: librocm_smi64.so.1, .so.7, .so.6, "
                 ".so.5, .so, then /opt/rocm/lib/librocm_smi64.so)");
  cmd.add_option("--sim.scenario", o.sim_scenario,
                 "Run on the fleet simulator playing this scenario file instead of real GPUs (loads the "
                 "bundled simulator library unless --nvml.library is given); a scenario that names a recording "
                 "(replay: FILE) replays that NVML transcript")
      ->check(CLI::ExistingFile);
  cmd.add_option("--nvml.record", o.nvml_record,
                 "Write a transcript of every NVML call (function, arguments, return code, decoded outputs, "
                 "monotonic and wall times) to this file, as JSON lines; a scenario with `replay:` serves it back "
                 "(docs/real-hardware.md)");
  cmd.add_option("--nvml.record-duration", o.nvml_record_duration,
                 "Stop recording after this long (the agent goes on)")
      ->capture_default_str();
  cmd.add_option("--nvml.record-max-bytes", o.nvml_record_max_bytes, "Stop recording before the file passes this size")
      ->capture_default_str();
  cmd.add_flag("--nvml.record-anonymize", o.nvml_record_anonymize,
               "Replace serials, UUIDs and pids in the transcript, the same one for the same value, so it can be "
               "shared (host names are never recorded)");
  cmd.add_option("--compat", o.compat,
                 "Also serve another exporter's metric names, rendered from the same readings: dcgm-exporter, "
                 "dcgm-exporter-1.x or nvidia-smi (repeat the flag for several; see docs/migrating.md)")
      ->check(CLI::IsMember({"dcgm-exporter", "dcgm-exporter-1.x", "nvidia-smi"}));
  cmd.add_option("--compat.collectors", o.compat_collectors,
                 "dcgm-exporter counters file (its -f/--collectors format: DCGM_FIELD, type, help) choosing the "
                 "fields of --compat dcgm-exporter (default: dcgm-exporter's default counters)")
      ->check(CLI::ExistingFile);
  cmd.add_flag("--web.enable-lifecycle", o.enable_lifecycle,
               "Enable POST /-/reload, which reloads the configuration as SIGHUP does (without it, 403)");
  cmd.add_option("--config.reload-interval", o.config_reload_interval,
                 "How often --config.file and --web.config.file are checked for a change of content, which "
                 "reloads them (a Kubernetes ConfigMap volume swaps its files); 0 turns the check off")
      ->capture_default_str();
  add_collector_flags(cmd, o.collectors);
  cmd.callback([&o, &exit_code] { exit_code = run_serve(o); });
}


namespace {

// --nvml.record and its limits; none when the flag is not given.
Result<std::optional<transcript::RecordOptions>> record_options(const ServeOptions& o) {
  if (o.nvml_record.empty()) return std::optional<transcript::RecordOptions>();
  transcript::RecordOptions r;
  r.path = o.nvml_record;
  r.anonymize = o.nvml_record_anonymize;
  r.agent_version = std::string(kVersion);
  auto duration = parse_duration(o.nvml_record_duration);
  if (!duration || duration->count() <= 0)
    return Error{0, fmt::format("--nvml.record-duration: expected a duration such as 10m, got '{}'", o.nvml_record_duration)};
  r.duration = *duration;
  auto bytes = units::parse_byte_size(o.nvml_record_max_bytes);
  if (!bytes || *bytes < 4096)
    return Error{0, fmt::format("--nvml.record-max-bytes: expected a size of at least 4KiB, got '{}'", o.nvml_record_max_bytes)};
  r.max_bytes = *bytes;
  return std::optional<transcript::RecordOptions>(r);
}

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

}  // namespace

int run_serve(const ServeOptions& o) {
  // glibc gives each thread that allocates an arena of its own, up to 8 per core: the agent's
  // threads (one per GPU, HTTP handlers) allocate little and rarely at once, and each arena
  // keeps its own free memory, so two arenas lower the peak. MALLOC_ARENA_MAX in the
  // environment still decides if set.
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) ::mallopt(M_ARENA_MAX, 2);
  Logger log(*parse_log_level(o.log_level), *parse_log_format(o.log_format));
  auto interval = parse_duration(o.collect_interval);
  if (!interval) {
    log.error("bad flag --collect.interval", {{"err", interval.error().message}});
    return 2;
  }
  if (interval->count() < 100 || interval->count() > 3'600'000) {
    log.error("bad flag --collect.interval", {{"err", "must be between 100ms and 1h"}});
    return 2;
  }
  auto reload_interval = parse_duration(o.config_reload_interval);
  if (!reload_interval) {
    log.error("bad flag --config.reload-interval", {{"err", reload_interval.error().message}});
    return 2;
  }
  if (reload_interval->count() != 0 && reload_interval->count() < 1000) {
    log.error("bad flag --config.reload-interval", {{"err", "must be 0 (off) or at least 1s"}});
    return 2;
  }
  std::shared_ptr<const WebConfig> web_config;
  if (!o.web_config_file.empty()) {
    auto loaded = load_web_config(o.web_config_file);
    if (!loaded) {
      log.error("bad flag --web.config.file", {{"err", loaded.error().message}});
      return 2;
    }
    web_config = std::make_shared<const WebConfig>(std::move(loaded).value());
  }

  auto loaded_config = load_agent_config(o.config_file);
  if (!loaded_config) {
    log.error("bad flag --config.file", {{"err", loaded_config.error().message}});
    return 2;
  }
  if (!o.sim_scenario.empty()) {
    if (auto ok = check_sim_scenario(o.sim_scenario); !ok) {
      log.error("bad flag --sim.scenario", {{"err", ok.error().message}});
      return 2;
    }
  }
  const Config config = std::move(loaded_config).value();
  auto plan = make_collection_plan(o.collectors, config.collectors);
  if (!plan) {
    log.error("bad collector settings", {{"err", plan.error().message}});
    return 2;
  }
  auto compat = compat_options(config, o.compat, o.compat_collectors, log);
  if (!compat) {
    log.error("bad compat settings", {{"err", compat.error().message}});
    return 2;
  }

  HttpServerOptions http_options;
  http_options.listen_address = o.listen_address;
  http_options.telemetry_path = o.telemetry_path;
  http_options.max_threads = o.max_requests;
  http_options.web_config = web_config;
  http_options.enable_lifecycle = o.enable_lifecycle;
  if (auto valid = validate_options(http_options); !valid) {
    log.error("bad flag", {{"err", valid.error().message}});
    return 2;
  }

  // Signals are handled by sigwait() below, so block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  log.info("starting gpumeter", {{"version", kVersion}, {"revision", kRevision}});

  auto record = record_options(o);
  if (!record) {
    log.error("bad flag --nvml.record", {{"err", record.error().message}});
    return 2;
  }
  auto created = create_nvml_backend({o.nvml_library, o.sim_scenario, *record}, log);
  if (!created) {
    log.error("cannot start NVML", {{"err", created.error().message}});
    return 1;
  }
  auto nvml = std::move(created).value();
  auto rocm = create_rocm_backend(o.rocm_library, log);
  log_backend_states(nvml->status(), rocm->status(), log);

  // Attribution and the ledger.
  const HostOwnerResolverOptions ro = owner_resolver_options(config, o.procfs, o.rootfs);
  HostOwnerResolver resolver(ro, log);
  if (!ro.kubelet_socket.empty()) log.info("naming pods from the kubelet", {{"socket", ro.kubelet_socket}});
  if (!ro.slurm_cgroups.cgroup_root.empty()) {
    log.info("reading Slurm jobs' GPUs from their cgroups", {{"cgroup_root", ro.slurm_cgroups.cgroup_root}});
  }
  log.info("ledger allocation policy",
           {{"allocation", ro.allocations ? "scheduler" : "process"},
            {"configured", std::string(to_string(config.ledger.allocation))}});

  UsageTrackerOptions to = usage_tracker_options(config, *interval, ro);
  to.state_file = o.ledger_state_file;
  if (!to.state_file.empty()) {
    const fs::path dir = fs::path(to.state_file).parent_path();
    std::error_code ec;
    if (!dir.empty() && !fs::is_directory(dir, ec)) {
      log.warn("ledger state directory missing; the ledger is kept in memory only (a restart resets it)",
               {{"path", to.state_file}});
      to.state_file.clear();
    }
  }
  // Graphics clients of the AMD GPUs record exact engine time in DRM fdinfo; ROCm compute does
  // not (docs/rocm-behaviour.md). Walked only where ROCm SMI found GPUs.
  std::unique_ptr<DrmClientScanner> drm_clients;
  if (rocm->status().up && rocm->device_count() > 0) {
    drm_clients = std::make_unique<DrmClientScanner>(DrmScanOptions{.procfs = o.procfs});
    to.drm_clients = drm_clients.get();
    log.info("reading DRM clients' engine time from fdinfo", {{"procfs", o.procfs}});
  }
  UsageTracker tracker(to, resolver, log);
  if (auto loaded = tracker.load_state(); !loaded) {
    log.error("cannot start", {{"err", loaded.error().message}});
    return 2;
  }

  LiveCompat live_compat(std::move(compat).value());
  // Set up before the store so that the render lambda can read its status; the server it
  // reconfigures is bound below.
  HttpServer* server_ptr = nullptr;
  Collector* collector_ptr = nullptr;
  ConfigReloader reloader(
      {o.config_file, o.web_config_file}, {config, web_config},
      [&](const ReloadedSettings& next) -> Result<std::function<void()>> {
        auto next_compat = compat_options(next.config, o.compat, o.compat_collectors, log, live_compat.get().get());
        if (!next_compat) return Error{0, "compat settings: " + next_compat.error().message};
        auto next_plan = make_collection_plan(o.collectors, next.config.collectors);
        if (!next_plan) return Error{0, "collector settings: " + next_plan.error().message};
        if (next.web) {
          if (auto ok = check_web_config(*next.web); !ok) return ok.error();
        }
        return std::function<void()>([&, next, c = std::move(next_compat).value(),
                                      p = std::move(next_plan).value()]() mutable {
          resolver.update_rules(next.config.project.resolver, next.config.attribution.environment);
          live_compat.set(std::move(c));
          if (collector_ptr != nullptr && *collector_ptr->plan() != p) {
            log.info("collectors", {{"enabled", p.enabled_names()}});
            collector_ptr->set_plan(std::move(p));
          }
          if (server_ptr != nullptr) {
            if (auto ok = server_ptr->set_web_config(next.web); !ok) {
              log.error("cannot serve the new web config; the previous one stays", {{"err", ok.error().message}});
            }
          }
        });
      },
      log);
  std::shared_ptr<ReloadStatus> reload_status = reloader.status();

  ExpositionStore store([&live_compat, reload_status](const Snapshot& s) {
    std::vector<MetricFamily> families = build_families(s);
    std::vector<MetricFamily> reloads = reload_families(*reload_status);
    families.insert(families.end(), std::make_move_iterator(reloads.begin()), std::make_move_iterator(reloads.end()));
    std::shared_ptr<const CompatOptions> compat = live_compat.get();
    if (compat->sets.empty()) return families;
    std::vector<MetricFamily> more = build_compat_families(s, *compat);
    families.insert(families.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    return families;
  });
  CollectorOptions collector_options;
  collector_options.interval = *interval;
  collector_options.observer = &tracker;
  collector_options.build = {kVersion, kRevision};
  collector_options.plan = *plan;
  log.info("collectors", {{"enabled", plan->enabled_names()}});
  std::vector<Backend*> backends{nvml.get(), rocm.get()};
  Collector collector(backends, collector_options,
                      [&store, &log](std::shared_ptr<const Snapshot> s) {
                        auto published = store.publish(std::move(s));
                        if (!published) log.error("cannot render snapshot", {{"err", published.error().message}});
                      },
                      log);
  collector_ptr = &collector;

  http_options.readiness = [&store, &backends] { return readiness(backends, store); };
  http_options.reload = [&reloader]() { return reloader.reload("/-/reload"); };
  HttpServer server(store, http_options, &log);
  server_ptr = &server;
  resolver.start();
  tracker.start();
  collector.start();
  auto started = server.start();
  if (!started) {
    log.error("cannot serve HTTP", {{"address", o.listen_address}, {"err", started.error().message}});
    const size_t stuck = collector.stop();
    tracker.stop();
    resolver.stop();
    if (stuck > 0) _exit(1);
    return 1;
  }
  log.info("collecting", {{"gpus", std::to_string(nvml->device_count() + rocm->device_count())},
                          {"interval", o.collect_interval}});
  reloader.start_watch(*reload_interval);

  int sig = 0;
  while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) (void)reloader.reload("SIGHUP");
  log.info("shutting down", {{"signal", sig == SIGINT ? "SIGINT" : "SIGTERM"}});
  reloader.stop_watch();
  server.stop();
  size_t stuck = collector.stop();
  tracker.stop();  // the last checkpoint
  resolver.stop();
  transcript::stop_recording("shutdown");
  if (stuck > 0) {
    // A thread is still inside the vendor library; unloading it now would crash that thread.
    log.warn("GPU workers stuck in driver calls; exiting without NVML shutdown", {{"workers", std::to_string(stuck)}});
    _exit(0);
  }
  return 0;
}

}  // namespace gpumeter::cli
