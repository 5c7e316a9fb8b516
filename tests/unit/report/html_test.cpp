// render_html: structure, escaping, self-containment and the charts' edge cases. What the page
// looks like is checked in a real browser by tests/integration/test_report_html.py.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "html_synthetic_report.h"
#include "report/format.h"
#include "report/html_text.h"
#include "report/svg_chart.h"

namespace gpumeter::report {
namespace {

using testing::synthetic_report;
using testing::SyntheticOptions;

// Like HasSubstr, without printing the whole page when it fails.
#define EXPECT_CONTAINS(text, part) EXPECT_NE((text).find(part), std::string::npos) << "missing: " << (part)
#define EXPECT_LACKS(text, part)                                                                 \
  do {                                                                                           \
    size_t at_ = (text).find(part);                                                              \
    EXPECT_EQ(at_, std::string::npos) << "unexpected: " << (part)                                \
                                      << " in: " << (text).substr(at_ < 80 ? 0 : at_ - 80, 200); \
  } while (0)

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

// The element between <svg id="ID" and its </svg>.
std::string svg_of(const std::string& html, const std::string& id) {
  size_t start = html.find("<svg id=\"" + id + "\"");
  if (start == std::string::npos) return "";
  size_t end = html.find("</svg>", start);
  return html.substr(start, end == std::string::npos ? std::string::npos : end + 6 - start);
}

// Every opened element is closed in order: a broken tag would swallow the rest of the page.
void expect_balanced(const std::string& html) {
  static const std::set<std::string> kVoid = {"meta", "br", "hr", "img", "input", "link", "wbr", "!DOCTYPE"};
  std::vector<std::string> open;
  for (size_t at = html.find('<'); at != std::string::npos; at = html.find('<', at + 1)) {
    size_t end = html.find('>', at);
    ASSERT_NE(end, std::string::npos) << "unterminated tag at " << at;
    std::string tag = html.substr(at + 1, end - at - 1);
    bool closing = !tag.empty() && tag[0] == '/';
    bool self_closing = !tag.empty() && tag.back() == '/';
    std::string name = tag.substr(closing ? 1 : 0, tag.find_first_of(" \n/", closing ? 1 : 0) - (closing ? 1 : 0));
    if (name == "style") {  // CSS has no tags; skip to its end
      at = html.find("</style>", at);
      ASSERT_NE(at, std::string::npos);
      continue;
    }
    if (self_closing || kVoid.count(name)) continue;
    if (closing) {
      ASSERT_FALSE(open.empty()) << "</" << name << "> closes nothing";
      ASSERT_EQ(open.back(), name) << "</" << name << "> closes <" << open.back() << ">";
      open.pop_back();
    } else {
      open.push_back(name);
    }
  }
  EXPECT_TRUE(open.empty()) << "unclosed <" << (open.empty() ? "" : open.back()) << ">";
}

// No std::regex here: libstdc++'s matcher recurses per character and overflows the stack on a
// page of this size under AddressSanitizer.
void expect_clean_numbers(const std::string& html) {
  auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t i = 0; i < html.size();) {
    if (!word_char(html[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < html.size() && word_char(html[end])) ++end;
    std::string word = html.substr(i, end - i);
    for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_TRUE(word != "nan" && word != "inf" && word != "infinity")
        << "found \"" << word << "\" near: " << html.substr(i < 80 ? 0 : i - 80, 160);
    i = end;
  }
}

// Nothing is fetched: no scripts, stylesheets, images, fonts or links leave the page.
void expect_self_contained(const std::string& html, const std::string& own_url) {
  EXPECT_LACKS(html, "<script");
  EXPECT_LACKS(html, "<link");
  EXPECT_LACKS(html, "<img");
  EXPECT_LACKS(html, "<iframe");
  size_t style = html.find("<style>");
  ASSERT_NE(style, std::string::npos);
  std::string css = html.substr(style, html.find("</style>") - style);
  EXPECT_LACKS(css, "@import");
  EXPECT_LACKS(css, "url(");
  // Escaped text has no '<', so this only sees attributes of real tags.
  for (size_t at = html.find('<'); at != std::string::npos; at = html.find('<', at + 1)) {
    std::string tag = html.substr(at, html.find('>', at) - at);
    for (const char* attribute : {" src=", " srcset=", " action=", " xlink:href=", " href="}) {
      size_t found = tag.find(attribute);
      if (found == std::string::npos) continue;
      EXPECT_EQ(std::string(attribute), " href=") << tag;
      EXPECT_EQ(tag.substr(found + 6, 2), "\"#") << "link out of the page: " << tag;
    }
  }
  // The only web address is the report's own source, shown as text.
  std::string shown = escaped(own_url);
  size_t own = shown.empty() ? 0 : count(html, shown);
  size_t own_http = shown.rfind("http://", 0) == 0 ? own : 0;
  size_t own_https = shown.rfind("https://", 0) == 0 ? own : 0;
  EXPECT_EQ(count(html, "http://"), own_http);
  EXPECT_EQ(count(html, "https://"), own_https);
}

void expect_four_charts(const std::string& html) {
  for (const char* id : {"chart-cost", "chart-timeline", "chart-idle", "chart-efficiency"})
    EXPECT_FALSE(svg_of(html, id).empty()) << id;
  EXPECT_EQ(count(html, "<svg "), 4u);
  EXPECT_EQ(count(html, "</svg>"), 4u);
}

void expect_sound_page(const Report& report) {
  std::string html = render_html(report);
  SCOPED_TRACE(html.substr(0, 200));
  expect_balanced(html);
  expect_clean_numbers(html);
  expect_self_contained(html, report.url);
  expect_four_charts(html);
}

TEST(ReportHtml, RealisticReportHasEverySection) {
  Report r = synthetic_report();
  std::string html = render_html(r);
  expect_sound_page(r);
  EXPECT_CONTAINS(html, "<!DOCTYPE html>");
  EXPECT_CONTAINS(html, "<meta charset=\"utf-8\">");
  EXPECT_CONTAINS(html, "GPU chargeback report");
  EXPECT_CONTAINS(html, "2024-05-01 00:00 UTC");
  EXPECT_CONTAINS(html, "2024-05-31 00:00 UTC");
  EXPECT_CONTAINS(html, "http://prometheus.monitoring:9090");
  EXPECT_CONTAINS(html, "Prometheus 2.53.1");
  EXPECT_CONTAINS(html, "/etc/gpumeter/pricing.yaml");
  EXPECT_CONTAINS(html, "separate: idle GPU time is a row of its own");
  EXPECT_CONTAINS(html, "Total cost");
  EXPECT_CONTAINS(html, "Idle share");
  EXPECT_CONTAINS(html, "Fleet efficiency");
  EXPECT_CONTAINS(html, "id=\"reconciliation\"");
  EXPECT_CONTAINS(html, "id=\"warnings\"");
  EXPECT_CONTAINS(html, "class=\"banner\"");  // two warnings: prominent at the top
  EXPECT_CONTAINS(html, "2 warnings");
  EXPECT_CONTAINS(html, "colspan=\"2\">Budget</th>");
  EXPECT_CONTAINS(html, "class=\"num over\"");  // llm-pretrain is over its budget
  // Every row is in the table, the idle one in words.
  for (const Row& row : r.rows) {
    std::string key = row.idle ? "(idle)" : row.unattributed ? "(unattributed)" : escaped(row.key[0]);
    EXPECT_CONTAINS(html, key + "</td>");
  }
}

TEST(ReportHtml, TotalsUseThousandsSeparatorsAndCurrency) {
  Report r = synthetic_report();
  std::string html = render_html(r);
  std::string total = format_number(r.total.cost.total(), 2);
  EXPECT_CONTAINS(total, ",");
  EXPECT_CONTAINS(html, "Total cost (EUR)</div><div class=\"value\">" + total + "</div>");
}

TEST(ReportHtml, HostileStringsAreEscapedEverywhere) {
  const std::string evil = "<script>alert(\"x\")</script> & 'q' <img src=x onerror=y>";
  const std::string shown =
      "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;q&#39; &lt;img src=x onerror=y&gt;";
  Report r = synthetic_report();
  r.url = "http://evil.example/?a=1&b=<b>";
  r.backend = evil;
  r.by = {evil};
  r.currency = evil;
  r.pricing_source = evil;
  r.idle_policy = evil;
  r.rows[0].key = {evil};
  r.rows[1].key = {evil + evil + evil};  // long: truncated in the charts, whole in the table
  r.warnings[0].kind = evil;
  r.warnings[0].message = evil;
  r.warnings[0].gpu = evil;
  r.warnings[0].node = evil;
  std::string html = render_html(r);
  EXPECT_LACKS(html, "<script");
  EXPECT_LACKS(html, "<img");
  EXPECT_LACKS(html, "alert(\"x\")");
  EXPECT_CONTAINS(html, shown);
  EXPECT_CONTAINS(html, "http://evil.example/?a=1&amp;b=&lt;b&gt;");
  expect_balanced(html);
  expect_self_contained(html, r.url);
  // The key is escaped in the chart labels and tooltips too.
  EXPECT_CONTAINS(svg_of(html, "chart-cost"), "&lt;script&gt;");
  EXPECT_CONTAINS(svg_of(html, "chart-timeline"), "&lt;script&gt;");
}

TEST(ReportHtml, LongLabelsAreCutOnCharacterBoundaries) {
  Report r = synthetic_report();
  r.rows[0].key = {"\xC3\xA9quipe-r\xC3\xA9seau-" + std::string(60, 'x') + "-\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC"};
  std::string html = render_html(r);
  std::string chart = svg_of(html, "chart-cost");
  EXPECT_CONTAINS(chart, "\xE2\x80\xA6");  // the ellipsis
  // The tooltip keeps the whole name.
  EXPECT_CONTAINS(chart, "<title>" + r.rows[0].key[0] + ":");
}

TEST(ReportHtml, UnpricedReportShowsGpuHoursInsteadOfCosts) {
  SyntheticOptions o;
  o.priced = false;
  Report r = synthetic_report(o);
  std::string html = render_html(r);
  expect_sound_page(r);
  EXPECT_CONTAINS(html, "GPU usage report");
  EXPECT_CONTAINS(html, "none: usage in GPU-hours, no costs");
  EXPECT_LACKS(html, "Total cost");
  EXPECT_LACKS(html, "EUR");
  EXPECT_LACKS(html, "Budget");
  EXPECT_CONTAINS(svg_of(html, "chart-cost"), "Allocated GPU time (GPU-hours)");
  EXPECT_CONTAINS(svg_of(html, "chart-timeline"), "GPU-h per 1 d");
  // Timeline values are seconds; the chart shows hours: one day of 32 GPUs is at most 768 GPU-h.
  EXPECT_CONTAINS(svg_of(html, "chart-timeline"), ">800</text>");
}

TEST(ReportHtml, ZeroRows) {
  Report r;
  r.url = "https://thanos.example:10902";
  r.from = 1714521600;
  r.to = r.from + 86400;
  expect_sound_page(r);
  std::string html = render_html(r);
  EXPECT_CONTAINS(svg_of(html, "chart-cost"), "No data for this period");
  EXPECT_CONTAINS(svg_of(html, "chart-efficiency"), "No data for this period");
  EXPECT_CONTAINS(svg_of(html, "chart-timeline"), "No data for this period");
  EXPECT_CONTAINS(svg_of(html, "chart-idle"), "No capacity data");
  EXPECT_CONTAINS(html, "No GPU time in this period.");
  EXPECT_LACKS(html, "class=\"banner\"");
}

TEST(ReportHtml, OneRowOneStep) {
  SyntheticOptions o;
  o.projects = 1;
  o.steps = 1;
  o.unattributed = false;
  Report r = synthetic_report(o);
  ASSERT_EQ(r.rows.size(), 2u);  // the project and idle
  expect_sound_page(r);
  std::string html = render_html(r);
  EXPECT_CONTAINS(svg_of(html, "chart-timeline"), "<path fill=\"#4e79a7\"");
  EXPECT_CONTAINS(svg_of(html, "chart-idle"), "whole period");
}

TEST(ReportHtml, AllZeroValues) {
  Report r = synthetic_report();
  for (Row& row : r.rows) row = Row{row.key, {}, {}, std::nullopt, row.idle, row.unattributed};
  r.total = Row{};
  for (auto& v : r.timeline.row_values) std::fill(v.begin(), v.end(), 0.0);
  std::fill(r.timeline.idle_seconds.begin(), r.timeline.idle_seconds.end(), 0.0);
  std::fill(r.timeline.capacity_seconds.begin(), r.timeline.capacity_seconds.end(), 0.0);
  r.reconciliation = Reconciliation{};
  expect_sound_page(r);
  std::string html = render_html(r);
  EXPECT_CONTAINS(svg_of(html, "chart-cost"), "All values are zero");
  EXPECT_CONTAINS(svg_of(html, "chart-timeline"), "All values are zero");
  EXPECT_CONTAINS(html, "n/a");  // efficiency and idle share of nothing
}

TEST(ReportHtml, NonFiniteInputsNeverReachThePage) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  Report r = synthetic_report();
  r.rows[0].usage.allocated_seconds = nan;
  r.rows[1].cost.allocation = inf;
  r.rows[2].usage.busy_seconds = -inf;
  r.rows[3].budget = Budget{100, 0, inf};
  r.timeline.row_values[0][3] = nan;
  r.timeline.row_values[1][4] = inf;
  r.timeline.idle_seconds[5] = nan;
  r.timeline.capacity_seconds[6] = inf;
  r.timeline.starts[7] = nan;
  r.total.cost.energy = nan;
  r.reconciliation.covered_seconds = nan;
  r.warnings[0].from = nan;
  r.elapsed_seconds = inf;
  expect_sound_page(r);
}

TEST(ReportHtml, HundredsOfRowsAndSteps) {
  SyntheticOptions o;
  o.projects = 400;
  o.steps = 720;  // hourly for a month
  o.step_seconds = 3600;
  Report r = synthetic_report(o);
  std::string html = render_html(r);
  expect_sound_page(r);
  // 15 bars and "other" in the per-group charts; 8 series and "other" in the timeline.
  EXPECT_EQ(count(svg_of(html, "chart-cost"), "<rect "), 16u);
  EXPECT_CONTAINS(svg_of(html, "chart-cost"), "other (387 groups)");
  EXPECT_EQ(count(svg_of(html, "chart-efficiency"), "<rect "), 16u);
  EXPECT_EQ(count(svg_of(html, "chart-timeline"), "<path "), 9u);
  EXPECT_CONTAINS(html, "Top 15 of 402 groups");
  // Every row is in the table.
  std::string table = html.substr(html.find("<table id=\"rows\">"));
  table = table.substr(0, table.find("</table>"));
  EXPECT_EQ(count(table, "<tr>"), r.rows.size() + 3);  // plus two head rows and the total
  EXPECT_LT(html.size(), 2'000'000u);
}

TEST(ReportHtml, MismatchedTimelineShapesAreTolerated) {
  Report r = synthetic_report();
  r.timeline.row_values.resize(3);
  r.timeline.row_values[1].resize(2);
  r.timeline.idle_seconds.resize(4);
  r.timeline.capacity_seconds.resize(10);
  r.timeline.ends.resize(20);
  expect_sound_page(r);
}

TEST(ReportHtml, ReconciliationMismatchIsProminent) {
  Report r = synthetic_report();
  r.warnings.clear();
  r.reconciliation.ok = false;
  r.reconciliation.difference_seconds = 3600.25;
  std::string html = render_html(r);
  EXPECT_CONTAINS(html, "class=\"banner\"");
  EXPECT_CONTAINS(html, "Mismatch");
  EXPECT_CONTAINS(html, "3,600.250");
  EXPECT_CONTAINS(html, "None: every GPU reported");
}

TEST(ReportHtml, MultipleDimensionsGetAColumnEach) {
  Report r = synthetic_report();
  r.by = {"project", "node"};
  for (Row& row : r.rows) row.key.push_back(row.idle ? "gpu-node-01" : "gpu-node-02");
  std::string html = render_html(r);
  EXPECT_CONTAINS(html, "<th rowspan=\"2\">project</th><th rowspan=\"2\">node</th>");
  EXPECT_CONTAINS(html, "(idle) / gpu-node-01");  // in the charts
}

// ---- the text helpers ----

TEST(HtmlText, FormatNumber) {
  EXPECT_EQ(format_number(1234567.891, 2), "1,234,567.89");
  EXPECT_EQ(format_number(999.996, 2), "1,000.00");
  EXPECT_EQ(format_number(-1234.5, 1), "-1,234.5");
  EXPECT_EQ(format_number(-0.001, 2), "0.00");
  EXPECT_EQ(format_number(12, 0), "12");
  EXPECT_EQ(format_number(123456, 0), "123,456");
  EXPECT_EQ(format_number(std::nan(""), 2), "n/a");
  EXPECT_EQ(format_number(-std::numeric_limits<double>::infinity(), 2), "n/a");
  EXPECT_EQ(format_percent(0.4256, 1), "42.6 %");
}

TEST(HtmlText, FormatDurationAndDates) {
  EXPECT_EQ(format_duration(30 * 86400), "30 d");
  EXPECT_EQ(format_duration(86400 + 12 * 3600), "1 d 12 h");
  EXPECT_EQ(format_duration(900), "15 min");
  EXPECT_EQ(format_duration(86400 + 300), "1 d");
  EXPECT_EQ(format_duration(0), "0 s");
  EXPECT_EQ(format_duration(std::nan("")), "n/a");
  EXPECT_EQ(format_utc(1714521600, "%Y-%m-%d %H:%M"), "2024-05-01 00:00");
}

TEST(HtmlText, Escaping) {
  EXPECT_EQ(escaped("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
}

TEST(SvgChart, NiceAxis) {
  svg::Axis a = svg::nice_axis(768, 5);
  EXPECT_DOUBLE_EQ(a.step, 200);
  EXPECT_DOUBLE_EQ(a.max, 800);
  EXPECT_EQ(a.decimals, 0);
  a = svg::nice_axis(0.3, 5);
  EXPECT_NEAR(a.step, 0.1, 1e-12);
  EXPECT_NEAR(a.max, 0.3, 1e-12);
  EXPECT_EQ(a.decimals, 1);
  a = svg::nice_axis(11, 5);
  EXPECT_DOUBLE_EQ(a.step, 2.5);
  EXPECT_EQ(a.decimals, 1);
  a = svg::nice_axis(0, 5);
  EXPECT_GT(a.max, 0);
  a = svg::nice_axis(std::nan(""), 5);
  EXPECT_GT(a.max, 0);
}

TEST(SvgChart, TimeTicksAreWholeUtcDaysOrHours) {
  auto weeks = svg::time_ticks(1714521600, 1714521600 + 30 * 86400, 10);
  ASSERT_EQ(weeks.size(), 4u);
  EXPECT_EQ(weeks[0].label, "May 6");  // a Monday
  EXPECT_EQ(weeks[3].label, "May 27");
  auto days = svg::time_ticks(1714521600, 1714521600 + 7 * 86400, 10);
  ASSERT_EQ(days.size(), 8u);
  EXPECT_EQ(days[1].label, "May 2");
  auto quarters = svg::time_ticks(1704067200, 1735689600, 12);  // the year 2024
  ASSERT_EQ(quarters.size(), 5u);
  EXPECT_EQ(quarters[1].label, "Apr 1");
  auto months = svg::time_ticks(1704067200, 1735689600, 14);
  ASSERT_EQ(months.size(), 13u);
  EXPECT_EQ(months[0].label, "Jan 1");
  EXPECT_EQ(months[2].label, "Mar 1");
  EXPECT_EQ(months[12].label, "Jan 1");
  auto hours = svg::time_ticks(1714521600 + 600, 1714521600 + 12 * 3600, 8);
  ASSERT_FALSE(hours.empty());
  EXPECT_EQ(hours[0].label, "02:00");  // every 2 h: six ticks over 11 h 50 min
  auto over_midnight = svg::time_ticks(1714521600 - 3 * 3600, 1714521600 + 3 * 3600, 8);
  bool date_label = false;
  for (const auto& t : over_midnight) date_label |= t.label == "May 1";
  EXPECT_TRUE(date_label);
  EXPECT_TRUE(svg::time_ticks(10, 5, 8).empty());
}

}  // namespace
}  // namespace gpumeter::report
