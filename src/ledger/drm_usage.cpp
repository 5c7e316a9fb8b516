#include "ledger/drm_usage.h"

#include <algorithm>

namespace gpumeter {

namespace {

// The engine time a client with `engines` engines can use in `us` of wall time, in ns.
std::uint64_t engine_ns(std::int64_t us, unsigned engines) {
  if (us <= 0) return 0;
  return static_cast<std::uint64_t>(us) * 1000 * std::max(engines, 1u);
}

std::uint64_t lag_ns(unsigned engines) { return kDrmCounterLagNs * std::max(engines, 1u); }

}  // namespace

DrmRound DrmClientLedger::advance(const std::vector<DrmClient>& clients, std::int64_t now_us) {
  DrmRound out;
  const bool started = read_us_ != 0;
  out.interval_s = started ? static_cast<double>(now_us - read_us_) / 1e6 : 0;
  for (const DrmClient& c : clients) {
    DrmUse& u = out.by_pid[c.pid];
    if (c.vram_bytes) u.memory_bytes = u.memory_bytes.value_or(0) + static_cast<double>(*c.vram_bytes);
    auto [it, first_seen] = seen_.try_emplace(c.client_id);
    Seen& s = it->second;
    std::uint64_t added = 0;
    if (first_seen) {
      // At the GPU's first reading, the counters are where billing starts; later, a client opened
      // its file since the GPU's previous reading, and all of its counter is new.
      if (started) added = c.busy_ns;
      s.ns = c.busy_ns;
      s.credit_ns = lag_ns(c.engines) + (started ? engine_ns(now_us - read_us_, c.engines) : 0);
    } else {
      s.credit_ns += engine_ns(now_us - s.seen_us, c.engines);
      if (c.busy_ns >= s.ns) {
        added = c.busy_ns - s.ns;
        s.ns = c.busy_ns;
      } else if (s.ns - c.busy_ns > kDrmCounterLagNs) {
        added = c.busy_ns;  // started again from zero
        s.ns = c.busy_ns;
      }
    }
    s.seen_us = now_us;
    const std::uint64_t billed = std::min(added, s.credit_ns);
    s.credit_ns = std::min(s.credit_ns - billed, lag_ns(c.engines));
    u.busy_seconds += static_cast<double>(billed) / 1e9;
  }
  std::erase_if(seen_, [&](const auto& e) { return now_us - e.second.seen_us > kDrmClientMemoryUs; });
  read_us_ = now_us;
  return out;
}

}  // namespace gpumeter
