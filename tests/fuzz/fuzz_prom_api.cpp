// Answers of a Prometheus-compatible query API, which `gpumeter report` bills from: the server
// may be broken, a proxy may mangle the body, or someone may answer in its place.
#include <cmath>
#include <string>

#include "fuzz_check.h"
#include "report/prom_api.h"

using namespace gpumeter;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto [selector, text] = fuzz::select(data, size, 2);
  if (selector == 0) {
    auto series = report::parse_query_response(text, "query gpu_busy_seconds_total");
    if (!series) {
      FUZZ_CHECK(series.error().message.find("gpu_busy_seconds_total") != std::string::npos);
      return 0;
    }
    for (const auto& s : *series) {
      FUZZ_CHECK(s.labels.find("__name__") == s.labels.end());
      for (std::size_t i = 1; i < s.samples.size(); ++i) FUZZ_CHECK(s.samples[i - 1].t <= s.samples[i].t);
      for (const auto& sample : s.samples) FUZZ_CHECK(!std::isnan(sample.t));
    }
  } else {
    auto labels = report::parse_series_response(text, "series gpu_info");
    if (!labels) FUZZ_CHECK(labels.error().message.find("gpu_info") != std::string::npos);
  }
  return 0;
}
