// The ledger's state file, which a crash, a full disk or a person can corrupt: the envelope
// check, the read-only summary (gpumeter ledger) and the per-GPU ledger reader.
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_check.h"
#include "ledger/ledger.h"
#include "ledger/state_file.h"
#include "ledger/state_summary.h"

using namespace gpumeter;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = fuzz::as_text(data, size);

  const LedgerStateSummary summary = summarize_ledger_state(text);
  FUZZ_CHECK(summary.status != LedgerStateSummary::Status::kMissing);
  FUZZ_CHECK((summary.status == LedgerStateSummary::Status::kUnusable) == !summary.problem.empty());

  nlohmann::json doc;
  const std::string problem = parse_ledger_state(text, doc);
  FUZZ_CHECK(problem.empty() == (summary.status == LedgerStateSummary::Status::kOk));
  if (!problem.empty()) return 0;
  for (const auto& [uuid, entry] : doc["gpus"].items()) {
    if (!entry.is_object() || !entry.contains("ledger")) continue;
    auto ledger = GpuLedger::from_json(entry["ledger"], {});
    if (!ledger) continue;
    // What the agent reads back, it writes the same way.
    auto round_trip = GpuLedger::from_json(ledger->to_json(), {});
    FUZZ_CHECK(round_trip.ok());
    FUZZ_CHECK(round_trip->owners() == ledger->owners());
    FUZZ_CHECK(round_trip->cursor_us() == ledger->cursor_us());
  }
  return 0;
}
