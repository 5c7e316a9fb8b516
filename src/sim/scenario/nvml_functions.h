#pragma once
// The NVML entry points the simulator exports, by name. Scenario files (hang.call) and
// GPUMETER_SIM_UNSUPPORTED name functions; this one list lets both be checked, and lets the C
// layer keep the unsupported set as a bitset instead of comparing strings on every call.

#include <cstddef>
#include <optional>
#include <string_view>

namespace gpumeter::sim {

// X(name, kind): kind is `device` for calls that act on one GPU (faults apply to them),
// `system` for the rest, `lifecycle` for the ones that can never be made unsupported.
#define GPUMETER_SIM_NVML_FUNCTIONS(X)                                \
  X(nvmlInit_v2, lifecycle)                                           \
  X(nvmlInit, lifecycle)                                              \
  X(nvmlInitWithFlags, lifecycle)                                     \
  X(nvmlShutdown, lifecycle)                                          \
  X(nvmlErrorString, lifecycle)                                       \
  X(nvmlSystemGetDriverVersion, system)                               \
  X(nvmlSystemGetNVMLVersion, system)                                 \
  X(nvmlSystemGetCudaDriverVersion, system)                           \
  X(nvmlDeviceGetCount_v2, system)                                    \
  X(nvmlDeviceGetCount, system)                                       \
  X(nvmlDeviceGetHandleByIndex_v2, device)                            \
  X(nvmlDeviceGetHandleByIndex, device)                               \
  X(nvmlDeviceGetHandleByUUID, device)                                \
  X(nvmlDeviceGetIndex, device)                                       \
  X(nvmlDeviceGetUUID, device)                                        \
  X(nvmlDeviceGetName, device)                                        \
  X(nvmlDeviceGetSerial, device)                                      \
  X(nvmlDeviceGetVbiosVersion, device)                                \
  X(nvmlDeviceGetPciInfo_v3, device)                                  \
  X(nvmlDeviceGetPciInfo_v2, device)                                  \
  X(nvmlDeviceGetUtilizationRates, device)                            \
  X(nvmlDeviceGetMemoryInfo, device)                                  \
  X(nvmlDeviceGetMemoryInfo_v2, device)                               \
  X(nvmlDeviceGetTemperature, device)                                 \
  X(nvmlDeviceGetPowerUsage, device)                                  \
  X(nvmlDeviceGetEnforcedPowerLimit, device)                          \
  X(nvmlDeviceGetPowerManagementLimit, device)                        \
  X(nvmlDeviceGetTotalEnergyConsumption, device)                      \
  X(nvmlDeviceGetClockInfo, device)                                   \
  X(nvmlDeviceGetMaxClockInfo, device)                                \
  X(nvmlDeviceGetPerformanceState, device)                            \
  X(nvmlDeviceGetFanSpeed, device)                                    \
  X(nvmlDeviceGetCurrPcieLinkGeneration, device)                      \
  X(nvmlDeviceGetCurrPcieLinkWidth, device)                           \
  X(nvmlDeviceGetMaxPcieLinkGeneration, device)                       \
  X(nvmlDeviceGetMaxPcieLinkWidth, device)                            \
  X(nvmlDeviceGetPcieReplayCounter, device)                           \
  X(nvmlDeviceGetFieldValues, device)                                 \
  X(nvmlDeviceGetCurrentClocksEventReasons, device)                   \
  X(nvmlDeviceGetCurrentClocksThrottleReasons, device)                \
  X(nvmlDeviceGetSupportedClocksEventReasons, device)                 \
  X(nvmlDeviceGetSupportedClocksThrottleReasons, device)              \
  X(nvmlDeviceGetTotalEccErrors, device)                              \
  X(nvmlDeviceGetRemappedRows, device)                                \
  X(nvmlDeviceGetComputeRunningProcesses_v3, device)                  \
  X(nvmlDeviceGetComputeRunningProcesses_v2, device)                  \
  X(nvmlDeviceGetComputeRunningProcesses, device)                     \
  X(nvmlDeviceGetGraphicsRunningProcesses_v3, device)                 \
  X(nvmlDeviceGetMPSComputeRunningProcesses_v3, device)               \
  X(nvmlDeviceGetProcessUtilization, device)                          \
  X(nvmlDeviceGetProcessesUtilizationInfo, device)                    \
  X(nvmlDeviceGetPcieThroughput, device)                              \
  X(nvmlDeviceGetSamples, device)                                     \
  /* GPM and NVLink: nvml_exports_gpm.cpp, nvml_exports_nvlink.cpp */ \
  X(nvmlGpmQueryDeviceSupport, device)                                \
  X(nvmlGpmSampleAlloc, system)                                       \
  X(nvmlGpmSampleFree, system)                                        \
  X(nvmlGpmSampleGet, device)                                         \
  X(nvmlGpmMigSampleGet, device)                                      \
  X(nvmlGpmMetricsGet, system)                                        \
  X(nvmlDeviceGetNvLinkState, device)                                 \
  X(nvmlEventSetCreate, system)                                       \
  X(nvmlDeviceGetSupportedEventTypes, device)                         \
  X(nvmlDeviceRegisterEvents, device)                                 \
  X(nvmlEventSetWait_v2, system)                                      \
  X(nvmlEventSetFree, system)                                         \
  /* informational queries: nvml_exports_info.cpp */                  \
  X(nvmlDeviceGetBrand, device)                                       \
  X(nvmlDeviceGetDisplayMode, device)                                 \
  X(nvmlDeviceGetDisplayActive, device)                               \
  X(nvmlDeviceGetPersistenceMode, device)                             \
  X(nvmlDeviceGetAccountingMode, device)                              \
  X(nvmlDeviceGetAccountingBufferSize, device)                        \
  X(nvmlDeviceGetAccountingPids, device)                              \
  X(nvmlDeviceGetAccountingStats, device)                             \
  X(nvmlDeviceGetDriverModel, device)                                 \
  X(nvmlDeviceGetDriverModel_v2, device)                              \
  X(nvmlDeviceGetMinorNumber, device)                                 \
  X(nvmlDeviceGetMultiGpuBoard, device)                               \
  X(nvmlDeviceGetBoardId, device)                                     \
  X(nvmlDeviceGetInforomImageVersion, device)                         \
  X(nvmlDeviceGetInforomVersion, device)                              \
  X(nvmlDeviceGetGpuOperationMode, device)                            \
  X(nvmlDeviceGetBridgeChipInfo, device)                              \
  X(nvmlDeviceGetPowerState, device)                                  \
  X(nvmlDeviceGetBAR1MemoryInfo, device)                              \
  X(nvmlDeviceGetComputeMode, device)                                 \
  X(nvmlDeviceGetEncoderUtilization, device)                          \
  X(nvmlDeviceGetDecoderUtilization, device)                          \
  X(nvmlDeviceGetEccMode, device)                                     \
  X(nvmlDeviceGetMemoryErrorCounter, device)                          \
  X(nvmlDeviceGetRetiredPages, device)                                \
  X(nvmlDeviceGetRetiredPagesPendingStatus, device)                   \
  X(nvmlDeviceGetTemperatureThreshold, device)                        \
  X(nvmlDeviceGetPowerManagementMode, device)                         \
  X(nvmlDeviceGetPowerManagementDefaultLimit, device)                 \
  X(nvmlDeviceGetPowerManagementLimitConstraints, device)             \
  X(nvmlDeviceGetApplicationsClock, device)                           \
  X(nvmlDeviceGetDefaultApplicationsClock, device)                    \
  X(nvmlDeviceGetAutoBoostedClocksEnabled, device)                    \
  X(nvmlDeviceGetSupportedMemoryClocks, device)                       \
  X(nvmlDeviceGetSupportedGraphicsClocks, device)                     \
  X(nvmlSystemGetProcessName, system)                                 \
  X(nvmlDeviceGetArchitecture, device)                                \
  X(nvmlDeviceGetCudaComputeCapability, device)                       \
  X(nvmlDeviceGetGridLicensableFeatures_v4, device)                   \
  X(nvmlDeviceGetMigMode, device)                                     \
  /* MIG: nvml_exports_mig.cpp */                                     \
  X(nvmlDeviceGetMaxMigDeviceCount, device)                           \
  X(nvmlDeviceGetMigDeviceHandleByIndex, device)                      \
  X(nvmlDeviceIsMigDeviceHandle, device)                              \
  X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, device)             \
  X(nvmlDeviceGetGpuInstanceId, device)                               \
  X(nvmlDeviceGetComputeInstanceId, device)                           \
  X(nvmlDeviceGetAttributes_v2, device)                               \
  X(nvmlDeviceGetGpuInstanceProfileInfoV, device)                     \
  X(nvmlDeviceGetGpuInstanceById, device)                             \
  X(nvmlGpuInstanceGetInfo, device)

enum class NvmlFunction : unsigned {
#define GPUMETER_SIM_X(name, kind) name,
  GPUMETER_SIM_NVML_FUNCTIONS(GPUMETER_SIM_X)
#undef GPUMETER_SIM_X
};

enum class NvmlFunctionKind { lifecycle, system, device };

inline constexpr std::size_t kNvmlFunctionCount = 0
#define GPUMETER_SIM_X(name, kind) +1
    GPUMETER_SIM_NVML_FUNCTIONS(GPUMETER_SIM_X)
#undef GPUMETER_SIM_X
    ;

std::string_view nvml_function_name(NvmlFunction f);
NvmlFunctionKind nvml_function_kind(NvmlFunction f);
std::optional<NvmlFunction> nvml_function_from_name(std::string_view name);

}  // namespace gpumeter::sim
