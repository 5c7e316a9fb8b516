// The pricing file's MIG profile prices: profile names and their slice counts, the section's
// format and its validation errors (each with file:line:col), and the lookup the report and the
// rules rely on: the model's own entry, else "*", across effective dates.

#include <gtest/gtest.h>

#include "pricing/pricing.h"

namespace gpumeter::pricing {
namespace {

constexpr double kJan2026 = 1767225600;  // 2026-01-01T00:00:00Z
constexpr double kJul2026 = 1782864000;  // 2026-07-01T00:00:00Z
constexpr const char* kH100 = "NVIDIA H100 80GB HBM3";

Pricing parse_ok(const std::string& yaml) {
  auto p = parse_pricing(yaml, "p.yaml");
  EXPECT_TRUE(p.ok()) << p.error().message;
  return p.ok() ? std::move(*p) : Pricing{};
}

std::string error_of(const std::string& yaml) {
  auto p = parse_pricing(yaml, "p.yaml");
  return p.ok() ? "no error" : p.error().message;
}

constexpr const char* kModels = "gpu_models: {\"*\": {gpu_hour: 1}}\n";

TEST(mig_pricing, SlicesAreTheLeadingNumber) {
  EXPECT_EQ(mig_compute_slices("1g.10gb"), 1);
  EXPECT_EQ(mig_compute_slices("2g.20gb"), 2);
  EXPECT_EQ(mig_compute_slices("3g.40gb"), 3);
  EXPECT_EQ(mig_compute_slices("7g.80gb"), 7);
  EXPECT_EQ(mig_compute_slices("1g.10gb+me"), 1);
  EXPECT_EQ(mig_compute_slices("1g.24gb-me"), 1);
  // A compute instance smaller than its GPU instance: its own compute slices.
  EXPECT_EQ(mig_compute_slices("1c.3g.40gb"), 1);
  EXPECT_EQ(mig_compute_slices("2c.3g.20gb"), 2);
  EXPECT_EQ(mig_compute_slices("3c.3g.40gb"), 3);
}

TEST(mig_pricing, OtherNamesAreNotProfiles) {
  for (const char* bad : {"", "3g", "3g.", "3g.40", "3g.gb", "0g.10gb", "8g.80gb", "g.10gb", "3G.40GB", "3g.40gbx",
                          "3g.40gb+", "4c.3g.40gb", "0c.3g.40gb", "1c3g.40gb", "1c.", "MIG 3g.40gb", "10g.80gb"}) {
    EXPECT_EQ(mig_compute_slices(bad), std::nullopt) << bad;
  }
}

// The ledger bills an instance of s slices on a GPU of G slices s/G GPU-seconds per second: an
// hour of it, at the price per GPU-hour made from its price per instance-hour, costs that price.
TEST(mig_pricing, InstanceHourPriceIsConvertedWithTheGpusOwnSlices) {
  const double instance_hour = 0.9;
  // A30 (G = 4): a 1g.6gb hour is a quarter GPU-hour, so x 4/1.
  EXPECT_DOUBLE_EQ(mig_gpu_hour_price(instance_hour, *mig_compute_slices("1g.6gb"), 4), 3.6);
  EXPECT_DOUBLE_EQ(1.0 / 4 * mig_gpu_hour_price(instance_hour, 1, 4), instance_hour);
  EXPECT_DOUBLE_EQ(2.0 / 4 * mig_gpu_hour_price(instance_hour, *mig_compute_slices("2g.12gb"), 4), instance_hour);
  // H100 (G = 7): a 1g.10gb hour is a seventh of a GPU-hour, so x 7/1.
  EXPECT_DOUBLE_EQ(mig_gpu_hour_price(instance_hour, *mig_compute_slices("1g.10gb"), 7), 6.3);
  EXPECT_DOUBLE_EQ(3.0 / 7 * mig_gpu_hour_price(instance_hour, 3, kMaxMigSlicesPerGpu), instance_hour);
}

TEST(mig_pricing, ParsesPerModelAndAnyModel) {
  Pricing p = parse_ok(std::string(kModels) + R"(mig_profiles:
  "*":
    3g.40gb: {instance_hour: 2.1}
    1c.3g.40gb: {instance_hour: 0.8}
  "NVIDIA H100 80GB HBM3":
    3g.40gb:
      - {instance_hour: 2.4}
      - {from: 2026-07-01, instance_hour: 1.8}
)");
  ASSERT_EQ(p.mig_profiles.size(), 2u);
  const auto& any = p.mig_profiles.at("*");
  ASSERT_EQ(any.size(), 2u);
  EXPECT_EQ(any.at("3g.40gb")[0].value.instance_hour, 2.1);
  EXPECT_EQ(any.at("3g.40gb")[0].line, 4);
  EXPECT_FALSE(any.at("3g.40gb")[0].from_set);
  const auto& h100 = p.mig_profiles.at(kH100).at("3g.40gb");
  ASSERT_EQ(h100.size(), 2u);
  EXPECT_EQ(h100[1].from, kJul2026);
  EXPECT_EQ(h100[1].line, 9);

  // The model's own entry first, across its dates; "*" for other models; nothing for a
  // profile no entry names (the report then prices it by its share of the GPU).
  EXPECT_EQ(p.mig_price(kH100, "3g.40gb", kJan2026)->instance_hour, 2.4);
  EXPECT_EQ(p.mig_price(kH100, "3g.40gb", kJul2026)->instance_hour, 1.8);
  EXPECT_EQ(p.mig_price("NVIDIA A100-SXM4-80GB", "3g.40gb", kJul2026)->instance_hour, 2.1);
  EXPECT_EQ(p.mig_price(kH100, "1c.3g.40gb", kJul2026)->instance_hour, 0.8);
  EXPECT_EQ(p.mig_price(kH100, "1g.10gb", kJul2026), std::nullopt);
  EXPECT_EQ(p.mig_price(kH100, "", kJul2026), std::nullopt);

  // Profile price dates split a report's period as GPU price dates do.
  EXPECT_EQ(p.change_points(kJan2026, kJul2026 + 1), std::vector<double>{kJul2026});
}

TEST(mig_pricing, ModelEntryNotYetInEffectFallsBackToAnyModel) {
  Pricing p = parse_ok(std::string(kModels) + R"(mig_profiles:
  "*": {1g.10gb: {instance_hour: 0.5}}
  m: {1g.10gb: {from: 2026-07-01, instance_hour: 0.7}}
)");
  EXPECT_EQ(p.mig_price("m", "1g.10gb", kJan2026)->instance_hour, 0.5);
  EXPECT_EQ(p.mig_price("m", "1g.10gb", kJul2026)->instance_hour, 0.7);
}

TEST(mig_pricing, EmptySectionIsNoSection) {
  Pricing p = parse_ok(std::string(kModels) + "mig_profiles:\n");
  EXPECT_TRUE(p.mig_profiles.empty());
}

TEST(mig_pricing, ErrorsNameTheLine) {
  struct Case {
    std::string yaml;
    std::string message;
  };
  const Case cases[] = {
      {"mig_profiles: [3g.40gb]\n", "p.yaml:2:15: mig_profiles: expected a mapping"},
      {"mig_profiles:\n  \"*\":\n",
       "p.yaml:4:1: mig_profiles[\"*\"]: expected MIG profiles and their prices, such as "
       "3g.40gb: {instance_hour: 2.5}"},
      {"mig_profiles:\n  \"\": {1g.10gb: {instance_hour: 1}}\n",
       "p.yaml:3:3: mig_profiles: a model name must not be empty"},
      {"mig_profiles:\n  \"*\":\n    3g.40gb: {instance_hour: 1}\n    8g.80gb: {instance_hour: 1}\n",
       "p.yaml:5:5: mig_profiles[\"*\"]: '8g.80gb' is not a MIG profile name such as 1g.10gb, 3g.40gb or 1c.3g.40gb "
       "(compute and GPU slices from 1 to 7, the compute slices no more than the GPU slices)"},
      {"mig_profiles:\n  m:\n    4c.3g.40gb: {instance_hour: 1}\n",
       "p.yaml:4:5: mig_profiles.m: '4c.3g.40gb' is not a MIG profile name such as 1g.10gb, 3g.40gb or 1c.3g.40gb "
       "(compute and GPU slices from 1 to 7, the compute slices no more than the GPU slices)"},
      {"mig_profiles:\n  m:\n    3g.40gb: {instance_hour: -1}\n",
       "p.yaml:4:30: mig_profiles.m[\"3g.40gb\"].instance_hour: must be at least 0, got '-1'"},
      {"mig_profiles:\n  m:\n    3g.40gb: {gpu_hour: 1}\n",
       "p.yaml:4:15: mig_profiles.m[\"3g.40gb\"]: unknown key 'gpu_hour' (expected one of: from, instance_hour)"},
      {"mig_profiles:\n  m:\n    3g.40gb: {}\n",
       "p.yaml:4:14: mig_profiles.m[\"3g.40gb\"]: missing required key 'instance_hour'"},
      {"mig_profiles:\n  m:\n    3g.40gb: 2\n",
       "p.yaml:4:14: mig_profiles.m[\"3g.40gb\"]: expected a price such as {instance_hour: 2.5} or a non-empty list "
       "of dated prices"},
      {"mig_profiles:\n  m:\n    3g.40gb:\n      - {instance_hour: 1}\n      - {from: 2026-07-01, instance_hour: 2}\n"
       "      - {from: 2026-01-01, instance_hour: 3}\n",
       "p.yaml:7:16: mig_profiles.m[\"3g.40gb\"][2].from: must be later than the previous entry's from "
       "(2026-07-01T00:00:00Z)"},
      {"mig_profiles:\n  m:\n    3g.40gb: {instance_hour: 1}\n    3g.40gb: {instance_hour: 2}\n",
       "p.yaml:5:5: mig_profiles.m: duplicate key '3g.40gb'"},
  };
  for (const Case& c : cases) EXPECT_EQ(error_of(kModels + c.yaml), c.message) << c.yaml;
}

}  // namespace
}  // namespace gpumeter::pricing
