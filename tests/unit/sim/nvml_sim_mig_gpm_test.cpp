// GPM per MIG GPU instance through the built libnvidia-ml.so.1: nvmlGpmMigSampleGet on the
// parent and nvmlGpmSampleGet on a MIG device handle integrate the instance's own jobs, not
// weighted by slices; PCIe and NVLink are not served per instance; the errors of unknown,
// destroyed and mixed instances, of a GPU not in MIG mode and of an A100.

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "mig_scenario.h"
#include "nvml_sim_fixture.h"

namespace gpumeter::sim {
namespace {

using namespace std::chrono_literals;

struct MigGpmApi {
  nvmlGpmQueryDeviceSupport_fn support = api().get<nvmlGpmQueryDeviceSupport_fn>("nvmlGpmQueryDeviceSupport");
  nvmlGpmSampleAlloc_fn alloc = api().get<nvmlGpmSampleAlloc_fn>("nvmlGpmSampleAlloc");
  nvmlGpmSampleFree_fn free = api().get<nvmlGpmSampleFree_fn>("nvmlGpmSampleFree");
  nvmlGpmSampleGet_fn get = api().get<nvmlGpmSampleGet_fn>("nvmlGpmSampleGet");
  nvmlGpmMigSampleGet_fn mig_get = api().get<nvmlGpmMigSampleGet_fn>("nvmlGpmMigSampleGet");
  nvmlGpmMetricsGet_fn metrics = api().get<nvmlGpmMetricsGet_fn>("nvmlGpmMetricsGet");
  nvmlDeviceGetMigDeviceHandleByIndex_fn by_index =
      api().get<nvmlDeviceGetMigDeviceHandleByIndex_fn>("nvmlDeviceGetMigDeviceHandleByIndex");
};

MigGpmApi& gpm() {
  static MigGpmApi* g = new MigGpmApi();
  return *g;
}

// small-b gets a second job, so its jobs ask 150 % from 10 s to 44 s.
const std::string kExtra =
    "  - {name: extra, start: 0, end: 45, gpus: [0], mig: small-b, pid: 61099, utilization: 0.5,\n"
    "     profile: {sm: 0.4, tensor: 0.2, occupancy: 0.2, fp32: 0.2}}\n";

// GPU instance ids (mig_scenario.h): train 1, infer 6, small-a 8, small-b 7; merged 5 from 45 s.
constexpr unsigned kTrain = 1, kInfer = 6, kSmallA = 8, kSmallB = 7, kMerged = 5;

class NvmlMigGpm : public NvmlSim {
 protected:
  void TearDown() override {
    for (nvmlGpmSample_t s : samples_) gpm().free(s);
    NvmlSim::TearDown();
  }
  nvmlGpmSample_t alloc() {
    nvmlGpmSample_t s = nullptr;
    EXPECT_EQ(gpm().alloc(&s), NVML_SUCCESS);
    samples_.push_back(s);
    return s;
  }
  nvmlDevice_t mig_device(unsigned index) {
    nvmlDevice_t h = nullptr;
    EXPECT_EQ(gpm().by_index(handle(0), index, &h), NVML_SUCCESS) << index;
    return h;
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
  // GRAPHICS_UTIL and SM_UTIL between two samples, each asserted to succeed.
  std::pair<double, double> graphics_and_sm(nvmlGpmSample_t a, nvmlGpmSample_t b) {
    auto g = request(a, b, {NVML_GPM_METRIC_GRAPHICS_UTIL, NVML_GPM_METRIC_SM_UTIL});
    EXPECT_EQ(gpm().metrics(g.get()), NVML_SUCCESS);
    EXPECT_EQ(g->metrics[0].nvmlReturn, NVML_SUCCESS);
    EXPECT_EQ(g->metrics[1].nvmlReturn, NVML_SUCCESS);
    return {g->metrics[0].value, g->metrics[1].value};
  }

 private:
  std::vector<nvmlGpmSample_t> samples_;
};

TEST_F(NvmlMigGpm, GpuInstanceSamplesIntegrateOnlyTheirJobs) {
  // Scenario time 30 s at 10x: every job is constant for the next few seconds.
  ASSERT_EQ(start(testing::mig_yaml(kExtra), 30, 10), NVML_SUCCESS);
  const unsigned ids[] = {kTrain, kInfer, kSmallA, kSmallB};
  nvmlGpmSample_t first[4], second[4];
  nvmlGpmSample_t whole1 = alloc(), whole2 = alloc();
  for (int i = 0; i < 4; ++i) {
    first[i] = alloc();
    second[i] = alloc();
    ASSERT_EQ(gpm().mig_get(handle(0), ids[i], first[i]), NVML_SUCCESS) << ids[i];
  }
  ASSERT_EQ(gpm().get(handle(0), whole1), NVML_SUCCESS);
  std::this_thread::sleep_for(50ms);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(gpm().mig_get(handle(0), ids[i], second[i]), NVML_SUCCESS) << ids[i];
  ASSERT_EQ(gpm().get(handle(0), whole2), NVML_SUCCESS);

  // Each instance's own activity: train 90 %, infer 50 + 30 %, small-a 70 %, small-b capped at
  // 100 % with its jobs sharing it 2:1 (batch-e sm 1, extra sm 0.4).
  const double graphics[] = {90, 80, 70, 100};
  const double sm[] = {90, 80, 70, 100 * (2.0 / 3 + 0.4 / 3)};
  for (int i = 0; i < 4; ++i) {
    auto [g, s] = graphics_and_sm(first[i], second[i]);
    EXPECT_NEAR(g, graphics[i], 1e-6) << ids[i];
    EXPECT_NEAR(s, sm[i], 1e-6) << ids[i];
  }
  auto g = request(
      first[3], second[3],
      {NVML_GPM_METRIC_ANY_TENSOR_UTIL, NVML_GPM_METRIC_SM_OCCUPANCY, NVML_GPM_METRIC_DRAM_BW_UTIL,
       NVML_GPM_METRIC_FP32_UTIL, NVML_GPM_METRIC_PCIE_TX_PER_SEC, NVML_GPM_METRIC_PCIE_RX_PER_SEC,
       NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, 62 /* NVLink L0 RX */});
  ASSERT_EQ(gpm().metrics(g.get()), NVML_SUCCESS);
  EXPECT_NEAR(g->metrics[0].value, 100 * 0.2 / 3, 1e-6);
  EXPECT_NEAR(g->metrics[1].value, 100 * (2.0 / 3 * 0.5 + 0.2 / 3), 1e-6);  // occupancy
  EXPECT_NEAR(g->metrics[2].value, 50, 1e-6);                               // DRAM 0.5 for both
  EXPECT_NEAR(g->metrics[3].value, 100 * (2.0 / 3 * 0.5 + 0.2 / 3), 1e-6);  // FP32
  for (unsigned i = 0; i < 4; ++i) EXPECT_EQ(g->metrics[i].nvmlReturn, NVML_SUCCESS) << i;
  // PCIe and NVLink belong to the whole GPU.
  for (unsigned i = 4; i < g->numMetrics; ++i) EXPECT_EQ(g->metrics[i].nvmlReturn, NVML_ERROR_NOT_SUPPORTED) << i;

  // The parent's own samples still weigh each instance by its compute slices of 7.
  auto [whole, whole_sm] = graphics_and_sm(whole1, whole2);
  EXPECT_NEAR(whole, (3 * 90 + 2 * 80 + 70 + 100) / 7.0, 1e-6);
  EXPECT_NEAR(whole_sm, (3 * 90 + 2 * 80 + 70 + sm[3]) / 7.0, 1e-6);
}

TEST_F(NvmlMigGpm, MigDeviceHandleSamplesItsGpuInstance) {
  ASSERT_EQ(start(testing::mig_yaml(), 30, 10), NVML_SUCCESS);
  nvmlDevice_t infer = mig_device(1);
  nvmlGpmSupport_t support{NVML_GPM_SUPPORT_VERSION, 7};
  ASSERT_EQ(gpm().support(infer, &support), NVML_SUCCESS);
  EXPECT_EQ(support.isSupportedDevice, 1u);
  nvmlGpmSample_t a = alloc(), b = alloc(), c = alloc();
  ASSERT_EQ(gpm().get(infer, a), NVML_SUCCESS);
  std::this_thread::sleep_for(50ms);
  ASSERT_EQ(gpm().get(infer, b), NVML_SUCCESS);
  ASSERT_EQ(gpm().mig_get(handle(0), kInfer, c), NVML_SUCCESS);
  EXPECT_NEAR(graphics_and_sm(a, b).first, 80, 1e-6);
  // A MIG device handle's sample and its GPU instance's are samples of the same instance.
  EXPECT_NEAR(graphics_and_sm(a, c).first, 80, 1e-6);
}

TEST_F(NvmlMigGpm, UnknownInstancesAndMixedSamplesAreRejected) {
  ASSERT_EQ(start(testing::mig_yaml(), 30, 10), NVML_SUCCESS);
  nvmlGpmSample_t a = alloc(), b = alloc(), other = alloc(), whole = alloc();
  // GPU instance 5 exists only from 45 s; 3 never does (small ids: 0, 2 and 4 neither).
  for (unsigned id : {0u, 2u, 3u, 4u, kMerged, 14u, 99u})
    EXPECT_EQ(gpm().mig_get(handle(0), id, a), NVML_ERROR_NOT_FOUND) << id;
  // GPU 1 is not in MIG mode: no GPU instance to sample.
  EXPECT_EQ(gpm().mig_get(handle(1), 0, a), NVML_ERROR_NOT_SUPPORTED);
  int not_a_sample = 0;
  EXPECT_EQ(gpm().mig_get(handle(0), kTrain, reinterpret_cast<nvmlGpmSample_t>(&not_a_sample)),
            NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(gpm().mig_get(handle(0), kTrain, a), NVML_SUCCESS);
  std::this_thread::sleep_for(50ms);
  ASSERT_EQ(gpm().mig_get(handle(0), kTrain, b), NVML_SUCCESS);
  ASSERT_EQ(gpm().mig_get(handle(0), kInfer, other), NVML_SUCCESS);
  ASSERT_EQ(gpm().get(handle(0), whole), NVML_SUCCESS);
  EXPECT_EQ(gpm().metrics(request(a, b, {NVML_GPM_METRIC_SM_UTIL}).get()), NVML_SUCCESS);
  // Samples of two instances, or of an instance and the whole GPU, make no interval.
  EXPECT_EQ(gpm().metrics(request(a, other, {NVML_GPM_METRIC_SM_UTIL}).get()), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(gpm().metrics(request(a, whole, {NVML_GPM_METRIC_SM_UTIL}).get()), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(NvmlMigGpm, RepartitionEndsTheDestroyedInstancesSamples) {
  // 43 s at 4x: the re-partition at 45 s is half a second of wall time away, room for the first
  // samples on a loaded machine under the sanitizers (at 44.5 s and 10x, 50 ms was not always).
  ASSERT_EQ(start(testing::mig_yaml(), 43, 4), NVML_SUCCESS);
  nvmlDevice_t small_a = mig_device(2);
  nvmlGpmSample_t before = alloc(), via_handle = alloc(), after = alloc(), merged = alloc();
  ASSERT_EQ(gpm().mig_get(handle(0), kSmallA, before), NVML_SUCCESS);
  ASSERT_EQ(gpm().get(small_a, via_handle), NVML_SUCCESS);
  sleep_until_scenario(45.6);
  ASSERT_GE(scenario_now(), 45 * kMicrosPerSecond);
  EXPECT_EQ(gpm().mig_get(handle(0), kSmallA, after), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(gpm().mig_get(handle(0), kSmallB, after), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(gpm().get(small_a, after), NVML_ERROR_INVALID_ARGUMENT);  // the handle is invalid now
  ASSERT_EQ(gpm().mig_get(handle(0), kMerged, merged), NVML_SUCCESS);
  ASSERT_EQ(gpm().mig_get(handle(0), kTrain, after), NVML_SUCCESS);
  // The destroyed instance's sample pairs with no sample of the new one.
  EXPECT_EQ(gpm().metrics(request(before, merged, {NVML_GPM_METRIC_SM_UTIL}).get()), NVML_ERROR_INVALID_ARGUMENT);
  // merged has had no job yet: idle, not absent.
  nvmlGpmSample_t merged2 = alloc();
  std::this_thread::sleep_for(50ms);
  ASSERT_EQ(gpm().mig_get(handle(0), kMerged, merged2), NVML_SUCCESS);
  EXPECT_NEAR(graphics_and_sm(merged, merged2).first, 0, 1e-9);
}

TEST_F(NvmlMigGpm, A100InMigModeHasNoGpm) {
  ASSERT_EQ(start(R"(
duration: 60
models:
  a100:
    name: NVIDIA A100-SXM4-80GB
    architecture: ga100
    memory: 81920MiB
    power: {limit: 400, idle: 50, max: 400}
    clocks:
      graphics: {idle: 210, max: 1410}
      sm: {idle: 210, max: 1410}
      memory: {idle: 1593, max: 1593}
      video: {idle: 795, max: 1290}
gpus: [{model: a100}]
mig:
  - gpu: 0
    layouts:
      - at: 0
        instances: [{name: a, profile: 3g.40gb}]
jobs:
  - {name: j, start: 0, end: 60, gpus: [0], mig: a, pid: 1, utilization: 0.5}
)",
                  10),
            NVML_SUCCESS);
  nvmlDevice_t a = mig_device(0);
  nvmlGpmSupport_t support{NVML_GPM_SUPPORT_VERSION, 7};
  ASSERT_EQ(gpm().support(a, &support), NVML_SUCCESS);
  EXPECT_EQ(support.isSupportedDevice, 0u);
  nvmlGpmSample_t s = alloc();
  EXPECT_EQ(gpm().mig_get(handle(0), 2, s), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(gpm().get(a, s), NVML_ERROR_NOT_SUPPORTED);
}

}  // namespace
}  // namespace gpumeter::sim
