#include "http/exposition_store.h"

#include "render/families.h"

namespace gpumeter {

Result<void> ExpositionStore::publish(std::shared_ptr<const Snapshot> snapshot) {
  if (!snapshot) return Error{0, "publish: null snapshot"};
  auto prepared = prepare_exposition(build_families(*snapshot), snapshot->taken_unix);
  if (!prepared) return prepared.error();
  auto published =
      std::make_shared<const Published>(Published{std::move(snapshot), std::move(prepared).value()});
  latest_.store(std::move(published), std::memory_order_release);
  return {};
}

}  // namespace gpumeter
