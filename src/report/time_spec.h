#pragma once
// The times and durations `gpumeter report` accepts on its command line.

#include <string>
#include <string_view>

#include "util/result.h"

namespace gpumeter::report {

// "now"; a duration before now ("-30d", "now-12h"); unix seconds ("1795257720"); a date
// ("2026-11-01", midnight UTC); RFC 3339 ("2026-11-01T08:00:00Z", "2026-11-01T10:00:00+02:00").
// Returns unix seconds.
Result<double> parse_time(std::string_view text, double now);

// "2026-11-01T08:00:00Z" (with milliseconds when not whole).
std::string format_utc(double unix_seconds);

}  // namespace gpumeter::report
