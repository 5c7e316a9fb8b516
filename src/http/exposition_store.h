#pragma once
// The hand-over point between collection and scraping. The collector side publishes each new
// Snapshot here; publishing renders both formats and prepares gzip once. Scrapes only load the
// latest Published pointer, so a scrape never renders, compresses or waits for a collection.

#include <atomic>
#include <memory>

#include "model/snapshot.h"
#include "render/prepared_exposition.h"
#include "util/result.h"

namespace gpumeter {

struct Published {
  std::shared_ptr<const Snapshot> snapshot;
  PreparedExposition exposition;
};

class ExpositionStore {
 public:
  // Renders and stores `snapshot`. Called by one writer (the collector side), never on the scrape path.
  // On error the previously published snapshot stays in place.
  Result<void> publish(std::shared_ptr<const Snapshot> snapshot);

  // The latest publication, or null before the first. Safe from any number of threads; the result
  // stays valid for as long as the caller holds it, even if newer snapshots are published meanwhile.
  std::shared_ptr<const Published> latest() const { return latest_.load(std::memory_order_acquire); }

 private:
  std::atomic<std::shared_ptr<const Published>> latest_;
};

}  // namespace gpumeter
