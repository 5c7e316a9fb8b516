#pragma once
// The built libnvidia-ml.so.1 through dlopen(), the way an NVML program uses it, and the
// fixture every library test runs in: it writes the test's scenario and sets
// GPUMETER_SIM_EPOCH so that "now" falls at a chosen scenario time; TearDown shuts the
// library down so the next test loads afresh.

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

#include "abi/nvml_api.h"
#include "sim/scenario/time.h"
#include "test_support.h"

namespace gpumeter::sim {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Signatures nvml_api.h has no pointer type for.
using InitWithFlagsFn = nvmlReturn_t (*)(unsigned int);
using CudaVersionFn = nvmlReturn_t (*)(int*);
using ProcessesV1Fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v1_t*);

struct Api {
  void* lib = nullptr;
  template <typename F>
  F get(const char* name) {
    void* p = dlsym(lib, name);
    if (p == nullptr) ADD_FAILURE() << "missing symbol " << name;
    return reinterpret_cast<F>(p);
  }

  nvmlInit_fn init, init_v1;
  InitWithFlagsFn init_with_flags;
  nvmlShutdown_fn shutdown;
  nvmlErrorString_fn error_string;
  nvmlSystemGetDriverVersion_fn driver_version, nvml_version;
  CudaVersionFn cuda_version;
  nvmlDeviceGetCount_fn count, count_v1;
  nvmlDeviceGetHandleByIndex_fn by_index, by_index_v1;
  nvmlDeviceGetHandleByUUID_fn by_uuid;
  nvmlDeviceGetUInt_fn index;
  nvmlDeviceGetString_fn uuid, name, serial, vbios;
  nvmlDeviceGetPciInfo_fn pci_v3, pci_v2;
  nvmlDeviceGetUtilizationRates_fn utilization;
  nvmlDeviceGetMemoryInfo_fn memory;
  nvmlDeviceGetMemoryInfo_v2_fn memory_v2;
  nvmlDeviceGetTemperature_fn temperature;
  nvmlDeviceGetUInt_fn power, enforced_limit, management_limit, pstate, fan, pcie_gen, pcie_width, pcie_max_gen,
      pcie_max_width, replay;
  nvmlDeviceGetULongLong_fn energy, reasons, throttle_reasons, supported_reasons, supported_throttle, supported_events;
  nvmlDeviceGetClockInfo_fn clock, max_clock;
  nvmlDeviceGetTotalEccErrors_fn ecc;
  nvmlDeviceGetRemappedRows_fn remapped;
  nvmlDeviceGetFieldValues_fn fields;
  nvmlDeviceGetProcesses_v3_fn compute_v3, compute_v2, graphics_v3, mps_v3;
  ProcessesV1Fn compute_v1;
  nvmlDeviceGetProcessUtilization_fn process_util;
  nvmlDeviceGetSamples_fn samples;
  nvmlDeviceGetProcessesUtilizationInfo_fn processes_util_info;
  nvmlDeviceGetPcieThroughput_fn pcie_throughput;
  nvmlEventSetCreate_fn set_create;
  nvmlDeviceRegisterEvents_fn register_events;
  nvmlEventSetWait_fn set_wait;
  nvmlEventSetFree_fn set_free;

  Api() {
    lib = dlopen(GPUMETER_SIM_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      ADD_FAILURE() << "dlopen " << GPUMETER_SIM_LIBRARY << ": " << dlerror();
      return;
    }
    init = get<nvmlInit_fn>("nvmlInit_v2");
    init_v1 = get<nvmlInit_fn>("nvmlInit");
    init_with_flags = get<InitWithFlagsFn>("nvmlInitWithFlags");
    shutdown = get<nvmlShutdown_fn>("nvmlShutdown");
    error_string = get<nvmlErrorString_fn>("nvmlErrorString");
    driver_version = get<nvmlSystemGetDriverVersion_fn>("nvmlSystemGetDriverVersion");
    nvml_version = get<nvmlSystemGetDriverVersion_fn>("nvmlSystemGetNVMLVersion");
    cuda_version = get<CudaVersionFn>("nvmlSystemGetCudaDriverVersion");
    count = get<nvmlDeviceGetCount_fn>("nvmlDeviceGetCount_v2");
    count_v1 = get<nvmlDeviceGetCount_fn>("nvmlDeviceGetCount");
    by_index = get<nvmlDeviceGetHandleByIndex_fn>("nvmlDeviceGetHandleByIndex_v2");
    by_index_v1 = get<nvmlDeviceGetHandleByIndex_fn>("nvmlDeviceGetHandleByIndex");
    by_uuid = get<nvmlDeviceGetHandleByUUID_fn>("nvmlDeviceGetHandleByUUID");
    index = get<nvmlDeviceGetUInt_fn>("nvmlDeviceGetIndex");
    uuid = get<nvmlDeviceGetString_fn>("nvmlDeviceGetUUID");
    name = get<nvmlDeviceGetString_fn>("nvmlDeviceGetName");
    serial = get<nvmlDeviceGetString_fn>("nvmlDeviceGetSerial");
    vbios = get<nvmlDeviceGetString_fn>("nvmlDeviceGetVbiosVersion");
    pci_v3 = get<nvmlDeviceGetPciInfo_fn>("nvmlDeviceGetPciInfo_v3");
    pci_v2 = get<nvmlDeviceGetPciInfo_fn>("nvmlDeviceGetPciInfo_v2");
    utilization = get<nvmlDeviceGetUtilizationRates_fn>("nvmlDeviceGetUtilizationRates");
    memory = get<nvmlDeviceGetMemoryInfo_fn>("nvmlDeviceGetMemoryInfo");
    memory_v2 = get<nvmlDeviceGetMemoryInfo_v2_fn>("nvmlDeviceGetMemoryInfo_v2");
    temperature = get<nvmlDeviceGetTemperature_fn>("nvmlDeviceGetTemperature");
    power = get<nvmlDeviceGetUInt_fn>("nvmlDeviceGetPowerUsage");
    enforced_limit = get<nvmlDeviceGetUInt_fn>("nvmlDeviceGetEnforcedPowerLimit");
    management_limit = get<nvmlDeviceGetUInt_fn>("nvmlDeviceGetPowerManagementLimit");
    pstate = get<nvmlDeviceGetUInt_fn>("nvmlDeviceGetPerformanceState");
    fan = get<nvmlDeviceGetUInt_fn>("nvmlDeviceGetFanSpeed");
    pcie_gen = get<nvmlDeviceGetUInt_fn>("nvmlDeviceGetCurrPcieLinkGeneration");
    pcie_width = get<nvmlDeviceGetUInt_fn>("nvmlDeviceGetCurrPcieLinkWidth");
    pcie_max_gen = get<nvmlDeviceGetUInt_fn>("nvmlDeviceGetMaxPcieLinkGeneration");
    pcie_max_width = get<nvmlDeviceGetUInt_fn>("nvmlDeviceGetMaxPcieLinkWidth");
    replay = get<nvmlDeviceGetUInt_fn>("nvmlDeviceGetPcieReplayCounter");
    energy = get<nvmlDeviceGetULongLong_fn>("nvmlDeviceGetTotalEnergyConsumption");
    reasons = get<nvmlDeviceGetULongLong_fn>("nvmlDeviceGetCurrentClocksEventReasons");
    throttle_reasons = get<nvmlDeviceGetULongLong_fn>("nvmlDeviceGetCurrentClocksThrottleReasons");
    supported_reasons = get<nvmlDeviceGetULongLong_fn>("nvmlDeviceGetSupportedClocksEventReasons");
    supported_throttle = get<nvmlDeviceGetULongLong_fn>("nvmlDeviceGetSupportedClocksThrottleReasons");
    supported_events = get<nvmlDeviceGetULongLong_fn>("nvmlDeviceGetSupportedEventTypes");
    clock = get<nvmlDeviceGetClockInfo_fn>("nvmlDeviceGetClockInfo");
    max_clock = get<nvmlDeviceGetClockInfo_fn>("nvmlDeviceGetMaxClockInfo");
    ecc = get<nvmlDeviceGetTotalEccErrors_fn>("nvmlDeviceGetTotalEccErrors");
    remapped = get<nvmlDeviceGetRemappedRows_fn>("nvmlDeviceGetRemappedRows");
    fields = get<nvmlDeviceGetFieldValues_fn>("nvmlDeviceGetFieldValues");
    compute_v3 = get<nvmlDeviceGetProcesses_v3_fn>("nvmlDeviceGetComputeRunningProcesses_v3");
    compute_v2 = get<nvmlDeviceGetProcesses_v3_fn>("nvmlDeviceGetComputeRunningProcesses_v2");
    compute_v1 = get<ProcessesV1Fn>("nvmlDeviceGetComputeRunningProcesses");
    graphics_v3 = get<nvmlDeviceGetProcesses_v3_fn>("nvmlDeviceGetGraphicsRunningProcesses_v3");
    mps_v3 = get<nvmlDeviceGetProcesses_v3_fn>("nvmlDeviceGetMPSComputeRunningProcesses_v3");
    process_util = get<nvmlDeviceGetProcessUtilization_fn>("nvmlDeviceGetProcessUtilization");
    samples = get<nvmlDeviceGetSamples_fn>("nvmlDeviceGetSamples");
    processes_util_info = get<nvmlDeviceGetProcessesUtilizationInfo_fn>("nvmlDeviceGetProcessesUtilizationInfo");
    pcie_throughput = get<nvmlDeviceGetPcieThroughput_fn>("nvmlDeviceGetPcieThroughput");
    set_create = get<nvmlEventSetCreate_fn>("nvmlEventSetCreate");
    register_events = get<nvmlDeviceRegisterEvents_fn>("nvmlDeviceRegisterEvents");
    set_wait = get<nvmlEventSetWait_fn>("nvmlEventSetWait_v2");
    set_free = get<nvmlEventSetFree_fn>("nvmlEventSetFree");
  }
};

// One dlopen for the whole binary; the library is never closed.
inline Api& api() {
  static Api* a = new Api();
  return *a;
}

inline std::int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class NvmlSim : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(api().lib, nullptr);
    for (const char* v :
         {"GPUMETER_SIM_SCENARIO", "GPUMETER_SIM_EPOCH", "GPUMETER_SIM_TIME_SCALE", "GPUMETER_SIM_UNSUPPORTED"}) {
      unsetenv(v);
    }
  }
  void TearDown() override {
    while (api().shutdown() == NVML_SUCCESS) {
    }
  }

  // Loads `yaml` so that scenario time `now` (seconds) is now, running `scale` times real time.
  nvmlReturn_t start(const std::string& yaml, double now, double scale = 1) {
    setenv("GPUMETER_SIM_SCENARIO", testing::write_file("nvml.yaml", yaml).c_str(), 1);
    set_epoch_ns(wall_ns() - static_cast<std::int64_t>(now / scale * 1e9), scale);
    return api().init();
  }

  void set_epoch_ns(std::int64_t ns, double scale) {
    epoch_text_ = std::to_string(ns / 1'000'000'000) + "." + [&] {
      std::string frac = std::to_string(ns % 1'000'000'000);
      return std::string(9 - frac.size(), '0') + frac;
    }();
    setenv("GPUMETER_SIM_EPOCH", epoch_text_.c_str(), 1);
    setenv("GPUMETER_SIM_TIME_SCALE", std::to_string(scale).c_str(), 1);
    // The library reads the epoch back as a double; do the same to predict its clock.
    epoch_ns_ = static_cast<std::int64_t>(std::llround(std::strtod(epoch_text_.c_str(), nullptr) * 1e9));
    scale_ = std::strtod(std::getenv("GPUMETER_SIM_TIME_SCALE"), nullptr);
  }

  // Scenario time now, as the library computes it.
  Micros scenario_now() const {
    return static_cast<Micros>(std::floor(static_cast<double>(wall_ns() - epoch_ns_) * scale_ / 1000.0));
  }

  void sleep_until_scenario(double seconds) {
    auto target_ns = epoch_ns_ + static_cast<std::int64_t>(seconds / scale_ * 1e9);
    auto left = target_ns - wall_ns();
    if (left > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(left));
  }

  nvmlDevice_t handle(unsigned i) {
    nvmlDevice_t h = nullptr;
    EXPECT_EQ(api().by_index(i, &h), NVML_SUCCESS) << i;
    return h;
  }

  std::string epoch_text_;
  std::int64_t epoch_ns_ = 0;
  double scale_ = 1;
};

}  // namespace gpumeter::sim
