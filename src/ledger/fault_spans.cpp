#include "ledger/fault_spans.h"

#include <algorithm>
#include <limits>

namespace gpumeter {

namespace {
constexpr std::int64_t kOpen = std::numeric_limits<std::int64_t>::max();
}

void FaultSpans::failed(std::int64_t now_us) {
  if (failure_) return;
  failure_ = spans_.size();
  spans_.push_back({now_us, kOpen});
}

bool FaultSpans::struck(std::int64_t now_us, const std::vector<unsigned>& pids) {
  if (strike_) {
    strike_->pids.insert(strike_->pids.end(), pids.begin(), pids.end());
    return false;
  }
  strike_ = Strike{spans_.size(), pids};
  spans_.push_back({now_us, kOpen});
  return true;
}

FaultSpans::Ended FaultSpans::answered(std::int64_t now_us, const std::vector<unsigned>& pids) {
  Ended ended;
  if (failure_) {
    spans_[*failure_].to_us = now_us;
    failure_.reset();
    ended.failure = true;
  }
  if (strike_ && std::none_of(strike_->pids.begin(), strike_->pids.end(),
                              [&](unsigned pid) { return std::find(pids.begin(), pids.end(), pid) != pids.end(); })) {
    spans_[strike_->span].to_us = now_us;
    strike_.reset();
    ended.strike = true;
  }
  return ended;
}

const std::vector<FaultSpan>& FaultSpans::spans(std::int64_t now_us) {
  if (failure_ || strike_) return spans_;  // the open ones' indices stay valid
  std::erase_if(spans_, [&](const FaultSpan& s) { return s.to_us < now_us - kKeepUs; });
  return spans_;
}

}  // namespace gpumeter
