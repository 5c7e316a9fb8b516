#pragma once
// The local JSON API, version 1 (docs/api.md): the served snapshot's readings and owners of each
// GPU, for schedulers and applications on the node. Rendered from the same snapshot as /metrics;
// a request never reaches the driver.

#include <optional>
#include <string>
#include <string_view>

#include "model/snapshot.h"

namespace gpumeter {

// GET /api/v1/gpus: every GPU.
std::string render_api_gpus(const Snapshot& s, double now_unix);
// GET /api/v1/gpus/<uuid>: one GPU; nullopt when no GPU has that UUID.
std::optional<std::string> render_api_gpu(const Snapshot& s, std::string_view uuid, double now_unix);
// The body of an error answer: {"error": "..."}.
std::string render_api_error(std::string_view message);

}  // namespace gpumeter
