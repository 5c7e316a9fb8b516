#include "render/number_format.h"

#include <charconv>
#include <cmath>
#include <cstdint>

namespace gpumeter {

namespace {
// 2^53: above this, not every integer is representable, so "integer-looking" output could claim a
// precision the value does not have.
constexpr double kMaxExactInteger = 9007199254740992.0;
}  // namespace

void append_sample_value(std::string& out, double value) {
  if (std::isnan(value)) {
    out.append("NaN");
    return;
  }
  if (std::isinf(value)) {
    out.append(value > 0 ? "+Inf" : "-Inf");
    return;
  }
  char buf[32];
  std::to_chars_result r;
  if (std::fabs(value) <= kMaxExactInteger && std::trunc(value) == value) {
    r = std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(value));
  } else {
    r = std::to_chars(buf, buf + sizeof buf, value);  // shortest round-trip, never locale-dependent
  }
  out.append(buf, r.ptr);
}

void append_fixed(std::string& out, double value, int decimals) {
  if (!std::isfinite(value)) {
    append_sample_value(out, value);
    return;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::fixed, decimals);
  if (r.ec != std::errc()) {  // only for absurd magnitudes; fall back to the exact form
    append_sample_value(out, value);
    return;
  }
  out.append(buf, r.ptr);
}

}  // namespace gpumeter
