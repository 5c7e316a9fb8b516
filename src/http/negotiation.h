#pragma once
// Content negotiation for the telemetry endpoint: which exposition format (Accept) and whether to
// gzip (Accept-Encoding). Anything unparsable falls back to text 0.0.4 uncompressed, which every
// Prometheus-compatible scraper reads; a scrape is never refused over its headers.

#include <string_view>

#include "render/exposition_format.h"

namespace gpumeter {

// OpenMetrics 1.0.0 when the Accept header lists application/openmetrics-text with q > 0 and
// version=1.0.0 or no version, and no text/plain (or wildcard) entry is preferred by a higher q;
// ties go to the entry listed first. Otherwise text 0.0.4.
ExpositionFormat negotiate_format(std::string_view accept);

// True when Accept-Encoding allows gzip: "gzip" or "x-gzip" with q > 0, or "*" with q > 0 when
// gzip is not named. "gzip;q=0" refuses it.
bool accepts_gzip(std::string_view accept_encoding);

}  // namespace gpumeter
