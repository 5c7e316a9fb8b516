#include "cli/rules_command.h"

namespace gpumeter::cli {

void setup_rules_command(CLI::App& cmd, RulesOptions& o, int& exit_code) {
  cmd.add_option("--pricing", o.pricing_file, "Pricing file (YAML)")->required();
  cmd.add_option("--output", o.output, "Where to write the rules; - is stdout");
  cmd.callback([&o, &exit_code] { exit_code = run_rules(o); });
}

int run_rules(const RulesOptions&) { return 1; }

}  // namespace gpumeter::cli
