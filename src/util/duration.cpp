#include "util/duration.h"

#include <cctype>
#include <string>

namespace gpumeter {

Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Error{0, "invalid duration \"" + std::string(text) + "\": " + why +
                        " (expected e.g. 500ms, 1s, 1m30s; units ms, s, m, h, d, w, y)"};
  };
  if (text.empty()) return bad("empty");
  if (text == "0") return std::chrono::milliseconds(0);
  long long total_ms = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return bad("expected a number");
    long long n = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      n = n * 10 + (text[i] - '0');
      if (n > 1'000'000'000LL) return bad("too large");
      ++i;
    }
    size_t u = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    std::string_view unit = text.substr(u, i - u);
    long long scale;
    if (unit == "ms") scale = 1;
    else if (unit == "s") scale = 1000;
    else if (unit == "m") scale = 60'000;
    else if (unit == "h") scale = 3'600'000;
    else if (unit == "d") scale = 86'400'000;
    else if (unit == "w") scale = 7 * 86'400'000LL;
    else if (unit == "y") scale = 365 * 86'400'000LL;
    else if (unit.empty()) return bad("missing unit");
    else return bad("unknown unit \"" + std::string(unit) + "\"");
    // Each number is capped, but a large unit or many terms still overflow the sum.
    long long term = 0;
    if (__builtin_mul_overflow(n, scale, &term) || __builtin_add_overflow(total_ms, term, &total_ms)) {
      return bad("too large");
    }
  }
  return std::chrono::milliseconds(total_ms);
}

}  // namespace gpumeter
