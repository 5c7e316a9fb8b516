#include "http/exposition_store.h"

#include "render/families.h"

namespace gpumeter {

Published::Published(std::shared_ptr<const Snapshot> s, const FamilyBuilder& builder)
    : snapshot(s), exposition([s, builder] { return builder(*s); }, s->taken_unix), api(s) {}

ExpositionStore::ExpositionStore(FamilyBuilder builder) : builder_(std::move(builder)) {
  if (!builder_) builder_ = [](const Snapshot& s) { return build_families(s); };
}

Result<void> ExpositionStore::publish(std::shared_ptr<const Snapshot> snapshot) {
  if (!snapshot) return Error{0, "publish: null snapshot"};
  latest_.store(std::make_shared<const Published>(std::move(snapshot), builder_), std::memory_order_release);
  return {};
}

}  // namespace gpumeter
