// The NVML backend against a scripted NVML: the answers real drivers give that the simulator
// does not (yet) produce: errors from single calls, garbage per-process records, other record
// strides.

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "backend/nvml_backend.h"
#include "backend/nvml_internal.h"
#include "fake_nvml.h"

namespace gpumeter {
namespace {

using namespace std::chrono_literals;
using fake::script;

constexpr std::int64_t kNow = 1'700'000'000'000'000;  // the scripted wall clock, µs

class DriverBehaviourTest : public ::testing::Test {
 protected:
  void SetUp() override { fake::reset(); }
  std::unique_ptr<NvmlBackend> make(std::set<std::string> hidden = {}) {
    NvmlBackendOptions o;
    o.wall_clock_us = [] { return kNow; };
    auto b = NvmlBackend::create(std::make_unique<fake::FakeSymbols>(std::move(hidden)), o, log_);
    EXPECT_TRUE(b->status().up) << b->status().detail;
    return b;
  }
  std::uint64_t call_errors(const NvmlBackend& b, unsigned gpu, const std::string& call, const std::string& error) {
    const auto counters = b.status().counters;
    auto it = counters.call_errors.find({gpu, call, error});
    return it == counters.call_errors.end() ? 0 : it->second;
  }
  std::uint64_t dropped(const NvmlBackend& b, unsigned gpu, const std::string& reason) {
    const auto counters = b.status().counters;
    auto it = counters.dropped_records.find({gpu, reason});
    return it == counters.dropped_records.end() ? 0 : it->second;
  }
  Logger log_{LogLevel::kError};
};

// ---- 1. which errors fail a collection ----

TEST_F(DriverBehaviourTest, AnErrorFromOneQueryLeavesOnlyThatValueOutAndIsCounted) {
  auto b = make();
  script().rc["nvmlDeviceGetFanSpeed"] = NVML_ERROR_UNKNOWN;
  script().rc["nvmlDeviceGetTemperature"] = NVML_ERROR_TIMEOUT;
  script().gpu_rc[{"nvmlDeviceGetPowerUsage", 0}] = NVML_ERROR_NO_PERMISSION;
  for (int round = 1; round <= 2; ++round) {
    auto r = b->collect(0);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_FALSE(r->fan_speed_ratio.has_value());
    EXPECT_TRUE(r->temperature_celsius.empty());
    EXPECT_FALSE(r->power_watts.has_value());
    EXPECT_EQ(r->utilization_ratio, 0.4);
    EXPECT_EQ(r->power_limit_watts, 300.0);
    // Not remembered: asked again every round.
    EXPECT_EQ(script().calls["nvmlDeviceGetFanSpeed"], round);
    EXPECT_EQ(call_errors(*b, 0, "nvmlDeviceGetFanSpeed", "unknown"), static_cast<unsigned>(round));
    EXPECT_EQ(call_errors(*b, 0, "nvmlDeviceGetTemperature", "timeout"), static_cast<unsigned>(round));
    EXPECT_EQ(call_errors(*b, 0, "nvmlDeviceGetPowerUsage", "no_permission"), static_cast<unsigned>(round));
  }
  auto r1 = b->collect(1);
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->power_watts, 120.0);  // the NO_PERMISSION was GPU 0's only
  EXPECT_EQ(call_errors(*b, 1, "nvmlDeviceGetFanSpeed", "unknown"), 1u);
}

TEST_F(DriverBehaviourTest, NotSupportedIsRememberedAndNotCounted) {
  auto b = make();
  script().rc["nvmlDeviceGetFanSpeed"] = NVML_ERROR_NOT_SUPPORTED;
  ASSERT_TRUE(b->collect(0).ok());
  ASSERT_TRUE(b->collect(0).ok());
  EXPECT_EQ(script().calls["nvmlDeviceGetFanSpeed"], 1);
  EXPECT_TRUE(b->status().counters.call_errors.empty());
}

TEST_F(DriverBehaviourTest, ErrorsThatMeanTheGpuOrDriverIsGoneFailTheCollection) {
  for (nvmlReturn_t rc : {NVML_ERROR_GPU_IS_LOST, NVML_ERROR_GPU_NOT_FOUND, NVML_ERROR_RESET_REQUIRED,
                          NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_UNINITIALIZED, NVML_ERROR_IRQ_ISSUE}) {
    fake::reset();
    auto b = make();
    script().rc["nvmlDeviceGetPowerUsage"] = rc;
    auto r = b->collect(0);
    ASSERT_FALSE(r.ok()) << rc;
    EXPECT_EQ(r.error().code, rc);
    EXPECT_NE(r.error().message.find("nvmlDeviceGetPowerUsage"), std::string::npos) << r.error().message;
    // A lost GPU is not asked anything more in that collection.
    EXPECT_EQ(script().calls["nvmlDeviceGetFanSpeed"], 0) << rc;
    EXPECT_TRUE(b->status().counters.call_errors.empty());
  }
}

TEST_F(DriverBehaviourTest, AGpuAnsweringNothingIsDownWithTheFirstError) {
  auto b = make();
  ASSERT_TRUE(b->collect(0).ok());  // the handle is acquired before the GPU goes quiet
  script().all_rc = NVML_ERROR_UNKNOWN;
  auto r = b->collect(0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, NVML_ERROR_UNKNOWN);
  EXPECT_EQ(r.error().message.rfind("nvmlDeviceGetUtilizationRates: Unknown Error", 0), 0u) << r.error().message;
  EXPECT_EQ(call_errors(*b, 0, "nvmlDeviceGetUtilizationRates", "unknown"), 1u);
}

TEST_F(DriverBehaviourTest, ANotSupportedAnswerCountsAsAnswering) {
  auto b = make();
  for (const char* call : {"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetTemperature",
                           "nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit",
                           "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetClockInfo", "nvmlDeviceGetSamples",
                           "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetProcessUtilization"}) {
    script().rc[call] = NVML_ERROR_UNKNOWN;
  }
  script().rc["nvmlDeviceGetFanSpeed"] = NVML_ERROR_NOT_SUPPORTED;
  auto r = b->collect(0);
  EXPECT_TRUE(r.ok());  // the driver answered one query, if only to say it is not supported
}

// ---- 3. per-process utilization ----

nvmlProcessUtilizationSample_t rec(unsigned pid, unsigned long long ts, unsigned sm, unsigned mem = 5) {
  nvmlProcessUtilizationSample_t s{};
  s.pid = pid;
  s.timeStamp = ts;
  s.smUtil = sm;
  s.memUtil = mem;
  return s;
}

TEST_F(DriverBehaviourTest, TheR550CallIsPreferredAndEachRecordCoversFromTheCursor) {
  script().has_processes_utilization_info = true;
  auto b = make();
  script().processes[0] = {{100, 1 << 20}, {200, 2 << 20}};
  script().process_samples[0] = {rec(100, kNow - 3'000'000, 30), rec(200, kNow - 1'000'000, 60)};
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(script().calls["nvmlDeviceGetProcessUtilization"], 0);
  ASSERT_TRUE(r->usage.process_samples_supported);
  ASSERT_EQ(r->usage.process_samples.size(), 2u);
  EXPECT_EQ(r->usage.process_samples[0], (ProcessSample{100, kNow - 3'000'000, 0.3, 0.05, 0}));
  EXPECT_EQ(r->usage.process_samples[1], (ProcessSample{200, kNow - 1'000'000, 0.6, 0.05, 0}));
  // The cursor moved to the newest accepted record; the next query passes it.
  script().process_samples[0] = {rec(100, kNow - 500'000, 10)};
  auto r2 = b->collect(0);
  ASSERT_TRUE(r2.ok());
  ASSERT_EQ(script().last_seen_passed.size(), 2u);
  EXPECT_EQ(script().last_seen_passed[1], static_cast<unsigned long long>(kNow - 1'000'000));
  ASSERT_EQ(r2->usage.process_samples.size(), 1u);
  EXPECT_EQ(r2->usage.process_samples[0].covers_from_us, kNow - 1'000'000);
}

TEST_F(DriverBehaviourTest, FallsBackToTheLegacyCallWhenTheR550CallIsNotSupported) {
  script().has_processes_utilization_info = true;
  auto b = make();
  script().rc["nvmlDeviceGetProcessesUtilizationInfo"] = NVML_ERROR_NOT_SUPPORTED;
  script().processes[0] = {{100, 1 << 20}};
  script().process_samples[0] = {rec(100, kNow - 1'000'000, 30)};
  for (int i = 0; i < 2; ++i) {
    auto r = b->collect(0);
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->usage.process_samples_supported);
  }
  EXPECT_EQ(script().calls["nvmlDeviceGetProcessesUtilizationInfo"], 1);  // remembered
  EXPECT_GE(script().calls["nvmlDeviceGetProcessUtilization"], 2);
  EXPECT_TRUE(b->status().counters.call_errors.empty());
}

TEST_F(DriverBehaviourTest, NotFoundMeansSupportedWithNoRecords) {
  auto b = make();
  script().processes[0] = {{100, 1 << 20}};
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->usage.process_samples_supported);
  EXPECT_TRUE(r->usage.process_samples.empty());
  EXPECT_TRUE(b->status().counters.call_errors.empty());
}

TEST_F(DriverBehaviourTest, RecordsThatCannotBeTrueAreDroppedCountedAndNeverMoveTheCursor) {
  auto b = make();
  script().processes[0] = {{100, 1 << 20}};
  script().process_samples[0] = {rec(100, kNow - 2'000'000, 20)};
  ASSERT_TRUE(b->collect(0).ok());  // cursor: kNow - 2 s
  script().processes[0] = {{100, 1 << 20}, {300, 1 << 20}};
  script().process_samples[0] = {
      rec(0, kNow - 100'000, 10),            // an unused entry
      rec(100, kNow - 100'000, 101),         // over 100 %
      rec(100, kNow - 2'000'000, 20),        // not newer than the cursor
      rec(100, kNow + 5'000'000, 20),        // ahead of every clock
      rec(4242, kNow - 100'000, 20),         // never on this GPU
      rec(300, kNow - 900'000, 40),          // good
      rec(100, kNow - 800'000, 50, 101),     // memory over 100 %
  };
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->usage.process_samples.size(), 1u);
  EXPECT_EQ(r->usage.process_samples[0].pid, 300u);
  EXPECT_EQ(r->usage.process_samples[0].covers_from_us, kNow - 2'000'000);
  EXPECT_EQ(dropped(*b, 0, "pid_zero"), 1u);
  EXPECT_EQ(dropped(*b, 0, "over_100_percent"), 2u);
  EXPECT_EQ(dropped(*b, 0, "stale_timestamp"), 1u);
  EXPECT_EQ(dropped(*b, 0, "future_timestamp"), 1u);
  EXPECT_EQ(dropped(*b, 0, "unknown_pid"), 1u);
  script().process_samples[0] = {rec(300, kNow - 850'000, 40)};
  ASSERT_TRUE(b->collect(0).ok());
  // The cursor stopped at the good record, not at the garbage after it.
  EXPECT_EQ(script().last_seen_passed.back(), static_cast<unsigned long long>(kNow - 900'000));
}

TEST_F(DriverBehaviourTest, AProcessFromThePreviousListIsStillKnown) {
  auto b = make();
  script().processes[0] = {{100, 1 << 20}};
  ASSERT_TRUE(b->collect(0).ok());
  script().processes[0] = {};
  script().process_samples[0] = {rec(100, kNow - 100'000, 20)};
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->usage.process_samples.size(), 1u);
  EXPECT_EQ(dropped(*b, 0, "unknown_pid"), 0u);
}

TEST_F(DriverBehaviourTest, TheFutureIsMeasuredAgainstTheDeviceClockToo) {
  // A simulator at time scale > 1 stamps samples ahead of the wall clock.
  auto b = make();
  nvmlSample_t s{};
  s.timeStamp = kNow + 10'000'000;
  s.sampleValue.uiVal = 50;
  script().utilization_samples[0] = {s};
  script().processes[0] = {{100, 1 << 20}};
  script().process_samples[0] = {rec(100, kNow + 10'500'000, 20), rec(100, kNow + 11'500'000, 20)};
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->usage.process_samples.size(), 1u);
  EXPECT_EQ(r->usage.process_samples[0].timestamp_us, kNow + 10'500'000);
  EXPECT_EQ(dropped(*b, 0, "future_timestamp"), 1u);
}

// ---- 4. the stride of process records ----

TEST_F(DriverBehaviourTest, ProcessRecordsAreReadWithTheStrideTheDriverWrote) {
  for (unsigned stride : {16u, 24u, 32u}) {
    fake::reset();
    script().process_stride = stride;
    auto b = make();
    script().processes[0] = {{11, 1ULL << 30}, {22, 2ULL << 30}, {33, 3ULL << 30}};
    auto r = b->collect(0);
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(r->usage.processes.has_value());
    ASSERT_EQ(r->usage.processes->size(), 3u) << stride;
    for (unsigned i = 0; i < 3; ++i) {
      EXPECT_EQ(r->usage.processes->at(i).pid, 11u * (i + 1)) << stride;
      EXPECT_EQ(r->usage.processes->at(i).memory_bytes, static_cast<double>((i + 1ULL) << 30)) << stride;
    }
  }
}

TEST(RecordStrideTest, TheNarrowestLayoutThatReachesTheLastWrittenByte) {
  std::vector<unsigned char> buf(10 * 32, kRecordSentinel);
  EXPECT_EQ(detect_record_stride(buf.data(), buf.size(), 0, 24), 24u);
  EXPECT_EQ(detect_record_stride(buf.data(), buf.size(), 2, 24), 24u);  // nothing written: nominal
  std::fill(buf.begin(), buf.begin() + 2 * 32, 0);
  EXPECT_EQ(detect_record_stride(buf.data(), buf.size(), 2, 24), 32u);
  std::fill(buf.begin(), buf.end(), kRecordSentinel);
  std::fill(buf.begin(), buf.begin() + 2 * 24, 0);
  EXPECT_EQ(detect_record_stride(buf.data(), buf.size(), 2, 24), 24u);
  std::fill(buf.begin(), buf.end(), kRecordSentinel);
  std::fill(buf.begin(), buf.begin() + 3 * 16, 0);
  EXPECT_EQ(detect_record_stride(buf.data(), buf.size(), 3, 24), 16u);
  // Written beyond `count` records: no layout explains it, the nominal one stays.
  std::fill(buf.begin(), buf.end(), 0);
  EXPECT_EQ(detect_record_stride(buf.data(), buf.size(), 2, 24), 24u);
}

}  // namespace
}  // namespace gpumeter
