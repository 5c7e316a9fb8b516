// GPM and NVLink through the built libnvidia-ml.so.1, as an NVML program calls them: the
// contract (versions, errors, per-metric status, sample order), values of constant loads,
// unsupported on A100, NVLink fields and faults.

#include <climits>
#include <cstring>
#include <memory>

#include "nvml_sim_fixture.h"

namespace gpumeter::sim {
namespace {

using NvLinkStateFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, unsigned int*);

struct Gpm {
  nvmlGpmQueryDeviceSupport_fn support = api().get<nvmlGpmQueryDeviceSupport_fn>("nvmlGpmQueryDeviceSupport");
  nvmlGpmSampleAlloc_fn alloc = api().get<nvmlGpmSampleAlloc_fn>("nvmlGpmSampleAlloc");
  nvmlGpmSampleFree_fn free = api().get<nvmlGpmSampleFree_fn>("nvmlGpmSampleFree");
  nvmlGpmSampleGet_fn get = api().get<nvmlGpmSampleGet_fn>("nvmlGpmSampleGet");
  nvmlGpmMigSampleGet_fn mig_get = api().get<nvmlGpmMigSampleGet_fn>("nvmlGpmMigSampleGet");
  nvmlGpmMetricsGet_fn metrics = api().get<nvmlGpmMetricsGet_fn>("nvmlGpmMetricsGet");
  NvLinkStateFn link_state = api().get<NvLinkStateFn>("nvmlDeviceGetNvLinkState");
};

Gpm& gpm() {
  static Gpm* g = new Gpm();
  return *g;
}

// GPUs 0 and 1: H100 SXM (GPM, 4 NVLink links here); GPU 2: A100 SXM (no GPM, 12 links);
// GPU 3: H100 PCIe (GPM, no NVLink). Constant loads, so any two samples give the same rates.
const std::string kScenario = R"(
models:
  h100:
    name: NVIDIA H100 80GB HBM3
    memory: 80GiB
    power: {limit: 700, idle: 70, max: 700}
    clocks:
      graphics: {idle: 345, max: 1980}
      sm: {idle: 345, max: 1980}
      memory: {idle: 2619, max: 2619}
      video: {idle: 765, max: 1965}
    pcie: {tx_bytes_per_second: 2GB, rx_bytes_per_second: 4GB}
    nvlink: {links: 4, speed_mbps: 25000, version: "4.0"}
  a100:
    name: NVIDIA A100-SXM4-80GB
    memory: 80GiB
    power: {limit: 400, idle: 50, max: 400}
    clocks:
      graphics: {idle: 210, max: 1410}
      sm: {idle: 210, max: 1410}
      memory: {idle: 1593, max: 1593}
      video: {idle: 795, max: 1290}
    nvlink: {links: 12, speed_mbps: 25000, version: "3.0", tx: 3GB, rx: 3GB}
  h100pcie:
    name: NVIDIA H100 PCIe
    memory: 80GiB
    power: {limit: 350, idle: 50, max: 350}
    clocks:
      graphics: {idle: 345, max: 1755}
      sm: {idle: 345, max: 1755}
      memory: {idle: 1593, max: 1593}
      video: {idle: 765, max: 1755}
gpus:
  - {model: h100}
  - {model: h100}
  - {model: a100}
  - {model: h100pcie}
jobs:
  - {name: a, gpus: [0], pid: 100, utilization: 0.5,
     profile: {sm: 0.8, tensor: 0.6, fp16: 0.5, dram: 0.4, occupancy: 0.25},
     nvlink: {tx: 4GB, rx: 2GB}}
  - {name: b, gpus: [2], pid: 200, utilization: 1}
  - {name: c, gpus: [3], pid: 300, utilization: 0.5}
faults:
  - {kind: nvlink_down, gpu: 0, link: 3, at: 100, duration: 100}
  - {kind: nvlink_errors, gpu: 0, link: 1, at: 150, type: crc, count: 5}
  - {kind: nvlink_errors, gpu: 0, link: 1, at: 160, type: recovery, count: 3}
  - {kind: driver_reload, at: 300}
)";

constexpr double kMiB = 1024.0 * 1024.0;

class NvmlGpm : public NvmlSim {
 protected:
  nvmlGpmSample_t alloc() {
    nvmlGpmSample_t s = nullptr;
    EXPECT_EQ(gpm().alloc(&s), NVML_SUCCESS);
    return s;
  }
  // Two samples of `device` 0.5 s of scenario time apart (the fixture runs 10x real time).
  void two_samples(nvmlDevice_t device, nvmlGpmSample_t a, nvmlGpmSample_t b) {
    ASSERT_EQ(gpm().get(device, a), NVML_SUCCESS);
    std::this_thread::sleep_for(50ms);
    ASSERT_EQ(gpm().get(device, b), NVML_SUCCESS);
  }
  std::unique_ptr<nvmlGpmMetricsGet_t> request(nvmlGpmSample_t a, nvmlGpmSample_t b,
                                               std::initializer_list<unsigned> ids) {
    auto g = std::make_unique<nvmlGpmMetricsGet_t>();
    std::memset(g.get(), 0, sizeof(*g));
    g->version = NVML_GPM_METRICS_GET_VERSION;
    g->sample1 = a;
    g->sample2 = b;
    for (unsigned id : ids) g->metrics[g->numMetrics++].metricId = id;
    return g;
  }
};

TEST_F(NvmlGpm, SupportIsHopperAndNewerAndChecksTheVersion) {
  ASSERT_EQ(start(kScenario, 10), NVML_SUCCESS);
  nvmlGpmSupport_t s{NVML_GPM_SUPPORT_VERSION, 7};
  EXPECT_EQ(gpm().support(handle(0), &s), NVML_SUCCESS);
  EXPECT_EQ(s.isSupportedDevice, 1u);
  s = {NVML_GPM_SUPPORT_VERSION, 7};
  EXPECT_EQ(gpm().support(handle(2), &s), NVML_SUCCESS);
  EXPECT_EQ(s.isSupportedDevice, 0u);
  s = {NVML_GPM_SUPPORT_VERSION, 7};
  EXPECT_EQ(gpm().support(handle(3), &s), NVML_SUCCESS);
  EXPECT_EQ(s.isSupportedDevice, 1u);
  s = {2, 7};
  EXPECT_EQ(gpm().support(handle(0), &s), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  EXPECT_EQ(gpm().support(handle(0), nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(NvmlGpm, UnsupportedDevicesAnswerNotSupported) {
  ASSERT_EQ(start(kScenario, 10), NVML_SUCCESS);
  nvmlGpmSample_t s = alloc();
  EXPECT_EQ(gpm().get(handle(2), s), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(gpm().mig_get(handle(2), 1, s), NVML_ERROR_NOT_SUPPORTED);
  // Not in MIG mode: no GPU instance to sample (MIG per instance: nvml_sim_mig_gpm_test.cpp).
  EXPECT_EQ(gpm().mig_get(handle(0), 1, s), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(gpm().free(s), NVML_SUCCESS);
}

TEST_F(NvmlGpm, SampleBuffersAreCheckedAndFreedOnce) {
  EXPECT_EQ(gpm().alloc(nullptr), NVML_ERROR_UNINITIALIZED);
  ASSERT_EQ(start(kScenario, 10), NVML_SUCCESS);
  EXPECT_EQ(gpm().alloc(nullptr), NVML_ERROR_INVALID_ARGUMENT);
  nvmlGpmSample_t s = alloc();
  int not_a_sample = 0;
  EXPECT_EQ(gpm().get(handle(0), reinterpret_cast<nvmlGpmSample_t>(&not_a_sample)), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gpm().free(reinterpret_cast<nvmlGpmSample_t>(&not_a_sample)), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gpm().free(s), NVML_SUCCESS);
  EXPECT_EQ(gpm().free(s), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(NvmlGpm, MetricsOfAConstantLoad) {
  ASSERT_EQ(start(kScenario, 10, 10), NVML_SUCCESS);
  nvmlGpmSample_t a = alloc(), b = alloc();
  two_samples(handle(0), a, b);
  auto g = request(a, b,
                   {NVML_GPM_METRIC_GRAPHICS_UTIL, NVML_GPM_METRIC_SM_UTIL, NVML_GPM_METRIC_SM_OCCUPANCY,
                    NVML_GPM_METRIC_ANY_TENSOR_UTIL, NVML_GPM_METRIC_DRAM_BW_UTIL, NVML_GPM_METRIC_FP64_UTIL,
                    NVML_GPM_METRIC_FP32_UTIL, NVML_GPM_METRIC_FP16_UTIL, NVML_GPM_METRIC_PCIE_TX_PER_SEC,
                    NVML_GPM_METRIC_PCIE_RX_PER_SEC, NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
                    NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, 62 /* L0 RX */, 63 /* L0 TX */});
  ASSERT_EQ(gpm().metrics(g.get()), NVML_SUCCESS);
  const double expected[] = {
      50,         40,         12.5,          30,          20, 0, 25, 25, 0.5 * 2e9 / kMiB, 0.5 * 4e9 / kMiB,
      1e9 / kMiB, 2e9 / kMiB, 0.25e9 / kMiB, 0.5e9 / kMiB};
  for (unsigned i = 0; i < g->numMetrics; ++i) {
    EXPECT_EQ(g->metrics[i].nvmlReturn, NVML_SUCCESS) << g->metrics[i].metricId;
    EXPECT_NEAR(g->metrics[i].value, expected[i], 1e-6 * std::max(1.0, expected[i])) << g->metrics[i].metricId;
  }
  ASSERT_NE(g->metrics[1].metricInfo.shortName, nullptr);
  EXPECT_STREQ(g->metrics[1].metricInfo.unit, "%");
  EXPECT_STREQ(g->metrics[8].metricInfo.unit, "MiB/s");
  EXPECT_EQ(gpm().free(a), NVML_SUCCESS);
  EXPECT_EQ(gpm().free(b), NVML_SUCCESS);
}

TEST_F(NvmlGpm, PerMetricStatus) {
  ASSERT_EQ(start(kScenario, 10, 10), NVML_SUCCESS);
  nvmlGpmSample_t a = alloc(), b = alloc();
  two_samples(handle(0), a, b);
  // INTEGER_UTIL is not modelled; 0 and 400 are no metric; link 5 does not exist on 4 links.
  auto g = request(a, b, {NVML_GPM_METRIC_INTEGER_UTIL, 0, 400, 62 + 2 * 5, NVML_GPM_METRIC_SM_UTIL});
  ASSERT_EQ(gpm().metrics(g.get()), NVML_SUCCESS);
  EXPECT_EQ(g->metrics[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(g->metrics[1].nvmlReturn, NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(g->metrics[2].nvmlReturn, NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(g->metrics[3].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(g->metrics[4].nvmlReturn, NVML_SUCCESS);
  EXPECT_NEAR(g->metrics[4].value, 40, 1e-9);
}

TEST_F(NvmlGpm, MetricsGetChecksItsArguments) {
  ASSERT_EQ(start(kScenario, 10, 10), NVML_SUCCESS);
  nvmlGpmSample_t a = alloc(), b = alloc(), other = alloc(), empty = alloc();
  two_samples(handle(0), a, b);
  ASSERT_EQ(gpm().get(handle(1), other), NVML_SUCCESS);
  EXPECT_EQ(gpm().metrics(nullptr), NVML_ERROR_INVALID_ARGUMENT);
  auto g = request(a, b, {NVML_GPM_METRIC_SM_UTIL});
  g->version = 2;
  EXPECT_EQ(gpm().metrics(g.get()), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  g = request(a, b, {NVML_GPM_METRIC_SM_UTIL});
  g->numMetrics = GPUMETER_NVML_GPM_METRIC_MAX + 1;
  EXPECT_EQ(gpm().metrics(g.get()), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gpm().metrics(request(a, empty, {NVML_GPM_METRIC_SM_UTIL}).get()), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gpm().metrics(request(a, other, {NVML_GPM_METRIC_SM_UTIL}).get()), NVML_ERROR_INVALID_ARGUMENT);
  // sample1 must be the older: reversed, there is no interval.
  EXPECT_EQ(gpm().metrics(request(b, a, {NVML_GPM_METRIC_SM_UTIL}).get()), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gpm().metrics(request(a, b, {NVML_GPM_METRIC_SM_UTIL}).get()), NVML_SUCCESS);
  for (auto s : {a, b, other, empty}) EXPECT_EQ(gpm().free(s), NVML_SUCCESS);
  EXPECT_EQ(gpm().metrics(request(a, b, {NVML_GPM_METRIC_SM_UTIL}).get()), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(NvmlGpm, SamplesWithinOneRefreshGiveNoInterval) {
  // A thousandth of real time: two samples taken at once fall in the same 100 ms refresh.
  ASSERT_EQ(start(kScenario, 10, 0.001), NVML_SUCCESS);
  nvmlGpmSample_t a = alloc(), b = alloc();
  ASSERT_EQ(gpm().get(handle(0), a), NVML_SUCCESS);
  ASSERT_EQ(gpm().get(handle(0), b), NVML_SUCCESS);
  EXPECT_EQ(gpm().metrics(request(a, b, {NVML_GPM_METRIC_SM_UTIL}).get()), NVML_ERROR_INVALID_ARGUMENT);
}

nvmlFieldValue_t field(unsigned id, unsigned scope) {
  nvmlFieldValue_t v{};
  v.fieldId = id;
  v.scopeId = scope;
  return v;
}

TEST_F(NvmlGpm, NvlinkFieldsStateAndFaults) {
  // Scenario time 155 s, nearly frozen: link 3 is down, 5 CRC errors on link 1.
  ASSERT_EQ(start(kScenario, 155, 0.001), NVML_SUCCESS);
  nvmlFieldValue_t v[] = {field(NVML_FI_DEV_NVLINK_LINK_COUNT, 0),
                          field(NVML_FI_DEV_NVLINK_GET_STATE, 3),
                          field(NVML_FI_DEV_NVLINK_GET_STATE, 2),
                          field(NVML_FI_DEV_NVLINK_GET_SPEED, 3),
                          field(NVML_FI_DEV_NVLINK_GET_SPEED, 2),
                          field(NVML_FI_DEV_NVLINK_ERROR_DL_CRC, 1),
                          field(NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY, 1),
                          field(NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY, 1),
                          field(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 0),
                          field(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 3),
                          field(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, UINT_MAX),
                          field(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, 4),
                          field(NVML_FI_DEV_NVLINK_GET_VERSION, 0)};
  const int n = sizeof(v) / sizeof(v[0]);
  ASSERT_EQ(api().fields(handle(0), n, v), NVML_SUCCESS);
  for (int i = 0; i < n; ++i) {
    if (i != 11) {
      EXPECT_EQ(v[i].nvmlReturn, NVML_SUCCESS) << i;
    }
  }
  EXPECT_EQ(v[0].value.uiVal, 4u);
  EXPECT_EQ(v[1].value.uiVal, NVML_NVLINK_STATE_INACTIVE);
  EXPECT_EQ(v[2].value.uiVal, NVML_NVLINK_STATE_ACTIVE);
  EXPECT_EQ(v[3].value.uiVal, 0u);
  EXPECT_EQ(v[4].value.uiVal, 25000u);
  EXPECT_EQ(v[5].value.ullVal, 5u);
  EXPECT_EQ(v[6].value.ullVal, 0u);  // at 160
  EXPECT_EQ(v[7].value.ullVal, 0u);
  // Job a sends 0.5 * 4 GB/s: 4 links for 100 s, then 3 while link 3 is down.
  const double now = static_cast<double>(scenario_now()) / 1e6;
  const double link0 = 0.5e9 * 100 + 2e9 / 3 * (now - 100);
  EXPECT_NEAR(static_cast<double>(v[8].value.ullVal), link0 / 1024, 2e9 / 3 * 0.01 / 1024 + 1);
  EXPECT_EQ(v[9].value.ullVal, static_cast<unsigned long long>(0.5e9 * 100 / 1024));  // frozen while down
  EXPECT_NEAR(static_cast<double>(v[10].value.ullVal), 2e9 * now / 1024, 2e9 * 0.01 / 1024 + 4);
  EXPECT_EQ(v[11].nvmlReturn, NVML_ERROR_INVALID_ARGUMENT);  // link 4 of 4
  EXPECT_EQ(v[12].value.uiVal, 6u);                          // NVML_NVLINK_VERSION_4_0
  unsigned state = 9;
  EXPECT_EQ(gpm().link_state(handle(0), 3, &state), NVML_SUCCESS);
  EXPECT_EQ(state, NVML_FEATURE_DISABLED);
  EXPECT_EQ(gpm().link_state(handle(0), 0, &state), NVML_SUCCESS);
  EXPECT_EQ(state, NVML_FEATURE_ENABLED);
  EXPECT_EQ(gpm().link_state(handle(0), 4, &state), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gpm().link_state(handle(3), 0, &state), NVML_ERROR_NOT_SUPPORTED);  // H100 PCIe
  nvmlFieldValue_t none[] = {field(NVML_FI_DEV_NVLINK_LINK_COUNT, 0), field(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 0)};
  ASSERT_EQ(api().fields(handle(3), 2, none), NVML_SUCCESS);
  EXPECT_EQ(none[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(none[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
}

TEST_F(NvmlGpm, NvlinkCountersResetOnDriverReload) {
  ASSERT_EQ(start(kScenario, 310, 0.001), NVML_SUCCESS);
  nvmlFieldValue_t v[] = {field(NVML_FI_DEV_NVLINK_ERROR_DL_CRC, 1), field(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 0),
                          field(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, UINT_MAX)};
  ASSERT_EQ(api().fields(handle(2), 1, v), NVML_SUCCESS);  // the A100: NVLink without GPM
  EXPECT_EQ(v[0].nvmlReturn, NVML_SUCCESS);
  EXPECT_EQ(v[0].value.ullVal, 0u);
  ASSERT_EQ(api().fields(handle(0), 3, v), NVML_SUCCESS);
  EXPECT_EQ(v[0].value.ullVal, 0u);  // the 5 errors of 150 s were before the reload at 300 s
  const double since = static_cast<double>(scenario_now()) / 1e6 - 300;
  EXPECT_NEAR(static_cast<double>(v[1].value.ullVal), 0.5e9 * since / 1024, 0.5e9 * 0.01 / 1024 + 1);
  EXPECT_NEAR(static_cast<double>(v[2].value.ullVal), 1e9 * since / 1024, 1e9 * 0.01 / 1024 + 4);
}

}  // namespace
}  // namespace gpumeter::sim
