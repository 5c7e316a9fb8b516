#pragma once
// UTF-8 validity. Values a GPU's users control (environment values, process and cgroup names, HPC
// job files) and strings from drivers need not be UTF-8, and everything the agent writes them into
// (the exposition, the JSON API, the state file, the logs) must be.

#include <cstddef>
#include <string>
#include <string_view>

namespace gpumeter {

inline constexpr std::string_view kUtf8ReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not one (overlong forms,
// surrogates and code points above U+10FFFF count as invalid, as in Go's utf8.ValidString).
std::size_t utf8_sequence_length(std::string_view s, std::size_t i);

// Calls emit(char) for each ASCII byte and appends each multi-byte sequence to `out` as it is; a
// byte that starts no valid sequence becomes U+FFFD.
template <typename EmitAscii>
void for_each_utf8(std::string& out, std::string_view s, EmitAscii emit) {
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t n = utf8_sequence_length(s, i);
    if (n == 1) {
      emit(s[i]);
      i += 1;
    } else if (n == 0) {
      out.append(kUtf8ReplacementChar);
      i += 1;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
}

bool is_valid_utf8(std::string_view s);

// `s` with every byte that starts no valid sequence replaced by U+FFFD, as the exposition writes it.
std::string valid_utf8(std::string_view s);

}  // namespace gpumeter
