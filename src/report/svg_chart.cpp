#include "report/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <iterator>

#include "report/html_text.h"
#include "util/terminal_text.h"

namespace gpumeter::report::svg {

namespace {

constexpr std::string_view kGridColor = "#e3e6ea";
constexpr std::string_view kAxisColor = "#8a939c";
constexpr std::string_view kTextColor = "#3b4249";
constexpr std::string_view kReferenceColor = "#2b2f33";
constexpr std::string_view kDonutRestColor = "#c9d6e4";
constexpr double kCharWidth = 6.6;
// A white outline under a figure keeps it legible where it crosses a grid or reference line.
constexpr std::string_view kHalo =
    " stroke=\"#fff\" stroke-width=\"3\" stroke-linejoin=\"round\" paint-order=\"stroke\"";  // average advance of the
                                                                                             // 12 px sans-serif labels

double finite(double v) { return std::isfinite(v) ? v : 0.0; }
double positive(double v) { return std::isfinite(v) && v > 0 ? v : 0.0; }

struct Out {
  std::string s;
  template <typename... Args>
  void put(fmt::format_string<Args...> f, Args&&... args) {
    fmt::format_to(std::back_inserter(s), f, std::forward<Args>(args)...);
  }
};

// Coordinates go through here so that no NaN can ever reach an attribute.
struct Px {
  double v;
};
}  // namespace
}  // namespace gpumeter::report::svg

template <>
struct fmt::formatter<gpumeter::report::svg::Px> : fmt::formatter<double> {
  auto format(gpumeter::report::svg::Px p, format_context& ctx) const {
    double v = std::isfinite(p.v) ? p.v : 0.0;
    return fmt::format_to(ctx.out(), "{:.1f}", v);
  }
};

namespace gpumeter::report::svg {

namespace {

void open_svg(Out& o, std::string_view id, std::string_view title, int width, double height) {
  // Presentation attributes instead of page CSS, so a chart copied out of the page still reads.
  o.put(
      "<svg id=\"{0}\" class=\"chart\" viewBox=\"0 0 {1} {2}\" width=\"{1}\" height=\"{2}\" "
      "role=\"img\" aria-labelledby=\"{0}-title\" font-family=\"system-ui, -apple-system, 'Segoe UI', "
      "Roboto, sans-serif\" font-size=\"12\" fill=\"{3}\">\n<title id=\"{0}-title\">{4}</title>\n",
      escaped(id), width, Px{height}, kTextColor, escaped(title));
}

void note(Out& o, double x, double y, std::string_view text) {
  o.put(
      "<text class=\"nodata\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#6b7280\" "
      "font-style=\"italic\">{}</text>\n",
      Px{x}, Px{y}, escaped(text));
}

void text_at(Out& o, double x, double y, std::string_view anchor, std::string_view text, std::string_view extra = "") {
  o.put("<text x=\"{}\" y=\"{}\" text-anchor=\"{}\"{}>{}</text>\n", Px{x}, Px{y}, anchor, extra, escaped(text));
}

void line(Out& o, double x1, double y1, double x2, double y2, std::string_view color, std::string_view extra = "") {
  o.put("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"{}/>\n", Px{x1}, Px{y1}, Px{x2}, Px{y2}, color,
        extra);
}

std::string tick_label(double value, const Axis& axis, bool ratio) {
  if (ratio) return format_number(value * 100.0, std::max(0, axis.decimals - 2)) + " %";
  return format_number(value, axis.decimals);
}

size_t chars_fitting(double width) { return static_cast<size_t>(std::max(1.0, std::floor(width / kCharWidth))); }

// Plot area of a chart with a time axis at the bottom and a value axis on the left.
struct Plot {
  double left, top, width, height;
  double t0, t1;
  Axis axis;

  double x(double t) const { return left + (finite(t) - t0) / (t1 - t0) * width; }
  double y(double v) const { return top + height - std::clamp(finite(v) / axis.max, 0.0, 1.0) * height; }
  double bottom() const { return top + height; }
  double right() const { return left + width; }
};

// Steps are taken as given, but a reversed or empty period must not divide by zero.
std::pair<double, double> time_range(const std::vector<double>& starts, const std::vector<double>& ends, size_t steps) {
  double t0 = INFINITY, t1 = -INFINITY;
  for (size_t k = 0; k < steps; ++k) {
    if (std::isfinite(starts[k])) t0 = std::min(t0, starts[k]);
    if (std::isfinite(ends[k])) t1 = std::max(t1, ends[k]);
  }
  if (!std::isfinite(t0) && !std::isfinite(t1)) return {0.0, 1.0};
  if (!std::isfinite(t0)) t0 = t1 - 1;
  if (!std::isfinite(t1)) t1 = t0 + 1;
  if (t1 <= t0) t1 = t0 + 1;
  return {t0, t1};
}

void value_axis(Out& o, const Plot& p, bool ratio, std::string_view label) {
  for (double v = 0; v <= p.axis.max * (1 + 1e-9); v += p.axis.step) {
    double y = p.y(v);
    line(o, p.left, y, p.right(), y, v == 0 ? kAxisColor : kGridColor);
    text_at(o, p.left - 6, y + 4, "end", tick_label(v, p.axis, ratio));
  }
  double cx = p.left - 52, cy = p.top + p.height / 2;
  o.put("<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" transform=\"rotate(-90 {0} {1})\">{2}</text>\n", Px{cx},
        Px{cy}, escaped(label));
}

void time_axis(Out& o, const Plot& p) {
  int max_ticks = std::max(2, static_cast<int>(p.width / 90));
  for (const TimeTick& tick : time_ticks(p.t0, p.t1, max_ticks)) {
    double x = p.x(tick.at);
    line(o, x, p.bottom(), x, p.bottom() + 5, kAxisColor);
    // A tick at the very end would have half its label cut off by the chart's edge.
    text_at(o, x, p.bottom() + 18, x > p.right() - 24 ? "end" : "middle", tick.label);
  }
  text_at(o, p.left + p.width / 2, p.bottom() + 36, "middle", "Time (UTC)");
}

// A legend below the plot, in as many rows of three entries as needed.
double legend_height(size_t entries) { return entries == 0 ? 0 : 20.0 * double((entries + 2) / 3) + 6; }

void legend(Out& o, const std::vector<Series>& series, double left, double top, double width) {
  double column = width / 3;
  for (size_t i = 0; i < series.size(); ++i) {
    double x = left + column * double(i % 3);
    double y = top + 20.0 * double(i / 3);
    o.put("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" rx=\"2\" fill=\"{}\"/>\n", Px{x}, Px{y},
          escaped(series[i].color));
    text_at(o, x + 18, y + 10, "start", truncate_utf8(series[i].label, chars_fitting(column - 26)));
  }
}

}  // namespace

Axis nice_axis(double max, int target_ticks) {
  if (!std::isfinite(max) || max <= 0) return Axis{};
  double raw = max / std::max(1, target_ticks);
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double normalized = raw / magnitude;
  double factor = normalized <= 1 ? 1 : normalized <= 2 ? 2 : normalized <= 2.5 ? 2.5 : normalized <= 5 ? 5 : 10;
  Axis axis;
  axis.step = factor * magnitude;
  // The epsilon keeps 0.30000000000000004 / 0.1 from adding an empty tick.
  axis.max = std::ceil(max / axis.step - 1e-9) * axis.step;
  int decimals = -static_cast<int>(std::floor(std::log10(axis.step) + 1e-9));
  if (factor == 2.5) ++decimals;
  axis.decimals = std::max(0, decimals);
  return axis;
}

namespace {

constexpr double kDay = 86400;
constexpr double kWeek = 7 * kDay;
constexpr double kFirstMonday = 4 * kDay;  // 1970-01-05: weekly ticks fall on ISO week starts

std::string tick_label(double t, bool date) {
  // Month names by hand: strftime's %b would follow the process locale.
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  if (!gmtime_r(&tt, &tm)) return "";
  if (date || (tm.tm_hour == 0 && tm.tm_min == 0)) return fmt::format("{} {}", kMonths[tm.tm_mon], tm.tm_mday);
  return fmt::format("{:02}:{:02}", tm.tm_hour, tm.tm_min);
}

// Calendar months are not a fixed number of seconds, so long periods step through them.
std::vector<TimeTick> month_ticks(double from, double to, int months_per_tick) {
  std::vector<TimeTick> ticks;
  std::time_t tt = static_cast<std::time_t>(std::floor(from));
  std::tm tm{};
  if (!gmtime_r(&tt, &tm)) return ticks;
  int month = tm.tm_year * 12 + tm.tm_mon;
  month = (month + months_per_tick - 1) / months_per_tick * months_per_tick;
  for (;; month += months_per_tick) {
    std::tm start{};
    start.tm_year = month / 12;
    start.tm_mon = month % 12;
    start.tm_mday = 1;
    double t = static_cast<double>(timegm(&start));
    if (t < from) continue;
    if (t > to) break;
    ticks.push_back({t, tick_label(t, true)});
  }
  return ticks;
}

}  // namespace

std::vector<TimeTick> time_ticks(double from, double to, int max_ticks) {
  static constexpr double kSpacings[] = {60,    300,   900,  1800,     3600,  7200,     10800,
                                         21600, 43200, kDay, 2 * kDay, kWeek, 2 * kWeek};
  std::vector<TimeTick> ticks;
  if (!std::isfinite(from) || !std::isfinite(to) || to <= from || max_ticks < 1) return ticks;
  // Beyond a year of ticks the loop below would be pointless; nothing reports such periods.
  if (to - from > 1000 * 365 * kDay) return ticks;
  for (double spacing : kSpacings) {
    if ((to - from) / spacing > max_ticks) continue;
    double origin = spacing >= kWeek ? kFirstMonday : 0;
    for (double t = origin + std::ceil((from - origin) / spacing) * spacing; t <= to; t += spacing)
      ticks.push_back({t, tick_label(t, spacing >= kDay)});
    return ticks;
  }
  for (int months : {1, 3, 6, 12, 24, 60, 120}) {
    if ((to - from) / (30.4375 * kDay * months) <= max_ticks) return month_ticks(from, to, months);
  }
  return month_ticks(from, to, 1200);
}

std::string horizontal_bars(const BarChart& chart) {
  constexpr double kRowHeight = 26, kBarHeight = 18, kBottom = 46, kRight = 110;
  const double top = chart.reference ? 28 : 10;
  const double label_width = std::min(230.0, chart.width * 0.36);
  const double plot_left = label_width + 10;
  const double plot_width = std::max(40.0, chart.width - plot_left - kRight);
  const size_t n = chart.bars.size();
  const double plot_height = kRowHeight * double(std::max<size_t>(n, 2));
  Out o;
  open_svg(o, chart.id, chart.title, chart.width, top + plot_height + kBottom);

  double largest = 0;
  for (const Bar& b : chart.bars) largest = std::max(largest, positive(b.value));
  if (chart.reference) largest = std::max(largest, positive(chart.reference->value));
  Axis axis = nice_axis(chart.ratio_axis ? std::max(1.0, largest) : largest, 5);
  auto x_of = [&](double v) { return plot_left + std::clamp(positive(v) / axis.max, 0.0, 1.0) * plot_width; };

  for (double v = 0; v <= axis.max * (1 + 1e-9); v += axis.step) {
    double x = x_of(v);
    line(o, x, top, x, top + plot_height, v == 0 ? kAxisColor : kGridColor);
    text_at(o, x, top + plot_height + 16, "middle", tick_label(v, axis, chart.ratio_axis));
  }
  text_at(o, plot_left + plot_width / 2, top + plot_height + 36, "middle", chart.axis_label);

  if (n == 0)
    note(o, plot_left + plot_width / 2, top + plot_height / 2 + 4, "No data for this period");
  else if (largest == 0)
    note(o, plot_left + plot_width / 2, top + plot_height / 2 + 4, "All values are zero");

  // Under the bars, so that it never crosses a bar or its figure.
  if (chart.reference) {
    double x = x_of(chart.reference->value);
    line(o, x, top - 6, x, top + plot_height, kReferenceColor, " stroke-width=\"1.5\" stroke-dasharray=\"5 4\"");
    std::string_view anchor = x > plot_left + plot_width * 0.75 ? "end" : x < plot_left + 60 ? "start" : "middle";
    text_at(o, x, top - 10, anchor, chart.reference->label, " font-weight=\"600\"");
  }

  for (size_t i = 0; i < n; ++i) {
    const Bar& b = chart.bars[i];
    double y = top + kRowHeight * double(i) + (kRowHeight - kBarHeight) / 2;
    double w = x_of(b.value) - plot_left;
    if (positive(b.value) > 0) w = std::max(w, 1.5);  // a tiny value is not a zero
    o.put("<g><title>{}: {}</title>\n", escaped(b.label), escaped(b.value_text));
    text_at(o, label_width, y + kBarHeight / 2 + 4, "end", truncate_utf8(b.label, chars_fitting(label_width)));
    o.put("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"2\" fill=\"{}\"/>\n", Px{plot_left}, Px{y}, Px{w},
          Px{kBarHeight}, escaped(b.color));
    text_at(o, plot_left + w + 6, y + kBarHeight / 2 + 4, "start", b.value_text, kHalo);
    o.put("</g>\n");
  }

  o.put("</svg>\n");
  return std::move(o.s);
}

std::string stacked_time_bars(const StackedTimeChart& chart) {
  constexpr double kLeft = 78, kRight = 16, kTop = 14, kAxisSpace = 48;
  const size_t steps = std::min(chart.starts.size(), chart.ends.size());
  const double legend_top_gap = 8;
  const double total_height = chart.height + (steps > 0 ? legend_height(chart.series.size()) + legend_top_gap : 0);
  Out o;
  open_svg(o, chart.id, chart.title, chart.width, total_height);

  auto [t0, t1] = time_range(chart.starts, chart.ends, steps);
  std::vector<double> stacked(steps, 0.0);
  for (const Series& s : chart.series)
    for (size_t k = 0; k < steps && k < s.values.size(); ++k) stacked[k] += positive(s.values[k]);
  double largest = steps ? *std::max_element(stacked.begin(), stacked.end()) : 0.0;

  Plot p{kLeft, kTop, chart.width - kLeft - kRight, chart.height - kTop - kAxisSpace, t0, t1, nice_axis(largest, 5)};
  value_axis(o, p, false, chart.y_axis_label);
  if (steps == 0 || chart.series.empty()) {
    note(o, p.left + p.width / 2, p.top + p.height / 2, "No data for this period");
  } else {
    time_axis(o, p);
    if (largest == 0) note(o, p.left + p.width / 2, p.top + p.height / 2, "All values are zero");
  }

  // One path per series with a rectangle per step keeps the page small with hundreds of steps.
  std::fill(stacked.begin(), stacked.end(), 0.0);
  for (const Series& s : chart.series) {
    Out d;
    for (size_t k = 0; k < steps && k < s.values.size(); ++k) {
      double v = positive(s.values[k]);
      if (v == 0) continue;
      double x0 = p.x(chart.starts[k]), x1 = p.x(chart.ends[k]);
      double gap = x1 - x0 >= 6 ? 1.0 : 0.0;  // separate wide bars; narrow ones merge into an area
      double y_bottom = p.y(stacked[k]);
      stacked[k] += v;
      d.put("M{} {}H{}V{}H{}Z", Px{x0 + gap}, Px{p.y(stacked[k])}, Px{x1 - gap}, Px{y_bottom}, Px{x0 + gap});
    }
    if (d.s.empty()) continue;
    o.put("<path fill=\"{}\" d=\"{}\"><title>{}</title></path>\n", escaped(s.color), d.s, escaped(s.label));
  }
  if (steps > 0) legend(o, chart.series, p.left, chart.height + legend_top_gap, p.width);
  o.put("</svg>\n");
  return std::move(o.s);
}

namespace {

void swatch(Out& o, double x, double y, std::string_view color, std::string_view label) {
  o.put("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" rx=\"2\" fill=\"{}\"/>\n", Px{x}, Px{y - 10},
        escaped(color));
  text_at(o, x + 18, y, "start", label);
}

void donut(Out& o, double cx, double cy, double ratio, std::string_view color, std::string_view label,
           std::string_view rest_label) {
  constexpr double kRadius = 58, kStroke = 22;
  const double circumference = 2 * M_PI * kRadius;
  double r = std::clamp(finite(ratio), 0.0, 1.0);
  text_at(o, cx, cy - kRadius - kStroke / 2 - 10, "middle", "Whole period", " font-weight=\"600\"");
  o.put("<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"/>\n", Px{cx}, Px{cy},
        Px{kRadius}, kDonutRestColor, Px{kStroke});
  // The arc starts at twelve o'clock and runs clockwise.
  o.put(
      "<circle cx=\"{0}\" cy=\"{1}\" r=\"{2}\" fill=\"none\" stroke=\"{3}\" stroke-width=\"{4}\" "
      "stroke-dasharray=\"{5} {6}\" transform=\"rotate(-90 {0} {1})\"/>\n",
      Px{cx}, Px{cy}, Px{kRadius}, escaped(color), Px{kStroke}, Px{r * circumference}, Px{circumference});
  text_at(o, cx, cy + 7, "middle", format_percent(r, 1), " font-size=\"20\" font-weight=\"700\"");
  double legend_y = cy + kRadius + kStroke / 2 + 24;
  swatch(o, cx - 70, legend_y, color, label);
  swatch(o, cx - 70, legend_y + 18, kDonutRestColor, rest_label);
}

}  // namespace

std::string ratio_over_time(const RatioTimeChart& chart) {
  constexpr double kDonutWidth = 190, kRight = 16, kTop = 18, kAxisSpace = 48;
  const size_t steps = std::min(chart.starts.size(), chart.ends.size());
  Out o;
  open_svg(o, chart.id, chart.title, chart.width, chart.height);

  double left = 78;
  if (chart.overall) {
    donut(o, kDonutWidth / 2, chart.height / 2 - 22, *chart.overall, chart.color, chart.overall_label,
          chart.rest_label);
    left += kDonutWidth;
  }

  double largest = chart.overall ? positive(*chart.overall) : 0.0;
  bool any = false;
  for (size_t k = 0; k < steps && k < chart.ratios.size(); ++k) {
    if (!chart.ratios[k] || !std::isfinite(*chart.ratios[k])) continue;
    any = true;
    largest = std::max(largest, positive(*chart.ratios[k]));
  }
  // At least 0..10 % so that a near-zero share does not fill the whole height.
  // Headroom above the largest step keeps the line off the plot's top edge.
  Axis axis = nice_axis(std::clamp(largest * 1.1, 0.1, 1.0), 5);
  auto [t0, t1] = time_range(chart.starts, chart.ends, steps);
  Plot p{left, kTop, chart.width - left - kRight, chart.height - kTop - kAxisSpace, t0, t1, axis};
  value_axis(o, p, true, chart.y_axis_label);
  if (steps > 0) time_axis(o, p);
  if (!any) note(o, p.left + p.width / 2, p.top + p.height / 2, "No capacity data for this period");

  // Stepped outline: the ratio is one value over the whole step. A step without data breaks it.
  Out area, outline;
  bool open = false;
  double run_start = 0, last_x = 0;
  auto close_run = [&] {
    if (!open) return;
    area.put("V{}H{}Z", Px{p.bottom()}, Px{run_start});
    open = false;
  };
  for (size_t k = 0; k < steps; ++k) {
    bool has = k < chart.ratios.size() && chart.ratios[k] && std::isfinite(*chart.ratios[k]);
    double x0 = p.x(chart.starts[k]), x1 = p.x(chart.ends[k]);
    if (!has || (open && std::fabs(x0 - last_x) > 0.5)) close_run();
    if (!has) continue;
    double y = p.y(*chart.ratios[k]);
    if (!open) {
      area.put("M{} {}V{}", Px{x0}, Px{p.bottom()}, Px{y});
      outline.put("M{} {}", Px{x0}, Px{y});
      run_start = x0;
      open = true;
    } else {
      area.put("V{}", Px{y});
      outline.put("V{}", Px{y});
    }
    area.put("H{}", Px{x1});
    outline.put("H{}", Px{x1});
    last_x = x1;
  }
  close_run();
  if (!area.s.empty()) {
    o.put("<path d=\"{}\" fill=\"{}\" fill-opacity=\"0.25\"/>\n", area.s, escaped(chart.color));
    o.put("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", outline.s, escaped(chart.color));
  }

  if (chart.overall && steps > 0) {
    double y = p.y(*chart.overall);
    line(o, p.left, y, p.right(), y, kReferenceColor, " stroke-width=\"1.5\" stroke-dasharray=\"5 4\"");
    text_at(o, p.right() - 4, y - 6, "end", "whole period " + format_percent(*chart.overall, 1),
            " font-weight=\"600\"");
  }
  o.put("</svg>\n");
  return std::move(o.s);
}

}  // namespace gpumeter::report::svg
