#pragma once
// `gpumeter rules --pricing FILE [--output FILE]`: writes Prometheus recording rules (prices
// per GPU model, live cost rates per project, user and namespace, budgets) for dashboards and
// budget alerts.

#include <CLI/CLI.hpp>
#include <string>

namespace gpumeter::cli {

struct RulesOptions {
  std::string pricing_file;
  std::string output = "-";  // "-" is stdout
};

// Exit codes: 0 ok, 2 bad flags or pricing file, 1 the output could not be written.
void setup_rules_command(CLI::App& cmd, RulesOptions& options, int& exit_code);
int run_rules(const RulesOptions& options);

}  // namespace gpumeter::cli
