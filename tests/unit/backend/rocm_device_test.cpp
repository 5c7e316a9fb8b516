// The AMD backend's readers on a scripted ROCm SMI (fake_rocm_smi.h): identity, every device
// collector's values in base units, how each status is counted, and what makes a GPU down.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>

#include "backend/rocm/rocm_backend.h"
#include "fake_rocm_smi.h"

namespace gpumeter {
namespace {

using fake_rocm::script;

class RocmDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override { fake_rocm::reset(); }
  std::unique_ptr<RocmBackend> make(std::vector<std::string> hidden = {}) {
    auto b = RocmBackend::create(std::make_unique<fake_rocm::FakeRocmSmi>(std::move(hidden)), log_);
    EXPECT_TRUE(b->status().up) << b->status().detail;
    return b;
  }
  static double labeled(const std::vector<LabeledValue>& values, const std::string& label) {
    auto it = std::find_if(values.begin(), values.end(), [&](const LabeledValue& v) { return v.label == label; });
    return it == values.end() ? -1 : it->value;
  }
  Logger log_{LogLevel::kError};
};

TEST_F(RocmDeviceTest, IdentityNamesTheGpuByUniqueIdAndPciAddress) {
  auto b = make();
  auto id = b->identify(0);
  ASSERT_TRUE(id.ok()) << id.error().message;
  EXPECT_EQ(id->vendor, "amd");
  EXPECT_EQ(id->model, "AMD Instinct MI210");
  EXPECT_EQ(id->serial, "SERIAL0");
  EXPECT_EQ(id->uuid, "0x1234abcd");  // as rocm-smi prints its Unique ID
  EXPECT_EQ(id->pci_bus_id, "0000:43:00.0");
}

TEST_F(RocmDeviceTest, AGpuWithoutAUniqueIdIsNamedByItsSlotAndWithNeitherIsAnError) {
  script().gpus[0].unique_id = 0;  // consumer boards
  auto b = make();
  EXPECT_EQ(b->identify(0)->uuid, "amd-0000:43:00.0");
  script().rc["rsmi_dev_pci_id_get"] = RSMI_STATUS_NOT_SUPPORTED;
  EXPECT_FALSE(b->identify(0).ok());
}

TEST_F(RocmDeviceTest, DeviceValuesAreInBaseUnits) {
  auto b = make();
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const DeviceValues& d = r->device;
  EXPECT_DOUBLE_EQ(*d.utilization_ratio, 0.40);
  EXPECT_DOUBLE_EQ(*d.memory_utilization_ratio, 0.10);
  EXPECT_DOUBLE_EQ(*d.memory_total_bytes, 64.0 * (1ULL << 30));
  EXPECT_DOUBLE_EQ(*d.memory_used_bytes, 16.0 * (1ULL << 30));
  EXPECT_DOUBLE_EQ(*d.memory_free_bytes, 48.0 * (1ULL << 30));
  EXPECT_DOUBLE_EQ(*d.power_watts, 250);                        // µW
  EXPECT_DOUBLE_EQ(*d.power_limit_watts, 300);                  // µW
  EXPECT_NEAR(*d.energy_joules, 1e6 * 15.3e-6, 1e-5);           // counter × resolution (µJ)
  EXPECT_DOUBLE_EQ(labeled(d.temperature_celsius, "gpu"), 45);  // millidegrees: edge
  EXPECT_DOUBLE_EQ(labeled(d.temperature_celsius, "junction"), 52);
  EXPECT_DOUBLE_EQ(labeled(d.temperature_celsius, "memory"), 60);
  EXPECT_DOUBLE_EQ(*d.fan_speed_ratio, 128.0 / 255.0);
}

TEST_F(RocmDeviceTest, ClocksAreTheCurrentEntryAndThePerformanceLevelIsOneHot) {
  auto b = make();
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  // Only the system clock is scripted; the others answer NOT_SUPPORTED and are left out.
  ASSERT_EQ(r->clocks.hertz.size(), 1u);
  EXPECT_EQ(r->clocks.hertz[0].label, "graphics");
  EXPECT_DOUBLE_EQ(r->clocks.hertz[0].value, 1.7e9);
  EXPECT_EQ(r->clocks.performance_level.size(), 9u);
  EXPECT_DOUBLE_EQ(labeled(r->clocks.performance_level, "auto"), 1);
  EXPECT_DOUBLE_EQ(labeled(r->clocks.performance_level, "manual"), 0);
  // An uninitialized `current` (some iGPUs answer SUCCESS with one) is no clock.
  script().gpus[0].sys_clock_current = 7;
  EXPECT_TRUE(b->collect(0)->clocks.hertz.empty());
}

TEST_F(RocmDeviceTest, PcieGenerationComesFromTheTransferRate) {
  auto b = make();
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(*r->pcie.link_generation, 4);  // 16 GT/s
  EXPECT_DOUBLE_EQ(*r->pcie.link_width, 16);
  EXPECT_DOUBLE_EQ(*r->pcie.replay_errors, 3);
  script().gpus[0].pcie_rate = 12'345;  // no generation runs at it
  EXPECT_FALSE(b->collect(0)->pcie.link_generation);
}

TEST_F(RocmDeviceTest, EccIsCountedPerEnabledBlockAndSummed) {
  auto b = make();
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->ecc.block_errors.size(), 2u);
  EXPECT_EQ(r->ecc.block_errors[0], (BlockErrors{"umc", 5, 1}));
  EXPECT_EQ(r->ecc.block_errors[1], (BlockErrors{"gfx", 2, 0}));
  EXPECT_DOUBLE_EQ(labeled(r->ecc.errors, "corrected"), 7);
  EXPECT_DOUBLE_EQ(labeled(r->ecc.errors, "uncorrected"), 1);
  script().gpus[0].ecc_enabled = 0;  // ECC off: no counts, not zeros
  r = b->collect(0);
  EXPECT_TRUE(r->ecc.block_errors.empty());
  EXPECT_TRUE(r->ecc.errors.empty());
}

TEST_F(RocmDeviceTest, NotSupportedLeavesAValueOutAndIsNotAnError) {
  script().rc["rsmi_dev_power_ave_get"] = RSMI_STATUS_NOT_SUPPORTED;
  script().rc["rsmi_dev_fan_speed_get"] = RSMI_STATUS_NOT_YET_IMPLEMENTED;
  auto b = make();
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->device.power_watts);
  EXPECT_FALSE(r->device.fan_speed_ratio);
  EXPECT_TRUE(r->device.utilization_ratio);
  EXPECT_TRUE(b->status().counters.call_errors.empty());
}

// Power comes from the first source that answers, in ROCm SMI's order of preference: ROCm 6.0's
// rsmi_dev_power_get, then rsmi_dev_current_socket_power_get, then rsmi_dev_power_ave_get, then
// (5.x layout) gpu_metrics' socket power. Each fake source answers a value of its own.
TEST_F(RocmDeviceTest, PowerPrefersRsmiDevPowerGetWhereTheLibraryHasIt) {
  script().power_get = true;
  script().socket_power = true;
  auto r = make()->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(*r->device.power_watts, 401);
  EXPECT_EQ(script().calls["rsmi_dev_power_get"], 1);
  EXPECT_EQ(script().calls["rsmi_dev_current_socket_power_get"], 0);
  EXPECT_EQ(script().calls["rsmi_dev_power_ave_get"], 0);
}

TEST_F(RocmDeviceTest, PowerFallsBackWhereAnEntryPointIsMissing) {
  script().socket_power = true;  // a library without rsmi_dev_power_get
  EXPECT_DOUBLE_EQ(*make()->collect(0)->device.power_watts, 402);
  script().power_get = true;  // hidden through the backend's options
  EXPECT_DOUBLE_EQ(*make({"rsmi_dev_power_get"})->collect(0)->device.power_watts, 402);
  script().power_get = false;  // Debian's 5.2.3: neither
  script().socket_power = false;
  EXPECT_DOUBLE_EQ(*make()->collect(0)->device.power_watts, 250);
}

TEST_F(RocmDeviceTest, PowerFallsBackWhereAnEntryPointAnswersNotSupported) {
  script().power_get = true;
  script().socket_power = true;
  script().rc["rsmi_dev_power_get"] = RSMI_STATUS_NOT_SUPPORTED;
  auto b = make();
  EXPECT_DOUBLE_EQ(*b->collect(0)->device.power_watts, 402);
  script().rc["rsmi_dev_current_socket_power_get"] = RSMI_STATUS_NOT_YET_IMPLEMENTED;
  EXPECT_DOUBLE_EQ(*b->collect(0)->device.power_watts, 250);
  // An MI300X through 5.2.3: no power1_average, so gpu_metrics' socket power, in watts, read once
  // for the power and the throttle status.
  script().rc["rsmi_dev_power_ave_get"] = RSMI_STATUS_NOT_SUPPORTED;
  script().gpus[0].metrics_socket_power_w = 613;
  script().calls.clear();
  EXPECT_DOUBLE_EQ(*b->collect(0)->device.power_watts, 613);
  EXPECT_EQ(script().calls["rsmi_dev_gpu_metrics_info_get"], 1);
  script().gpus[0].metrics_socket_power_w = 0xFFFF;  // the kernel filled nothing in
  EXPECT_FALSE(b->collect(0)->device.power_watts);
  script().gpus[0].metrics_socket_power_w = 0;  // an MI250X's secondary die
  EXPECT_FALSE(b->collect(0)->device.power_watts);
  script().rc["rsmi_dev_gpu_metrics_info_get"] = RSMI_STATUS_NOT_SUPPORTED;
  EXPECT_FALSE(b->collect(0)->device.power_watts);
  EXPECT_TRUE(b->status().counters.call_errors.empty());
}

TEST_F(RocmDeviceTest, PowerIsInMicrowattsFromEachEntryPoint) {
  script().power_get = true;
  script().socket_power = true;
  script().gpus[0].power_get_uw = 612'345'678;
  script().gpus[0].socket_power_uw = 1'500'000;
  script().gpus[0].power_uw = 999;
  auto b = make();
  EXPECT_DOUBLE_EQ(*b->collect(0)->device.power_watts, 612.345678);
  script().rc["rsmi_dev_power_get"] = RSMI_STATUS_NOT_SUPPORTED;
  EXPECT_DOUBLE_EQ(*b->collect(0)->device.power_watts, 1.5);
  script().rc["rsmi_dev_current_socket_power_get"] = RSMI_STATUS_NOT_SUPPORTED;
  EXPECT_DOUBLE_EQ(*b->collect(0)->device.power_watts, 0.000999);
}

TEST_F(RocmDeviceTest, AnotherPowerErrorIsCountedAndNotPassedOver) {
  script().power_get = true;
  script().rc["rsmi_dev_power_get"] = RSMI_STATUS_PERMISSION;
  auto b = make();
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->device.power_watts);
  EXPECT_EQ(script().calls["rsmi_dev_power_ave_get"], 0);
  const auto errors = b->status().counters.call_errors;
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(std::get<1>(errors.begin()->first), "rsmi_dev_power_get");
}

TEST_F(RocmDeviceTest, GpuMetricsPowerNeedsTheFiveLayout) {
  script().version = {6, 2, 0, nullptr};  // 6.x rewrote rsmi_gpu_metrics_t: not declared here
  script().rc["rsmi_dev_power_ave_get"] = RSMI_STATUS_NOT_SUPPORTED;
  script().gpus[0].metrics_socket_power_w = 613;
  auto r = make()->collect(0, CollectScope::kUsage, CollectorSet::all());  // the fake answers 5.x layouts only
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->device.power_watts);
  EXPECT_EQ(script().calls["rsmi_dev_gpu_metrics_info_get"], 0);
}

TEST_F(RocmDeviceTest, AnotherStatusIsCountedByGpuCallAndStatus) {
  script().gpus.resize(2);
  script().gpu_rc[{"rsmi_dev_power_cap_get", 1}] = RSMI_STATUS_PERMISSION;
  auto b = make();
  ASSERT_TRUE(b->collect(0).ok());
  auto r = b->collect(1);
  ASSERT_TRUE(r.ok()) << "one failed call leaves one value out; the GPU stays up";
  EXPECT_FALSE(r->device.power_limit_watts);
  EXPECT_TRUE(r->device.power_watts);
  ASSERT_TRUE(b->collect(1).ok());
  const auto errors = b->status().counters.call_errors;
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors.begin()->first, std::make_tuple(1u, std::string("rsmi_dev_power_cap_get"), std::string("rsmi_4")));
  EXPECT_EQ(errors.begin()->second, 2u);
}

TEST_F(RocmDeviceTest, AGpuNoCallAnswersIsDownWithTheFirstError) {
  auto b = make();
  for (const char* call : {"rsmi_dev_busy_percent_get", "rsmi_dev_memory_total_get", "rsmi_dev_memory_usage_get",
                           "rsmi_dev_power_ave_get", "rsmi_dev_energy_count_get", "rsmi_dev_memory_busy_percent_get",
                           "rsmi_dev_temp_metric_get", "rsmi_dev_power_cap_get", "rsmi_dev_gpu_clk_freq_get",
                           "rsmi_dev_perf_level_get", "rsmi_dev_pci_bandwidth_get", "rsmi_dev_pci_replay_counter_get",
                           "rsmi_dev_fan_speed_get", "rsmi_dev_ecc_enabled_get", "rsmi_dev_gpu_metrics_info_get"}) {
    script().rc[call] = RSMI_STATUS_NOT_SUPPORTED;
  }
  // All NOT_SUPPORTED: what 5.2.3 answers when the GPU's sysfs files are gone.
  auto r = b->collect(0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, RSMI_STATUS_NOT_SUPPORTED);
  EXPECT_NE(r.error().message.find("every ROCm SMI call"), std::string::npos) << r.error().message;
  // With a real error among them, that error is the reason.
  script().rc["rsmi_dev_memory_total_get"] = RSMI_STATUS_FILE_ERROR;
  r = b->collect(0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, RSMI_STATUS_FILE_ERROR);
  EXPECT_NE(r.error().message.find("rsmi_dev_memory_total_get"), std::string::npos) << r.error().message;
}

TEST_F(RocmDeviceTest, OnlyTheAskedCollectorsAreRead) {
  auto b = make();
  CollectorSet device_only;
  device_only.set(CollectorId::kDevice);
  ASSERT_TRUE(b->collect(0, CollectScope::kFull, device_only).ok());
  EXPECT_EQ(script().calls["rsmi_dev_gpu_clk_freq_get"], 0);
  EXPECT_EQ(script().calls["rsmi_dev_pci_bandwidth_get"], 0);
  EXPECT_EQ(script().calls["rsmi_dev_ecc_enabled_get"], 0);
  EXPECT_EQ(script().calls["rsmi_dev_temp_metric_get"], 3);
  // Between full collections, only what the ledger integrates.
  script().calls.clear();
  auto r = b->collect(0, CollectScope::kUsage, CollectorSet::all());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(script().calls["rsmi_dev_temp_metric_get"], 0);
  EXPECT_EQ(script().calls["rsmi_dev_busy_percent_get"], 1);
  EXPECT_EQ(script().calls["rsmi_dev_energy_count_get"], 1);
  EXPECT_TRUE(r->device.utilization_ratio);
  EXPECT_TRUE(r->device.energy_joules);
}

TEST_F(RocmDeviceTest, AFanNeedsItsMaximum) {
  script().gpus[0].fan_max = 0;
  auto b = make();
  EXPECT_FALSE(b->collect(0)->device.fan_speed_ratio);
}

TEST_F(RocmDeviceTest, TheLayoutFollowsTheLibraryVersionAndMissingEntryPointsAreListed) {
  auto five = make({"rsmi_dev_fan_speed_get"});
  EXPECT_EQ(five->abi(), "5");
  EXPECT_NE(std::find(five->missing_symbols().begin(), five->missing_symbols().end(), "rsmi_dev_fan_speed_get"),
            five->missing_symbols().end());
  EXPECT_FALSE(five->collect(0)->device.fan_speed_ratio);
  script().version = {6, 2, 0, nullptr};
  EXPECT_EQ(make()->abi(), "6");
}

TEST_F(RocmDeviceTest, ProcessesAreThisGpusAndShareItsBusyTimeByCuOccupancy) {
  script().gpus.resize(2);
  script().processes = {{101, {0}, 4ULL << 30, 30}, {102, {0}, 2ULL << 30, 10}, {103, {0, 1}, 8ULL << 30, 20}};
  auto b = make();
  auto first = b->collect(0);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->usage.processes);
  ASSERT_EQ(first->usage.processes->size(), 3u);
  const GpuProcess& one_gpu = (*first->usage.processes)[0];
  EXPECT_EQ(one_gpu.pid, 101u);
  EXPECT_DOUBLE_EQ(*one_gpu.memory_bytes, 4.0 * (1ULL << 30));
  // Its VRAM is summed over both GPUs: this GPU's part is unknown.
  EXPECT_FALSE((*first->usage.processes)[2].memory_bytes);
  EXPECT_TRUE(first->usage.process_samples.empty()) << "the first read has no previous one to cover from";
  auto second = b->collect(0);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->usage.process_samples.size(), 3u);
  EXPECT_DOUBLE_EQ(second->usage.process_samples[0].sm_ratio, 0.40 * 30 / 60);
  EXPECT_DOUBLE_EQ(second->usage.process_samples[1].sm_ratio, 0.40 * 10 / 60);
  // A pid's GPUs are asked once, not at every collection.
  EXPECT_EQ(script().calls["rsmi_compute_process_gpus_get"], 3);
  auto other = b->collect(1);
  ASSERT_TRUE(other.ok());
  ASSERT_EQ(other->usage.processes->size(), 1u);
  EXPECT_EQ((*other->usage.processes)[0].pid, 103u);
}

}  // namespace
}  // namespace gpumeter
