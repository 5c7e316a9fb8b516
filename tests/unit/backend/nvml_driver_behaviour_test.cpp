// The NVML backend against a scripted NVML: the answers real drivers give that the simulator
// does not (yet) produce: errors from single calls, garbage per-process records, other record
// strides, a driver upgraded under the agent, a GPU lost from the event set.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "backend/nvml/nvml_backend.h"
#include "backend/nvml/nvml_internal.h"
#include "fake_clock.h"
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
    o.clock = &clock_;
    o.reinit_lock_timeout = 50ms;
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
  testing::FakeClock clock_;
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
    EXPECT_FALSE(r->device.fan_speed_ratio.has_value());
    EXPECT_TRUE(r->device.temperature_celsius.empty());
    EXPECT_FALSE(r->device.power_watts.has_value());
    EXPECT_EQ(r->device.utilization_ratio, 0.4);
    EXPECT_EQ(r->device.power_limit_watts, 300.0);
    // Not remembered: asked again every round.
    EXPECT_EQ(script().calls["nvmlDeviceGetFanSpeed"], round);
    EXPECT_EQ(call_errors(*b, 0, "nvmlDeviceGetFanSpeed", "unknown"), static_cast<unsigned>(round));
    EXPECT_EQ(call_errors(*b, 0, "nvmlDeviceGetTemperature", "timeout"), static_cast<unsigned>(round));
  }
  auto r1 = b->collect(1);
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->device.power_watts, 120.0);  // the NO_PERMISSION was GPU 0's only
  EXPECT_EQ(call_errors(*b, 1, "nvmlDeviceGetFanSpeed", "unknown"), 1u);
}

TEST_F(DriverBehaviourTest, TheVideoEnginesAreReadAndAnUnsupportedOneIsNotAskedAgain) {
  auto b = make();
  script().gpu_rc[{"nvmlDeviceGetDecoderUtilization", 1}] = NVML_ERROR_NOT_SUPPORTED;
  for (int round = 0; round < 2; ++round) {
    auto r0 = b->collect(0);
    ASSERT_TRUE(r0.ok()) << r0.error().message;
    EXPECT_EQ(r0->device.encoder_utilization_ratio, 0.25);
    EXPECT_EQ(r0->device.decoder_utilization_ratio, 0.05);
    auto r1 = b->collect(1);
    ASSERT_TRUE(r1.ok()) << r1.error().message;
    EXPECT_EQ(r1->device.encoder_utilization_ratio, 0.25);
    EXPECT_FALSE(r1->device.decoder_utilization_ratio.has_value());
  }
  EXPECT_EQ(script().calls["nvmlDeviceGetDecoderUtilization"], 3);  // GPU 0 twice, GPU 1 once
  EXPECT_EQ(call_errors(*b, 1, "nvmlDeviceGetDecoderUtilization", "not_supported"), 0u);
}

TEST_F(DriverBehaviourTest, ARefusedCallIsRememberedAndNamedNotCountedAsAnError) {
  auto b = make();
  script().gpu_rc[{"nvmlDeviceGetPowerUsage", 0}] = NVML_ERROR_NO_PERMISSION;
  for (int round = 1; round <= 3; ++round) {
    auto r = b->collect(0);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_FALSE(r->device.power_watts.has_value());
    EXPECT_EQ(r->device.utilization_ratio, 0.4);
    for (const CollectorRun& run : r->runs) EXPECT_TRUE(run.success) << collector_name(run.collector);
  }
  // The privilege does not change while the agent runs: asked once, never a call error.
  EXPECT_EQ(script().calls["nvmlDeviceGetPowerUsage"], 1);
  EXPECT_EQ(call_errors(*b, 0, "nvmlDeviceGetPowerUsage", "no_permission"), 0u);
  using Refused = std::set<std::pair<unsigned, std::string>>;
  EXPECT_EQ(b->status().counters.not_permitted, (Refused{{0, "nvmlDeviceGetPowerUsage"}}));
  auto r1 = b->collect(1);
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->device.power_watts, 120.0);
  EXPECT_EQ(b->status().counters.not_permitted, (Refused{{0, "nvmlDeviceGetPowerUsage"}}));
}

TEST_F(DriverBehaviourTest, StatusIsACopySafeToTakeWhileCollectionsCount) {
  auto b = make();
  script().rc["nvmlDeviceGetFanSpeed"] = NVML_ERROR_UNKNOWN;
  constexpr int kRounds = 300;
  std::atomic<bool> done{false};
  std::thread worker([&] {
    for (int i = 0; i < kRounds; ++i) EXPECT_TRUE(b->collect(0).ok());
    done = true;
  });
  std::uint64_t last = 0;
  while (!done) {
    const std::uint64_t now = call_errors(*b, 0, "nvmlDeviceGetFanSpeed", "unknown");
    EXPECT_GE(now, last);  // a copy is never torn or stale behind an earlier one
    last = now;
  }
  worker.join();
  EXPECT_EQ(call_errors(*b, 0, "nvmlDeviceGetFanSpeed", "unknown"), static_cast<std::uint64_t>(kRounds));
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
  // Down, so not counted as values left out of an up GPU.
  EXPECT_TRUE(b->status().counters.call_errors.empty());
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
      rec(0, kNow - 100'000, 10),         // an unused entry
      rec(100, kNow - 100'000, 101),      // over 100 %
      rec(100, kNow - 2'000'000, 20),     // not newer than the cursor
      rec(100, kNow + 5'000'000, 20),     // ahead of every clock
      rec(4242, kNow - 100'000, 20),      // never on this GPU
      rec(300, kNow - 900'000, 40),       // good
      rec(100, kNow - 800'000, 50, 101),  // memory over 100 %
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

// ---- 5. a driver upgraded under the agent ----

TEST_F(DriverBehaviourTest, AVersionMismatchReinitializesNvmlWithoutARestart) {
  auto b = make();
  script().rc["nvmlDeviceGetFanSpeed"] = NVML_ERROR_NOT_SUPPORTED;
  ASSERT_TRUE(b->collect(0).ok());
  ASSERT_TRUE(b->collect(1).ok());
  EXPECT_EQ(script().calls["nvmlDeviceGetHandleByIndex_v2"], 2);

  script().all_rc = NVML_ERROR_LIB_RM_VERSION_MISMATCH;
  script().init_rc = NVML_ERROR_LIB_RM_VERSION_MISMATCH;
  auto failed = b->collect(0);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code, NVML_ERROR_LIB_RM_VERSION_MISMATCH);
  EXPECT_FALSE(b->status().up);
  EXPECT_NE(b->status().detail.find("version mismatch"), std::string::npos) << b->status().detail;
  // The other GPU fails too, with the same reason, while the driver still mismatches.
  auto other = b->collect(1);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code, NVML_ERROR_LIB_RM_VERSION_MISMATCH);
  EXPECT_EQ(script().shutdowns, 1);  // one attempt, right away
  EXPECT_EQ(script().inits, 2);
  EXPECT_FALSE(b->collect(1).ok());
  EXPECT_EQ(script().inits, 2);  // the next attempt waits for its backoff

  // The new kernel module is loaded.
  script().all_rc.reset();
  script().init_rc.reset();
  script().driver = "560.35.03";
  clock_.advance(1100ms);
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(script().inits, 3);
  const BackendStatus st = b->status();
  EXPECT_TRUE(st.up);
  EXPECT_EQ(st.driver_version, "560.35.03");
  EXPECT_EQ(st.counters.reinitializations, 1u);
  // Handles are acquired anew, and NOT_SUPPORTED is asked again.
  EXPECT_EQ(script().calls["nvmlDeviceGetHandleByIndex_v2"], 3);
  EXPECT_EQ(script().calls["nvmlDeviceGetFanSpeed"], 3);  // once per GPU before, GPU 0 again now
  EXPECT_TRUE(b->collect(1).ok());
  EXPECT_EQ(b->identify(1)->driver_version, "560.35.03");
}

TEST_F(DriverBehaviourTest, ReinitializationBacksOffFromOneSecondToThirty) {
  auto b = make();
  ASSERT_TRUE(b->collect(0).ok());
  script().all_rc = NVML_ERROR_LIB_RM_VERSION_MISMATCH;
  script().init_rc = NVML_ERROR_LIB_RM_VERSION_MISMATCH;
  ASSERT_FALSE(b->collect(0).ok());
  ASSERT_FALSE(b->collect(0).ok());  // first attempt
  ASSERT_EQ(script().inits, 2);
  std::vector<int> waits;
  int waited_ms = 0;
  while (waits.size() < 7) {
    clock_.advance(100ms);
    waited_ms += 100;
    int before = script().inits;
    ASSERT_FALSE(b->collect(0).ok());
    if (script().inits != before) {
      waits.push_back(waited_ms);
      waited_ms = 0;
    }
  }
  EXPECT_EQ(waits, (std::vector<int>{1000, 2000, 4000, 8000, 16000, 30000, 30000}));
  EXPECT_NE(b->status().detail.find("next attempt in 30 s"), std::string::npos) << b->status().detail;
}

// The library mapped into the process stays the old driver's after an upgrade: after three
// re-initializations refused as a version mismatch the backend asks for a new process.
TEST_F(DriverBehaviourTest, RepeatedVersionMismatchesOnReinitializationAskForARestart) {
  auto b = make();
  ASSERT_TRUE(b->collect(0).ok());
  script().all_rc = NVML_ERROR_LIB_RM_VERSION_MISMATCH;
  script().init_rc = NVML_ERROR_LIB_RM_VERSION_MISMATCH;
  ASSERT_FALSE(b->collect(0).ok());
  for (int attempts = 1; attempts <= 3; ++attempts) {
    EXPECT_FALSE(b->restart_reason()) << "before attempt " << attempts;
    const int before = script().inits;
    while (script().inits == before) {
      clock_.advance(100ms);
      ASSERT_FALSE(b->collect(0).ok());
    }
  }
  ASSERT_TRUE(b->restart_reason());
  EXPECT_NE(b->restart_reason()->find("3 times"), std::string::npos) << *b->restart_reason();
}

TEST_F(DriverBehaviourTest, AFailedInitAtStartIsRetriedThenAsksForARestart) {
  NvmlBackendOptions o;
  o.init_retry_delays = {1ms, 1ms, 1ms};
  script().init_answers = {NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_DRIVER_NOT_LOADED};
  auto late = NvmlBackend::create(std::make_unique<fake::FakeSymbols>(), o, log_);
  EXPECT_TRUE(late->status().up) << late->status().detail;  // the driver loaded while it waited
  EXPECT_EQ(script().inits, 3);
  EXPECT_FALSE(late->restart_reason());

  fake::reset();
  script().init_rc = NVML_ERROR_DRIVER_NOT_LOADED;
  auto never = NvmlBackend::create(std::make_unique<fake::FakeSymbols>(), o, log_);
  EXPECT_FALSE(never->status().up);
  EXPECT_EQ(script().inits, 4);
  ASSERT_TRUE(never->restart_reason());
  EXPECT_NE(never->restart_reason()->find("4 attempts"), std::string::npos) << *never->restart_reason();
}

TEST_F(DriverBehaviourTest, AHungCallDelaysReinitializationButDoesNotBlockIt) {
  auto b = make();
  ASSERT_TRUE(b->collect(0).ok());
  ASSERT_TRUE(b->collect(1).ok());
  script().block_call = "nvmlDeviceGetFanSpeed";
  std::thread hung([&] { (void)b->collect(1); });
  {
    std::unique_lock lock(script().block_mu);
    script().block_cv.wait(lock, [] { return script().blocked; });
  }
  script().block_call.clear();
  script().rc["nvmlDeviceGetUtilizationRates"] = NVML_ERROR_LIB_RM_VERSION_MISMATCH;
  ASSERT_FALSE(b->collect(0).ok());
  auto start = std::chrono::steady_clock::now();
  auto r = b->collect(0);  // the attempt gives up after the lock timeout
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(script().inits, 1);
  EXPECT_NE(b->status().detail.find("driver call is still in progress"), std::string::npos) << b->status().detail;
  {
    std::lock_guard lock(script().block_mu);
    script().release = true;
  }
  script().block_cv.notify_all();
  hung.join();
  script().rc.clear();
  clock_.advance(1100ms);
  EXPECT_TRUE(b->collect(0).ok());
  EXPECT_EQ(script().inits, 2);
  EXPECT_EQ(b->status().counters.reinitializations, 1u);
}

TEST_F(DriverBehaviourTest, AGpuGoneAcrossReinitializationKeepsItsSlotAndFails) {
  auto b = make();
  ASSERT_TRUE(b->collect(1).ok());
  script().all_rc = NVML_ERROR_LIB_RM_VERSION_MISMATCH;
  ASSERT_FALSE(b->collect(1).ok());
  script().all_rc.reset();
  script().device_count = 1;
  ASSERT_TRUE(b->collect(0).ok());  // re-initializes
  EXPECT_EQ(b->status().counters.reinitializations, 1u);
  EXPECT_EQ(b->device_count(), 2u);
  auto gone = b->collect(1);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.error().message.find("nvmlDeviceGetHandleByIndex_v2"), std::string::npos) << gone.error().message;
  EXPECT_TRUE(b->status().up);
}

TEST_F(DriverBehaviourTest, TheEventSetIsRecreatedAfterReinitialization) {
  auto b = make();
  ASSERT_TRUE(b->collect(0).ok());
  ASSERT_TRUE(b->wait_event(10ms).ok());
  EXPECT_EQ(script().sets_created, 1);
  script().wait_answers.push_back({NVML_ERROR_LIB_RM_VERSION_MISMATCH, {}});
  auto e = b->wait_event(10ms);
  ASSERT_FALSE(e.ok());
  EXPECT_FALSE(b->status().up);
  EXPECT_TRUE(b->supports_events());      // the event thread must keep going
  ASSERT_TRUE(b->wait_event(10ms).ok());  // re-initializes, then waits on a new set
  EXPECT_EQ(script().sets_freed, 1);
  EXPECT_EQ(script().sets_created, 2);
  EXPECT_TRUE(b->status().up);
  ASSERT_TRUE(b->collect(0).ok());  // the handle comes back
  EXPECT_TRUE(script().registered[fake::current_set()].empty()) << "workers never make event calls";
  ASSERT_TRUE(b->wait_event(10ms).ok());  // and the event thread puts it in the new set
  EXPECT_EQ(script().registered[fake::current_set()], (std::set<unsigned>{0}));
}

// ---- 6. events while a GPU is lost ----

TEST_F(DriverBehaviourTest, ALostGpuLeavesTheEventSetAndRejoinsWithANewHandle) {
  auto b = make();
  ASSERT_TRUE(b->collect(0).ok());
  ASSERT_TRUE(b->collect(1).ok());
  ASSERT_TRUE(b->wait_event(10ms).ok());
  EXPECT_EQ(script().registered[fake::current_set()], (std::set<unsigned>{0, 1}));

  script().lost = {1};
  script().wait_answers.push_back({NVML_ERROR_GPU_IS_LOST, {}});
  nvmlEventData_t xid{};
  xid.device = fake::handle(0);
  xid.eventType = nvmlEventTypeXidCriticalError;
  xid.eventData = 79;
  script().wait_answers.push_back({NVML_SUCCESS, xid});
  auto rebuilt = b->wait_event(10ms);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.error().message;
  EXPECT_FALSE(rebuilt->has_value());
  EXPECT_EQ(script().sets_created, 2);
  EXPECT_EQ(script().sets_freed, 1);
  EXPECT_EQ(script().registered[fake::current_set()], (std::set<unsigned>{0}));
  // The healthy GPU's Xid still arrives.
  auto e = b->wait_event(10ms);
  ASSERT_TRUE(e.ok());
  ASSERT_TRUE(e->has_value());
  EXPECT_EQ((*e)->device, 0u);
  EXPECT_EQ((*e)->code, 79u);
  // Later waits do not try the lost GPU again.
  ASSERT_TRUE(b->wait_event(10ms).ok());
  EXPECT_EQ(script().registered[fake::current_set()], (std::set<unsigned>{0}));

  // The GPU's worker sees it lost, then finds it again after a reset.
  script().gpu_rc[{"nvmlDeviceGetUtilizationRates", 1}] = NVML_ERROR_GPU_IS_LOST;
  ASSERT_FALSE(b->collect(1).ok());
  script().gpu_rc.clear();
  script().lost.clear();
  ASSERT_TRUE(b->collect(1).ok());
  ASSERT_TRUE(b->wait_event(10ms).ok());  // the event thread registers the new handle
  EXPECT_EQ(script().registered[fake::current_set()], (std::set<unsigned>{0, 1}));
}

// [H] nvmlDeviceRegisterEvents: UNKNOWN leaves the event set "in undefined state and should be
// freed". The set is freed, the next wait makes a new one without that GPU, so the others' events
// keep arriving, and the GPU is tried again a minute later.
TEST_F(DriverBehaviourTest, AnUnknownRegistrationRebuildsTheEventSetWithoutTheGpuForAMinute) {
  auto b = make();
  ASSERT_TRUE(b->collect(0).ok());
  ASSERT_TRUE(b->collect(1).ok());
  script().gpu_rc[{"nvmlDeviceRegisterEvents", 1}] = NVML_ERROR_UNKNOWN;
  auto first = b->wait_event(10ms);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_FALSE(first->has_value());
  EXPECT_EQ(script().sets_created, 1);
  EXPECT_EQ(script().sets_freed, 1);
  nvmlEventData_t xid{};
  xid.device = fake::handle(0);
  xid.eventType = nvmlEventTypeXidCriticalError;
  xid.eventData = 79;
  script().wait_answers.push_back({NVML_SUCCESS, xid});
  auto e = b->wait_event(10ms);
  ASSERT_TRUE(e.ok());
  ASSERT_TRUE(e->has_value());
  EXPECT_EQ((*e)->device, 0u);
  EXPECT_EQ(script().sets_created, 2);
  EXPECT_EQ(script().registered[fake::current_set()], (std::set<unsigned>{0}));
  script().gpu_rc.clear();
  clock_.advance(59s);
  ASSERT_TRUE(b->wait_event(10ms).ok());
  EXPECT_EQ(script().registered[fake::current_set()], (std::set<unsigned>{0}));
  clock_.advance(2s);
  ASSERT_TRUE(b->wait_event(10ms).ok());
  EXPECT_EQ(script().registered[fake::current_set()], (std::set<unsigned>{0, 1}));
  EXPECT_EQ(script().sets_created, 2);
}

TEST_F(DriverBehaviourTest, GpuIsLostWithNoGpuToLeaveOutIsAnError) {
  auto b = make();
  ASSERT_TRUE(b->collect(0).ok());
  script().wait_answers.push_back({NVML_ERROR_GPU_IS_LOST, {}});
  auto e = b->wait_event(10ms);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, NVML_ERROR_GPU_IS_LOST);
}

// ---- 2. support is asked again with a new handle ----

TEST_F(DriverBehaviourTest, NotSupportedIsForgottenWhenTheHandleIsAcquiredAgain) {
  auto b = make();
  script().rc["nvmlDeviceGetFanSpeed"] = NVML_ERROR_NOT_SUPPORTED;
  ASSERT_TRUE(b->collect(0).ok());
  ASSERT_TRUE(b->collect(0).ok());
  EXPECT_EQ(script().calls["nvmlDeviceGetFanSpeed"], 1);
  // A reset: the GPU is lost for a round, then comes back, now with a fan that answers.
  script().rc["nvmlDeviceGetUtilizationRates"] = NVML_ERROR_RESET_REQUIRED;
  ASSERT_FALSE(b->collect(0).ok());
  script().rc.clear();
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(script().calls["nvmlDeviceGetFanSpeed"], 2);
  EXPECT_EQ(r->device.fan_speed_ratio, 0.3);
}

// ---- 6b. the slow class ----

TEST_F(DriverBehaviourTest, SlowValuesAreReadEveryThirtySecondsAndServedFromTheLastRead) {
  auto b = make();
  for (int round = 0; round < 5; ++round) {
    auto r = b->collect(0);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->device.power_limit_watts, 300.0) << "served between reads";
    clock_.advance(5s);
  }
  // The scripted NVML answers the power limit of the slow class (the others are unset there).
  EXPECT_EQ(script().calls["nvmlDeviceGetEnforcedPowerLimit"], 1);
  EXPECT_EQ(script().calls["nvmlDeviceGetFanSpeed"], 5) << "the 1 s class is read every round";
  clock_.advance(10s);  // 35 s after the first read
  ASSERT_TRUE(b->collect(0).ok());
  EXPECT_EQ(script().calls["nvmlDeviceGetEnforcedPowerLimit"], 2);
}

TEST_F(DriverBehaviourTest, ASlowValueThatFailedIsAskedAgainAtTheNextCollection) {
  auto b = make();
  script().rc["nvmlDeviceGetEnforcedPowerLimit"] = NVML_ERROR_UNKNOWN;
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->device.power_limit_watts.has_value());
  script().rc.clear();
  r = b->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->device.power_limit_watts, 300.0);
  EXPECT_EQ(script().calls["nvmlDeviceGetEnforcedPowerLimit"], 2);
}

// ---- 7. the usage scope ----

TEST_F(DriverBehaviourTest, AUsageCollectionReadsOnlyWhatTheLedgerNeeds) {
  script().has_processes_utilization_info = true;
  auto b = make();
  script().processes[0] = {{100, 1 << 20}};
  script().process_samples[0] = {rec(100, kNow - 100'000, 20)};
  nvmlSample_t s{};
  s.timeStamp = kNow - 50'000;
  s.sampleValue.uiVal = 70;
  script().utilization_samples[0] = {s};
  auto r = b->collect(0, CollectScope::kUsage);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->device.utilization_ratio, 0.4);
  EXPECT_EQ(r->device.power_watts, 120.0);
  EXPECT_EQ(r->device.energy_joules, 5.0);
  ASSERT_TRUE(r->usage.processes.has_value());
  EXPECT_EQ(r->usage.processes->size(), 1u);
  EXPECT_EQ(r->usage.utilization_samples.size(), 1u);
  EXPECT_EQ(r->usage.process_samples.size(), 1u);
  EXPECT_FALSE(r->device.memory_total_bytes.has_value());
  EXPECT_TRUE(r->clocks.hertz.empty());
  for (const char* skipped : {"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetTemperature", "nvmlDeviceGetClockInfo",
                              "nvmlDeviceGetFanSpeed", "nvmlDeviceGetEnforcedPowerLimit"}) {
    EXPECT_EQ(script().calls[skipped], 0) << skipped;
  }
  auto full = b->collect(0, CollectScope::kFull);
  ASSERT_TRUE(full.ok());
  EXPECT_TRUE(full->device.memory_total_bytes.has_value());
  EXPECT_EQ(script().calls["nvmlDeviceGetFanSpeed"], 1);
}

// The processes collector's run is the read of the process lists and records, at a usage
// collection and at a full one; a failing process query fails it and only it.
TEST_F(DriverBehaviourTest, TheProcessReadIsTheProcessesCollectorsRun) {
  auto b = make();
  script().processes[0] = {{100, 1 << 20}};
  auto process_runs = [](const DeviceReading& r) {
    std::vector<CollectorRun> out;
    for (const auto& run : r.runs) {
      if (run.collector == CollectorId::kProcesses) out.push_back(run);
    }
    return out;
  };
  for (CollectScope scope : {CollectScope::kUsage, CollectScope::kFull}) {
    auto r = b->collect(0, scope);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const auto runs = process_runs(*r);
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_TRUE(runs[0].success);
    EXPECT_GE(runs[0].duration_seconds, 0.0);
  }
  script().rc["nvmlDeviceGetComputeRunningProcesses_v3"] = NVML_ERROR_UNKNOWN;
  auto r = b->collect(0, CollectScope::kFull);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto runs = process_runs(*r);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_FALSE(runs[0].success);
  for (const auto& run : r->runs) {
    if (run.collector != CollectorId::kProcesses) {
      EXPECT_TRUE(run.success) << collector_name(run.collector);
    }
  }
  // Neither the ledger nor the per-process series: no process read, no run.
  auto none = b->collect(0, CollectScope::kFull,
                         CollectorSet::defaults().set(CollectorId::kLedger, false).set(CollectorId::kProcesses, false));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(process_runs(*none).empty());
}

}  // namespace
}  // namespace gpumeter
