// gpumeter: GPU monitoring and chargeback for shared GPU clusters.

#include <CLI/CLI.hpp>

#include "cli/report_command.h"
#include "cli/rules_command.h"
#include "cli/serve.h"
#include "cli/snapshot.h"
#include "cli/version.h"
#include "sim/cli/sim_cli.h"

int main(int argc, char** argv) {
  CLI::App app{
      "gpumeter: GPU monitoring and cost chargeback for shared GPU clusters, on the Prometheus stack.\n"
      "Run `gpumeter <command> --help` for the flags of each command."};
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

  auto* sim = app.add_subcommand("sim", "Fleet simulator tools: validate a scenario, print its exact ground truth.");
  gpumeter::sim::setup_sim_command(*sim, exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    // snapshot, report and rules document exit code 2 for every bad flag.
    return (snapshot->parsed() || report->parsed() || rules->parsed()) && code != 0 ? 2 : code;
  }
  return exit_code;
}
