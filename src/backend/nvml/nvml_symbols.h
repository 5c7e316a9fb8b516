#pragma once
// The NVML entry points gpumeter uses, resolved once from a SymbolSource. Versioned names are
// preferred (nvmlInit_v2, nvmlDeviceGetCount_v2, ...) with the documented fallbacks. Only the
// init/enumeration entry points are required; every other pointer may be null, which turns off
// just the metrics it feeds.

#include <string>
#include <vector>

#include "backend/dynamic_library.h"
#include "abi/nvml_api.h"

namespace gpumeter {

struct NvmlSymbols {
  nvmlInit_fn init = nullptr;
  nvmlShutdown_fn shutdown = nullptr;
  nvmlErrorString_fn error_string = nullptr;
  nvmlSystemGetDriverVersion_fn driver_version = nullptr;
  nvmlDeviceGetCount_fn device_count = nullptr;
  nvmlDeviceGetHandleByIndex_fn handle_by_index = nullptr;
  nvmlDeviceGetHandleByUUID_fn handle_by_uuid = nullptr;
  nvmlDeviceGetString_fn uuid = nullptr;
  nvmlDeviceGetString_fn name = nullptr;
  nvmlDeviceGetString_fn serial = nullptr;
  nvmlDeviceGetString_fn vbios_version = nullptr;
  nvmlDeviceGetUInt_fn minor_number = nullptr;
  nvmlDeviceGetPciInfo_fn pci_info = nullptr;
  nvmlDeviceGetUtilizationRates_fn utilization = nullptr;
  nvmlDeviceGetMemoryInfo_v2_fn memory_v2 = nullptr;
  nvmlDeviceGetMemoryInfo_fn memory_v1 = nullptr;
  nvmlDeviceGetTemperature_fn temperature = nullptr;
  nvmlDeviceGetUInt_fn power_usage = nullptr;
  nvmlDeviceGetUInt_fn power_limit = nullptr;
  nvmlDeviceGetGridLicensableFeatures_fn vgpu_license = nullptr;  // _v4 only: earlier layouts differ
  nvmlDeviceGetULongLong_fn total_energy = nullptr;
  nvmlDeviceGetClockInfo_fn clock_info = nullptr;
  nvmlDeviceGetUInt_fn performance_state = nullptr;
  nvmlDeviceGetUInt_fn fan_speed = nullptr;
  nvmlDeviceGetEnumPair_fn encoder_utilization = nullptr;
  nvmlDeviceGetEnumPair_fn decoder_utilization = nullptr;
  nvmlDeviceGetUInt_fn pcie_link_generation = nullptr;
  nvmlDeviceGetUInt_fn pcie_link_width = nullptr;
  nvmlDeviceGetUInt_fn pcie_replay_counter = nullptr;
  nvmlDeviceGetPcieThroughput_fn pcie_throughput = nullptr;  // blocks 20 ms; the throughput reader's thread only
  nvmlDeviceGetFieldValues_fn field_values = nullptr;
  nvmlDeviceGetULongLong_fn clock_event_reasons = nullptr;
  nvmlDeviceGetULongLong_fn supported_clock_event_reasons = nullptr;
  nvmlDeviceGetTotalEccErrors_fn total_ecc_errors = nullptr;
  nvmlDeviceGetRemappedRows_fn remapped_rows = nullptr;
  // Process lists by generation, newest first: [0] _v3, [1] _v2, [2] unversioned (v1 records).
  nvmlDeviceGetProcessesRaw_fn compute_processes[3] = {};
  nvmlDeviceGetProcessesRaw_fn graphics_processes[3] = {};
  nvmlDeviceGetProcessesRaw_fn mps_processes[3] = {};
  nvmlDeviceGetProcessesUtilizationInfo_fn processes_utilization_info = nullptr;  // R550+
  nvmlDeviceGetProcessUtilization_fn process_utilization = nullptr;
  nvmlDeviceGetSamples_fn samples = nullptr;
  nvmlEventSetCreate_fn event_set_create = nullptr;
  nvmlDeviceGetULongLong_fn supported_event_types = nullptr;
  nvmlDeviceRegisterEvents_fn register_events = nullptr;
  nvmlEventSetWait_fn event_set_wait = nullptr;
  nvmlEventSetFree_fn event_set_free = nullptr;
  // MIG (R470+): mode, MIG device handles and what they are.
  nvmlDeviceGetMigMode_fn mig_mode = nullptr;
  nvmlDeviceGetMaxMigDeviceCount_fn max_mig_device_count = nullptr;
  nvmlDeviceGetMigDeviceHandleByIndex_fn mig_device_handle_by_index = nullptr;
  nvmlDeviceGetUInt_fn gpu_instance_id = nullptr;      // of a MIG device handle
  nvmlDeviceGetUInt_fn compute_instance_id = nullptr;  // of a MIG device handle
  nvmlDeviceGetAttributes_fn attributes = nullptr;     // nvmlDeviceGetAttributes_v2
  nvmlDeviceGetGpuInstanceById_fn gpu_instance_by_id = nullptr;
  nvmlGpuInstanceGetInfo_fn gpu_instance_info = nullptr;
  nvmlDeviceGetGpuInstanceProfileInfoV_fn gpu_instance_profile_info = nullptr;
  // GPM (R520+, Hopper and newer GPUs).
  nvmlGpmQueryDeviceSupport_fn gpm_query_device_support = nullptr;
  nvmlGpmSampleAlloc_fn gpm_sample_alloc = nullptr;
  nvmlGpmSampleFree_fn gpm_sample_free = nullptr;
  nvmlGpmSampleGet_fn gpm_sample_get = nullptr;
  nvmlGpmMigSampleGet_fn gpm_mig_sample_get = nullptr;
  nvmlGpmMetricsGet_fn gpm_metrics_get = nullptr;

  // Every GPM entry point a sample pair needs (nvmlGpmMigSampleGet is optional: a MIG device
  // handle can be sampled with nvmlGpmSampleGet).
  bool has_gpm() const {
    return gpm_query_device_support != nullptr && gpm_sample_alloc != nullptr && gpm_sample_free != nullptr &&
           gpm_sample_get != nullptr && gpm_metrics_get != nullptr;
  }

  // Resolves everything. Fails only when a required entry point is missing.
  static Result<NvmlSymbols> resolve(const SymbolSource& lib);
  // Names of optional entry points that were not found (for the start-up log).
  std::vector<std::string> missing;
};

}  // namespace gpumeter
