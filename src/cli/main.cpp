// gpumeter: GPU monitoring and chargeback for shared GPU clusters.

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/burn_command.h"
#include "cli/report_command.h"
#include "cli/rules_command.h"
#include "cli/serve.h"
#include "cli/slurm_epilog.h"
#include "cli/snapshot.h"
#include "cli/version.h"
#include "util/command_line.h"

namespace {

// `gpumeter sim ARGS` runs gpumeter-sim ARGS, installed beside this program (bin/ of a package
// or the build, libexec/ of the bundle). Returns only when it cannot be run.
int run_simulator_tools(int argc, char** argv) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string tools = (ec ? std::filesystem::path(argv[0]) : self).parent_path() / "gpumeter-sim";
  std::vector<char*> args{const_cast<char*>(tools.c_str())};
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execv(tools.c_str(), args.data());
  std::cerr << "gpumeter sim: cannot run " << tools << ": " << std::strerror(errno)
            << " (the simulator tools are installed beside gpumeter)\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "sim") return run_simulator_tools(argc, argv);
  CLI::App app{
      "gpumeter: GPU monitoring and cost chargeback for shared GPU clusters, on the Prometheus stack.\n"
      "Run `gpumeter <command> --help` for the flags of each command.",
      "gpumeter"};  // parse(vector) takes no program name from argv[0]; the usage lines need one
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(gpumeter::cli::kVersionLine));

  int exit_code = 0;
  gpumeter::cli::ServeOptions serve_options;
  auto* serve = app.add_subcommand(
      "serve", "Run the node agent: collect every GPU on its own schedule and serve Prometheus metrics.");
  gpumeter::cli::setup_serve_command(*serve, serve_options, exit_code);

  gpumeter::cli::SnapshotOptions snapshot_options;
  auto* snapshot = app.add_subcommand(
      "snapshot", "Print the GPUs, their processes with owners and the ledger totals once, like nvidia-smi.");
  gpumeter::cli::setup_snapshot_command(*snapshot, snapshot_options, exit_code);

  gpumeter::cli::ReportOptions report_options;
  auto* report = app.add_subcommand(
      "report", "Chargeback for a period from a Prometheus-compatible API: exact usage and cost per group.");
  gpumeter::cli::setup_report_command(*report, report_options, exit_code);

  gpumeter::cli::RulesOptions rules_options;
  auto* rules = app.add_subcommand(
      "rules", "Write Prometheus recording rules for prices and live cost rates from a pricing file.");
  gpumeter::cli::setup_rules_command(*rules, rules_options, exit_code);

  gpumeter::cli::BurnCommandOptions burn_options;
  auto* burn = app.add_subcommand(
      "burn", "Load GPUs for an exact time at a given duty cycle and memory, and report what was done (self-checks).");
  gpumeter::cli::setup_burn_command(*burn, burn_options, exit_code);

  gpumeter::cli::SlurmEpilogOptions slurm_options;
  auto* slurm = app.add_subcommand("slurm",
                                   "Slurm integration: `gpumeter slurm epilog` writes a finished job's GPU "
                                   "use into its accounting record.");
  gpumeter::cli::setup_slurm_command(*slurm, slurm_options, exit_code);

  // Listed here for --help; main() hands `gpumeter sim ...` to gpumeter-sim before parsing.
  app.add_subcommand("sim",
                     "Fleet simulator tools: validate a scenario, print its exact ground truth, write its fake "
                     "procfs or amdgpu sysfs tree, serve its kubelet pod-resources API.");

  return gpumeter::run_command_line(app, argc, argv, exit_code);
}
