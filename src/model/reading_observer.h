#pragma once
// How the usage ledger hears of the collections without the collection scheduler knowing about
// it, and without the ledger depending on the scheduler or the backends.

#include <cstddef>

#include "model/reading.h"
#include "model/snapshot.h"

namespace gpumeter {

// Sees every successful collection (on that GPU's worker thread) and adds its own results
// to each snapshot: how the usage ledger plugs in without the collector knowing about it.
class ReadingObserver {
 public:
  virtual ~ReadingObserver() = default;
  // `slot` is the GPU's position in the snapshot; the identity may still be partial.
  virtual void on_reading(size_t slot, const DeviceIdentity& identity, const DeviceReading& reading) = 0;
  // A collection of this GPU failed (full or usage-only): what was integrated up to the last
  // reading must not be stretched over the failure.
  virtual void on_failure(size_t /*slot*/, const DeviceIdentity& /*identity*/) {}
  // An error that kills work struck this GPU (DeviceEvent::kills_work), just now.
  virtual void on_fault(size_t /*slot*/, const DeviceIdentity& /*identity*/) {}
  // Called while a snapshot is assembled, after the GPUs are filled in.
  virtual void contribute(Snapshot& snapshot) const = 0;
};

}  // namespace gpumeter
