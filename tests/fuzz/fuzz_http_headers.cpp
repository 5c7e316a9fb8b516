// What any client on the network sends before a handler runs: the request target and the
// Accept and Accept-Encoding headers.
#include <string>

#include "fuzz_check.h"
#include "http/negotiation.h"
#include "http/request_target.h"

using namespace gpumeter;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto [selector, text] = fuzz::select(data, size, 3);
  switch (selector) {
    case 0: {
      const bool valid = valid_request_target(text);
      FUZZ_CHECK(valid == valid_request_target(text));
      if (valid) {
        FUZZ_CHECK(!text.empty() && text.front() == '/');
        for (char c : text) FUZZ_CHECK(c > 0x20 && c < 0x7f);
      }
      break;
    }
    case 1: {
      const ExpositionFormat f = negotiate_format(text);
      FUZZ_CHECK(f == ExpositionFormat::kText004 || f == ExpositionFormat::kOpenMetrics100);
      FUZZ_CHECK(f == negotiate_format(text));
      if (text.find("openmetrics") == std::string_view::npos && text.find("OPENMETRICS") == std::string_view::npos) {
        // Only a header that names OpenMetrics (in any case) can select it.
        std::string lower(text);
        for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        if (lower.find("openmetrics") == std::string::npos) FUZZ_CHECK(f == ExpositionFormat::kText004);
      }
      break;
    }
    default: {
      const bool gzip = accepts_gzip(text);
      FUZZ_CHECK(gzip == accepts_gzip(text));
      if (text.empty()) FUZZ_CHECK(!gzip);
      break;
    }
  }
  return 0;
}
