#pragma once
// The vocabulary of readings: what a GPU is (DeviceIdentity), what one collection read from it
// (DeviceReading, its usage samples) and what a backend reports about itself. Every backend
// produces these; the collector, the ledger and the renderers consume them without knowing
// which vendor's library filled them.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "model/collectors.h"

namespace gpumeter {

// A value with one distinguishing label value, e.g. {sensor="gpu"} or {clock="sm"}.
struct LabeledValue {
  std::string label;
  double value = 0;
  bool operator==(const LabeledValue&) const = default;
};

// Static facts about a GPU. Fields a backend cannot provide are left empty.
struct DeviceIdentity {
  unsigned index = 0;
  std::string uuid;
  std::string vendor;  // "nvidia", "amd"
  std::string model;
  std::string pci_bus_id;
  std::string driver_version;
  std::string vbios_version;
  std::string serial;
  // The minor number of the GPU's character device (/dev/nvidia<N>), where the backend knows it:
  // what cgroup device lists and a scheduler's GPU numbers name, which need not be the index.
  std::optional<unsigned> device_minor;
  // Set only on the identity of a MIG device (a compute instance of a GPU in MIG mode), as the
  // ledger bills it: the parent GPU's uuid. `uuid` is then the MIG device's "MIG-…" uuid, which
  // is what a scheduler hands out for the slice, and `index` the parent's.
  std::string parent_uuid;
  bool operator==(const DeviceIdentity&) const = default;
};

// A process holding a context on the GPU. `types` is a mask of the lists it was found in.
enum ProcessTypeBits : unsigned { kProcessCompute = 1, kProcessGraphics = 2, kProcessMps = 4 };
struct GpuProcess {
  unsigned pid = 0;
  std::optional<double> memory_bytes;  // unset where the driver cannot say (e.g. WDDM)
  unsigned types = 0;
  bool operator==(const GpuProcess&) const = default;
};

// One entry of a driver sample buffer: the average over the period ending at timestamp_us
// (the CPU clock, microseconds since the Unix epoch).
// A difference between how far the wall clock and the monotonic clock moved between two
// readings larger than this is a step of the wall clock (NTP, a VM restore), not slewing
// (at most 500 ppm) or the instant between reading the two clocks.
inline constexpr std::int64_t kClockStepThresholdUs = 250'000;

struct TimedSample {
  std::int64_t timestamp_us = 0;
  double value = 0;  // utilization as a ratio 0..1, power in watts
  bool operator==(const TimedSample&) const = default;
};

// One per-process utilization record: the process's average over (covers_from_us,
// timestamp_us], where covers_from_us is the lastSeenTimeStamp the query passed (0 when the
// query had none) and timestamp_us the process's own last sample time.
struct ProcessSample {
  unsigned pid = 0;
  std::int64_t timestamp_us = 0;
  double sm_ratio = 0;      // 0..1
  double memory_ratio = 0;  // 0..1
  std::int64_t covers_from_us = 0;
  bool operator==(const ProcessSample&) const = default;
};

// What a GPU reported about its processes and sample buffers in one collection. Samples are
// only those newer than the previous collection's, oldest first.
struct UsageReading {
  std::optional<std::vector<GpuProcess>> processes;  // unset when no process list is available
  bool utilization_samples_supported = false;
  std::vector<TimedSample> utilization_samples;
  bool power_samples_supported = false;
  std::vector<TimedSample> power_samples;
  bool process_samples_supported = false;
  std::vector<ProcessSample> process_samples;  // only sane ones: pid known, value <= 100 %
  // The wall clock (µs) just before the per-process query; 0: unknown. A driver that averages
  // every sample of a window stamps each running process's record within one sample period of
  // this, however late the reading finishes (docs/ledger.md, "Per-process records").
  std::int64_t process_samples_asked_us = 0;
  // The wall clock stepped by this much (µs, + forward) since this GPU's previous reading: the
  // driver stamps its samples with the wall clock, so they stepped too. 0: no step.
  std::int64_t clock_step_us = 0;
  bool operator==(const UsageReading&) const = default;
};

// Profiling activity from NVML's GPU Performance Monitoring (Hopper and newer), averaged over the
// time between the GPM sample pair the backend keeps: ratios 0..1 and bytes per second. Each
// field is unset where the driver did not answer that metric.
struct ProfilingReading {
  std::optional<double> graphics_active_ratio;  // the graphics engine (GPM GRAPHICS_UTIL)
  std::optional<double> sm_active_ratio;        // SMs with at least one warp (SM_UTIL)
  std::optional<double> sm_occupancy_ratio;     // resident warps of the maximum (SM_OCCUPANCY)
  std::optional<double> tensor_active_ratio;    // any tensor pipe (ANY_TENSOR_UTIL)
  std::optional<double> dram_active_ratio;      // memory bandwidth of the peak (DRAM_BW_UTIL)
  std::optional<double> fp64_active_ratio;
  std::optional<double> fp32_active_ratio;
  std::optional<double> fp16_active_ratio;
  std::optional<double> pcie_transmit_bytes_per_second;
  std::optional<double> pcie_receive_bytes_per_second;
  std::optional<double> nvlink_transmit_bytes_per_second;
  std::optional<double> nvlink_receive_bytes_per_second;
  bool operator==(const ProfilingReading&) const = default;
};

// One NVLink of a GPU. Counters count since the driver loaded.
struct NvlinkReading {
  unsigned link = 0;
  std::optional<bool> active;
  std::optional<double> speed_bytes_per_second;
  std::optional<double> transmit_bytes;  // data, without protocol overhead; counter
  std::optional<double> receive_bytes;   // counter
  std::vector<LabeledValue> errors;      // label: type ("replay", "recovery", "crc"); counters
  bool operator==(const NvlinkReading&) const = default;
};

// One MIG device: a compute instance inside a GPU instance of a MIG-enabled GPU. Its GPU's
// temperature, power and clocks stay on the parent's reading.
struct MigInstanceReading {
  std::string uuid;  // "MIG-…", what the kubelet hands out for the slice
  unsigned gpu_instance = 0;
  unsigned compute_instance = 0;
  std::string profile;  // "3g.40gb"; "1c.3g.40gb" for a compute instance smaller than its GPU instance
  unsigned slices = 0;  // the GPU instance's share of the parent, in slices (of MigValues::slices)
  std::optional<double> memory_total_bytes;
  std::optional<double> memory_used_bytes;
  std::optional<std::vector<GpuProcess>> processes;
  std::optional<ProfilingReading> profiling;  // GPM of this GPU instance, where supported
  // The compute instance's slices, where it is smaller than its GPU instance (of `slices`); 0:
  // it spans the GPU instance, or unknown.
  unsigned compute_slices = 0;
  bool operator==(const MigInstanceReading&) const = default;
};

// The error counts of one hardware block (a memory controller, an engine), by severity.
struct BlockErrors {
  std::string block;
  double corrected = 0;
  double uncorrected = 0;
  bool operator==(const BlockErrors&) const = default;
};

// A reading is grouped by the collector that reads it (model/collectors.h): each group is what one
// `--collector.<name>` switches on, one reader per backend fills, and one set of families renders.
// Adding a metric touches one group, one reader per vendor, and one family spec.

// The device collector's: utilization, memory, temperature, power, energy, fan, power limit.
// Utilization, power and energy are also read between full collections, for the ledger.
struct DeviceValues {
  std::optional<double> utilization_ratio;         // 0..1
  std::optional<double> memory_utilization_ratio;  // 0..1
  std::optional<double> memory_total_bytes;
  std::optional<double> memory_used_bytes;
  std::optional<double> memory_free_bytes;
  std::optional<double> memory_reserved_bytes;    // set aside by the driver and firmware, outside used
  std::vector<LabeledValue> temperature_celsius;  // label: sensor ("gpu", "memory")
  std::optional<double> power_watts;
  std::optional<double> power_limit_watts;
  // 1 if the vGPU software is licensed, 0 if not or where the system licenses none (bare metal),
  // as DCGM reports it; served in the dcgm-exporter set only.
  std::optional<double> vgpu_licensed;
  std::optional<double> energy_joules;              // counter since driver load
  std::optional<double> fan_speed_ratio;            // may exceed 1 on some boards
  std::optional<double> encoder_utilization_ratio;  // 0..1, the video encoder (NVENC)
  std::optional<double> decoder_utilization_ratio;  // 0..1, the video decoder (NVDEC)
  bool operator==(const DeviceValues&) const = default;
};

// The clocks collector's.
struct ClockValues {
  std::vector<LabeledValue> hertz;          // label: clock ("graphics", "sm", "memory", "video")
  std::optional<double> performance_state;  // 0 (max) .. 15 (min)
  std::vector<LabeledValue> event_active;   // label: reason; 0/1, only reasons the GPU supports
  // One entry per performance level the backend knows (ROCm SMI's "auto", "manual", ...), 1 on
  // the current one, 0 on the others; empty where the level is unknown or not a concept (NVML).
  std::vector<LabeledValue> performance_level;
  bool operator==(const ClockValues&) const = default;
};

// The ecc collector's.
struct EccValues {
  std::vector<LabeledValue> errors;  // label: severity ("corrected", "uncorrected"); counter
  // ECC counts per hardware block where the backend reads them so (ROCm SMI: umc, sdma, gfx, ...);
  // when set, they are exported in place of `errors`, which holds their sums.
  std::vector<BlockErrors> block_errors;
  std::vector<LabeledValue> remapped_rows;  // label: kind
  bool operator==(const EccValues&) const = default;
};

// The pcie collector's.
struct PcieValues {
  std::optional<double> link_generation;
  std::optional<double> link_width;
  std::optional<double> replay_errors;   // counter
  std::optional<double> transmit_bytes;  // counter (may wrap: a reset to Prometheus)
  std::optional<double> receive_bytes;   // counter
  // Throughput in bytes per second measured by the backend outside GPM: ROCm SMI's pcie_bw
  // estimate over one second, NVML's nvmlDeviceGetPcieThroughput sample over 20 ms on drivers
  // without the byte counters (before R555). A rate, never added up into the counters above.
  std::optional<double> transmit_bytes_per_second;
  std::optional<double> receive_bytes_per_second;
  bool operator==(const PcieValues&) const = default;
};

// The mig collector's. MIG mode and instances are read for the ledger even when it is off.
struct MigValues {
  std::optional<bool> enabled;                // unset where the GPU cannot do MIG
  std::optional<unsigned> slices;             // slices of the whole GPU (7 on A100 and H100, 4 on A30)
  std::vector<MigInstanceReading> instances;  // every MIG device, when MIG is enabled
  bool operator==(const MigValues&) const = default;
};

// One collection of one GPU, in base units. An unset optional or an absent entry means
// "unsupported or unknown": the renderer leaves it out, it never prints a sentinel.
struct DeviceReading {
  DeviceValues device;
  ClockValues clocks;
  EccValues ecc;
  PcieValues pcie;
  std::vector<NvlinkReading> nvlinks;         // the nvlink collector's: the GPU's links, empty without NVLink
  std::optional<ProfilingReading> profiling;  // the profiling collector's: unset where GPM is unsupported
  // Whether the GPU measures profiling activity at all, once the profiling collector has asked:
  // unset profiling with true is a pair of samples not taken yet.
  std::optional<bool> profiling_supported;
  MigValues mig;
  UsageReading usage;  // the ledger's: process lists and sample buffers
  // The collectors this collection ran, each with its outcome: NVML's device collectors and
  // its process read; ROCm SMI's process read only (its device collection is timed whole).
  std::vector<CollectorRun> runs;
  bool operator==(const DeviceReading&) const = default;
};

enum class DeviceEventKind { kXid };

struct DeviceEvent {
  unsigned device = 0;
  DeviceEventKind kind = DeviceEventKind::kXid;
  uint64_t code = 0;  // the Xid number for kXid
  // The GPU instance the event happened in, on a GPU in MIG mode; none when it affects the
  // whole GPU. A caller without CAP_SYS_ADMIN is told only of the latter.
  std::optional<unsigned> gpu_instance;
  // The error kills the work on the GPU, or leaves the GPU unusable until it is reset, as the
  // backend's vendor documents the code: the GPU is faulty from it (docs/ledger.md, "Faulty
  // GPUs").
  bool kills_work = false;
};

// What a collection reads. kUsage is the part the usage ledger needs (process lists, sample
// buffers, per-process utilization, polled utilization, power and the energy counter); the
// collector asks for it between full collections so that no --collect.interval lets a
// driver sample buffer overflow.
enum class CollectScope { kFull, kUsage };

// Counters a backend keeps about its own calls, exported as gpumeter_ self-metrics.
struct BackendCounters {
  // (gpu, call, error) -> optional queries that failed and left a value out, the GPU still up
  std::map<std::tuple<unsigned, std::string, std::string>, std::uint64_t> call_errors;
  // (gpu, reason) -> per-process records dropped because they cannot be true
  std::map<std::pair<unsigned, std::string>, std::uint64_t> dropped_records;
  // (gpu, reason) -> device samples and readings dropped because they cannot be true
  std::map<std::pair<unsigned, std::string>, std::uint64_t> dropped_samples;
  // (gpu, call) -> values dropped because they were a NaN or an infinity
  std::map<std::pair<unsigned, std::string>, std::uint64_t> non_finite_values;
  // (gpu, call) -> calls the driver refused for want of privilege, no longer asked: what they read
  // is missing (on a MIG GPU, the agent lacks CAP_SYS_ADMIN)
  std::set<std::pair<unsigned, std::string>> not_permitted;
  std::uint64_t reinitializations = 0;  // successful re-initializations of the vendor library
  bool operator==(const BackendCounters&) const = default;
};

struct BackendStatus {
  std::string backend;  // "nvml"
  bool up = false;
  std::string detail;   // why it is down or absent, or what it loaded
  std::string library;  // the path that was loaded, when up
  std::string driver_version;
  std::string vendor;  // DeviceIdentity::vendor of its GPUs, known even before a GPU is identified
  BackendCounters counters;
  // Neither up nor down: the node has none of this vendor's GPUs, or none of its library (NVML
  // not found; ROCm SMI with no AMD GPU in /sys/class/drm). A node without AMD GPUs is not
  // missing ROCm SMI, and nothing about it should alert.
  bool absent = false;
  // While an operator's release keeps the vendor library closed (Backend::release): when it
  // ends, on the wall clock (µs since the epoch); 0 otherwise.
  std::int64_t released_until_us = 0;
};

}  // namespace gpumeter
