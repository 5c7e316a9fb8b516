// The rule file generated from a pricing file: its YAML structure (read back with yaml-cpp),
// the effective-date expressions, the "*" fallback, escaping, and the rules that appear only
// when the pricing file asks for them. tests/integration/test_rules.py has promtool check and
// evaluate the same output.

#include "pricing/rules.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>

namespace gpumeter::pricing {
namespace {

Pricing parse_ok(const std::string& yaml) {
  auto p = parse_pricing(yaml, "p.yaml");
  EXPECT_TRUE(p.ok()) << p.error().message;
  return p.ok() ? std::move(*p) : Pricing{};
}

struct RuleView {
  std::string record;
  std::string expr;
  std::map<std::string, std::string> labels;
};

// The generated file, read back as Prometheus would: one group, its rules in order.
std::vector<RuleView> rules_of(const std::string& text) {
  YAML::Node doc = YAML::Load(text);
  std::vector<RuleView> out;
  EXPECT_EQ(doc["groups"].size(), 1u);
  for (const auto& r : doc["groups"][0]["rules"]) {
    RuleView v{r["record"].as<std::string>(), r["expr"].as<std::string>(), {}};
    for (const auto& l : r["labels"]) v.labels[l.first.as<std::string>()] = l.second.as<std::string>();
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<RuleView> rules_for(const std::string& pricing_yaml) {
  return rules_of(render_rules(parse_ok(pricing_yaml)));
}

std::set<std::string> records(const std::vector<RuleView>& rules) {
  std::set<std::string> out;
  for (const auto& r : rules) out.insert(r.record);
  return out;
}

const RuleView* find(const std::vector<RuleView>& rules, const std::string& record, const std::string& model = "") {
  for (const auto& r : rules) {
    if (r.record == record && (model.empty() || (r.labels.count("model") != 0 && r.labels.at("model") == model))) {
      return &r;
    }
  }
  return nullptr;
}

TEST(pricing_rules, DatedPricesSwitchInsideTheExpression) {
  auto rules = rules_for(R"(gpu_models:
  m:
    - {gpu_hour: 3}
    - {from: 2026-01-01, gpu_hour: 2.99}
    - {from: 2026-07-01, gpu_hour: 2.49}
)");
  const RuleView* r = find(rules, "gpumeter:gpu_hour_price", "m");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->expr,
            "(vector(3) and on () (vector(time()) < 1767225600))  # until 2026-01-01T00:00:00Z\n"
            "or\n"
            "(vector(2.99) and on () (vector(time()) >= 1767225600 < 1782864000))  # from 2026-01-01T00:00:00Z "
            "until 2026-07-01T00:00:00Z\n"
            "or\n"
            "(vector(2.49) and on () (vector(time()) >= 1782864000))  # from 2026-07-01T00:00:00Z\n");
  EXPECT_EQ(r->labels, (std::map<std::string, std::string>{{"model", "m"}, {"currency", "USD"}}));
}

TEST(pricing_rules, UndatedPriceIsAConstant) {
  auto rules = rules_for("currency: EUR\ngpu_models: {\"*\": {gpu_hour: 1.5}}\n");
  const RuleView* r = find(rules, "gpumeter:gpu_hour_price", "*");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->expr, "vector(1.5)\n");
  EXPECT_EQ(r->labels.at("currency"), "EUR");
}

TEST(pricing_rules, PerGpuPriceFallsBackToTheAnyModelPrice) {
  auto with = rules_for("gpu_models: {\"*\": {gpu_hour: 1}, m: {gpu_hour: 2}}\n");
  const RuleView* r = find(with, "gpumeter:gpu_hour_price:by_uuid");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->expr,
            "max by (job, instance, uuid, model, currency) (\n"
            "  gpu_info * on (model) group_left (currency) gpumeter:gpu_hour_price\n"
            ")\n"
            "or on (job, instance, uuid)\n"
            "max by (job, instance, uuid, model, currency) (\n"
            "  gpu_info * on () group_left (currency) gpumeter:gpu_hour_price{model=\"*\"}\n"
            ")\n");
  auto without = rules_for("gpu_models: {m: {gpu_hour: 2}}\n");
  r = find(without, "gpumeter:gpu_hour_price:by_uuid");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->expr.find("or on"), std::string::npos) << r->expr;
}

TEST(pricing_rules, NamesSurviveYamlQuoting) {
  const std::string odd = "GPU \"quoted\" \\ back\tslash: #1";
  auto rules = rules_for(
      "gpu_models:\n  \"GPU \\\"quoted\\\" \\\\ back\\tslash: #1\": {gpu_hour: 1}\n"
      "budgets:\n  \"team: 'a' #2\": 10\n");
  ASSERT_NE(find(rules, "gpumeter:gpu_hour_price", odd), nullptr);
  const RuleView* b = find(rules, "gpumeter:budget_monthly");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->labels.at("project"), "team: 'a' #2");
}

TEST(pricing_rules, OnlyWhatThePricingFileCharges) {
  std::set<std::string> always = {
      "gpumeter:gpu_hour_price",
      "gpumeter:gpu_hour_price:by_uuid",
      "gpumeter:cost_per_hour:by_instance_owner",
      "gpumeter:cost_per_hour:by_project",
      "gpumeter:cost_per_hour:by_project_component",
      "gpumeter:cost_per_hour:by_user",
      "gpumeter:cost_per_hour:by_namespace",
  };
  auto minimal = rules_for("gpu_models: {m: {gpu_hour: 2, busy_gpu_hour: 0}}\nenergy: {kwh: 0, pue: 1.5}\n");
  EXPECT_EQ(records(minimal), always);
  const RuleView* cost = find(minimal, "gpumeter:cost_per_hour:by_instance_owner");
  ASSERT_NE(cost, nullptr);
  EXPECT_NE(cost->expr.find("\"component\", \"allocation\""), std::string::npos);
  EXPECT_EQ(cost->expr.find("utilization"), std::string::npos);
  EXPECT_EQ(cost->expr.find("energy"), std::string::npos);

  auto full = rules_for(R"(gpu_models: {m: [{gpu_hour: 2}, {from: 2026-01-01, gpu_hour: 2, busy_gpu_hour: 1}]}
energy: {kwh: 0.1, pue: 1.25}
budgets: {a: 7305, b: 100}
)");
  std::set<std::string> everything = always;
  everything.insert({"gpumeter:busy_gpu_hour_price", "gpumeter:busy_gpu_hour_price:by_uuid",
                     "gpumeter:energy_kwh_price", "gpumeter:budget_monthly", "gpumeter:budget_per_hour",
                     "gpumeter:budget_burn_rate:by_project"});
  EXPECT_EQ(records(full), everything);
  cost = find(full, "gpumeter:cost_per_hour:by_instance_owner");
  EXPECT_NE(cost->expr.find("\"component\", \"utilization\""), std::string::npos);
  EXPECT_NE(cost->expr.find("rate(gpu_attributed_energy_joules_total[5m]) / 1000"), std::string::npos);
  EXPECT_EQ(find(full, "gpumeter:energy_kwh_price")->expr, "vector(0.1 * 1.25)\n");
  EXPECT_EQ(find(full, "gpumeter:budget_per_hour")->expr, "gpumeter:budget_monthly / 730.5\n");
  int budgets = 0;
  for (const auto& r : full) budgets += r.record == "gpumeter:budget_monthly";
  EXPECT_EQ(budgets, 2);
}

TEST(pricing_rules, IdleSpreadFollowsThePolicy) {
  EXPECT_EQ(
      find(rules_for("gpu_models: {m: {gpu_hour: 1}}\nbudgets: {a: 1}\n"), "gpumeter:idle_cost_per_hour:by_project"),
      nullptr);

  auto by_node = rules_for("gpu_models: {m: {gpu_hour: 1}}\nidle: {policy: spread-by-node}\nbudgets: {a: 1}\n");
  const RuleView* share = find(by_node, "gpumeter:idle_cost_per_hour:by_project");
  ASSERT_NE(share, nullptr);
  EXPECT_NE(share->expr.find("sum by (cluster, instance, project, currency)"), std::string::npos) << share->expr;
  EXPECT_NE(share->expr.find("project!~\"__idle__|__unattributed__\""), std::string::npos) << share->expr;
  EXPECT_EQ(share->expr.find("label_replace"), std::string::npos) << share->expr;
  EXPECT_EQ(find(by_node, "gpumeter:budget_burn_rate:by_project")->expr,
            "sum by (project, currency) (gpumeter:cost_per_hour:by_project + gpumeter:idle_cost_per_hour:by_project or "
            "gpumeter:cost_per_hour:by_project)\n/ on (project, currency) gpumeter:budget_per_hour\n");

  // The first pool's label_replace() is the outermost, so it runs last and wins; a "$" in a
  // pool name is not a reference to a capture group.
  auto by_pool = rules_for(R"(gpu_models: {m: {gpu_hour: 1}}
idle: {policy: spread-by-pool, pools: {"first$1": "n[12]:.*", second: "n\\d:.*"}}
)");
  share = find(by_pool, "gpumeter:idle_cost_per_hour:by_project");
  ASSERT_NE(share, nullptr);
  const std::string& e = share->expr;
  EXPECT_NE(e.find("instance=~\"(?:n[12]:.*)|(?:n\\\\d:.*)\""), std::string::npos) << e;
  std::size_t first = e.find("\"pool\", \"first$$1\", \"instance\", \"n[12]:.*\"");
  std::size_t second = e.find("\"pool\", \"second\", \"instance\", \"n\\\\d:.*\"");
  ASSERT_NE(first, std::string::npos) << e;
  ASSERT_NE(second, std::string::npos) << e;
  EXPECT_LT(second, first) << e;  // inner (runs first) before outer in the text
}

TEST(pricing_rules, HeaderDocumentsEveryRecord) {
  Pricing p = parse_ok(
      "gpu_models: {m: {gpu_hour: 2, busy_gpu_hour: 1}}\nenergy: {kwh: 1}\nbudgets: {a: 1}\n"
      "idle: {policy: spread-by-node}\n");
  std::string text = render_rules(p);
  std::string header = text.substr(0, text.find("\ngroups:"));
  for (const auto& record : records(rules_of(text))) {
    EXPECT_NE(header.find("# " + record + "{"), std::string::npos) << record;
  }
  EXPECT_NE(header.find("\"p.yaml\""), std::string::npos);
}

// With sites, the energy's footprint by project: a factor per named site matched on the cluster
// label, the "*" factor for the rest; only the terms that have factors.
TEST(pricing_rules, FootprintRulesFollowTheSites) {
  const std::set<std::string> footprint = {"gpumeter:energy_kw:by_project", "gpumeter:facility_energy_kw:by_project",
                                           "gpumeter:co2e_kg_per_hour:by_project"};
  auto has_all = [&](const std::vector<RuleView>& rules) {
    auto got = records(rules);
    return std::includes(got.begin(), got.end(), footprint.begin(), footprint.end());
  };
  EXPECT_FALSE(has_all(rules_for("gpu_models: {m: {gpu_hour: 2}}\n")));
  EXPECT_EQ(records(rules_for("gpu_models: {m: {gpu_hour: 2}}\n")).count("gpumeter:energy_kw:by_project"), 0u);

  auto star = rules_for("gpu_models: {m: {gpu_hour: 2}}\nsites: {\"*\": {pue: 1.5, gco2e_per_kwh: 400}}\n");
  EXPECT_TRUE(has_all(star));
  EXPECT_EQ(find(star, "gpumeter:site_co2e_kg_per_kwh:default")->expr, "vector(0.6)\n");
  EXPECT_EQ(find(star, "gpumeter:site_pue"), nullptr);
  EXPECT_EQ(find(star, "gpumeter:co2e_kg_per_hour:by_project")->expr,
            "gpumeter:energy_kw:by_project * on () group_left () gpumeter:site_co2e_kg_per_kwh:default\n");

  auto both = rules_for(
      "gpu_models: {m: {gpu_hour: 2}}\nsites: {eu: {pue: 1.1, gco2e_per_kwh: 40}, \"*\": {gco2e_per_kwh: 400}}\n");
  EXPECT_EQ(find(both, "gpumeter:site_pue")->expr, "vector(1.1)\n");
  EXPECT_EQ(find(both, "gpumeter:facility_energy_kw:by_project")->expr,
            "gpumeter:energy_kw:by_project * on (cluster) group_left () gpumeter:site_pue\nor\n"
            "gpumeter:energy_kw:by_project * on () group_left () gpumeter:site_pue:default\n");
}

TEST(pricing_rules, MigProfilePricesOnlyWhenTheFileHasThem) {
  auto plain = rules_for("gpu_models: {m: {gpu_hour: 7}}\n");
  EXPECT_EQ(records(plain).count("gpumeter:mig_slice_hour_price"), 0u);
  const RuleView* cost = find(plain, "gpumeter:cost_per_hour:by_instance_owner");
  ASSERT_NE(cost, nullptr);
  EXPECT_EQ(cost->expr.find("mig"), std::string::npos) << cost->expr;

  auto rules = rules_for(R"(gpu_models: {m: {gpu_hour: 7}}
mig_profiles:
  "*": {3g.40gb: {instance_hour: 2.5}}
  m: {1c.3g.40gb: {instance_hour: 1}}
)");
  const RuleView* any = find(rules, "gpumeter:mig_slice_hour_price", "*");
  ASSERT_NE(any, nullptr);
  // Per instance-hour / slices: the price of one of the instance's slices for an hour.
  EXPECT_EQ(any->expr, "vector(2.5 / 3)\n");
  EXPECT_EQ(any->labels,
            (std::map<std::string, std::string>{{"model", "*"}, {"mig_profile", "3g.40gb"}, {"currency", "USD"}}));
  const RuleView* own = find(rules, "gpumeter:mig_slice_hour_price", "m");
  ASSERT_NE(own, nullptr);
  EXPECT_EQ(own->expr, "vector(1 / 1)\n");  // a compute instance of 1 slice
  // Per GPU-hour of the ledger's GPU-seconds: x the GPU's own slices (gpu_mig_slices, 4 on an
  // A30), 7 for a GPU that exports none.
  const RuleView* by_uuid = find(rules, "gpumeter:mig_gpu_hour_price:by_uuid");
  ASSERT_NE(by_uuid, nullptr);
  EXPECT_NE(by_uuid->expr.find("* on (job, instance, uuid) group_left ()\n(\n"
                               "  max by (job, instance, uuid) (last_over_time(gpu_mig_slices[5m]))\n"
                               "  or on (job, instance, uuid)\n"
                               "  max by (job, instance, uuid) (gpu_info) * 0 + 7\n)\n"),
            std::string::npos)
      << by_uuid->expr;
  cost = find(rules, "gpumeter:cost_per_hour:by_instance_owner");
  ASSERT_NE(cost, nullptr);
  // The profile's price first; "or" leaves the GPU's price to every other series.
  std::size_t mig = cost->expr.find("group_left (currency) gpumeter:mig_gpu_hour_price:by_uuid");
  std::size_t gpu = cost->expr.find("group_left (currency) gpumeter:gpu_hour_price:by_uuid");
  ASSERT_NE(mig, std::string::npos) << cost->expr;
  ASSERT_NE(gpu, std::string::npos) << cost->expr;
  EXPECT_LT(mig, gpu);
}

}  // namespace
}  // namespace gpumeter::pricing
