#pragma once
// When a GPU was faulty, as its collections and events show it (docs/ledger.md, "Faulty GPUs"):
//   - from the first collection that fails (the GPU lost, fallen off the bus, hung, or
//     answering errors) until one succeeds again;
//   - from an error that kills work (DeviceEvent::kills_work) until none of the processes that
//     were on the GPU when it struck is listed any more (a GPU with none: until its next
//     reading).
// The ledger charges the periods inside these spans to their owners with the `fault` label.

#include <cstdint>
#include <optional>
#include <vector>

#include "ledger/ledger.h"

namespace gpumeter {

class FaultSpans {
 public:
  // A collection failed at `now_us`: a span opens unless a failure's is open.
  void failed(std::int64_t now_us);
  // An error that kills work struck at `now_us`, with `pids` on the GPU. Returns whether a span
  // opened (false: one was open, and it now waits for these pids too).
  bool struck(std::int64_t now_us, const std::vector<unsigned>& pids);
  // A reading at `now_us` succeeded and listed `pids`: the failure's span ends, and the strike's
  // when none of its pids is listed. Returns which ended.
  struct Ended {
    bool failure = false;
    bool strike = false;
  };
  Ended answered(std::int64_t now_us, const std::vector<unsigned>& pids);
  // The spans a reading at `now_us` may integrate over: every one still open, and those that
  // ended less than kKeepUs before it (no driver buffer reaches back further).
  const std::vector<FaultSpan>& spans(std::int64_t now_us);
  bool faulty() const { return failure_ || strike_; }
  bool failing() const { return failure_.has_value(); }

  static constexpr std::int64_t kKeepUs = 600'000'000;

 private:
  std::vector<FaultSpan> spans_;
  std::optional<std::size_t> failure_;  // the open failure span
  struct Strike {
    std::size_t span;
    std::vector<unsigned> pids;
  };
  std::optional<Strike> strike_;  // the open strike span
};

}  // namespace gpumeter
