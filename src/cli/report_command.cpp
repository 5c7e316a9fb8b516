#include "cli/report_command.h"

namespace gpumeter::cli {

void setup_report_command(CLI::App& cmd, ReportOptions& o, int& exit_code) {
  cmd.add_option("--url", o.url, "Prometheus-compatible API base URL");
  cmd.callback([&o, &exit_code] { exit_code = run_report(o); });
}

int run_report(const ReportOptions&) { return 1; }

}  // namespace gpumeter::cli
