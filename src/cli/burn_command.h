#pragma once
// `gpumeter burn`: the load generator (src/burn) on the command line. It prints what it did as
// one JSON object on stdout (and to --report), progress on stderr. With --as it runs one child
// process per owner environment, so one node can play several owners, and prints their reports.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace gpumeter::cli {

struct BurnCommandOptions {
  std::string gpus = "0";
  std::string duration = "60s";
  unsigned duty = 100;
  std::string period = "100ms";
  std::string memory = "1GiB";
  std::string cuda_library;
  std::string sim_scenario;
  std::string report_file;
  std::vector<std::string> as;  // "NAME=VALUE[,NAME=VALUE...]", one child each
};

// Exit codes: 0 done, 1 the driver failed or a child failed, 2 bad flags, 130 stopped by a
// signal (the report of what was done is still printed).
void setup_burn_command(CLI::App& cmd, BurnCommandOptions& options, int& exit_code);

}  // namespace gpumeter::cli
