#include "render/text_writer.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpumeter {
namespace {

MetricFamily gauge(std::string name, std::string help, std::vector<MetricSample> samples) {
  return MetricFamily{std::move(name), std::move(help), MetricType::kGauge, std::move(samples)};
}

TEST(TextWriter, Text004GaugeGroupWithHelpThenType) {
  std::vector<MetricFamily> fams = {
      gauge("gpu_power_watts", "Power draw in watts.",
            {{{{"gpu", "0"}, {"uuid", "GPU-a"}}, 312.5}, {{{"gpu", "1"}, {"uuid", "GPU-b"}}, 35}})};
  EXPECT_EQ(render(fams, ExpositionFormat::kText004),
            "# HELP gpu_power_watts Power draw in watts.\n"
            "# TYPE gpu_power_watts gauge\n"
            "gpu_power_watts{gpu=\"0\",uuid=\"GPU-a\"} 312.5\n"
            "gpu_power_watts{gpu=\"1\",uuid=\"GPU-b\"} 35\n");
}

TEST(TextWriter, OpenMetricsTypeThenHelpAndNoEof) {
  std::vector<MetricFamily> fams = {gauge("up_ratio", "Up.", {{{}, 1}})};
  EXPECT_EQ(render(fams, ExpositionFormat::kOpenMetrics100),
            "# TYPE up_ratio gauge\n"
            "# HELP up_ratio Up.\n"
            "up_ratio 1\n");
}

TEST(TextWriter, CounterNamingPerFormat) {
  std::vector<MetricFamily> fams = {
      {"gpu_energy_joules_total", "Energy.", MetricType::kCounter, {{{{"gpu", "0"}}, 85520809984.0}}}};
  EXPECT_EQ(render(fams, ExpositionFormat::kText004),
            "# HELP gpu_energy_joules_total Energy.\n"
            "# TYPE gpu_energy_joules_total counter\n"
            "gpu_energy_joules_total{gpu=\"0\"} 85520809984\n");
  EXPECT_EQ(render(fams, ExpositionFormat::kOpenMetrics100),
            "# TYPE gpu_energy_joules counter\n"
            "# HELP gpu_energy_joules Energy.\n"
            "gpu_energy_joules_total{gpu=\"0\"} 85520809984\n");
}

TEST(TextWriter, OpenMetricsCounterWithoutSuffixGetsTotalSamples) {
  std::vector<MetricFamily> fams = {{"events", "E.", MetricType::kCounter, {{{}, 3}}}};
  EXPECT_EQ(render(fams, ExpositionFormat::kOpenMetrics100),
            "# TYPE events counter\n# HELP events E.\nevents_total 3\n");
}

TEST(TextWriter, LabelValueEscaping) {
  std::vector<MetricFamily> fams = {gauge("x", "h", {{{{"model", "a\"b\\c\nd"}, {"e", ""}}, 1}})};
  const std::string want_sample = "x{model=\"a\\\"b\\\\c\\nd\",e=\"\"} 1\n";
  EXPECT_TRUE(render(fams, ExpositionFormat::kText004).ends_with(want_sample));
  EXPECT_TRUE(render(fams, ExpositionFormat::kOpenMetrics100).ends_with(want_sample));
}

TEST(TextWriter, LabelValueKeepsOtherCharactersVerbatim) {
  std::string out;
  append_label_value(out, "tab\there {}=,# \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  EXPECT_EQ(out, "tab\there {}=,# \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

TEST(TextWriter, HelpEscapingDiffersByFormat) {
  std::vector<MetricFamily> fams = {gauge("x", "say \"hi\" \\ then\nnext", {{{}, 1}})};
  EXPECT_EQ(render(fams, ExpositionFormat::kText004), "# HELP x say \"hi\" \\\\ then\\nnext\n# TYPE x gauge\nx 1\n");
  EXPECT_EQ(render(fams, ExpositionFormat::kOpenMetrics100),
            "# TYPE x gauge\n# HELP x say \\\"hi\\\" \\\\ then\\nnext\nx 1\n");
}

TEST(TextWriter, InvalidUtf8IsReplaced) {
  std::string out;
  // A lone continuation byte, a truncated 3-byte sequence, an overlong '/', a UTF-16 surrogate and a
  // byte that never occurs in UTF-8, each between valid characters.
  append_label_value(out, std::string("a\x80"
                                      "b\xE2\x82"
                                      "c\xC0\xAF"
                                      "d\xED\xA0\x80"
                                      "e\xFF"
                                      "f"));
  EXPECT_EQ(out,
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\xEF\xBF\xBD"
            "c\xEF\xBF\xBD\xEF\xBF\xBD"
            "d\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
            "e\xEF\xBF\xBD"
            "f");
  std::string help;
  append_help_text(help, "bad \xFE byte", ExpositionFormat::kText004);
  EXPECT_EQ(help, "bad \xEF\xBF\xBD byte");
}

TEST(TextWriter, FamiliesStayGroupedInGivenOrder) {
  std::vector<MetricFamily> fams = {gauge("b", "B.", {{{{"k", "1"}}, 1}, {{{"k", "2"}}, 2}}),
                                    gauge("a", "A.", {{{{"k", "1"}}, 3}})};
  EXPECT_EQ(render(fams, ExpositionFormat::kText004),
            "# HELP b B.\n# TYPE b gauge\nb{k=\"1\"} 1\nb{k=\"2\"} 2\n"
            "# HELP a A.\n# TYPE a gauge\na{k=\"1\"} 3\n");
}

TEST(TextWriter, SpecialValues) {
  std::vector<MetricFamily> fams = {
      gauge("v", "V.", {{{{"k", "nan"}}, std::nan("")}, {{{"k", "pinf"}}, HUGE_VAL}, {{{"k", "ninf"}}, -HUGE_VAL}})};
  EXPECT_EQ(render(fams, ExpositionFormat::kText004),
            "# HELP v V.\n# TYPE v gauge\nv{k=\"nan\"} NaN\nv{k=\"pinf\"} +Inf\nv{k=\"ninf\"} -Inf\n");
}

}  // namespace
}  // namespace gpumeter
