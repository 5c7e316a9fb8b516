// Driver behaviour that depends on the driver branch, the architecture and the product line,
// and the quirks a scenario switches on, through the built library.

#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "nvml_sim_fixture.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

// GPU 0 and 1: model m (hopper) running "a" at 50% and "b" at 30%+20%. GPU 2: an A100
// (ga100, instantaneous power) with a fan, idle until 10 s, then 80%.
const std::string kBase = std::string(testing::kModel) + R"(
  a100:
    name: NVIDIA A100-SXM4-40GB
    memory: 40GiB
    power: {limit: 400, idle: 50, max: 350}
    clocks:
      graphics: {idle: 210, max: 1410}
      sm: {idle: 210, max: 1410}
      memory: {idle: 1215, max: 1215}
      video: {idle: 585, max: 1275}
    fan: true
gpus:
  - {model: m}
  - {model: m}
  - {model: a100}
jobs:
  - {name: a, gpus: [0], pid: 4242, memory: 4GiB, utilization: 0.5}
  - {name: b, gpus: [1], pid: 5001, memory: 1GiB, utilization: 0.3}
  - {name: c, gpus: [1], pid: 5002, memory: 2GiB, utilization: 0.2}
  - {name: d, gpus: [2], pid: 6001, start: 10, utilization: 0.8}
)";

std::string with(const std::string& top, const std::string& tail) { return top + kBase + tail; }

class Quirks : public NvmlSim {};

TEST_F(Quirks, CallErrorFailsOneCallOnOneGpuInItsWindow) {
  ASSERT_EQ(start(with("", R"(
quirks:
  - {kind: call_error, gpu: 2, call: nvmlDeviceGetFanSpeed, error: unknown, at: 5, duration: 10}
  - {kind: call_error, call: nvmlDeviceGetPowerUsage, error: no_permission, at: 100}
  - {kind: call_error, gpu: 0, call: nvmlDeviceGetTemperature, error: timeout}
  - {kind: call_error, gpu: 1, call: nvmlDeviceGetClockInfo, error: not_supported}
)"),
                  8, 0.01),
            NVML_SUCCESS);
  unsigned v = 0;
  EXPECT_EQ(api().fan(handle(2), &v), NVML_ERROR_UNKNOWN);
  EXPECT_EQ(api().power(handle(2), &v), NVML_SUCCESS);  // not yet at 100 s
  EXPECT_EQ(api().temperature(handle(2), NVML_TEMPERATURE_GPU, &v), NVML_SUCCESS);
  EXPECT_EQ(api().temperature(handle(0), NVML_TEMPERATURE_GPU, &v), NVML_ERROR_TIMEOUT);
  EXPECT_EQ(api().temperature(handle(1), NVML_TEMPERATURE_GPU, &v), NVML_SUCCESS);
  EXPECT_EQ(api().clock(handle(1), NVML_CLOCK_SM, &v), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(api().clock(handle(0), NVML_CLOCK_SM, &v), NVML_SUCCESS);
  api().shutdown();

  ASSERT_EQ(start(with("", R"(
quirks:
  - {kind: call_error, gpu: 2, call: nvmlDeviceGetFanSpeed, error: unknown, at: 5, duration: 10}
  - {kind: call_error, call: nvmlDeviceGetPowerUsage, error: no_permission, at: 100}
)"),
                  120, 0.01),
            NVML_SUCCESS);
  EXPECT_EQ(api().fan(handle(2), &v), NVML_SUCCESS);  // the window ended at 15 s
  for (unsigned g = 0; g < 3; ++g) EXPECT_EQ(api().power(handle(g), &v), NVML_ERROR_NO_PERMISSION) << g;
  unsigned long long e = 0;
  EXPECT_EQ(api().energy(handle(0), &e), NVML_SUCCESS);
}

TEST_F(Quirks, DriverUpgradeStrandsTheOldLibraryForGood) {
  const std::string yaml = with("driver_version: \"550.90.07\"\n", R"(
faults:
  - {kind: driver_upgrade, at: 2, to: "555.42.06"}
)");
  ASSERT_EQ(start(yaml, 1.7, 1), NVML_SUCCESS);
  EXPECT_EQ(api().init(), NVML_SUCCESS);  // a second reference
  char buf[80];
  ASSERT_EQ(api().driver_version(buf, sizeof buf), NVML_SUCCESS);
  EXPECT_STREQ(buf, "550.90.07");
  nvmlDevice_t h = handle(0);
  nvmlFieldValue_t fv{};
  fv.fieldId = NVML_FI_DEV_PCIE_COUNT_TX_BYTES;
  ASSERT_EQ(api().fields(h, 1, &fv), NVML_SUCCESS);
  EXPECT_EQ(fv.nvmlReturn, NVML_ERROR_NOT_SUPPORTED);  // R550 has no PCIe byte fields

  sleep_until_scenario(2.05);
  unsigned n = 0, v = 0;
  EXPECT_EQ(api().count(&n), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
  EXPECT_EQ(api().power(h, &v), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
  EXPECT_EQ(api().driver_version(buf, sizeof buf), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
  nvmlDevice_t out = nullptr;
  EXPECT_EQ(api().by_index(0, &out), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
  nvmlEventSet_t set = nullptr;
  EXPECT_EQ(api().set_create(&set), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
  // A new init while references remain joins the stale session.
  EXPECT_EQ(api().init(), NVML_SUCCESS);
  EXPECT_EQ(api().count(&n), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
  EXPECT_EQ(api().shutdown(), NVML_SUCCESS);
  EXPECT_EQ(api().shutdown(), NVML_SUCCESS);
  EXPECT_EQ(api().count(&n), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
  EXPECT_EQ(api().shutdown(), NVML_SUCCESS);  // the last reference
  EXPECT_EQ(api().count(&n), NVML_ERROR_UNINITIALIZED);

  // The process still has the library it loaded: initialized again after the upgrade, it
  // answers the mismatch for good (a new process gets the new driver: test_quirks.py).
  EXPECT_EQ(api().init(), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
  EXPECT_EQ(api().init(), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
  EXPECT_EQ(api().count(&n), NVML_ERROR_UNINITIALIZED);
}

TEST_F(Quirks, GarbageRecordsComeWithTheRealOnes) {
  ASSERT_EQ(start(with("", R"(
quirks:
  - {kind: garbage_process_records, gpu: 1}
)"),
                  10.1, 0.01),
            NVML_SUCCESS);
  const auto now_us = static_cast<unsigned long long>(epoch_ns_ / 1000 + scenario_now());
  std::vector<nvmlProcessUtilizationSample_t> ps(100);
  unsigned n = 100;
  ASSERT_EQ(api().process_util(handle(1), ps.data(), &n, 0), NVML_SUCCESS);
  ASSERT_EQ(n, 6u);
  EXPECT_EQ(ps[0].pid, 5001u);
  EXPECT_EQ(ps[0].smUtil, 30u);
  EXPECT_EQ(ps[1].pid, 5002u);
  EXPECT_EQ(ps[1].smUtil, 20u);
  auto has = [&](auto pred) { return std::any_of(ps.begin() + 2, ps.begin() + n, pred); };
  EXPECT_TRUE(has([](const auto& r) { return r.pid == 0; }));
  EXPECT_TRUE(has([](const auto& r) { return r.smUtil > 100; }));
  EXPECT_TRUE(has([&](const auto& r) { return r.timeStamp > now_us + 3'000'000'000ULL; }));
  EXPECT_TRUE(has(
      [](const auto& r) { return r.pid != 0 && r.pid != 5001 && r.pid != 5002 && r.pid != 4242 && r.pid != 6001; }));

  nvmlProcessesUtilizationInfo_t info{};
  info.version = nvmlProcessesUtilizationInfo_v1;
  std::vector<nvmlProcessUtilizationInfo_v1_t> arr(10);
  info.procUtilArray = arr.data();
  info.processSamplesCount = 10;
  ASSERT_EQ(api().processes_util_info(handle(1), &info), NVML_SUCCESS);
  EXPECT_EQ(info.processSamplesCount, 6u);
  // GPU 0 is clean.
  n = 100;
  ASSERT_EQ(api().process_util(handle(0), ps.data(), &n, 0), NVML_SUCCESS);
  EXPECT_EQ(n, 1u);
}

TEST_F(Quirks, ProcessRecordLayoutChangesTheV3Stride) {
  ASSERT_EQ(start(with("", R"(
quirks:
  - {kind: process_record_layout, gpu: 1, record_bytes: 32}
  - {kind: process_record_layout, gpu: 0, record_bytes: 16}
)"),
                  10, 0.01),
            NVML_SUCCESS);
  // Room for the driver's records whatever their stride, filled with a sentinel.
  std::vector<unsigned char> raw(4 * 32, 0xAB);
  auto* infos = reinterpret_cast<nvmlProcessInfo_t*>(raw.data());
  unsigned n = 4;
  ASSERT_EQ(api().compute_v3(handle(1), &n, infos), NVML_SUCCESS);
  ASSERT_EQ(n, 2u);
  auto u32 = [&](std::size_t off) {
    std::uint32_t v;
    std::memcpy(&v, raw.data() + off, sizeof v);
    return v;
  };
  auto u64 = [&](std::size_t off) {
    std::uint64_t v;
    std::memcpy(&v, raw.data() + off, sizeof v);
    return v;
  };
  EXPECT_EQ(u32(0), 5001u);
  EXPECT_EQ(u64(8), 1ULL << 30);
  EXPECT_EQ(u32(16), 0xFFFFFFFFu);
  EXPECT_EQ(u64(24), 0u);  // usedGpuCcProtectedMemory
  EXPECT_EQ(u32(32), 5002u);
  EXPECT_EQ(u64(40), 2ULL << 30);
  EXPECT_EQ(raw[64], 0xAB);  // nothing past two 32-byte records
  // The 24-byte reading a v2 client does is wrong: its second record starts inside the first.
  EXPECT_NE(infos[1].pid, 5002u);

  std::fill(raw.begin(), raw.end(), 0xAB);
  n = 4;
  ASSERT_EQ(api().compute_v3(handle(0), &n, infos), NVML_SUCCESS);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(u32(0), 4242u);
  EXPECT_EQ(u64(8), 4ULL << 30);
  EXPECT_EQ(raw[16], 0xAB);
  // The _v2 call keeps its 24-byte records.
  n = 4;
  nvmlProcessInfo_t v2[4] = {};
  ASSERT_EQ(api().compute_v2(handle(1), &n, v2), NVML_SUCCESS);
  EXPECT_EQ(v2[1].pid, 5002u);
}

TEST_F(Quirks, GeforceProfile) {
  const std::string yaml = std::string(testing::kModel) + R"(
  rtx:
    name: NVIDIA GeForce RTX 4090
    profile: geforce
    memory: 24GiB
    power: {limit: 450, idle: 20, max: 420}
    clocks:
      graphics: {idle: 210, max: 2520}
      sm: {idle: 210, max: 2520}
      memory: {idle: 405, max: 10501}
      video: {idle: 1080, max: 1965}
gpus:
  - {model: rtx}
jobs:
  - {name: game, gpus: [0], pid: 31, utilization: 0.6}
)";
  ASSERT_EQ(start(yaml, 10, 0.01), NVML_SUCCESS);
  nvmlDevice_t h = handle(0);
  unsigned v = 0;
  char serial[NVML_DEVICE_SERIAL_BUFFER_SIZE];
  EXPECT_EQ(api().serial(h, serial, sizeof serial), NVML_ERROR_NOT_SUPPORTED);
  ASSERT_EQ(api().fan(h, &v), NVML_SUCCESS);  // a fan by default
  EXPECT_EQ(v, 60u);                          // 30% + 50% * 0.6
  unsigned long long c = 0;
  EXPECT_EQ(api().ecc(h, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &c), NVML_ERROR_NOT_SUPPORTED);
  unsigned a, b, d, e;
  EXPECT_EQ(api().remapped(h, &a, &b, &d, &e), NVML_ERROR_NOT_SUPPORTED);
  unsigned n = 0;
  EXPECT_EQ(api().process_util(h, nullptr, &n, 0), NVML_ERROR_NOT_SUPPORTED);
  nvmlProcessesUtilizationInfo_t info{};
  info.version = nvmlProcessesUtilizationInfo_v1;
  EXPECT_EQ(api().processes_util_info(h, &info), NVML_ERROR_NOT_SUPPORTED);
  nvmlFieldValue_t fv[2] = {};
  fv[0].fieldId = NVML_FI_DEV_MEMORY_TEMP;
  fv[1].fieldId = NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION;
  ASSERT_EQ(api().fields(h, 2, fv), NVML_SUCCESS);
  EXPECT_EQ(fv[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(fv[1].nvmlReturn, NVML_SUCCESS);
  unsigned long long types = 0;
  ASSERT_EQ(api().supported_events(h, &types), NVML_SUCCESS);
  EXPECT_EQ(types, nvmlEventTypeXidCriticalError);  // no ECC events
  n = 2;
  nvmlProcessInfo_t infos[2] = {};
  ASSERT_EQ(api().compute_v3(h, &n, infos), NVML_SUCCESS);  // process lists work
  EXPECT_EQ(n, 1u);
}

// nvmlDeviceGetPowerUsage averages over 1 s on hopper and reads the instant on ga100; from
// R535 field 186 gives the instant on any architecture, field 185 the average on Ampere
// (except GA100) and newer only.
TEST_F(Quirks, PowerUsageDependsOnTheArchitecture) {
  ASSERT_EQ(start(kBase, 10.4, 0.01), NVML_SUCCESS);  // GPU 2 went from idle to 80% at 10 s
  unsigned v = 0;
  ASSERT_EQ(api().power(handle(2), &v), NVML_SUCCESS);
  EXPECT_EQ(v, 290000u);  // ga100: instantaneous, 50 W + 300 W * 0.8
  nvmlFieldValue_t fv[2] = {};
  fv[0].fieldId = NVML_FI_DEV_POWER_AVERAGE;
  fv[1].fieldId = NVML_FI_DEV_POWER_INSTANT;
  ASSERT_EQ(api().fields(handle(2), 2, fv), NVML_SUCCESS);
  EXPECT_EQ(fv[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);  // ga100
  ASSERT_EQ(fv[1].nvmlReturn, NVML_SUCCESS);
  EXPECT_EQ(fv[1].value.uiVal, 290000u);
  api().shutdown();

  // The same step on a hopper GPU: the plain call and field 185 average.
  ASSERT_EQ(start(kBase + "  - {name: e, gpus: [0], pid: 6002, start: 20, utilization: 0.5}\n", 20.25, 0.01),
            NVML_SUCCESS);
  ASSERT_EQ(api().power(handle(0), &v), NVML_SUCCESS);
  // 50% for 0.75 s (150 W), then 100% (250 W) for 0.25 s.
  EXPECT_NEAR(v, 175000, 600);
  fv[0].fieldId = NVML_FI_DEV_POWER_AVERAGE;
  fv[1].fieldId = NVML_FI_DEV_POWER_INSTANT;
  ASSERT_EQ(api().fields(handle(0), 2, fv), NVML_SUCCESS);
  ASSERT_EQ(fv[0].nvmlReturn, NVML_SUCCESS);
  EXPECT_NEAR(fv[0].value.uiVal, 175000, 600);
  EXPECT_EQ(fv[1].value.uiVal, 250000u);
  api().shutdown();

  ASSERT_EQ(start("driver_version: \"530.30.02\"\n" + kBase, 10.4, 0.01), NVML_SUCCESS);
  ASSERT_EQ(api().fields(handle(2), 2, fv), NVML_SUCCESS);
  EXPECT_EQ(fv[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);  // before R535
  EXPECT_EQ(fv[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
}

TEST_F(Quirks, PcieThroughputTakesTwentyMilliseconds) {
  ASSERT_EQ(start(kBase, 10, 0.01), NVML_SUCCESS);
  unsigned kbps = 0;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(api().pcie_throughput(handle(0), NVML_PCIE_UTIL_TX_BYTES, &kbps), NVML_SUCCESS);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(20));
  EXPECT_LT(took, std::chrono::milliseconds(500));
  EXPECT_EQ(kbps, static_cast<unsigned>(std::lround(0.5 * 2e9 / 1024)));  // 50% of 2 GB/s
  ASSERT_EQ(api().pcie_throughput(handle(0), NVML_PCIE_UTIL_RX_BYTES, &kbps), NVML_SUCCESS);
  EXPECT_EQ(kbps, static_cast<unsigned>(std::lround(0.5 * 4e9 / 1024)));
  EXPECT_EQ(api().pcie_throughput(handle(0), 7, &kbps), NVML_ERROR_INVALID_ARGUMENT);
  // Every branch has it, R535 included.
  api().shutdown();
  ASSERT_EQ(start("driver_version: \"535.183.01\"\n" + kBase, 10, 0.01), NVML_SUCCESS);
  EXPECT_EQ(api().pcie_throughput(handle(1), NVML_PCIE_UTIL_TX_BYTES, &kbps), NVML_SUCCESS);
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// The wait sleeps once to the timeout or the next event instead of polling, so it costs
// next to no CPU.
TEST_F(Quirks, EventWaitBlocksWithoutPolling) {
  ASSERT_EQ(start(with("", R"(
faults:
  - {kind: xid, gpu: 1, at: 10.6, code: 79}
)"),
                  10, 1),
            NVML_SUCCESS);
  nvmlEventSet_t set = nullptr;
  ASSERT_EQ(api().set_create(&set), NVML_SUCCESS);
  ASSERT_EQ(api().register_events(handle(1), nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
  nvmlEventData_t data{};
  double cpu0 = thread_cpu_seconds();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(api().set_wait(set, &data, 300), NVML_ERROR_TIMEOUT);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(300));
  EXPECT_LT(took, std::chrono::milliseconds(450));
  EXPECT_LT(thread_cpu_seconds() - cpu0, 0.005);

  cpu0 = thread_cpu_seconds();
  ASSERT_EQ(api().set_wait(set, &data, 5000), NVML_SUCCESS);  // the Xid at 10.6 s
  EXPECT_EQ(data.eventData, 79u);
  EXPECT_GE(scenario_now(), 10'600'000);
  EXPECT_LT(scenario_now(), 10'800'000);
  EXPECT_LT(thread_cpu_seconds() - cpu0, 0.005);
  EXPECT_EQ(api().set_free(set), NVML_SUCCESS);
}

// A GPU registered while another thread waits on the set counts at once: the wait learns of
// its next event without polling.
TEST_F(Quirks, EventWaitLearnsOfARegistrationMeanwhile) {
  ASSERT_EQ(start(with("", R"(
faults:
  - {kind: xid, gpu: 1, at: 10.3, code: 31}
)"),
                  10, 1),
            NVML_SUCCESS);
  nvmlDevice_t h0 = handle(0), h1 = handle(1);
  nvmlEventSet_t set = nullptr;
  ASSERT_EQ(api().set_create(&set), NVML_SUCCESS);
  ASSERT_EQ(api().register_events(h0, nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(api().register_events(h1, nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
  });
  nvmlEventData_t data{};
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(api().set_wait(set, &data, 3000), NVML_SUCCESS);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1500));
  EXPECT_EQ(data.eventData, 31u);
  EXPECT_EQ(data.device, h1);
  late.join();
}

TEST_F(Quirks, EventWaitReportsALostGpuInTheSet) {
  ASSERT_EQ(start(with("", R"(
faults:
  - {kind: lost, gpu: 1, at: 10.2, duration: 5}
  - {kind: xid, gpu: 0, at: 10.1, code: 48}
)"),
                  10, 1),
            NVML_SUCCESS);
  nvmlDevice_t h[2] = {handle(0), handle(1)};
  nvmlEventSet_t both = nullptr, healthy = nullptr;
  ASSERT_EQ(api().set_create(&both), NVML_SUCCESS);
  ASSERT_EQ(api().set_create(&healthy), NVML_SUCCESS);
  for (nvmlDevice_t d : h) ASSERT_EQ(api().register_events(d, nvmlEventTypeXidCriticalError, both), NVML_SUCCESS);
  ASSERT_EQ(api().register_events(h[0], nvmlEventTypeXidCriticalError, healthy), NVML_SUCCESS);
  nvmlEventData_t data{};
  ASSERT_EQ(api().set_wait(both, &data, 1000), NVML_SUCCESS);  // GPU 0's Xid at 10.1 s
  EXPECT_EQ(data.eventData, 48u);
  // GPU 1 falls off the bus at 10.2 s: the wait wakes for it.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(api().set_wait(both, &data, 2000), NVML_ERROR_GPU_IS_LOST);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  EXPECT_GE(scenario_now(), 10'200'000);
  EXPECT_EQ(api().set_wait(both, &data, 0), NVML_ERROR_GPU_IS_LOST);
  // A set without the lost GPU goes on as before: its own copy of the Xid, then nothing.
  ASSERT_EQ(api().set_wait(healthy, &data, 50), NVML_SUCCESS);
  EXPECT_EQ(data.eventData, 48u);
  EXPECT_EQ(api().set_wait(healthy, &data, 50), NVML_ERROR_TIMEOUT);
  nvmlEventSet_t late = nullptr;
  ASSERT_EQ(api().set_create(&late), NVML_SUCCESS);
  EXPECT_EQ(api().register_events(h[1], nvmlEventTypeXidCriticalError, late), NVML_ERROR_GPU_IS_LOST);
}

}  // namespace
}  // namespace gpumeter::sim
