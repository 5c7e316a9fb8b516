#include "ledger/drm_usage.h"

#include <algorithm>

namespace gpumeter {

namespace {

// The engine time a client with `engines` engines can have used in `us` of wall time, in ns.
std::uint64_t bound_ns(std::int64_t us, unsigned engines) {
  if (us <= 0) return 0;
  return static_cast<std::uint64_t>(us) * 1000 * std::max(engines, 1u);
}

}  // namespace

DrmRound DrmClientLedger::advance(const std::vector<DrmClient>& clients, std::int64_t now_us) {
  DrmRound out;
  const bool started = read_us_ != 0;
  out.interval_s = started ? static_cast<double>(now_us - read_us_) / 1e6 : 0;
  for (const DrmClient& c : clients) {
    DrmUse& u = out.by_pid[c.pid];
    if (c.vram_bytes) u.memory_bytes = u.memory_bytes.value_or(0) + static_cast<double>(*c.vram_bytes);
    auto before = seen_.find(c.client_id);
    std::uint64_t added = 0;
    std::int64_t since_us = read_us_;
    if (before == seen_.end()) {
      // At the GPU's first reading, the counters are where billing starts.
      if (started) added = c.busy_ns;
      seen_[c.client_id] = {c.busy_ns, now_us};
    } else {
      Seen& s = before->second;
      since_us = s.seen_us;
      if (c.busy_ns >= s.ns) {
        added = c.busy_ns - s.ns;
        s.ns = c.busy_ns;
      } else if (s.ns - c.busy_ns > kDrmCounterLagNs) {
        added = c.busy_ns;  // started again from zero
        s.ns = c.busy_ns;
      }
      s.seen_us = now_us;
    }
    u.busy_seconds += static_cast<double>(std::min(added, bound_ns(now_us - since_us, c.engines))) / 1e9;
  }
  std::erase_if(seen_, [&](const auto& e) { return now_us - e.second.seen_us > kDrmClientMemoryUs; });
  read_us_ = now_us;
  return out;
}

}  // namespace gpumeter
