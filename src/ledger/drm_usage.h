#pragma once
// What a GPU's DRM clients used between two of its readings, from their cumulative engine
// counters (attribution/drm_fdinfo.h). The counters come from files any process on the node
// can shape (a client's own fdinfo, or one planted under --path.procfs), so no increase is
// trusted beyond what the client could have used:
// - what a client is billed is at most the wall time it was seen for times its engines, plus
//   one lag's worth (below): a counter read a moment stale, or one that catches up, may show
//   more than the last interval's wall time, and the credit a client did not use carries to its
//   next reading, up to that lag;
// - a client first seen after the GPU's first reading opened its file since: its whole counter
//   is new, within that bound;
// - a client missed by a scan (its fd pointed elsewhere for a moment, a scan failed) is
//   remembered, so it is billed its increase when it comes back, not its whole counter again;
// - a counter may lag behind a value read before (drm-usage-stats.rst allows it): a decrease of
//   at most kDrmCounterLagNs is held at the larger value; a larger one is a counter that started
//   again from zero, counted from there.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "attribution/drm_fdinfo.h"

namespace gpumeter {

// A decrease of a client's counter up to this much is lag, not a restart (an assumption: the
// kernel documents lag without a bound; one second is far above the microseconds seen between
// reads of one client through two fds, and far below a real client's total).
inline constexpr std::uint64_t kDrmCounterLagNs = 1'000'000'000;
// A client not seen for this long is forgotten (client ids are never reused within a boot).
inline constexpr std::int64_t kDrmClientMemoryUs = 600'000'000;

struct DrmUse {
  double busy_seconds = 0;
  std::optional<double> memory_bytes;
};

struct DrmRound {
  std::map<unsigned, DrmUse> by_pid;
  double interval_s = 0;  // since the GPU's previous reading; 0 at the first
};

class DrmClientLedger {
 public:
  // The use of `clients` (one GPU's, read at `now_us` on the wall clock) since the previous call.
  DrmRound advance(const std::vector<DrmClient>& clients, std::int64_t now_us);
  // A GPU with another uuid in the slot: its clients are not this one's.
  void reset() { *this = DrmClientLedger(); }

 private:
  struct Seen {
    std::uint64_t ns = 0;         // the largest counter taken as true
    std::int64_t seen_us = 0;     // when it was last read
    std::uint64_t credit_ns = 0;  // engine time it may still be billed (see above)
  };
  std::map<std::uint64_t, Seen> seen_;  // by client id
  std::int64_t read_us_ = 0;            // the previous call; 0: none yet
};

}  // namespace gpumeter
