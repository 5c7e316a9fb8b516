#pragma once
// `gpumeter sim truth|check|procfs|sysfs|kubelet|reset`: the simulator's command-line face, attached to the main
// program's "sim" subcommand. Callbacks run inside CLI11 and set exit_code: 0 ok,
// 1 runtime error, 2 bad input.

#include <CLI/CLI.hpp>

namespace gpumeter::sim {

// Exit codes of every `gpumeter sim` command.
inline constexpr int kOk = 0;
inline constexpr int kRuntimeError = 1;
inline constexpr int kBadInput = 2;

void setup_sim_command(CLI::App& sim, int& exit_code);
}  // namespace gpumeter::sim
