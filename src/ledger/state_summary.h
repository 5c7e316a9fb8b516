#pragma once
// A read-only view of the agent's ledger state file (written by UsageTracker::checkpoint()),
// for tools that show the totals without being the agent: the file is opened for reading
// only, and a bad one is reported, never renamed or rewritten (load_ledger_state, the agent's
// reader, sets bad files aside).

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/snapshot.h"

namespace gpumeter {

struct LedgerStateGpu {
  std::optional<unsigned> index;  // the slot the agent last saw it in
  std::string model;
  // Set when this GPU's entry cannot be read (its totals are then empty), or names the amounts
  // that cannot be true, which the agent restarts at 0 (its totals are then the rest).
  std::string problem;
  double covered_seconds = 0;
  double gap_seconds = 0;
  std::vector<LedgerEntry> owners;  // most allocated seconds first
};

struct LedgerStateSummary {
  enum class Status {
    kMissing,   // no file at the path: nothing recorded yet
    kOk,        // read; per-GPU problems are in gpus[].problem
    kUnusable,  // unreadable, not JSON, or not a ledger state file of this version: see problem
  };
  Status status = Status::kMissing;
  std::string problem;
  std::optional<double> saved_unix;
  std::map<std::string, LedgerStateGpu> gpus;  // by uuid
};

std::string_view to_string(LedgerStateSummary::Status status);  // "missing", "ok", "unusable"

// Parses a state document's text (the file's whole contents).
LedgerStateSummary summarize_ledger_state(std::string_view contents);

// Reads the state file at `path` read-only and summarizes it.
LedgerStateSummary read_ledger_state_summary(const std::string& path);

}  // namespace gpumeter
