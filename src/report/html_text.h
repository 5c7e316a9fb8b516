#pragma once
// Text pieces of the HTML report that know nothing about the report model: escaping, numbers and
// dates. Every function is independent of the C and C++ locales, so a report reads the same on
// every machine, and none ever prints "nan" or "inf".

#include <string>
#include <string_view>

namespace gpumeter::report {

// Escapes &, <, >, " and ' so the text is safe both as element content and inside a quoted
// attribute, in HTML and in inline SVG alike.
void append_escaped(std::string& out, std::string_view s);
std::string escaped(std::string_view s);

// Fixed point with `decimals` digits and a comma every three integer digits: "1,234,567.89".
// Values that are not finite print as "n/a"; a value that rounds to zero prints without a sign.
std::string format_number(double value, int decimals);

// `ratio` x 100 with `decimals` digits and a "%" sign: "42.5 %".
std::string format_percent(double ratio, int decimals);

// strftime in UTC with a locale-free format (digits and punctuation only): "%Y-%m-%d %H:%M".
std::string format_utc(double unix_seconds, const char* strftime_format);

// A duration in the largest whole units, at most two of them: "30 d", "1 d 12 h", "15 min", "45 s".
std::string format_duration(double seconds);

}  // namespace gpumeter::report
