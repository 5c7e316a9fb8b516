#pragma once
// Inline SVG charts for the HTML report. Each chart is a plain value turned into one <svg> element
// by a pure function; the report model stays out of here so the geometry can be tested alone.
// Whatever the input (no data, all zeros, one step, NaN or infinite values), the output has only
// finite coordinates and shows a "no data" note where there is nothing to draw.

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpumeter::report::svg {

// Tableau 10 without its grey: distinct on white and for the common colour-vision deficiencies.
inline constexpr std::array<std::string_view, 8> kPalette = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                                             "#59a14f", "#edc948", "#b07aa1", "#9c755f"};
inline constexpr std::string_view kOtherColor = "#bab0ac";         // "other" and the long tail
inline constexpr std::string_view kIdleColor = "#d7dbe0";          // the "__idle__" row
inline constexpr std::string_view kUnattributedColor = "#6b6b6b";  // the "__unattributed__" row

struct Bar {
  std::string label;       // left of the bar, shortened to fit; in full in the tooltip
  double value = 0;        // in axis units
  std::string value_text;  // right of the bar, already formatted
  std::string color;
};

struct ReferenceLine {
  double value = 0;
  std::string label;
};

struct BarChart {
  std::string id;
  std::string title;       // the accessible name
  std::string axis_label;  // with its unit
  std::vector<Bar> bars;   // top to bottom
  // Axis scale: values are ratios and ticks read "0 %".."100 %", from 0 to max(1, largest value).
  bool ratio_axis = false;
  std::optional<ReferenceLine> reference;  // a dashed vertical line across the bars
  int width = 560;
};
std::string horizontal_bars(const BarChart& chart);

struct Series {
  std::string label;
  std::string color;
  std::vector<double> values;  // one per step; missing values count as zero
};

struct StackedTimeChart {
  std::string id;
  std::string title;
  std::string y_axis_label;
  std::vector<double> starts;  // unix seconds, one per step
  std::vector<double> ends;
  std::vector<Series> series;  // bottom to top
  int width = 1100;
  int height = 320;
};
// One stacked bar per step, as wide as the step, on a UTC time axis.
std::string stacked_time_bars(const StackedTimeChart& chart);

struct RatioTimeChart {
  std::string id;
  std::string title;
  std::string y_axis_label;
  std::vector<double> starts;
  std::vector<double> ends;
  std::vector<std::optional<double>> ratios;  // per step; nullopt where the step has no data
  std::optional<double> overall;              // the whole period: a donut on the left and a dashed line
  std::string overall_label;                  // the donut's legend: what the ratio is, e.g. "idle"
  std::string rest_label;                     // and what the rest is, e.g. "allocated to owners"
  std::string color;
  int width = 1100;
  int height = 260;
};
// The per-step ratio as a stepped line with a filled area, beside a donut of the overall ratio.
std::string ratio_over_time(const RatioTimeChart& chart);

// Exposed for tests: a "nice" axis (1, 2, 2.5 or 5 x 10^n steps) covering [0, max].
struct Axis {
  double max = 1;
  double step = 0.2;
  int decimals = 1;
};
Axis nice_axis(double max, int target_ticks);

// Exposed for tests: tick positions on a UTC time axis, aligned to whole minutes, hours or days.
struct TimeTick {
  double at = 0;
  std::string label;
};
std::vector<TimeTick> time_ticks(double from, double to, int max_ticks);

}  // namespace gpumeter::report::svg
