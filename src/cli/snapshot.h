#pragma once
// `gpumeter snapshot`: a one-shot view of the node for operators, like nvidia-smi or gpustat,
// with owners: each GPU, its processes as the agent attributes them, and the ledger totals of
// the agent's state file. docs/snapshot.md describes the output.

#include <CLI/CLI.hpp>
#include <string>

namespace gpumeter::cli {

struct SnapshotOptions {
  std::string nvml_library;
  std::string sim_scenario;
  std::string procfs = "/proc";
  std::string rootfs = "/";
  std::string config_file;
  std::string ledger_state_file = "/var/lib/gpumeter/ledger.json";
  std::string format = "table";
  std::string interval = "1s";
  std::string log_level = "warn";
  bool no_color = false;
};

// Adds the flags to `cmd`; its callback takes the snapshot and stores the exit code:
// 0 ok, 1 NVML unavailable, 2 bad flags or config.
void setup_snapshot_command(CLI::App& cmd, SnapshotOptions& options, int& exit_code);

int run_snapshot(const SnapshotOptions& options);

}  // namespace gpumeter::cli
