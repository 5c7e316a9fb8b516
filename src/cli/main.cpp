// gpumeter: GPU monitoring and chargeback for shared GPU clusters.

#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "cli/burn_command.h"
#include "cli/report_command.h"
#include "cli/rules_command.h"
#include "cli/serve.h"
#include "cli/snapshot.h"
#include "cli/version.h"
#include "sim/cli/sim_cli.h"

namespace {

// `--flag=` with nothing after the `=` (how the man page writes `--ledger.state-file=""` once the
// shell has removed the quotes) is an empty value; CLI11 reads it as a missing one. Splitting it
// into `--flag ""` gives every flag the same meaning in both forms.
std::vector<std::string> normalized_arguments(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() > 3 && a.rfind("--", 0) == 0 && a.back() == '=' && a.find('=') == a.size() - 1) {
      args.push_back(a.substr(0, a.size() - 1));
      args.emplace_back();
    } else {
      args.push_back(std::move(a));
    }
  }
  std::reverse(args.begin(), args.end());  // CLI11's parse(vector) takes the arguments last first
  return args;
}

// CLI11 answers a word that names no command with "A subcommand is required"; the reader needs
// to hear which word it did not know, and what it knows. False when no such word was given.
bool report_unknown_command(const CLI::App& app, std::ostream& err) {
  const CLI::App* command = &app;
  while (!command->get_subcommands().empty()) command = command->get_subcommands().front();
  std::string word;
  for (const std::string& arg : app.remaining(true)) {
    if (!arg.empty() && arg.front() != '-') {
      word = arg;
      break;
    }
  }
  if (word.empty() || command->get_subcommands({}).empty()) return false;
  std::string path = command->get_name();
  for (const CLI::App* p = command->get_parent(); p != nullptr; p = p->get_parent()) path = p->get_name() + " " + path;
  std::string known;
  for (const CLI::App* sub : command->get_subcommands({})) known += (known.empty() ? "" : ", ") + sub->get_name();
  err << path << ": unknown command '" << word << "' (one of " << known << ")\n"
      << "Run with --help for more information.\n";
  return true;
}

}  // namespace

int main(int argc, char** argv) {
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

  auto* sim = app.add_subcommand("sim",
                                 "Fleet simulator tools: validate a scenario, print its exact ground truth, write "
                                 "its fake procfs or amdgpu sysfs tree, serve its kubelet pod-resources API.");
  gpumeter::sim::setup_sim_command(*sim, exit_code);

  try {
    auto args = normalized_arguments(argc, argv);
    app.parse(args);
  } catch (const CLI::RequiredError& e) {
    if (report_unknown_command(app, std::cerr)) return 2;
    return app.exit(e) != 0 ? 2 : 0;
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    // Every command documents exit code 2 for a bad flag (CLI11's own codes, such as 105 for a
    // file that does not exist, mean nothing to a caller); --help and --version exit 0.
    return code != 0 ? 2 : code;
  }
  return exit_code;
}
