#pragma once
// The AMD backend: ROCm SMI (librocm_smi64) loaded at run time with dlopen, so the agent needs
// no ROCm SDK to build and still starts (reporting itself down) where no library or no AMD GPU
// is found. It fills the same DeviceReading as NVML; what ROCm SMI cannot say is left out.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/dynamic_library.h"
#include "backend/throughput_reader.h"
#include "util/log.h"

namespace gpumeter {

struct RocmBackendOptions {
  // --rocm.library replaces the list with one path. Debian and ROCm 5.x ship .so.1 (ROCm 5.x
  // tarballs .so.5), ROCm 6 and 7 .so.6 and .so.7; /opt/rocm is where ROCm installs itself.
  std::vector<std::string> library_candidates = {"librocm_smi64.so.1", "librocm_smi64.so.7",
                                                 "librocm_smi64.so.6", "librocm_smi64.so.5",
                                                 "librocm_smi64.so",   "/opt/rocm/lib/librocm_smi64.so"};
  // Symbols to treat as absent, as NvmlBackendOptions::hidden_symbols.
  std::vector<std::string> hidden_symbols;
  // Where AMD GPUs are looked for before the library is loaded: the directory ROCm SMI reads.
  // None there: the backend is absent (BackendStatus::absent), not down.
  std::string drm_class_dir = "/sys/class/drm";
};

class RocmBackend final : public Backend {
 public:
  // Never fails: without an AMD GPU it is absent; with AMD GPUs but no usable library (or one that
  // cannot initialise them), down; status().detail says why.
  static std::unique_ptr<RocmBackend> create(const RocmBackendOptions& options, Logger& log);
  static std::unique_ptr<RocmBackend> create(std::unique_ptr<SymbolSource> library, Logger& log);
  ~RocmBackend() override;

  BackendStatus status() const override;
  unsigned device_count() const override { return device_count_; }
  Result<DeviceIdentity> identify(unsigned device) override;
  Result<DeviceReading> collect(unsigned device, CollectScope scope = CollectScope::kFull,
                                CollectorSet groups = CollectorSet::all()) override;
  bool supports_events() const override { return false; }
  Result<std::optional<DeviceEvent>> wait_event(std::chrono::milliseconds timeout) override;

  // "5" or "6": the layout of rsmi_frequencies_t the library was found to use.
  const std::string& abi() const { return abi_; }
  const std::vector<std::string>& missing_symbols() const { return missing_; }

 private:
  struct Symbols;
  explicit RocmBackend(Logger& log);
  void start(std::unique_ptr<SymbolSource> library);
  std::string error_text(const char* call, int rc) const;
  // The device collectors' queries (rocm_device.cpp), one reader per collector group as on
  // NVIDIA GPUs, each recording its calls' outcomes in the collection.
  struct Collection;
  // Utilization, memory, power and the energy counter: what the usage ledger integrates, read by
  // every collection.
  void collect_ledger_values(unsigned device, Collection& c, DeviceReading& r);
  enum class PowerSource : std::uint8_t;
  PowerSource read_power(unsigned device, Collection& c, DeviceReading& r);
  // Logs a GPU's power source when it falls back to gpu_metrics or to none, and when it leaves them.
  void note_power_source(unsigned device, const Collection& c, PowerSource source);
  void collect_basics(unsigned device, Collection& c, DeviceReading& r);  // memory busy, temperatures, power cap
  void collect_clocks(unsigned device, Collection& c, DeviceReading& r);
  void collect_pcie(unsigned device, Collection& c, DeviceReading& r);
  void collect_fan(unsigned device, Collection& c, DeviceReading& r);  // the device collector's fan speed
  void collect_ecc(unsigned device, Collection& c, DeviceReading& r);
  // Reads the processes on the device (read_processes) and reports the read as the processes
  // collector's run.
  void collect_usage(unsigned device, DeviceReading& r);
  // False when the process list could not be read, or was skipped behind a stuck read.
  bool read_processes(unsigned device, DeviceReading& r);
  void note_call_error(unsigned device, const char* call, int rc);
  // PCIe throughput: the kernel measures it for one second inside each read of pcie_bw, so the
  // throughput reader's thread reads the GPUs in turn and collect() serves the last value.
  ThroughputRead read_pcie_throughput(unsigned device);

  Logger& log_;
  std::unique_ptr<SymbolSource> library_;
  std::unique_ptr<Symbols> sym_;
  bool initialized_ = false;
  unsigned device_count_ = 0;
  std::string abi_;
  std::vector<std::string> missing_;
  struct DeviceState;
  std::vector<DeviceState> devices_;  // each touched only by its own collect()

  std::timed_mutex processes_mu_;  // serializes the process calls; guards process_gpus_
  // When the worker now in the process calls entered them (wall clock, µs), 0 when none is: a
  // worker that waits sees whether the one ahead of it is stuck (docs/rocm-behaviour.md, Faults).
  std::atomic<std::int64_t> processes_entered_us_{0};
  std::map<unsigned, std::vector<std::uint32_t>> process_gpus_;  // pid -> its GPUs, asked once

  std::unique_ptr<ThroughputReader> pcie_;  // null without rsmi_dev_pci_throughput_get

  mutable std::mutex status_mu_;  // guards status_
  BackendStatus status_;
};

}  // namespace gpumeter
