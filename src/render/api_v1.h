#pragma once
// The local JSON API, version 1 (docs/api.md): the served snapshot's readings and owners of each
// GPU, for schedulers and applications on the node. Rendered from the same snapshot as /metrics;
// a request never reaches the driver.

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/snapshot.h"

namespace gpumeter {

// The answers of one snapshot, rendered on the first request and then shared by every request
// of that snapshot, as the exposition is: a client asking in a loop costs a write, not a render.
// Each body lacks its end (snapshot_age_seconds, which changes with each request, and the
// closing brace), which render_api_tail writes.
class PreparedApi {
 public:
  explicit PreparedApi(std::shared_ptr<const Snapshot> snapshot);
  PreparedApi(const PreparedApi&) = delete;
  PreparedApi& operator=(const PreparedApi&) = delete;

  // GET /api/v1/gpus: every GPU.
  std::string_view gpus() const;
  // GET /api/v1/gpus/<uuid>: one GPU; nullopt when no GPU has that UUID.
  std::optional<std::string_view> gpu(std::string_view uuid) const;

 private:
  void render() const;

  std::shared_ptr<const Snapshot> snapshot_;
  mutable std::once_flag once_;
  mutable std::string all_;
  mutable std::vector<std::pair<std::string, std::string>> by_uuid_;
};

// The end of an answer: the snapshot's age now (never negative) and the closing brace.
std::string render_api_tail(double age_seconds);

// The body of an error answer: {"error": "..."}.
std::string render_api_error(std::string_view message);

}  // namespace gpumeter
