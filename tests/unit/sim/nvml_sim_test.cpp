// The built libnvidia-ml.so.1 through dlopen(), the way an NVML program uses it. Each test
// writes its own scenario and sets GPUMETER_SIM_EPOCH so that "now" falls at a chosen
// scenario time; TearDown shuts the library down so the next test loads afresh.

#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "abi/nvml_api.h"
#include "nvml_sim_fixture.h"
#include "sim/truth/truth.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

// GPU 0: "a" at 50% with 4 GiB the whole time. GPU 1: "b" 30% and "c" 20%, time-sliced.
// GPU 2: idle, a model with a fan and without ECC. Faults are appended per test.
const std::string kBase = std::string(testing::kModel) + R"(
  fan-model:
    name: Test GPU With Fan
    architecture: ampere
    memory: 8GiB
    memory_reserved: 256MiB
    power: {limit: 200, idle: 20, max: 180}
    clocks:
      graphics: {idle: 300, max: 1500}
      sm: {idle: 300, max: 1500}
      memory: {idle: 4000, max: 4000}
      video: {idle: 400, max: 1200}
    fan: true
    ecc: false
    vbios_version: 94.02.5C.00.01
gpus:
  - {model: m, uuid: GPU-00000000-1111-2222-3333-444444444444}
  - {model: m}
  - {model: fan-model}
jobs:
  - {name: a, gpus: [0], pid: 4242, uid: 1000, memory: 4GiB, utilization: 0.5}
  - {name: b, gpus: [1], pid: 5001, memory: 1GiB, utilization: 0.3}
  - {name: c, gpus: [1], pid: 5002, memory: 2GiB, utilization: 0.2}
)";

// Runs f with fd 2 redirected to a file and returns what was written there.
template <typename F>
std::string capture_stderr(F&& f) {
  std::string path = (testing::temp_dir() / "stderr.txt").string();
  std::fflush(stderr);
  int saved = dup(2);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(fd, 2);
  close(fd);
  f();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_F(NvmlSim, InitFailsWithOneLineNamingTheProblem) {
  std::string out = capture_stderr([] { EXPECT_EQ(api().init(), NVML_ERROR_DRIVER_NOT_LOADED); });
  EXPECT_EQ(out, "gpumeter-sim: GPUMETER_SIM_SCENARIO is not set; point it at a scenario YAML file\n");

  std::string bad = testing::write_file("bad.yaml", std::string(testing::kModel) + "gpus: {count: 1, model: x}\n");
  setenv("GPUMETER_SIM_SCENARIO", bad.c_str(), 1);
  out = capture_stderr([] { EXPECT_EQ(api().init(), NVML_ERROR_DRIVER_NOT_LOADED); });
  EXPECT_EQ(out, "gpumeter-sim: invalid scenario: " + bad + ":14:25: gpus.model: unknown model 'x' (models: m)\n");

  setenv("GPUMETER_SIM_SCENARIO", testing::write_file("ok.yaml", kBase).c_str(), 1);
  setenv("GPUMETER_SIM_UNSUPPORTED", "nvmlDeviceGetPowerUsage,nvmlDeviceGetBogus", 1);
  out = capture_stderr([] { EXPECT_EQ(api().init(), NVML_ERROR_DRIVER_NOT_LOADED); });
  EXPECT_NE(out.find("'nvmlDeviceGetBogus' is neither an NVML function"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);

  unsetenv("GPUMETER_SIM_UNSUPPORTED");
  setenv("GPUMETER_SIM_TIME_SCALE", "0", 1);
  out = capture_stderr([] { EXPECT_EQ(api().init(), NVML_ERROR_DRIVER_NOT_LOADED); });
  EXPECT_NE(out.find("GPUMETER_SIM_TIME_SCALE: expected a number above 0"), std::string::npos) << out;
}

TEST_F(NvmlSim, InitIsReferenceCounted) {
  unsigned n = 0;
  EXPECT_EQ(api().count(&n), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(api().shutdown(), NVML_ERROR_UNINITIALIZED);
  ASSERT_EQ(start(kBase, 10), NVML_SUCCESS);
  EXPECT_EQ(api().init_v1(), NVML_SUCCESS);
  EXPECT_EQ(api().init_with_flags(0), NVML_SUCCESS);
  EXPECT_EQ(api().shutdown(), NVML_SUCCESS);
  EXPECT_EQ(api().shutdown(), NVML_SUCCESS);
  EXPECT_EQ(api().count(&n), NVML_SUCCESS);
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(api().shutdown(), NVML_SUCCESS);
  EXPECT_EQ(api().count(&n), NVML_ERROR_UNINITIALIZED);
  EXPECT_STREQ(api().error_string(NVML_ERROR_GPU_IS_LOST), "GPU is lost");
  EXPECT_STREQ(api().error_string(NVML_ERROR_FUNCTION_NOT_FOUND), "Function Not Found");
}

TEST_F(NvmlSim, EnumerationAndIdentity) {
  ASSERT_EQ(start(kBase, 10), NVML_SUCCESS);
  unsigned n = 0;
  ASSERT_EQ(api().count(&n), NVML_SUCCESS);
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(api().count_v1(&n), NVML_SUCCESS);
  EXPECT_EQ(api().count(nullptr), NVML_ERROR_INVALID_ARGUMENT);
  nvmlDevice_t h[3];
  for (unsigned i = 0; i < 3; ++i) h[i] = handle(i);
  EXPECT_NE(h[0], h[1]);
  nvmlDevice_t v1 = nullptr;
  EXPECT_EQ(api().by_index_v1(1, &v1), NVML_SUCCESS);
  EXPECT_EQ(v1, h[1]);
  nvmlDevice_t out = nullptr;
  EXPECT_EQ(api().by_index(3, &out), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(api().by_index(0, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  unsigned idx = 0;
  EXPECT_EQ(api().index(h[2], &idx), NVML_SUCCESS);
  EXPECT_EQ(idx, 2u);
  int junk = 0;
  EXPECT_EQ(api().index(reinterpret_cast<nvmlDevice_t>(&junk), &idx), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(api().index(nullptr, &idx), NVML_ERROR_INVALID_ARGUMENT);

  char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  ASSERT_EQ(api().uuid(h[0], buf, sizeof buf), NVML_SUCCESS);
  EXPECT_STREQ(buf, "GPU-00000000-1111-2222-3333-444444444444");
  EXPECT_EQ(api().by_uuid(buf, &out), NVML_SUCCESS);
  EXPECT_EQ(out, h[0]);
  ASSERT_EQ(api().uuid(h[1], buf, sizeof buf), NVML_SUCCESS);
  EXPECT_EQ(std::string(buf).rfind("GPU-", 0), 0u);
  EXPECT_EQ(api().by_uuid(buf, &out), NVML_SUCCESS);
  EXPECT_EQ(out, h[1]);
  EXPECT_EQ(api().by_uuid("GPU-nope", &out), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(api().by_uuid(nullptr, &out), NVML_ERROR_INVALID_ARGUMENT);

  const std::string name = "Test GPU 16GB";
  EXPECT_EQ(api().name(h[0], buf, static_cast<unsigned>(name.size())), NVML_ERROR_INSUFFICIENT_SIZE);
  ASSERT_EQ(api().name(h[0], buf, static_cast<unsigned>(name.size() + 1)), NVML_SUCCESS);
  EXPECT_EQ(buf, name);
  EXPECT_EQ(api().name(h[0], nullptr, 96), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(api().name(h[2], buf, sizeof buf), NVML_SUCCESS);
  EXPECT_STREQ(buf, "Test GPU With Fan");
  ASSERT_EQ(api().serial(h[0], buf, NVML_DEVICE_SERIAL_BUFFER_SIZE), NVML_SUCCESS);
  EXPECT_EQ(std::strlen(buf), 13u);
  ASSERT_EQ(api().vbios(h[2], buf, NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE), NVML_SUCCESS);
  EXPECT_STREQ(buf, "94.02.5C.00.01");

  nvmlPciInfo_t pci{};
  ASSERT_EQ(api().pci_v3(h[0], &pci), NVML_SUCCESS);
  EXPECT_STREQ(pci.busId, "00000000:18:00.0");
  EXPECT_STREQ(pci.busIdLegacy, "0000:18:00.0");
  EXPECT_EQ(pci.bus, 0x18u);
  ASSERT_EQ(api().pci_v2(h[1], &pci), NVML_SUCCESS);
  EXPECT_STREQ(pci.busId, "00000000:2A:00.0");
  EXPECT_EQ(api().pci_v3(h[0], nullptr), NVML_ERROR_INVALID_ARGUMENT);

  ASSERT_EQ(api().driver_version(buf, NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE), NVML_SUCCESS);
  EXPECT_STREQ(buf, "550.90.07");
  EXPECT_EQ(api().driver_version(buf, 5), NVML_ERROR_INSUFFICIENT_SIZE);
  ASSERT_EQ(api().nvml_version(buf, 80), NVML_SUCCESS);
  EXPECT_STREQ(buf, "12.550.90.07");
  int cuda = 0;
  ASSERT_EQ(api().cuda_version(&cuda), NVML_SUCCESS);
  EXPECT_EQ(cuda, 12040);
}

TEST_F(NvmlSim, DeviceMetrics) {
  ASSERT_EQ(start(kBase, 10), NVML_SUCCESS);
  nvmlDevice_t h0 = handle(0), h2 = handle(2);

  nvmlMemory_v2_t m2{};
  m2.version = 2;  // the bare number, as nvtop sets it: real drivers refuse it
  EXPECT_EQ(api().memory_v2(h0, &m2), NVML_ERROR_FUNCTION_NOT_FOUND);
  m2.version = nvmlMemory_v2;
  ASSERT_EQ(api().memory_v2(h0, &m2), NVML_SUCCESS);
  EXPECT_EQ(m2.total, 16ULL << 30);
  EXPECT_EQ(m2.used, 4ULL << 30);
  EXPECT_EQ(m2.free, 12ULL << 30);
  m2.version = nvmlMemory_v2;
  ASSERT_EQ(api().memory_v2(h2, &m2), NVML_SUCCESS);
  EXPECT_EQ(m2.reserved, 256ULL << 20);
  EXPECT_EQ(m2.used, 0u);
  nvmlMemory_t m1{};
  ASSERT_EQ(api().memory(h2, &m1), NVML_SUCCESS);
  EXPECT_EQ(m1.used, 256ULL << 20);  // v1 counts the reserved part as used
  EXPECT_EQ(m1.free, (8ULL << 30) - (256ULL << 20));

  nvmlUtilization_t u{};
  ASSERT_EQ(api().utilization(h0, &u), NVML_SUCCESS);
  EXPECT_EQ(u.gpu, 50u);
  EXPECT_EQ(u.memory, 30u);
  unsigned v = 0;
  ASSERT_EQ(api().power(h0, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 150000u);
  ASSERT_EQ(api().enforced_limit(h0, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 300000u);
  ASSERT_EQ(api().management_limit(h2, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 200000u);
  ASSERT_EQ(api().temperature(h0, NVML_TEMPERATURE_GPU, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 55u);
  EXPECT_EQ(api().temperature(h0, 7, &v), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(api().clock(h0, NVML_CLOCK_SM, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 1810u);
  ASSERT_EQ(api().clock(h2, NVML_CLOCK_SM, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 300u);
  ASSERT_EQ(api().max_clock(h2, NVML_CLOCK_MEM, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 4000u);
  EXPECT_EQ(api().clock(h0, 9, &v), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(api().pstate(h0, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 0u);
  ASSERT_EQ(api().pstate(h2, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 8u);
  EXPECT_EQ(api().fan(h0, &v), NVML_ERROR_NOT_SUPPORTED);
  ASSERT_EQ(api().fan(h2, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 30u);
  for (auto f : {api().pcie_gen, api().pcie_max_gen}) {
    ASSERT_EQ(f(h0, &v), NVML_SUCCESS);
    EXPECT_EQ(v, 4u);
  }
  for (auto f : {api().pcie_width, api().pcie_max_width}) {
    ASSERT_EQ(f(h0, &v), NVML_SUCCESS);
    EXPECT_EQ(v, 16u);
  }
  ASSERT_EQ(api().replay(h0, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 0u);
  EXPECT_EQ(api().power(h0, nullptr), NVML_ERROR_INVALID_ARGUMENT);

  unsigned long long r = 99;
  ASSERT_EQ(api().reasons(h0, &r), NVML_SUCCESS);
  EXPECT_EQ(r, 0u);
  ASSERT_EQ(api().throttle_reasons(h2, &r), NVML_SUCCESS);
  EXPECT_EQ(r, nvmlClocksEventReasonGpuIdle);
  ASSERT_EQ(api().supported_reasons(h0, &r), NVML_SUCCESS);
  EXPECT_NE(r & nvmlClocksEventReasonGpuIdle, 0u);
  ASSERT_EQ(api().supported_throttle(h0, &r), NVML_SUCCESS);
  EXPECT_NE(r & nvmlClocksEventReasonSwPowerCap, 0u);

  ASSERT_EQ(api().ecc(h0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &r), NVML_SUCCESS);
  EXPECT_EQ(r, 0u);
  EXPECT_EQ(api().ecc(h2, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &r), NVML_ERROR_NOT_SUPPORTED);
  unsigned a = 1, b = 1, c = 1, d = 1;
  ASSERT_EQ(api().remapped(h0, &a, &b, &c, &d), NVML_SUCCESS);
  EXPECT_EQ(a + b + c + d, 0u);
  EXPECT_EQ(api().remapped(h2, &a, &b, &c, &d), NVML_ERROR_NOT_SUPPORTED);

  nvmlFieldValue_t fv[5] = {};
  fv[0].fieldId = NVML_FI_DEV_MEMORY_TEMP;
  fv[1].fieldId = NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION;
  fv[2].fieldId = NVML_FI_DEV_PCIE_COUNT_TX_BYTES;
  fv[3].fieldId = NVML_FI_DEV_PCIE_COUNT_RX_BYTES;
  fv[4].fieldId = 999;  // not a field the simulator serves
  ASSERT_EQ(api().fields(h0, 5, fv), NVML_SUCCESS);
  EXPECT_EQ(fv[0].nvmlReturn, NVML_SUCCESS);
  EXPECT_EQ(fv[0].valueType, NVML_VALUE_TYPE_UNSIGNED_INT);
  EXPECT_EQ(fv[0].value.uiVal, 60u);  // GPU 55 °C + 5
  EXPECT_EQ(fv[1].nvmlReturn, NVML_SUCCESS);
  EXPECT_GT(fv[1].value.ullVal, 0u);
  // The PCIe byte counters came with R555; this is R550 (the R555 values are checked with
  // the driver upgrade).
  EXPECT_EQ(fv[2].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(fv[3].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(fv[4].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
  EXPECT_GT(fv[0].timestamp, 1'600'000'000'000'000LL);
  EXPECT_EQ(api().fields(h0, 0, fv), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(NvmlSim, RunningProcessesFollowTheSizeQueryProtocol) {
  ASSERT_EQ(start(kBase, 10), NVML_SUCCESS);
  nvmlDevice_t h1 = handle(1), h2 = handle(2);
  for (auto fn : {api().compute_v3, api().compute_v2}) {
    unsigned n = 0;
    ASSERT_EQ(fn(h1, &n, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
    EXPECT_EQ(n, 2u);
    nvmlProcessInfo_t infos[4] = {};
    n = 1;
    EXPECT_EQ(fn(h1, &n, infos), NVML_ERROR_INSUFFICIENT_SIZE);
    EXPECT_EQ(n, 2u);
    n = 4;
    ASSERT_EQ(fn(h1, &n, infos), NVML_SUCCESS);
    ASSERT_EQ(n, 2u);
    EXPECT_EQ(infos[0].pid, 5001u);
    EXPECT_EQ(infos[0].usedGpuMemory, 1ULL << 30);
    EXPECT_EQ(infos[0].gpuInstanceId, 0xFFFFFFFFu);
    EXPECT_EQ(infos[0].computeInstanceId, 0xFFFFFFFFu);
    EXPECT_EQ(infos[1].pid, 5002u);
    EXPECT_EQ(infos[1].usedGpuMemory, 2ULL << 30);
    n = 0;
    EXPECT_EQ(fn(h2, &n, nullptr), NVML_SUCCESS);  // nothing running
    EXPECT_EQ(n, 0u);
    EXPECT_EQ(fn(h1, nullptr, infos), NVML_ERROR_INVALID_ARGUMENT);
    n = 4;
    EXPECT_EQ(fn(h1, &n, nullptr), NVML_ERROR_INVALID_ARGUMENT);  // room claimed, no buffer
  }
  // The legacy function writes the 16-byte v1 records.
  nvmlProcessInfo_v1_t v1[3] = {};
  unsigned n = 3;
  ASSERT_EQ(api().compute_v1(h1, &n, v1), NVML_SUCCESS);
  ASSERT_EQ(n, 2u);
  EXPECT_EQ(v1[1].pid, 5002u);
  EXPECT_EQ(v1[1].usedGpuMemory, 2ULL << 30);
  EXPECT_EQ(v1[2].pid, 0u);
  for (auto fn : {api().graphics_v3, api().mps_v3}) {
    n = 0;
    EXPECT_EQ(fn(h1, &n, nullptr), NVML_SUCCESS);
    EXPECT_EQ(n, 0u);
  }
}

TEST_F(NvmlSim, SampleBuffers) {
  // 100x slower than real time, so no new 200 ms period completes while the test runs.
  ASSERT_EQ(start(kBase, 10.1, 0.01), NVML_SUCCESS);
  nvmlDevice_t h0 = handle(0), h1 = handle(1), h2 = handle(2);
  const std::int64_t epoch_us = epoch_ns_ / 1000;

  unsigned type = 99, n = 0;
  ASSERT_EQ(api().samples(h0, NVML_GPU_UTILIZATION_SAMPLES, 0, &type, &n, nullptr), NVML_SUCCESS);
  EXPECT_EQ(type, NVML_VALUE_TYPE_UNSIGNED_INT);
  ASSERT_EQ(n, 50u);  // periods ending at 0.2 s .. 10 s
  std::vector<nvmlSample_t> buf(n);
  ASSERT_EQ(api().samples(h0, NVML_GPU_UTILIZATION_SAMPLES, 0, &type, &n, buf.data()), NVML_SUCCESS);
  ASSERT_EQ(n, 50u);
  for (unsigned i = 0; i < n; ++i) {
    EXPECT_EQ(static_cast<std::int64_t>(buf[i].timeStamp), epoch_us + (i + 1) * 200'000LL);
    EXPECT_EQ(buf[i].sampleValue.uiVal, 50u);
  }
  unsigned long long last = buf.back().timeStamp;
  EXPECT_EQ(api().samples(h0, NVML_GPU_UTILIZATION_SAMPLES, last, &type, &n, buf.data()), NVML_ERROR_NOT_FOUND);
  // A short buffer gets the oldest samples first; the caller pages on with their timestamp.
  // Power samples have their own buffer: 100 ms periods.
  n = 10;
  ASSERT_EQ(api().samples(h0, NVML_TOTAL_POWER_SAMPLES, buf[19].timeStamp, &type, &n, buf.data()), NVML_SUCCESS);
  ASSERT_EQ(n, 10u);
  EXPECT_EQ(static_cast<std::int64_t>(buf[0].timeStamp), epoch_us + 41 * 100'000LL);
  EXPECT_EQ(static_cast<std::int64_t>(buf[9].timeStamp), epoch_us + 50 * 100'000LL);
  EXPECT_EQ(buf[0].sampleValue.uiVal, 150000u);
  n = 0;
  EXPECT_EQ(api().samples(h0, NVML_GPU_UTILIZATION_SAMPLES, 0, &type, &n, buf.data()), NVML_ERROR_INVALID_ARGUMENT);
  n = 1;
  EXPECT_EQ(api().samples(h0, 5, 0, &type, &n, buf.data()), NVML_ERROR_NOT_SUPPORTED);
  n = 1;
  ASSERT_EQ(api().samples(h2, NVML_GPU_UTILIZATION_SAMPLES, 0, &type, &n, buf.data()), NVML_SUCCESS);
  EXPECT_EQ(buf[0].sampleValue.uiVal, 0u);
  ASSERT_EQ(api().samples(h2, NVML_TOTAL_POWER_SAMPLES, 0, &type, &n, buf.data()), NVML_SUCCESS);
  EXPECT_EQ(buf[0].sampleValue.uiVal, 20000u);  // idle
  // Memory utilization comes from the utilization buffer: 60% of GPU 1's 30% + 20%.
  n = static_cast<unsigned>(buf.size());
  ASSERT_EQ(api().samples(h1, NVML_MEMORY_UTILIZATION_SAMPLES, 0, &type, &n, buf.data()), NVML_SUCCESS);
  EXPECT_EQ(n, 50u);
  EXPECT_EQ(buf[0].sampleValue.uiVal, 30u);
  EXPECT_EQ(static_cast<std::int64_t>(buf[0].timeStamp), epoch_us + 200'000LL);
  // 100 ms power periods: 100 of them by 10 s, at most the 120 buffered.
  ASSERT_EQ(api().samples(h2, NVML_TOTAL_POWER_SAMPLES, 0, &type, &n, nullptr), NVML_SUCCESS);
  EXPECT_GE(n, 100u);
  EXPECT_LE(n, 101u);
}

TEST_F(NvmlSim, NoSampleBeforeTheFirstPeriodEnds) {
  ASSERT_EQ(start(kBase, 0.05, 0.01), NVML_SUCCESS);
  unsigned type = 0, n = 0;
  EXPECT_EQ(api().samples(handle(0), NVML_GPU_UTILIZATION_SAMPLES, 0, &type, &n, nullptr), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(n, 0u);
}

// The counter's plumbing against the model's exact truth: each read is bracketed by the
// scenario times just before and just after it.
TEST_F(NvmlSim, EnergyCounterMatchesTheTruth) {
  const std::string yaml = std::string(testing::kModel) + R"(
gpus: {count: 1, model: m}
jobs:
  - {name: w, start: 30, gpus: [0], pid: 1,
     utilization: {pattern: square, high: 0.9, low: 0.2, period: 7, duty: 0.4}}
faults:
  - {kind: driver_reload, at: 1}
)";
  auto scenario = parse_scenario(yaml, "energy.yaml");
  ASSERT_TRUE(scenario.ok());
  ASSERT_EQ(start(yaml, 100, 1000), NVML_SUCCESS);
  nvmlDevice_t h = handle(0);
  for (int i = 0; i < 5; ++i) {
    Micros before = scenario_now();
    unsigned long long mj = 0;
    ASSERT_EQ(api().energy(h, &mj), NVML_SUCCESS);
    Micros after = scenario_now();
    const Micros reload = kMicrosPerSecond;
    double lo = compute_truth(*scenario, reload, before).gpus[0].energy_joules * 1000;
    double hi = compute_truth(*scenario, reload, after + 1).gpus[0].energy_joules * 1000;
    EXPECT_GE(static_cast<double>(mj), std::floor(lo) - 1) << "read " << i;
    EXPECT_LE(static_cast<double>(mj), std::ceil(hi) + 1) << "read " << i;
    std::this_thread::sleep_for(15ms);  // 15 scenario seconds
  }
}

TEST_F(NvmlSim, LostGpuReturnsGpuIsLostThenComesBack) {
  const std::string yaml = kBase + "faults:\n  - {kind: lost, gpu: 1, at: 100, duration: 100}\n";
  // 200x real time: the window [100, 200) lasts 0.5 s and starts 0.25 s from now.
  ASSERT_EQ(start(yaml, 50, 200), NVML_SUCCESS);
  nvmlDevice_t h0 = handle(0), h1 = handle(1);
  char uuid1[96];
  ASSERT_EQ(api().uuid(h1, uuid1, sizeof uuid1), NVML_SUCCESS);

  sleep_until_scenario(150);
  unsigned v = 0;
  nvmlDevice_t out = nullptr;
  ASSERT_LT(scenario_now(), 190 * kMicrosPerSecond) << "the test machine stalled";
  EXPECT_EQ(api().power(h1, &v), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(api().by_index(1, &out), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(api().by_uuid(uuid1, &out), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(api().uuid(h1, uuid1, sizeof uuid1), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(api().power(h0, &v), NVML_SUCCESS);  // other GPUs are unaffected
  unsigned n = 0;
  EXPECT_EQ(api().count(&n), NVML_SUCCESS);
  EXPECT_EQ(n, 3u);

  sleep_until_scenario(210);
  EXPECT_EQ(api().power(h1, &v), NVML_SUCCESS);  // the old handle works again
  EXPECT_EQ(v, 150000u);
  EXPECT_EQ(api().by_index(1, &out), NVML_SUCCESS);
  EXPECT_EQ(out, h1);
}

TEST_F(NvmlSim, UnknownErrorBurst) {
  const std::string yaml = kBase + "faults:\n  - {kind: unknown_errors, gpu: 2, at: 100, duration: 100}\n";
  ASSERT_EQ(start(yaml, 150), NVML_SUCCESS);
  unsigned v = 0;
  nvmlDevice_t out = nullptr;
  EXPECT_EQ(api().by_index(2, &out), NVML_ERROR_UNKNOWN);
  EXPECT_EQ(api().by_index(0, &out), NVML_SUCCESS);
  EXPECT_EQ(api().power(out, &v), NVML_SUCCESS);
  ASSERT_EQ(api().shutdown(), NVML_SUCCESS);

  ASSERT_EQ(start(yaml, 250), NVML_SUCCESS);  // after the burst
  EXPECT_EQ(api().by_index(2, &out), NVML_SUCCESS);
  EXPECT_EQ(api().power(out, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 20000u);
}

TEST_F(NvmlSim, HangBlocksOnlyTheCallingThreadOnce) {
  const std::string yaml =
      kBase + "faults:\n  - {kind: hang, gpu: 1, at: 5, seconds: 1, call: nvmlDeviceGetPowerUsage}\n";
  ASSERT_EQ(start(yaml, 10), NVML_SUCCESS);
  nvmlDevice_t h0 = handle(0), h1 = handle(1);
  nvmlReturn_t hung_result = NVML_ERROR_UNKNOWN;
  double hung_seconds = 0;
  std::thread hung([&] {
    unsigned v = 0;
    auto t0 = Clock::now();
    hung_result = api().power(h1, &v);
    hung_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  });
  std::this_thread::sleep_for(100ms);
  unsigned v = 0;
  auto t0 = Clock::now();
  EXPECT_EQ(api().power(h0, &v), NVML_SUCCESS);           // another GPU
  EXPECT_EQ(api().temperature(h1, 0, &v), NVML_SUCCESS);  // the same GPU, another call
  EXPECT_LT(Clock::now() - t0, 200ms);
  hung.join();
  EXPECT_EQ(hung_result, NVML_SUCCESS);
  EXPECT_GE(hung_seconds, 0.95);
  EXPECT_LT(hung_seconds, 3.0);
  t0 = Clock::now();
  EXPECT_EQ(api().power(h1, &v), NVML_SUCCESS);  // only once
  EXPECT_LT(Clock::now() - t0, 200ms);
}

TEST_F(NvmlSim, XidEventIsDeliveredWhenDue) {
  const std::string yaml = kBase + R"(faults:
  - {kind: xid, gpu: 2, at: 50, code: 31}
  - {kind: xid, gpu: 2, at: 100, code: 79}
)";
  ASSERT_EQ(start(yaml, 99.7), NVML_SUCCESS);
  nvmlDevice_t h0 = handle(0), h2 = handle(2);
  unsigned long long types = 0;
  ASSERT_EQ(api().supported_events(h2, &types), NVML_SUCCESS);
  EXPECT_NE(types & nvmlEventTypeXidCriticalError, 0u);
  nvmlEventSet_t set = nullptr;
  ASSERT_EQ(api().set_create(&set), NVML_SUCCESS);
  EXPECT_EQ(api().register_events(h2, 1ULL << 40, set), NVML_ERROR_NOT_SUPPORTED);
  ASSERT_EQ(api().register_events(h2, nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
  ASSERT_EQ(api().register_events(h0, nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);

  nvmlEventData_t e{};
  auto t0 = Clock::now();
  ASSERT_EQ(api().set_wait(set, &e, 3000), NVML_SUCCESS);
  auto waited = Clock::now() - t0;
  EXPECT_GT(waited, 150ms);   // it slept until the event came due...
  EXPECT_LT(waited, 1500ms);  // ...not until the timeout
  EXPECT_EQ(e.device, h2);
  EXPECT_EQ(e.eventType, nvmlEventTypeXidCriticalError);
  EXPECT_EQ(e.eventData, 79u);  // the Xid at 50 s predates the registration
  EXPECT_EQ(e.gpuInstanceId, 0xFFFFFFFFu);

  t0 = Clock::now();
  EXPECT_EQ(api().set_wait(set, &e, 100), NVML_ERROR_TIMEOUT);
  EXPECT_GE(Clock::now() - t0, 100ms);
  EXPECT_EQ(api().set_wait(set, nullptr, 10), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(api().set_free(set), NVML_SUCCESS);
  EXPECT_EQ(api().set_free(set), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(api().set_wait(set, &e, 10), NVML_ERROR_INVALID_ARGUMENT);
}

// The video engines: sum b_j * engine_j of the jobs present (profiling.h), in percent.
TEST_F(NvmlSim, EncoderAndDecoderUtilizationFollowTheJobsProfiles) {
  const std::string yaml = std::string(testing::kModel) + R"(gpus:
  count: 2
  model: m
jobs:
  - {name: transcode, gpus: [0], pid: 10, utilization: 0.8, profile: {encoder: 0.5, decoder: 0.25}}
  - {name: train, gpus: [0], pid: 11, start: 20, utilization: 0.6}
  - {name: decode, gpus: [1], pid: 12, utilization: 0.3, profile: {decoder: 1}}
)";
  ASSERT_EQ(start(yaml, 10), NVML_SUCCESS);
  auto encoder = api().get<nvmlDeviceGetEnumPair_fn>("nvmlDeviceGetEncoderUtilization");
  auto decoder = api().get<nvmlDeviceGetEnumPair_fn>("nvmlDeviceGetDecoderUtilization");
  ASSERT_NE(encoder, nullptr);
  ASSERT_NE(decoder, nullptr);
  unsigned pct = 99, period = 0;
  ASSERT_EQ(encoder(handle(0), &pct, &period), NVML_SUCCESS);
  EXPECT_EQ(pct, 40u);  // 0.8 busy * 0.5
  EXPECT_EQ(period, 167'000u);
  ASSERT_EQ(decoder(handle(0), &pct, &period), NVML_SUCCESS);
  EXPECT_EQ(pct, 20u);
  ASSERT_EQ(encoder(handle(1), &pct, &period), NVML_SUCCESS);
  EXPECT_EQ(pct, 0u);
  ASSERT_EQ(decoder(handle(1), &pct, &period), NVML_SUCCESS);
  EXPECT_EQ(pct, 30u);
  EXPECT_EQ(encoder(handle(0), nullptr, &period), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(decoder(handle(0), &pct, nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(NvmlSim, UnsupportedFunctionsAndFields) {
  setenv("GPUMETER_SIM_UNSUPPORTED", "nvmlDeviceGetPowerUsage, nvmlSystemGetCudaDriverVersion,NVML_FI_DEV_MEMORY_TEMP",
         1);
  ASSERT_EQ(start(kBase, 10), NVML_SUCCESS);
  nvmlDevice_t h0 = handle(0);
  unsigned v = 0;
  EXPECT_EQ(api().power(h0, &v), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(api().temperature(h0, 0, &v), NVML_SUCCESS);
  int cuda = 0;
  EXPECT_EQ(api().cuda_version(&cuda), NVML_ERROR_NOT_SUPPORTED);
  nvmlFieldValue_t fv[2] = {};
  fv[0].fieldId = NVML_FI_DEV_MEMORY_TEMP;
  fv[1].fieldId = NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION;
  ASSERT_EQ(api().fields(h0, 2, fv), NVML_SUCCESS);
  EXPECT_EQ(fv[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(fv[1].nvmlReturn, NVML_SUCCESS);
}

TEST_F(NvmlSim, ConcurrentCallsOnAllGpus) {
  ASSERT_EQ(start(kBase, 10, 100), NVML_SUCCESS);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (unsigned t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      nvmlDevice_t h = nullptr;
      if (api().by_index(t % 3, &h) != NVML_SUCCESS) ++failures;
      auto end = Clock::now() + 150ms;
      while (Clock::now() < end) {
        unsigned v = 0, n = 8;
        unsigned long long e = 0;
        nvmlProcessInfo_t infos[8];
        nvmlSample_t samples[100];
        unsigned type = 0, count = 100;
        if (api().power(h, &v) != NVML_SUCCESS) ++failures;
        if (api().energy(h, &e) != NVML_SUCCESS) ++failures;
        if (api().compute_v3(h, &n, infos) != NVML_SUCCESS) ++failures;
        nvmlReturn_t r = api().samples(h, NVML_GPU_UTILIZATION_SAMPLES, 0, &type, &count, samples);
        if (r != NVML_SUCCESS) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace gpumeter::sim
