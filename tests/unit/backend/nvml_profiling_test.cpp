// GPM, NVLink and MIG in the NVML backend, against the scripted NVML built from the header's
// contract: the sample pair, what is absent and when, per-field and per-metric statuses, MIG
// enumeration and re-partitions.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>

#include "backend/nvml/nvml_backend.h"
#include "fake_clock.h"
#include "fake_nvml.h"

namespace gpumeter {
namespace {

using namespace std::chrono_literals;
using fake::kWholeGpu;
using fake::script;

constexpr size_t kMetrics = 12;  // the GPM metrics the agent reads, each asked alone

class ProfilingTest : public ::testing::Test {
 protected:
  void SetUp() override { fake::reset(); }
  std::unique_ptr<NvmlBackend> make(std::set<std::string> hidden = {}) {
    NvmlBackendOptions o;
    o.clock = &clock_;
    o.reinit_lock_timeout = 50ms;
    auto b = NvmlBackend::create(std::make_unique<fake::FakeSymbols>(std::move(hidden)), o, log_);
    EXPECT_TRUE(b->status().up) << b->status().detail;
    return b;
  }
  DeviceReading collect(NvmlBackend& b, unsigned gpu = 0) {
    auto r = b.collect(gpu);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    clock_.advance(5s);
    return r.ok() ? *r : DeviceReading{};
  }
  std::uint64_t call_errors(const NvmlBackend& b, const std::string& call) {
    std::uint64_t n = 0;
    for (const auto& [key, count] : b.status().counters.call_errors) {
      if (std::get<1>(key) == call) n += count;
    }
    return n;
  }
  std::uint64_t all_call_errors(const NvmlBackend& b) {
    std::uint64_t n = 0;
    for (const auto& [key, count] : b.status().counters.call_errors) n += count;
    return n;
  }
  testing::FakeClock clock_;
  Logger log_{LogLevel::kError};
};

void script_gpm(unsigned gpu, unsigned gi = kWholeGpu) {
  script().gpm_supported[gpu] = true;
  script().gpm_values[{gpu, gi}] = {
      {NVML_GPM_METRIC_GRAPHICS_UTIL, 80},
      {NVML_GPM_METRIC_SM_UTIL, 75},
      {NVML_GPM_METRIC_SM_OCCUPANCY, 40},
      {NVML_GPM_METRIC_ANY_TENSOR_UTIL, 50},
      {NVML_GPM_METRIC_DRAM_BW_UTIL, 30},
      {NVML_GPM_METRIC_FP64_UTIL, 1},
      {NVML_GPM_METRIC_FP32_UTIL, 20},
      {NVML_GPM_METRIC_FP16_UTIL, 45},
      {NVML_GPM_METRIC_PCIE_TX_PER_SEC, 100},
      {NVML_GPM_METRIC_PCIE_RX_PER_SEC, 200},
      {NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, 1000},
      {NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, 2000},
  };
}

// ---- GPM ----

TEST_F(ProfilingTest, GpmHasNoValueAtTheFirstCollectionThenOneBetweenEachPairOfCollections) {
  script_gpm(0);
  auto b = make();
  EXPECT_FALSE(collect(*b).profiling.has_value()) << "one sample only: nothing to compare it with";
  auto r = collect(*b);
  ASSERT_TRUE(r.profiling.has_value());
  const ProfilingReading& p = *r.profiling;
  EXPECT_DOUBLE_EQ(*p.graphics_active_ratio, 0.80);
  EXPECT_DOUBLE_EQ(*p.sm_active_ratio, 0.75);
  EXPECT_DOUBLE_EQ(*p.sm_occupancy_ratio, 0.40);
  EXPECT_DOUBLE_EQ(*p.tensor_active_ratio, 0.50);
  EXPECT_DOUBLE_EQ(*p.dram_active_ratio, 0.30);
  EXPECT_DOUBLE_EQ(*p.fp64_active_ratio, 0.01);
  EXPECT_DOUBLE_EQ(*p.fp32_active_ratio, 0.20);
  EXPECT_DOUBLE_EQ(*p.fp16_active_ratio, 0.45);
  EXPECT_DOUBLE_EQ(*p.pcie_transmit_bytes_per_second, 100.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(*p.pcie_receive_bytes_per_second, 200.0 * 1024 * 1024);
  // GPU 0 has no NVLink: GPM's NVLink rates (0 on a real one) are left out.
  EXPECT_FALSE(p.nvlink_transmit_bytes_per_second.has_value());
  EXPECT_FALSE(p.nvlink_receive_bytes_per_second.has_value());
  EXPECT_TRUE(collect(*b).profiling.has_value());
  EXPECT_TRUE(collect(*b).profiling.has_value());
  // Each collection took one sample and compared it with the previous collection's: the two
  // samples alternate, no collection waited for a second sample. Each metric is asked alone,
  // as DCGM asks.
  ASSERT_EQ(script().metrics_calls.size(), 3 * kMetrics);
  for (size_t i = 0; i < script().metrics_calls.size(); ++i) {
    EXPECT_EQ(script().metrics_calls[i].first, static_cast<int>(i / kMetrics));
    EXPECT_EQ(script().metrics_calls[i].second, static_cast<int>(i / kMetrics) + 1);
    EXPECT_EQ(script().metrics_calls[i].metrics, 1u);
  }
  EXPECT_EQ(script().calls["nvmlGpmSampleGet"], 4);
  EXPECT_EQ(script().gpm_allocated, 2);
  EXPECT_EQ(script().calls["nvmlGpmQueryDeviceSupport"], 1) << "support is probed once";
}

TEST_F(ProfilingTest, GpmNvlinkRatesOnAGpuWithNvlinkWhateverTheNvlinkCollector) {
  script_gpm(0);
  script().links[0] = {fake::FakeLink{1, 25781, 1000, 2000, 0, 0, 0}};
  auto b = make();
  const CollectorSet groups = CollectorSet::all().set(CollectorId::kNvlink, false);
  ASSERT_TRUE(b->collect(0, CollectScope::kFull, groups).ok());
  clock_.advance(5s);
  auto r = b->collect(0, CollectScope::kFull, groups);  // the link count is read for GPM
  ASSERT_TRUE(r.ok() && r->profiling.has_value());
  EXPECT_DOUBLE_EQ(*r->profiling->nvlink_transmit_bytes_per_second, 1000.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(*r->profiling->nvlink_receive_bytes_per_second, 2000.0 * 1024 * 1024);
  EXPECT_TRUE(r->nvlinks.empty()) << "the nvlink collector's own series are not read";
}

TEST_F(ProfilingTest, GpmUnsupportedLeavesTheMetricsAbsentNotZero) {
  script_gpm(0);
  script().gpm_supported[0] = false;  // an A100: the probe says no
  auto b = make();
  for (int round = 0; round < 3; ++round) EXPECT_FALSE(collect(*b).profiling.has_value());
  EXPECT_EQ(script().calls["nvmlGpmQueryDeviceSupport"], 1);
  EXPECT_EQ(script().calls["nvmlGpmSampleGet"], 0);
  EXPECT_EQ(script().gpm_allocated, 0);
  EXPECT_EQ(all_call_errors(*b), 0u);
}

TEST_F(ProfilingTest, WithoutTheGpmEntryPointsNothingIsAsked) {
  script_gpm(0);
  auto b = make({"nvmlGpmMetricsGet"});
  for (int round = 0; round < 2; ++round) EXPECT_FALSE(collect(*b).profiling.has_value());
  EXPECT_EQ(script().calls["nvmlGpmQueryDeviceSupport"], 0);
  EXPECT_EQ(script().calls["nvmlGpmSampleGet"], 0);
}

TEST_F(ProfilingTest, AMetricTheDriverDidNotAnswerIsLeftUnset) {
  script_gpm(0);
  script().gpm_metric_rc[NVML_GPM_METRIC_SM_OCCUPANCY] = NVML_ERROR_NOT_SUPPORTED;
  script().gpm_metric_rc[NVML_GPM_METRIC_FP64_UTIL] = NVML_ERROR_UNKNOWN;
  auto b = make();
  collect(*b);
  auto r = collect(*b);
  ASSERT_TRUE(r.profiling.has_value());
  EXPECT_FALSE(r.profiling->sm_occupancy_ratio.has_value());
  EXPECT_FALSE(r.profiling->fp64_active_ratio.has_value());
  EXPECT_DOUBLE_EQ(*r.profiling->sm_active_ratio, 0.75);
  EXPECT_DOUBLE_EQ(*r.profiling->fp32_active_ratio, 0.20);
}

TEST_F(ProfilingTest, AFailedSampleStartsANewPair) {
  script_gpm(0);
  auto b = make();
  collect(*b);
  EXPECT_TRUE(collect(*b).profiling.has_value());
  script().rc["nvmlGpmSampleGet"] = NVML_ERROR_UNKNOWN;
  EXPECT_FALSE(collect(*b).profiling.has_value());
  EXPECT_EQ(call_errors(*b, "nvmlGpmSampleGet"), 1u);
  script().rc.erase("nvmlGpmSampleGet");
  EXPECT_FALSE(collect(*b).profiling.has_value()) << "the first sample of the new pair";
  EXPECT_TRUE(collect(*b).profiling.has_value());
  // Never a pair around the failed sample: samples 0-1, then 2-3 (the failed call took none).
  ASSERT_EQ(script().metrics_calls.size(), 2 * kMetrics);
  EXPECT_EQ(script().metrics_calls[kMetrics].first, 2);
  EXPECT_EQ(script().metrics_calls[kMetrics].second, 3);
  EXPECT_EQ(script().calls["nvmlGpmMetricsGet"], static_cast<int>(2 * kMetrics));
}

TEST_F(ProfilingTest, SamplesAreFreedAtShutdown) {
  script_gpm(0);
  script_gpm(1);
  {
    auto b = make();
    collect(*b, 0);
    collect(*b, 1);
    EXPECT_EQ(script().gpm_allocated, 4);
    EXPECT_EQ(script().gpm_freed, 0);
  }
  EXPECT_EQ(script().gpm_freed, 4);
}

TEST_F(ProfilingTest, SamplesAreFreedAcrossAReinitializationAndThePairStartsAgain) {
  script_gpm(0);
  auto b = make();
  collect(*b);
  EXPECT_TRUE(collect(*b).profiling.has_value());
  script().all_rc = NVML_ERROR_LIB_RM_VERSION_MISMATCH;
  EXPECT_FALSE(b->collect(0).ok());
  EXPECT_EQ(script().gpm_freed, 0);
  script().all_rc.reset();
  // The next collection re-initializes NVML first.
  EXPECT_FALSE(collect(*b).profiling.has_value()) << "a new library instance: a new pair";
  EXPECT_EQ(script().shutdowns, 1);
  EXPECT_EQ(script().gpm_freed, 2) << "freed before nvmlShutdown";
  EXPECT_TRUE(collect(*b).profiling.has_value());
  EXPECT_EQ(script().calls["nvmlGpmQueryDeviceSupport"], 2) << "probed again after the re-initialization";
  EXPECT_EQ(script().gpm_allocated, 4);
}

// ---- NVLink ----

TEST_F(ProfilingTest, NvlinkFieldsPerLinkInBaseUnits) {
  script().links[0] = {fake::FakeLink{1, 25781, 1000, 2000, 3, 4, 5}, fake::FakeLink{0, 0, 10, 20, 0, 0, 0}};
  script().field_rc[{NVML_FI_DEV_NVLINK_ERROR_DL_CRC, 1}] = NVML_ERROR_NOT_SUPPORTED;
  script().field_rc[{NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, 1}] = NVML_ERROR_UNKNOWN;
  auto b = make();
  auto r = collect(*b);
  ASSERT_EQ(r.nvlinks.size(), 2u);
  const NvlinkReading& l0 = r.nvlinks[0];
  EXPECT_EQ(l0.link, 0u);
  EXPECT_EQ(l0.active, true);
  EXPECT_DOUBLE_EQ(*l0.speed_bytes_per_second, 25781e6);
  EXPECT_DOUBLE_EQ(*l0.transmit_bytes, 1000.0 * 1024);
  EXPECT_DOUBLE_EQ(*l0.receive_bytes, 2000.0 * 1024);
  EXPECT_EQ(l0.errors, (std::vector<LabeledValue>{{"replay", 3}, {"recovery", 4}, {"crc", 5}}));
  const NvlinkReading& l1 = r.nvlinks[1];
  EXPECT_EQ(l1.link, 1u);
  EXPECT_EQ(l1.active, false);
  EXPECT_DOUBLE_EQ(*l1.transmit_bytes, 10.0 * 1024);
  EXPECT_FALSE(l1.receive_bytes.has_value()) << "its field failed: left out, the others kept";
  EXPECT_EQ(l1.errors, (std::vector<LabeledValue>{{"replay", 0}, {"recovery", 0}}));
  // A field's own status is not a failed call.
  EXPECT_EQ(all_call_errors(*b), 0u);
  EXPECT_EQ(script().calls["nvmlDeviceGetFieldValues"], 4) << "the link count, the device's fields, one per link";
  collect(*b);
  EXPECT_EQ(script().calls["nvmlDeviceGetFieldValues"], 7) << "the count is of the slow class";
}

TEST_F(ProfilingTest, NoNvlinkMeansNoLinks) {
  auto b = make();
  EXPECT_TRUE(collect(*b).nvlinks.empty());
  EXPECT_TRUE(collect(*b).nvlinks.empty());
}

TEST_F(ProfilingTest, TheLinkCountIsOfTheSlowClassAndTheCountersAreReadEveryCollection) {
  script().links[0] = {fake::FakeLink{}, fake::FakeLink{}};
  auto b = make();
  EXPECT_EQ(collect(*b).nvlinks.size(), 2u);
  script().links[0].push_back(fake::FakeLink{});
  script().links[0][0].tx_kib = 77;
  auto r = collect(*b);
  EXPECT_EQ(r.nvlinks.size(), 2u) << "the count is served from the last read until 30 s passed";
  EXPECT_DOUBLE_EQ(*r.nvlinks[0].transmit_bytes, 77.0 * 1024) << "counters are read at every collection";
  clock_.advance(30s);
  EXPECT_EQ(collect(*b).nvlinks.size(), 3u);
}

TEST_F(ProfilingTest, AFailedNvlinkCallIsCountedAndLeavesTheLinkOut) {
  script().links[0] = {fake::FakeLink{}};
  auto b = make();
  collect(*b);
  script().rc["nvmlDeviceGetFieldValues"] = NVML_ERROR_UNKNOWN;
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->nvlinks.empty());
  EXPECT_GE(call_errors(*b, "nvmlDeviceGetFieldValues"), 1u);
}

// ---- MIG ----

// An H100 split 3g + 2g + 1c.3g (a compute instance of one slice in a 3-slice GPU instance),
// with an empty slot between them.
void script_mig(unsigned gpu) {
  script().mig_capable[gpu] = true;
  script().mig_mode[gpu] = NVML_DEVICE_MIG_ENABLE;
  script().profiles = fake::h100_profiles();
  auto& slots = script().mig[gpu];
  slots.clear();
  slots.push_back(fake::FakeMig{"MIG-aaaa", 1, 0, 9, 3, 3, 40ULL << 30, 5ULL << 30, {{101, 5ULL << 30}}});
  slots.push_back(std::nullopt);
  slots.push_back(fake::FakeMig{"MIG-bbbb", 5, 0, 14, 2, 2, 20ULL << 30, 0, {}});
  slots.push_back(fake::FakeMig{"MIG-cccc", 2, 1, 9, 3, 1, 40ULL << 30, 1ULL << 30, {{102, 1ULL << 30}}});
}

TEST_F(ProfilingTest, MigInstancesAreEnumeratedWithTheirProfilesAndSkipEmptySlots) {
  script_mig(0);
  // A second compute instance (2 slices) in GPU instance 2.
  script().mig[0].push_back(fake::FakeMig{"MIG-ffff", 2, 3, 9, 3, 2, 40ULL << 30, 1ULL << 30, {}});
  auto b = make();
  auto r = collect(*b);
  EXPECT_EQ(r.mig.enabled, true);
  EXPECT_EQ(r.mig.slices, 7u) << "the slices of the whole-GPU profile";
  ASSERT_EQ(r.mig.instances.size(), 4u);
  EXPECT_EQ(r.mig.instances[3].profile, "2c.3g.40gb");
  EXPECT_EQ(r.mig.instances[3].compute_instance, 3u);
  const MigInstanceReading& a = r.mig.instances[0];
  EXPECT_EQ(a.uuid, "MIG-aaaa");
  EXPECT_EQ(a.gpu_instance, 1u);
  EXPECT_EQ(a.compute_instance, 0u);
  EXPECT_EQ(a.profile, "3g.40gb");
  EXPECT_EQ(a.slices, 3u);
  EXPECT_DOUBLE_EQ(*a.memory_total_bytes, 40.0 * (1ULL << 30));
  EXPECT_DOUBLE_EQ(*a.memory_used_bytes, 5.0 * (1ULL << 30));
  ASSERT_TRUE(a.processes.has_value());
  ASSERT_EQ(a.processes->size(), 1u);
  EXPECT_EQ((*a.processes)[0].pid, 101u);
  EXPECT_EQ(r.mig.instances[1].uuid, "MIG-bbbb");
  EXPECT_EQ(r.mig.instances[1].profile, "2g.20gb");
  EXPECT_EQ(r.mig.instances[1].slices, 2u);
  EXPECT_EQ(r.mig.instances[2].profile, "1c.3g.40gb");
  EXPECT_EQ(r.mig.instances[2].gpu_instance, 2u);
  EXPECT_EQ(r.mig.instances[2].compute_instance, 1u);
  EXPECT_EQ(r.mig.instances[2].slices, 3u) << "the GPU instance's share";
  EXPECT_EQ(all_call_errors(*b), 0u) << "an empty slot (NOT_FOUND) is no error";
  EXPECT_EQ(script().calls["nvmlDeviceGetGpuInstanceById"], 3) << "once per GPU instance, not per compute instance";
  // The profiles are read once per parent.
  const int profile_calls = script().calls["nvmlDeviceGetGpuInstanceProfileInfoV"];
  collect(*b);
  EXPECT_EQ(script().calls["nvmlDeviceGetGpuInstanceProfileInfoV"], profile_calls);
}

// Without CAP_SYS_ADMIN the GPU instance query is refused, and nvml.h says event waits then report
// "only the events which affect all the instances": the wait is named as not permitted too. An Xid
// that does arrive from inside an instance carries its GPU instance.
TEST_F(ProfilingTest, ARefusedGpuInstanceQueryNamesTheEventWaitAndXidsKeepTheirInstance) {
  script_mig(0);
  script().gpu_rc[{"nvmlDeviceGetGpuInstanceById", 0}] = NVML_ERROR_NO_PERMISSION;
  auto b = make();
  collect(*b);
  collect(*b, 1);
  using Refused = std::set<std::pair<unsigned, std::string>>;
  const Refused& refused = b->status().counters.not_permitted;
  EXPECT_TRUE(refused.count({0, "nvmlDeviceGetGpuInstanceById"}));
  EXPECT_TRUE(refused.count({0, "nvmlEventSetWait_v2"}));
  EXPECT_FALSE(refused.count({1, "nvmlEventSetWait_v2"})) << "GPU 1 is not in MIG mode";

  nvmlEventData_t xid{};
  xid.device = fake::handle(0);
  xid.eventType = nvmlEventTypeXidCriticalError;
  xid.eventData = 31;
  xid.gpuInstanceId = 5;
  xid.computeInstanceId = 0;
  script().wait_answers.push_back({NVML_SUCCESS, xid});
  xid.eventData = 48;
  xid.gpuInstanceId = xid.computeInstanceId = GPUMETER_NVML_WHOLE_GPU_EVENT;
  script().wait_answers.push_back({NVML_SUCCESS, xid});
  auto in_instance = b->wait_event(10ms);
  ASSERT_TRUE(in_instance.ok() && in_instance->has_value());
  EXPECT_EQ((*in_instance)->code, 31u);
  EXPECT_EQ((*in_instance)->gpu_instance, 5u);
  auto whole = b->wait_event(10ms);
  ASSERT_TRUE(whole.ok() && whole->has_value());
  EXPECT_EQ((*whole)->code, 48u);
  EXPECT_FALSE((*whole)->gpu_instance.has_value());
}

TEST_F(ProfilingTest, TheParentsNotSupportedUtilizationIsAbsentAndNeverCountedAsAnError) {
  script_mig(0);
  script().utilization_samples[0] = {{1'699'999'999'000'000, {.uiVal = 40}}};
  auto b = make();
  for (int round = 0; round < 4; ++round) {
    auto r = collect(*b);
    EXPECT_FALSE(r.device.utilization_ratio.has_value());
    EXPECT_FALSE(r.usage.utilization_samples_supported);
    EXPECT_TRUE(r.usage.utilization_samples.empty());
  }
  EXPECT_EQ(all_call_errors(*b), 0u);
  EXPECT_EQ(script().calls["nvmlDeviceGetUtilizationRates"], 1) << "remembered as unsupported";
}

TEST_F(ProfilingTest, AMigModeChangeAsksWhatWasUnsupportedAgain) {
  script_mig(0);
  auto b = make();
  EXPECT_FALSE(collect(*b).device.utilization_ratio.has_value());
  EXPECT_FALSE(collect(*b).device.utilization_ratio.has_value());
  script().mig_mode[0] = NVML_DEVICE_MIG_DISABLE;
  auto off = collect(*b);
  EXPECT_EQ(off.mig.enabled, false);
  EXPECT_TRUE(off.mig.instances.empty());
  EXPECT_FALSE(off.mig.slices.has_value());
  EXPECT_DOUBLE_EQ(collect(*b).device.utilization_ratio.value_or(-1), 0.40) << "supported again without MIG";
  EXPECT_EQ(all_call_errors(*b), 0u);
}

TEST_F(ProfilingTest, AGpuThatCannotDoMigHasNoMigMode) {
  auto b = make();
  auto r = collect(*b);
  EXPECT_FALSE(r.mig.enabled.has_value());
  EXPECT_TRUE(r.mig.instances.empty());
  collect(*b);
  EXPECT_EQ(script().calls["nvmlDeviceGetMigMode"], 1) << "NOT_SUPPORTED is remembered";
  EXPECT_EQ(script().calls["nvmlDeviceGetMaxMigDeviceCount"], 0);
}

TEST_F(ProfilingTest, WithoutTheMigEntryPointsTheMigFieldsAreLeftOut) {
  script_mig(0);
  auto b = make({"nvmlDeviceGetMigMode"});
  auto r = collect(*b);
  EXPECT_FALSE(r.mig.enabled.has_value());
  EXPECT_TRUE(r.mig.instances.empty());
  EXPECT_EQ(script().calls["nvmlDeviceGetMaxMigDeviceCount"], 0);
  const auto& missing = b->missing_symbols();
  EXPECT_EQ(std::find(missing.begin(), missing.end(), "nvmlDeviceGetMigMode"), missing.end())
      << "an older driver's lack, not worth a warning";
}

TEST_F(ProfilingTest, ANewLayoutIsPickedUpAtTheNextCollection) {
  script_mig(0);
  auto b = make();
  EXPECT_EQ(collect(*b).mig.instances.size(), 3u);
  script().mig[0][1] = fake::FakeMig{"MIG-dddd", 9, 0, 19, 1, 1, 10ULL << 30, 0, {}};
  auto r = collect(*b);
  ASSERT_EQ(r.mig.instances.size(), 4u);
  EXPECT_EQ(r.mig.instances[1].uuid, "MIG-dddd");
  EXPECT_EQ(r.mig.instances[1].profile, "1g.10gb");
}

TEST_F(ProfilingTest, GpmPerGpuInstanceWithOnePairPerInstance) {
  script_mig(0);
  script_gpm(0);
  script_gpm(0, 1);
  script_gpm(0, 5);
  script_gpm(0, 2);
  script().gpm_values[{0, 5}][NVML_GPM_METRIC_SM_UTIL] = 10;
  auto b = make();
  for (const auto& m : collect(*b).mig.instances) EXPECT_FALSE(m.profiling.has_value()) << m.uuid;
  auto r = collect(*b);
  ASSERT_EQ(r.mig.instances.size(), 3u);
  for (const auto& m : r.mig.instances) ASSERT_TRUE(m.profiling.has_value()) << m.uuid;
  EXPECT_DOUBLE_EQ(*r.mig.instances[0].profiling->sm_active_ratio, 0.75);
  EXPECT_DOUBLE_EQ(*r.mig.instances[1].profiling->sm_active_ratio, 0.10);
  // One sample per GPU instance and collection, through nvmlGpmMigSampleGet.
  EXPECT_EQ(script().calls["nvmlGpmMigSampleGet"], 6);
  EXPECT_EQ(all_call_errors(*b), 0u);
}

TEST_F(ProfilingTest, ARepartitionedGpuInstanceStartsANewPair) {
  script_mig(0);
  script_gpm(0);
  script_gpm(0, 5);
  auto b = make();
  collect(*b);
  ASSERT_TRUE(collect(*b).mig.instances[1].profiling.has_value());
  // GPU instance 5 destroyed and created again as a 1g.10gb under the same id.
  script().mig[0][2] = fake::FakeMig{"MIG-eeee", 5, 0, 19, 1, 1, 10ULL << 30, 0, {}};
  const size_t before = script().metrics_calls.size();
  auto r = collect(*b);
  EXPECT_EQ(r.mig.instances[1].uuid, "MIG-eeee");
  EXPECT_FALSE(r.mig.instances[1].profiling.has_value()) << "no rate across two different instances";
  for (size_t i = before; i < script().metrics_calls.size(); ++i) EXPECT_NE(script().metrics_calls[i].gpu_instance, 5u);
  EXPECT_TRUE(collect(*b).mig.instances[1].profiling.has_value());
}

TEST_F(ProfilingTest, AGpuInstanceGoneGivesItsSamplesBack) {
  script_mig(0);
  script_gpm(0);
  auto b = make();
  collect(*b);
  const int allocated = script().gpm_allocated;  // the device's pair and one per GPU instance
  EXPECT_EQ(allocated, 8);
  script().mig[0][2].reset();
  collect(*b);
  EXPECT_EQ(script().gpm_freed, 2);
  b.reset();
  EXPECT_EQ(script().gpm_freed, script().gpm_allocated);
}

TEST_F(ProfilingTest, MigDevicesAreSampledThroughTheirHandleWithoutTheMigSampleCall) {
  script_mig(0);
  script_gpm(0);
  script_gpm(0, 1);
  auto b = make({"nvmlGpmMigSampleGet"});
  collect(*b);
  auto r = collect(*b);
  ASSERT_TRUE(r.mig.instances[0].profiling.has_value());
  EXPECT_DOUBLE_EQ(*r.mig.instances[0].profiling->sm_active_ratio, 0.75);
  EXPECT_EQ(script().calls["nvmlGpmMigSampleGet"], 0);
}

}  // namespace
}  // namespace gpumeter
