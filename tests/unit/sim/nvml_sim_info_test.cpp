// The informational NVML queries (nvml_exports_info.cpp, nvml_exports_limits.cpp) through
// dlopen(), as pynvml's nvidia_smi.DeviceQuery makes them: values derived from the scenario's
// model, NOT_SUPPORTED where nvml.h says the product lacks the feature, NVML's argument checks,
// and the fault gate.

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "abi/nvml_api.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

using InforomFn = nvmlDeviceGetInforomVersion_fn;

void* lib() {
  static void* handle = dlopen(GPUMETER_SIM_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  return handle;
}

template <typename F>
F sym(const char* name) {
  void* p = dlsym(lib(), name);
  if (p == nullptr) ADD_FAILURE() << "missing symbol " << name;
  return reinterpret_cast<F>(p);
}

// Every call pynvml 11.5.3's nvidia_smi.DeviceQuery() makes that nvml_exports_info.cpp
// and nvml_exports_limits.cpp provide, by the symbol pynvml looks up.
const char* const kInfoSymbols[] = {
    "nvmlDeviceGetBrand", "nvmlDeviceGetDisplayMode", "nvmlDeviceGetDisplayActive", "nvmlDeviceGetPersistenceMode",
    "nvmlDeviceGetAccountingMode", "nvmlDeviceGetAccountingBufferSize", "nvmlDeviceGetAccountingPids",
    "nvmlDeviceGetAccountingStats", "nvmlDeviceGetDriverModel", "nvmlDeviceGetDriverModel_v2",
    "nvmlDeviceGetMinorNumber", "nvmlDeviceGetMultiGpuBoard", "nvmlDeviceGetBoardId",
    "nvmlDeviceGetInforomImageVersion", "nvmlDeviceGetInforomVersion", "nvmlDeviceGetGpuOperationMode",
    "nvmlDeviceGetBridgeChipInfo", "nvmlDeviceGetPowerState", "nvmlDeviceGetBAR1MemoryInfo", "nvmlDeviceGetComputeMode",
    "nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetDecoderUtilization", "nvmlDeviceGetEccMode",
    "nvmlDeviceGetMemoryErrorCounter", "nvmlDeviceGetRetiredPages", "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetTemperatureThreshold", "nvmlDeviceGetPowerManagementMode", "nvmlDeviceGetPowerManagementDefaultLimit",
    "nvmlDeviceGetPowerManagementLimitConstraints", "nvmlDeviceGetApplicationsClock",
    "nvmlDeviceGetDefaultApplicationsClock", "nvmlDeviceGetAutoBoostedClocksEnabled",
    "nvmlDeviceGetSupportedMemoryClocks", "nvmlDeviceGetSupportedGraphicsClocks", "nvmlSystemGetProcessName",
    // Not in DeviceQuery, but asked by most other clients (nvitop, dcgm-exporter).
    "nvmlDeviceGetArchitecture", "nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetMigMode",
    "nvmlDeviceGetGridLicensableFeatures_v4",  // DCGM's DCGM_FI_DEV_VGPU_LICENSE_STATUS
};

// GPU 0 ("m", ECC on, 16 GiB) runs job "a"; GPU 1 is a datacenter model with ECC turned off and
// a fan; GPU 2 ("m") idles. "late" starts after the scenario time the tests run at.
const std::string kScenario = std::string(testing::kModel) + R"(
  noecc:
    name: Test GPU 40GB
    architecture: ampere
    memory: 40GiB
    power: {limit: 400, idle: 60, max: 380}
    clocks:
      graphics: {idle: 210, max: 1410}
      sm: {idle: 210, max: 1410}
      memory: {idle: 1215, max: 1215}
      video: {idle: 585, max: 1290}
    fan: true
    ecc: false
gpus:
  - {model: m, pci_bus_id: "00000000:18:00.0"}
  - {model: noecc, pci_bus_id: "00000001:9A:00.0"}
  - {model: m}
jobs:
  - {name: a, gpus: [0], pid: 4242, memory: 4GiB, utilization: 0.5}
  - {name: a-training-job-with-a-long-name, gpus: [1], pid: 4343, memory: 1GiB, utilization: 0.2}
  - {name: late, start: 1h, gpus: [2], pid: 4444, memory: 1GiB, utilization: 0.2}
)";

class NvmlSimInfo : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(lib(), nullptr) << dlerror();
    unsetenv("GPUMETER_SIM_UNSUPPORTED");
    unsetenv("GPUMETER_SIM_TIME_SCALE");
  }
  void TearDown() override {
    auto shutdown = sym<nvmlShutdown_fn>("nvmlShutdown");
    while (shutdown() == NVML_SUCCESS) {
    }
  }

  // Loads `yaml` with scenario time 60 s now.
  void start(const std::string& yaml = kScenario) {
    setenv("GPUMETER_SIM_SCENARIO", testing::write_file("info.yaml", yaml).c_str(), 1);
    auto now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    setenv("GPUMETER_SIM_EPOCH", std::to_string(now - 60).c_str(), 1);
    ASSERT_EQ(sym<nvmlInit_fn>("nvmlInit_v2")(), NVML_SUCCESS);
  }

  nvmlDevice_t gpu(unsigned i) {
    nvmlDevice_t h = nullptr;
    EXPECT_EQ(sym<nvmlDeviceGetHandleByIndex_fn>("nvmlDeviceGetHandleByIndex_v2")(i, &h), NVML_SUCCESS);
    return h;
  }

  // One unsigned out-parameter: the value, or ~0u when the call fails with `expect`.
  unsigned get(const char* fn, nvmlDevice_t d, nvmlReturn_t expect = NVML_SUCCESS) {
    unsigned v = ~0U;
    EXPECT_EQ(sym<nvmlDeviceGetEnum_fn>(fn)(d, &v), expect) << fn;
    if (expect == NVML_SUCCESS) {
      EXPECT_EQ(sym<nvmlDeviceGetEnum_fn>(fn)(d, nullptr), NVML_ERROR_INVALID_ARGUMENT) << fn;
    }
    return v;
  }
};

TEST_F(NvmlSimInfo, EveryCallOfDeviceQueryIsExported) {
  for (const char* name : kInfoSymbols) EXPECT_NE(dlsym(lib(), name), nullptr) << name;
}

TEST_F(NvmlSimInfo, IdentityAndModesFollowTheModel) {
  start();
  EXPECT_EQ(get("nvmlDeviceGetBrand", gpu(0)), NVML_BRAND_NVIDIA);
  EXPECT_EQ(get("nvmlDeviceGetDisplayMode", gpu(0)), NVML_FEATURE_ENABLED);
  EXPECT_EQ(get("nvmlDeviceGetDisplayActive", gpu(0)), NVML_FEATURE_DISABLED);
  EXPECT_EQ(get("nvmlDeviceGetPersistenceMode", gpu(0)), NVML_FEATURE_ENABLED);
  EXPECT_EQ(get("nvmlDeviceGetComputeMode", gpu(0)), NVML_COMPUTEMODE_DEFAULT);
  EXPECT_EQ(get("nvmlDeviceGetMultiGpuBoard", gpu(0)), 0U);
  for (unsigned i = 0; i < 3; ++i) EXPECT_EQ(get("nvmlDeviceGetMinorNumber", gpu(i)), i);
  EXPECT_EQ(get("nvmlDeviceGetBoardId", gpu(0)), 0x1800U);   // 00000000:18:00.0
  EXPECT_EQ(get("nvmlDeviceGetBoardId", gpu(1)), 0x19A00U);  // 00000001:9A:00.0

  unsigned a = 7, b = 7;
  for (const char* fn : {"nvmlDeviceGetDriverModel", "nvmlDeviceGetDriverModel_v2", "nvmlDeviceGetGpuOperationMode",
                         "nvmlDeviceGetAutoBoostedClocksEnabled"}) {
    EXPECT_EQ(sym<nvmlDeviceGetEnumPair_fn>(fn)(gpu(0), &a, &b), NVML_ERROR_NOT_SUPPORTED) << fn;
  }
  nvmlBridgeChipHierarchy_t bridges{};
  EXPECT_EQ(sym<nvmlDeviceGetBridgeChipInfo_fn>("nvmlDeviceGetBridgeChipInfo")(gpu(0), &bridges),
            NVML_ERROR_NOT_SUPPORTED);
}

TEST_F(NvmlSimInfo, BrandFollowsTheProductName) {
  std::string yaml = kScenario;
  yaml.replace(yaml.find("Test GPU 16GB"), std::strlen("Test GPU 16GB"), "Tesla V100-SXM2-16GB");
  yaml.replace(yaml.find("Test GPU 40GB"), std::strlen("Test GPU 40GB"), "NVIDIA GeForce RTX 3090");
  start(yaml);
  EXPECT_EQ(get("nvmlDeviceGetBrand", gpu(0)), NVML_BRAND_TESLA);
  EXPECT_EQ(get("nvmlDeviceGetBrand", gpu(1)), NVML_BRAND_GEFORCE);
}

TEST_F(NvmlSimInfo, InforomVersionsWithNvmlBufferRules) {
  start();
  auto image = sym<nvmlDeviceGetString_fn>("nvmlDeviceGetInforomImageVersion");
  auto object = sym<InforomFn>("nvmlDeviceGetInforomVersion");
  char buf[NVML_DEVICE_INFOROM_VERSION_BUFFER_SIZE];
  ASSERT_EQ(image(gpu(0), buf, sizeof buf), NVML_SUCCESS);
  EXPECT_EQ(buf[0], 'G');
  EXPECT_LT(std::strlen(buf), sizeof buf);
  EXPECT_EQ(image(gpu(0), buf, 4), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(image(gpu(0), nullptr, sizeof buf), NVML_ERROR_INVALID_ARGUMENT);

  ASSERT_EQ(object(gpu(0), NVML_INFOROM_OEM, buf, sizeof buf), NVML_SUCCESS);
  EXPECT_STREQ(buf, "2.1");
  ASSERT_EQ(object(gpu(0), NVML_INFOROM_ECC, buf, sizeof buf), NVML_SUCCESS);
  EXPECT_STREQ(buf, "7.16");
  // ECC turned off still leaves the board's ECC object in place.
  EXPECT_EQ(object(gpu(1), NVML_INFOROM_ECC, buf, sizeof buf), NVML_SUCCESS);
  EXPECT_EQ(object(gpu(0), NVML_INFOROM_POWER, buf, sizeof buf), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(object(gpu(0), NVML_INFOROM_COUNT, buf, sizeof buf), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(object(gpu(0), NVML_INFOROM_OEM, buf, 3), NVML_ERROR_INSUFFICIENT_SIZE);
}

TEST_F(NvmlSimInfo, Bar1MapsTheFramebufferAndEachContextUsesSome) {
  start();
  auto bar1 = sym<nvmlDeviceGetBAR1MemoryInfo_fn>("nvmlDeviceGetBAR1MemoryInfo");
  constexpr unsigned long long MiB = 1 << 20;
  nvmlBAR1Memory_t m{};
  ASSERT_EQ(bar1(gpu(0), &m), NVML_SUCCESS);
  EXPECT_EQ(m.bar1Total, 16384 * MiB);
  EXPECT_EQ(m.bar1Used, 3 * MiB);  // the driver's own mapping and job "a"'s context
  EXPECT_EQ(m.bar1Free, m.bar1Total - m.bar1Used);
  ASSERT_EQ(bar1(gpu(1), &m), NVML_SUCCESS);
  EXPECT_EQ(m.bar1Total, 65536 * MiB);  // 40 GiB rounds up to the next power of two
  ASSERT_EQ(bar1(gpu(2), &m), NVML_SUCCESS);
  EXPECT_EQ(m.bar1Used, 1 * MiB);
  EXPECT_EQ(bar1(gpu(0), nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(NvmlSimInfo, VideoEnginesIdleWithASamplingPeriod) {
  start();
  for (const char* fn : {"nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetDecoderUtilization"}) {
    auto f = sym<nvmlDeviceGetEnumPair_fn>(fn);
    unsigned util = 99, period = 0;
    ASSERT_EQ(f(gpu(0), &util, &period), NVML_SUCCESS) << fn;
    EXPECT_EQ(util, 0U);
    EXPECT_GE(period, 1'000'000U / 6);
    EXPECT_LE(period, 1'000'000U);
    EXPECT_EQ(f(gpu(0), &util, nullptr), NVML_ERROR_INVALID_ARGUMENT) << fn;
  }
}

TEST_F(NvmlSimInfo, EccModeAndCountersNeedEccEnabled) {
  start();
  auto mode = sym<nvmlDeviceGetEnumPair_fn>("nvmlDeviceGetEccMode");
  unsigned current = 9, pending = 9;
  ASSERT_EQ(mode(gpu(0), &current, &pending), NVML_SUCCESS);
  EXPECT_EQ(current, NVML_FEATURE_ENABLED);
  EXPECT_EQ(pending, NVML_FEATURE_ENABLED);
  ASSERT_EQ(mode(gpu(1), &current, &pending), NVML_SUCCESS);
  EXPECT_EQ(current, NVML_FEATURE_DISABLED);
  EXPECT_EQ(mode(gpu(0), nullptr, &pending), NVML_ERROR_INVALID_ARGUMENT);

  auto counter = sym<nvmlDeviceGetMemoryErrorCounter_fn>("nvmlDeviceGetMemoryErrorCounter");
  unsigned long long n = 99;
  for (unsigned loc : {NVML_MEMORY_LOCATION_L1_CACHE, NVML_MEMORY_LOCATION_L2_CACHE, NVML_MEMORY_LOCATION_DEVICE_MEMORY,
                       NVML_MEMORY_LOCATION_REGISTER_FILE, NVML_MEMORY_LOCATION_SRAM}) {
    n = 99;
    EXPECT_EQ(counter(gpu(0), NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, loc, &n), NVML_SUCCESS) << loc;
    EXPECT_EQ(n, 0U);
  }
  EXPECT_EQ(counter(gpu(0), 0, 0, NVML_MEMORY_LOCATION_TEXTURE_MEMORY, &n), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(counter(gpu(0), 0, 0, NVML_MEMORY_LOCATION_CBU, &n), NVML_ERROR_NOT_SUPPORTED);  // not Volta
  EXPECT_EQ(counter(gpu(0), 0, 0, NVML_MEMORY_LOCATION_COUNT, &n), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(counter(gpu(0), 2, 0, NVML_MEMORY_LOCATION_DRAM, &n), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(counter(gpu(0), 0, 2, NVML_MEMORY_LOCATION_DRAM, &n), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(counter(gpu(0), 0, 0, NVML_MEMORY_LOCATION_DRAM, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(counter(gpu(1), 0, 0, NVML_MEMORY_LOCATION_DRAM, &n), NVML_ERROR_NOT_SUPPORTED);
}

TEST_F(NvmlSimInfo, PagesAreNotRetiredWhereRowsAreRemapped) {
  start();  // models default to Hopper
  auto pages = sym<nvmlDeviceGetRetiredPages_fn>("nvmlDeviceGetRetiredPages");
  unsigned count = 0;
  EXPECT_EQ(pages(gpu(0), NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, &count, nullptr), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(get("nvmlDeviceGetRetiredPagesPendingStatus", gpu(0), NVML_ERROR_NOT_SUPPORTED), ~0U);
}

// nvml.h on nvmlDeviceGetRemappedRows: "For Ampere or newer fully supported devices". Volta and
// Turing boards retire pages instead, so the two calls answer on disjoint architectures.
TEST_F(NvmlSimInfo, RowsAreRemappedFromAmpereOnAndPagesRetiredBefore) {
  std::string yaml = kScenario;
  yaml.replace(yaml.find("gpus:\n"), std::strlen("gpus:\n"), R"(  volta:
    name: Tesla V100-SXM2-16GB
    memory: 16GiB
    power: {limit: 300, idle: 40, max: 290}
    clocks:
      graphics: {idle: 135, max: 1530}
      sm: {idle: 135, max: 1530}
      memory: {idle: 877, max: 877}
      video: {idle: 555, max: 1372}
  turing:
    name: Tesla T4
    memory: 15GiB
    power: {limit: 70, idle: 10, max: 70}
    clocks:
      graphics: {idle: 300, max: 1590}
      sm: {idle: 300, max: 1590}
      memory: {idle: 5000, max: 5001}
      video: {idle: 540, max: 1470}
gpus:
  - {model: volta, pci_bus_id: "00000000:C1:00.0"}
  - {model: turing, pci_bus_id: "00000000:C2:00.0"}
)");
  start(yaml);  // GPUs 0 and 1 as above, then the three of kScenario: 2 Hopper, 3 ECC off
  auto rows = sym<nvmlDeviceGetRemappedRows_fn>("nvmlDeviceGetRemappedRows");
  auto pages = sym<nvmlDeviceGetRetiredPages_fn>("nvmlDeviceGetRetiredPages");
  unsigned corr = 9, unc = 9, pending = 9, failed = 9, count = 0;
  EXPECT_EQ(get("nvmlDeviceGetArchitecture", gpu(0)), NVML_DEVICE_ARCH_VOLTA);
  EXPECT_EQ(get("nvmlDeviceGetArchitecture", gpu(1)), NVML_DEVICE_ARCH_TURING);
  for (unsigned i : {0U, 1U}) {
    EXPECT_EQ(rows(gpu(i), &corr, &unc, &pending, &failed), NVML_ERROR_NOT_SUPPORTED) << i;
    EXPECT_EQ(pages(gpu(i), NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, &count, nullptr), NVML_SUCCESS)
        << i;
    EXPECT_EQ(count, 0U);
  }
  EXPECT_EQ(corr, 9U);  // a refused call writes nothing
  ASSERT_EQ(rows(gpu(2), &corr, &unc, &pending, &failed), NVML_SUCCESS);
  EXPECT_EQ(corr + unc + pending + failed, 0U);
  EXPECT_EQ(pages(gpu(2), NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, &count, nullptr),
            NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(rows(gpu(3), &corr, &unc, &pending, &failed), NVML_ERROR_NOT_SUPPORTED);  // Ampere, ECC off
}

// A GeForce Ada board (RTX 4090): nvidia-smi -q shows "Serial Number: N/A", "Persistence Mode:
// Disabled", "Ecc Mode: N/A" and "Applications Clocks: N/A" on such boards; no MIG, no remapped rows.
TEST_F(NvmlSimInfo, AGeForceAdaBoardLacksTheDatacenterFeatures) {
  std::string yaml = kScenario;
  yaml.replace(yaml.find("gpus:\n"), std::strlen("gpus:\n"), R"(  rtx:
    name: NVIDIA GeForce RTX 4090
    profile: geforce
    architecture: ada
    memory: 24564MiB
    power: {limit: 450, idle: 20, max: 440}
    clocks:
      graphics: {idle: 210, max: 3120}
      sm: {idle: 210, max: 3120}
      memory: {idle: 405, max: 10501}
      video: {idle: 1185, max: 2415}
gpus:
  - {model: rtx, serial: "1650000000001", pci_bus_id: "00000000:C3:00.0"}
)");
  start(yaml);
  char text[NVML_DEVICE_SERIAL_BUFFER_SIZE] = "unchanged";
  EXPECT_EQ(sym<nvmlDeviceGetString_fn>("nvmlDeviceGetSerial")(gpu(0), text, sizeof text),
            NVML_ERROR_NOT_SUPPORTED);  // even with a serial in the scenario
  EXPECT_STREQ(text, "unchanged");
  EXPECT_EQ(sym<nvmlDeviceGetString_fn>("nvmlDeviceGetSerial")(gpu(1), text, sizeof text), NVML_SUCCESS);
  EXPECT_EQ(get("nvmlDeviceGetBrand", gpu(0)), NVML_BRAND_GEFORCE);
  EXPECT_EQ(get("nvmlDeviceGetPersistenceMode", gpu(0)), NVML_FEATURE_DISABLED);
  EXPECT_EQ(get("nvmlDeviceGetArchitecture", gpu(0)), NVML_DEVICE_ARCH_ADA);
  unsigned a = 9, b = 9, c = 9, d = 9;
  auto pair = [&](const char* fn) { return sym<nvmlDeviceGetEnumPair_fn>(fn)(gpu(0), &a, &b); };
  EXPECT_EQ(pair("nvmlDeviceGetEccMode"), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(pair("nvmlDeviceGetMigMode"), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(sym<nvmlDeviceGetClockInfo_fn>("nvmlDeviceGetApplicationsClock")(gpu(0), NVML_CLOCK_GRAPHICS, &a),
            NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(sym<nvmlDeviceGetRemappedRows_fn>("nvmlDeviceGetRemappedRows")(gpu(0), &a, &b, &c, &d),
            NVML_ERROR_NOT_SUPPORTED);
  int major = 0, minor = 0;
  ASSERT_EQ(sym<nvmlDeviceGetCudaComputeCapability_fn>("nvmlDeviceGetCudaComputeCapability")(gpu(0), &major, &minor),
            NVML_SUCCESS);
  EXPECT_EQ(major * 10 + minor, 89);
}

TEST_F(NvmlSimInfo, TemperatureThresholdsSitAboveWhatTheModelReaches) {
  start();
  auto threshold = sym<nvmlDeviceGetTemperature_fn>("nvmlDeviceGetTemperatureThreshold");
  unsigned shutdown = 0, slowdown = 0, gpu_max = 0, mem_max = 0, t = 0;
  ASSERT_EQ(threshold(gpu(0), NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, &shutdown), NVML_SUCCESS);
  ASSERT_EQ(threshold(gpu(0), NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &slowdown), NVML_SUCCESS);
  ASSERT_EQ(threshold(gpu(0), NVML_TEMPERATURE_THRESHOLD_GPU_MAX, &gpu_max), NVML_SUCCESS);
  ASSERT_EQ(threshold(gpu(0), NVML_TEMPERATURE_THRESHOLD_MEM_MAX, &mem_max), NVML_SUCCESS);  // HBM
  EXPECT_GT(shutdown, slowdown);
  EXPECT_GT(slowdown, gpu_max);
  EXPECT_GT(gpu_max, 80U);  // the model's maximum temperature
  EXPECT_EQ(mem_max, 95U);
  EXPECT_EQ(threshold(gpu(0), NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR, &t), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(threshold(gpu(0), NVML_TEMPERATURE_THRESHOLD_GPS_CURR, &t), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(threshold(gpu(0), NVML_TEMPERATURE_THRESHOLD_COUNT, &t), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(threshold(gpu(0), NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(NvmlSimInfo, PowerLimitsComeFromTheModel) {
  start();
  EXPECT_EQ(get("nvmlDeviceGetPowerManagementDefaultLimit", gpu(0)), 300'000U);
  EXPECT_EQ(get("nvmlDeviceGetPowerManagementDefaultLimit", gpu(1)), 400'000U);
  EXPECT_EQ(get("nvmlDeviceGetPowerManagementMode", gpu(0)), NVML_FEATURE_ENABLED);
  auto constraints = sym<nvmlDeviceGetEnumPair_fn>("nvmlDeviceGetPowerManagementLimitConstraints");
  unsigned lo = 0, hi = 0;
  ASSERT_EQ(constraints(gpu(1), &lo, &hi), NVML_SUCCESS);
  EXPECT_EQ(lo, 100'000U);
  EXPECT_EQ(hi, 400'000U);
  EXPECT_EQ(constraints(gpu(1), &lo, nullptr), NVML_ERROR_INVALID_ARGUMENT);

  unsigned pstate = 99;
  ASSERT_EQ(sym<nvmlDeviceGetUInt_fn>("nvmlDeviceGetPerformanceState")(gpu(0), &pstate), NVML_SUCCESS);
  EXPECT_EQ(get("nvmlDeviceGetPowerState", gpu(0)), pstate);
}

TEST_F(NvmlSimInfo, ApplicationAndSupportedClocks) {
  start();
  auto app = sym<nvmlDeviceGetClockInfo_fn>("nvmlDeviceGetApplicationsClock");
  auto app_default = sym<nvmlDeviceGetClockInfo_fn>("nvmlDeviceGetDefaultApplicationsClock");
  auto max_clock = sym<nvmlDeviceGetClockInfo_fn>("nvmlDeviceGetMaxClockInfo");
  for (unsigned type : {NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_CLOCK_VIDEO}) {
    unsigned a = 0, d = 0, m = 1;
    ASSERT_EQ(app(gpu(0), type, &a), NVML_SUCCESS);
    ASSERT_EQ(app_default(gpu(0), type, &d), NVML_SUCCESS);
    ASSERT_EQ(max_clock(gpu(0), type, &m), NVML_SUCCESS);
    EXPECT_EQ(a, m) << type;
    EXPECT_EQ(d, m) << type;
  }
  unsigned c = 0;
  EXPECT_EQ(app(gpu(0), NVML_CLOCK_VIDEO + 1, &c), NVML_ERROR_INVALID_ARGUMENT);

  auto memory = sym<nvmlDeviceGetSupportedMemoryClocks_fn>("nvmlDeviceGetSupportedMemoryClocks");
  unsigned count = 0;
  ASSERT_EQ(memory(gpu(0), &count, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
  ASSERT_EQ(count, 1U);
  unsigned mem_clock = 0;
  ASSERT_EQ(memory(gpu(0), &count, &mem_clock), NVML_SUCCESS);
  EXPECT_EQ(mem_clock, 5001U);
  EXPECT_EQ(memory(gpu(0), nullptr, &mem_clock), NVML_ERROR_INVALID_ARGUMENT);

  auto graphics = sym<nvmlDeviceGetSupportedGraphicsClocks_fn>("nvmlDeviceGetSupportedGraphicsClocks");
  count = 0;
  ASSERT_EQ(graphics(gpu(0), 5001, &count, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
  ASSERT_EQ(count, 101U);  // 1800 down to 300 MHz in 15 MHz steps
  std::vector<unsigned> clocks(count);
  unsigned short_count = 10;
  EXPECT_EQ(graphics(gpu(0), 5001, &short_count, clocks.data()), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(short_count, 101U);
  ASSERT_EQ(graphics(gpu(0), 5001, &count, clocks.data()), NVML_SUCCESS);
  EXPECT_EQ(clocks.front(), 1800U);
  EXPECT_EQ(clocks.back(), 300U);
  EXPECT_EQ(graphics(gpu(0), 5000, &count, clocks.data()), NVML_ERROR_NOT_FOUND);
}

TEST_F(NvmlSimInfo, ArchitectureComputeCapabilityAndMigMode) {
  start();  // models default to Hopper datacenter boards
  EXPECT_EQ(get("nvmlDeviceGetArchitecture", gpu(0)), NVML_DEVICE_ARCH_HOPPER);
  auto cc = sym<nvmlDeviceGetCudaComputeCapability_fn>("nvmlDeviceGetCudaComputeCapability");
  int major = 0, minor = -1;
  ASSERT_EQ(cc(gpu(0), &major, &minor), NVML_SUCCESS);
  EXPECT_EQ(major, 9);
  EXPECT_EQ(minor, 0);
  EXPECT_EQ(cc(gpu(0), &major, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  // MIG-capable, and no scenario turns MIG on.
  auto mig = sym<nvmlDeviceGetEnumPair_fn>("nvmlDeviceGetMigMode");
  unsigned current = 9, pending = 9;
  ASSERT_EQ(mig(gpu(0), &current, &pending), NVML_SUCCESS);
  EXPECT_EQ(current, NVML_DEVICE_MIG_DISABLE);
  EXPECT_EQ(pending, NVML_DEVICE_MIG_DISABLE);
  EXPECT_EQ(mig(gpu(0), nullptr, &pending), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(NvmlSimInfo, BareMetalLicensesNoVgpuSoftwareAndAGuestItsVgpuFeature) {
  auto features = sym<nvmlDeviceGetGridLicensableFeatures_fn>("nvmlDeviceGetGridLicensableFeatures_v4");
  start();
  nvmlGridLicensableFeatures_t f{};
  f.isGridLicenseSupported = 7;
  f.licensableFeaturesCount = 7;
  ASSERT_EQ(features(gpu(0), &f), NVML_SUCCESS);
  EXPECT_EQ(f.isGridLicenseSupported, 0);
  EXPECT_EQ(f.licensableFeaturesCount, 0U);
  EXPECT_EQ(features(gpu(0), nullptr), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(sym<nvmlShutdown_fn>("nvmlShutdown")(), NVML_SUCCESS);

  for (const auto& [state, licensed] : {std::pair{"licensed", 1U}, std::pair{"unlicensed", 0U}}) {
    start("vgpu_license: " + std::string(state) + "\n" + kScenario);
    f = {};
    ASSERT_EQ(features(gpu(1), &f), NVML_SUCCESS) << state;
    EXPECT_NE(f.isGridLicenseSupported, 0) << state;
    ASSERT_EQ(f.licensableFeaturesCount, 1U) << state;
    EXPECT_EQ(f.gridLicensableFeatures[0].featureCode, static_cast<unsigned>(NVML_GRID_LICENSE_FEATURE_CODE_VGPU));
    EXPECT_EQ(f.gridLicensableFeatures[0].featureState, licensed) << state;
    EXPECT_STREQ(f.gridLicensableFeatures[0].productName, "NVIDIA Virtual Compute Server");
    ASSERT_EQ(sym<nvmlShutdown_fn>("nvmlShutdown")(), NVML_SUCCESS);
  }
}

TEST_F(NvmlSimInfo, AccountingIsOffSoItsRecordsAreNotSupported) {
  start();
  EXPECT_EQ(get("nvmlDeviceGetAccountingMode", gpu(0)), NVML_FEATURE_DISABLED);
  EXPECT_EQ(get("nvmlDeviceGetAccountingBufferSize", gpu(0)), 4000U);
  unsigned pids[4];
  unsigned n = 4;
  EXPECT_EQ(sym<nvmlDeviceGetAccountingPids_fn>("nvmlDeviceGetAccountingPids")(gpu(0), &n, pids),
            NVML_ERROR_NOT_SUPPORTED);
  nvmlAccountingStats_t stats{};
  EXPECT_EQ(sym<nvmlDeviceGetAccountingStats_fn>("nvmlDeviceGetAccountingStats")(gpu(0), 4242, &stats),
            NVML_ERROR_NOT_SUPPORTED);
}

TEST_F(NvmlSimInfo, ProcessNamesOfRunningJobs) {
  auto name_of = sym<nvmlSystemGetProcessName_fn>("nvmlSystemGetProcessName");
  char name[64];
  EXPECT_EQ(name_of(4242, name, sizeof name), NVML_ERROR_UNINITIALIZED);
  start();
  ASSERT_EQ(name_of(4242, name, sizeof name), NVML_SUCCESS);
  EXPECT_STREQ(name, "a");
  ASSERT_EQ(name_of(4343, name, sizeof name), NVML_SUCCESS);
  EXPECT_STREQ(name, "a-training-job-with-a-long-name");  // not cut to comm's 15 bytes
  ASSERT_EQ(name_of(4343, name, 8), NVML_SUCCESS);        // cropped, never INSUFFICIENT_SIZE
  EXPECT_STREQ(name, "a-train");
  EXPECT_EQ(name_of(4444, name, sizeof name), NVML_ERROR_NOT_FOUND);  // not started yet
  EXPECT_EQ(name_of(1, name, sizeof name), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(name_of(4242, nullptr, sizeof name), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(name_of(4242, name, 0), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(NvmlSimInfo, FaultsApplyToEveryInformationalCall) {
  // Handles outlive a session (the library's handle table lives as long as the process), so
  // GPU 1's handle can be taken before the scenario that loses it is loaded.
  start();
  nvmlDevice_t lost = gpu(1);
  TearDown();

  setenv("GPUMETER_SIM_UNSUPPORTED", "nvmlDeviceGetBrand,nvmlSystemGetProcessName", 1);
  start(kScenario + "faults:\n  - {kind: lost, gpu: 1, at: 30, duration: 1h}\n");
  get("nvmlDeviceGetBrand", gpu(0), NVML_ERROR_NOT_SUPPORTED);
  char name[16];
  EXPECT_EQ(sym<nvmlSystemGetProcessName_fn>("nvmlSystemGetProcessName")(4242, name, sizeof name),
            NVML_ERROR_NOT_SUPPORTED);
  unsigned v = 0;
  EXPECT_EQ(sym<nvmlDeviceGetUInt_fn>("nvmlDeviceGetBoardId")(gpu(0), &v), NVML_SUCCESS);
  EXPECT_EQ(sym<nvmlDeviceGetUInt_fn>("nvmlDeviceGetBoardId")(lost, &v), NVML_ERROR_GPU_IS_LOST);
  nvmlBAR1Memory_t bar1{};
  EXPECT_EQ(sym<nvmlDeviceGetBAR1MemoryInfo_fn>("nvmlDeviceGetBAR1MemoryInfo")(lost, &bar1), NVML_ERROR_GPU_IS_LOST);
  unsigned count = 0;
  EXPECT_EQ(sym<nvmlDeviceGetSupportedMemoryClocks_fn>("nvmlDeviceGetSupportedMemoryClocks")(lost, &count, nullptr),
            NVML_ERROR_GPU_IS_LOST);
}

}  // namespace
}  // namespace gpumeter::sim
