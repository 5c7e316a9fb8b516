#pragma once
// A text cell of the report's CSV formats (report --format csv and focus).

#include <charconv>
#include <string>
#include <string_view>
#include <system_error>

namespace gpumeter::report {

// A text cell a spreadsheet would take for a formula (OWASP, "CSV Injection"): one starting with
// =, +, -, @, a tab or a carriage return, unless the whole cell is a plain number.
inline bool formula_like(std::string_view s) {
  if (s.empty() || std::string_view("=+-@\t\r").find(s.front()) == std::string_view::npos) return false;
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec != std::errc() || end != s.data() + s.size();
}

// A text cell: a formula-like one gets a leading ' so that it stays text, then RFC 4180 quoting.
// The report's own numbers are written as they are, never through here.
inline std::string csv_field(const std::string& text) {
  const std::string s = formula_like(text) ? "'" + text : text;
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace gpumeter::report
