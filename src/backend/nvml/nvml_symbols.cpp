#include "backend/nvml/nvml_symbols.h"

#include <initializer_list>

namespace gpumeter {

namespace {

// Returns the first name that resolves, in order of preference.
template <typename Fn>
Fn first_of(const SymbolSource& lib, std::initializer_list<const char*> names, std::vector<std::string>* missing) {
  for (const char* n : names) {
    if (void* p = lib.symbol(n)) return reinterpret_cast<Fn>(p);
  }
  if (missing != nullptr) missing->emplace_back(*names.begin());
  return nullptr;
}

}  // namespace

Result<NvmlSymbols> NvmlSymbols::resolve(const SymbolSource& lib) {
  NvmlSymbols s;
  auto* miss = &s.missing;
  s.init = first_of<nvmlInit_fn>(lib, {"nvmlInit_v2", "nvmlInit"}, nullptr);
  s.shutdown = first_of<nvmlShutdown_fn>(lib, {"nvmlShutdown"}, nullptr);
  // Count and handle-by-index must come from the same generation: _v2 counts devices that the
  // v1 calls skip, so mixing them can make one index mean two different GPUs.
  auto count_v2 = first_of<nvmlDeviceGetCount_fn>(lib, {"nvmlDeviceGetCount_v2"}, nullptr);
  auto handle_v2 = first_of<nvmlDeviceGetHandleByIndex_fn>(lib, {"nvmlDeviceGetHandleByIndex_v2"}, nullptr);
  if (count_v2 != nullptr && handle_v2 != nullptr) {
    s.device_count = count_v2;
    s.handle_by_index = handle_v2;
  } else {
    s.device_count = first_of<nvmlDeviceGetCount_fn>(lib, {"nvmlDeviceGetCount"}, nullptr);
    s.handle_by_index = first_of<nvmlDeviceGetHandleByIndex_fn>(lib, {"nvmlDeviceGetHandleByIndex"}, nullptr);
  }
  std::string required_missing;
  if (s.init == nullptr) required_missing += " nvmlInit_v2";
  if (s.shutdown == nullptr) required_missing += " nvmlShutdown";
  if (s.device_count == nullptr) required_missing += " nvmlDeviceGetCount_v2";
  if (s.handle_by_index == nullptr) required_missing += " nvmlDeviceGetHandleByIndex_v2";
  if (!required_missing.empty()) {
    return Error{NVML_ERROR_FUNCTION_NOT_FOUND, lib.path() + " lacks required NVML entry points:" + required_missing};
  }

  s.error_string = first_of<nvmlErrorString_fn>(lib, {"nvmlErrorString"}, miss);
  s.driver_version = first_of<nvmlSystemGetDriverVersion_fn>(lib, {"nvmlSystemGetDriverVersion"}, miss);
  s.handle_by_uuid = first_of<nvmlDeviceGetHandleByUUID_fn>(lib, {"nvmlDeviceGetHandleByUUID"}, miss);
  s.uuid = first_of<nvmlDeviceGetString_fn>(lib, {"nvmlDeviceGetUUID"}, miss);
  s.name = first_of<nvmlDeviceGetString_fn>(lib, {"nvmlDeviceGetName"}, miss);
  s.serial = first_of<nvmlDeviceGetString_fn>(lib, {"nvmlDeviceGetSerial"}, miss);
  s.vbios_version = first_of<nvmlDeviceGetString_fn>(lib, {"nvmlDeviceGetVbiosVersion"}, miss);
  s.minor_number = first_of<nvmlDeviceGetUInt_fn>(lib, {"nvmlDeviceGetMinorNumber"}, miss);
  s.pci_info = first_of<nvmlDeviceGetPciInfo_fn>(
      lib, {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"}, miss);
  s.utilization = first_of<nvmlDeviceGetUtilizationRates_fn>(lib, {"nvmlDeviceGetUtilizationRates"}, miss);
  s.memory_v2 = first_of<nvmlDeviceGetMemoryInfo_v2_fn>(lib, {"nvmlDeviceGetMemoryInfo_v2"}, miss);
  s.memory_v1 = first_of<nvmlDeviceGetMemoryInfo_fn>(lib, {"nvmlDeviceGetMemoryInfo"}, miss);
  s.temperature = first_of<nvmlDeviceGetTemperature_fn>(lib, {"nvmlDeviceGetTemperature"}, miss);
  s.power_usage = first_of<nvmlDeviceGetUInt_fn>(lib, {"nvmlDeviceGetPowerUsage"}, miss);
  s.power_limit = first_of<nvmlDeviceGetUInt_fn>(
      lib, {"nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit"}, miss);
  s.total_energy = first_of<nvmlDeviceGetULongLong_fn>(lib, {"nvmlDeviceGetTotalEnergyConsumption"}, miss);
  s.clock_info = first_of<nvmlDeviceGetClockInfo_fn>(lib, {"nvmlDeviceGetClockInfo"}, miss);
  s.performance_state = first_of<nvmlDeviceGetUInt_fn>(lib, {"nvmlDeviceGetPerformanceState"}, miss);
  s.fan_speed = first_of<nvmlDeviceGetUInt_fn>(lib, {"nvmlDeviceGetFanSpeed"}, miss);
  s.encoder_utilization = first_of<nvmlDeviceGetEnumPair_fn>(lib, {"nvmlDeviceGetEncoderUtilization"}, miss);
  s.decoder_utilization = first_of<nvmlDeviceGetEnumPair_fn>(lib, {"nvmlDeviceGetDecoderUtilization"}, miss);
  s.pcie_link_generation = first_of<nvmlDeviceGetUInt_fn>(lib, {"nvmlDeviceGetCurrPcieLinkGeneration"}, miss);
  s.pcie_link_width = first_of<nvmlDeviceGetUInt_fn>(lib, {"nvmlDeviceGetCurrPcieLinkWidth"}, miss);
  s.pcie_replay_counter = first_of<nvmlDeviceGetUInt_fn>(lib, {"nvmlDeviceGetPcieReplayCounter"}, miss);
  s.pcie_throughput = first_of<nvmlDeviceGetPcieThroughput_fn>(lib, {"nvmlDeviceGetPcieThroughput"}, miss);
  s.field_values = first_of<nvmlDeviceGetFieldValues_fn>(lib, {"nvmlDeviceGetFieldValues"}, miss);
  s.clock_event_reasons = first_of<nvmlDeviceGetULongLong_fn>(
      lib, {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"}, miss);
  s.supported_clock_event_reasons = first_of<nvmlDeviceGetULongLong_fn>(
      lib, {"nvmlDeviceGetSupportedClocksEventReasons", "nvmlDeviceGetSupportedClocksThrottleReasons"}, miss);
  s.total_ecc_errors = first_of<nvmlDeviceGetTotalEccErrors_fn>(lib, {"nvmlDeviceGetTotalEccErrors"}, miss);
  s.remapped_rows = first_of<nvmlDeviceGetRemappedRows_fn>(lib, {"nvmlDeviceGetRemappedRows"}, miss);
  s.vgpu_license =
      first_of<nvmlDeviceGetGridLicensableFeatures_fn>(lib, {"nvmlDeviceGetGridLicensableFeatures_v4"}, miss);
  auto processes = [&](nvmlDeviceGetProcessesRaw_fn(&out)[3], const std::string& base) {
    const std::string names[3] = {base + "_v3", base + "_v2", base};
    for (int i = 0; i < 3; ++i) out[i] = reinterpret_cast<nvmlDeviceGetProcessesRaw_fn>(lib.symbol(names[i].c_str()));
    if (out[0] == nullptr && out[1] == nullptr && out[2] == nullptr) miss->push_back(names[0]);
  };
  processes(s.compute_processes, "nvmlDeviceGetComputeRunningProcesses");
  processes(s.graphics_processes, "nvmlDeviceGetGraphicsRunningProcesses");
  processes(s.mps_processes, "nvmlDeviceGetMPSComputeRunningProcesses");
  // Not listed as missing when absent: drivers before R550 have only the legacy call.
  s.processes_utilization_info =
      first_of<nvmlDeviceGetProcessesUtilizationInfo_fn>(lib, {"nvmlDeviceGetProcessesUtilizationInfo"}, nullptr);
  s.process_utilization = first_of<nvmlDeviceGetProcessUtilization_fn>(lib, {"nvmlDeviceGetProcessUtilization"}, miss);
  s.samples = first_of<nvmlDeviceGetSamples_fn>(lib, {"nvmlDeviceGetSamples"}, miss);
  s.event_set_create = first_of<nvmlEventSetCreate_fn>(lib, {"nvmlEventSetCreate"}, miss);
  s.supported_event_types = first_of<nvmlDeviceGetULongLong_fn>(lib, {"nvmlDeviceGetSupportedEventTypes"}, miss);
  s.register_events = first_of<nvmlDeviceRegisterEvents_fn>(lib, {"nvmlDeviceRegisterEvents"}, miss);
  s.event_set_wait = first_of<nvmlEventSetWait_fn>(lib, {"nvmlEventSetWait_v2", "nvmlEventSetWait"}, miss);
  s.event_set_free = first_of<nvmlEventSetFree_fn>(lib, {"nvmlEventSetFree"}, miss);
  // Not listed as missing when absent: drivers before R470 (MIG) and R520 (GPM) lack them, and
  // GPUs before Ampere and Hopper could not use them anyway.
  s.mig_mode = first_of<nvmlDeviceGetMigMode_fn>(lib, {"nvmlDeviceGetMigMode"}, nullptr);
  s.max_mig_device_count =
      first_of<nvmlDeviceGetMaxMigDeviceCount_fn>(lib, {"nvmlDeviceGetMaxMigDeviceCount"}, nullptr);
  s.mig_device_handle_by_index =
      first_of<nvmlDeviceGetMigDeviceHandleByIndex_fn>(lib, {"nvmlDeviceGetMigDeviceHandleByIndex"}, nullptr);
  s.gpu_instance_id = first_of<nvmlDeviceGetUInt_fn>(lib, {"nvmlDeviceGetGpuInstanceId"}, nullptr);
  s.compute_instance_id = first_of<nvmlDeviceGetUInt_fn>(lib, {"nvmlDeviceGetComputeInstanceId"}, nullptr);
  s.attributes = first_of<nvmlDeviceGetAttributes_fn>(lib, {"nvmlDeviceGetAttributes_v2"}, nullptr);
  s.gpu_instance_by_id = first_of<nvmlDeviceGetGpuInstanceById_fn>(lib, {"nvmlDeviceGetGpuInstanceById"}, nullptr);
  s.gpu_instance_info = first_of<nvmlGpuInstanceGetInfo_fn>(lib, {"nvmlGpuInstanceGetInfo"}, nullptr);
  s.gpu_instance_profile_info =
      first_of<nvmlDeviceGetGpuInstanceProfileInfoV_fn>(lib, {"nvmlDeviceGetGpuInstanceProfileInfoV"}, nullptr);
  s.gpm_query_device_support = first_of<nvmlGpmQueryDeviceSupport_fn>(lib, {"nvmlGpmQueryDeviceSupport"}, nullptr);
  s.gpm_sample_alloc = first_of<nvmlGpmSampleAlloc_fn>(lib, {"nvmlGpmSampleAlloc"}, nullptr);
  s.gpm_sample_free = first_of<nvmlGpmSampleFree_fn>(lib, {"nvmlGpmSampleFree"}, nullptr);
  s.gpm_sample_get = first_of<nvmlGpmSampleGet_fn>(lib, {"nvmlGpmSampleGet"}, nullptr);
  s.gpm_mig_sample_get = first_of<nvmlGpmMigSampleGet_fn>(lib, {"nvmlGpmMigSampleGet"}, nullptr);
  s.gpm_metrics_get = first_of<nvmlGpmMetricsGet_fn>(lib, {"nvmlGpmMetricsGet"}, nullptr);
  return s;
}

}  // namespace gpumeter
