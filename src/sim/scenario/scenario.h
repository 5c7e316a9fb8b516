#pragma once
// A scenario as the simulator plays it: GPU models, GPUs, jobs, faults and quirks, already
// validated.
// Scenario time is kept in whole microseconds so that pattern edges, fault windows and the
// sample grids land on exact instants and every integral is an exact sum of segments.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/scenario/identifiers.h"
#include "sim/scenario/mig.h"
#include "sim/scenario/pattern.h"
#include "sim/scenario/profiling_spec.h"
#include "sim/scenario/time.h"

namespace gpumeter::sim {

// Far more than any node holds; it bounds the C layer's table of device handles.
inline constexpr unsigned kMaxGpus = 256;

struct ClockRange {
  unsigned idle_mhz = 0;
  unsigned max_mhz = 0;
};

// The driver's sample buffers (nvmlDeviceGetSamples, nvmlDeviceGetProcessUtilization): each
// keeps one exact period average per period, at most `depth` of them.
struct SampleSpec {
  Micros utilization_period = 200'000;
  std::size_t utilization_depth = 100;
  Micros power_period = 100'000;
  std::size_t power_depth = 120;
  // An irregular power cadence (0: every power_period): a power sample every this long while the
  // GPU is busy, and every power_period (rounded to a whole number of these) while it idles, as
  // a real driver's spacing follows the GPU's state, from about 33 ms to about 1 s.
  Micros power_period_busy = 0;
};

struct GpuModelSpec {
  std::string id;  // the key under `models`
  // Whose GPU it is: "nvidia" (served by the simulated NVML) or "amd" (written as an amdgpu
  // sysfs tree by `gpumeter sim sysfs`, read by ROCm SMI).
  std::string vendor = "nvidia";
  std::string name;  // what nvmlDeviceGetName reports
  std::uint64_t memory_total_bytes = 0;
  std::uint64_t memory_reserved_bytes = 0;  // counted in v1 "used" only, as real drivers do
  std::int64_t power_limit_mw = 0;
  std::int64_t idle_power_mw = 0;
  std::int64_t max_power_mw = 0;
  unsigned idle_temperature_c = 0;
  unsigned max_temperature_c = 0;
  unsigned memory_temperature_offset_c = 0;
  ClockRange graphics_clock, sm_clock, memory_clock, video_clock;
  bool fan = false;
  unsigned fan_idle_percent = 30;
  unsigned fan_max_percent = 80;
  unsigned pcie_generation = 4;
  unsigned pcie_width = 16;
  double pcie_tx_bytes_per_second = 0;  // at 100% utilization
  double pcie_rx_bytes_per_second = 0;
  unsigned pci_device_id = 0;  // device id << 16 | PCI vendor id (0x10DE, 0x1002), as nvmlPciInfo_t::pciDeviceId
  unsigned pci_subsystem_id = 0;
  std::string vbios_version;
  bool ecc = true;
  // The product line, which decides what the driver supports: "datacenter", "geforce" (NVIDIA)
  // or "radeon" (AMD).
  std::string profile = "datacenter";
  // The GPU architecture ("volta", "turing", "ampere", "ga100", "ada", "hopper",
  // "blackwell"; AMD: "cdna2", "cdna3", "rdna3"), which decides documented per-architecture
  // behaviour (e.g. whether nvmlDeviceGetPowerUsage is a 1 s average or instantaneous).
  std::string architecture = "hopper";
  unsigned compute_units = 0;  // AMD: the CUs KFD reports (cu_occupancy counts them)
  SampleSpec samples;
  NvlinkSpec nvlink;  // `nvlink:`; no links unless given
};

struct GpuSpec {
  std::size_t model = 0;  // index into Scenario::models
  std::string uuid;
  std::string serial;
  PciAddress pci;
};

// Where a job's processes sit in Kubernetes, for the simulated kubelet (`gpumeter sim
// kubelet`). Empty when the job is not a pod.
struct KubernetesRef {
  std::string namespace_;
  std::string pod;
  std::string container;
  bool empty() const { return pod.empty(); }
};

// GPUs a scheduler holds for an owner whether or not a process runs on them
// (`allocations:`): a pod the kubelet allocated devices to, or a Slurm job's allocation.
// Exactly one of `kubernetes` and `slurm_job` is set.
struct Allocation {
  std::string name;
  Micros start = 0;
  Micros end = kForever;
  std::vector<unsigned> gpus;
  KubernetesRef kubernetes;
  std::string slurm_job;  // the Slurm job id, e.g. "51234"
  unsigned uid = 0;
  std::size_t mig = kNoMigInstance;  // the MIG instance it holds (`mig:`), into Scenario::mig.instances
};

// The index of no allocation, for jobs outside any.
inline constexpr std::size_t kNoAllocation = static_cast<std::size_t>(-1);

struct Job {
  std::string name;
  Micros start = 0;
  Micros end = kForever;
  std::vector<unsigned> gpus;
  std::vector<unsigned> pids;  // one per entry of `gpus`
  unsigned uid = 0;
  std::string cgroup;
  int cgroup_version = 2;  // how `gpumeter sim procfs` writes /proc/<pid>/cgroup: 1 or 2
  KubernetesRef kubernetes;
  std::vector<std::pair<std::string, std::string>> env;  // in file order
  std::uint64_t memory_bytes = 0;                        // on each of its GPUs
  Pattern utilization;
  // The allocation the job runs in (`allocation:`), index into Scenario::allocations: a
  // process of that pod, or a step of that Slurm job. kNoAllocation when none.
  std::size_t allocation = kNoAllocation;
  std::size_t mig = kNoMigInstance;  // the MIG instance it runs on (`mig:`), into Scenario::mig.instances
  JobProfile profile;                // `profile:`, fractions of busy time (GPM)
  std::optional<JobNvlink> nvlink;   // `nvlink:`; unset: the model's traffic
  // `client: graphics`: a graphics, Vulkan or Mesa OpenCL process on AMD GPUs, which submits
  // through the DRM render node and so records engine time in DRM fdinfo, and is no KFD
  // process. `client: compute` (the default): ROCm compute through /dev/kfd, or CUDA.
  bool graphics = false;
};

struct WindowFault {  // `lost` and `unknown_errors`: [at, at + duration)
  unsigned gpu = 0;
  Micros at = 0;
  Micros duration = 0;
};

struct HangFault {
  unsigned gpu = 0;
  Micros at = 0;
  double wall_seconds = 0;
  std::string call;  // empty: any call on the GPU
};
// On an AMD GPU, a hang with this `call` blocks the GPU's KFD process files (cu_occupancy)
// instead of its sysfs attributes.
inline constexpr const char* kAmdProcessHangCall = "rsmi_compute_process_info_by_pid_get";

struct XidFault {
  unsigned gpu = 0;
  Micros at = 0;
  unsigned code = 0;
  // The MIG instance the Xid happened in (an index into MigPlan::instances), or kNoMigInstance
  // for an event that affects the whole GPU.
  std::size_t mig = kNoMigInstance;
};

// A driver upgraded under running processes (`faults: [{kind: driver_upgrade}]`).
struct DriverUpgrade {
  Micros at = 0;
  std::string to;  // the new driver version
};

// A documented or reported driver oddity a scenario switches on (`quirks:`), on one GPU or all
// of them, during [at, at + duration).
enum class QuirkKind {
  call_error,
  process_record_layout,
  garbage_process_records,
  gpm_non_finite,
  silent_while_idle,
  no_capability,
  impossible_power_samples,
  gpm_batch_collapse,
  active_only_process_samples,
};
enum class CallErrorCode { unknown, not_supported, no_permission, timeout };

struct Quirk {
  QuirkKind kind = QuirkKind::call_error;
  std::optional<unsigned> gpu;  // none: every GPU
  Micros at = 0;
  Micros duration = kForever;
  std::string call;  // call_error: the device function that fails
  CallErrorCode error = CallErrorCode::unknown;
  unsigned record_bytes = 24;  // process_record_layout: the _v3 record stride

  bool applies(unsigned g, Micros t) const {
    return (!gpu || *gpu == g) && t >= at && (duration == kForever || t - at < duration);
  }
};

struct Scenario {
  std::string source;  // file name, for messages
  std::string driver_version;
  std::string amdgpu_version = "6.8.5";  // /sys/module/amdgpu/version, the ROCm driver's release
  int cuda_driver_version = 0;           // e.g. 12040
  double time_scale = 1;
  Micros duration = kForever;  // jobs are cut here; GPUs idle afterwards
  std::vector<GpuModelSpec> models;
  std::vector<GpuSpec> gpus;
  std::vector<Job> jobs;
  std::vector<Allocation> allocations;  // in file order
  std::vector<WindowFault> lost;
  std::vector<WindowFault> unknown_errors;
  std::vector<HangFault> hangs;
  std::vector<XidFault> xids;                  // sorted by time
  std::vector<Micros> driver_reloads;          // sorted
  std::vector<DriverUpgrade> driver_upgrades;  // sorted by time
  std::vector<Quirk> quirks;                   // in file order
  std::vector<NvlinkFault> nvlink_faults;      // `nvlink_down`, `nvlink_errors`, in file order
  // User names for uids (`users: {alice: 2050}`), written to the simulated /etc/passwd.
  std::vector<std::pair<std::string, unsigned>> users;
  MigPlan mig;  // `mig:`: the GPUs in MIG mode and their instances
  // `vgpu_license:`: the node is a vGPU guest and its vGPU software is licensed (true) or not
  // (false); unset on bare metal, which licenses no vGPU software.
  std::optional<bool> vgpu_license;

  const GpuModelSpec& model_of(unsigned gpu) const { return models[gpus[gpu].model]; }
  bool is_amd(unsigned gpu) const { return model_of(gpu).vendor == "amd"; }
  std::size_t fault_count() const {
    return lost.size() + unknown_errors.size() + hangs.size() + xids.size() + driver_reloads.size() +
           driver_upgrades.size() + nvlink_faults.size();
  }
};

}  // namespace gpumeter::sim
