#include "http/exposition_store.h"

#include "render/families.h"

namespace gpumeter {

Published::Published(std::shared_ptr<const Snapshot> s)
    : snapshot(s), exposition([s] { return build_families(*s); }, s->taken_unix) {}

Result<void> ExpositionStore::publish(std::shared_ptr<const Snapshot> snapshot) {
  if (!snapshot) return Error{0, "publish: null snapshot"};
  latest_.store(std::make_shared<const Published>(std::move(snapshot)), std::memory_order_release);
  return {};
}

}  // namespace gpumeter
