#pragma once
// The contents of the files the amdgpu and amdkfd kernel drivers expose for one simulated AMD
// GPU, as pure functions of the scenario and scenario time. sysfs_writer.cpp puts them in
// place; the formats are the ones Debian's ROCm SMI 5.2.3 parses (docs/rocm-behaviour.md).

#include <cstdint>
#include <string>
#include <vector>

#include "sim/physics/gpu_sim.h"
#include "sim/scenario/scenario.h"

namespace gpumeter::sim::amd {

// ROCm SMI's fixed energy unit: it multiplies gpu_metrics' energy_accumulator by 15.3 µJ.
inline constexpr double kEnergyUnitJoules = 15.3e-6;
// pwm1 runs from 0 to this; fan1_input at 100 % (an assumption: a typical axial fan).
inline constexpr unsigned kPwmMax = 255;
inline constexpr unsigned kFanMaxRpm = 3300;
// hwmon temperature sensors (tempN_label): edge, junction (hotspot), mem.
inline constexpr unsigned kJunctionAboveEdgeC = 8;  // an assumption, see docs/rocm-behaviour.md
inline constexpr unsigned kCriticalEdgeC = 100;
inline constexpr unsigned kCriticalJunctionC = 110;
inline constexpr unsigned kCriticalMemC = 95;
// RAS blocks written under ras/ (their bits in ras/features: UMC 0, SDMA 1, GFX 2, MMHUB 3).
inline constexpr const char* kRasBlocks[] = {"umc", "sdma", "gfx", "mmhub"};

// The KFD gpu_id of the AMD GPU with scenario index `gpu` (the kernel hashes the GPU's
// properties into 16 bits; here a fixed, distinct value per index).
unsigned kfd_gpu_id(unsigned gpu);
// The PASID KFD gives a process (unique per pid among the simulated ones).
unsigned kfd_pasid(unsigned pid);
// unique_id: 16 hex digits, without 0x, derived from the GPU's UUID.
std::string unique_id(const GpuSpec& gpu);
// "0000:05:00.0"
std::string pci_address(const PciAddress& a);

// The scenario indices of the AMD GPUs, in order: card0 is the first of them.
std::vector<unsigned> amd_gpus(const Scenario& scenario);

// KFD topology node properties (one "key value" per line) of the GPU, and of the CPU node 0.
std::string kfd_gpu_properties(const Scenario& scenario, unsigned gpu, unsigned card);
std::string kfd_cpu_properties();

// pp_dpm_sclk / pp_dpm_mclk: the DPM levels, the current one marked with '*'.
std::string dpm_levels(const ClockRange& range, unsigned current_mhz);
// pp_dpm_pcie: the link's one level.
std::string dpm_pcie(const GpuModelSpec& model);

// gpu_metrics, format revision 1, content revision 1 (96 bytes, little-endian): the part every
// later content revision starts with.
struct MetricsInput {
  unsigned edge_c = 0, junction_c = 0, mem_c = 0;
  unsigned gfx_activity = 0, umc_activity = 0;
  unsigned socket_power_w = 0;
  std::uint64_t energy_accumulator = 0;
  std::uint64_t system_clock_ns = 0;
  unsigned gfxclk_mhz = 0, uclk_mhz = 0;
  unsigned fan_rpm = 0;
  unsigned pcie_width = 0, pcie_speed_tenths_gts = 0;
};
std::string gpu_metrics_v1_1(const MetricsInput& in);
// Content revision 3 (120 bytes): revision 1's fields at the same offsets, then a u64
// firmware_timestamp (96), u16 voltage_soc/gfx/mem (104..109), padding and a u64
// indep_throttle_status (112), not modelled (0). kgd_pp_interface.h, struct gpu_metrics_v1_3.
// Padding is 0xFF, as the kernel initialises the table; without `hbm` (a GDDR board) the
// activity accumulators, HBM temperatures and firmware timestamp (80..103) are 0xFF too.
std::string gpu_metrics_v1_3(const MetricsInput& in, bool hbm);
// Content revision 3 as smu_v13_0_6_get_gpu_metrics() (MI300X) filled it before it moved to
// gpu_metrics_v1_4: revision 3's layout, 0xFF in every field that code leaves alone (the edge,
// VR GFX, VR memory and HBM temperatures, media activity, the second video clocks, the fan, the
// voltages and the independent throttle status). socket_power_w is its current socket power.
std::string gpu_metrics_v1_3_smu_v13_0_6(const MetricsInput& in);
// The gpu_metrics amdgpu's SMU code writes for the model's architecture, content revision 3 for
// all: CDNA 2 (aldebaran_ppt.c) and RDNA 3 (smu_v13_0_0_ppt.c) return sizeof(struct
// gpu_metrics_v1_3), and so did CDNA 3 (smu_v13_0_6_ppt.c) until it moved to v1_4, which Debian's
// 5.2.3 library cannot read (docs/rocm-behaviour.md, "Models").
std::string gpu_metrics(const GpuModelSpec& model, const MetricsInput& in);

// Whether amdgpu shows hwmon power1_average for the model: not on CDNA 3, whose SMU code has no
// average power sensor (smu_v13_0_6_read_sensor answers -EOPNOTSUPP), so amdgpu hides the file
// and shows power1_input, the current socket power, instead ("drm/amd: Hide unsupported power
// attributes"). The other models keep power1_average (the simulator's earlier tree).
bool has_average_power(const GpuModelSpec& model);
// The hwmon file holding the model's socket power: power1_average or power1_input.
const char* power_file(const GpuModelSpec& model);

// PCIe transfer rate per lane of a generation, in tenths of GT/s (gen 4: 160).
unsigned pcie_tenths_gts(unsigned generation);

// The maximum payload size pcie_bw reports (pcie_get_mps of the device): 256 bytes, an
// assumption (a common server setting; the kernel reports whatever the link negotiated).
inline constexpr unsigned kMaxPayloadBytes = 256;
// pcie_bw as amdgpu writes it: "<received messages> <sent messages> <max payload size>\n", the
// messages counted over the last second (kernel: count0 counts received messages, count1 posted
// requests sent). The traffic is taken as carried in full-size payloads (an assumption), so
// messages = bytes / payload size, rounded.
std::string pcie_bw(double transmit_bytes_per_second, double receive_bytes_per_second);

}  // namespace gpumeter::sim::amd
