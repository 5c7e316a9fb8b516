#include "sim/cli/reset_command.h"

#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "sim/cli/sim_cli.h"
#include "sim/scenario/device_files.h"
#include "sim/scenario/identifiers.h"
#include "sim/scenario/scenario_parse.h"

namespace gpumeter::sim {

namespace {

struct ResetArgs {
  std::string scenario;
  unsigned gpu = 0;
};

int run_reset(const ResetArgs& args, std::ostream& out, std::ostream& err) {
  if (args.scenario.empty()) {
    err << "gpumeter sim reset: --scenario is required\n";
    return kBadInput;
  }
  auto scenario = load_scenario(args.scenario);
  if (!scenario) {
    err << "gpumeter sim reset: " << scenario.error().message << "\n";
    return kBadInput;
  }
  if (args.gpu >= scenario->gpus.size()) {
    err << fmt::format("gpumeter sim reset: --gpu {}: the scenario has {} GPUs\n", args.gpu, scenario->gpus.size());
    return kBadInput;
  }
  const std::string bus_id = format_pci_bus_id(scenario->gpus[args.gpu].pci);
  auto in_use = device_files_in_use(args.scenario);
  if (!in_use) {
    err << "gpumeter sim reset: " << in_use.error().message << "\n";
    return kRuntimeError;
  }
  if (*in_use) {
    // nvidia-smi's words for the same refusal.
    out << fmt::format(
        "The following GPUs could not be reset:\n  GPU {}: In use by another client\n\n1 device is currently being "
        "used by one or more other processes (e.g., a monitoring application). Please first kill all processes "
        "using this device.\n",
        bus_id);
    return kRuntimeError;
  }
  out << fmt::format("GPU {} was successfully reset.\n", bus_id);
  return kOk;
}

}  // namespace

void add_reset_command(CLI::App& sim, int& exit_code) {
  auto args = std::make_shared<ResetArgs>();
  CLI::App* reset = sim.add_subcommand(
      "reset", "Check, as nvidia-smi -r does before it resets a GPU, that no process holds the driver open");
  reset->footer(
      "A process that initializes the simulated NVML holds the driver's device files open until its last\n"
      "nvmlShutdown, as a real NVML holds /dev/nvidiactl and /dev/nvidia<N>. While any process does, the\n"
      "reset is refused with nvidia-smi's message \"In use by another client\" and exit code 1; otherwise it\n"
      "succeeds (exit 0). The reset changes nothing else in the scenario. The scenario file stands for the\n"
      "device files: a holder keeps a shared lock on it (docs/simulator.md).\n"
      "Exit codes: 0 reset, 1 in use (or the files cannot be read), 2 bad input.");
  reset->add_option("--scenario", args->scenario, "Scenario YAML file");
  reset->add_option("--gpu", args->gpu, "Index of the GPU to reset (default 0)");
  reset->callback([args, &exit_code] { exit_code = run_reset(*args, std::cout, std::cerr); });
}

}  // namespace gpumeter::sim
