#pragma once
// dcgm-exporter's counters file (its "-f" / "--collectors" flag): one "DCGM_FIELD, type, help"
// line per field to export, '#' starting a comment. gpumeter reads the same file so that an
// operator's choice of fields carries over unchanged. A malformed file is an error naming the
// line; a well-formed field gpumeter cannot serve is only listed (see dcgm_fields.h).

#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace gpumeter {

struct DcgmCounter {
  std::string field;  // e.g. DCGM_FI_DEV_GPU_UTIL: the metric name, or the label name for "label"
  std::string type;   // "gauge", "counter" or "label", as written (lower case)
  std::string help;
  unsigned line = 0;  // 0 for the built-in list
};

struct DcgmCounters {
  std::string source;                 // the file, or "built-in default" for dcgm-exporter's default list
  std::vector<DcgmCounter> counters;  // in file order
};

// Errors read "source:line: what is wrong", quoting at most 80 bytes of the line. A line with a
// control character (tab aside) and a file that lists no field are errors; a UTF-8 byte-order
// mark at the start is skipped.
Result<DcgmCounters> parse_dcgm_counters(std::string_view text, std::string source);
Result<DcgmCounters> load_dcgm_counters(const std::string& path);

// The fields dcgm-exporter's own etc/default-counters.csv enables (its uncommented lines), used
// when no counters file is given.
DcgmCounters default_dcgm_counters();

}  // namespace gpumeter
