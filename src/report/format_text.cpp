// The table, CSV and JSON formats of `gpumeter report`.
#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "report/csv_cell.h"
#include "report/format.h"
#include "report/time_spec.h"
#include "util/terminal_text.h"

namespace gpumeter::report {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Code points of a name in the table; CSV and JSON keep names whole.
constexpr std::size_t kMaxNameWidth = 48;

const char* row_kind(const Row& row) {
  return row.idle ? "idle" : row.unattributed ? "unattributed" : row.faulty ? "faulty" : "";
}

// Thousands separators, `decimals` places: 12,345.67.
std::string grouped(double v, int decimals) {
  std::string s = fmt::format("{:.{}f}", std::abs(v), decimals);
  auto dot = s.find('.');
  std::string whole = s.substr(0, dot);
  std::string out;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    if (i > 0 && (whole.size() - i) % 3 == 0) out += ',';
    out += whole[i];
  }
  if (dot != std::string::npos) out += s.substr(dot);
  return (v < 0 && std::abs(v) >= 0.5 * std::pow(10, -decimals) ? "-" : "") + out;
}

// "-" for an empty value; idle and unattributed rows are marked when no column says so (for
// example when grouping by model only). Names come from the owners' labels: what could split the
// row or reorder it is replaced, and a long one is cut to kMaxNameWidth.
std::string key_text(const Row& row, std::size_t i) {
  std::string v = row.key[i].empty() ? "-" : truncate_utf8(printable(row.key[i]), kMaxNameWidth);
  const char* kind = row_kind(row);
  const bool named = std::find(row.key.begin(), row.key.end(), std::string("__") + kind + "__") != row.key.end();
  if (i == 0 && *kind && !named) v += std::string(" [") + kind + "]";
  return v;
}

std::string efficiency_text(const Usage& u) {
  auto e = u.efficiency();
  return e ? fmt::format("{:.1f}%", *e * 100) : "-";
}

std::string period_length(double seconds) {
  if (seconds >= 86400) return fmt::format("{:.4g} d", seconds / 86400);
  if (seconds >= 3600) return fmt::format("{:.4g} h", seconds / 3600);
  return fmt::format("{:.4g} s", seconds);
}

// `footprint`: the pricing file has sites, so facility energy and CO2e are known (else null).
nlohmann::json usage_json(const Usage& u, bool footprint) {
  nlohmann::json j{
      {"allocated_seconds", u.allocated_seconds},           {"busy_seconds", u.busy_seconds},
      {"memory_byte_seconds", u.memory_byte_seconds},       {"energy_joules", u.energy_joules},
      {"idle_allocated_seconds", u.idle_allocated_seconds}, {"mig_allocated_seconds", u.mig_allocated_seconds},
      {"mig_sm_active_seconds", u.mig_sm_active_seconds}};
  auto e = u.efficiency();
  j["efficiency"] = e ? nlohmann::json(*e) : nlohmann::json(nullptr);
  j["facility_energy_joules"] = footprint ? nlohmann::json(u.facility_energy_joules) : nlohmann::json(nullptr);
  j["co2e_kg"] = footprint ? nlohmann::json(u.co2e_kg) : nlohmann::json(nullptr);
  j["idle_energy_joules"] = footprint ? nlohmann::json(u.idle_energy_joules) : nlohmann::json(nullptr);
  j["active_energy_joules"] =
      footprint ? nlohmann::json(u.energy_joules - u.idle_energy_joules) : nlohmann::json(nullptr);
  return j;
}

nlohmann::json forecast_json(const std::optional<RowForecast>& f) {
  if (!f) return nullptr;
  return {{"gpus_at_end", f->gpus_at_end},
          {"trend_gpus_per_day", f->trend_gpus_per_day},
          {"gpu_hours", f->gpu_hours},
          {"cost", f->cost ? nlohmann::json(*f->cost) : nlohmann::json(nullptr)}};
}

nlohmann::json cost_json(const Cost& c) {
  return {{"allocation", c.allocation},
          {"utilization", c.utilization},
          {"energy", c.energy},
          {"idle", c.idle},
          {"total", c.total()}};
}

}  // namespace

std::string render_json(const Report& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows) {
    nlohmann::json key = nlohmann::json::object();
    for (std::size_t i = 0; i < r.by.size() && i < row.key.size(); ++i) key[r.by[i]] = row.key[i];
    nlohmann::json j = usage_json(row.usage, r.footprint);
    j["key"] = key;
    j["cost"] = r.priced ? cost_json(row.cost) : nlohmann::json(nullptr);
    j["idle"] = row.idle;
    j["unattributed"] = row.unattributed;
    j["faulty"] = row.faulty;
    j["mig_profiles"] = row.mig_profiles;
    if (r.forecast_seconds > 0) j["forecast"] = forecast_json(row.forecast);
    if (row.budget) {
      j["budget"] = {{"monthly", row.budget->monthly},
                     {"for_period", row.budget->for_period},
                     {"used_ratio", row.budget->used_ratio}};
    } else {
      j["budget"] = nullptr;
    }
    rows.push_back(std::move(j));
  }
  nlohmann::json total = usage_json(r.total.usage, r.footprint);
  total["cost"] = r.priced ? cost_json(r.total.cost) : nlohmann::json(nullptr);
  if (r.forecast_seconds > 0) total["forecast"] = forecast_json(r.total.forecast);
  const auto& rec = r.reconciliation;
  nlohmann::json warnings = nlohmann::json::array();
  for (const auto& w : r.warnings) {
    nlohmann::json j{{"kind", w.kind}, {"message", w.message}, {"gpu", w.gpu}, {"node", w.node}};
    j["from"] = w.from > 0 ? nlohmann::json(format_utc(w.from)) : nlohmann::json(nullptr);
    j["to"] = w.to > 0 ? nlohmann::json(format_utc(w.to)) : nlohmann::json(nullptr);
    warnings.push_back(std::move(j));
  }
  nlohmann::json timeline{{"starts", r.timeline.starts},
                          {"ends", r.timeline.ends},
                          {"row_values", r.timeline.row_values},
                          {"idle_seconds", r.timeline.idle_seconds},
                          {"capacity_seconds", r.timeline.capacity_seconds},
                          {"unit", r.priced ? r.currency : std::string("allocated_seconds")}};
  nlohmann::json doc{
      {"format", "gpumeter-report"},
      {"version", kReportSchemaVersion},
      {"source", {{"url", r.url}, {"backend", r.backend}}},
      {"from", format_utc(r.from)},
      {"to", format_utc(r.to)},
      {"from_unix", r.from},
      {"to_unix", r.to},
      {"step_seconds", r.step_seconds},
      {"by", r.by},
      {"priced", r.priced},
      {"currency", r.priced ? nlohmann::json(r.currency) : nlohmann::json(nullptr)},
      {"pricing", r.priced ? nlohmann::json(r.pricing_source) : nlohmann::json(nullptr)},
      {"idle_policy", r.priced ? nlohmann::json(r.idle_policy) : nlohmann::json(nullptr)},
      {"faulty_policy", r.priced ? nlohmann::json(r.faulty_policy) : nlohmann::json(nullptr)},
      {"footprint", r.footprint},
      {"forecast_seconds", r.forecast_seconds > 0 ? nlohmann::json(r.forecast_seconds) : nlohmann::json(nullptr)},
      {"rows", std::move(rows)},
      {"total", std::move(total)},
      {"reconciliation",
       {{"gpu_seconds", rec.gpu_seconds},
        {"covered_seconds", rec.covered_seconds},
        {"gap_seconds", rec.gap_seconds},
        {"owners_seconds", rec.owners_seconds},
        {"idle_seconds", rec.idle_seconds},
        {"faulty_seconds", rec.faulty_seconds},
        {"difference_seconds", rec.difference_seconds},
        {"ok", rec.ok}}},
      {"timeline", std::move(timeline)},
      {"warnings", std::move(warnings)},
      {"queries", r.queries},
      {"elapsed_seconds", r.elapsed_seconds},
  };
  // Full precision: a consumer re-adding periods must get the exact sums back.
  return doc.dump(2) + "\n";
}

std::string render_csv(const Report& r) {
  std::string out;
  for (const auto& d : r.by) out += csv_field(d) + ",";
  out += "kind,allocated_gpu_hours,busy_gpu_hours,efficiency,memory_gib_hours,energy_kwh,idle_allocated_gpu_hours";
  if (r.footprint) out += ",facility_energy_kwh,co2e_kg,idle_energy_kwh,active_energy_kwh";
  const bool mig = has_mig_slices(r);
  if (mig) out += ",mig_allocated_gpu_hours,mig_profiles,mig_sm_active_gpu_hours";
  if (r.priced) out += ",cost_allocation,cost_utilization,cost_energy,cost_idle,cost_total,currency,budget_used_ratio";
  const bool forecast = r.forecast_seconds > 0;
  if (forecast) out += ",forecast_gpus_at_end,forecast_trend_gpus_per_day,forecast_gpu_hours";
  if (forecast && r.priced) out += ",forecast_cost";
  out += ",schema_version\n";
  for (const auto& row : r.rows) {
    for (std::size_t i = 0; i < r.by.size(); ++i) out += csv_field(row.key[i]) + ",";
    out += std::string(*row_kind(row) ? row_kind(row) : "owner") + ",";
    const auto& u = row.usage;
    auto e = u.efficiency();
    out +=
        fmt::format("{:.17g},{:.17g},{},{:.17g},{:.17g}", u.allocated_seconds / 3600, u.busy_seconds / 3600,
                    e ? fmt::format("{:.17g}", *e) : "", u.memory_byte_seconds / kGiB / 3600, u.energy_joules / 3.6e6);
    out += fmt::format(",{:.17g}", u.idle_allocated_seconds / 3600);
    if (r.footprint) {
      out += fmt::format(",{:.17g},{:.17g},{:.17g},{:.17g}", u.facility_energy_joules / 3.6e6, u.co2e_kg,
                         u.idle_energy_joules / 3.6e6, (u.energy_joules - u.idle_energy_joules) / 3.6e6);
    }
    if (mig) {
      std::string profiles;
      for (const auto& p : row.mig_profiles) profiles += (profiles.empty() ? "" : " ") + p;
      out += fmt::format(",{:.17g},{},{:.17g}", u.mig_allocated_seconds / 3600, csv_field(profiles),
                         u.mig_sm_active_seconds / 3600);
    }
    if (r.priced) {
      const auto& c = row.cost;
      out += fmt::format(",{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{},{}", c.allocation, c.utilization, c.energy,
                         c.idle, c.total(), csv_field(r.currency),
                         row.budget ? fmt::format("{:.17g}", row.budget->used_ratio) : "");
    }
    if (forecast) {
      const auto& f = row.forecast;
      out += f ? fmt::format(",{:.17g},{:.17g},{:.17g}", f->gpus_at_end, f->trend_gpus_per_day, f->gpu_hours) : ",,,";
      if (r.priced) out += f && f->cost ? fmt::format(",{:.17g}", *f->cost) : ",";
    }
    out += fmt::format(",{}\n", kReportSchemaVersion);
  }
  return out;
}

// The --by dimensions upper-cased, as the table heads its key columns.
std::vector<std::string> key_headers(const Report& r) {
  std::vector<std::string> header;
  for (const auto& d : r.by) {
    std::string h = d;
    for (auto& c : h) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    header.push_back(h);
  }
  return header;
}

// Columns as wide as their widest cell: the first `keys` left-aligned, the numbers right-aligned.
struct Aligned {
  std::vector<std::size_t> width;
  std::size_t keys = 0;

  Aligned(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& body, std::size_t k)
      : width(header.size()), keys(k) {
    for (std::size_t i = 0; i < header.size(); ++i) {
      width[i] = text_width(header[i]);
      for (const auto& l : body) width[i] = std::max(width[i], text_width(l[i]));
    }
  }
  std::string line(const std::vector<std::string>& c) const {
    std::string out;
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (i) out += "  ";
      const std::string pad(width[i] - text_width(c[i]), ' ');
      out += i < keys ? c[i] + pad : pad + c[i];
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  }
};

// The forecast under the table: each owner row with a forecast, then the total.
template <typename Bold>
std::string forecast_table(const Report& r, Bold bold) {
  std::vector<std::string> header = key_headers(r);
  const std::size_t keys = header.size();
  for (const char* h : {"GPUS NOW", "TREND GPUS/DAY", "FORECAST GPU-H"}) header.push_back(h);
  if (r.priced) header.push_back(fmt::format("FORECAST {}", r.currency));
  std::vector<std::vector<std::string>> body;
  auto add = [&](const Row& row, bool total) {
    if (!row.forecast) return;
    std::vector<std::string> c;
    for (std::size_t i = 0; i < keys; ++i) c.push_back(total ? (i == 0 ? "TOTAL" : "") : key_text(row, i));
    c.push_back(grouped(row.forecast->gpus_at_end, 2));
    c.push_back(fmt::format("{:+.3f}", row.forecast->trend_gpus_per_day));
    c.push_back(grouped(row.forecast->gpu_hours, 1));
    if (r.priced) c.push_back(row.forecast->cost ? grouped(*row.forecast->cost, 2) : "-");
    body.push_back(std::move(c));
  };
  for (const auto& row : r.rows) add(row, false);
  add(r.total, true);
  const Aligned table(header, body, keys);
  std::string out = "\n" + bold(fmt::format("forecast for the next {}", period_length(r.forecast_seconds))) +
                    " (the linear trend of the GPUs each group held over the period; docs/chargeback.md)\n";
  out += bold(table.line(header));
  for (const auto& l : body) out += table.line(l);
  return out;
}

std::string render_table(const Report& r, bool color) {
  auto bold = [&](const std::string& s) { return color ? "\033[1m" + s + "\033[0m" : s; };
  auto yellow = [&](const std::string& s) { return color ? "\033[33m" + s + "\033[0m" : s; };
  std::vector<std::string> header = key_headers(r);
  const std::size_t keys = header.size();
  // Held with no process: shown when the ledger bills by allocation and some GPU was held idle.
  const bool idle_allocated = has_idle_allocation(r);
  header.push_back("ALLOC GPU-H");
  if (idle_allocated) header.push_back("IDLE ALLOC GPU-H");
  // Part of the allocation on MIG slices: shown when some row has any.
  const bool mig = has_mig_slices(r);
  if (mig) header.push_back("MIG SLICE GPU-H");
  header.push_back("BUSY GPU-H");
  // Of the busy time, the MIG instances' SM activity: a different quantity (docs/ledger.md).
  if (mig) header.push_back("MIG SM-ACTIVE GPU-H");
  for (const char* h : {"EFFICIENCY", "MEM GIB-H", "ENERGY KWH"}) header.push_back(h);
  if (r.footprint) header.push_back("KG CO2E");
  if (r.priced) {
    for (const char* h : {"ALLOCATION", "UTILIZATION", "ENERGY", "IDLE SHARE", "TOTAL"}) {
      header.push_back(fmt::format("{} {}", h, r.currency));
    }
    header.push_back("BUDGET USED");
  }
  auto cells = [&](const Row& row, bool total) {
    std::vector<std::string> c;
    for (std::size_t i = 0; i < keys; ++i) c.push_back(total ? (i == 0 ? "TOTAL" : "") : key_text(row, i));
    const auto& u = row.usage;
    c.push_back(grouped(u.allocated_seconds / 3600, 2));
    if (idle_allocated) c.push_back(grouped(u.idle_allocated_seconds / 3600, 2));
    if (mig) c.push_back(grouped(u.mig_allocated_seconds / 3600, 2));
    c.push_back(grouped(u.busy_seconds / 3600, 2));
    if (mig) c.push_back(grouped(u.mig_sm_active_seconds / 3600, 2));
    c.push_back(efficiency_text(u));
    c.push_back(grouped(u.memory_byte_seconds / kGiB / 3600, 1));
    c.push_back(grouped(u.energy_joules / 3.6e6, 2));
    if (r.footprint) c.push_back(grouped(u.co2e_kg, 2));
    if (r.priced) {
      for (double v : {row.cost.allocation, row.cost.utilization, row.cost.energy, row.cost.idle, row.cost.total()}) {
        c.push_back(grouped(v, 2));
      }
      c.push_back(row.budget ? fmt::format("{:.1f}%", row.budget->used_ratio * 100) : "-");
    }
    return c;
  };
  std::vector<std::vector<std::string>> body;
  for (const auto& row : r.rows) body.push_back(cells(row, false));
  Row total = r.total;
  body.push_back(cells(total, true));
  const Aligned table(header, body, keys);
  auto line = [&](const std::vector<std::string>& c) { return table.line(c); };

  std::string out = bold("gpumeter report") + fmt::format("  {} to {} ({})\n", format_utc(r.from), format_utc(r.to),
                                                          period_length(r.to - r.from));
  out += fmt::format("source {} ({}), by {}", printable(r.url), printable(r.backend), fmt::join(r.by, ", "));
  if (r.priced) {
    out += fmt::format(", pricing {} ({}, idle {}, faulty {})", r.pricing_source, r.currency, r.idle_policy,
                       r.faulty_policy);
  }
  out += "\n\n" + bold(line(header));
  for (std::size_t i = 0; i + 1 < body.size(); ++i) out += line(body[i]);
  out += bold(line(body.back()));
  if (r.forecast_seconds > 0) out += forecast_table(r, bold);
  const auto& rec = r.reconciliation;
  const std::string faulty =
      rec.faulty_seconds > 0 ? fmt::format(" + faulty {}", grouped(rec.faulty_seconds / 3600, 3)) : std::string();
  out += fmt::format("\nreconciliation: owners {} + idle {}{} = {} GPU-h; covered by the ledger {} GPU-h: {}\n",
                     grouped(rec.owners_seconds / 3600, 3), grouped(rec.idle_seconds / 3600, 3), faulty,
                     grouped((rec.owners_seconds + rec.idle_seconds + rec.faulty_seconds) / 3600, 3),
                     grouped(rec.covered_seconds / 3600, 3),
                     rec.ok ? "ok" : fmt::format("MISMATCH by {:.3f} s", rec.difference_seconds));
  if (rec.gap_seconds > 0) out += fmt::format("gaps the agents could not integrate: {:.0f} s\n", rec.gap_seconds);
  if (!r.warnings.empty()) {
    out += "\n" + yellow(fmt::format("warnings ({}):", r.warnings.size())) + "\n";
    for (const auto& w : r.warnings) out += fmt::format("  [{}] {}\n", w.kind, printable(w.message));
  }
  out += fmt::format("\n{} queries in {:.2f} s\n", r.queries, r.elapsed_seconds);
  return out;
}

}  // namespace gpumeter::report
