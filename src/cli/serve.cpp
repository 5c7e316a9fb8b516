#include "cli/serve.h"

#include "cli/agent.h"
#include "cli/collector_flags.h"
#include "cli/shared_flags.h"
#include "util/log.h"
#include "util/malloc_arenas.h"

namespace gpumeter::cli {

void setup_serve_command(CLI::App& cmd, ServeOptions& o, int& exit_code) {
  cmd.add_option("--web.listen-address", o.listen_address,
                 "Address to listen on for metrics and the web interface (\":9400\" = all interfaces, the "
                 "port dcgm-exporter uses, so gpumeter can replace it in place)")
      ->capture_default_str();
  cmd.add_option("--web.telemetry-path", o.telemetry_path, "Path under which to expose metrics")->capture_default_str();
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
  cmd.add_option("--path.sysfs", o.sysfs,
                 "sysfs mountpoint: class/drm under it is where AMD GPUs are looked for before ROCm SMI is loaded")
      ->capture_default_str();
  cmd.add_option("--config.file", o.config_file,
                 "Agent configuration (YAML): owner attribution, project rules, ledger and per-process "
                 "limits. See docs/configuration.md; every key has a default")
      ->check(CLI::ExistingFile);
  cmd.add_option("--ledger.state-file", o.ledger_state_file,
                 "Where the usage ledger is saved (atomically, every checkpoint interval and at shutdown) so "
                 "a restart resumes every counter; \"\" keeps it in memory only")
      ->capture_default_str();
  cmd.add_option("--rocm.library", o.rocm_library,
                 "Path of the ROCm SMI library to load for AMD GPUs (default: librocm_smi64.so.1, .so.7, .so.6, "
                 ".so.5, .so, then /opt/rocm/lib/librocm_smi64.so)");
  cmd.add_option("--nvml.record", o.nvml_record,
                 "Write a transcript of every NVML call (function, arguments, return code, decoded outputs, "
                 "monotonic and wall times) to this file, as JSON lines; a scenario with `replay:` serves it back "
                 "(docs/real-hardware.md)");
  cmd.add_option("--nvml.record-duration", o.nvml_record_duration, "Stop recording after this long (the agent goes on)")
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
               "Enable POST /-/reload, which reloads the configuration as SIGHUP does, and "
               "POST /-/release?for=10m, which closes NVML for that long so that a GPU can be reset, as SIGUSR1 "
               "does (docs/alerts.md#resetting-a-gpu; without this flag, 403)");
  cmd.add_option("--config.reload-interval", o.config_reload_interval,
                 "How often --config.file and --web.config.file are checked for a change of content, which "
                 "reloads them (a Kubernetes ConfigMap volume swaps its files); 0 turns the check off")
      ->capture_default_str();
  add_source_flags(cmd, {o.nvml_library, o.sim_scenario, o.procfs, o.rootfs},
                   "; a scenario that names a recording (replay: FILE) replays that NVML transcript");
  add_collector_flags(cmd, o.collectors);
  cmd.callback([&o, &exit_code] { exit_code = run_serve(o); });
}

int run_serve(const ServeOptions& o) {
  // The agent's threads (one per GPU, HTTP handlers) allocate little and rarely at once.
  limit_malloc_arenas();
  Logger log(*parse_log_level(o.log_level), *parse_log_format(o.log_format));
  auto agent = Agent::create(o, log);
  if (!agent) return agent.error().code;
  return (*agent)->run_until_signal();
}

}  // namespace gpumeter::cli
