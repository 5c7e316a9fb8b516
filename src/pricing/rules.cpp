#include "pricing/rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace gpumeter::pricing {

namespace {

constexpr std::string_view kGroupName = "gpumeter.cost";
constexpr std::string_view kRateWindow = "5m";
// The mean Gregorian month (30.4375 days), the month `gpumeter report` prorates budgets by.
constexpr double kHoursPerMonth = 730.5;
// gpu_info and a GPU's ledger counters come from the same scrape target, so they meet on these.
constexpr std::string_view kGpuJoin = "job, instance, uuid";
constexpr std::string_view kIdleProject = "__idle__";
// Busy time no process accounts for: a row of its own that idle cost is not spread over.
constexpr std::string_view kUnattributedProject = "__unattributed__";

// Record names, and what each one means (the generated file's header lists them).
constexpr std::string_view kGpuHourPrice = "gpumeter:gpu_hour_price";
constexpr std::string_view kBusyGpuHourPrice = "gpumeter:busy_gpu_hour_price";
constexpr std::string_view kEnergyPrice = "gpumeter:energy_kwh_price";
constexpr std::string_view kGpuHourPriceByUuid = "gpumeter:gpu_hour_price:by_uuid";
constexpr std::string_view kBusyGpuHourPriceByUuid = "gpumeter:busy_gpu_hour_price:by_uuid";
constexpr std::string_view kMigSliceHourPrice = "gpumeter:mig_slice_hour_price";
constexpr std::string_view kMigGpuHourPriceByUuid = "gpumeter:mig_gpu_hour_price:by_uuid";
constexpr std::string_view kCostByInstanceOwner = "gpumeter:cost_per_hour:by_instance_owner";
constexpr std::string_view kCostByProject = "gpumeter:cost_per_hour:by_project";
constexpr std::string_view kIdleShareByProject = "gpumeter:idle_cost_per_hour:by_project";
constexpr std::string_view kBudgetMonthly = "gpumeter:budget_monthly";
constexpr std::string_view kBudgetPerHour = "gpumeter:budget_per_hour";

struct Rule {
  std::string_view record;
  std::string expr;  // may span lines
  std::vector<std::pair<std::string_view, std::string>> labels;
};

// The rules in evaluation order, and one description per record name. Every rule sits in one
// group so that each sees the results of the rules before it at the same evaluation time: a
// price change reaches the cost rates in the evaluation where it takes effect.
class RuleFile {
 public:
  void describe(std::string_view record, std::string_view labels, std::string_view meaning) {
    docs_.push_back(fmt::format("{}{{{}}}\n    {}", record, labels, meaning));
  }
  void add(Rule rule) { rules_.push_back(std::move(rule)); }
  std::string render(const Pricing& pricing) const;

 private:
  std::vector<std::string> docs_;
  std::vector<Rule> rules_;
};

std::string number(double v) { return fmt::format("{}", v); }

// A double-quoted string. YAML double-quoted scalars and PromQL strings (Go's escapes) share
// these escapes, so any model or project name survives either, quotes and backslashes included.
std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out + '"';
}

std::string indent(std::string_view text, std::string_view prefix) {
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    out += fmt::format("{}{}\n", prefix, text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// One line per dated entry: the entry's value while time() lies in [from, next from), nothing
// outside it. The comparison runs inside Prometheus, so the price switches by itself at the
// effective date and no rule file has to be reloaded then.
template <typename T, typename ValueText>
std::string dated_expr(const std::vector<Dated<T>>& list, ValueText value_text) {
  std::string out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Dated<T>* next = i + 1 < list.size() ? &list[i + 1] : nullptr;
    std::string term = fmt::format("vector({})", value_text(list[i].value));
    std::string window;
    std::string note;
    if (list[i].from_set) {
      window += fmt::format(" >= {}", number(list[i].from));
      note += fmt::format(" from {}", format_timestamp(list[i].from));
    }
    if (next != nullptr) {
      window += fmt::format(" < {}", number(next->from));
      note += fmt::format(" until {}", format_timestamp(next->from));
    }
    if (!window.empty()) term = fmt::format("({} and on () (vector(time()){}))  #{}", term, window, note);
    out += fmt::format("{}{}\n", i == 0 ? "" : "or\n", term);
  }
  return out;
}

// The cost components the pricing file charges anything for. A component that is zero
// throughout gets no rules: its series would only read 0.
struct Charges {
  bool busy = false;
  bool energy = false;
};

Charges charges_of(const Pricing& p) {
  Charges c;
  for (const auto& [model, list] : p.gpu_models) {
    c.busy = c.busy ||
             std::any_of(list.begin(), list.end(), [](const Dated<GpuPrice>& d) { return d.value.busy_gpu_hour > 0; });
  }
  c.energy = std::any_of(p.energy.begin(), p.energy.end(), [](const Dated<EnergyPrice>& d) { return d.value.kwh > 0; });
  return c;
}

// One rule per model: `field` of each of its dated prices.
void add_model_prices(RuleFile& file, const Pricing& p, std::string_view record, double GpuPrice::*field) {
  for (const auto& [model, list] : p.gpu_models) {
    std::string expr = dated_expr(list, [&](const GpuPrice& price) { return number(price.*field); });
    file.add(Rule{record, std::move(expr), {{"model", model}, {"currency", p.currency}}});
  }
}

// Each GPU's price, found through gpu_info's model; the "*" price for models without one in
// effect.
std::string per_gpu_price_expr(const Pricing& p, std::string_view price) {
  std::string by_model = fmt::format(
      "max by ({}, model, currency) (\n  gpu_info * on (model) group_left (currency) {}\n)\n", kGpuJoin, price);
  if (p.gpu_models.count(kAnyModel) == 0) return by_model;
  return fmt::format(
      "{}or on ({})\nmax by ({}, model, currency) (\n  gpu_info * on () group_left (currency) {}{{model={}}}\n)\n",
      by_model, kGpuJoin, kGpuJoin, price, quoted(kAnyModel));
}

// A MIG profile's price per instance-hour as a price per GPU-hour of the ledger's GPU-seconds:
// an instance of s compute slices on a GPU of G accrues s/G of them per second, so the price per
// instance-hour / s (a slice-hour of the profile) x G. G is each GPU's gpu_mig_slices (7 on A100
// and H100, 4 on A30), or kMaxMigSlicesPerGpu for a GPU that exports none.
void add_mig_prices(RuleFile& file, const Pricing& p) {
  if (p.mig_profiles.empty()) return;
  file.describe(kMigSliceHourPrice, "model, mig_profile, currency",
                "price per compute-slice-hour of a MIG instance of the profile: its price per instance-hour / its "
                "compute slices (model=\"*\": every other model)");
  for (const auto& [model, profiles] : p.mig_profiles) {
    for (const auto& [profile, list] : profiles) {
      const int slices = mig_compute_slices(profile).value_or(kMaxMigSlicesPerGpu);
      std::string expr = dated_expr(
          list, [&](const MigPrice& price) { return fmt::format("{} / {}", number(price.instance_hour), slices); });
      file.add(Rule{
          kMigSliceHourPrice, std::move(expr), {{"model", model}, {"mig_profile", profile}, {"currency", p.currency}}});
    }
  }
  // Each GPU's profiles that have a price, found through gpu_info's model (else "*"); the
  // instances are those with ledger series in the last rate window, so an instance's last
  // minutes are priced as the report prices them; and the GPU's slices over the same window.
  const std::string instances = fmt::format(
      "group by ({0}, mig_profile) (last_over_time(gpu_allocated_seconds_total{{mig_profile!=\"\"}}[{1}]))\n"
      "* on ({0}) group_left (model) gpu_info",
      kGpuJoin, kRateWindow);
  const std::string gpu_slices = fmt::format(
      "max by ({0}) (last_over_time(gpu_mig_slices[{1}]))\n"
      "or on ({0})\n"
      "max by ({0}) (gpu_info) * 0 + {2}",
      kGpuJoin, kRateWindow, kMaxMigSlicesPerGpu);
  std::string expr = fmt::format(
      "max by ({0}, mig_profile, currency) (\n"
      "  (\n{1}  )\n"
      "  * on (model, mig_profile) group_left (currency) {2}\n"
      "  or\n"
      "  (\n{1}  )\n"
      "  * on (mig_profile) group_left (currency) {2}{{model={3}}}\n"
      ")\n"
      "* on ({0}) group_left ()\n"
      "(\n{4})\n",
      kGpuJoin, indent(instances, "    "), kMigSliceHourPrice, quoted(kAnyModel), indent(gpu_slices, "  "));
  file.describe(kMigGpuHourPriceByUuid, "job, instance, uuid, mig_profile, currency",
                fmt::format("the price per allocated GPU-hour of each priced MIG profile on each GPU, by its gpu_info "
                            "model, else the \"*\" price: its slice-hour price x the GPU's gpu_mig_slices ({} where "
                            "the GPU exports none); instances of other profiles cost their share of the GPU's price",
                            kMaxMigSlicesPerGpu));
  file.add(Rule{kMigGpuHourPriceByUuid, std::move(expr), {}});
}

void add_prices(RuleFile& file, const Pricing& p, Charges charges) {
  file.describe(kGpuHourPrice, "model, currency",
                "price per allocated GPU-hour of each model in the pricing file (model=\"*\": every other "
                "model)");
  add_model_prices(file, p, kGpuHourPrice, &GpuPrice::gpu_hour);
  if (charges.busy) {
    file.describe(kBusyGpuHourPrice, "model, currency", "price per busy GPU-hour (utilization-weighted)");
    add_model_prices(file, p, kBusyGpuHourPrice, &GpuPrice::busy_gpu_hour);
  }
  if (charges.energy) {
    file.describe(kEnergyPrice, "currency", "price per kWh of GPU energy, facility overhead (PUE) included");
    std::string expr = dated_expr(p.energy, [](const EnergyPrice& e) {
      return e.pue == 1 ? number(e.kwh) : fmt::format("{} * {}", number(e.kwh), number(e.pue));
    });
    file.add(Rule{kEnergyPrice, std::move(expr), {{"currency", p.currency}}});
  }
  file.describe(kGpuHourPriceByUuid, "job, instance, uuid, model, currency",
                "each GPU's price per allocated GPU-hour, by its gpu_info model, else the \"*\" price (a GPU "
                "with neither in effect has none, and no cost below)");
  file.add(Rule{kGpuHourPriceByUuid, per_gpu_price_expr(p, kGpuHourPrice), {}});
  add_mig_prices(file, p);
  if (charges.busy) {
    file.describe(kBusyGpuHourPriceByUuid, "job, instance, uuid, model, currency",
                  "each GPU's price per busy GPU-hour");
    file.add(Rule{kBusyGpuHourPriceByUuid, per_gpu_price_expr(p, kBusyGpuHourPrice), {}});
  }
}

// "fn(\n  <first argument, indented>,\n  <the other arguments>\n)\n"
std::string call(std::string_view fn, std::string_view first, std::string_view others) {
  std::string arg = indent(first, "  ");
  arg.pop_back();  // its last newline: the comma goes there
  return fmt::format("{}(\n{},\n  {}\n)\n", fn, arg, others);
}

// `cost` with the label component="<component>", so that the components of one owner stay
// apart under `or` and a missing component does not hide the others (as `+` would).
std::string component(std::string_view name, std::string_view cost) {
  return call("label_replace", cost, fmt::format("\"component\", \"{}\", \"\", \"\"", name));
}

// rate() of a ledger counter is in GPUs (GPU-seconds per second), so times a price per GPU-hour
// it is a cost per hour; joules per second are watts, and W / 1000 x price per kWh is per hour.
// A MIG instance whose profile has a price is charged that price ("or" keeps the first of two
// series with the same labels); everything else its GPU-seconds at the GPU's price.
// Under `faulty: exclude` time on faulty GPUs (the ledger's series with a `fault` label) is
// nobody's cost: only the series without one are priced.
std::string cost_by_instance_owner_expr(const Pricing& p, Charges charges) {
  const std::string only = p.faulty_policy == FaultyPolicy::kExclude ? "{fault=\"\"}" : "";
  std::vector<std::string> parts;
  std::string allocation = fmt::format("rate(gpu_allocated_seconds_total{}[{}])\n* on ({}) group_left (currency) {}",
                                       only, kRateWindow, kGpuJoin, kGpuHourPriceByUuid);
  if (!p.mig_profiles.empty()) {
    allocation = fmt::format(
        "rate(gpu_allocated_seconds_total{4}[{0}])\n* on ({1}, mig_profile) group_left (currency) {2}\nor\n{3}",
        kRateWindow, kGpuJoin, kMigGpuHourPriceByUuid, allocation, only);
  }
  parts.push_back(component("allocation", allocation));
  if (charges.busy) {
    parts.push_back(
        component("utilization", fmt::format("rate(gpu_busy_seconds_total{}[{}])\n* on ({}) group_left (currency) {}",
                                             only, kRateWindow, kGpuJoin, kBusyGpuHourPriceByUuid)));
  }
  if (charges.energy) {
    parts.push_back(component(
        "energy", fmt::format("rate(gpu_attributed_energy_joules_total{}[{}]) / 1000\n* on () group_left (currency) {}",
                              only, kRateWindow, kEnergyPrice)));
  }
  std::string body;
  for (std::size_t i = 0; i < parts.size(); ++i) body += fmt::format("{}{}", i == 0 ? "" : "or\n", parts[i]);
  return fmt::format(
      "sum by (cluster, instance, project, user, namespace, pod, container, hpc_job, component, currency) (\n{})\n",
      indent(body, "  "));
}

void add_cost_rates(RuleFile& file, const Pricing& p, Charges charges) {
  file.describe(kCostByInstanceOwner,
                "cluster, instance, project, user, namespace, pod, container, hpc_job, component, currency",
                fmt::format("cost per hour over the last {} of each owner on each node; component is allocation, "
                            "utilization or energy",
                            kRateWindow));
  file.add(Rule{kCostByInstanceOwner, cost_by_instance_owner_expr(p, charges), {}});
  struct Rollup {
    std::string_view record;
    std::string_view by;
    std::string_view meaning;
  };
  static constexpr Rollup kRollups[] = {
      {kCostByProject, "cluster, project, currency",
       "cost per hour by project; project=\"__idle__\" is the cost of GPUs nobody held"},
      {"gpumeter:cost_per_hour:by_project_component", "cluster, project, component, currency",
       "the same, split into allocation, utilization and energy"},
      {"gpumeter:cost_per_hour:by_user", "cluster, user, currency",
       "cost per hour by user (user=\"\": idle and no user)"},
      {"gpumeter:cost_per_hour:by_namespace", "cluster, namespace, currency",
       "cost per hour by Kubernetes namespace (namespace=\"\": idle and not Kubernetes)"},
  };
  for (const Rollup& r : kRollups) {
    file.describe(r.record, r.by, r.meaning);
    file.add(Rule{r.record, fmt::format("sum by ({}) ({})\n", r.by, kCostByInstanceOwner), {}});
  }
}

// The footprint of the energy the owners use (pricing file `sites`): the GPUs' attributed power,
// the facility's (x its site's PUE) and the carbon it emits per hour (x the grid's intensity).
// A series' site is its cluster label; "*" is the :default factor, for clusters with no entry.
void add_footprint(RuleFile& file, const Pricing& p) {
  if (p.sites.empty()) return;
  constexpr std::string_view kEnergy = "gpumeter:energy_kw:by_project";
  file.describe(kEnergy, "cluster, project",
                fmt::format("GPU energy attributed to each project, kWh per hour (kW), over the last {}", kRateWindow));
  file.add(Rule{
      kEnergy,
      fmt::format("sum by (cluster, project) (rate(gpu_attributed_energy_joules_total[{}])) / 1000\n", kRateWindow),
      {}});
  struct Factor {
    std::string_view record, per_site, fallback, meaning;
    double (*value)(const SiteFactors&);
  };
  static constexpr Factor kFactors[] = {
      {"gpumeter:facility_energy_kw:by_project", "gpumeter:site_pue", "gpumeter:site_pue:default",
       "the facility's energy for it, x its site's PUE, kWh per hour", [](const SiteFactors& f) { return f.pue; }},
      {"gpumeter:co2e_kg_per_hour:by_project", "gpumeter:site_co2e_kg_per_kwh", "gpumeter:site_co2e_kg_per_kwh:default",
       "the carbon it emits, x its site's PUE x the grid's gCO2e/kWh / 1000, kg per hour",
       [](const SiteFactors& f) { return f.pue * f.gco2e_per_kwh / 1000; }},
  };
  for (const Factor& f : kFactors) {
    const std::string_view fallback = f.fallback;  // Rule keeps a view: a constant, not a local
    const bool any = p.sites.count(kAnyModel) > 0, named = p.sites.size() > (any ? 1 : 0);
    if (named) file.describe(f.per_site, "cluster", "each site's factor for the rule below (pricing file: sites)");
    if (any) file.describe(fallback, "", "the factor of every other cluster (pricing file: sites \"*\")");
    std::vector<std::string> terms;
    for (const auto& [site, list] : p.sites) {
      std::string expr = dated_expr(list, [&](const SiteFactors& x) { return number(f.value(x)); });
      if (site == kAnyModel) {
        file.add(Rule{fallback, std::move(expr), {}});
      } else {
        file.add(Rule{f.per_site, std::move(expr), {{"cluster", site}}});
      }
    }
    if (named) terms.push_back(fmt::format("{} * on (cluster) group_left () {}\n", kEnergy, f.per_site));
    if (any) terms.push_back(fmt::format("{} * on () group_left () {}\n", kEnergy, fallback));
    std::string expr;
    for (std::size_t i = 0; i < terms.size(); ++i) expr += (i ? "or\n" : "") + terms[i];
    file.describe(f.record, "cluster, project", f.meaning);
    file.add(Rule{f.record, std::move(expr), {}});
  }
}

// A label_replace() replacement is a template: "$" must be doubled to stay itself.
std::string literal_replacement(std::string_view s) {
  std::string out;
  for (char c : s) out += c == '$' ? std::string("$$") : std::string(1, c);
  return out;
}

// The label that names the group a node's idle cost is spread within.
std::string_view spread_label(const Pricing& p) {
  return p.idle_policy == IdlePolicy::kSpreadByPool ? "pool" : "instance";
}

// The per-owner cost series selected by `matchers`, of nodes that belong to a group, labelled
// with the group. A pool is found as Pricing::pool_for() finds it: the first pool whose regex
// matches the whole instance, so label_replace() runs in reverse file order and the first
// pool's runs last, overwriting the others. Instances in no pool are left out.
std::string grouped_cost(const Pricing& p, std::string_view matchers) {
  if (p.idle_policy != IdlePolicy::kSpreadByPool) return fmt::format("{}{{{}}}\n", kCostByInstanceOwner, matchers);
  std::string any_pool;
  for (const Pool& pool : p.pools) any_pool += fmt::format("{}(?:{})", any_pool.empty() ? "" : "|", pool.node_regex);
  std::string expr = fmt::format("{}{{{}, instance=~{}}}\n", kCostByInstanceOwner, matchers, quoted(any_pool));
  for (auto pool = p.pools.rbegin(); pool != p.pools.rend(); ++pool) {
    expr = call("label_replace", expr,
                fmt::format("\"pool\", {}, \"instance\", {}", quoted(literal_replacement(pool->name)),
                            quoted(pool->node_regex)));
  }
  return expr;
}

// Each project's share of the idle cost of the nodes (or pools) it uses, in proportion to its
// own cost there, as `gpumeter report` spreads it. Idle cost of a group nobody used has no one
// to go to and is left out.
std::string idle_share_expr(const Pricing& p) {
  std::string_view group = spread_label(p);
  std::string owners = grouped_cost(p, fmt::format("project!~\"{}|{}\"", kIdleProject, kUnattributedProject));
  std::string idle = grouped_cost(p, fmt::format("project=\"{}\"", kIdleProject));
  std::string share = fmt::format(
      "sum by (cluster, {0}, project, currency) (\n{1})\n"
      "/ on (cluster, {0}, currency) group_left ()\n"  // "()": else the next "(" would be read as its label list
      "(\n"
      "  sum by (cluster, {0}, currency) (\n{2}  ) > 0\n"
      ")\n"
      "* on (cluster, {0}, currency) group_left\n"
      "sum by (cluster, {0}, currency) (\n{3})\n",
      group, indent(owners, "  "), indent(owners, "    "), indent(idle, "  "));
  return fmt::format("sum by (cluster, project, currency) (\n{})\n", indent(share, "  "));
}

void add_idle_spread(RuleFile& file, const Pricing& p) {
  if (p.idle_policy == IdlePolicy::kSeparate) return;
  std::string_view groups =
      p.idle_policy == IdlePolicy::kSpreadByPool ? "pools (matched against instance)" : "nodes (instances)";
  file.describe(kIdleShareByProject, "cluster, project, currency",
                fmt::format("each project's share of the idle cost of the {} it uses (idle policy {}), in proportion "
                            "to its own cost there; by_project plus this is what the project is charged",
                            groups, to_string(p.idle_policy)));
  file.add(Rule{kIdleShareByProject, idle_share_expr(p), {}});
}

void add_budgets(RuleFile& file, const Pricing& p) {
  if (p.budgets.empty()) return;
  file.describe(kBudgetMonthly, "project, currency", "budget per calendar month, from the pricing file");
  for (const auto& [project, monthly] : p.budgets) {
    file.add(Rule{kBudgetMonthly,
                  fmt::format("vector({})\n", number(monthly)),
                  {{"project", project}, {"currency", p.currency}}});
  }
  file.describe(kBudgetPerHour, "project, currency",
                fmt::format("the monthly budget spread over an average month of {} hours", number(kHoursPerMonth)));
  file.add(Rule{kBudgetPerHour, fmt::format("{} / {}\n", kBudgetMonthly, number(kHoursPerMonth)), {}});
  constexpr std::string_view kBurnRate = "gpumeter:budget_burn_rate:by_project";
  file.describe(kBurnRate, "project, currency",
                "cost per hour / budget per hour: above 1 the project spends faster than its budget allows");
  // Under a spread policy a project is charged its share of idle cost as well.
  std::string spend = p.idle_policy == IdlePolicy::kSeparate
                          ? std::string(kCostByProject)
                          : fmt::format("{0} + {1} or {0}", kCostByProject, kIdleShareByProject);
  // Budgets are per project across clusters: the spend of every cluster this Prometheus sees.
  file.add(Rule{kBurnRate,
                fmt::format("sum by (project, currency) ({})\n/ on (project, currency) {}\n", spend, kBudgetPerHour),
                {}});
}

std::string RuleFile::render(const Pricing& pricing) const {
  std::string out = fmt::format(
      "# Prometheus recording rules for GPU prices and live cost rates, written by `gpumeter rules`\n"
      "# from the pricing file {}.\n"
      "# Change the pricing file and write them again rather than editing them. Prices switch at\n"
      "# their effective dates by themselves. Costs are in {} per hour, worked out from the ledger\n"
      "# counters' rate over {}; idle GPU time is the project \"{}\".\n"
      "#\n",
      quoted(pricing.source), pricing.currency, kRateWindow, kIdleProject);
  for (const std::string& doc : docs_) out += indent(doc, "# ");
  out += fmt::format("\ngroups:\n  - name: {}\n    rules:\n", kGroupName);
  for (const Rule& r : rules_) {
    out += fmt::format("      - record: {}\n        expr: |\n{}", r.record, indent(r.expr, "          "));
    if (r.labels.empty()) continue;
    out += "        labels:\n";
    for (const auto& [name, value] : r.labels) out += fmt::format("          {}: {}\n", name, quoted(value));
  }
  return out;
}

}  // namespace

std::string render_rules(const Pricing& pricing) {
  RuleFile file;
  Charges charges = charges_of(pricing);
  add_prices(file, pricing, charges);
  add_cost_rates(file, pricing, charges);
  add_idle_spread(file, pricing);
  add_budgets(file, pricing);
  add_footprint(file, pricing);
  return file.render(pricing);
}

}  // namespace gpumeter::pricing
