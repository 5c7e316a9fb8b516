#pragma once
// The flags `gpumeter serve` and `gpumeter snapshot` share, declared once: where the GPUs are read
// from (a library or the simulator) and where the host's files are, so that a snapshot sees the
// node as the agent does.

#include <string>

#include <CLI/CLI.hpp>

namespace gpumeter::cli {

struct SourceFlags {
  std::string& nvml_library;  // --nvml.library
  std::string& sim_scenario;  // --sim.scenario
  std::string& procfs;        // --path.procfs
  std::string& rootfs;        // --path.rootfs
};

// Adds --nvml.library, --sim.scenario, --path.procfs and --path.rootfs. `scenario_help` ends the
// help of --sim.scenario with what the command does with the simulator.
void add_source_flags(CLI::App& cmd, SourceFlags flags, const std::string& scenario_help);

}  // namespace gpumeter::cli
