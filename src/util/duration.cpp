#include "util/duration.h"

#include <array>
#include <cctype>
#include <string>

namespace gpumeter {

namespace {

struct Unit {
  std::string_view name;
  long long ms;
};

// Largest first: the order Prometheus requires them in (its ParseDuration's pattern is
// y?w?d?h?m?s?ms?), each at most once.
constexpr std::array<Unit, 7> kUnits{{{"y", 365 * 86'400'000LL},
                                      {"w", 7 * 86'400'000LL},
                                      {"d", 86'400'000},
                                      {"h", 3'600'000},
                                      {"m", 60'000},
                                      {"s", 1000},
                                      {"ms", 1}}};

}  // namespace

Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Error{0, "invalid duration \"" + std::string(text) + "\": " + why +
                        " (expected e.g. 500ms, 1s, 1m30s; units ms, s, m, h, d, w, y)"};
  };
  if (text.empty()) return bad("empty");
  if (text == "0") return std::chrono::milliseconds(0);
  long long total_ms = 0;
  size_t i = 0;
  size_t next_unit = 0;  // index in kUnits of the largest unit still allowed
  while (i < text.size()) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return bad("expected a number");
    long long n = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      n = n * 10 + (text[i] - '0');
      if (n > 1'000'000'000LL) return bad("too large");
      ++i;
    }
    if (i < text.size() && (text[i] == '.' || text[i] == ',')) {
      return bad("no fractions: each unit takes a whole number, as in Prometheus (1500ms, not 1.5s)");
    }
    size_t u = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    std::string_view unit = text.substr(u, i - u);
    if (unit.empty()) return bad("missing unit");
    size_t k = 0;
    while (k < kUnits.size() && kUnits[k].name != unit) ++k;
    if (k == kUnits.size()) return bad("unknown unit \"" + std::string(unit) + "\"");
    if (k < next_unit) {
      return bad("unit \"" + std::string(unit) + "\" after \"" + std::string(kUnits[next_unit - 1].name) +
                 "\": units go from the largest to the smallest, each once, as in Prometheus (1m30s)");
    }
    next_unit = k + 1;
    // Each number is capped, but a large unit or many terms still overflow the sum.
    long long term = 0;
    if (__builtin_mul_overflow(n, kUnits[k].ms, &term) || __builtin_add_overflow(total_ms, term, &total_ms)) {
      return bad("too large");
    }
  }
  return std::chrono::milliseconds(total_ms);
}

}  // namespace gpumeter
