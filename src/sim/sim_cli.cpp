#include "sim/sim_cli.h"

#include <iostream>
#include <map>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "sim/scenario_parse.h"
#include "sim/truth.h"
#include "sim/truth_format.h"
#include "sim/units.h"

namespace gpumeter::sim {

namespace {

constexpr int kOk = 0;
constexpr int kBadInput = 2;

struct TruthArgs {
  std::string scenario;
  std::string from = "0";
  std::string to;
  std::string format = "table";
};

std::string describe_duration(Micros d) {
  if (d == kForever) return "unbounded";
  return fmt::format("{} s", to_seconds(d));
}

int run_truth(const TruthArgs& args, std::ostream& out, std::ostream& err) {
  if (args.scenario.empty()) {
    err << "gpumeter sim truth: --scenario is required\n";
    return kBadInput;
  }
  if (args.format != "table" && args.format != "json") {
    err << fmt::format("gpumeter sim truth: --format must be table or json, got '{}'\n", args.format);
    return kBadInput;
  }
  auto from = parse_duration(args.from);
  if (!from) {
    err << fmt::format("gpumeter sim truth: --from: expected scenario seconds (or e.g. 1h30m), got '{}'\n",
                       args.from);
    return kBadInput;
  }
  auto scenario = load_scenario(args.scenario);
  if (!scenario) {
    err << "gpumeter sim truth: " << scenario.error().message << "\n";
    return kBadInput;
  }
  std::optional<Micros> to;
  if (!args.to.empty()) {
    to = parse_duration(args.to);
    if (!to) {
      err << fmt::format("gpumeter sim truth: --to: expected scenario seconds (or e.g. 1h30m), got '{}'\n",
                         args.to);
      return kBadInput;
    }
  } else if (scenario->duration != kForever) {
    to = scenario->duration;
  } else {
    err << "gpumeter sim truth: --to is required: the scenario has no duration\n";
    return kBadInput;
  }
  if (*from >= *to) {
    err << fmt::format("gpumeter sim truth: --from ({} s) must be earlier than --to ({} s)\n",
                       to_seconds(*from), to_seconds(*to));
    return kBadInput;
  }
  Truth truth = compute_truth(*scenario, *from, *to);
  if (args.format == "json") {
    out << truth_to_json(*scenario, truth).dump(2) << "\n";
  } else {
    out << truth_to_table(truth);
  }
  return kOk;
}

int run_check(const std::string& path, std::ostream& out, std::ostream& err) {
  if (path.empty()) {
    err << "gpumeter sim check: --scenario is required\n";
    return kBadInput;
  }
  auto scenario = load_scenario(path);
  if (!scenario) {
    err << "gpumeter sim check: " << scenario.error().message << "\n";
    return kBadInput;
  }
  std::map<std::string, unsigned> models;
  for (unsigned g = 0; g < scenario->gpus.size(); ++g) ++models[scenario->model_of(g).name];
  std::string model_list;
  for (const auto& [name, count] : models)
    model_list += fmt::format("{}{} x {}", model_list.empty() ? "" : ", ", count, name);
  out << fmt::format("{}: ok: {} GPUs ({}), {} jobs, {} faults, duration {}\n", path, scenario->gpus.size(),
                     model_list.empty() ? "none" : model_list, scenario->jobs.size(), scenario->fault_count(),
                     describe_duration(scenario->duration));
  return kOk;
}

}  // namespace

void setup_sim_command(CLI::App& sim, int& exit_code) {
  sim.require_subcommand(1);

  // Options are read as strings and checked in the callback, so every bad value exits 2
  // with a message naming the flag, rather than through CLI11's own exit codes.
  auto truth_args = std::make_shared<TruthArgs>();
  CLI::App* truth = sim.add_subcommand("truth", "Print a scenario's exact ground truth over [from, to)");
  truth->add_option("--scenario", truth_args->scenario, "Scenario YAML file");
  truth->add_option("--from", truth_args->from,
                    "Window start in scenario seconds, or e.g. 1h30m (default 0)");
  truth->add_option("--to", truth_args->to,
                    "Window end in scenario seconds (default: the scenario's duration)");
  truth->add_option("--format", truth_args->format, "table or json (default table)");
  truth->callback([truth_args, &exit_code] { exit_code = run_truth(*truth_args, std::cout, std::cerr); });

  auto check_path = std::make_shared<std::string>();
  CLI::App* check = sim.add_subcommand("check", "Validate a scenario file and summarize it");
  check->add_option("--scenario", *check_path, "Scenario YAML file");
  check->callback([check_path, &exit_code] { exit_code = run_check(*check_path, std::cout, std::cerr); });
}

}  // namespace gpumeter::sim
