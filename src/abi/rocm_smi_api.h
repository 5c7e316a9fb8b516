#pragma once
// The subset of ROCm SMI (rocm_smi.h) the AMD backend calls, declared here so that the agent
// builds without the ROCm SDK and loads librocm_smi64 at run time. Layouts follow Debian's
// librocm-smi-dev 5.2.3 header and ROCm 6.x's; the one struct that changed between them,
// rsmi_frequencies_t (6.0 put `bool has_deep_sleep` first and grew the array from 32 to 33),
// is declared in both forms, and the backend picks one by the library's ABI.

#include <cstddef>
#include <cstdint>

extern "C" {

typedef int rsmi_status_t;  // a C enum: 4 bytes
enum : rsmi_status_t {
  RSMI_STATUS_SUCCESS = 0,
  RSMI_STATUS_INVALID_ARGS = 1,
  RSMI_STATUS_NOT_SUPPORTED = 2,
  RSMI_STATUS_FILE_ERROR = 3,
  RSMI_STATUS_PERMISSION = 4,
  RSMI_STATUS_INIT_ERROR = 8,
  RSMI_STATUS_NOT_YET_IMPLEMENTED = 9,
  RSMI_STATUS_NOT_FOUND = 10,
  RSMI_STATUS_INSUFFICIENT_SIZE = 11,
  RSMI_STATUS_NO_DATA = 14,
  RSMI_STATUS_UNEXPECTED_DATA = 15,
  RSMI_STATUS_BUSY = 16,
};

typedef int rsmi_temperature_metric_t;
typedef int rsmi_clk_type_t;
typedef int rsmi_memory_type_t;
typedef int rsmi_dev_perf_level_t;
typedef int rsmi_sw_component_t;
typedef std::uint64_t rsmi_gpu_block_t;
// ROCm 6.0 and later (rocm_smi.h at tag rocm-6.0.0; not in 5.x): what rsmi_dev_power_get read.
// A C enum holding 0xFFFFFFFF: 4 bytes, unsigned.
typedef std::uint32_t RSMI_POWER_TYPE;

inline constexpr rsmi_temperature_metric_t RSMI_TEMP_CURRENT = 0;
inline constexpr std::uint32_t RSMI_TEMP_TYPE_EDGE = 0;
inline constexpr std::uint32_t RSMI_TEMP_TYPE_JUNCTION = 1;
inline constexpr std::uint32_t RSMI_TEMP_TYPE_MEMORY = 2;
inline constexpr rsmi_clk_type_t RSMI_CLK_TYPE_SYS = 0;
inline constexpr rsmi_clk_type_t RSMI_CLK_TYPE_DF = 1;
inline constexpr rsmi_clk_type_t RSMI_CLK_TYPE_SOC = 3;
inline constexpr rsmi_clk_type_t RSMI_CLK_TYPE_MEM = 4;
inline constexpr rsmi_memory_type_t RSMI_MEM_TYPE_VRAM = 0;
inline constexpr rsmi_sw_component_t RSMI_SW_COMP_DRIVER = 0;
inline constexpr rsmi_dev_perf_level_t RSMI_DEV_PERF_LEVEL_UNKNOWN = 0x100;
inline constexpr RSMI_POWER_TYPE RSMI_AVERAGE_POWER = 0;
inline constexpr RSMI_POWER_TYPE RSMI_CURRENT_POWER = 1;
inline constexpr RSMI_POWER_TYPE RSMI_INVALID_POWER = 0xFFFFFFFF;
// rsmi_dev_perf_level_t 0..8 (AUTO .. DETERMINISM), named as the enum in lower case, which is
// also how rocm-smi prints levels 0..7 (--showperflevel).
inline constexpr const char* kRsmiPerfLevels[] = {
    "auto", "low", "high", "manual", "stable_std", "stable_peak", "stable_min_mclk", "stable_min_sclk", "determinism"};

// rsmi_gpu_block_t bits, with the names amdgpu gives the blocks under ras/.
struct RsmiBlock {
  rsmi_gpu_block_t bit;
  const char* name;
};
inline constexpr RsmiBlock kRsmiBlocks[] = {
    {0x1, "umc"},       {0x2, "sdma"},  {0x4, "gfx"},        {0x8, "mmhub"},   {0x10, "athub"},
    {0x20, "pcie_bif"}, {0x40, "hdp"},  {0x80, "xgmi_wafl"}, {0x100, "df"},    {0x200, "smn"},
    {0x400, "sem"},     {0x800, "mp0"}, {0x1000, "mp1"},     {0x2000, "fuse"},
};

typedef struct {
  std::uint32_t major;
  std::uint32_t minor;
  std::uint32_t patch;
  const char* build;
} rsmi_version_t;

// ROCm 5.x
typedef struct {
  std::uint32_t num_supported;
  std::uint32_t current;
  std::uint64_t frequency[32];
} rsmi_frequencies_v5_t;

typedef struct {
  rsmi_frequencies_v5_t transfer_rate;
  std::uint32_t lanes[32];
} rsmi_pcie_bandwidth_v5_t;

// ROCm 6.x
typedef struct {
  bool has_deep_sleep;
  std::uint32_t num_supported;
  std::uint32_t current;
  std::uint64_t frequency[33];
} rsmi_frequencies_v6_t;

typedef struct {
  rsmi_frequencies_v6_t transfer_rate;
  std::uint32_t lanes[33];
} rsmi_pcie_bandwidth_v6_t;

typedef struct {
  std::uint64_t correctable_err;
  std::uint64_t uncorrectable_err;
} rsmi_error_count_t;

typedef struct {
  std::uint32_t process_id;
  std::uint32_t pasid;
  std::uint64_t vram_usage;
  std::uint64_t sdma_usage;
  std::uint32_t cu_occupancy;
} rsmi_process_info_t;

// gpu_metrics as ROCm SMI 5.x returns it (rsmi_dev_gpu_metrics_info_get): the kernel's
// gpu_metrics_v1_1 layout, which 5.2.3 also converts content revisions 2 and 3 into. Only
// throttle_status and average_socket_power are read.
typedef struct {
  std::uint16_t structure_size;
  std::uint8_t format_revision;
  std::uint8_t content_revision;
  std::uint16_t temperature[6];       // edge, hotspot, mem, vrgfx, vrsoc, vrmem
  std::uint16_t average_activity[3];  // gfx, umc, mm
  std::uint16_t average_socket_power;
  std::uint64_t energy_accumulator;
  std::uint64_t system_clock_counter;
  std::uint16_t average_clocks[7];
  std::uint16_t current_clocks[7];
  std::uint32_t throttle_status;
  std::uint16_t current_fan_speed;
  std::uint16_t pcie_link_width;
  std::uint16_t pcie_link_speed;
  std::uint16_t padding;
  std::uint32_t gfx_activity_acc;
  std::uint32_t mem_activity_acc;
  std::uint16_t temperature_hbm[4];
} rsmi_gpu_metrics_v5_t;

}  // extern "C"

static_assert(sizeof(rsmi_frequencies_v5_t) == 264);
static_assert(sizeof(rsmi_pcie_bandwidth_v5_t) == 392);
static_assert(offsetof(rsmi_frequencies_v6_t, num_supported) == 4);
static_assert(offsetof(rsmi_frequencies_v6_t, frequency) == 16);
static_assert(sizeof(rsmi_frequencies_v6_t) == 280);
static_assert(sizeof(rsmi_pcie_bandwidth_v6_t) == 416);
static_assert(sizeof(rsmi_error_count_t) == 16);
static_assert(sizeof(rsmi_process_info_t) == 32);
static_assert(offsetof(rsmi_gpu_metrics_v5_t, average_socket_power) == 22);
static_assert(offsetof(rsmi_gpu_metrics_v5_t, energy_accumulator) == 24);
static_assert(offsetof(rsmi_gpu_metrics_v5_t, throttle_status) == 68);
static_assert(offsetof(rsmi_gpu_metrics_v5_t, gfx_activity_acc) == 80);
static_assert(sizeof(rsmi_gpu_metrics_v5_t) == 96);

namespace gpumeter::rsmi {

using InitFn = rsmi_status_t (*)(std::uint64_t);
using ShutDownFn = rsmi_status_t (*)();
using NumDevicesFn = rsmi_status_t (*)(std::uint32_t*);
using VersionFn = rsmi_status_t (*)(rsmi_version_t*);
using VersionStrFn = rsmi_status_t (*)(rsmi_sw_component_t, char*, std::uint32_t);
using StatusStringFn = rsmi_status_t (*)(rsmi_status_t, const char**);
using U64Fn = rsmi_status_t (*)(std::uint32_t, std::uint64_t*);
using U32Fn = rsmi_status_t (*)(std::uint32_t, std::uint32_t*);
using StringFn = rsmi_status_t (*)(std::uint32_t, char*, std::size_t);
using StringU32Fn = rsmi_status_t (*)(std::uint32_t, char*, std::uint32_t);
using SensorU64Fn = rsmi_status_t (*)(std::uint32_t, std::uint32_t, std::uint64_t*);
// rsmi_dev_power_get (6.0+): µW, and which power it read.
using PowerFn = rsmi_status_t (*)(std::uint32_t, std::uint64_t*, RSMI_POWER_TYPE*);
using MemoryFn = rsmi_status_t (*)(std::uint32_t, rsmi_memory_type_t, std::uint64_t*);
using TempFn = rsmi_status_t (*)(std::uint32_t, std::uint32_t, rsmi_temperature_metric_t, std::int64_t*);
using EnergyFn = rsmi_status_t (*)(std::uint32_t, std::uint64_t*, float*, std::uint64_t*);
using ClockFn = rsmi_status_t (*)(std::uint32_t, rsmi_clk_type_t, void*);  // rsmi_frequencies_v5/v6_t
using PcieBandwidthFn = rsmi_status_t (*)(std::uint32_t, void*);           // rsmi_pcie_bandwidth_v5/v6_t
using FanFn = rsmi_status_t (*)(std::uint32_t, std::uint32_t, std::int64_t*);
using EccCountFn = rsmi_status_t (*)(std::uint32_t, rsmi_gpu_block_t, rsmi_error_count_t*);
using PerfLevelFn = rsmi_status_t (*)(std::uint32_t, rsmi_dev_perf_level_t*);
using GpuMetricsFn = rsmi_status_t (*)(std::uint32_t, void*);  // rsmi_gpu_metrics_v5_t (ABI 5 only)
using ThroughputFn = rsmi_status_t (*)(std::uint32_t, std::uint64_t*, std::uint64_t*, std::uint64_t*);
using ProcessListFn = rsmi_status_t (*)(rsmi_process_info_t*, std::uint32_t*);
using ProcessByPidFn = rsmi_status_t (*)(std::uint32_t, rsmi_process_info_t*);
using ProcessGpusFn = rsmi_status_t (*)(std::uint32_t, std::uint32_t*, std::uint32_t*);

}  // namespace gpumeter::rsmi
