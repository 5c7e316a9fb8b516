#pragma once
// The subset of the NVML C API that gpumeter uses, declared by the project itself so that
// building needs no NVIDIA SDK. Layouts and constants follow NVIDIA's nvml.h (API version 13);
// every struct is checked with static_assert against the sizes measured from that header.
// Both the NVML backend (which dlopen()s the real library) and the fleet simulator (which
// implements these functions) include this file, so the two can never disagree on the ABI.

#include <cstddef>
#include <cstdint>

extern "C" {

typedef int nvmlReturn_t;  // a 4-byte C enum in nvml.h
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;
typedef struct nvmlGpuInstance_st* nvmlGpuInstance_t;
typedef struct nvmlGpmSample_st* nvmlGpmSample_t;

// ---- return codes ----
enum : nvmlReturn_t {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_UNKNOWN = 999,
};

// ---- buffer sizes (bytes, including NUL) ----
enum : unsigned int {
  NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96,
  NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96,
  NVML_DEVICE_SERIAL_BUFFER_SIZE = 30,
  NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80,
  NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE = 32,
};

#define GPUMETER_NVML_STRUCT_VERSION(size, ver) ((unsigned int)((size) | ((ver) << 24U)))

// ---- enums used as arguments ----
enum : unsigned int { NVML_TEMPERATURE_GPU = 0 };
enum : unsigned int { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_CLOCK_VIDEO = 3 };
enum : unsigned int { NVML_MEMORY_ERROR_TYPE_CORRECTED = 0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1 };
enum : unsigned int { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 };
enum : unsigned int { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };
enum : unsigned int { NVML_PSTATE_UNKNOWN = 32 };
enum : unsigned int {
  NVML_VALUE_TYPE_DOUBLE = 0,
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
  NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
  NVML_VALUE_TYPE_SIGNED_INT = 5,
  NVML_VALUE_TYPE_UNSIGNED_SHORT = 6,
};
enum : unsigned int { NVML_PCIE_UTIL_TX_BYTES = 0, NVML_PCIE_UTIL_RX_BYTES = 1 };
enum : unsigned int {
  NVML_TOTAL_POWER_SAMPLES = 0,
  NVML_GPU_UTILIZATION_SAMPLES = 1,
  NVML_MEMORY_UTILIZATION_SAMPLES = 2,
};

// ---- clocks event (throttle) reason bits ----
enum : unsigned long long {
  nvmlClocksEventReasonGpuIdle = 0x1ULL,
  nvmlClocksEventReasonApplicationsClocksSetting = 0x2ULL,
  nvmlClocksEventReasonSwPowerCap = 0x4ULL,
  nvmlClocksThrottleReasonHwSlowdown = 0x8ULL,
  nvmlClocksEventReasonSyncBoost = 0x10ULL,
  nvmlClocksEventReasonSwThermalSlowdown = 0x20ULL,
  nvmlClocksThrottleReasonHwThermalSlowdown = 0x40ULL,
  nvmlClocksThrottleReasonHwPowerBrakeSlowdown = 0x80ULL,
  nvmlClocksEventReasonDisplayClockSetting = 0x100ULL,
};

// ---- event types ----
enum : unsigned long long {
  nvmlEventTypeSingleBitEccError = 0x1ULL,
  nvmlEventTypeDoubleBitEccError = 0x2ULL,
  nvmlEventTypePState = 0x4ULL,
  nvmlEventTypeXidCriticalError = 0x8ULL,
};

// ---- field ids (nvmlDeviceGetFieldValues) ----
enum : unsigned int {
  NVML_FI_DEV_MEMORY_TEMP = 82,
  NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION = 83,
  NVML_FI_DEV_POWER_AVERAGE = 185,  // R535+: the 1 s average; Ampere (except GA100) and newer
  NVML_FI_DEV_POWER_INSTANT = 186,  // R535+
  NVML_FI_DEV_PCIE_COUNT_TX_BYTES = 197,
  NVML_FI_DEV_PCIE_COUNT_RX_BYTES = 198,
  // NVLink. Per-link fields take the link in scopeId; the throughput fields also take UINT_MAX
  // for the sum over the links.
  NVML_FI_DEV_NVLINK_LINK_COUNT = 91,
  NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138,  // KiB since the driver loaded
  NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139,  // KiB
  NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY = 161,     // per link; not on Blackwell and newer
  NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY = 162,
  NVML_FI_DEV_NVLINK_ERROR_DL_CRC = 163,
  NVML_FI_DEV_NVLINK_GET_SPEED = 164,    // MBps, per link
  NVML_FI_DEV_NVLINK_GET_STATE = 165,    // nvmlEnableState_t, per link
  NVML_FI_DEV_NVLINK_GET_VERSION = 166,  // nvmlNvlinkVersion_t, per link
};
// Values of NVML_FI_DEV_NVLINK_GET_STATE.
enum : unsigned int { NVML_NVLINK_STATE_INACTIVE = 0, NVML_NVLINK_STATE_ACTIVE = 1, NVML_NVLINK_STATE_SLEEP = 2 };
enum : unsigned int { NVML_NVLINK_MAX_LINKS = 36 };

// ---- MIG ----
// GPU instance profiles, the `profile` argument of nvmlDeviceGetGpuInstanceProfileInfoV (not the
// profile id a GPU instance reports, which is unique within the device).
enum : unsigned int {
  NVML_GPU_INSTANCE_PROFILE_1_SLICE = 0x0,
  NVML_GPU_INSTANCE_PROFILE_2_SLICE = 0x1,
  NVML_GPU_INSTANCE_PROFILE_3_SLICE = 0x2,
  NVML_GPU_INSTANCE_PROFILE_4_SLICE = 0x3,
  NVML_GPU_INSTANCE_PROFILE_7_SLICE = 0x4,
  NVML_GPU_INSTANCE_PROFILE_8_SLICE = 0x5,
  NVML_GPU_INSTANCE_PROFILE_6_SLICE = 0x6,
  NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 = 0x7,
  NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 = 0x8,
  NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 = 0x9,
  NVML_GPU_INSTANCE_PROFILE_COUNT = 0x12,  // header 13: every profile id is below it
};

// ---- GPM (GPU Performance Monitoring, Hopper and newer) ----
enum : unsigned int {
  NVML_GPM_METRIC_GRAPHICS_UTIL = 1,
  NVML_GPM_METRIC_SM_UTIL = 2,
  NVML_GPM_METRIC_SM_OCCUPANCY = 3,
  NVML_GPM_METRIC_INTEGER_UTIL = 4,
  NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5,
  NVML_GPM_METRIC_DFMA_TENSOR_UTIL = 6,
  NVML_GPM_METRIC_HMMA_TENSOR_UTIL = 7,
  NVML_GPM_METRIC_IMMA_TENSOR_UTIL = 9,
  NVML_GPM_METRIC_DRAM_BW_UTIL = 10,
  NVML_GPM_METRIC_FP64_UTIL = 11,
  NVML_GPM_METRIC_FP32_UTIL = 12,
  NVML_GPM_METRIC_FP16_UTIL = 13,
  NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20,  // MiB/s
  NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21,
  NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC = 60,  // MiB/s
  NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC = 61,
  // The header's NVML_GPM_METRIC_MAX grew without a version bump (98, then 210, then 333 in
  // header 13.2): the array is sized by the largest, so no driver can write past it.
  GPUMETER_NVML_GPM_METRIC_MAX = 333,
};
enum : unsigned int { NVML_GPM_METRICS_GET_VERSION = 1, NVML_GPM_SUPPORT_VERSION = 1 };

// ---- informational queries (nvidia-smi -q and clients modelled on it) ----
enum : unsigned int { NVML_DEVICE_INFOROM_VERSION_BUFFER_SIZE = 16 };
enum : unsigned int {  // nvmlBrandType_t
  NVML_BRAND_UNKNOWN = 0,
  NVML_BRAND_QUADRO = 1,
  NVML_BRAND_TESLA = 2,
  NVML_BRAND_NVS = 3,
  NVML_BRAND_GEFORCE = 5,
  NVML_BRAND_TITAN = 6,
  NVML_BRAND_QUADRO_RTX = 12,
  NVML_BRAND_NVIDIA_RTX = 13,
  NVML_BRAND_NVIDIA = 14,
};
enum : unsigned int {  // nvmlTemperatureThresholds_t
  NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0,
  NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1,
  NVML_TEMPERATURE_THRESHOLD_MEM_MAX = 2,
  NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3,
  NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN = 4,
  NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR = 5,
  NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX = 6,
  NVML_TEMPERATURE_THRESHOLD_GPS_CURR = 7,
  NVML_TEMPERATURE_THRESHOLD_COUNT = 8,
};
enum : unsigned int {
  NVML_INFOROM_OEM = 0,
  NVML_INFOROM_ECC = 1,
  NVML_INFOROM_POWER = 2,
  NVML_INFOROM_DEN = 3,
  NVML_INFOROM_COUNT = 4
};
enum : unsigned int {  // nvmlComputeMode_t
  NVML_COMPUTEMODE_DEFAULT = 0,
  NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,
  NVML_COMPUTEMODE_PROHIBITED = 2,
  NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
};
enum : unsigned int { NVML_GOM_ALL_ON = 0, NVML_GOM_COMPUTE = 1, NVML_GOM_LOW_DP = 2 };
enum : unsigned int { NVML_DRIVER_WDDM = 0, NVML_DRIVER_WDM = 1, NVML_DRIVER_MCDM = 2 };
enum : unsigned int {  // nvmlMemoryLocation_t
  NVML_MEMORY_LOCATION_L1_CACHE = 0,
  NVML_MEMORY_LOCATION_L2_CACHE = 1,
  NVML_MEMORY_LOCATION_DRAM = 2,
  NVML_MEMORY_LOCATION_DEVICE_MEMORY = 2,
  NVML_MEMORY_LOCATION_REGISTER_FILE = 3,
  NVML_MEMORY_LOCATION_TEXTURE_MEMORY = 4,
  NVML_MEMORY_LOCATION_TEXTURE_SHM = 5,
  NVML_MEMORY_LOCATION_CBU = 6,
  NVML_MEMORY_LOCATION_SRAM = 7,
  NVML_MEMORY_LOCATION_COUNT = 8,
};
enum : unsigned int {  // nvmlPageRetirementCause_t
  NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
  NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1,
  NVML_PAGE_RETIREMENT_CAUSE_COUNT = 2,
};
enum : unsigned int { NVML_BRIDGE_CHIP_PLX = 0, NVML_BRIDGE_CHIP_BRO4 = 1, NVML_MAX_PHYSICAL_BRIDGE = 128 };
enum : unsigned int {  // nvmlDeviceArchitecture_t
  NVML_DEVICE_ARCH_VOLTA = 5,
  NVML_DEVICE_ARCH_TURING = 6,
  NVML_DEVICE_ARCH_AMPERE = 7,
  NVML_DEVICE_ARCH_ADA = 8,
  NVML_DEVICE_ARCH_HOPPER = 9,
  NVML_DEVICE_ARCH_BLACKWELL = 10,
  NVML_DEVICE_ARCH_UNKNOWN = 0xffffffffU,
};
enum : unsigned int { NVML_DEVICE_MIG_DISABLE = 0, NVML_DEVICE_MIG_ENABLE = 1 };

// ---- structs ----
typedef struct nvmlPciInfo_st {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

typedef struct nvmlUtilization_st {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 GPUMETER_NVML_STRUCT_VERSION(sizeof(nvmlMemory_v2_t), 2)

typedef struct nvmlProcessInfo_v1_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct nvmlProcessInfo_st {  // v2 layout, also taken by the _v3 functions
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

typedef struct nvmlProcessUtilizationSample_st {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

// nvmlDeviceGetProcessesUtilizationInfo (R550+): the caller sets version, processSamplesCount
// (the capacity of procUtilArray) and lastSeenTimeStamp.
typedef struct nvmlProcessUtilizationInfo_v1_st {
  unsigned long long timeStamp;
  unsigned int pid;
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
  unsigned int jpgUtil;
  unsigned int ofaUtil;
} nvmlProcessUtilizationInfo_v1_t;

typedef struct nvmlProcessesUtilizationInfo_v1_st {
  unsigned int version;
  unsigned int processSamplesCount;
  unsigned long long lastSeenTimeStamp;
  nvmlProcessUtilizationInfo_v1_t* procUtilArray;
} nvmlProcessesUtilizationInfo_v1_t;
typedef nvmlProcessesUtilizationInfo_v1_t nvmlProcessesUtilizationInfo_t;
#define nvmlProcessesUtilizationInfo_v1 GPUMETER_NVML_STRUCT_VERSION(sizeof(nvmlProcessesUtilizationInfo_v1_t), 1)

typedef union nvmlValue_st {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
} nvmlValue_t;

typedef struct nvmlSample_st {
  unsigned long long timeStamp;
  nvmlValue_t sampleValue;
} nvmlSample_t;

typedef struct nvmlFieldValue_st {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  unsigned int valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;

typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;
// gpuInstanceId and computeInstanceId of an event that affects the whole GPU (nvml.h: "If MIG is
// enabled, stores a valid ... ID", 0xFFFFFFFF otherwise).
#define GPUMETER_NVML_WHOLE_GPU_EVENT 0xFFFFFFFFU

// ---- structs of MIG, GPM and NVLink ----
typedef struct nvmlDeviceAttributes_st {  // of a MIG device handle (nvmlDeviceGetAttributes_v2)
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  unsigned int gpuInstanceSliceCount;
  unsigned int computeInstanceSliceCount;
  unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

typedef struct nvmlGpuInstancePlacement_st {
  unsigned int start;  // first memory slice
  unsigned int size;   // memory slices
} nvmlGpuInstancePlacement_t;

typedef struct nvmlGpuInstanceProfileInfo_v2_st {
  unsigned int version;  // nvmlGpuInstanceProfileInfo_v2
  unsigned int id;       // the profile id GPU instances of this profile report
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];  // e.g. "MIG 3g.40gb"
} nvmlGpuInstanceProfileInfo_v2_t;
#define nvmlGpuInstanceProfileInfo_v2 GPUMETER_NVML_STRUCT_VERSION(sizeof(nvmlGpuInstanceProfileInfo_v2_t), 2)

typedef struct nvmlGpuInstanceInfo_st {
  nvmlDevice_t device;  // the parent
  unsigned int id;
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct {
  unsigned int metricId;    // IN: NVML_GPM_METRIC_*
  nvmlReturn_t nvmlReturn;  // OUT: this metric's status; value is valid only when 0
  double value;
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;  // OUT, may be NULL
} nvmlGpmMetric_t;

typedef struct {
  unsigned int version;  // NVML_GPM_METRICS_GET_VERSION: a plain 1, not a struct version
  unsigned int numMetrics;
  nvmlGpmSample_t sample1;
  nvmlGpmSample_t sample2;
  nvmlGpmMetric_t metrics[GPUMETER_NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;

typedef struct {
  unsigned int version;  // NVML_GPM_SUPPORT_VERSION
  unsigned int isSupportedDevice;
} nvmlGpmSupport_t;

static_assert(sizeof(nvmlDeviceAttributes_t) == 40);
static_assert(sizeof(nvmlGpuInstanceProfileInfo_v2_t) == 152);
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, memorySizeMB) == 48);
static_assert(nvmlGpuInstanceProfileInfo_v2 == 0x02000098u);
static_assert(sizeof(nvmlGpuInstanceInfo_t) == 24);
static_assert(sizeof(nvmlGpmMetric_t) == 40);
static_assert(offsetof(nvmlGpmMetricsGet_t, metrics) == 24);
static_assert(sizeof(nvmlGpmMetricsGet_t) == 13344);

static_assert(sizeof(nvmlReturn_t) == 4);
static_assert(sizeof(nvmlPciInfo_t) == 68);
static_assert(offsetof(nvmlPciInfo_t, busId) == 36);
static_assert(sizeof(nvmlUtilization_t) == 8);
static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(sizeof(nvmlMemory_v2_t) == 40);
static_assert(offsetof(nvmlMemory_v2_t, used) == 32);
static_assert(nvmlMemory_v2 == 0x02000028u);
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16);
static_assert(sizeof(nvmlProcessInfo_t) == 24);
static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32);
static_assert(offsetof(nvmlProcessUtilizationSample_t, smUtil) == 16);
static_assert(sizeof(nvmlProcessUtilizationInfo_v1_t) == 40);
static_assert(offsetof(nvmlProcessUtilizationInfo_v1_t, smUtil) == 12);
static_assert(sizeof(nvmlProcessesUtilizationInfo_v1_t) == 24);
static_assert(offsetof(nvmlProcessesUtilizationInfo_v1_t, procUtilArray) == 16);
static_assert(nvmlProcessesUtilizationInfo_v1 == 0x01000018u);
static_assert(sizeof(nvmlValue_t) == 8);
static_assert(sizeof(nvmlSample_t) == 16);
static_assert(sizeof(nvmlFieldValue_t) == 40);
static_assert(offsetof(nvmlFieldValue_t, nvmlReturn) == 28);
static_assert(sizeof(nvmlEventData_t) == 32);

// ---- structs of the informational queries ----
typedef struct nvmlBAR1Memory_st {
  unsigned long long bar1Total;
  unsigned long long bar1Free;
  unsigned long long bar1Used;
} nvmlBAR1Memory_t;

typedef struct nvmlBridgeChipInfo_st {
  unsigned int type;  // nvmlBridgeChipType_t
  unsigned int fwVersion;
} nvmlBridgeChipInfo_t;

typedef struct nvmlBridgeChipHierarchy_st {
  unsigned char bridgeCount;
  nvmlBridgeChipInfo_t bridgeChipInfo[NVML_MAX_PHYSICAL_BRIDGE];
} nvmlBridgeChipHierarchy_t;

typedef struct nvmlAccountingStats_st {
  unsigned int gpuUtilization;
  unsigned int memoryUtilization;
  unsigned long long maxMemoryUsage;
  unsigned long long time;
  unsigned long long startTime;
  unsigned int isRunning;
  unsigned int reserved[5];
} nvmlAccountingStats_t;

// nvmlDeviceGetGridLicensableFeatures_v4: whether the system licenses vGPU software, and each
// licensable feature's state. The earlier versions take other layouts and are not used.
#define NVML_GRID_LICENSE_BUFFER_SIZE 128
#define NVML_GRID_LICENSE_FEATURE_MAX_COUNT 3
#define NVML_GRID_LICENSE_FEATURE_CODE_UNKNOWN 0
#define NVML_GRID_LICENSE_FEATURE_CODE_VGPU 1
#define NVML_GRID_LICENSE_FEATURE_CODE_NVIDIA_RTX 2
#define NVML_GRID_LICENSE_FEATURE_CODE_GAMING 3
#define NVML_GRID_LICENSE_FEATURE_CODE_COMPUTE 4
#define NVML_GRID_LICENSE_EXPIRY_NOT_AVAILABLE 0
#define NVML_GRID_LICENSE_EXPIRY_VALID 2

typedef struct nvmlGridLicenseExpiry_st {
  unsigned int year;
  unsigned short month;
  unsigned short day;
  unsigned short hour;
  unsigned short min;
  unsigned short sec;
  unsigned char status;
} nvmlGridLicenseExpiry_t;

typedef struct nvmlGridLicensableFeature_st {
  unsigned int featureCode;   // nvmlGridLicenseFeatureCode_t
  unsigned int featureState;  // non-zero if the feature is licensed now
  char licenseInfo[NVML_GRID_LICENSE_BUFFER_SIZE];
  char productName[NVML_GRID_LICENSE_BUFFER_SIZE];
  unsigned int featureEnabled;
  nvmlGridLicenseExpiry_t licenseExpiry;
} nvmlGridLicensableFeature_t;

typedef struct nvmlGridLicensableFeatures_st {
  int isGridLicenseSupported;  // non-zero if the system supports vGPU software licensing
  unsigned int licensableFeaturesCount;
  nvmlGridLicensableFeature_t gridLicensableFeatures[NVML_GRID_LICENSE_FEATURE_MAX_COUNT];
} nvmlGridLicensableFeatures_t;

static_assert(sizeof(nvmlBAR1Memory_t) == 24);
static_assert(sizeof(nvmlBridgeChipInfo_t) == 8);
static_assert(sizeof(nvmlBridgeChipHierarchy_t) == 1028);
static_assert(offsetof(nvmlBridgeChipHierarchy_t, bridgeChipInfo) == 4);
static_assert(sizeof(nvmlAccountingStats_t) == 56);
static_assert(offsetof(nvmlAccountingStats_t, isRunning) == 32);
static_assert(sizeof(nvmlGridLicenseExpiry_t) == 16);
static_assert(sizeof(nvmlGridLicensableFeature_t) == 284);
static_assert(offsetof(nvmlGridLicensableFeature_t, featureEnabled) == 264);
static_assert(sizeof(nvmlGridLicensableFeatures_t) == 860);

// ---- function signatures, as pointer types for dlsym() ----
// The symbol name passed to dlsym is the versioned one where NVML has versions
// (nvmlInit_v2, nvmlDeviceGetCount_v2, ...); see NvmlSymbols in nvml_backend.cpp.
typedef nvmlReturn_t (*nvmlInit_fn)(void);
typedef nvmlReturn_t (*nvmlShutdown_fn)(void);
typedef const char* (*nvmlErrorString_fn)(nvmlReturn_t);
typedef nvmlReturn_t (*nvmlSystemGetDriverVersion_fn)(char*, unsigned int);
typedef nvmlReturn_t (*nvmlDeviceGetCount_fn)(unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByIndex_fn)(unsigned int, nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByUUID_fn)(const char*, nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetString_fn)(nvmlDevice_t, char*, unsigned int);  // UUID, Name, Serial, VbiosVersion
typedef nvmlReturn_t (*nvmlDeviceGetPciInfo_fn)(nvmlDevice_t, nvmlPciInfo_t*);
typedef nvmlReturn_t (*nvmlDeviceGetUtilizationRates_fn)(nvmlDevice_t, nvmlUtilization_t*);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_fn)(nvmlDevice_t, nvmlMemory_t*);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_v2_fn)(nvmlDevice_t, nvmlMemory_v2_t*);
typedef nvmlReturn_t (*nvmlDeviceGetTemperature_fn)(nvmlDevice_t, unsigned int, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetUInt_fn)(nvmlDevice_t,
                                             unsigned int*);  // PowerUsage, limits, PState, FanSpeed, PCIe link, replay
typedef nvmlReturn_t (*nvmlDeviceGetULongLong_fn)(nvmlDevice_t, unsigned long long*);  // energy, clock event reasons
typedef nvmlReturn_t (*nvmlDeviceGetClockInfo_fn)(nvmlDevice_t, unsigned int, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetTotalEccErrors_fn)(nvmlDevice_t, unsigned int, unsigned int, unsigned long long*);
typedef nvmlReturn_t (*nvmlDeviceGetRemappedRows_fn)(nvmlDevice_t, unsigned int*, unsigned int*, unsigned int*,
                                                     unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetFieldValues_fn)(nvmlDevice_t, int, nvmlFieldValue_t*);
typedef nvmlReturn_t (*nvmlDeviceGetProcesses_v3_fn)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*);
// The same calls typed by raw records: the record size depends on the entry point (v1: 16
// bytes; v2/v3: 24; early R535 _v3: 32), so the backend walks the buffer with a stride.
typedef nvmlReturn_t (*nvmlDeviceGetProcessesRaw_fn)(nvmlDevice_t, unsigned int*, void*);
typedef nvmlReturn_t (*nvmlDeviceGetProcessUtilization_fn)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned int*,
                                                           unsigned long long);
typedef nvmlReturn_t (*nvmlDeviceGetProcessesUtilizationInfo_fn)(nvmlDevice_t, nvmlProcessesUtilizationInfo_t*);
typedef nvmlReturn_t (*nvmlDeviceGetPcieThroughput_fn)(nvmlDevice_t, unsigned int, unsigned int*);  // KB/s over 20 ms
typedef nvmlReturn_t (*nvmlDeviceGetSamples_fn)(nvmlDevice_t, unsigned int, unsigned long long, unsigned int*,
                                                unsigned int*, nvmlSample_t*);
typedef nvmlReturn_t (*nvmlEventSetCreate_fn)(nvmlEventSet_t*);
typedef nvmlReturn_t (*nvmlDeviceRegisterEvents_fn)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
typedef nvmlReturn_t (*nvmlEventSetWait_fn)(nvmlEventSet_t, nvmlEventData_t*, unsigned int);
typedef nvmlReturn_t (*nvmlEventSetFree_fn)(nvmlEventSet_t);

// ---- signatures of MIG, GPM and NVLink ----
typedef nvmlReturn_t (*nvmlDeviceGetMigMode_fn)(nvmlDevice_t, unsigned int*, unsigned int*);  // current, pending
typedef nvmlReturn_t (*nvmlDeviceGetMaxMigDeviceCount_fn)(nvmlDevice_t, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetMigDeviceHandleByIndex_fn)(nvmlDevice_t, unsigned int, nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn)(nvmlDevice_t, nvmlDevice_t*);
// nvmlDeviceIsMigDeviceHandle, nvmlDeviceGetGpuInstanceId, nvmlDeviceGetComputeInstanceId take
// nvmlDeviceGetUInt_fn.
typedef nvmlReturn_t (*nvmlDeviceGetAttributes_fn)(nvmlDevice_t, nvmlDeviceAttributes_t*);  // _v2
typedef nvmlReturn_t (*nvmlDeviceGetGpuInstanceProfileInfoV_fn)(nvmlDevice_t, unsigned int,
                                                                nvmlGpuInstanceProfileInfo_v2_t*);
typedef nvmlReturn_t (*nvmlDeviceGetGpuInstanceById_fn)(nvmlDevice_t, unsigned int, nvmlGpuInstance_t*);
typedef nvmlReturn_t (*nvmlGpuInstanceGetInfo_fn)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*);
typedef nvmlReturn_t (*nvmlGpmQueryDeviceSupport_fn)(nvmlDevice_t, nvmlGpmSupport_t*);  // device or MIG handle
typedef nvmlReturn_t (*nvmlGpmSampleAlloc_fn)(nvmlGpmSample_t*);
typedef nvmlReturn_t (*nvmlGpmSampleFree_fn)(nvmlGpmSample_t);
typedef nvmlReturn_t (*nvmlGpmSampleGet_fn)(nvmlDevice_t, nvmlGpmSample_t);                   // device or MIG handle
typedef nvmlReturn_t (*nvmlGpmMigSampleGet_fn)(nvmlDevice_t, unsigned int, nvmlGpmSample_t);  // parent, GPU instance id
typedef nvmlReturn_t (*nvmlGpmMetricsGet_fn)(nvmlGpmMetricsGet_t*);
typedef nvmlReturn_t (*nvmlDeviceGetNvLinkState_fn)(nvmlDevice_t, unsigned int,
                                                    unsigned int*);  // link, nvmlEnableState_t

// ---- signatures of the informational queries ----
// Brand, display mode/active, persistence, accounting mode, compute mode, power management mode,
// retired-pages pending status, power state: one 4-byte enum or unsigned out-parameter.
typedef nvmlReturn_t (*nvmlDeviceGetEnum_fn)(nvmlDevice_t, unsigned int*);
// ECC mode, driver model, GPU operation mode, auto boost: current and pending (or default).
// Encoder and decoder utilization: percent and the sampling period in µs.
typedef nvmlReturn_t (*nvmlDeviceGetEnumPair_fn)(nvmlDevice_t, unsigned int*, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetBAR1MemoryInfo_fn)(nvmlDevice_t, nvmlBAR1Memory_t*);
typedef nvmlReturn_t (*nvmlDeviceGetBridgeChipInfo_fn)(nvmlDevice_t, nvmlBridgeChipHierarchy_t*);
typedef nvmlReturn_t (*nvmlDeviceGetInforomVersion_fn)(nvmlDevice_t, unsigned int, char*, unsigned int);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryErrorCounter_fn)(nvmlDevice_t, unsigned int, unsigned int, unsigned int,
                                                           unsigned long long*);
typedef nvmlReturn_t (*nvmlDeviceGetRetiredPages_fn)(nvmlDevice_t, unsigned int, unsigned int*, unsigned long long*);
typedef nvmlReturn_t (*nvmlDeviceGetSupportedMemoryClocks_fn)(nvmlDevice_t, unsigned int*, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetSupportedGraphicsClocks_fn)(nvmlDevice_t, unsigned int, unsigned int*,
                                                                unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetAccountingPids_fn)(nvmlDevice_t, unsigned int*, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetAccountingStats_fn)(nvmlDevice_t, unsigned int, nvmlAccountingStats_t*);
typedef nvmlReturn_t (*nvmlSystemGetProcessName_fn)(unsigned int, char*, unsigned int);
typedef nvmlReturn_t (*nvmlDeviceGetCudaComputeCapability_fn)(nvmlDevice_t, int*, int*);
typedef nvmlReturn_t (*nvmlDeviceGetGridLicensableFeatures_fn)(nvmlDevice_t, nvmlGridLicensableFeatures_t*);  // _v4

}  // extern "C"
