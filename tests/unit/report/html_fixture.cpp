// Writes the HTML page of a realistic synthetic report to a file, for the screenshot test
// (tests/integration/test_report_html.py) and for looking at edge cases by hand.
//   report_html_fixture OUT.html [--unpriced] [--groups=N] [--steps=N] [--step=SECONDS]

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string_view>

#include "html_synthetic_report.h"
#include "report/format.h"

namespace {

bool int_flag(std::string_view arg, std::string_view name, int& out) {
  if (arg.substr(0, name.size()) != name) return false;
  out = std::atoi(std::string(arg.substr(name.size())).c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  gpumeter::report::testing::SyntheticOptions options;
  int step = static_cast<int>(options.step_seconds);
  bool ok = argc >= 2;
  for (int i = 2; i < argc && ok; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--unpriced")
      options.priced = false;
    else
      ok = int_flag(arg, "--groups=", options.projects) || int_flag(arg, "--steps=", options.steps) ||
           int_flag(arg, "--step=", step);
  }
  if (!ok || options.projects < 0 || options.steps < 0 || step <= 0) {
    std::fprintf(stderr, "usage: %s OUT.html [--unpriced] [--groups=N] [--steps=N] [--step=SECONDS]\n", argv[0]);
    return 2;
  }
  options.step_seconds = step;
  std::string html = gpumeter::report::render_html(gpumeter::report::testing::synthetic_report(options));
  std::ofstream out(argv[1], std::ios::binary);
  out << html;
  out.close();
  if (!out) {
    std::fprintf(stderr, "%s: cannot write %s\n", argv[0], argv[1]);
    return 1;
  }
  return 0;
}
