#pragma once
// Every NVML entry point the agent resolves (backend/nvml_symbols.cpp), with the pointer type it
// calls it through: what a transcript records and a replay serves. nvmlErrorString returns a
// string, not a status, and passes through unrecorded.

#include "abi/nvml_api.h"

#define GPUMETER_TRANSCRIPT_CALLS(X)                                                 \
  X(nvmlInit_v2, nvmlInit_fn)                                                        \
  X(nvmlInit, nvmlInit_fn)                                                           \
  X(nvmlShutdown, nvmlShutdown_fn)                                                   \
  X(nvmlSystemGetDriverVersion, nvmlSystemGetDriverVersion_fn)                       \
  X(nvmlDeviceGetCount_v2, nvmlDeviceGetCount_fn)                                    \
  X(nvmlDeviceGetCount, nvmlDeviceGetCount_fn)                                       \
  X(nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetHandleByIndex_fn)                    \
  X(nvmlDeviceGetHandleByIndex, nvmlDeviceGetHandleByIndex_fn)                       \
  X(nvmlDeviceGetHandleByUUID, nvmlDeviceGetHandleByUUID_fn)                         \
  X(nvmlDeviceGetUUID, nvmlDeviceGetString_fn)                                       \
  X(nvmlDeviceGetName, nvmlDeviceGetString_fn)                                       \
  X(nvmlDeviceGetSerial, nvmlDeviceGetString_fn)                                     \
  X(nvmlDeviceGetVbiosVersion, nvmlDeviceGetString_fn)                               \
  X(nvmlDeviceGetMinorNumber, nvmlDeviceGetUInt_fn)                                  \
  X(nvmlDeviceGetPciInfo_v3, nvmlDeviceGetPciInfo_fn)                                \
  X(nvmlDeviceGetPciInfo_v2, nvmlDeviceGetPciInfo_fn)                                \
  X(nvmlDeviceGetPciInfo, nvmlDeviceGetPciInfo_fn)                                   \
  X(nvmlDeviceGetUtilizationRates, nvmlDeviceGetUtilizationRates_fn)                 \
  X(nvmlDeviceGetMemoryInfo_v2, nvmlDeviceGetMemoryInfo_v2_fn)                       \
  X(nvmlDeviceGetMemoryInfo, nvmlDeviceGetMemoryInfo_fn)                             \
  X(nvmlDeviceGetTemperature, nvmlDeviceGetTemperature_fn)                           \
  X(nvmlDeviceGetPowerUsage, nvmlDeviceGetUInt_fn)                                   \
  X(nvmlDeviceGetEnforcedPowerLimit, nvmlDeviceGetUInt_fn)                           \
  X(nvmlDeviceGetPowerManagementLimit, nvmlDeviceGetUInt_fn)                         \
  X(nvmlDeviceGetTotalEnergyConsumption, nvmlDeviceGetULongLong_fn)                  \
  X(nvmlDeviceGetClockInfo, nvmlDeviceGetClockInfo_fn)                               \
  X(nvmlDeviceGetPerformanceState, nvmlDeviceGetUInt_fn)                             \
  X(nvmlDeviceGetFanSpeed, nvmlDeviceGetUInt_fn)                                     \
  X(nvmlDeviceGetCurrPcieLinkGeneration, nvmlDeviceGetUInt_fn)                       \
  X(nvmlDeviceGetCurrPcieLinkWidth, nvmlDeviceGetUInt_fn)                            \
  X(nvmlDeviceGetPcieReplayCounter, nvmlDeviceGetUInt_fn)                            \
  X(nvmlDeviceGetPcieThroughput, nvmlDeviceGetPcieThroughput_fn)                     \
  X(nvmlDeviceGetEncoderUtilization, nvmlDeviceGetEnumPair_fn)                       \
  X(nvmlDeviceGetDecoderUtilization, nvmlDeviceGetEnumPair_fn)                       \
  X(nvmlDeviceGetFieldValues, nvmlDeviceGetFieldValues_fn)                           \
  X(nvmlDeviceGetCurrentClocksEventReasons, nvmlDeviceGetULongLong_fn)               \
  X(nvmlDeviceGetCurrentClocksThrottleReasons, nvmlDeviceGetULongLong_fn)            \
  X(nvmlDeviceGetSupportedClocksEventReasons, nvmlDeviceGetULongLong_fn)             \
  X(nvmlDeviceGetSupportedClocksThrottleReasons, nvmlDeviceGetULongLong_fn)          \
  X(nvmlDeviceGetTotalEccErrors, nvmlDeviceGetTotalEccErrors_fn)                     \
  X(nvmlDeviceGetRemappedRows, nvmlDeviceGetRemappedRows_fn)                         \
  X(nvmlDeviceGetGridLicensableFeatures_v4, nvmlDeviceGetGridLicensableFeatures_fn)  \
  X(nvmlDeviceGetComputeRunningProcesses_v3, nvmlDeviceGetProcessesRaw_fn)           \
  X(nvmlDeviceGetComputeRunningProcesses_v2, nvmlDeviceGetProcessesRaw_fn)           \
  X(nvmlDeviceGetComputeRunningProcesses, nvmlDeviceGetProcessesRaw_fn)              \
  X(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlDeviceGetProcessesRaw_fn)          \
  X(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlDeviceGetProcessesRaw_fn)          \
  X(nvmlDeviceGetGraphicsRunningProcesses, nvmlDeviceGetProcessesRaw_fn)             \
  X(nvmlDeviceGetMPSComputeRunningProcesses_v3, nvmlDeviceGetProcessesRaw_fn)        \
  X(nvmlDeviceGetMPSComputeRunningProcesses_v2, nvmlDeviceGetProcessesRaw_fn)        \
  X(nvmlDeviceGetMPSComputeRunningProcesses, nvmlDeviceGetProcessesRaw_fn)           \
  X(nvmlDeviceGetProcessesUtilizationInfo, nvmlDeviceGetProcessesUtilizationInfo_fn) \
  X(nvmlDeviceGetProcessUtilization, nvmlDeviceGetProcessUtilization_fn)             \
  X(nvmlDeviceGetSamples, nvmlDeviceGetSamples_fn)                                   \
  X(nvmlEventSetCreate, nvmlEventSetCreate_fn)                                       \
  X(nvmlDeviceGetSupportedEventTypes, nvmlDeviceGetULongLong_fn)                     \
  X(nvmlDeviceRegisterEvents, nvmlDeviceRegisterEvents_fn)                           \
  X(nvmlEventSetWait_v2, nvmlEventSetWait_fn)                                        \
  X(nvmlEventSetWait, nvmlEventSetWait_fn)                                           \
  X(nvmlEventSetFree, nvmlEventSetFree_fn)                                           \
  X(nvmlDeviceGetMigMode, nvmlDeviceGetMigMode_fn)                                   \
  X(nvmlDeviceGetMaxMigDeviceCount, nvmlDeviceGetMaxMigDeviceCount_fn)               \
  X(nvmlDeviceGetMigDeviceHandleByIndex, nvmlDeviceGetMigDeviceHandleByIndex_fn)     \
  X(nvmlDeviceGetGpuInstanceId, nvmlDeviceGetUInt_fn)                                \
  X(nvmlDeviceGetComputeInstanceId, nvmlDeviceGetUInt_fn)                            \
  X(nvmlDeviceGetAttributes_v2, nvmlDeviceGetAttributes_fn)                          \
  X(nvmlDeviceGetGpuInstanceById, nvmlDeviceGetGpuInstanceById_fn)                   \
  X(nvmlGpuInstanceGetInfo, nvmlGpuInstanceGetInfo_fn)                               \
  X(nvmlDeviceGetGpuInstanceProfileInfoV, nvmlDeviceGetGpuInstanceProfileInfoV_fn)   \
  X(nvmlGpmQueryDeviceSupport, nvmlGpmQueryDeviceSupport_fn)                         \
  X(nvmlGpmSampleAlloc, nvmlGpmSampleAlloc_fn)                                       \
  X(nvmlGpmSampleFree, nvmlGpmSampleFree_fn)                                         \
  X(nvmlGpmSampleGet, nvmlGpmSampleGet_fn)                                           \
  X(nvmlGpmMigSampleGet, nvmlGpmMigSampleGet_fn)                                     \
  X(nvmlGpmMetricsGet, nvmlGpmMetricsGet_fn)

namespace gpumeter::transcript {

enum class Call : unsigned {
#define GPUMETER_TRANSCRIPT_ENUM(name, type) name,
  GPUMETER_TRANSCRIPT_CALLS(GPUMETER_TRANSCRIPT_ENUM)
#undef GPUMETER_TRANSCRIPT_ENUM
      count
};

inline constexpr const char* kCallNames[] = {
#define GPUMETER_TRANSCRIPT_NAME(name, type) #name,
    GPUMETER_TRANSCRIPT_CALLS(GPUMETER_TRANSCRIPT_NAME)
#undef GPUMETER_TRANSCRIPT_NAME
};

inline const char* call_name(Call c) { return kCallNames[static_cast<unsigned>(c)]; }

// The size of one record a process-list call writes: the unversioned calls write v1 records.
inline unsigned process_record_bytes(Call c) {
  return c == Call::nvmlDeviceGetComputeRunningProcesses || c == Call::nvmlDeviceGetGraphicsRunningProcesses ||
                 c == Call::nvmlDeviceGetMPSComputeRunningProcesses
             ? sizeof(nvmlProcessInfo_v1_t)
             : sizeof(nvmlProcessInfo_t);
}

}  // namespace gpumeter::transcript
