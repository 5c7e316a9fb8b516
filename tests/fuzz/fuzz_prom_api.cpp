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
    // The reader of the usual shape and the SAX reader agree on every answer.
    auto sax = report::parse_query_response_sax(text, "query gpu_busy_seconds_total");
    FUZZ_CHECK(series.ok() == sax.ok());
    if (!series) {
      FUZZ_CHECK(series.error().message == sax.error().message);
      FUZZ_CHECK(series.error().message.find("gpu_busy_seconds_total") != std::string::npos);
      return 0;
    }
    FUZZ_CHECK(series->size() == sax->size());
    for (std::size_t i = 0; i < series->size(); ++i) {
      FUZZ_CHECK((*series)[i].labels == (*sax)[i].labels);
      FUZZ_CHECK((*series)[i].samples.size() == (*sax)[i].samples.size());
      for (std::size_t k = 0; k < (*series)[i].samples.size(); ++k) {
        FUZZ_CHECK((*series)[i].samples[k].t == (*sax)[i].samples[k].t);
        FUZZ_CHECK(std::signbit((*series)[i].samples[k].t) == std::signbit((*sax)[i].samples[k].t));
        FUZZ_CHECK((*series)[i].samples[k].v == (*sax)[i].samples[k].v);
      }
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
