// The profiling (GPM) and NVLink model: parsing, exact integrals of a hand-computable pattern,
// NVLink faults and counters, and the truth.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "mig_scenario.h"
#include "sim/cli/truth_format.h"
#include "sim/physics/profiling.h"
#include "sim/scenario/scenario_parse.h"
#include "sim/physics/timeline.h"
#include "sim/truth/truth.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

constexpr Micros kS = kMicrosPerSecond;

// GPU 0: a hopper with 4 NVLink links of 25000 MBps; the model's traffic is 1 GB/s each way.
const std::string kScenario = R"(
models:
  h:
    name: NVIDIA H100 80GB HBM3
    memory: 80GiB
    power: {limit: 700, idle: 70, max: 700}
    clocks:
      graphics: {idle: 345, max: 1980}
      sm: {idle: 345, max: 1980}
      memory: {idle: 2619, max: 2619}
      video: {idle: 765, max: 1965}
    pcie: {tx_bytes_per_second: 2GB, rx_bytes_per_second: 4GB}
    nvlink: {links: 4, speed_mbps: 25000, version: "4.0", tx: 1GB, rx: 1GB}
  a:
    name: NVIDIA A100-SXM4-80GB
    memory: 80GiB
    power: {limit: 400, idle: 50, max: 400}
    clocks:
      graphics: {idle: 210, max: 1410}
      sm: {idle: 210, max: 1410}
      memory: {idle: 1593, max: 1593}
      video: {idle: 795, max: 1290}
    nvlink: {links: 12, speed_mbps: 25000, version: 3}
gpus:
  - {model: h}
  - {model: a}
duration: 100
jobs:
  - {name: a, start: 0, end: 100, gpus: [0], pid: 100, utilization: 0.5,
     profile: {sm: 0.8, tensor: 0.6, fp16: 0.5, dram: 0.4, occupancy: 0.5},
     nvlink: {tx: 4GB, rx: 2GB}}
  - {name: b, start: 50, gpus: [0, 1], pid: 200, utilization: 0.75}
faults:
  - {kind: nvlink_down, gpu: 0, link: 3, at: 20, duration: 20}
  - {kind: nvlink_errors, gpu: 0, link: 1, at: 30, type: crc, count: 5}
  - {kind: nvlink_errors, gpu: 0, link: 1, at: 60, type: replay, count: 2}
  - {kind: driver_reload, at: 80}
)";

TEST(ProfilingParse, ReadsNvlinkProfilesAndFaults) {
  Scenario s = testing::parse_ok(kScenario);
  EXPECT_EQ(s.models[0].nvlink.links, 4u);
  EXPECT_EQ(s.models[0].nvlink.speed_mbps, 25000u);
  EXPECT_EQ(s.models[0].nvlink.version, 6u);  // NVML_NVLINK_VERSION_4_0
  EXPECT_EQ(s.models[1].nvlink.version, 4u);  // NVML_NVLINK_VERSION_3_0
  EXPECT_DOUBLE_EQ(s.models[0].nvlink.tx_bytes_per_second, 1e9);
  EXPECT_DOUBLE_EQ(s.jobs[0].profile.sm, 0.8);
  EXPECT_DOUBLE_EQ(s.jobs[0].profile.fp32, 0.5);  // the default
  ASSERT_TRUE(s.jobs[0].nvlink.has_value());
  EXPECT_DOUBLE_EQ(s.jobs[0].nvlink->tx_bytes_per_second, 4e9);
  EXPECT_FALSE(s.jobs[1].nvlink.has_value());
  ASSERT_EQ(s.nvlink_faults.size(), 3u);
  EXPECT_TRUE(s.nvlink_faults[0].down);
  EXPECT_EQ(s.nvlink_faults[1].type, NvlinkErrorType::crc);
  EXPECT_EQ(s.nvlink_faults[1].count, 5u);
  EXPECT_EQ(s.fault_count(), 4u);  // `sim check` counts the NVLink faults
}

TEST(ProfilingParse, RejectsWhatCannotBe) {
  auto fails = [](const std::string& from, const std::string& to, const std::string& message) {
    std::string yaml = kScenario;
    auto at = yaml.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    yaml.replace(at, from.size(), to);
    auto s = parse_scenario(yaml, "t.yaml");
    ASSERT_FALSE(s) << to;
    EXPECT_NE(s.error().message.find(message), std::string::npos) << s.error().message;
  };
  fails("tensor: 0.6", "tensor: 0.9", "tensor (0.9) exceeds sm (0.8)");
  fails("sm: 0.8", "sm: 1.5", "profile.sm");
  fails("link: 3, at: 20", "link: 4, at: 20", "link");
  fails("type: crc", "type: ecc", "unknown NVLink error type 'ecc'");
  fails("version: 3}", "version: 3.5}", "unknown NVLink version '3.5'");
  fails("nvlink: {tx: 4GB, rx: 2GB}", "nvlink: {tx: 200GB}", "exceeds the capacity");
  fails("tx: 1GB, rx: 1GB}", "tx: 1TB, rx: 1GB}", "exceeds the links' capacity");
}

TEST(ProfilingModel, IntegralsOfAHandComputablePattern) {
  Scenario s = testing::parse_ok(kScenario);
  GpuTimeline timeline(s, 0);
  ProfileIntegrator p(s, timeline, 0);
  // [0, 50): job a alone at 50%, b_a = 0.5. [50, 100): a at 50, b at 75, S = 125: b_a = 0.4, b_b = 0.6.
  ProfileTotals t = p.at(100 * kS);
  EXPECT_NEAR(t.graphics, 0.5 * 50 + 1.0 * 50, 1e-9);
  EXPECT_NEAR(t.sm, 0.5 * 0.8 * 50 + (0.4 * 0.8 + 0.6 * 1.0) * 50, 1e-9);
  EXPECT_NEAR(t.tensor, 0.5 * 0.6 * 50 + 0.4 * 0.6 * 50, 1e-9);
  EXPECT_NEAR(t.fp16, 0.5 * 0.5 * 50 + 0.4 * 0.5 * 50, 1e-9);
  EXPECT_NEAR(t.fp32, 0.5 * 0.5 * 50 + (0.4 * 0.5 + 0.6 * 0.5) * 50, 1e-9);  // both default fp32
  EXPECT_NEAR(t.dram, 0.5 * 0.4 * 50 + (0.4 * 0.4 + 0.6 * 0.5) * 50, 1e-9);
  EXPECT_NEAR(t.occupancy, 0.5 * 0.5 * 50 + (0.4 * 0.5 + 0.6 * 0.5) * 50, 1e-9);
  EXPECT_NEAR(t.pcie_tx, 75 * 2e9, 1);
  EXPECT_NEAR(t.pcie_rx, 75 * 4e9, 1);
  // NVLink TX: a's 4 GB/s, b the model's 1 GB/s, over the links that are up.
  const double total = 0.5 * 4e9 * 50 + (0.4 * 4e9 + 0.6 * 1e9) * 50;
  EXPECT_NEAR(t.nvlink_tx_total(4), total, 1);
  // Link 3 is down on [20, 40): 3 links carry a's 2 GB/s then.
  EXPECT_NEAR(t.nvlink_tx[3], 0.5e9 * 30 + 2.2e9 / 4 * 50, 1);
  EXPECT_NEAR(t.nvlink_tx[0], 0.5e9 * 30 + 2e9 / 3 * 20 + 2.2e9 / 4 * 50, 1);
  EXPECT_NEAR(t.nvlink_rx[2], 0.25e9 * 30 + 1e9 / 3 * 20 + (0.4 * 2e9 + 0.6 * 1e9) / 4 * 50, 1);
  EXPECT_FALSE(p.link_up(3, 25 * kS));
  EXPECT_TRUE(p.link_up(3, 40 * kS));
  EXPECT_TRUE(p.link_up(2, 25 * kS));
}

TEST(ProfilingModel, ReadingsDependOnlyOnTheTimeAskedFor) {
  Scenario s = testing::parse_ok(kScenario);
  GpuTimeline timeline(s, 0);
  ProfileIntegrator forward(s, timeline, 0);
  for (Micros t = 0; t <= 70 * kS; t += 7 * kS) (void)forward.at(t);
  ProfileIntegrator fresh(s, timeline, 0);
  const ProfileTotals a = forward.at(77 * kS), b = fresh.at(77 * kS);
  EXPECT_EQ(a.sm, b.sm);
  EXPECT_EQ(a.nvlink_tx[1], b.nvlink_tx[1]);
  const ProfileTotals back = forward.at(10 * kS);  // backwards restarts from 0
  EXPECT_NEAR(back.graphics, 5, 1e-9);
}

TEST(ProfilingModel, CountersResetOnDriverReload) {
  Scenario s = testing::parse_ok(kScenario);
  GpuTimeline timeline(s, 0);
  ProfileIntegrator p(s, timeline, 0);
  EXPECT_EQ(p.nvlink_errors(1, NvlinkErrorType::crc, 29 * kS), 0u);
  EXPECT_EQ(p.nvlink_errors(1, NvlinkErrorType::crc, 30 * kS), 5u);
  EXPECT_EQ(p.nvlink_errors(1, NvlinkErrorType::replay, 70 * kS), 2u);
  EXPECT_EQ(p.nvlink_errors(0, NvlinkErrorType::crc, 70 * kS), 0u);
  EXPECT_EQ(p.nvlink_errors(1, NvlinkErrorType::crc, 80 * kS), 0u);  // reloaded at 80
  // Link 0 TX before the reload: 0.5e9 * 20 + 2e9/3 * 20 + 0.5e9 * 10 + 0.55e9 * 20 bytes, in KiB.
  const double before = 0.5e9 * 20 + 2e9 / 3 * 20 + 0.5e9 * 10 + 0.55e9 * 20;
  EXPECT_EQ(p.nvlink_tx_kib(0, 70 * kS), static_cast<std::uint64_t>(before / 1024));
  EXPECT_EQ(p.nvlink_tx_kib(0, 90 * kS), static_cast<std::uint64_t>(0.55e9 * 10 / 1024));
}

TEST(ProfilingModel, GpmIsHopperAndNewer) {
  Scenario s = testing::parse_ok(kScenario);
  EXPECT_TRUE(gpm_supported(s.models[0]));
  EXPECT_FALSE(gpm_supported(s.models[1]));  // ga100
}

TEST(ProfilingModel, AnInstanceIntegratesOnlyItsJobsUnweighted) {
  Scenario s = testing::parse_ok(testing::mig_yaml());
  GpuTimeline timeline(s, 0);
  const std::size_t infer = s.mig.find("infer");
  ASSERT_NE(infer, kNoMigInstance);
  ProfileIntegrator only_infer(s, timeline, 0, infer);
  ProfileIntegrator whole(s, timeline, 0);
  // 20-30 s: infer's two jobs at 50 % and 30 %, its own 80 %, not 2/7 of it.
  EXPECT_NEAR(only_infer.at(30 * kS).graphics - only_infer.at(20 * kS).graphics, 0.8 * 10, 1e-9);
  EXPECT_NEAR(only_infer.at(30 * kS).sm - only_infer.at(20 * kS).sm, 0.8 * 10, 1e-9);
  // The whole GPU weighs its instances by slices: train 3 x 90, infer 2 x 80, 1 x 70, 1 x 100.
  EXPECT_NEAR(whole.at(30 * kS).graphics - whole.at(20 * kS).graphics, (2.7 + 1.6 + 0.7 + 1.0) / 7 * 10, 1e-9);
  // Before its jobs start and after the instance is gone nothing accrues.
  ProfileIntegrator small_a(s, timeline, 0, s.mig.find("small-a"));
  EXPECT_DOUBLE_EQ(small_a.at(3 * kS).graphics, 0);
  EXPECT_NEAR(small_a.at(90 * kS).graphics, 0.7 * 37, 1e-9);
}

TEST(ProfilingTruth, AveragesAndLinkBytesOverTheWindow) {
  Scenario s = testing::parse_ok(kScenario);
  Truth t = compute_truth(s, 50 * kS, 100 * kS);
  const GpuTruth& h = t.gpus[0];
  ASSERT_TRUE(h.gpm_supported);
  EXPECT_NEAR(h.profiling.graphics, 100, 1e-9);
  EXPECT_NEAR(h.profiling.sm, 100 * (0.4 * 0.8 + 0.6), 1e-9);
  EXPECT_NEAR(h.profiling.tensor, 100 * 0.4 * 0.6, 1e-9);
  EXPECT_NEAR(h.profiling.pcie_tx, 2e9 / (1024.0 * 1024.0), 1e-6);
  EXPECT_NEAR(h.profiling.nvlink_tx, 2.2e9 / (1024.0 * 1024.0), 1e-6);
  ASSERT_EQ(h.nvlink_tx_bytes.size(), 4u);
  EXPECT_NEAR(h.nvlink_tx_bytes[3], 2.2e9 / 4 * 50, 1);
  const GpuTruth& a = t.gpus[1];
  EXPECT_FALSE(a.gpm_supported);
  ASSERT_EQ(a.nvlink_tx_bytes.size(), 12u);
  EXPECT_DOUBLE_EQ(a.nvlink_tx_bytes[0], 0);  // the A100 model has no traffic of its own
  nlohmann::ordered_json j = truth_to_json(s, t);
  EXPECT_NEAR(j["gpus"][0]["profiling"]["sm_util_percent"].get<double>(), 92, 1e-9);
  EXPECT_FALSE(j["gpus"][1].contains("profiling"));
  EXPECT_EQ(j["gpus"][1]["nvlink"].size(), 12u);
  EXPECT_NEAR(j["gpus"][0]["nvlink"][3]["tx_bytes"].get<double>(), 2.2e9 / 4 * 50, 1);
}

// On a GPU in MIG mode the instances' jobs do not share the GPU's time: each instance counts its
// compute slices' share of the GPU. mig-h100.yaml from 20 to 40 s: train 0.9 on 3g, serve-b 0.5 and
// asr-c 0.3 on 2g, nb-d 0.7 and batch-e 1.0 on the two 1g instances, each keeping 70 % of its SMs
// busy.
TEST(ProfilingTruth, MigInstancesRunSideBySide) {
  auto s = load_scenario(std::string(GPUMETER_SOURCE_DIR) + "/tests/integration/scenarios/mig-h100.yaml");
  ASSERT_TRUE(s) << s.error().message;
  Truth t = compute_truth(*s, 20 * kS, 40 * kS);
  EXPECT_NEAR(t.gpus[0].profiling.graphics, 100 * (3 * 0.9 + 2 * 0.8 + 0.7 + 1.0) / 7, 1e-9);
  EXPECT_NEAR(t.gpus[0].profiling.sm, 0.7 * t.gpus[0].profiling.graphics, 1e-9);  // profile: {sm: 0.7}
}

// The integration scenarios load, and their truth says what their comments say.
TEST(ProfilingScenarios, H100AndA100) {
  auto h = load_scenario(std::string(GPUMETER_SOURCE_DIR) + "/tests/integration/scenarios/profiling-h100.yaml");
  ASSERT_TRUE(h) << h.error().message;
  Truth t = compute_truth(*h, 3 * kS, 90 * kS);
  ASSERT_EQ(t.gpus.size(), 8u);
  for (const GpuTruth& g : t.gpus) {
    EXPECT_TRUE(g.gpm_supported);
    EXPECT_EQ(g.nvlink_tx_bytes.size(), 18u);
  }
  // GPU 4: two pods at 60 % and 70 %, saturated: busy 6/13 and 7/13 of the time.
  EXPECT_NEAR(t.gpus[4].profiling.graphics, 100, 1e-9);
  EXPECT_NEAR(t.gpus[4].profiling.sm, 100 * (6.0 / 13 * 0.7 + 7.0 / 13 * 0.6), 1e-9);
  EXPECT_NEAR(t.gpus[0].profiling.tensor, 95 * 0.7, 1e-9);
  EXPECT_NEAR(t.gpus[0].profiling.nvlink_tx, 0.95 * 40e9 / (1024.0 * 1024.0), 1e-6);
  // GPU 1's link 5 is down for 20 of the 87 s; GPU 0's links all carry the same.
  EXPECT_NEAR(t.gpus[1].nvlink_tx_bytes[5], 0.95 * 40e9 / 18 * 67, 1e3);
  EXPECT_NEAR(t.gpus[0].nvlink_tx_bytes[5], 0.95 * 40e9 / 18 * 87, 1e3);
  EXPECT_DOUBLE_EQ(t.gpus[2].profiling.nvlink_tx, 0);
  EXPECT_NEAR(t.gpus[3].profiling.nvlink_rx, 0.3 * 5e9 / (1024.0 * 1024.0), 1e-6);
  EXPECT_DOUBLE_EQ(t.gpus[7].profiling.sm, 0);

  auto a = load_scenario(std::string(GPUMETER_SOURCE_DIR) + "/tests/integration/scenarios/profiling-a100.yaml");
  ASSERT_TRUE(a) << a.error().message;
  Truth ta = compute_truth(*a, 3 * kS, 90 * kS);
  for (const GpuTruth& g : ta.gpus) {
    EXPECT_FALSE(g.gpm_supported);
    EXPECT_EQ(g.nvlink_tx_bytes.size(), 12u);
  }
  EXPECT_NEAR(ta.gpus[0].nvlink_tx_bytes[7], 0.9 * 20e9 / 12 * 72, 1e3);
}

}  // namespace
}  // namespace gpumeter::sim
