#pragma once
// `gpumeter serve`: the node agent.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "collect/collection_plan.h"

namespace gpumeter::cli {

struct ServeOptions {
  std::string listen_address = ":9400";
  std::string telemetry_path = "/metrics";
  std::string web_config_file;
  unsigned max_requests = 16;
  std::string log_level = "info";
  std::string log_format = "logfmt";
  std::string procfs = "/proc";
  std::string sysfs = "/sys";
  std::string rootfs = "/";
  std::string config_file;
  std::string ledger_state_file = "/var/lib/gpumeter/ledger.json";
  std::string nvml_library;
  std::string rocm_library;
  std::string sim_scenario;
  std::string nvml_record;  // --nvml.record: transcript file, "" for none
  std::string nvml_record_duration = "10m";
  std::string nvml_record_max_bytes = "256MiB";
  bool nvml_record_anonymize = false;
  std::string collect_interval = "1s";
  std::vector<std::string> compat;
  std::string compat_collectors;
  bool enable_lifecycle = false;
  std::string config_reload_interval = "30s";
  CollectorSwitches collectors;  // --collector.<name>, --no-collector.<name>
};

// Adds the flags to `cmd`; its callback runs the agent and stores the exit code.
void setup_serve_command(CLI::App& cmd, ServeOptions& options, int& exit_code);

int run_serve(const ServeOptions& options);

}  // namespace gpumeter::cli
