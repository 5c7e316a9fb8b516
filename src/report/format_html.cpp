// The HTML page of `gpumeter report`: one self-contained document (inline CSS, inline SVG, no
// script, nothing fetched) that can be mailed or archived as the record of a chargeback period.
// Every string from the report goes through append_escaped: owner names come from pod labels,
// cgroup paths and job names, which anyone able to start a job can choose.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>

#include "report/format.h"
#include "report/html_text.h"
#include "report/html_page.h"
#include "report/svg_chart.h"

namespace gpumeter::report {

namespace {

using namespace html;

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kJoulesPerKWh = 3.6e6;

constexpr std::string_view kStyle = R"css(
:root{--ink:#1f2933;--muted:#5f6b7a;--line:#dde2e7;--bg:#f5f6f8}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:1180px;margin:0 auto;padding:24px 28px 40px}
h1{font-size:26px;margin:0 0 2px}
h2{font-size:18px;margin:30px 0 12px;padding-bottom:6px;border-bottom:1px solid var(--line)}
.period{font-size:16px;color:var(--muted);margin:0 0 14px}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:3px 18px;margin:0}
dl.meta dt{color:var(--muted)}
dl.meta dd{margin:0;overflow-wrap:anywhere}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(160px,1fr));gap:12px}
.card,.panel{background:#fff;border:1px solid var(--line);border-radius:8px;padding:14px 16px}
.card .label{color:var(--muted);font-size:13px}
.card .value{font-size:22px;font-weight:700;font-variant-numeric:tabular-nums;overflow-wrap:anywhere}
.card .unit{font-size:14px;font-weight:600;color:var(--muted)}
.card .sub{color:var(--muted);font-size:12px}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:16px}
.wide{grid-column:1/-1}
figure{margin:0}
figcaption{font-weight:600;margin-bottom:8px}
figcaption small{display:block;font-weight:400;color:var(--muted)}
svg.chart{display:block;max-width:100%;height:auto}
.key{font-size:12px;color:var(--muted);margin-top:6px}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin:0 4px 0 10px}
.table-wrap{overflow-x:auto;background:#fff;border:1px solid var(--line);border-radius:8px}
.narrow{max-width:820px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{padding:5px 6px;border-bottom:1px solid var(--line);text-align:left;white-space:nowrap}
td.key{white-space:normal;overflow-wrap:anywhere;min-width:9em}
thead th{background:#eef1f4;vertical-align:bottom}
thead th small{font-weight:400;color:var(--muted)}
th.group{text-align:center;border-left:2px solid #fff;border-right:2px solid #fff}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tfoot td{font-weight:700;border-top:2px solid #9aa5b1;border-bottom:0}
tbody tr:nth-child(even){background:#fafbfc}
.special{font-style:italic;color:var(--muted)}
.over{color:#b3261e;font-weight:700}
.ok{color:#17702a;font-weight:700}
.bad{color:#b3261e;font-weight:700}
.banner{background:#fff4e5;border:1px solid #f0b357;border-left:6px solid #e08a00;border-radius:8px;padding:10px 16px;margin:18px 0 0}
.banner a{color:#7a3e00;font-weight:600}
section.warnings{background:#fff8ee;border:1px solid #f0b357;border-radius:8px;padding:4px 16px 8px}
section.warnings ul{padding-left:18px}
section.warnings li{margin:8px 0}
.kind{display:inline-block;font-size:12px;font-weight:600;background:#fde2c4;color:#7a3e00;border-radius:4px;padding:0 6px;margin-right:6px}
.detail{color:var(--muted);font-size:12px}
footer{color:var(--muted);font-size:12px;margin-top:28px}
@media print{body{background:#fff}.card,.panel,tr{break-inside:avoid}}
)css";

std::vector<size_t> rank_rows(const Report& report, const Measure& measure) {
  std::vector<size_t> order(report.rows.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // The query engine sorts already; sorting again keeps the charts right if it ever does not.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return measure.of(report.rows[a]) > measure.of(report.rows[b]); });
  return order;
}

// The timeline's top rows get palette colours; the same row has the same colour in every chart.
std::vector<std::string> row_colors(const Report& report, const std::vector<size_t>& ranking) {
  std::vector<std::string> colors(report.rows.size(), std::string(svg::kOtherColor));
  size_t next = 0;
  for (size_t i = 0; i < ranking.size() && i < kTopSeries; ++i) {
    const Row& row = report.rows[ranking[i]];
    if (row.idle)
      colors[ranking[i]] = svg::kIdleColor;
    else if (row.unattributed || row.faulty)
      colors[ranking[i]] = svg::kUnattributedColor;
    else
      colors[ranking[i]] = svg::kPalette[next++ % svg::kPalette.size()];
  }
  return colors;
}

Context make_context(const Report& report) {
  Context c{report, Measure{report.priced, report.currency}, {}, {}, {}, {}, {}};
  c.ranking = rank_rows(report, c.measure);
  c.colors = row_colors(report, c.ranking);
  for (const Row& row : report.rows)
    if (!row.idle && !row.faulty) c.owners += row.usage;
  c.idle_share = ratio(report.reconciliation.idle_seconds, report.reconciliation.covered_seconds);
  // Owners only: idle seconds are allocated to "__idle__" and would count as waste twice.
  c.fleet_efficiency = ratio(c.owners.busy_seconds, c.owners.allocated_seconds);
  return c;
}

// ---- header and summary -------------------------------------------------------------------

void meta_item(Page& p, std::string_view name, std::string_view value) {
  p.raw("<dt>").text(name).raw("</dt><dd>").text(value).raw("</dd>\n");
}

std::string idle_policy_text(std::string_view policy) {
  if (policy == "separate") return "separate: idle GPU time is a row of its own";
  if (policy == "spread-by-node") return "spread-by-node: each node's idle cost is shared by its owners";
  if (policy == "spread-by-pool") return "spread-by-pool: each pool's idle cost is shared by its owners";
  return std::string(policy);
}

std::string joined(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (const std::string& s : parts) {
    if (!out.empty()) out += separator;
    out += s;
  }
  return out;
}

void header_section(Page& p, const Context& c) {
  const Report& r = c.report;
  p.put("<header>\n<h1>{}</h1>\n", r.priced ? "GPU chargeback report" : "GPU usage report");
  p.raw("<p class=\"period\">").text(utc_text(r.from)).raw(" &ndash; ").text(utc_text(r.to));
  p.raw(" &middot; ").text(format_duration(r.to - r.from)).raw("</p>\n<dl class=\"meta\">\n");
  meta_item(p, "Source", r.url.empty() ? "(unknown)" : r.url);
  meta_item(p, "Backend", r.backend.empty() ? "unknown" : r.backend);
  meta_item(p, "Grouped by", r.by.empty() ? "(nothing)" : joined(r.by, ", "));
  if (r.priced) {
    meta_item(p, "Currency", r.currency);
    meta_item(p, "Pricing file", r.pricing_source);
    meta_item(p, "Idle policy", idle_policy_text(r.idle_policy));
  } else {
    meta_item(p, "Pricing", "none: usage in GPU-hours, no costs");
  }
  if (r.step_seconds > 0) meta_item(p, "Timeline step", format_duration(r.step_seconds));
  p.raw("</dl>\n</header>\n");
}

void warning_banner(Page& p, const Report& r) {
  size_t n = r.warnings.size();
  if (n == 0 && r.reconciliation.ok) return;
  p.raw("<div class=\"banner\" role=\"alert\"><strong>&#9888; ");
  if (n > 0) p.put("{} warning{}", n, n == 1 ? "" : "s");
  if (n > 0 && !r.reconciliation.ok) p.raw(" and ");
  if (!r.reconciliation.ok) p.raw("a reconciliation mismatch");
  p.raw(":</strong> some figures may be incomplete. ");
  if (n > 0) p.raw("<a href=\"#warnings\">See the warnings</a>");
  if (n > 0 && !r.reconciliation.ok) p.raw(" and ");
  if (!r.reconciliation.ok) p.raw("<a href=\"#reconciliation\">the reconciliation</a>");
  p.raw(".</div>\n");
}

// The unit is set smaller than the figure, so that six cards fit one row and the figure stands out.
void card(Page& p, std::string_view label, std::string_view value, std::string_view unit, std::string_view sub) {
  p.raw("<div class=\"card\"><div class=\"label\">").text(label).raw("</div><div class=\"value\">").text(value);
  if (!unit.empty()) p.raw(" <span class=\"unit\">").text(unit).raw("</span>");
  p.raw("</div><div class=\"sub\">").text(sub).raw("</div></div>\n");
}

void summary_section(Page& p, const Context& c) {
  const Report& r = c.report;
  const Reconciliation& rec = r.reconciliation;
  p.raw("<h2>Summary</h2>\n<div class=\"cards\">\n");
  if (r.priced) {
    // The headline is what gets invoiced: to the cent, unlike the rounded chart labels.
    card(p, "Total cost (" + c.measure.unit() + ")", format_number(finite(r.total.cost.total()), 2), "",
         "over " + format_duration(r.to - r.from));
  }
  card(p, "Allocated GPU-hours", hours(c.owners.allocated_seconds), "",
       "to owners; " + hours(c.owners.busy_seconds) + " GPU-h busy");
  card(p, "Idle share", optional_percent(c.idle_share), "",
       hours(rec.idle_seconds) + " of " + hours(rec.covered_seconds) + " GPU-h covered");
  card(p, "Fleet efficiency", optional_percent(c.fleet_efficiency), "", "busy / allocated GPU time of owners");
  double kwh = finite(r.total.usage.energy_joules) / kJoulesPerKWh;
  card(p, "Energy", format_number(kwh, kwh >= 100 ? 0 : 1), "kWh", "attributed to the groups");
  size_t budgets = 0, over = 0;
  for (const Row& row : r.rows) {
    if (!row.budget) continue;
    ++budgets;
    if (row.budget->used_ratio > 1) ++over;
  }
  if (budgets > 0) {
    card(p, "Budgets exceeded", fmt::format("{} of {}", over, budgets), "", "above the budget prorated to the period");
  }
  p.raw("</div>\n");
}

// ---- tables ----------------------------------------------------------------------------------

void num_cell(Page& p, std::string_view text, std::string_view css_class = "num") {
  p.put("<td class=\"{}\">", css_class).text(text).raw("</td>");
}

// Which columns the table of rows has; computed once so the head, the rows and the total agree.
struct Columns {
  size_t keys = 1;
  bool cost = false;
  bool idle_cost = false;  // only when some idle cost was spread; "separate" leaves it all zero
  bool budget = false;
  bool idle_allocated = false;  // some group held a GPU with no process (scheduler policy)
  bool mig = false;             // some group held MIG slices

  size_t usage() const { return 5 + (idle_allocated ? 1 : 0) + (mig ? 1 : 0); }
  size_t count() const { return keys + usage() + (cost ? (idle_cost ? 5 : 4) : 0) + (budget ? 2 : 0); }
};

Columns table_columns(const Report& r) {
  Columns c;
  c.keys = std::max<size_t>(r.by.size(), 1);
  c.cost = r.priced;
  c.idle_allocated = has_idle_allocation(r);
  c.mig = has_mig_slices(r);
  for (const Row& row : r.rows) {
    c.keys = std::max(c.keys, row.key.size());
    c.idle_cost |= r.priced && row.cost.idle != 0;
    c.budget |= row.budget.has_value();
  }
  return c;
}

// A column name with its unit on a second line, so that the numbers, not the names, set the
// column widths and the table fits the page without scrolling.
void column_head(Page& p, std::string_view name, std::string_view unit) {
  p.raw("<th class=\"num\">").text(name);
  if (!unit.empty()) p.raw("<br><small>").text(unit).raw("</small>");
  p.raw("</th>");
}

void table_head(Page& p, const Report& r, const Columns& columns) {
  p.raw("<thead><tr>");
  for (size_t i = 0; i < columns.keys; ++i)
    p.raw("<th rowspan=\"2\">").text(i < r.by.size() ? r.by[i] : "group").raw("</th>");
  p.put("<th class=\"group\" colspan=\"{}\">Usage</th>", columns.usage());
  if (columns.cost) {
    p.put("<th class=\"group\" colspan=\"{}\">Cost", columns.idle_cost ? 5 : 4);
    if (!r.currency.empty()) p.raw(" (").text(r.currency).raw(")");
    p.raw("</th>");
  }
  if (columns.budget) p.raw("<th class=\"group\" colspan=\"2\">Budget</th>");
  p.raw("</tr>\n<tr>");
  column_head(p, "Allocated", "GPU-h");
  if (columns.idle_allocated) column_head(p, "Held idle", "GPU-h");
  if (columns.mig) column_head(p, "On MIG slices", "GPU-h");
  column_head(p, "Busy", "GPU-h");
  column_head(p, "Efficiency", "busy/alloc.");
  column_head(p, "Memory", "GiB-h");
  column_head(p, "Energy", "kWh");
  if (columns.cost) {
    column_head(p, "Allocation", "");
    column_head(p, "Utilization", "");
    column_head(p, "Energy", "");
    if (columns.idle_cost) column_head(p, "Idle share", "");
    column_head(p, "Total", "");
  }
  if (columns.budget) {
    column_head(p, "For period", "");
    column_head(p, "Used", "");
  }
  p.raw("</tr></thead>\n");
}

void budget_cells(Page& p, const std::optional<Budget>& budget) {
  if (!budget) {
    p.raw("<td class=\"num\"></td><td class=\"num\"></td>");
    return;
  }
  num_cell(p, format_number(finite(budget->for_period), 2));
  num_cell(p, format_percent(finite(budget->used_ratio), 1), budget->used_ratio > 1 ? "num over" : "num");
}

void number_cells(Page& p, const Columns& columns, const Row& row) {
  const Usage& u = row.usage;
  num_cell(p, hours(finite(u.allocated_seconds)));
  if (columns.idle_allocated) num_cell(p, hours(finite(u.idle_allocated_seconds)));
  if (columns.mig) num_cell(p, hours(finite(u.mig_allocated_seconds)));
  num_cell(p, hours(finite(u.busy_seconds)));
  num_cell(p, optional_percent(u.efficiency()));
  num_cell(p, format_number(finite(u.memory_byte_seconds) / kBytesPerGiB / kSecondsPerHour, 0));
  num_cell(p, format_number(finite(u.energy_joules) / kJoulesPerKWh, 1));
  if (columns.cost) {
    num_cell(p, format_number(finite(row.cost.allocation), 2));
    num_cell(p, format_number(finite(row.cost.utilization), 2));
    num_cell(p, format_number(finite(row.cost.energy), 2));
    if (columns.idle_cost) num_cell(p, format_number(finite(row.cost.idle), 2));
    num_cell(p, format_number(finite(row.cost.total()), 2));
  }
  if (columns.budget) budget_cells(p, row.budget);
}

void key_cells(Page& p, const Columns& columns, const Row& row, std::string_view color) {
  for (size_t i = 0; i < columns.keys; ++i) {
    std::string_view part = i < row.key.size() ? std::string_view(row.key[i]) : std::string_view();
    bool special = part == "__idle__" || part == "__unattributed__" || part.empty();
    p.raw(special ? "<td class=\"key special\">" : "<td class=\"key\">");
    if (i == 0) p.put("<span class=\"swatch\" style=\"margin-left:0;background:{}\"></span>", color);
    p.text(key_part(part)).raw("</td>");
  }
}

void rows_section(Page& p, const Context& c) {
  const Report& r = c.report;
  const Columns columns = table_columns(r);
  p.raw("<h2>All groups</h2>\n<div class=\"table-wrap\"><table id=\"rows\">\n");
  table_head(p, r, columns);
  p.raw("<tbody>\n");
  for (size_t index : c.ranking) {
    p.raw("<tr>");
    key_cells(p, columns, r.rows[index], c.colors[index]);
    number_cells(p, columns, r.rows[index]);
    p.raw("</tr>\n");
  }
  if (r.rows.empty())
    p.put("<tr><td class=\"special\" colspan=\"{}\">No GPU time in this period.</td></tr>\n", columns.count());
  p.put("</tbody>\n<tfoot><tr><td colspan=\"{}\">Total</td>", columns.keys);
  Row total = r.total;
  total.budget.reset();
  number_cells(p, columns, total);
  p.raw("</tr></tfoot>\n</table></div>\n");
}

// With --forecast: each owner group's demand over the horizon, then the total.
void forecast_section(Page& p, const Context& c) {
  const Report& r = c.report;
  if (r.forecast_seconds <= 0) return;
  p.put("<h2 id=\"forecast\">Forecast for the next {} days</h2>\n", format_number(r.forecast_seconds / 86400, 1));
  p.raw(
      "<p>The linear trend of the GPUs each group held over the period, carried over the horizon "
      "(docs/chargeback.md, \"Forecast\").</p>\n<div class=\"table-wrap\"><table id=\"forecast-table\">\n<thead><tr>");
  for (const auto& d : r.by) p.raw("<th>").text(d).raw("</th>");
  p.raw("<th>GPUs now</th><th>Trend, GPUs a day</th><th>GPU-hours</th>");
  if (r.priced) p.raw("<th>Cost</th>");
  p.raw("</tr></thead>\n<tbody>\n");
  auto row_cells = [&](const RowForecast& f) {
    num_cell(p, format_number(f.gpus_at_end, 2));
    num_cell(p, format_number(f.trend_gpus_per_day, 3));
    num_cell(p, format_number(f.gpu_hours, 1));
    if (r.priced) num_cell(p, f.cost ? format_number(*f.cost, 2) : "-");
  };
  for (size_t index : c.ranking) {
    const Row& row = r.rows[index];
    if (!row.forecast) continue;
    p.raw("<tr>");
    for (const auto& part : row.key) p.raw("<td>").text(key_part(part)).raw("</td>");
    row_cells(*row.forecast);
    p.raw("</tr>\n");
  }
  p.raw("</tbody>\n");
  if (r.total.forecast) {
    p.put("<tfoot><tr><td colspan=\"{}\">Total</td>", r.by.size());
    row_cells(*r.total.forecast);
    p.raw("</tr></tfoot>\n");
  }
  p.raw("</table></div>\n");
}

void reconciliation_row(Page& p, std::string_view name, double seconds, double covered, int decimals) {
  p.raw("<tr><td>").text(name).raw("</td>");
  num_cell(p, format_number(finite(seconds), decimals));
  num_cell(p, hours(finite(seconds)));
  num_cell(p, optional_percent(ratio(seconds, covered)));
  p.raw("</tr>\n");
}

void reconciliation_section(Page& p, const Report& r) {
  const Reconciliation& rec = r.reconciliation;
  p.raw("<h2 id=\"reconciliation\">Reconciliation</h2>\n<p>");
  if (rec.ok) {
    p.raw("<span class=\"ok\">&#10003; OK</span>: owners plus idle time equal the GPU time the ledger covered.");
  } else {
    p.raw(
        "<span class=\"bad\">&#10007; Mismatch</span>: owners plus idle time differ from the GPU time the "
        "ledger covered by more than the tolerance.");
  }
  p.raw(
      "</p>\n<div class=\"table-wrap narrow\"><table id=\"reconciliation-table\">\n<thead><tr><th></th>"
      "<th class=\"num\">GPU-seconds</th><th class=\"num\">GPU-hours</th><th class=\"num\">Of covered</th>"
      "</tr></thead>\n<tbody>\n");
  double covered = rec.covered_seconds;
  reconciliation_row(p, "GPU time reported (GPUs \u00d7 seconds)", rec.gpu_seconds, covered, 1);
  reconciliation_row(p, "Covered by the ledger", rec.covered_seconds, covered, 1);
  reconciliation_row(p, "Gaps (the agent could not integrate)", rec.gap_seconds, covered, 1);
  reconciliation_row(p, "Allocated to owners", rec.owners_seconds, covered, 1);
  reconciliation_row(p, "Idle", rec.idle_seconds, covered, 1);
  if (rec.faulty_seconds > 0) {
    reconciliation_row(p, "Faulty (kept out of the owners' charges)", rec.faulty_seconds, covered, 1);
    reconciliation_row(p, "Difference: owners + idle + faulty \u2212 covered", rec.difference_seconds, covered, 3);
  } else {
    reconciliation_row(p, "Difference: owners + idle \u2212 covered", rec.difference_seconds, covered, 3);
  }
  p.raw("</tbody></table></div>\n");
}

void warnings_section(Page& p, const Report& r) {
  p.raw("<h2 id=\"warnings\">Warnings</h2>\n");
  if (r.warnings.empty()) {
    p.raw("<p>None: every GPU reported for the whole period.</p>\n");
    return;
  }
  p.raw("<section class=\"warnings\"><ul>\n");
  for (const Warning& w : r.warnings) {
    p.raw("<li><span class=\"kind\">").text(w.kind.empty() ? "warning" : w.kind).raw("</span>").text(w.message);
    std::vector<std::string> details;
    if (!w.gpu.empty()) details.push_back("GPU " + w.gpu);
    if (!w.node.empty()) details.push_back("node " + w.node);
    if (w.from != 0 || w.to != 0) details.push_back(utc_text(w.from) + " \u2013 " + utc_text(w.to));
    if (!details.empty()) p.raw("<br><span class=\"detail\">").text(joined(details, " \u00b7 ")).raw("</span>");
    p.raw("</li>\n");
  }
  p.raw("</ul></section>\n");
}

void footer(Page& p, const Report& r) {
  p.raw("<footer>Generated by <code>gpumeter report</code>");
  if (r.queries > 0) {
    p.put(" from {} API quer{} in {} s", r.queries, r.queries == 1 ? "y" : "ies",
          format_number(finite(r.elapsed_seconds), 1));
  }
  p.raw(". Usage comes from the agents' exact ledger counters");
  p.raw(r.priced ? "; costs from the pricing file.</footer>\n" : ".</footer>\n");
}

}  // namespace

std::string render_html(const Report& report) {
  const Context c = make_context(report);
  Page p;
  p.raw("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
  p.raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
  p.text(report.priced ? "GPU chargeback " : "GPU usage ").text(utc_text(report.from)).raw(" &ndash; ");
  p.text(utc_text(report.to)).raw("</title>\n<style>").raw(kStyle).raw("</style>\n</head>\n<body>\n<main>\n");
  header_section(p, c);
  warning_banner(p, report);
  summary_section(p, c);
  charts_section(p, c);
  rows_section(p, c);
  forecast_section(p, c);
  reconciliation_section(p, report);
  warnings_section(p, report);
  footer(p, report);
  p.raw("</main>\n</body>\n</html>\n");
  return std::move(p).take();
}

}  // namespace gpumeter::report
