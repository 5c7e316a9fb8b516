#pragma once
// Parsing a command line the same way in every gpumeter executable (gpumeter, gpumeter-sim):
// `--flag=` is an empty value, an unknown command is named with the commands known, and every
// bad flag exits 2.

#include <CLI/CLI.hpp>

namespace gpumeter {

// Parses argv (without the program name) into `app`, whose commands' callbacks set `exit_code`,
// and returns the process's exit code: `exit_code` after a command ran, 0 after --help or
// --version, 2 for a bad flag or an unknown command (said on stderr).
int run_command_line(CLI::App& app, int argc, char** argv, const int& exit_code);

}  // namespace gpumeter
