#pragma once
// ASCII case-insensitive comparison, for the protocol tokens of HTTP (header names, media types,
// codings, auth schemes), which are case-insensitive in ASCII only whatever the locale.

#include <algorithm>
#include <cctype>
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

}  // namespace gpumeter
