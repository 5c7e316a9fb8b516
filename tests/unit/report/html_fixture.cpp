// Writes the HTML page of a realistic synthetic report to argv[1], for the screenshot test
// (tests/integration/test_report_html.py) and for looking at the page by hand.
//   report_html_fixture OUT.html [--unpriced]

#include <cstdio>
#include <cstring>
#include <fstream>

#include "html_synthetic_report.h"
#include "report/format.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3 || (argc == 3 && std::strcmp(argv[2], "--unpriced") != 0)) {
    std::fprintf(stderr, "usage: %s OUT.html [--unpriced]\n", argv[0]);
    return 2;
  }
  gpumeter::report::testing::SyntheticOptions options;
  options.priced = argc < 3;
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
