#pragma once
// ASCII case-insensitive comparison, for the protocol tokens of HTTP (header names, media types,
// codings, auth schemes), which are case-insensitive in ASCII only whatever the locale; and
// Prometheus' name rule, which is ASCII too.

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <string_view>

namespace gpumeter {

inline bool iequals_ascii(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

inline bool starts_with_ascii_icase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals_ascii(s.substr(0, prefix.size()), prefix);
}

// A Prometheus label name, [a-zA-Z_][a-zA-Z0-9_]*: also a metric name (one without colons).
inline bool is_label_name(std::string_view s) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

}  // namespace gpumeter
