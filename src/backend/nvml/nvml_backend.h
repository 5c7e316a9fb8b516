#pragma once
// The NVIDIA backend: NVML loaded at run time with dlopen, so the agent needs no SDK to build
// and still starts (reporting itself down) where no driver is installed.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/dynamic_library.h"
#include "backend/nvml/nvml_symbols.h"
#include "backend/throughput_reader.h"
#include "util/clock.h"
#include "util/log.h"

namespace gpumeter {

enum Call : size_t;  // nvml_internal.h

struct NvmlBackendOptions {
  // --nvml.library replaces the list with one path.
  std::vector<std::string> library_candidates = {"libnvidia-ml.so.1", "libnvidia-ml.so"};
  // Symbols to treat as absent: lets tests run the real library with parts of the API missing.
  std::vector<std::string> hidden_symbols;
  // The clocks (the wall clock stamps samples; the monotonic one times backoff and the slow
  // class's refresh). Null: the system clock. Must outlive the backend.
  const Clock* clock = nullptr;
  // How long a re-initialization waits for the workers to leave the driver before it retries
  // later (a worker stuck in a hung call must not stall it for good).
  std::chrono::milliseconds reinit_lock_timeout{1000};
  // Waits between attempts of nvmlInit_v2 at start: the driver often loads after the agent at
  // boot. Its last failure leaves a restart_reason().
  std::vector<std::chrono::milliseconds> init_retry_delays = {std::chrono::seconds(1), std::chrono::seconds(2),
                                                              std::chrono::seconds(4), std::chrono::seconds(8)};
  // Consecutive re-initializations refused with LIB_RM_VERSION_MISMATCH before the backend gives
  // up: the library mapped into this process stays the old driver's (docs/nvml-behaviour.md).
  int reinit_attempts = 3;
};

class NvmlBackend final : public Backend {
 public:
  // Never fails: without a usable library the backend exists with status().up == false and no
  // devices, and status().detail says why.
  static std::unique_ptr<NvmlBackend> create(const NvmlBackendOptions& options, Logger& log);
  // The same with the symbols taken from `library` (tests hand in a scripted NVML).
  static std::unique_ptr<NvmlBackend> create(std::unique_ptr<SymbolSource> library, const NvmlBackendOptions& options,
                                             Logger& log);
  ~NvmlBackend() override;

  BackendStatus status() const override;
  unsigned device_count() const override { return static_cast<unsigned>(devices_.size()); }
  Result<DeviceIdentity> identify(unsigned device) override;
  Result<DeviceReading> collect(unsigned device, CollectScope scope = CollectScope::kFull,
                                CollectorSet groups = CollectorSet::all()) override;
  bool supports_events() const override;
  Result<std::optional<DeviceEvent>> wait_event(std::chrono::milliseconds timeout) override;
  // Shuts NVML down (its device files close) and opens it again once `period` has passed; 0 ends
  // a release at the next collection. An error when a driver call stays in flight.
  Result<bool> release(std::chrono::milliseconds period) override;

  // Set when NVML cannot be used again in this process (nvmlInit_v2 failed at start after its
  // retries, or the driver was upgraded under it): only a new process can load a library that
  // works, so the agent exits for its service manager to start it again.
  std::optional<std::string> restart_reason() const;

  // Optional entry points the library lacked (the metrics they feed are left out).
  const std::vector<std::string>& missing_symbols() const { return symbols_.missing; }

 private:
  struct Device;
  NvmlBackend(const NvmlBackendOptions& options, Logger& log);  // out of line: Device is incomplete here
  void start(std::unique_ptr<SymbolSource> library);
  std::string error_text(nvmlReturn_t rc) const;
  std::int64_t wall_now_us() const;
  std::chrono::steady_clock::time_point steady_now() const;

  Result<nvmlDevice_t> acquire(unsigned device);
  void drop_handle(unsigned device);
  // The device collectors' queries (nvml_device.cpp), each group timed into r.runs.
  void collect_device(Device& d, nvmlDevice_t h, CollectScope scope, CollectorSet groups, class NvmlCollection& c,
                      DeviceReading& r);
  // Utilization, power and the energy counter: what the usage ledger integrates, read by every
  // collection that feeds it.
  void collect_ledger_values(nvmlDevice_t h, class NvmlCollection& c, DeviceReading& r);
  void collect_basics(Device& d, nvmlDevice_t h, bool memory_temperature, class NvmlCollection& c, DeviceReading& r);
  void collect_clocks(Device& d, nvmlDevice_t h, class NvmlCollection& c, DeviceReading& r);
  void collect_ecc(Device& d, nvmlDevice_t h, class NvmlCollection& c, DeviceReading& r);
  void collect_pcie(Device& d, nvmlDevice_t h, bool memory_temperature, class NvmlCollection& c, DeviceReading& r);
  // PCIe throughput where the driver counts no PCIe bytes (fields 197/198 came with R555) and GPM
  // does not measure it (`gpm_pcie`: the profiling collector samples GPM on this GPU): the rates
  // nvmlDeviceGetPcieThroughput samples over 20 ms, read on pcie_reader_'s thread
  // (read_pcie_throughput) so that no collection waits for them.
  void serve_pcie_throughput(Device& d, bool gpm_pcie, DeviceReading& r);
  ThroughputRead read_pcie_throughput(unsigned device);
  // The slow class of `group` (read again every kSlowValuesInterval, or after a call failed).
  void collect_slow_values(Device& d, nvmlDevice_t h, CollectorId group, class NvmlCollection& c);
  void collect_usage(Device& d, nvmlDevice_t h, class NvmlCollection& c, UsageReading& out);
  // Moves the sample cursors by a step of the wall clock (`wall`, now); true while the buffers
  // may still hold samples stamped before a step back (nvml_usage.cpp).
  bool follow_clock_steps(Device& d, std::int64_t wall, UsageReading& out);
  // Per-process utilization since the device's cursor, keeping only the records that can be
  // true of the processes listed now (`pids`, sorted) or at the previous collection.
  void read_process_samples(Device& d, nvmlDevice_t h, std::int64_t wall, const std::vector<unsigned>& pids,
                            class NvmlCollection& c, UsageReading& out);
  // GPM, NVLink and MIG (nvml_profiling.cpp, nvml_mig.cpp).
  void collect_gpm(Device& d, nvmlDevice_t h, class NvmlCollection& c, DeviceReading& r);
  void probe_gpm(Device& d, nvmlDevice_t h, class NvmlCollection& c);  // whether the GPU has GPM, once
  void collect_nvlinks(Device& d, nvmlDevice_t h, class NvmlCollection& c, DeviceReading& r);
  void collect_mig(Device& d, nvmlDevice_t h, bool profiling, class NvmlCollection& c, DeviceReading& r);
  // MIG's phases: the mode (false unless enabled), the GPU instance profiles (once), the MIG
  // devices, and the GPM step of one MIG device's GPU instance.
  bool read_mig_mode(Device& d, nvmlDevice_t h, class NvmlCollection& c, DeviceReading& r);
  void read_mig_profiles(Device& d, nvmlDevice_t h, class NvmlCollection& c, DeviceReading& r);
  void read_mig_devices(Device& d, nvmlDevice_t h, bool profiling, class NvmlCollection& c, DeviceReading& r);
  std::optional<ProfilingReading> step_mig_gpm(Device& d, nvmlDevice_t h, nvmlDevice_t mh, const MigInstanceReading& m,
                                               unsigned profile_id, class NvmlCollection& c);
  // Reads a new sample into `pair` with `take`; the metrics since the previous sample, if any.
  std::optional<ProfilingReading> gpm_step(struct GpmPair& pair,
                                           const std::function<nvmlReturn_t(nvmlGpmSample_t)>& take, Call call,
                                           const char* call_name, class NvmlCollection& c);
  void free_gpm_pair(struct GpmPair& pair);
  void free_gpm_samples(Device& d);  // every pair of the device
  void merge_counters(unsigned device, const class NvmlCollection& c, bool with_call_errors);
  // Counts the calls refused for want of privilege, with the event wait that then leaves out the
  // Xids inside MIG instances, and logs them once per GPU.
  void report_not_permitted(Device& d, std::vector<std::string> calls);

  // Re-initialization after LIB_RM_VERSION_MISMATCH (nvml_backend.cpp).
  void request_reinit(const std::string& reason);
  void maybe_reinitialize();
  // Shuts the library down after freeing what belongs to it (calls_mu_ held exclusively).
  void close_library();
  // What a call answers while the library is closed: released, or waiting to re-initialize.
  Error closed_error() const;

  // Events (nvml_events.cpp). Callers hold events_mu_, not handles_mu_.
  nvmlReturn_t register_events_locked(unsigned device, nvmlDevice_t handle);
  struct EventDevice {
    unsigned index;
    nvmlDevice_t handle;
    bool registered;
    bool excluded;  // lost, or waiting to retry after an UNKNOWN registration
  };
  std::vector<EventDevice> event_devices();  // a copy, taken under handles_mu_
  void defer_events_locked(unsigned index);  // events_mu_ held
  Result<std::optional<DeviceEvent>> rebuild_event_set_locked();
  void free_event_set_locked();

  NvmlBackendOptions options_;
  Logger& log_;
  std::unique_ptr<SymbolSource> library_;  // declared first among the NVML state: closed last
  NvmlSymbols symbols_;
  bool initialized_ = false;  // nvmlInit succeeded and no shutdown since
  bool loaded_ = false;       // the library initialised at start-up: events can be watched
  std::vector<std::unique_ptr<Device>> devices_;

  mutable std::mutex status_mu_;  // guards status_
  BackendStatus status_;

  // Every driver call holds this shared; a re-initialization holds it exclusively, so
  // nvmlShutdown never runs under a call in flight.
  std::shared_timed_mutex calls_mu_;
  std::atomic<bool> reinit_needed_{false};
  std::atomic<bool> released_{false};  // closed by release() until the next re-initialization
  // The longest an event wait holds calls_mu_ (the scheduler's 1 s timeout), which a release
  // may wait out.
  static constexpr std::chrono::milliseconds kLongestEventWait{1000};
  std::mutex reinit_mu_;  // one re-initialization at a time; guards the fields below
  std::chrono::steady_clock::time_point next_reinit_{};
  std::chrono::milliseconds reinit_backoff_{0};
  int reinit_mismatches_ = 0;                  // consecutive, guarded by reinit_mu_
  std::optional<std::string> restart_reason_;  // guarded by status_mu_

  // Each device's handle and event-set flags, shared by its worker and the event thread. Held
  // only to read or write them, never across a driver call: a call hung on one GPU must not
  // stall another GPU's worker.
  std::mutex handles_mu_;
  // The event set, owned by the event thread (and by a re-initialization or the destructor).
  // Registrations are driver calls made under it, so only the event thread can wait on them.
  std::mutex events_mu_;
  nvmlEventSet_t event_set_ = nullptr;

  // Null without nvmlDeviceGetPcieThroughput. Its thread calls the driver: destroyed before
  // nvmlShutdown.
  std::unique_ptr<ThroughputReader> pcie_reader_;
};

}  // namespace gpumeter
