#pragma once
// The ledger's state on disk: one JSON document, replaced atomically (write to a temporary file
// in the same directory, fsync it, rename it over the old one, fsync the directory), so a
// crash at any moment leaves either the previous state or the new one, never a torn file.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "util/atomic_file.h"
#include "util/result.h"

namespace gpumeter {

inline constexpr const char* kLedgerStateFormat = "gpumeter-ledger-state";
inline constexpr int kLedgerStateVersion = 1;

// Parses a state document and checks its envelope (JSON, format, version, a "gpus" object).
// Returns the reason it is unusable, or an empty string with `doc` filled.
std::string parse_ledger_state(std::string_view contents, nlohmann::json& doc);

struct LoadedLedgerState {
  nlohmann::json document;     // null when there was nothing usable
  std::string problem;         // why the file was not used; empty when it was, or was absent
  std::string set_aside_path;  // where an unusable file was moved
};

// Reads the state file. A missing file is not a problem. A corrupt or foreign file (not JSON,
// another format or version) is renamed to `<path>.corrupt-<unix time>` and reported, never
// fatal: the agent starts with an empty ledger.
LoadedLedgerState load_ledger_state(const std::string& path);

}  // namespace gpumeter
