#include "ledger/drm_accounting.h"

#include <algorithm>

namespace gpumeter {

DrmRound GpuDrmClients::use(DrmClientSource* source, const DeviceIdentity& id, std::int64_t now_us) {
  if (source == nullptr) return {};
  const std::string pdev = normalize_pci_address(id.pci_bus_id);
  if (pdev.empty()) return {};
  auto clients = source->clients(pdev);
  if (!clients) return {};  // the counters are cumulative: the next reading covers this one too
  std::lock_guard lock(mu_);
  if (uuid_ != id.uuid) {
    uuid_ = id.uuid;
    ledger_.reset();
  }
  return ledger_.advance(*clients, now_us);
}

std::vector<GpuProcess> with_drm_clients(const std::optional<std::vector<GpuProcess>>& backend, const DrmRound& drm) {
  std::vector<GpuProcess> listed;
  if (backend) listed = *backend;
  for (const auto& client : drm.by_pid) {  // not a structured binding: clang 14 (the fuzz build) cannot capture one
    const unsigned pid = client.first;
    if (std::none_of(listed.begin(), listed.end(), [&](const GpuProcess& p) { return p.pid == pid; })) {
      listed.push_back({pid, client.second.memory_bytes, kProcessGraphics});
    }
  }
  return listed;
}

std::optional<double> drm_busy_seconds(const DrmRound& drm, unsigned pid, bool backend_listed) {
  auto d = drm.by_pid.find(pid);
  if (d == drm.by_pid.end() || (backend_listed && d->second.busy_seconds <= 0)) return std::nullopt;
  return d->second.busy_seconds;
}

}  // namespace gpumeter
