#pragma once
// What `gpumeter snapshot` prints, in its two formats: JSON in base units with every key present,
// and aligned tables for a terminal. snapshot.cpp collects; this renders.

#include <chrono>
#include <string>

#include "ledger/state_summary.h"
#include "model/snapshot.h"

namespace gpumeter::cli {

// Everything that is printed, in one place for both formats.
struct SnapshotReport {
  Snapshot snap;
  std::chrono::milliseconds interval{0};
  std::string kubelet_socket;
  std::string state_path;  // "" when the ledger file is off
  LedgerStateSummary ledger;
};

// Indented JSON, ending in a newline; invalid UTF-8 in names is replaced.
std::string snapshot_json(const SnapshotReport& r);
// The tables, with ANSI colour when `color`.
std::string snapshot_table(const SnapshotReport& r, bool color);

}  // namespace gpumeter::cli
