#pragma once
// The process-wide state behind the NVML C API, kept in this one place: the init reference
// count, the loaded session, the device handle table and the live event sets. An NVML
// library is process-global by contract, so this is the one global the simulator has.

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "abi/nvml_api.h"
#include "sim/nvml/event_sets.h"
#include "sim/nvml/gpm_samples.h"
#include "sim/nvml/session.h"
#include "sim/scenario/device_files.h"

// The opaque handle type of nvml_api.h, defined here: handles point into a table that lives
// as long as the process, so a stale handle can never dangle, and a handle taken before a
// lost-GPU window works again after it.
struct nvmlDevice_st {
  unsigned index = 0;
};

// GPU instance handles, one per MIG instance of the scenario, as the MIG device handles.
struct nvmlGpuInstance_st {
  unsigned index = 0;
};

namespace gpumeter::sim {

class Runtime {
 public:
  static Runtime& instance();

  nvmlReturn_t init();
  nvmlReturn_t shutdown();

  // The current session, or null before init; holding it keeps the session alive through a
  // concurrent shutdown.
  std::shared_ptr<Session> session() const;

  nvmlDevice_t handle(unsigned index) { return &handles_[index]; }
  std::optional<unsigned> index_of(nvmlDevice_t device) const;
  // MIG device handles: one per MIG instance of the scenario (Scenario::mig.instances), so a
  // handle of a destroyed instance never names its successor.
  nvmlDevice_t mig_handle(std::size_t instance) { return &mig_handles_[instance]; }
  std::optional<std::size_t> mig_index_of(nvmlDevice_t device) const;
  nvmlGpuInstance_t gpu_instance_handle(std::size_t instance) { return &gi_handles_[instance]; }
  std::optional<std::size_t> gpu_instance_index_of(nvmlGpuInstance_t handle) const;

  nvmlEventSet_t create_event_set();
  std::shared_ptr<nvmlEventSet_st> event_set(nvmlEventSet_t set) const;
  bool free_event_set(nvmlEventSet_t set);

  GpmSampleTable& gpm_samples() { return gpm_samples_; }

 private:
  Runtime();

  mutable std::mutex mu_;
  int refcount_ = 0;
  std::shared_ptr<Session> session_;
  std::optional<std::int64_t> first_init_ns_;  // the default epoch
  // The machine (scenario file and its first driver) and the driver of this process's first
  // session on it: the library a process loaded stays that driver's, so once the scenario's
  // driver_upgrade has passed, no nvmlInit in it succeeds. (Another scenario is another machine,
  // as unit tests run them one after another.)
  std::optional<std::pair<std::string, std::string>> loaded_driver_;
  std::array<nvmlDevice_st, kMaxGpus> handles_;
  std::array<nvmlDevice_st, kMaxMigInstances> mig_handles_;
  std::array<nvmlGpuInstance_st, kMaxMigInstances> gi_handles_;
  std::map<std::uintptr_t, std::shared_ptr<nvmlEventSet_st>> event_sets_;
  GpmSampleTable gpm_samples_;
  std::optional<DeviceFileHold> device_files_;  // while initialized
};

}  // namespace gpumeter::sim
