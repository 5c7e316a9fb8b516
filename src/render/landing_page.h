#pragma once
// The human-facing page served at "/": a self-contained HTML5 document (inline CSS, no external
// assets) with the agent version, backend state and one row per GPU. Not on the scrape path.

#include <string>

#include "model/snapshot.h"

namespace gpumeter {

struct LandingPageOptions {
  std::string telemetry_path = "/metrics";
  double now_unix = 0;  // for the snapshot age; 0 leaves the age out
  std::string notice;   // shown above the tables, e.g. that no snapshot was collected yet
};

// Every string taken from the snapshot or the options is HTML-escaped.
std::string render_landing_page(const Snapshot& snapshot, const LandingPageOptions& options);

}  // namespace gpumeter
