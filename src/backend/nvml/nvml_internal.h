#pragma once
// What the NVML backend's source files share: the per-device state, the classification of
// return codes and the bookkeeping of one collection. Not part of the backend's interface.

#include <array>
#include <bitset>
#include <cmath>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/clock_steps.h"
#include "backend/nvml/nvml_backend.h"

namespace gpumeter {

// Calls whose NOT_SUPPORTED answer is remembered per device, so an unsupported query costs
// one call per handle and nothing afterwards.
enum Call : size_t {
  kUtilization,
  kMemoryV2,
  kMemoryV1,
  kTemperature,
  kPowerUsage,
  kPowerLimit,
  kVgpuLicense,
  kEnergy,
  kClockGraphics,
  kClockSm,
  kClockMemory,
  kClockVideo,
  kPerformanceState,
  kFanSpeed,
  kEncoderUtilization,
  kDecoderUtilization,
  kPcieGeneration,
  kPcieWidth,
  kPcieReplay,
  kFieldValues,
  kClockEvents,
  kSupportedClockEvents,
  kEccCorrected,
  kEccUncorrected,
  kRemappedRows,
  kComputeProcesses,
  kGraphicsProcesses,
  kMpsProcesses,
  kProcessesUtilizationInfo,
  kProcessUtilization,
  kUtilizationSamples,
  kPowerSamples,
  kGpmSupport,
  kGpmSampleAlloc,
  kGpmSample,
  kGpmMigSample,
  kGpmMetrics,
  kNvlinkCount,
  kNvlinkFields,
  kMigMode,
  kMigProfiles,
  kMigDevices,
  kMigDeviceIdentity,
  kMigAttributes,
  kMigGpuInstance,
  kMigName,
  kMigMemory,
  kMigProcesses,
  kCallCount
};

// Errors after which the device (or the whole driver) cannot answer: the collection fails and
// the GPU is reported down. Anything else (UNKNOWN, TIMEOUT, NO_PERMISSION, ...) is what real
// drivers answer for single queries on healthy GPUs, and only leaves that one value out.
bool is_fatal(nvmlReturn_t rc);

// A handle needs re-acquiring after these: the GPU fell off the bus or was reset.
inline bool invalidates_handle(nvmlReturn_t rc) {
  return rc == NVML_ERROR_GPU_IS_LOST || rc == NVML_ERROR_RESET_REQUIRED || rc == NVML_ERROR_GPU_NOT_FOUND;
}

// A label value for an NVML error: "unknown", "timeout", "no_permission", ...
std::string error_name(nvmlReturn_t rc);

// Two GPM samples used in turn: each collection reads a new sample into the one not holding the
// previous reading and computes the metrics between the two, so no collection waits between
// samples. The samples are allocated on first use and freed by free_gpm_pair.
struct GpmPair {
  nvmlGpmSample_t sample[2] = {nullptr, nullptr};
  int previous = -1;  // which sample holds the previous reading; -1: none yet
};

// A GPU instance profile of a MIG-capable GPU, as nvmlDeviceGetGpuInstanceProfileInfoV names it.
struct MigProfile {
  unsigned id = 0;  // the profile id GPU instances report
  unsigned slices = 0;
  std::string name;  // "3g.40gb" (the "MIG " prefix stripped)
};

// The sample pair of one GPU instance, and what the instance was when the pair began: a GPU
// instance id reused by another profile or MIG device after a re-partition starts a new pair.
struct MigGpm {
  unsigned profile_id = 0;
  std::string uuid;
  GpmPair pair;
};

struct NvmlBackend::Device {
  unsigned index = 0;
  // Written by this device's worker (or a re-initialization); read by the event thread, all
  // under handles_mu_.
  nvmlDevice_t handle = nullptr;
  bool events_registered = false;
  bool events_excluded = false;  // left out of the event set as lost, until a new handle
  // Left out of the event set until then after its registration answered UNKNOWN.
  std::chrono::steady_clock::time_point events_retry_at{};
  // Only this device's worker touches the fields below (or a re-initialization, which holds
  // calls_mu_ exclusively).
  std::string uuid;
  std::bitset<kCallCount> unsupported;
  // Sample-buffer cursors: the newest timestamp already returned, per buffer.
  unsigned long long utilization_seen_us = 0;
  unsigned long long power_seen_us = 0;
  unsigned long long process_seen_us = 0;
  // Steps of the wall clock, which move the driver's timestamps, told from time passing.
  WallClockSteps clock_steps;
  // After a step back, until the samples stamped before it have left the driver's buffers:
  // they come first in the buffer's order and are skipped.
  std::chrono::steady_clock::time_point skip_before_step_back_until{};
  std::vector<unsigned> previous_pids;  // sorted; process samples of these are still valid
  // Values that change only when an operator or a rare hardware event changes them, read every
  // kSlowValuesInterval and served from here in between (docs/metrics.md lists them).
  struct SlowValues {
    std::bitset<kCollectorCount> valid;  // by collector: read since the handle was acquired
    std::array<std::chrono::steady_clock::time_point, kCollectorCount> read_at{};
    std::optional<double> power_limit_watts;
    std::optional<double> vgpu_licensed;
    std::optional<unsigned> pcie_link_generation;
    std::optional<unsigned> pcie_link_width;
    unsigned long long supported_clock_events = ~0ULL;  // every reason, until the driver says
    std::vector<LabeledValue> remapped_rows;
    unsigned nvlink_count = 0;  // field 91; 0 without NVLink
  } slow;
  // Whether the driver counts PCIe bytes (fields 197/198, R555+): learnt from the fields' own
  // answers, again after the handle is acquired (a driver upgrade re-initializes NVML).
  std::optional<bool> pcie_byte_fields;
  // GPM: support probed once (per handle generation), the device's sample pair, and one pair per
  // GPU instance of a MIG-enabled GPU.
  std::optional<bool> gpm_supported;
  GpmPair gpm;
  std::map<unsigned, MigGpm> mig_gpm;  // by GPU instance id
  // MIG: the mode at the previous collection (a change asks every call's support again), and
  // the GPU instance profiles, read once while MIG is enabled.
  std::optional<bool> mig_enabled;
  std::optional<std::vector<MigProfile>> mig_profiles;
  bool not_permitted_logged = false;  // the log line about refused calls, once per GPU
};

// How often the slow class of values is read again.
inline constexpr std::chrono::seconds kSlowValuesInterval{30};

// One collection of one device: stops calling into the driver after the first fatal error
// (a lost GPU answers every call slowly), remembers NOT_SUPPORTED answers, and keeps the
// errors and dropped records to count once the collection ends.
class NvmlCollection {
 public:
  NvmlCollection(std::bitset<kCallCount>& unsupported, std::function<std::string(nvmlReturn_t)> text)
      : unsupported_(unsupported), text_(std::move(text)) {}

  // True when `fn` exists and the call should be made.
  template <typename Fn>
  bool wanted(Fn fn, Call c) const {
    return fn != nullptr && !fatal_ && !unsupported_[c];
  }
  bool unsupported(Call c) const { return unsupported_[c]; }

  // Classifies a return code; true when the value is usable.
  // NO_PERMISSION is remembered as NOT_SUPPORTED is (the agent's privilege does not change while
  // it runs) and reported on its own, not as a call error.
  bool ok(Call c, nvmlReturn_t rc, const char* fn_name);
  // The driver answered without a value that is an error (NOT_FOUND: supported, nothing new).
  void answered() { answered_ = true; }
  void drop_record(const char* reason) { ++dropped_[reason]; }
  // `value` when it is a finite number; a NaN or an infinity from `fn_name` is dropped and
  // counted (DCGM blanks a NaN from the GPM: docs/nvml-behaviour.md).
  std::optional<double> finite(std::optional<double> value, const char* fn_name) {
    if (!value || std::isfinite(*value)) return value;
    ++non_finite_[fn_name];
    return std::nullopt;
  }

  const std::optional<Error>& fatal() const { return fatal_; }
  // Runs `read`, one collector's part of the collection, and times it. It failed when one of its
  // queries failed for another reason than NOT_SUPPORTED, or when the GPU is gone.
  template <typename Read>
  CollectorRun timed(CollectorId id, Read&& read) {
    return timed_run(id, [&] {
      const size_t errors = call_errors_.size();
      read();
      return !fatal_ && call_errors_.size() == errors;
    });
  }
  // Why the collection fails: a fatal error, or the first error when no query answered at all.
  std::optional<Error> failure() const;
  const std::vector<std::pair<std::string, nvmlReturn_t>>& call_errors() const { return call_errors_; }
  const std::map<std::string, std::uint64_t>& dropped_records() const { return dropped_; }
  const std::map<std::string, std::uint64_t>& non_finite_values() const { return non_finite_; }
  // The most power the board can draw: twice its enforced limit where known, else 10 kW (the
  // bound other clients use). A power sample or reading above it is dropped and counted.
  void set_power_limit(std::optional<double> limit_watts) {
    power_ceiling_watts_ = limit_watts && *limit_watts > 0 ? 2 * *limit_watts : kPowerCeilingWatts;
  }
  std::optional<double> plausible_power(double watts) {
    if (std::isfinite(watts) && watts >= 0 && watts <= power_ceiling_watts_) return watts;
    ++dropped_samples_["power_above_limit"];
    return std::nullopt;
  }
  const std::map<std::string, std::uint64_t>& dropped_samples() const { return dropped_samples_; }
  // Calls the driver refused with NO_PERMISSION in this collection.
  const std::vector<std::string>& not_permitted() const { return not_permitted_; }

 private:
  std::bitset<kCallCount>& unsupported_;
  std::function<std::string(nvmlReturn_t)> text_;
  std::optional<Error> fatal_;
  std::optional<Error> first_error_;
  bool answered_ = false;
  std::vector<std::pair<std::string, nvmlReturn_t>> call_errors_;
  std::map<std::string, std::uint64_t> dropped_;
  std::map<std::string, std::uint64_t> non_finite_;
  std::vector<std::string> not_permitted_;
  static constexpr double kPowerCeilingWatts = 10'000;
  double power_ceiling_watts_ = kPowerCeilingWatts;
  std::map<std::string, std::uint64_t> dropped_samples_;
};

// How many bytes apart the driver wrote `count` records into a buffer that was filled with
// kRecordSentinel before the call: 16, 24 or 32, or `nominal` when the buffer does not tell.
// Reads one process list (the newest generation the library has) of a device or MIG device
// handle, merging its records into `out` by pid with `type_bit` set (nvml_usage.cpp).
nvmlReturn_t read_process_list(const nvmlDeviceGetProcessesRaw_fn (&fns)[3], nvmlDevice_t h, unsigned type_bit,
                               std::vector<GpuProcess>& out);

// A field value as a number, whatever its type; nullopt when its own status is not SUCCESS, or
// when it is a NaN or an infinity (counted in `c`) (nvml_backend.cpp).
std::optional<double> field_as_double(const nvmlFieldValue_t& f, NvmlCollection& c);

constexpr unsigned char kRecordSentinel = 0xA5;
unsigned detect_record_stride(const unsigned char* buf, size_t size, unsigned count, unsigned nominal);

}  // namespace gpumeter
