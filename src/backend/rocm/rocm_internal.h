#pragma once
// What the ROCm SMI backend's source files share: the library's entry points. Not part of the
// backend's interface.

#include "abi/rocm_smi_api.h"
#include "backend/clock_steps.h"
#include "backend/rocm/rocm_backend.h"

namespace gpumeter {

struct RocmBackend::Symbols {
  // Required: without them the library is not ROCm SMI.
  rsmi::InitFn init = nullptr;
  rsmi::ShutDownFn shut_down = nullptr;
  rsmi::NumDevicesFn num_devices = nullptr;
  // Optional: a missing one leaves out what it feeds.
  rsmi::VersionFn version = nullptr;
  rsmi::VersionStrFn version_str = nullptr;
  rsmi::StatusStringFn status_string = nullptr;
  rsmi::StringFn name = nullptr;
  rsmi::StringU32Fn serial = nullptr;
  rsmi::StringU32Fn vbios = nullptr;
  rsmi::U64Fn unique_id = nullptr;
  rsmi::U64Fn pci_id = nullptr;
  rsmi::U32Fn busy = nullptr;
  rsmi::U32Fn memory_busy = nullptr;
  rsmi::MemoryFn memory_total = nullptr;
  rsmi::MemoryFn memory_usage = nullptr;
  rsmi::TempFn temperature = nullptr;
  rsmi::PowerFn power = nullptr;       // rsmi_dev_power_get (6.0+)
  rsmi::U64Fn socket_power = nullptr;  // rsmi_dev_current_socket_power_get (6.0+)
  rsmi::SensorU64Fn power_ave = nullptr;
  rsmi::SensorU64Fn power_cap = nullptr;
  rsmi::EnergyFn energy = nullptr;
  rsmi::ClockFn clock = nullptr;
  rsmi::PcieBandwidthFn pcie_bandwidth = nullptr;
  rsmi::U64Fn replay = nullptr;
  rsmi::FanFn fan = nullptr;
  rsmi::SensorU64Fn fan_max = nullptr;
  rsmi::U64Fn ecc_enabled = nullptr;
  rsmi::EccCountFn ecc_count = nullptr;
  rsmi::PerfLevelFn perf_level = nullptr;
  rsmi::ThroughputFn pcie_throughput = nullptr;
  rsmi::GpuMetricsFn gpu_metrics = nullptr;
  rsmi::ProcessListFn process_list = nullptr;
  rsmi::ProcessByPidFn process_by_pid = nullptr;
  rsmi::ProcessGpusFn process_gpus = nullptr;
};

// Where a GPU's power came from at a collection (rocm_device.cpp, read_power).
enum class RocmBackend::PowerSource : std::uint8_t {
  kUnknown,     // not read yet
  kPowerGet,    // rsmi_dev_power_get
  kSocket,      // rsmi_dev_current_socket_power_get
  kAverage,     // rsmi_dev_power_ave_get
  kGpuMetrics,  // gpu_metrics' average_socket_power (5.x layout)
  kNone,        // every source answered NOT_SUPPORTED or is missing
  kFailed,      // a source failed with another status (counted as a call error)
};

struct RocmBackend::DeviceState {
  std::int64_t last_usage_us = 0;  // when the previous process query ran (wall clock)
  WallClockSteps clock_steps;
  PowerSource power_source = PowerSource::kUnknown;  // the last one logged about (note_power_source)
};

}  // namespace gpumeter
