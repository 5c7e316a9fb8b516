#pragma once
// `gpumeter sim reset`: what `nvidia-smi -r` checks before it resets a GPU of the simulated node:
// that no process holds the driver's device files open (sim/scenario/device_files.h).

#include <CLI/CLI.hpp>

namespace gpumeter::sim {

void add_reset_command(CLI::App& sim, int& exit_code);

}  // namespace gpumeter::sim
