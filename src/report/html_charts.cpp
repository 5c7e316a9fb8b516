// The charts of the report's HTML page, as inline SVG (svg_chart.h): cost and efficiency per
// group, cost and idle share over time.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/html_page.h"
#include "report/svg_chart.h"

namespace gpumeter::report::html {

namespace {

constexpr size_t kTopGroups = 15;  // bars in the per-group charts before "other"

// Efficiency bands of the per-group chart; the thresholds are rules of thumb, not policy.
constexpr double kLowEfficiency = 0.3;
constexpr double kHighEfficiency = 0.6;
constexpr std::string_view kLowColor = "#e15759";
constexpr std::string_view kMidColor = "#edc948";
constexpr std::string_view kHighColor = "#59a14f";
constexpr std::string_view kIdleLineColor = "#d9822b";

std::string_view efficiency_color(double e) {
  return e < kLowEfficiency ? kLowColor : e < kHighEfficiency ? kMidColor : kHighColor;
}

void figure(Page& p, std::string_view css_class, std::string_view caption, std::string_view note,
            const std::string& svg_markup, std::string_view after = "") {
  p.put("<figure class=\"panel {}\"><figcaption>", css_class);
  p.text(caption);
  if (!note.empty()) p.raw("<small>").text(note).raw("</small>");
  p.raw("</figcaption>\n").raw(svg_markup).raw(after).raw("</figure>\n");
}

std::string other_label(size_t groups) { return fmt::format("other ({} groups)", groups); }

std::string cost_chart(const Context& c) {
  svg::BarChart chart;
  chart.id = "chart-cost";
  chart.title = c.measure.priced ? "Cost per group" : "Allocated GPU-hours per group";
  chart.axis_label = c.measure.priced ? "Cost (" + c.measure.unit() + ")" : "Allocated GPU time (GPU-hours)";
  double rest = 0;
  for (size_t i = 0; i < c.ranking.size(); ++i) {
    const Row& row = c.report.rows[c.ranking[i]];
    double v = c.measure.of(row);
    if (i >= kTopGroups) {
      rest += v;
      continue;
    }
    chart.bars.push_back({row_label(row), v, c.measure.text(v), c.colors[c.ranking[i]]});
  }
  if (c.ranking.size() > kTopGroups) {
    chart.bars.push_back(
        {other_label(c.ranking.size() - kTopGroups), rest, c.measure.text(rest), std::string(svg::kOtherColor)});
  }
  return svg::horizontal_bars(chart);
}

svg::Bar efficiency_bar(std::string label, const Usage& usage) {
  std::optional<double> e = usage.efficiency();
  if (!e || !std::isfinite(*e)) return {std::move(label), 0, "n/a", std::string(kLowColor)};
  return {std::move(label), *e, format_percent(*e, 1), std::string(efficiency_color(*e))};
}

std::string efficiency_chart(const Context& c) {
  svg::BarChart chart;
  chart.id = "chart-efficiency";
  chart.title = "Efficiency per group: busy / allocated GPU time";
  chart.axis_label = "Efficiency (busy / allocated, %)";
  chart.ratio_axis = true;
  if (c.fleet_efficiency)
    chart.reference = svg::ReferenceLine{*c.fleet_efficiency, "fleet " + format_percent(*c.fleet_efficiency, 1)};
  Usage rest;
  size_t rest_groups = 0;
  for (size_t index : c.ranking) {
    const Row& row = c.report.rows[index];
    if (row.idle) continue;  // idle time is never busy; the idle chart shows it
    if (chart.bars.size() < kTopGroups) {
      chart.bars.push_back(efficiency_bar(row_label(row), row.usage));
    } else {
      rest += row.usage;
      ++rest_groups;
    }
  }
  if (rest_groups > 0) {
    chart.bars.push_back(efficiency_bar(other_label(rest_groups), rest));
    chart.bars.back().color = svg::kOtherColor;
  }
  return svg::horizontal_bars(chart);
}

std::string efficiency_key() {
  return fmt::format(
      "<div class=\"key\">Bands:<span class=\"swatch\" style=\"background:{}\"></span>below {:.0f} %"
      "<span class=\"swatch\" style=\"background:{}\"></span>{:.0f}&ndash;{:.0f} %"
      "<span class=\"swatch\" style=\"background:{}\"></span>{:.0f} % and above</div>\n",
      kLowColor, kLowEfficiency * 100, kMidColor, kLowEfficiency * 100, kHighEfficiency * 100, kHighColor,
      kHighEfficiency * 100);
}

// The step the timeline was computed with, for the axis label; the last step may be shorter.
double step_length(const Report& r) {
  if (r.step_seconds > 0) return r.step_seconds;
  const Timeline& t = r.timeline;
  if (!t.starts.empty() && !t.ends.empty()) return finite(t.ends[0] - t.starts[0]);
  return 0;
}

double timeline_value(const Timeline& t, size_t row, size_t step) {
  if (row >= t.row_values.size() || step >= t.row_values[row].size()) return 0;
  return t.row_values[row][step];
}

std::string timeline_chart(const Context& c) {
  const Timeline& t = c.report.timeline;
  const size_t steps = std::min(t.starts.size(), t.ends.size());
  svg::StackedTimeChart chart;
  chart.id = "chart-timeline";
  chart.title = c.measure.priced ? "Cost over time" : "Allocated GPU-hours over time";
  chart.y_axis_label = c.measure.unit() + " per " + format_duration(step_length(c.report));
  chart.starts.assign(t.starts.begin(), t.starts.begin() + steps);
  chart.ends.assign(t.ends.begin(), t.ends.begin() + steps);
  svg::Series other{other_label(c.ranking.size() > kTopSeries ? c.ranking.size() - kTopSeries : 0),
                    std::string(svg::kOtherColor), std::vector<double>(steps, 0.0)};
  // Idle time goes on top of the stack, so the owners' bars start from the axis and compare.
  std::vector<svg::Series> idle;
  for (size_t i = 0; i < c.ranking.size(); ++i) {
    size_t row = c.ranking[i];
    std::vector<double> values(steps);
    for (size_t k = 0; k < steps; ++k) values[k] = c.measure.of_step(timeline_value(t, row, k));
    if (i < kTopSeries) {
      svg::Series series{row_label(c.report.rows[row]), c.colors[row], std::move(values)};
      (c.report.rows[row].idle ? idle : chart.series).push_back(std::move(series));
    } else {
      for (size_t k = 0; k < steps; ++k) other.values[k] += values[k];
    }
  }
  if (c.ranking.size() > kTopSeries) chart.series.push_back(std::move(other));
  for (svg::Series& s : idle) chart.series.push_back(std::move(s));
  return svg::stacked_time_bars(chart);
}

std::string idle_chart(const Context& c) {
  const Timeline& t = c.report.timeline;
  const size_t steps = std::min(t.starts.size(), t.ends.size());
  svg::RatioTimeChart chart;
  chart.id = "chart-idle";
  chart.title = "Idle share of covered GPU time";
  chart.y_axis_label = "Idle share (%)";
  chart.starts.assign(t.starts.begin(), t.starts.begin() + steps);
  chart.ends.assign(t.ends.begin(), t.ends.begin() + steps);
  for (size_t k = 0; k < steps; ++k) {
    double idle = k < t.idle_seconds.size() ? t.idle_seconds[k] : NAN;
    double capacity = k < t.capacity_seconds.size() ? t.capacity_seconds[k] : 0;
    chart.ratios.push_back(ratio(idle, capacity));
  }
  chart.overall = c.idle_share;
  chart.overall_label = "idle";
  chart.rest_label = "allocated to owners";
  chart.color = kIdleLineColor;
  return svg::ratio_over_time(chart);
}

}  // namespace

void charts_section(Page& p, const Context& c) {
  const size_t groups = c.ranking.size();
  std::string top_note = groups > kTopGroups
                             ? fmt::format("Top {} of {} groups; the rest as \"other\".", kTopGroups, groups)
                             : fmt::format("{} group{}.", groups, groups == 1 ? "" : "s");
  p.raw("<h2>Charts</h2>\n<div class=\"charts\">\n");
  figure(p, "", c.measure.priced ? "Cost per group" : "Allocated GPU-hours per group", top_note, cost_chart(c));
  figure(p, "", "Efficiency per group", "Busy / allocated GPU time; the dashed line is the fleet.", efficiency_chart(c),
         efficiency_key());
  std::string timeline_note =
      groups > kTopSeries ? fmt::format("Top {} groups stacked; the rest as \"other\".", kTopSeries) : "";
  figure(p, "wide", c.measure.priced ? "Cost over time" : "Allocated GPU-hours over time", timeline_note,
         timeline_chart(c));
  figure(p, "wide", "Idle share over time", "Idle GPU time / GPU time covered by the ledger, per step.", idle_chart(c));
  p.raw("</div>\n");
}

}  // namespace gpumeter::report::html
