// The pricing file: the format with every key, its defaults, the effective-date syntax, one
// case per validation error (each message checked with its file:line:col), and the lookups
// the report relies on: prices across effective dates, the "*" fallback, change points, pools.

#include "pricing/pricing.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace gpumeter::pricing {
namespace {

constexpr double kJan2026 = 1767225600;  // 2026-01-01T00:00:00Z
constexpr double kJul2026 = 1782864000;  // 2026-07-01T00:00:00Z
constexpr double kDay = 86400;

Pricing parse_ok(const std::string& yaml) {
  auto p = parse_pricing(yaml, "p.yaml");
  EXPECT_TRUE(p.ok()) << p.error().message;
  return p.ok() ? std::move(*p) : Pricing{};
}

std::string error_of(const std::string& yaml) {
  auto p = parse_pricing(yaml, "p.yaml");
  return p.ok() ? "no error" : p.error().message;
}

const char* const kFormatExample = R"(currency: EUR
gpu_models:
  "NVIDIA H100 80GB HBM3":
    - {from: 2026-01-01, gpu_hour: 2.99}
    - {from: "2026-07-01T00:00:00Z", gpu_hour: 2.49, busy_gpu_hour: 0.50}
  "*": {gpu_hour: 1.00}
energy:
  - {kwh: 0.12, pue: 1.3}
  - {from: 2026-07-01T02:00:00+02:00, kwh: 0.10}
idle:
  policy: spread-by-pool
  pools:
    h100-pool: "h100-.*"
    any: ".*"
budgets:
  team-a: 20000
  "team b": 1500.5
)";

TEST(pricing_parse, EveryKey) {
  Pricing p = parse_ok(kFormatExample);
  EXPECT_EQ(p.source, "p.yaml");
  EXPECT_EQ(p.currency, "EUR");
  ASSERT_EQ(p.gpu_models.size(), 2u);
  const auto& h100 = p.gpu_models.at("NVIDIA H100 80GB HBM3");
  ASSERT_EQ(h100.size(), 2u);
  EXPECT_TRUE(h100[0].from_set);
  EXPECT_EQ(h100[0].from, kJan2026);
  EXPECT_EQ(h100[0].value.gpu_hour, 2.99);
  EXPECT_EQ(h100[0].value.busy_gpu_hour, 0);
  EXPECT_EQ(h100[0].line, 4);
  EXPECT_EQ(h100[1].from, kJul2026);
  EXPECT_EQ(h100[1].value.gpu_hour, 2.49);
  EXPECT_EQ(h100[1].value.busy_gpu_hour, 0.5);
  EXPECT_EQ(h100[1].line, 5);
  const auto& any = p.gpu_models.at("*");
  ASSERT_EQ(any.size(), 1u);
  EXPECT_FALSE(any[0].from_set);
  EXPECT_EQ(any[0].value.gpu_hour, 1.0);
  ASSERT_EQ(p.energy.size(), 2u);
  EXPECT_FALSE(p.energy[0].from_set);
  EXPECT_EQ(p.energy[0].value.kwh, 0.12);
  EXPECT_EQ(p.energy[0].value.pue, 1.3);
  EXPECT_EQ(p.energy[1].from, kJul2026);  // 02:00 at +02:00 is midnight UTC
  EXPECT_EQ(p.energy[1].value.pue, 1.0);
  EXPECT_EQ(p.idle_policy, IdlePolicy::kSpreadByPool);
  ASSERT_EQ(p.pools.size(), 2u);
  EXPECT_EQ(p.pools[0].name, "h100-pool");
  EXPECT_EQ(p.pools[0].node_regex, "h100-.*");
  EXPECT_EQ(p.pools[1].name, "any");
  EXPECT_EQ(p.budgets.size(), 2u);
  EXPECT_EQ(p.budgets.at("team-a"), 20000);
  EXPECT_EQ(p.budgets.at("team b"), 1500.5);
}

TEST(pricing_parse, Defaults) {
  Pricing p = parse_ok("gpu_models: {\"*\": {gpu_hour: 0}}\nenergy:\nidle:\nbudgets: {}\n");
  EXPECT_EQ(p.currency, "USD");
  EXPECT_EQ(p.gpu_models.at("*")[0].value.gpu_hour, 0);
  EXPECT_TRUE(p.energy.empty());
  EXPECT_EQ(p.idle_policy, IdlePolicy::kSeparate);
  EXPECT_TRUE(p.pools.empty());
  EXPECT_TRUE(p.budgets.empty());
  EXPECT_EQ(parse_ok("gpu_models: {m: {gpu_hour: 1}}\nidle: {policy: spread-by-node}\n").idle_policy,
            IdlePolicy::kSpreadByNode);
  EXPECT_EQ(to_string(IdlePolicy::kSeparate), "separate");
  EXPECT_EQ(to_string(IdlePolicy::kSpreadByNode), "spread-by-node");
  EXPECT_EQ(to_string(IdlePolicy::kSpreadByPool), "spread-by-pool");
}

TEST(pricing_parse, OneMappingMayCarryADate) {
  Pricing p = parse_ok("gpu_models:\n  m: {from: 2026-07-01, gpu_hour: 2}\n");
  EXPECT_TRUE(p.gpu_models.at("m")[0].from_set);
  EXPECT_EQ(p.gpu_models.at("m")[0].from, kJul2026);
}

TEST(pricing_dates, DatesAndRfc3339) {
  EXPECT_EQ(parse_timestamp("1970-01-01"), 0.0);
  EXPECT_EQ(parse_timestamp("2026-01-01"), kJan2026);
  EXPECT_EQ(parse_timestamp("2026-07-01T00:00:00Z"), kJul2026);
  EXPECT_EQ(parse_timestamp("2026-07-01t00:00:00z"), kJul2026);
  EXPECT_EQ(parse_timestamp("2026-07-01T02:30:00+02:30"), kJul2026);
  EXPECT_EQ(parse_timestamp("2026-06-30T19:00:00-05:00"), kJul2026);
  EXPECT_EQ(parse_timestamp("2026-07-01T00:00:01.25Z"), kJul2026 + 1.25);
  EXPECT_EQ(parse_timestamp("1970-01-01T00:10:00Z"), 600.0);
  EXPECT_EQ(parse_timestamp("1969-12-31T23:59:59Z"), -1.0);
  EXPECT_EQ(parse_timestamp("2024-02-29"), 1709164800.0);  // leap year
  EXPECT_EQ(parse_timestamp("2000-02-29"), 951782400.0);   // leap: divisible by 400
  for (const char* bad : {"",
                          "2026",
                          "2026-7-1",
                          "2026-07-1",
                          "2026/07/01",
                          "2026-13-01",
                          "2026-00-10",
                          "2026-02-29",
                          "2100-02-29",
                          "2026-04-31",
                          "2026-07-01 00:00:00Z",
                          "2026-07-01T00:00:00",
                          "2026-07-01T24:00:00Z",
                          "2026-07-01T00:60:00Z",
                          "2026-07-01T00:00:60Z",
                          "2026-07-01T00:00Z",
                          "2026-07-01T00:00:00.Z",
                          "2026-07-01T00:00:00+0200",
                          "2026-07-01T00:00:00+24:00",
                          "2026-07-01T00:00:00Zjunk",
                          "2026-07-01junk",
                          "+2026-07-01",
                          "1782864000"}) {
    EXPECT_EQ(parse_timestamp(bad), std::nullopt) << bad;
  }
}

TEST(pricing_dates, FormatTimestamp) {
  EXPECT_EQ(format_timestamp(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(format_timestamp(kJul2026), "2026-07-01T00:00:00Z");
  EXPECT_EQ(format_timestamp(kJul2026 + 3661.75), "2026-07-01T01:01:01Z");
  EXPECT_EQ(format_timestamp(-1), "1969-12-31T23:59:59Z");
  EXPECT_EQ(format_timestamp(*parse_timestamp("2024-02-29T23:59:59Z")), "2024-02-29T23:59:59Z");
}

struct ErrorCase {
  const char* yaml;
  const char* message;
};

void expect_errors(std::initializer_list<ErrorCase> cases) {
  for (const ErrorCase& c : cases) EXPECT_EQ(error_of(c.yaml), c.message) << c.yaml;
}

constexpr const char* kModels = "gpu_models: {\"*\": {gpu_hour: 1}}\n";

TEST(pricing_errors, Document) {
  expect_errors({
      {"",
       "p.yaml: expected a mapping with the key gpu_models and optionally currency, mig_profiles, energy, idle, "
       "faulty, budgets, billing, sites"},
      {"- a\n",
       "p.yaml:1:1: expected a mapping with the key gpu_models and optionally currency, mig_profiles, "
       "energy, idle, faulty, budgets, billing, sites"},
      {"gpu_models: {m: {gpu_hour: 1}}\n---\na: 1\n", "p.yaml:3:1: expected one YAML document, found 2"},
      {"gpu_models: {m: {gpu_hour: [1}\n", "p.yaml:1:30: illegal flow end"},
      // yaml-cpp alone loops for ever on a ',' outside [...] or {...} (found by fuzz_pricing).
      {",gpu_models: {m: {gpu_hour: 1}}\n", "p.yaml:1:1: unexpected ','"},
      {"gpu_models: {m: {gpu_hour: 1}}\n---\n,\n", "p.yaml:3:1: unexpected ','"},
      {"currency: USD\n", "p.yaml:1:1: missing required key 'gpu_models'"},
      {"gpu_models: {m: {gpu_hour: 1}}\nenrgy: {kwh: 1}\n",
       "p.yaml:2:1: unknown key 'enrgy' (expected one of: currency, gpu_models, mig_profiles, energy, idle, "
       "faulty, budgets, billing, sites)"},
      {"gpu_models: {m: {gpu_hour: 1}}\ncurrency: USD\ncurrency: EUR\n", "p.yaml:3:1: duplicate key 'currency'"},
  });
}

TEST(pricing_errors, Currency) {
  expect_errors({
      {"currency: usd\ngpu_models: {m: {gpu_hour: 1}}\n",
       "p.yaml:1:11: currency: expected a 3-letter ISO 4217 code such as USD or EUR, got 'usd'"},
      {"currency: EURO\ngpu_models: {m: {gpu_hour: 1}}\n",
       "p.yaml:1:11: currency: expected a 3-letter ISO 4217 code such as USD or EUR, got 'EURO'"},
      {"currency: [USD]\ngpu_models: {m: {gpu_hour: 1}}\n", "p.yaml:1:11: currency: expected a string, got a list"},
  });
}

// The names the FOCUS export gives the provider and the account (docs/focus.md).
TEST(pricing_parse, BillingNames) {
  const auto p = parse_ok(
      "gpu_models: {m: {gpu_hour: 1}}\n"
      "billing: {provider: Research Computing, account_id: rc-1, account_name: RC, service_name: GPU cluster}\n");
  EXPECT_EQ(p.billing.provider, "Research Computing");
  EXPECT_EQ(p.billing.account_id, "rc-1");
  EXPECT_EQ(p.billing.account_name, "RC");
  EXPECT_EQ(p.billing.service_name, "GPU cluster");
  EXPECT_EQ(parse_ok("gpu_models: {m: {gpu_hour: 1}}\n").billing.provider, "");
  expect_errors({
      {"gpu_models: {m: {gpu_hour: 1}}\nbilling: {provider: \" \"}\n",
       "p.yaml:2:21: billing.provider: must not be empty"},
      {"gpu_models: {m: {gpu_hour: 1}}\nbilling: {invoice: x}\n",
       "p.yaml:2:11: billing: unknown key 'invoice' (expected one of: provider, account_id, account_name, "
       "service_name)"},
  });
}

TEST(pricing_parse, SitesAreDatedAndFallBackToTheStar) {
  const auto p = parse_ok(
      "gpu_models: {m: {gpu_hour: 1}}\n"
      "sites:\n"
      "  eu: [{pue: 1.1, gco2e_per_kwh: 40}, {from: 2026-07-01, pue: 1.2, gco2e_per_kwh: 30}]\n"
      "  \"*\": {gco2e_per_kwh: 380}\n");
  EXPECT_EQ(p.site("eu", kJan2026)->gco2e_per_kwh, 40);
  EXPECT_EQ(p.site("eu", kJul2026)->pue, 1.2);
  EXPECT_EQ(p.site("us", kJul2026)->gco2e_per_kwh, 380);
  EXPECT_EQ(p.site("us", kJul2026)->pue, 1);  // the default
  EXPECT_EQ(p.change_points(kJan2026, kJul2026 + kDay), std::vector<double>{kJul2026});
  EXPECT_FALSE(parse_ok("gpu_models: {m: {gpu_hour: 1}}\nsites: {eu: {gco2e_per_kwh: 1}}\n").site("us", 0));
  expect_errors({
      {"gpu_models: {m: {gpu_hour: 1}}\nsites: {eu: {gco2e_per_kwh: 2500}}\n",
       "p.yaml:2:29: sites.eu.gco2e_per_kwh: must be between 0 and 2000, got 2500"},
      {"gpu_models: {m: {gpu_hour: 1}}\nsites: {eu: {pue: 0.9, gco2e_per_kwh: 1}}\n",
       "p.yaml:2:19: sites.eu.pue: must be between 1 and 3, got 0.9"},
      {"gpu_models: {m: {gpu_hour: 1}}\nsites: {eu: {pue: 1.2}}\n",
       "p.yaml:2:13: sites.eu: missing required key 'gco2e_per_kwh'"},
  });
}

TEST(pricing_errors, GpuModels) {
  expect_errors({
      {"gpu_models:\n",
       "p.yaml:2:1: gpu_models: must price at least one GPU model (the model \"*\" prices every other model)"},
      {"gpu_models: {}\n",
       "p.yaml:1:13: gpu_models: must price at least one GPU model (the model \"*\" prices every other model)"},
      {"gpu_models: [a]\n", "p.yaml:1:13: gpu_models: expected a mapping"},
      {"gpu_models: {\"\": {gpu_hour: 1}}\n", "p.yaml:1:14: gpu_models: a model name must not be empty"},
      {"gpu_models: {m: {gpu_hour: 1}, m: {gpu_hour: 2}}\n", "p.yaml:1:32: gpu_models: duplicate key 'm'"},
      {"gpu_models: {\"*\": 1}\n",
       "p.yaml:1:19: gpu_models[\"*\"]: expected a price such as {gpu_hour: 2.5} or a non-empty list of dated "
       "prices"},
      {"gpu_models: {\"*\": []}\n",
       "p.yaml:1:19: gpu_models[\"*\"]: expected a price such as {gpu_hour: 2.5} or a non-empty list of dated "
       "prices"},
      {"gpu_models:\n  L4: {gpu_hour: 1, gpu_hours: 2}\n",
       "p.yaml:2:21: gpu_models.L4: unknown key 'gpu_hours' (expected one of: from, gpu_hour, busy_gpu_hour)"},
      {"gpu_models:\n  L4: {gpu_hour: 1, gpu_hour: 2}\n", "p.yaml:2:21: gpu_models.L4: duplicate key 'gpu_hour'"},
      {"gpu_models:\n  L4: {busy_gpu_hour: 1}\n", "p.yaml:2:7: gpu_models.L4: missing required key 'gpu_hour'"},
      {"gpu_models:\n  L4: [{gpu_hour: 1}, 2]\n", "p.yaml:2:23: gpu_models.L4[1]: expected a mapping"},
  });
}

TEST(pricing_errors, Prices) {
  expect_errors({
      {"gpu_models:\n  L4: {gpu_hour: -0.5}\n", "p.yaml:2:18: gpu_models.L4.gpu_hour: must be at least 0, got '-0.5'"},
      {"gpu_models:\n  L4: {gpu_hour: 1$}\n", "p.yaml:2:18: gpu_models.L4.gpu_hour: expected a number, got '1$'"},
      {"gpu_models:\n  L4: {gpu_hour: .inf}\n", "p.yaml:2:18: gpu_models.L4.gpu_hour: expected a number, got '.inf'"},
      {"gpu_models:\n  L4: {gpu_hour: nan}\n", "p.yaml:2:18: gpu_models.L4.gpu_hour: expected a number, got 'nan'"},
      {"gpu_models:\n  L4: {gpu_hour: 1e999}\n", "p.yaml:2:18: gpu_models.L4.gpu_hour: expected a number, got '1e999'"},
      {"gpu_models:\n  L4: {gpu_hour: {a: 1}}\n",
       "p.yaml:2:18: gpu_models.L4.gpu_hour: expected a number, got a mapping"},
      {"gpu_models:\n  L4: {gpu_hour: 1, busy_gpu_hour: -1}\n",
       "p.yaml:2:36: gpu_models.L4.busy_gpu_hour: must be at least 0, got '-1'"},
  });
}

// A price of 1e308 billed infinity with exit 0: an amount no currency has is refused where it
// is written, whichever price it is.
TEST(pricing_errors, AbsurdPricesAreRefused) {
  const std::pair<std::string, std::string> cases[] = {
      {"gpu_models:\n  L4: {gpu_hour: 1e308}\n",
       "p.yaml:2:18: gpu_models.L4.gpu_hour: must be at most 1000000000, got '1e308' (a larger amount is taken for a "
       "mistake)"},
      {"gpu_models:\n  L4: {gpu_hour: 1, busy_gpu_hour: 2e9}\n",
       "p.yaml:2:36: gpu_models.L4.busy_gpu_hour: must be at most 1000000000"},
      {"gpu_models:\n  L4: {gpu_hour: 1}\nenergy: {kwh: 1e300}\n", "p.yaml:3:15: energy.kwh: must be at most"},
      {"gpu_models:\n  L4: {gpu_hour: 1}\nmig_profiles:\n  L4: {1g.6gb: {instance_hour: 1e12}}\n",
       "mig_profiles.L4[\"1g.6gb\"].instance_hour: must be at most 1000000000"},
      {std::string(kModels) + "budgets: {team-a: 1e308}\n",
       "p.yaml:2:19: budgets.team-a: must be at most 1000000000000000, got '1e308'"},
  };
  for (const auto& [yaml, message] : cases)
    EXPECT_NE(error_of(yaml).find(message), std::string::npos) << error_of(yaml);
  // The bounds themselves are prices.
  EXPECT_EQ(parse_ok("gpu_models:\n  L4: {gpu_hour: 1e9}\n").gpu_price("L4", 0)->gpu_hour, 1e9);
}

TEST(pricing_errors, EffectiveDates) {
  expect_errors({
      {"gpu_models:\n  L4:\n    - {gpu_hour: 1}\n    - {gpu_hour: 2}\n",
       "p.yaml:4:7: gpu_models.L4[1]: missing required key 'from' (only the first entry may leave it out)"},
      {"gpu_models:\n  L4:\n    - {from: 2026-02-30, gpu_hour: 1}\n",
       "p.yaml:3:14: gpu_models.L4[0].from: expected a date such as 2026-07-01 or 2026-07-01T00:00:00Z (RFC 3339), "
       "got '2026-02-30'"},
      {"gpu_models:\n  L4:\n    - {from: [2026-01-01], gpu_hour: 1}\n",
       "p.yaml:3:14: gpu_models.L4[0].from: expected a date, got a list"},
      {"gpu_models:\n  L4:\n    - {from: 2026-07-01, gpu_hour: 1}\n    - {from: 2026-07-01, gpu_hour: 2}\n",
       "p.yaml:4:14: gpu_models.L4[1].from: must be later than the previous entry's from (2026-07-01T00:00:00Z)"},
      {"gpu_models:\n  L4:\n    - {gpu_hour: 1}\n    - {from: 2026-07-01, gpu_hour: 2}\n"
       "    - {from: \"2026-07-01T01:00:00+02:00\", gpu_hour: 3}\n",
       "p.yaml:5:14: gpu_models.L4[2].from: must be later than the previous entry's from (2026-07-01T00:00:00Z)"},
  });
}

TEST(pricing_errors, Energy) {
  expect_errors({
      {std::string(kModels).append("energy: 0.12\n").c_str(),
       "p.yaml:2:9: energy: expected a price such as {kwh: 0.12, pue: 1.3} or a non-empty list of dated prices"},
      {std::string(kModels).append("energy: {pue: 1.2}\n").c_str(), "p.yaml:2:9: energy: missing required key 'kwh'"},
      {std::string(kModels).append("energy: {kwh: -1}\n").c_str(),
       "p.yaml:2:15: energy.kwh: must be at least 0, got '-1'"},
      {std::string(kModels).append("energy: {kwh: 0.1, pue: 0.9}\n").c_str(),
       "p.yaml:2:25: energy.pue: must be between 1 and 3, got 0.9"},
      {std::string(kModels).append("energy: {kwh: 0.1, pue: 3.5}\n").c_str(),
       "p.yaml:2:25: energy.pue: must be between 1 and 3, got 3.5"},
      {std::string(kModels).append("energy: {kwh: 0.1, price: 3}\n").c_str(),
       "p.yaml:2:20: energy: unknown key 'price' (expected one of: from, kwh, pue)"},
      {std::string(kModels).append("energy:\n  - {kwh: 0.1}\n  - {kwh: 0.2}\n").c_str(),
       "p.yaml:4:5: energy[1]: missing required key 'from' (only the first entry may leave it out)"},
  });
}

TEST(pricing_errors, Idle) {
  expect_errors({
      {std::string(kModels).append("idle: {policy: spread}\n").c_str(),
       "p.yaml:2:16: idle.policy: expected separate, spread-by-node or spread-by-pool, got 'spread'"},
      {std::string(kModels).append("idle: {policy: separate, pool: {a: b}}\n").c_str(),
       "p.yaml:2:26: idle: unknown key 'pool' (expected one of: policy, pools)"},
      {std::string(kModels).append("idle: {pools: {a: b}}\n").c_str(),
       "p.yaml:2:15: idle.pools: applies only to policy spread-by-pool, not separate"},
      {std::string(kModels).append("idle: {policy: spread-by-node, pools: {a: b}}\n").c_str(),
       "p.yaml:2:39: idle.pools: applies only to policy spread-by-pool, not spread-by-node"},
      {std::string(kModels).append("idle: {policy: spread-by-pool}\n").c_str(),
       "p.yaml:2:7: idle.pools: policy spread-by-pool needs at least one pool: a name and a regex matching its "
       "nodes' names"},
      {std::string(kModels).append("idle: {policy: spread-by-pool, pools: {}}\n").c_str(),
       "p.yaml:2:39: idle.pools: policy spread-by-pool needs at least one pool: a name and a regex matching its "
       "nodes' names"},
      {std::string(kModels).append("idle: {policy: spread-by-pool, pools: {\"\": a}}\n").c_str(),
       "p.yaml:2:40: idle.pools: a pool name must not be empty"},
      {std::string(kModels).append("idle: {policy: spread-by-pool, pools: {a: [b]}}\n").c_str(),
       "p.yaml:2:43: idle.pools.a: expected a string, got a list"},
  });
}

TEST(pricing_errors, BadRegexNamesThePool) {
  std::string e = error_of(std::string(kModels) +
                           "idle:\n  policy: spread-by-pool\n  pools:\n    ok: \"n.*\"\n    h100: \"h100-(\"\n");
  // The rest is RE2's own description of the fault.
  const std::string expected = "p.yaml:6:11: idle.pools.h100: pool 'h100' has an invalid node regex 'h100-(': ";
  EXPECT_EQ(e.substr(0, expected.size()), expected);
  EXPECT_GT(e.size(), expected.size());
}

// Pools become `=~` matchers in the generated recording rules, which promtool checks with RE2:
// what RE2 rejects (back-references, look-arounds) is rejected here, naming the pool.
TEST(pricing_errors, RegexesPrometheusRejectsAreRejected) {
  for (const char* bad : {"(a)\\\\1", "(?=a)a", "(?<!x)y"}) {
    SCOPED_TRACE(bad);
    std::string e =
        error_of(std::string(kModels) + "idle:\n  policy: spread-by-pool\n  pools:\n    p: \"" + bad + "\"\n");
    EXPECT_NE(e.find("idle.pools.p: pool 'p' has an invalid node regex"), std::string::npos) << e;
  }
}

TEST(pricing_errors, Budgets) {
  expect_errors({
      {std::string(kModels).append("budgets: {team-a: 0}\n").c_str(),
       "p.yaml:2:19: budgets.team-a: must be more than 0, got '0'"},
      {std::string(kModels).append("budgets: {team-a: -5}\n").c_str(),
       "p.yaml:2:19: budgets.team-a: must be more than 0, got '-5'"},
      {std::string(kModels).append("budgets: {\"team a\": lots}\n").c_str(),
       "p.yaml:2:21: budgets[\"team a\"]: expected a number, got 'lots'"},
      {std::string(kModels).append("budgets: {\"\": 5}\n").c_str(),
       "p.yaml:2:11: budgets: a project name must not be empty"},
      {std::string(kModels).append("budgets: [a]\n").c_str(), "p.yaml:2:10: budgets: expected a mapping"},
  });
}

TEST(pricing_load, MissingFilesAndDirectoriesNameThePath) {
  auto missing = load_pricing("/nonexistent/pricing.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message,
            "/nonexistent/pricing.yaml: cannot read the pricing file: No such file or directory");
  const std::string dir = std::filesystem::temp_directory_path().string();
  auto p = load_pricing(dir);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message, dir + ": cannot read the pricing file: Is a directory");
}

TEST(pricing_load, RefusesHugeFiles) {
  auto path = std::filesystem::temp_directory_path() / "gpumeter-pricing-huge.yaml";
  std::ofstream(path) << "# " << std::string(1 << 20, 'x') << "\n";
  auto p = load_pricing(path.string());
  std::filesystem::remove(path);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message, path.string() + ": the pricing file is larger than 1048576 bytes");
}

TEST(pricing_load, ErrorsNameTheFile) {
  auto path = std::filesystem::temp_directory_path() / "gpumeter-pricing-test.yaml";
  std::ofstream(path) << "gpu_models:\n  L4: {gpu_hour: -1}\n";
  auto p = load_pricing(path.string());
  std::filesystem::remove(path);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message, path.string() + ":2:18: gpu_models.L4.gpu_hour: must be at least 0, got '-1'");
}

TEST(pricing_load, ShippedFiles) {
  for (const char* name : {"list-prices.yaml", "example-dated.yaml"}) {
    auto p = load_pricing(std::string(GPUMETER_SOURCE_DIR "/deploy/pricing/") + name);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p->gpu_models.count("*"), 1u) << name;
  }
}

TEST(pricing_lookup, PricesAcrossEffectiveDates) {
  Pricing p = parse_ok(kFormatExample);
  const std::string h100 = "NVIDIA H100 80GB HBM3";
  // Before the model's first date its own prices are not in effect, so "*" applies.
  EXPECT_EQ(p.gpu_price(h100, kJan2026 - 1)->gpu_hour, 1.0);
  EXPECT_EQ(p.gpu_price(h100, kJan2026)->gpu_hour, 2.99);
  EXPECT_EQ(p.gpu_price(h100, kJul2026 - 0.001)->gpu_hour, 2.99);
  EXPECT_EQ(p.gpu_price(h100, kJul2026)->gpu_hour, 2.49);  // an entry applies from its own date
  EXPECT_EQ(p.gpu_price(h100, kJul2026)->busy_gpu_hour, 0.5);
  EXPECT_EQ(p.gpu_price(h100, kJul2026 + 1000 * kDay)->gpu_hour, 2.49);
  EXPECT_EQ(p.gpu_price("NVIDIA L4", kJul2026)->gpu_hour, 1.0);  // "*"
  EXPECT_EQ(p.gpu_price("NVIDIA L4", -1e12)->gpu_hour, 1.0);     // undated: since the beginning

  ASSERT_TRUE(p.energy_price(0));
  EXPECT_EQ(p.energy_price(0)->kwh, 0.12);
  EXPECT_EQ(p.energy_price(kJul2026 - 1)->pue, 1.3);
  EXPECT_EQ(p.energy_price(kJul2026)->kwh, 0.10);
  EXPECT_EQ(p.energy_price(kJul2026)->pue, 1.0);
}

TEST(pricing_lookup, NothingInEffect) {
  Pricing p = parse_ok("gpu_models:\n  L4: {from: 2026-07-01, gpu_hour: 0.8}\nenergy: {from: 2026-07-01, kwh: 0.1}\n");
  EXPECT_EQ(p.gpu_price("NVIDIA L4", kJul2026), std::nullopt);  // no "*" to fall back to
  EXPECT_EQ(p.gpu_price("L4", kJul2026 - 1), std::nullopt);
  EXPECT_EQ(p.gpu_price("L4", kJul2026)->gpu_hour, 0.8);
  EXPECT_EQ(p.energy_price(kJul2026 - 1), std::nullopt);
  EXPECT_EQ(p.energy_price(kJul2026)->kwh, 0.1);
  EXPECT_EQ(parse_ok(kModels).energy_price(0), std::nullopt);
}

TEST(pricing_lookup, ChangePoints) {
  Pricing p = parse_ok(R"(gpu_models:
  a: [{gpu_hour: 1}, {from: 2026-03-01, gpu_hour: 2}, {from: 2026-07-01, gpu_hour: 3}]
  b: [{from: 2026-01-01, gpu_hour: 1}, {from: 2026-07-01, gpu_hour: 2}]
energy: [{from: 2026-02-01, kwh: 0.1}, {from: 2026-03-01, kwh: 0.2}]
)");
  const double feb = *parse_timestamp("2026-02-01");
  const double mar = *parse_timestamp("2026-03-01");
  EXPECT_EQ(p.change_points(0, 2 * kJul2026), (std::vector<double>{kJan2026, feb, mar, kJul2026}));
  // Strictly inside: a date at either end is no change within the period.
  EXPECT_EQ(p.change_points(kJan2026, kJul2026), (std::vector<double>{feb, mar}));
  EXPECT_EQ(p.change_points(feb, mar), std::vector<double>{});
  EXPECT_EQ(p.change_points(mar - 1, mar + 1), std::vector<double>{mar});
  EXPECT_EQ(parse_ok(kModels).change_points(-1e12, 1e12), std::vector<double>{});
}

TEST(pricing_lookup, PoolForIsTheFirstFullMatch) {
  Pricing p = parse_ok(std::string(kModels) + R"(idle:
  policy: spread-by-pool
  pools:
    h100: "h100-[0-9]+"
    gpu: "(h100|a100)-.*"
)");
  EXPECT_EQ(p.pool_for("h100-12"), "h100");
  EXPECT_EQ(p.pool_for("h100-12x"), "gpu");  // not a full match of the first
  EXPECT_EQ(p.pool_for("a100-1:9400"), "gpu");
  EXPECT_EQ(p.pool_for("xh100-1"), std::nullopt);  // full match only, not a search
  EXPECT_EQ(p.pool_for(""), std::nullopt);
}

}  // namespace
}  // namespace gpumeter::pricing
