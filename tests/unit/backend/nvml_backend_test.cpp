// The NVML backend against the fleet simulator: a real dlopen of a real libnvidia-ml.so.1.

#include "backend/nvml/nvml_backend.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <utility>

#include "../sim/mig_scenario.h"

namespace gpumeter {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kScenario = R"(
driver_version: "555.42.06"  # R555+: the PCIe byte-count fields exist
models:
  test:
    name: Test GPU 24GB
    architecture: hopper
    memory: 24GiB
    memory_reserved: 512MiB
    power: {limit: 300, idle: 50, max: 250}
    temperature: {idle: 30, max: 80, memory_offset: 4}
    clocks:
      graphics: {idle: 300, max: 1800}
      sm: {idle: 300, max: 1800}
      memory: {idle: 5000, max: 5000}
      video: {idle: 500, max: 1500}
    pcie: {generation: 4, width: 16}
gpus:
  count: 2
  model: test
jobs:
  - name: half
    gpus: [0]
    pid: 4242
    uid: 1000
    cgroup: /system.slice/half.service
    memory: 4GiB
    utilization: {pattern: constant, value: 0.5}
faults:
  - {kind: xid, gpu: 1, at: 101s, code: 48}
)";

class NvmlBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpumeter-nvml-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "scenario.yaml") << kScenario;
    setenv("GPUMETER_SIM_SCENARIO", (dir_ / "scenario.yaml").c_str(), 1);
    // Scenario time 100 s now: the job on GPU 0 is running, the Xid at 101 s is a second away.
    auto now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    setenv("GPUMETER_SIM_EPOCH", std::to_string(now - 100.0).c_str(), 1);
    unsetenv("GPUMETER_SIM_UNSUPPORTED");
  }
  void TearDown() override {
    unsetenv("GPUMETER_SIM_UNSUPPORTED");
    fs::remove_all(dir_);
  }
  std::unique_ptr<NvmlBackend> make(std::vector<std::string> hidden = {}) {
    NvmlBackendOptions o;
    o.library_candidates = {GPUMETER_SIM_LIBRARY};
    o.hidden_symbols = std::move(hidden);
    return NvmlBackend::create(o, log_);
  }
  fs::path dir_;
  Logger log_{LogLevel::kError};
};

double value_of(const std::vector<LabeledValue>& v, const std::string& label) {
  for (const auto& e : v) {
    if (e.label == label) return e.value;
  }
  ADD_FAILURE() << "no entry " << label;
  return -1;
}
bool has(const std::vector<LabeledValue>& v, const std::string& label) {
  for (const auto& e : v) {
    if (e.label == label) return true;
  }
  return false;
}

TEST_F(NvmlBackendTest, MissingLibraryLeavesTheBackendDownWithTheReason) {
  NvmlBackendOptions o;
  o.library_candidates = {(dir_ / "libnvidia-ml.so.1").string(), (dir_ / "libnvidia-ml.so").string()};
  auto b = NvmlBackend::create(o, log_);
  EXPECT_FALSE(b->status().up);
  EXPECT_EQ(b->status().backend, "nvml");
  EXPECT_NE(b->status().detail.find("NVML library not found"), std::string::npos);
  EXPECT_NE(b->status().detail.find((dir_ / "libnvidia-ml.so").string()), std::string::npos);
  EXPECT_EQ(b->device_count(), 0u);
  EXPECT_FALSE(b->supports_events());
  EXPECT_FALSE(b->collect(0).ok());
}

TEST_F(NvmlBackendTest, IdentifiesAndReadsEveryGpu) {
  auto b = make();
  ASSERT_TRUE(b->status().up) << b->status().detail;
  EXPECT_EQ(b->status().driver_version, "555.42.06");
  EXPECT_EQ(b->status().library, GPUMETER_SIM_LIBRARY);
  ASSERT_EQ(b->device_count(), 2u);
  EXPECT_TRUE(b->missing_symbols().empty());

  auto id = b->identify(0);
  ASSERT_TRUE(id.ok()) << id.error().message;
  EXPECT_EQ(id->model, "Test GPU 24GB");
  EXPECT_EQ(id->vendor, "nvidia");
  EXPECT_EQ(id->uuid.rfind("GPU-", 0), 0u) << id->uuid;
  EXPECT_EQ(id->pci_bus_id.size(), 16u) << id->pci_bus_id;
  EXPECT_NE(id->uuid, b->identify(1)->uuid);

  auto r0 = b->collect(0);
  ASSERT_TRUE(r0.ok()) << r0.error().message;
  EXPECT_EQ(r0->device.utilization_ratio, 0.5);
  EXPECT_EQ(r0->device.memory_total_bytes, 24.0 * (1ull << 30));
  EXPECT_EQ(r0->device.memory_used_bytes, 4.0 * (1ull << 30));  // v2 "used" leaves out the reserved part
  EXPECT_EQ(r0->device.power_watts, 150.0);                     // idle + (max - idle) * 0.5
  EXPECT_EQ(r0->device.power_limit_watts, 300.0);
  EXPECT_EQ(r0->device.vgpu_licensed, 0.0);  // bare metal licenses no vGPU software: 0, as DCGM says
  ASSERT_TRUE(r0->device.energy_joules.has_value());
  EXPECT_GT(*r0->device.energy_joules, 0);
  EXPECT_EQ(value_of(r0->clocks.hertz, "sm"), 1800e6);
  EXPECT_TRUE(has(r0->device.temperature_celsius, "gpu"));
  EXPECT_TRUE(has(r0->device.temperature_celsius, "memory"));
  EXPECT_FALSE(r0->device.fan_speed_ratio.has_value());  // no fan in the model: left out
  EXPECT_EQ(r0->pcie.link_generation, 4.0);
  EXPECT_EQ(r0->pcie.link_width, 16.0);
  EXPECT_TRUE(r0->pcie.transmit_bytes.has_value());
  EXPECT_EQ(value_of(r0->clocks.event_active, "gpu_idle"), 0.0);
  EXPECT_EQ(value_of(r0->ecc.errors, "uncorrected"), 0.0);
  EXPECT_EQ(r0->ecc.remapped_rows.size(), 4u);

  auto r1 = b->collect(1);
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->device.utilization_ratio, 0.0);
  EXPECT_EQ(r1->device.power_watts, 50.0);
  EXPECT_EQ(value_of(r1->clocks.event_active, "gpu_idle"), 1.0);
  EXPECT_EQ(value_of(r1->clocks.hertz, "sm"), 300e6);
  EXPECT_FALSE(b->collect(2).ok());
}

// A vGPU guest: DCGM's licence status is the vGPU feature's state.
TEST_F(NvmlBackendTest, AVgpuGuestReportsItsLicence) {
  for (const auto& [state, licensed] : {std::pair{"licensed", 1.0}, std::pair{"unlicensed", 0.0}}) {
    std::ofstream(dir_ / "scenario.yaml") << "vgpu_license: " << state << "\n" << kScenario;
    auto b = make();
    ASSERT_TRUE(b->status().up) << b->status().detail;
    auto r = b->collect(0);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->device.vgpu_licensed, licensed) << state;
  }
}

// The whole GPU's slices are the largest profile's sliceCount: 4 on the simulated A30, whose
// four 1g.6gb instances each hold one of them.
TEST_F(NvmlBackendTest, ReadsTheSlicesOfAnA30InMigMode) {
  std::ofstream(dir_ / "scenario.yaml") << sim::testing::a30_mig_yaml();
  auto now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  setenv("GPUMETER_SIM_EPOCH", std::to_string(now - 30.0).c_str(), 1);  // before the re-partition at 45 s
  auto b = make();
  ASSERT_TRUE(b->status().up) << b->status().detail;
  EXPECT_EQ(b->identify(0)->model, "NVIDIA A30");
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->mig.enabled, true);
  EXPECT_EQ(r->mig.slices, 4u);
  ASSERT_EQ(r->mig.instances.size(), 4u);
  for (const MigInstanceReading& m : r->mig.instances) {
    EXPECT_EQ(m.profile, "1g.6gb");
    EXPECT_EQ(m.slices, 1u);
    EXPECT_EQ(m.memory_total_bytes, 6.0 * (1ull << 30));
  }
}

TEST_F(NvmlBackendTest, EnergyCounterAdvancesAtThePowerDraw) {
  auto b = make();
  ASSERT_TRUE(b->status().up);
  double e1 = *b->collect(0)->device.energy_joules;
  std::this_thread::sleep_for(300ms);
  double e2 = *b->collect(0)->device.energy_joules;
  EXPECT_GT(e2, e1);
  EXPECT_LT(e2 - e1, 150.0 * 2.0);  // 150 W for well under 2 s
}

TEST_F(NvmlBackendTest, MissingOptionalSymbolsTurnOffOnlyTheirMetrics) {
  auto b = make({"nvmlDeviceGetPowerUsage", "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetFieldValues",
                 "nvmlDeviceGetCurrentClocksEventReasons"});
  ASSERT_TRUE(b->status().up) << b->status().detail;
  // GetCurrentClocksEventReasons is not missing: its older name ...ThrottleReasons stands in.
  EXPECT_EQ(b->missing_symbols(), (std::vector<std::string>{"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetPowerUsage",
                                                            "nvmlDeviceGetFieldValues"}));
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->device.power_watts.has_value());
  EXPECT_FALSE(has(r->device.temperature_celsius, "memory"));
  EXPECT_FALSE(r->pcie.transmit_bytes.has_value());
  // The legacy ThrottleReasons name serves the same bitmask.
  EXPECT_EQ(value_of(r->clocks.event_active, "gpu_idle"), 0.0);
  // nvmlDeviceGetMemoryInfo (v1) still answers; its "used" includes the reserved memory.
  EXPECT_EQ(r->device.memory_used_bytes, 4.0 * (1ull << 30) + 512.0 * (1ull << 20));
  EXPECT_EQ(r->device.utilization_ratio, 0.5);
  EXPECT_EQ(r->device.power_limit_watts, 300.0);
}

TEST_F(NvmlBackendTest, FallsBackToV1EnumerationAsAPair) {
  auto b = make({"nvmlDeviceGetCount_v2"});
  ASSERT_TRUE(b->status().up) << b->status().detail;
  EXPECT_EQ(b->device_count(), 2u);
  EXPECT_TRUE(b->collect(1).ok());
}

TEST_F(NvmlBackendTest, MissingRequiredSymbolsAreReported) {
  auto b = make({"nvmlInit_v2", "nvmlInit"});
  EXPECT_FALSE(b->status().up);
  EXPECT_NE(b->status().detail.find("lacks required NVML entry points: nvmlInit_v2"), std::string::npos)
      << b->status().detail;
  EXPECT_EQ(b->device_count(), 0u);
}

TEST_F(NvmlBackendTest, UnsupportedValuesAreLeftOut) {
  setenv("GPUMETER_SIM_UNSUPPORTED", "nvmlDeviceGetTemperature,nvmlDeviceGetTotalEnergyConsumption", 1);
  auto b = make();
  ASSERT_TRUE(b->status().up);
  for (int i = 0; i < 2; ++i) {  // the second collection uses the cached NOT_SUPPORTED answers
    auto r = b->collect(0);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_FALSE(has(r->device.temperature_celsius, "gpu"));
    EXPECT_TRUE(has(r->device.temperature_celsius, "memory"));
    EXPECT_FALSE(r->device.energy_joules.has_value());
    EXPECT_TRUE(r->device.power_watts.has_value());
  }
}

TEST_F(NvmlBackendTest, DeliversXidEventsForTheRightGpu) {
  auto b = make();
  ASSERT_TRUE(b->supports_events());
  ASSERT_TRUE(b->identify(0).ok());
  ASSERT_TRUE(b->identify(1).ok());
  std::optional<DeviceEvent> got;
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!got && std::chrono::steady_clock::now() < deadline) {
    auto e = b->wait_event(500ms);
    ASSERT_TRUE(e.ok()) << e.error().message;
    got = *e;
  }
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->device, 1u);
  EXPECT_EQ(got->code, 48u);
  EXPECT_EQ(got->kind, DeviceEventKind::kXid);
}

TEST_F(NvmlBackendTest, ProcessesAndSampleBuffersReachTheReading) {
  auto b = make();
  ASSERT_TRUE(b->status().up);
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const UsageReading& u = r->usage;
  ASSERT_TRUE(u.processes.has_value());
  ASSERT_EQ(u.processes->size(), 1u);
  EXPECT_EQ(u.processes->at(0).pid, 4242u);
  EXPECT_EQ(u.processes->at(0).memory_bytes, 4.0 * (1ULL << 30));
  EXPECT_EQ(u.processes->at(0).types, unsigned{kProcessCompute});
  // The first collection returns the whole buffer: 100 periods of 200 ms, oldest first.
  ASSERT_TRUE(u.utilization_samples_supported);
  ASSERT_EQ(u.utilization_samples.size(), 100u);
  EXPECT_DOUBLE_EQ(u.utilization_samples.back().value, 0.5);
  EXPECT_EQ(u.utilization_samples[1].timestamp_us - u.utilization_samples[0].timestamp_us, 200'000);
  ASSERT_TRUE(u.power_samples_supported);
  EXPECT_DOUBLE_EQ(u.power_samples.back().value, 150.0);  // 50 W idle + 0.5 × 200 W, in watts
  ASSERT_TRUE(u.process_samples_supported);
  ASSERT_FALSE(u.process_samples.empty());
  EXPECT_EQ(u.process_samples.back().pid, 4242u);
  EXPECT_DOUBLE_EQ(u.process_samples.back().sm_ratio, 0.5);
  // The next collection only gets what is newer.
  std::this_thread::sleep_for(450ms);
  auto r2 = b->collect(0);
  ASSERT_TRUE(r2.ok());
  ASSERT_FALSE(r2->usage.utilization_samples.empty());
  EXPECT_LE(r2->usage.utilization_samples.size(), 3u);
  EXPECT_GT(r2->usage.utilization_samples.front().timestamp_us, u.utilization_samples.back().timestamp_us);
  EXPECT_GT(r2->usage.process_samples.front().timestamp_us, u.process_samples.back().timestamp_us);
  // An idle GPU: an empty process list, not an absent one.
  auto idle = b->collect(1);
  ASSERT_TRUE(idle.ok());
  ASSERT_TRUE(idle->usage.processes.has_value());
  EXPECT_TRUE(idle->usage.processes->empty());
}

TEST_F(NvmlBackendTest, ProcessListFallsBackToOlderGenerations) {
  // Without _v3 and _v2 the unversioned call (16-byte v1 records) still gives pid and memory.
  auto b = make({"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"});
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->usage.processes.has_value());
  ASSERT_EQ(r->usage.processes->size(), 1u);
  EXPECT_EQ(r->usage.processes->at(0).pid, 4242u);
  EXPECT_EQ(r->usage.processes->at(0).memory_bytes, 4.0 * (1ULL << 30));
  auto v2 = make({"nvmlDeviceGetComputeRunningProcesses_v3"});
  auto r2 = v2->collect(0);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->usage.processes->at(0).memory_bytes, 4.0 * (1ULL << 30));
}

TEST_F(NvmlBackendTest, UnsupportedUsageCallsAreLeftOut) {
  setenv("GPUMETER_SIM_UNSUPPORTED",
         "nvmlDeviceGetSamples,nvmlDeviceGetProcessUtilization,nvmlDeviceGetProcessesUtilizationInfo", 1);
  auto b = make();
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->usage.utilization_samples_supported);
  EXPECT_FALSE(r->usage.power_samples_supported);
  EXPECT_FALSE(r->usage.process_samples_supported);
  EXPECT_TRUE(r->usage.utilization_samples.empty());
  ASSERT_TRUE(r->usage.processes.has_value());  // the process list itself still works
  EXPECT_EQ(r->usage.processes->size(), 1u);
  EXPECT_DOUBLE_EQ(*r->device.utilization_ratio, 0.5);  // the polled fallback the ledger uses
}

TEST_F(NvmlBackendTest, MissingProcessEntryPointsLeaveTheListUnset) {
  auto b = make({"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
                 "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses_v3",
                 "nvmlDeviceGetMPSComputeRunningProcesses_v3"});
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->usage.processes.has_value());
  EXPECT_FALSE(r->usage.process_samples_supported && !r->usage.process_samples.empty());
}

// A symbol table with just the names listed (every symbol is a distinct dummy address).
class NamedSymbols final : public SymbolSource {
 public:
  explicit NamedSymbols(std::set<std::string> names) : names_(std::move(names)) {}
  void* symbol(const char* name) const override {
    auto it = names_.find(name);
    return it == names_.end() ? nullptr : const_cast<std::string*>(&*it);
  }
  const std::string& path() const override { return path_; }

 private:
  std::set<std::string> names_;
  std::string path_ = "fake";
};

TEST(NvmlSymbolsTest, TheR550ProcessUtilizationCallIsOptionalAndNotReportedMissing) {
  std::set<std::string> base = {"nvmlInit_v2", "nvmlShutdown", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
                                "nvmlDeviceGetProcessUtilization"};
  auto legacy = NvmlSymbols::resolve(NamedSymbols(base));
  ASSERT_TRUE(legacy.ok());
  EXPECT_EQ(legacy->processes_utilization_info, nullptr);
  EXPECT_NE(legacy->process_utilization, nullptr);
  for (const auto& m : legacy->missing) EXPECT_NE(m, "nvmlDeviceGetProcessesUtilizationInfo");
  base.insert("nvmlDeviceGetProcessesUtilizationInfo");
  auto r550 = NvmlSymbols::resolve(NamedSymbols(base));
  ASSERT_TRUE(r550.ok());
  EXPECT_NE(r550->processes_utilization_info, nullptr);
}

}  // namespace
}  // namespace gpumeter
