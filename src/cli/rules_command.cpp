#include "cli/rules_command.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "pricing/pricing.h"
#include "pricing/rules.h"

namespace gpumeter::cli {

namespace {

// Writes through a temporary file and a rename, so a Prometheus reloading its rules meanwhile
// reads the old file or the new one, never half of one. Returns 0 or errno.
int write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return errno;
  bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  int err = written ? 0 : errno;
  if (std::fclose(f) != 0 && err == 0) err = errno;
  if (err == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) std::remove(tmp.c_str());
  return err;
}

int write_stdout(const std::string& text) {
  bool ok = std::fwrite(text.data(), 1, text.size(), stdout) == text.size();
  ok = std::fflush(stdout) == 0 && ok;
  return ok ? 0 : errno;
}

}  // namespace

void setup_rules_command(CLI::App& cmd, RulesOptions& o, int& exit_code) {
  cmd.add_option("--pricing", o.pricing_file, "Pricing file (YAML); deploy/pricing/ has a default table")
      ->required();
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
  int err = o.output == "-" ? write_stdout(text) : write_file(o.output, text);
  if (err != 0) {
    fmt::print(stderr, "gpumeter rules: cannot write {}: {}\n", o.output, std::strerror(err));
    return 1;
  }
  return 0;
}

}  // namespace gpumeter::cli
