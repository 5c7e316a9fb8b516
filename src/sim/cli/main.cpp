// gpumeter-sim: the fleet simulator's tools, which `gpumeter sim` runs. A program of its own so
// that the agent links no simulator code and no gRPC server.

#include <CLI/CLI.hpp>

#include "sim/cli/sim_cli.h"
#include "util/command_line.h"

int main(int argc, char** argv) {
  // Named as users call it: `gpumeter sim` runs this program with the words after "sim".
  CLI::App app{
      "Fleet simulator tools: validate a scenario, print its exact ground truth, write its fake procfs or "
      "amdgpu sysfs tree, serve its kubelet pod-resources API (docs/simulator.md).",
      "gpumeter sim"};
  int exit_code = 0;
  gpumeter::sim::setup_sim_command(app, exit_code);
  return gpumeter::run_command_line(app, argc, argv, exit_code);
}
