#include "sim/units.h"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

namespace gpumeter::sim {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Splits "12.5GiB" into the number "12.5" and the suffix "GiB".
std::pair<std::string_view, std::string_view> split_number(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && (is_digit(text[i]) || text[i] == '.')) ++i;
  return {text.substr(0, i), text.substr(i)};
}

__extension__ using Uint128 = unsigned __int128;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<std::uint64_t> scale_decimal(std::string_view text, std::uint64_t unit) {
  std::size_t dot = text.find('.');
  std::string_view whole = text.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view{} : text.substr(dot + 1);
  if (whole.empty() && frac.empty()) return std::nullopt;
  if (dot != std::string_view::npos && frac.empty()) return std::nullopt;
  std::uint64_t mantissa = 0;
  for (std::string_view part : {whole, frac}) {
    for (char c : part) {
      if (!is_digit(c)) return std::nullopt;
      if (__builtin_mul_overflow(mantissa, 10U, &mantissa)) return std::nullopt;
      if (__builtin_add_overflow(mantissa, static_cast<unsigned>(c - '0'), &mantissa)) return std::nullopt;
    }
  }
  // value = mantissa * unit / 10^frac_digits, required to be whole.
  std::uint64_t divisor = 1;
  for (std::size_t i = 0; i < frac.size(); ++i) {
    if (__builtin_mul_overflow(divisor, 10U, &divisor)) return std::nullopt;
  }
  Uint128 product = static_cast<Uint128>(mantissa) * unit;
  if (product % divisor != 0) return std::nullopt;
  Uint128 value = product / divisor;
  if (value > std::numeric_limits<std::uint64_t>::max()) return std::nullopt;
  return static_cast<std::uint64_t>(value);
}

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, std::uint64_t>, 11> kUnits = {{
      {"", 1},
      {"B", 1},
      {"kB", 1000ULL},
      {"KB", 1000ULL},
      {"MB", 1000ULL * 1000},
      {"GB", 1000ULL * 1000 * 1000},
      {"TB", 1000ULL * 1000 * 1000 * 1000},
      {"KiB", 1ULL << 10},
      {"MiB", 1ULL << 20},
      {"GiB", 1ULL << 30},
      {"TiB", 1ULL << 40},
  }};
  auto [number, suffix] = split_number(trim(text));
  suffix = trim(suffix);
  for (const auto& [name, factor] : kUnits) {
    if (suffix == name) return scale_decimal(number, factor);
  }
  return std::nullopt;
}

std::optional<Micros> parse_duration(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  auto [first_number, first_suffix] = split_number(text);
  if (first_suffix.empty()) {
    auto v = scale_decimal(first_number, kMicrosPerSecond);
    if (!v || *v > static_cast<std::uint64_t>(kForever / 2)) return std::nullopt;
    return static_cast<Micros>(*v);
  }
  std::uint64_t total = 0;
  while (!text.empty()) {
    auto [number, rest] = split_number(text);
    std::size_t unit_len = 0;
    while (unit_len < rest.size() && !is_digit(rest[unit_len]) && rest[unit_len] != '.') ++unit_len;
    std::string_view unit = rest.substr(0, unit_len);
    static constexpr std::array<std::pair<std::string_view, std::uint64_t>, 6> kUnits = {{
        {"us", 1},
        {"ms", 1000},
        {"s", kMicrosPerSecond},
        {"m", 60 * kMicrosPerSecond},
        {"h", 3600 * kMicrosPerSecond},
        {"d", 86400 * kMicrosPerSecond},
    }};
    std::uint64_t factor = 0;
    for (const auto& [name, f] : kUnits) {
      if (unit == name) factor = f;
    }
    if (factor == 0) return std::nullopt;
    auto v = scale_decimal(number, factor);
    if (!v || __builtin_add_overflow(total, *v, &total)) return std::nullopt;
    text = rest.substr(unit_len);
  }
  if (total > static_cast<std::uint64_t>(kForever / 2)) return std::nullopt;
  return static_cast<Micros>(total);
}

std::optional<int> parse_ratio_percent(std::string_view text) {
  text = trim(text);
  std::optional<std::uint64_t> percent;
  if (!text.empty() && text.back() == '%') {
    percent = scale_decimal(trim(text.substr(0, text.size() - 1)), 1);
  } else {
    percent = scale_decimal(text, 100);
  }
  if (!percent || *percent > 100) return std::nullopt;
  return static_cast<int>(*percent);
}

std::optional<double> parse_double(std::string_view text) {
  text = trim(text);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || ptr != text.data() + text.size() || text.empty() || !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

std::optional<std::uint64_t> parse_unsigned(std::string_view text) {
  text = trim(text);
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  std::uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v, base);
  if (ec != std::errc{} || ptr != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

}  // namespace gpumeter::sim
