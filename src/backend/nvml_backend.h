#pragma once
// The NVIDIA backend: NVML loaded at run time with dlopen, so the agent needs no SDK to build
// and still starts (reporting itself down) where no driver is installed.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/dynamic_library.h"
#include "backend/nvml_symbols.h"
#include "util/log.h"

namespace gpumeter {

struct NvmlBackendOptions {
  // --nvml.library replaces the list with one path.
  std::vector<std::string> library_candidates = {"libnvidia-ml.so.1", "libnvidia-ml.so"};
  // Symbols to treat as absent: lets tests run the real library with parts of the API missing.
  std::vector<std::string> hidden_symbols;
  // Clocks, replaceable so tests can script time. Unset means the system clocks.
  std::function<std::int64_t()> wall_clock_us;  // microseconds since the epoch
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
  Result<DeviceReading> collect(unsigned device, CollectScope scope = CollectScope::kFull) override;
  bool supports_events() const override;
  Result<std::optional<DeviceEvent>> wait_event(std::chrono::milliseconds timeout) override;

  // Optional entry points the library lacked (the metrics they feed are left out).
  const std::vector<std::string>& missing_symbols() const { return symbols_.missing; }

 private:
  struct Device;
  NvmlBackend(const NvmlBackendOptions& options, Logger& log);  // out of line: Device is incomplete here
  void start(std::unique_ptr<SymbolSource> library);
  std::string error_text(nvmlReturn_t rc) const;
  std::int64_t wall_now_us() const;

  Result<nvmlDevice_t> acquire(unsigned device);
  void drop_handle(unsigned device);
  void collect_device(nvmlDevice_t h, CollectScope scope, class NvmlCollection& c, DeviceReading& r);
  void collect_usage(Device& d, nvmlDevice_t h, class NvmlCollection& c, UsageReading& out);
  void merge_counters(unsigned device, const class NvmlCollection& c);

  // Events (nvml_events.cpp). Callers hold events_mu_.
  nvmlReturn_t register_events_locked(unsigned device, nvmlDevice_t handle);
  void free_event_set_locked();

  NvmlBackendOptions options_;
  Logger& log_;
  std::unique_ptr<SymbolSource> library_;  // declared first among the NVML state: closed last
  NvmlSymbols symbols_;
  bool initialized_ = false;
  std::vector<std::unique_ptr<Device>> devices_;

  mutable std::mutex status_mu_;  // guards status_
  BackendStatus status_;

  // Guards handles as seen by the event thread, the event set and its registrations.
  std::mutex events_mu_;
  nvmlEventSet_t event_set_ = nullptr;
};

}  // namespace gpumeter
