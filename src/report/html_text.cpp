#include "report/html_text.h"

#include "util/html_escape.h"

#include <charconv>
#include <cmath>
#include <ctime>

namespace gpumeter::report {

void append_escaped(std::string& out, std::string_view s) { append_html_escaped(out, s); }

std::string escaped(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  append_escaped(out, s);
  return out;
}

std::string format_number(double value, int decimals) {
  if (!std::isfinite(value)) return "n/a";
  char buf[96];
  auto r = std::to_chars(buf, buf + sizeof buf, std::fabs(value), std::chars_format::fixed, decimals);
  if (r.ec != std::errc()) return "n/a";  // beyond any GPU fleet's budget
  std::string_view digits(buf, static_cast<size_t>(r.ptr - buf));
  size_t point = digits.find('.');
  std::string_view integer = digits.substr(0, point);
  std::string_view fraction = point == std::string_view::npos ? "" : digits.substr(point);

  bool all_zero = digits.find_first_not_of("0.") == std::string_view::npos;
  std::string out;
  if (value < 0 && !all_zero) out.push_back('-');  // "-0.00" would read as a refund
  for (size_t i = 0; i < integer.size(); ++i) {
    if (i > 0 && (integer.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(integer[i]);
  }
  out.append(fraction);
  return out;
}

std::string format_percent(double ratio, int decimals) {
  if (!std::isfinite(ratio)) return "n/a";
  return format_number(ratio * 100.0, decimals) + " %";
}

std::string format_utc(double unix_seconds, const char* strftime_format) {
  if (!std::isfinite(unix_seconds)) return "n/a";
  std::time_t t = static_cast<std::time_t>(std::floor(unix_seconds));
  std::tm tm{};
  if (!gmtime_r(&t, &tm)) return "n/a";
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, strftime_format, &tm);
  return std::string(buf, n);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "n/a";
  struct Unit {
    long long seconds;
    const char* name;
  };
  static constexpr Unit kUnits[] = {{86400, "d"}, {3600, "h"}, {60, "min"}, {1, "s"}};
  long long left = std::llround(seconds);
  if (left == 0) return "0 s";
  std::string out;
  int parts = 0;
  for (const Unit& u : kUnits) {
    long long n = left / u.seconds;
    if (n == 0) {
      if (parts > 0) break;  // "1 d 5 min" reads as more precise than it is useful
      continue;
    }
    if (!out.empty()) out.push_back(' ');
    out += std::to_string(n);
    out.push_back(' ');
    out += u.name;
    left -= n * u.seconds;
    if (++parts == 2 || left == 0) break;
  }
  return out;
}

}  // namespace gpumeter::report
