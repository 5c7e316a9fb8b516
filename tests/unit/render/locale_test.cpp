// The renderer must not depend on the process locale: a German locale writes 1,5 for 1.5, which
// Prometheus cannot parse. Both the C locale (setlocale) and the C++ global locale are switched.

#include <gtest/gtest.h>
#include <unistd.h>

#include <clocale>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <locale>
#include <sstream>

#include "render/landing_page.h"
#include "render/number_format.h"
#include "render/text_writer.h"

namespace gpumeter {
namespace {

struct CommaDecimal : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};

// de_DE is not installed in the build image and tests may not install packages, but glibc's
// localedef can compile it from /usr/share/i18n into a private directory that LOCPATH points at.
// Returns whether the C locale now uses a decimal comma.
bool switch_c_locale_to_german(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  if (std::setlocale(LC_ALL, "de_DE.UTF-8") == nullptr) {
    const std::string cmd = "localedef -i de_DE -f UTF-8 '" + (dir / "de_DE.UTF-8").string() + "' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) {
      ::setenv("LOCPATH", dir.c_str(), 1);
      std::setlocale(LC_ALL, "de_DE.UTF-8");
    }
  }
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f", 1.5);
  return std::string(buf) == "1,5";
}

class ForeignLocale : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_c_ = std::setlocale(LC_ALL, nullptr);
    saved_cpp_ = std::locale();
    c_locale_switched_ = switch_c_locale_to_german(std::filesystem::temp_directory_path() /
                                                   ("gpumeter-locale-" + std::to_string(::getpid())));
    std::locale::global(std::locale(std::locale(), new CommaDecimal));
  }
  void TearDown() override {
    std::locale::global(saved_cpp_);
    std::setlocale(LC_ALL, saved_c_.c_str());
    std::filesystem::remove_all(std::filesystem::temp_directory_path() /
                                ("gpumeter-locale-" + std::to_string(::getpid())));
  }

  std::string saved_c_;
  std::locale saved_cpp_;
  bool c_locale_switched_ = false;
};

TEST_F(ForeignLocale, NumbersStayInCLocaleForm) {
  // Prove the environment really is hostile before testing the renderer in it.
  std::ostringstream probe;
  probe.imbue(std::locale());
  probe << 1234.5;
  ASSERT_EQ(probe.str(), "1.234,5");
  RecordProperty("c_locale_de_DE", c_locale_switched_ ? "yes" : "no (numpunct facet only)");
  if (c_locale_switched_) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.2f", 0.25);
    ASSERT_EQ(std::string(buf), "0,25");
  }

  std::vector<MetricFamily> fams = {{"x_ratio",
                                     "Ratio.",
                                     MetricType::kGauge,
                                     {{{{"k", "a"}}, 0.53},
                                      {{{"k", "b"}}, 85520809984.0},
                                      {{{"k", "c"}}, 1.5e-7},
                                      {{{"k", "d"}}, 1234567.25},
                                      {{{"k", "e"}}, std::nan("")}}}};
  EXPECT_EQ(render(fams, ExpositionFormat::kText004),
            "# HELP x_ratio Ratio.\n# TYPE x_ratio gauge\n"
            "x_ratio{k=\"a\"} 0.53\nx_ratio{k=\"b\"} 85520809984\nx_ratio{k=\"c\"} 1.5e-07\n"
            "x_ratio{k=\"d\"} 1234567.25\nx_ratio{k=\"e\"} NaN\n");

  std::string fixed;
  append_fixed(fixed, 1234.56, 1);
  EXPECT_EQ(fixed, "1234.6");

  Snapshot snap;
  snap.taken_unix = 1700000000;
  LandingPageOptions opt;
  opt.now_unix = 1700000002.5;
  EXPECT_NE(render_landing_page(snap, opt).find("2.5 s ago"), std::string::npos);
}

}  // namespace
}  // namespace gpumeter
