#pragma once
// The hand-over point between collection and scraping. The collector side publishes each new
// Snapshot here; scrapes load the latest Published pointer and never wait for a collection. The
// first scrape of a snapshot in a format renders it (and gzip, if it asked), once for every later
// scrape of that snapshot: a snapshot nobody scrapes costs nothing to publish.

#include <atomic>
#include <memory>

#include "model/snapshot.h"
#include "render/prepared_exposition.h"
#include "util/result.h"

namespace gpumeter {

struct Published {
  explicit Published(std::shared_ptr<const Snapshot> s);
  std::shared_ptr<const Snapshot> snapshot;
  PreparedExposition exposition;
};

class ExpositionStore {
 public:
  // Stores `snapshot` for scrapes to render on demand. Called by one writer (the collector side).
  // A null snapshot is an error, and the previously published snapshot stays in place.
  Result<void> publish(std::shared_ptr<const Snapshot> snapshot);

  // The latest publication, or null before the first. Safe from any number of threads; the result
  // stays valid for as long as the caller holds it, even if newer snapshots are published meanwhile.
  std::shared_ptr<const Published> latest() const { return latest_.load(std::memory_order_acquire); }

 private:
  std::atomic<std::shared_ptr<const Published>> latest_;
};

}  // namespace gpumeter
