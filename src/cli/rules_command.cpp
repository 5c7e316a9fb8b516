#include "cli/rules_command.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "pricing/pricing.h"
#include "pricing/rules.h"
#include "util/atomic_file.h"

namespace gpumeter::cli {

namespace {

int write_stdout(const std::string& text) {
  bool ok = std::fwrite(text.data(), 1, text.size(), stdout) == text.size();
  ok = std::fflush(stdout) == 0 && ok;
  return ok ? 0 : errno;
}

}  // namespace

void setup_rules_command(CLI::App& cmd, RulesOptions& o, int& exit_code) {
  cmd.add_option("--pricing", o.pricing_file, "Pricing file (YAML); deploy/pricing/ has a default table")->required();
  cmd.add_option("--output", o.output, "Where to write the rule file; - is stdout")->capture_default_str();
  cmd.callback([&o, &exit_code] { exit_code = run_rules(o); });
}

int run_rules(const RulesOptions& o) {
  auto pricing = pricing::load_pricing(o.pricing_file);
  if (!pricing) {
    fmt::print(stderr, "gpumeter rules: {}\n", pricing.error().message);
    return 2;
  }
  std::string text = pricing::render_rules(*pricing);
  if (o.output == "-") {
    if (int err = write_stdout(text); err != 0) {
      fmt::print(stderr, "gpumeter rules: cannot write to stdout: {}\n", std::strerror(err));
      return 1;
    }
    return 0;
  }
  // Atomic, so a Prometheus reloading its rules meanwhile reads the old file or the new one;
  // readable by the Prometheus user.
  auto written = write_file_atomic(o.output, text, 0644);
  if (!written) {
    fmt::print(stderr, "gpumeter rules: cannot write {}: {}\n", o.output, written.error().message);
    return 1;
  }
  return 0;
}

}  // namespace gpumeter::cli
