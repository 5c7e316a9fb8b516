#include "ledger/state_summary.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ledger/ledger.h"
#include "ledger/mig_ledgers.h"
#include "ledger/state_file.h"

namespace gpumeter {

namespace {

LedgerStateSummary unusable(std::string problem) {
  LedgerStateSummary s;
  s.status = LedgerStateSummary::Status::kUnusable;
  s.problem = std::move(problem);
  return s;
}

// One GPU's entry as UsageTracker::checkpoint() writes it: {"index", "model", "ledger", "mig"}. The
// ledger is parsed by the agent's own reader, so what it would refuse is refused here too.
LedgerStateGpu summarize_gpu(const nlohmann::json& entry) {
  LedgerStateGpu g;
  if (!entry.is_object()) {
    g.problem = "not an object";
    return g;
  }
  if (auto it = entry.find("index"); it != entry.end() && it->is_number_unsigned()) g.index = it->get<unsigned>();
  if (auto it = entry.find("model"); it != entry.end() && it->is_string()) g.model = it->get<std::string>();
  auto ledger = entry.find("ledger");
  if (ledger == entry.end()) {
    g.problem = "no \"ledger\"";
    return g;
  }
  std::vector<std::string> dropped;
  auto parsed = GpuLedger::from_json(*ledger, {}, &dropped);
  if (!parsed) {
    g.problem = parsed.error().message;
    return g;
  }
  g.covered_seconds = parsed->covered_seconds();
  g.gap_seconds = parsed->gap_seconds();
  for (const auto& [owner, t] : parsed->owners()) {
    g.owners.push_back(ledger_entry(owner, t));
  }
  // A GPU in MIG mode: its MIG devices' ledgers, each owner with the device's labels.
  if (auto mig = entry.find("mig"); mig != entry.end()) {
    auto units = MigLedgers::from_json(*mig, {}, &dropped);
    if (!units) {
      g.problem = units.error().message;
      return g;
    }
    GpuLedgerSnapshot more;
    units->append(more);
    g.covered_seconds += more.covered_seconds;
    g.gap_seconds += more.gap_seconds;
    g.owners.insert(g.owners.end(), more.owners.begin(), more.owners.end());
  }
  // What the agent will resume from, and what it will restart at 0.
  for (const auto& d : dropped) g.problem += (g.problem.empty() ? "" : "; ") + d;
  std::stable_sort(g.owners.begin(), g.owners.end(), [](const LedgerEntry& a, const LedgerEntry& b) {
    return a.allocated_seconds > b.allocated_seconds;
  });
  return g;
}

}  // namespace

std::string_view to_string(LedgerStateSummary::Status status) {
  switch (status) {
    case LedgerStateSummary::Status::kMissing:
      return "missing";
    case LedgerStateSummary::Status::kOk:
      return "ok";
    case LedgerStateSummary::Status::kUnusable:
      return "unusable";
  }
  return "unusable";
}

LedgerStateSummary summarize_ledger_state(std::string_view contents) {
  nlohmann::json doc;
  if (std::string problem = parse_ledger_state(contents, doc); !problem.empty()) return unusable(problem);
  auto gpus = doc.find("gpus");

  LedgerStateSummary s;
  s.status = LedgerStateSummary::Status::kOk;
  if (auto it = doc.find("saved_unix"); it != doc.end() && it->is_number()) s.saved_unix = it->get<double>();
  for (const auto& [uuid, entry] : gpus->items()) s.gpus[uuid] = summarize_gpu(entry);
  return s;
}

LedgerStateSummary read_ledger_state_summary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return {};
    return unusable("cannot read " + path + ": " + std::strerror(errno));
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return unusable(path + " is not a regular file");
  std::stringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return unusable("cannot read " + path + ": " + std::strerror(errno));
  return summarize_ledger_state(contents.str());
}

}  // namespace gpumeter
