// `gpumeter report --format focus`: the FinOps Foundation's FOCUS 1.2 cost and usage CSV
// (FinOps Open Cost and Usage Specification, github.com/FinOps-Open-Cost-and-Usage-Spec/FOCUS_Spec,
// tag v1.2). One Usage row per group of the report, which the command groups by GPU (and MIG
// profile) and owner; the charge period and the billing period are the report's period. Which
// columns are written and why: docs/focus.md.

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "report/csv_cell.h"
#include "report/format.h"
#include "report/time_spec.h"

namespace gpumeter::report {
namespace {

constexpr std::string_view kDefaultProvider = "GPU platform";
constexpr std::string_view kDefaultAccount = "gpu-platform";
constexpr std::string_view kDefaultService = "GPU compute";

// NumericFormat: a decimal or E notation with no '+' (35.2E-7, never 35.2E+7), no "-0".
std::string number(double v) {
  if (v == 0) return "0";
  std::string s = fmt::format("{:.17g}", v);
  if (auto e = s.find('e'); e != std::string::npos) {
    const bool negative = s[e + 1] == '-';
    std::string digits = s.substr(e + 2);
    digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
    s = s.substr(0, e) + (negative ? "E-" : "E") + digits;
  }
  return s;
}

// A string cell; null (an empty field) when empty.
std::string text(const std::string& s) { return s.empty() ? std::string() : csv_field(s); }

std::string or_default(const std::string& s, std::string_view fallback) {
  return s.empty() ? std::string(fallback) : s;
}

struct Keys {
  const Report& r;
  const Row& row;
  std::string operator()(std::string_view dim) const {
    for (std::size_t i = 0; i < r.by.size() && i < row.key.size(); ++i) {
      if (r.by[i] == dim) return row.key[i];
    }
    return {};
  }
};

std::string description(const Row& row, const std::string& model, const std::string& mig_profile) {
  const std::string on = model.empty() ? "a GPU" : model + (mig_profile.empty() ? "" : " MIG " + mig_profile);
  if (row.idle) return "Idle time of " + on + ", held by no owner";
  if (row.unattributed) return "Busy time of " + on + " that no process accounts for";
  if (row.faulty) return "Time of " + on + " while it was faulty, kept out of the owners' charges";
  return "GPU time on " + on;
}

// Tags: the owner's labels, a flat JSON object (KeyValueFormat); null when there are none.
std::string tags(const Keys& key, const Row& row) {
  if (row.idle || row.unattributed || row.faulty) return {};
  nlohmann::json j = nlohmann::json::object();
  for (std::string_view dim : {"project", "user", "namespace", "pod", "hpc_job"}) {
    const std::string v = key(dim);
    if (!v.empty()) j[std::string(dim)] = v;
  }
  return j.empty() ? std::string() : csv_field(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace

const std::vector<std::string_view>& focus_columns() {
  static const std::vector<std::string_view> columns = {"BilledCost",
                                                        "BillingAccountId",
                                                        "BillingAccountName",
                                                        "BillingCurrency",
                                                        "BillingPeriodEnd",
                                                        "BillingPeriodStart",
                                                        "ChargeCategory",
                                                        "ChargeClass",
                                                        "ChargeDescription",
                                                        "ChargeFrequency",
                                                        "ChargePeriodEnd",
                                                        "ChargePeriodStart",
                                                        "ConsumedQuantity",
                                                        "ConsumedUnit",
                                                        "ContractedCost",
                                                        "EffectiveCost",
                                                        "InvoiceIssuerName",
                                                        "ListCost",
                                                        "PricingQuantity",
                                                        "PricingUnit",
                                                        "ProviderName",
                                                        "PublisherName",
                                                        "ResourceId",
                                                        "ResourceName",
                                                        "ResourceType",
                                                        "ServiceCategory",
                                                        "ServiceName",
                                                        "ServiceSubcategory",
                                                        "SubAccountId",
                                                        "SubAccountName",
                                                        "Tags",
                                                        "x_Cluster",
                                                        "x_Node",
                                                        "x_GpuModel",
                                                        "x_MigProfile",
                                                        "x_RowKind",
                                                        "x_BusyGpuHours",
                                                        "x_EnergyKwh",
                                                        "x_CostAllocation",
                                                        "x_CostUtilization",
                                                        "x_CostEnergy",
                                                        "x_CostIdle",
                                                        "x_FacilityEnergyKwh",
                                                        "x_Co2eKg",
                                                        "x_SchemaVersion"};
  return columns;
}

std::string render_focus(const Report& r) {
  std::string out;
  for (auto c : focus_columns()) out += (out.empty() ? "" : ",") + std::string(c);
  out += "\n";
  const auto& b = r.billing;
  const std::string provider = csv_field(or_default(b.provider, kDefaultProvider));
  const std::string from = format_utc(r.from), to = format_utc(r.to);
  for (const Row& row : r.rows) {
    const Keys key{r, row};
    const std::string uuid = key("gpu"), model = key("model"), mig = key("mig_profile");
    const std::string project = row.idle || row.unattributed || row.faulty ? std::string() : key("project");
    const std::string cost = number(row.cost.total());
    const std::string hours = number(row.usage.allocated_seconds / 3600);
    std::vector<std::string> cells = {cost,
                                      csv_field(or_default(b.account_id, kDefaultAccount)),
                                      text(b.account_name),
                                      csv_field(r.currency),
                                      to,
                                      from,
                                      "Usage",
                                      "",  // ChargeClass: no corrections
                                      csv_field(description(row, model, mig)),
                                      "Usage-Based",
                                      to,
                                      from,
                                      hours,
                                      "Hours",
                                      cost,
                                      cost,
                                      provider,
                                      cost,
                                      hours,
                                      "Hours",
                                      provider,
                                      provider,
                                      text(uuid.empty() || mig.empty() ? uuid : uuid + "/" + mig),
                                      "",  // ResourceName: a GPU has no display name apart from its id
                                      uuid.empty() ? "" : (mig.empty() ? "GPU" : "MIG instance"),
                                      "Compute",
                                      csv_field(or_default(b.service_name, kDefaultService)),
                                      "Other (Compute)",
                                      text(project),
                                      text(project),
                                      tags(key, row),
                                      text(key("cluster")),
                                      text(key("node")),
                                      text(model),
                                      text(mig),
                                      row.idle           ? "idle"
                                      : row.unattributed ? "unattributed"
                                      : row.faulty       ? "faulty"
                                                         : "owner",
                                      number(row.usage.busy_seconds / 3600),
                                      number(row.usage.energy_joules / 3.6e6),
                                      number(row.cost.allocation),
                                      number(row.cost.utilization),
                                      number(row.cost.energy),
                                      number(row.cost.idle),
                                      r.footprint ? number(row.usage.facility_energy_joules / 3.6e6) : "",
                                      r.footprint ? number(row.usage.co2e_kg) : "",
                                      std::to_string(kReportSchemaVersion)};
    for (std::size_t i = 0; i < cells.size(); ++i) out += (i ? "," : "") + cells[i];
    out += "\n";
  }
  return out;
}

}  // namespace gpumeter::report
