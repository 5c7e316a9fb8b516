#include "report/time_spec.h"

#include <charconv>
#include <cmath>
#include <ctime>
#include <regex>

#include <fmt/format.h>

#include "util/duration.h"

namespace gpumeter::report {
namespace {

bool valid_date(int y, int mo, int d) {
  static constexpr int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > kDays[mo - 1]) return false;
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return !(mo == 2 && d == 29 && !leap);
}

double to_unix(int y, int mo, int d, int h, int mi, int s) {
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  return static_cast<double>(timegm(&tm));
}

}  // namespace

Result<double> parse_time(std::string_view text, double now) {
  auto bad = [&](std::string_view why) {
    return Error{0, fmt::format("\"{}\": {} (expected now, -30d, now-12h, unix seconds, 2026-11-01 or "
                                "2026-11-01T08:00:00Z)", text, why)};
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
  static const std::regex date_re(R"((\d{4})-(\d{2})-(\d{2}))");
  static const std::regex rfc_re(
      R"((\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|([+-])(\d{2}):(\d{2})))");
  const std::string s(text);
  std::smatch m;
  if (std::regex_match(s, unix_re)) return std::stod(s);
  if (std::regex_match(s, m, date_re)) {
    int y = std::stoi(m[1]), mo = std::stoi(m[2]), d = std::stoi(m[3]);
    if (!valid_date(y, mo, d)) return bad("no such date");
    return to_unix(y, mo, d, 0, 0, 0);
  }
  if (std::regex_match(s, m, rfc_re)) {
    int y = std::stoi(m[1]), mo = std::stoi(m[2]), d = std::stoi(m[3]);
    int h = std::stoi(m[4]), mi = std::stoi(m[5]), sec = std::stoi(m[6]);
    if (!valid_date(y, mo, d)) return bad("no such date");
    if (h > 23 || mi > 59 || sec > 60) return bad("no such time of day");
    double t = to_unix(y, mo, d, h, mi, sec);
    if (m[7].matched) t += std::stod("0" + m[7].str());
    if (m[9].matched) {
      int oh = std::stoi(m[10]), om = std::stoi(m[11]);
      if (oh > 23 || om > 59) return bad("no such UTC offset");
      double offset = oh * 3600.0 + om * 60.0;
      t += m[9] == "+" ? -offset : offset;
    }
    return t;
  }
  return bad("not a time");
}

std::string format_utc(double unix_seconds) {
  const double whole = std::floor(unix_seconds);
  auto t = static_cast<std::time_t>(whole);
  std::tm tm{};
  gmtime_r(&t, &tm);
  const int ms = static_cast<int>(std::lround((unix_seconds - whole) * 1000.0));
  if (ms == 0 || ms == 1000) {
    if (ms == 1000) return format_utc(whole + 1);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                       tm.tm_hour, tm.tm_min, tm.tm_sec);
  }
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

}  // namespace gpumeter::report
