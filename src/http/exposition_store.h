#pragma once
// The hand-over point between collection and scraping. The collector side publishes each new
// Snapshot here; scrapes load the latest Published pointer and never wait for a collection. The
// first scrape of a snapshot in a format renders it (and gzip, if it asked), once for every later
// scrape of that snapshot: a snapshot nobody scrapes costs nothing to publish. The JSON API's
// answers are prepared the same way.

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "model/snapshot.h"
#include "render/api_v1.h"
#include "render/prepared_exposition.h"
#include "util/result.h"

namespace gpumeter {

// Builds the families of a snapshot: build_families, and what the agent adds to it (compat sets).
using FamilyBuilder = std::function<std::vector<MetricFamily>(const Snapshot&)>;

struct Published {
  Published(std::shared_ptr<const Snapshot> s, const FamilyBuilder& builder);
  std::shared_ptr<const Snapshot> snapshot;
  PreparedExposition exposition;
  PreparedApi api;  // the JSON API's answers, likewise rendered on first use
};

class ExpositionStore {
 public:
  // `builder` renders each snapshot on its first scrape; by default gpumeter's own families.
  explicit ExpositionStore(FamilyBuilder builder = {});

  // Stores `snapshot` for scrapes to render on demand. Called by one writer (the collector side).
  // A null snapshot is an error, and the previously published snapshot stays in place.
  Result<void> publish(std::shared_ptr<const Snapshot> snapshot);

  // The latest publication, or null before the first. Safe from any number of threads; the result
  // stays valid for as long as the caller holds it, even if newer snapshots are published meanwhile.
  std::shared_ptr<const Published> latest() const { return latest_.load(std::memory_order_acquire); }

 private:
  FamilyBuilder builder_;
  std::atomic<std::shared_ptr<const Published>> latest_;
};

}  // namespace gpumeter
