#pragma once
// The DRM accounting of one GPU's readings: what its DRM clients (graphics, Vulkan, Mesa
// OpenCL) used since its previous reading, from their engine counters (ledger/drm_usage.h), and
// the clients the backend does not list, added to the reading's processes with their exact
// busy time.

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "attribution/drm_fdinfo.h"
#include "ledger/drm_usage.h"
#include "model/reading.h"

namespace gpumeter {

class GpuDrmClients {
 public:
  // What the DRM clients of GPU `id` (matched by its PCI address) used since its previous
  // reading, by pid, read from `source` at `now_us`. Empty without a source (null), a PCI
  // address or a scan.
  DrmRound use(DrmClientSource* source, const DeviceIdentity& id, std::int64_t now_us);

 private:
  std::mutex mu_;     // taken alone
  std::string uuid_;  // the GPU whose clients `ledger_` counts
  DrmClientLedger ledger_;
};

// The processes of a reading: the backend's list (`backend`, unset: none), then the DRM clients
// of `drm` it does not list, as graphics processes.
std::vector<GpuProcess> with_drm_clients(const std::optional<std::vector<GpuProcess>>& backend, const DrmRound& drm);

// The exact busy time of process `pid` from `drm`, where it has one: a DRM client the backend
// does not list (`backend_listed` false) has its engine time as all of its busy time; one the
// backend lists (a ROCm process with the render node open) keeps its sampled share, plus any
// engine time it has.
std::optional<double> drm_busy_seconds(const DrmRound& drm, unsigned pid, bool backend_listed);

}  // namespace gpumeter
