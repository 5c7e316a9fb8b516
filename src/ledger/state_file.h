#pragma once
// The ledger's state on disk: one JSON document, replaced atomically (write to a temporary file
// in the same directory, fsync it, rename it over the old one, fsync the directory), so a
// crash at any moment leaves either the previous state or the new one, never a torn file.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/atomic_file.h"
#include "util/result.h"

namespace gpumeter {

inline constexpr const char* kLedgerStateFormat = "gpumeter-ledger-state";
inline constexpr int kLedgerStateVersion = 1;

// Parses a state document and checks its envelope (JSON, format, version, a "gpus" object).
// Returns the reason it is unusable, or an empty string with `doc` filled.
std::string parse_ledger_state(std::string_view contents, nlohmann::json& doc);

// The largest state file read: far above any real ledger (a few hundred bytes per owner), and
// a bound on what a wrong path (a device, a log file) can make the agent read.
inline constexpr std::uintmax_t kMaxLedgerStateBytes = 256ull << 20;

struct LoadedLedgerState {
  nlohmann::json document;     // null when there was nothing usable
  std::string problem;         // why the file was not used; empty when it was, or was absent
  std::string set_aside_path;  // where an unusable file was moved
  // Amounts that could not be true (a NaN saved as null, an infinity, a negative number), each
  // "GPU <uuid>: ..." with where it was: they restart at 0, and the rest of the file is used.
  std::vector<std::string> dropped;
  // The file is there but could not be read (permission, a directory or device, too large, an
  // I/O error), or it could not be set aside: the agent must not start, since its first
  // checkpoint would replace billing data it never read.
  bool fatal = false;
};

// Reads the state file. A missing file is not a problem. A file that cannot be read is fatal
// (see LoadedLedgerState::fatal). An amount that cannot be true is dropped and listed (see
// LoadedLedgerState::dropped). A file that reads but cannot be used (not JSON, another format or
// version, a GPU ledger missing a key, an owner or process listed twice) is renamed to `<path>.corrupt-<unix time>` and
// reported, and the agent starts with an empty ledger: the data is kept for inspection, never overwritten.
LoadedLedgerState load_ledger_state(const std::string& path);

}  // namespace gpumeter
