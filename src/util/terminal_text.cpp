#include "util/terminal_text.h"

#include <algorithm>
#include <cstdint>

namespace gpumeter {
namespace {

// The length of the UTF-8 sequence a byte starts; 0 when it cannot start one.
std::size_t utf8_length(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return c >= 0xC2 ? 2 : 0;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return c <= 0xF4 ? 4 : 0;
  return 0;
}

// The code point of the well-formed sequence of `n` bytes at the start of `s`.
std::uint32_t code_point(std::string_view s, std::size_t n) {
  static constexpr unsigned char kLeadMask[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  std::uint32_t cp = static_cast<unsigned char>(s[0]) & kLeadMask[n];
  for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[k]) & 0x3F);
  return cp;
}

bool is_control(std::uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) return true;       // C0, DEL, C1
  if (cp == 0x061C || cp == 0x200E || cp == 0x200F) return true;  // bidi marks
  if (cp >= 0x2028 && cp <= 0x202E) return true;                  // separators, embeddings, overrides
  return cp >= 0x2066 && cp <= 0x2069;                            // bidi isolates
}

}  // namespace

std::size_t text_width(std::string_view s) {
  return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_length(static_cast<unsigned char>(s[i]));
    bool ok = n > 0 && i + n <= s.size();
    for (std::size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (!ok) {
      out += '?';
      ++i;
      continue;
    }
    if (is_control(code_point(s.substr(i), n))) {
      out += '?';
      i += n;
      continue;
    }
    out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string truncate_utf8(std::string_view s, std::size_t max_chars) {
  if (max_chars == 0) return "";
  std::size_t chars = 0;
  std::size_t cut = std::string_view::npos;  // byte offset where character number max_chars-1 starts
  for (std::size_t i = 0; i < s.size(); ++i) {
    const bool continuation = (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80;
    if (continuation) continue;
    if (chars == max_chars - 1) cut = i;
    if (++chars > max_chars) return std::string(s.substr(0, cut)) + "\u2026";
  }
  return std::string(s);
}

}  // namespace gpumeter
