// The scenario keys of driver branches, architectures, product lines, sample buffers, driver
// upgrades and quirks: what they parse to, and one test per kind of error, each checking that
// the message names file:line:col, the field and what is wrong.

#include <gtest/gtest.h>

#include "sim/scenario/driver.h"
#include "sim/scenario/scenario_parse.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

constexpr Micros S = kMicrosPerSecond;

// A model whose name says nothing of its architecture: lines 2-12, so what follows starts
// at line 13.
const std::string kPlain = R"(
models:
  p:
    name: Plain GPU
    architecture: turing
    memory: 16GiB
    power: {limit: 300, idle: 50, max: 250}
    clocks:
      graphics: {idle: 300, max: 1800}
      sm: {idle: 310, max: 1810}
      memory: {idle: 5000, max: 5001}
      video: {idle: 500, max: 1500}
)";

std::string model_named(const std::string& name, const std::string& extra = "") {
  return "models:\n  x:\n    name: " + name + "\n" + extra +
         "    memory: 1GiB\n    power: {limit: 3, idle: 1, max: 2}\n    clocks:\n"
         "      graphics: {idle: 1, max: 2}\n      sm: {idle: 1, max: 2}\n      memory: {idle: 1, max: 2}\n"
         "      video: {idle: 1, max: 2}\ngpus: {count: 3, model: x}\n";
}

TEST(ScenarioQuirks, DriverMajor) {
  EXPECT_EQ(driver_major("550.90.07"), 550u);
  EXPECT_EQ(driver_major("555.42.06"), 555u);
  EXPECT_EQ(driver_major("470"), 470u);
  EXPECT_FALSE(driver_major("r550"));
  EXPECT_FALSE(driver_major("550a.1"));
  EXPECT_FALSE(driver_major(""));
}

TEST(ScenarioQuirks, ArchitectureFromName) {
  const std::pair<const char*, const char*> cases[] = {
      {"NVIDIA A100-SXM4-80GB", "ga100"},
      {"NVIDIA A100 80GB PCIe", "ga100"},
      {"NVIDIA H100 80GB HBM3", "hopper"},
      {"NVIDIA H200", "hopper"},
      {"NVIDIA B200", "blackwell"},
      {"NVIDIA L4", "ada"},
      {"NVIDIA L40S", "ada"},
      {"NVIDIA GeForce RTX 4090", "ada"},
      {"NVIDIA A10", "ampere"},
      {"NVIDIA A30", "ga100"},
      {"NVIDIA A40", "ampere"},
      {"NVIDIA GeForce RTX 3090", "ampere"},
      {"NVIDIA RTX A6000", "ampere"},
      {"Tesla V100-SXM2-32GB", "volta"},
      {"Tesla T4", "turing"},
      {"NVIDIA GeForce RTX 2080 Ti", "turing"},
  };
  for (const auto& [name, arch] : cases) EXPECT_EQ(architecture_from_name(name).value_or("none"), arch) << name;
  EXPECT_FALSE(architecture_from_name("Test GPU 16GB"));
  EXPECT_FALSE(architecture_from_name("NVIDIA A1000X"));
  EXPECT_TRUE(power_usage_is_averaged("ampere"));
  EXPECT_TRUE(power_usage_is_averaged("blackwell"));
  EXPECT_FALSE(power_usage_is_averaged("ga100"));
  EXPECT_FALSE(power_usage_is_averaged("turing"));
}

TEST(ScenarioQuirks, ParsesEveryNewKey) {
  Scenario s = testing::parse_ok(std::string("driver_version: \"535.183.01\"\n") + kPlain + R"(
  g:
    name: NVIDIA GeForce RTX 3080
    profile: geforce
    memory: 10GiB
    power: {limit: 320, idle: 20, max: 300}
    clocks:
      graphics: {idle: 210, max: 1710}
      sm: {idle: 210, max: 1710}
      memory: {idle: 405, max: 9501}
      video: {idle: 555, max: 1500}
    samples: {utilization_period: 1s, utilization_depth: 10, power_period: 50ms, power_depth: 300}
gpus:
  - {model: p}
  - {model: g}
faults:
  - {kind: driver_upgrade, at: 1h, to: "555.42.06"}
  - {kind: driver_upgrade, at: 20s, to: "550.54.15"}
quirks:
  - {kind: call_error, gpu: 1, call: nvmlDeviceGetFanSpeed, error: unknown, at: 5s, duration: 10s}
  - {kind: process_record_layout, record_bytes: 32}
  - {kind: garbage_process_records, gpu: 0, at: 1m}
)");
  ASSERT_EQ(s.models.size(), 2u);
  EXPECT_EQ(s.models[0].architecture, "turing");
  EXPECT_EQ(s.models[0].profile, "datacenter");
  EXPECT_TRUE(s.models[0].ecc);
  EXPECT_FALSE(s.models[0].fan);
  EXPECT_EQ(s.models[0].samples.utilization_period, 200'000);
  EXPECT_EQ(s.models[0].samples.utilization_depth, 100u);
  EXPECT_EQ(s.models[0].samples.power_period, 100'000);
  EXPECT_EQ(s.models[0].samples.power_depth, 120u);
  EXPECT_EQ(s.models[1].architecture, "ampere");
  EXPECT_EQ(s.models[1].profile, "geforce");
  EXPECT_FALSE(s.models[1].ecc);
  EXPECT_TRUE(s.models[1].fan);
  EXPECT_EQ(s.models[1].samples.utilization_period, S);
  EXPECT_EQ(s.models[1].samples.utilization_depth, 10u);
  EXPECT_EQ(s.models[1].samples.power_period, 50'000);
  EXPECT_EQ(s.models[1].samples.power_depth, 300u);
  ASSERT_EQ(s.driver_upgrades.size(), 2u);  // sorted by time
  EXPECT_EQ(s.driver_upgrades[0].at, 20 * S);
  EXPECT_EQ(s.driver_upgrades[0].to, "550.54.15");
  EXPECT_EQ(s.driver_upgrades[1].at, 3600 * S);
  EXPECT_EQ(s.fault_count(), 2u);
  ASSERT_EQ(s.quirks.size(), 3u);
  const Quirk& fan = s.quirks[0];
  EXPECT_EQ(fan.kind, QuirkKind::call_error);
  EXPECT_EQ(fan.gpu, 1u);
  EXPECT_EQ(fan.call, "nvmlDeviceGetFanSpeed");
  EXPECT_EQ(fan.error, CallErrorCode::unknown);
  EXPECT_FALSE(fan.applies(1, 4 * S));
  EXPECT_TRUE(fan.applies(1, 5 * S));
  EXPECT_TRUE(fan.applies(1, 15 * S - 1));
  EXPECT_FALSE(fan.applies(1, 15 * S));
  EXPECT_FALSE(fan.applies(0, 10 * S));
  const Quirk& layout = s.quirks[1];
  EXPECT_EQ(layout.record_bytes, 32u);
  EXPECT_FALSE(layout.gpu.has_value());
  EXPECT_TRUE(layout.applies(0, 0));
  EXPECT_TRUE(layout.applies(1, 1'000'000 * S));
  EXPECT_EQ(s.quirks[2].kind, QuirkKind::garbage_process_records);
  EXPECT_FALSE(s.quirks[2].applies(0, 59 * S));
  EXPECT_TRUE(s.quirks[2].applies(0, 60 * S));
}

TEST(ScenarioQuirks, DeployDemoHasOneQuirkPerGpuAndAnUpgrade) {
  auto s = load_scenario(std::string(GPUMETER_SOURCE_DIR) + "/deploy/scenarios/quirks-demo.yaml");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->models[0].architecture, "ada");
  EXPECT_FALSE(s->models[0].fan);  // passively cooled
  ASSERT_EQ(s->driver_upgrades.size(), 1u);
  EXPECT_EQ(s->driver_upgrades[0].at, 300 * S);
  EXPECT_EQ(driver_major(s->driver_upgrades[0].to), 555u);
  ASSERT_EQ(s->quirks.size(), 3u);
  for (unsigned g = 0; g < 4; ++g) {
    unsigned n = 0;
    for (const Quirk& q : s->quirks) n += q.gpu == g ? 1 : 0;
    EXPECT_EQ(n, g == 0 ? 0u : 1u) << g;
  }
}

struct BadCase {
  const char* what;
  std::string yaml;
  std::string expected;  // the start of the message
};

TEST(ScenarioQuirks, ErrorsNameFileLineColumnAndField) {
  const std::string gpus = "gpus: {count: 3, model: p}\n";
  const std::string q = kPlain + gpus + "quirks:\n";  // entries start at line 15
  const BadCase cases[] = {
      {"quirks not a list", kPlain + gpus + "quirks: {kind: call_error}\n",
       "test.yaml:14:9: quirks: expected a list of quirks"},
      {"quirk without kind", q + "  - {gpu: 1}\n", "test.yaml:15:5: quirks[0]: missing required key 'kind'"},
      {"unknown quirk kind", q + "  - {kind: bogus}\n",
       "test.yaml:15:12: quirks[0].kind: unknown quirk kind 'bogus' (expected one of: call_error, "
       "process_record_layout, garbage_process_records, gpm_non_finite, silent_while_idle, no_capability, "
       "impossible_power_samples, gpm_batch_collapse, active_only_process_samples)"},
      {"unknown quirk key", q + "  - {kind: garbage_process_records, call: x}\n",
       "test.yaml:15:37: quirks[0]: unknown key 'call'"},
      {"quirk gpu out of range", q + "  - {kind: garbage_process_records, gpu: 3}\n",
       "test.yaml:15:42: quirks[0].gpu: must be between 0 and 2"},
      {"call_error without call", q + "  - {kind: call_error, error: unknown}\n",
       "test.yaml:15:5: quirks[0]: missing required key 'call'"},
      {"call_error on a system call", q + "  - {kind: call_error, call: nvmlSystemGetDriverVersion, error: unknown}\n",
       "test.yaml:15:30: quirks[0].call: 'nvmlSystemGetDriverVersion' is not an NVML device function"},
      {"call_error unknown error", q + "  - {kind: call_error, call: nvmlDeviceGetFanSpeed, error: lost}\n",
       "test.yaml:15:60: quirks[0].error: unknown error 'lost' (expected one of: unknown, not_supported, "
       "no_permission, timeout)"},
      {"quirk zero duration", q + "  - {kind: garbage_process_records, duration: 0}\n",
       "test.yaml:15:47: quirks[0].duration: must be more than 0"},
      {"record_bytes", q + "  - {kind: process_record_layout, record_bytes: 24}\n",
       "test.yaml:15:49: quirks[0].record_bytes: expected 32 (R535 records with usedGpuCcProtectedMemory) or "
       "16"},
      {"driver_upgrade without to", kPlain + gpus + "faults:\n  - {kind: driver_upgrade, at: 5}\n",
       "test.yaml:15:5: faults[0]: missing required key 'to'"},
      {"driver_upgrade bad version", kPlain + gpus + "faults:\n  - {kind: driver_upgrade, at: 5, to: latest}\n",
       "test.yaml:15:39: faults[0].to: expected a driver version such as 555.42.06, got 'latest'"},
      {"two upgrades at once",
       kPlain + gpus +
           "faults:\n  - {kind: driver_upgrade, at: 5, to: 555.42.06}\n"
           "  - {kind: driver_upgrade, at: 5, to: 560.28.03}\n",
       "test.yaml:16:32: faults[1].at: another driver_upgrade happens at the same time"},
      {"bad driver_version", "driver_version: latest\n" + kPlain + gpus,
       "test.yaml:1:17: driver_version: expected a driver version such as 550.90.07, got 'latest'"},
      {"bad vgpu_license", "vgpu_license: yes\n" + kPlain + gpus,
       "test.yaml:1:15: vgpu_license: unknown licence state 'yes' (expected one of: licensed, unlicensed)"},
      {"unknown architecture", model_named("Plain", "    architecture: kepler\n"),
       "test.yaml:4:19: models.x.architecture: unknown architecture 'kepler' (expected one of: volta, "
       "turing, "
       "ampere, ga100, ada, hopper, blackwell)"},
      {"architecture needed", model_named("Plain"),
       "test.yaml:3:5: models.x.architecture: cannot tell the architecture of 'Plain' from its name; add "
       "'architecture'"},
      {"unknown profile", model_named("NVIDIA L4", "    profile: gaming\n"),
       "test.yaml:4:14: models.x.profile: unknown profile 'gaming' (expected datacenter or geforce)"},
      {"geforce with ecc", model_named("NVIDIA GeForce RTX 4090", "    profile: geforce\n    ecc: true\n"),
       "test.yaml:5:10: models.x.ecc: a geforce GPU has no ECC"},
      {"utilization period too short", model_named("NVIDIA L4", "    samples: {utilization_period: 100ms}\n"),
       "test.yaml:4:35: models.x.samples.utilization_period: must be from 1/6 s (166666us) to 1 s"},
      {"unknown samples key", model_named("NVIDIA L4", "    samples: {period: 1s}\n"),
       "test.yaml:4:15: models.x.samples: unknown key 'period'"},
      {"zero depth", model_named("NVIDIA L4", "    samples: {power_depth: 0}\n"),
       "test.yaml:4:28: models.x.samples.power_depth: must be between 1 and 10000"},
  };
  for (const BadCase& c : cases) {
    auto s = parse_scenario(c.yaml, "test.yaml");
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_EQ(s.error().message.rfind(c.expected, 0), 0u)
        << c.what << "\n  got:      " << s.error().message << "\n  expected: " << c.expected;
  }
}

}  // namespace
}  // namespace gpumeter::sim
