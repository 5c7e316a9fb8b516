#include "report/time_spec.h"

#include <cmath>
#include <regex>

#include <fmt/format.h>

#include "pricing/pricing.h"
#include "util/duration.h"

namespace gpumeter::report {

Result<double> parse_time(std::string_view text, double now) {
  auto bad = [&](std::string_view why) {
    return Error{0, fmt::format("\"{}\": {} (expected now, -30d, now-12h, unix seconds, 2026-11-01 or "
                                "2026-11-01T08:00:00Z)",
                                text, why)};
  };
  if (text == "now") return now;
  std::string_view rel = text;
  if (rel.substr(0, 4) == "now-") rel.remove_prefix(3);
  if (!rel.empty() && rel.front() == '-') {
    auto d = parse_duration(rel.substr(1));
    if (!d) return bad(d.error().message);
    return now - static_cast<double>(d->count()) / 1000.0;
  }
  static const std::regex unix_re(R"(\d{1,12}(\.\d{1,9})?)");
  const std::string s(text);
  if (std::regex_match(s, unix_re)) return std::stod(s);
  // Dates and RFC 3339 times are read as the pricing file reads its effective dates.
  if (auto t = pricing::parse_timestamp(text)) return *t;
  return bad("not a time, or no such date");
}

std::string format_utc(double unix_seconds) {
  const double whole = std::floor(unix_seconds);
  const int ms = static_cast<int>(std::lround((unix_seconds - whole) * 1000.0));
  if (ms == 0 || ms == 1000) return pricing::format_timestamp(whole + (ms == 1000 ? 1 : 0));
  std::string text = pricing::format_timestamp(whole);  // "...:SSZ"
  text.insert(text.size() - 1, fmt::format(".{:03}", ms));
  return text;
}

}  // namespace gpumeter::report
