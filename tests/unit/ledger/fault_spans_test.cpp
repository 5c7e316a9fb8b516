#include "ledger/fault_spans.h"

#include <gtest/gtest.h>

#include <limits>

namespace gpumeter {
namespace {

constexpr std::int64_t kOpen = std::numeric_limits<std::int64_t>::max();

TEST(FaultSpans, AFailureLastsUntilTheGpuAnswers) {
  FaultSpans f;
  f.failed(10);
  f.failed(20);  // still the same failure
  EXPECT_TRUE(f.faulty());
  EXPECT_EQ(f.spans(25), (std::vector<FaultSpan>{{10, kOpen}}));
  EXPECT_TRUE(f.answered(30, {}).failure);
  EXPECT_FALSE(f.faulty());
  EXPECT_EQ(f.spans(30), (std::vector<FaultSpan>{{10, 30}}));
  EXPECT_FALSE(f.answered(40, {}).failure);
}

TEST(FaultSpans, AStrikeLastsUntilItsProcessesLeave) {
  FaultSpans f;
  EXPECT_TRUE(f.struck(10, {7, 8}));
  EXPECT_FALSE(f.answered(20, {8, 9}).strike);  // 8 is still there
  EXPECT_FALSE(f.struck(25, {9}));              // a second strike joins the open one
  EXPECT_FALSE(f.answered(30, {9}).strike);
  EXPECT_TRUE(f.answered(40, {1}).strike);
  EXPECT_EQ(f.spans(40), (std::vector<FaultSpan>{{10, 40}}));
}

TEST(FaultSpans, AStrikeOnAnEmptyGpuEndsAtItsNextReading) {
  FaultSpans f;
  f.struck(10, {});
  EXPECT_TRUE(f.answered(15, {3}).strike);
  EXPECT_EQ(f.spans(15), (std::vector<FaultSpan>{{10, 15}}));
}

TEST(FaultSpans, AFailureAndAStrikeOverlapAndEachEndsByItsOwnRule) {
  FaultSpans f;
  f.failed(10);
  f.struck(12, {5});
  const auto ended = f.answered(20, {5});
  EXPECT_TRUE(ended.failure);
  EXPECT_FALSE(ended.strike);
  EXPECT_TRUE(f.faulty());
  EXPECT_EQ(f.spans(20), (std::vector<FaultSpan>{{10, 20}, {12, kOpen}}));
}

TEST(FaultSpans, EndedSpansAreForgottenOnceNoBufferReachesThem) {
  FaultSpans f;
  f.failed(10);
  f.answered(20, {});
  EXPECT_EQ(f.spans(20 + FaultSpans::kKeepUs).size(), 1u);
  EXPECT_TRUE(f.spans(21 + FaultSpans::kKeepUs).empty());
}

}  // namespace
}  // namespace gpumeter
