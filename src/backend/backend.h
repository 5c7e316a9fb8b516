#pragma once
// The vendor-neutral interface every GPU backend implements (NVML today, ROCm SMI next).
// The collector and the renderer only see these types, so a new vendor plugs in by
// implementing Backend and filling DeviceReading; nothing downstream changes.

#include <chrono>
#include <cstdint>
#include <string>

#include "model/reading.h"
#include "util/result.h"

namespace gpumeter {

// Thread-safety contract: collect()/identify() may run concurrently for different devices,
// never twice at once for the same device. wait_event() runs on a thread of its own.
// status() may be called from any thread at any time: it returns a copy.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendStatus status() const = 0;
  virtual unsigned device_count() const = 0;
  virtual Result<DeviceIdentity> identify(unsigned device) = 0;
  // `groups` names the device collectors to read (docs/configuration.md#collectors); the usage
  // part is read when kLedger or kProcesses is in it. A backend may read more than it is asked.
  virtual Result<DeviceReading> collect(unsigned device, CollectScope scope = CollectScope::kFull,
                                        CollectorSet groups = CollectorSet::all()) = 0;
  // True when wait_event can deliver events at all.
  virtual bool supports_events() const = 0;
  // Blocks up to `timeout`; returns nullopt when nothing happened.
  virtual Result<std::optional<DeviceEvent>> wait_event(std::chrono::milliseconds timeout) = 0;
  // Lets go of the GPUs for `period` so that an operator can reset one, change its MIG mode or
  // unload the driver (docs/alerts.md, "Resetting a GPU"): the vendor library is closed, every
  // collection fails meanwhile (the ledger counts the time as gap), and the library is opened
  // again once `period` has passed; 0 takes the GPUs back at the next collection. False where
  // the backend has nothing to let go of.
  virtual Result<bool> release(std::chrono::milliseconds period) {
    (void)period;
    return false;
  }
};

}  // namespace gpumeter
