#pragma once
// What the sections of the report's HTML page share (format_html.cpp, html_charts.cpp): the page
// being written, the measure the charts and headline use, and the context computed once.

#include <fmt/format.h>

#include <cmath>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "report/format.h"
#include "report/html_text.h"
#include "report/report_model.h"

namespace gpumeter::report::html {

inline constexpr double kSecondsPerHour = 3600;
inline constexpr size_t kTopSeries = 8;  // series in the timeline before "other"

class Page {
 public:
  Page& raw(std::string_view s) {
    out_.append(s);
    return *this;
  }
  Page& text(std::string_view s) {
    append_escaped(out_, s);
    return *this;
  }
  // Formats with fmt; arguments are inserted as given, so strings must be escaped first.
  template <typename... Args>
  Page& put(fmt::format_string<Args...> f, Args&&... args) {
    fmt::format_to(std::back_inserter(out_), f, std::forward<Args>(args)...);
    return *this;
  }
  std::string take() && { return std::move(out_); }

 private:
  std::string out_;
};

inline double finite(double v) { return std::isfinite(v) ? v : 0.0; }

inline std::optional<double> ratio(double part, double whole) {
  if (!std::isfinite(part) || !std::isfinite(whole) || whole <= 0) return std::nullopt;
  return part / whole;
}

inline std::string hours(double seconds) { return format_number(seconds / kSecondsPerHour, 1); }

inline std::string optional_percent(const std::optional<double>& r) { return r ? format_percent(*r, 1) : "n/a"; }

inline std::string utc_text(double t) {
  // Seconds only for a time off the whole minute: periods usually start on one.
  bool whole_minute = std::fmod(finite(t), 60.0) == 0;
  return format_utc(t, whole_minute ? "%Y-%m-%d %H:%M UTC" : "%Y-%m-%d %H:%M:%S UTC");
}

// The owner names the ledger reserves, in words a reader of the report understands.
inline std::string key_part(std::string_view part) {
  if (part == "__idle__") return "(idle)";
  if (part == "__unattributed__") return "(unattributed)";
  if (part.empty()) return "(none)";
  return std::string(part);
}

inline std::string row_label(const Row& row) {
  if (row.key.empty()) return row.idle ? "(idle)" : row.unattributed ? "(unattributed)" : "(all)";
  std::string label;
  for (const std::string& part : row.key) {
    if (!label.empty()) label += " / ";
    label += key_part(part);
  }
  return label;
}

// What the charts and headline measure: money when the report is priced, otherwise allocated
// GPU-hours, which is what a price would be applied to.
struct Measure {
  bool priced = false;
  std::string currency;

  double of(const Row& row) const {
    return finite(priced ? row.cost.total() : row.usage.allocated_seconds / kSecondsPerHour);
  }
  // Timeline values are cost when priced, else allocated seconds.
  double of_step(double value) const { return finite(priced ? value : value / kSecondsPerHour); }
  std::string unit() const { return priced ? (currency.empty() ? "cost" : currency) : "GPU-h"; }
  std::string text(double v) const {
    if (priced) return format_number(v, std::fabs(v) >= 1000 ? 0 : 2) + " " + unit();
    return format_number(v, 1) + " GPU-h";
  }
};

// Everything the sections share, computed once.
struct Context {
  const Report& report;
  Measure measure;
  std::vector<size_t> ranking;      // row indices, largest measure first
  std::vector<std::string> colors;  // per row: its timeline colour, or "other" grey
  Usage owners;                     // every row but idle
  std::optional<double> idle_share;
  std::optional<double> fleet_efficiency;
};

// The charts section: cost and efficiency per group, cost and idle share over time.
void charts_section(Page& p, const Context& c);

}  // namespace gpumeter::report::html
