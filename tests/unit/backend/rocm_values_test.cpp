// What the AMD backend makes of ROCm SMI's answers (backend/rocm/rocm_values.h).
#include <gtest/gtest.h>

#include "backend/rocm/rocm_values.h"

namespace gpumeter::rocm {
namespace {

TEST(RocmPerformanceLevel, OneSeriesPerLevelWithTheCurrentOneSet) {
  const std::vector<LabeledValue> levels = performance_levels(3);  // RSMI_DEV_PERF_LEVEL_MANUAL
  ASSERT_EQ(levels.size(), 9u);
  EXPECT_EQ(levels[0], (LabeledValue{"auto", 0}));
  EXPECT_EQ(levels[3], (LabeledValue{"manual", 1}));
  EXPECT_EQ(levels[8], (LabeledValue{"determinism", 0}));
  double sum = 0;
  for (const auto& l : levels) sum += l.value;
  EXPECT_EQ(sum, 1);
  EXPECT_EQ(performance_levels(0)[0], (LabeledValue{"auto", 1}));
}

TEST(RocmPerformanceLevel, UnknownLevelIsLeftOut) {
  EXPECT_TRUE(performance_levels(0x100).empty());  // RSMI_DEV_PERF_LEVEL_UNKNOWN
  EXPECT_TRUE(performance_levels(9).empty());
  EXPECT_TRUE(performance_levels(-1).empty());
}

TEST(RocmPcieRates, FirstCounterIsReceivedSecondSentTimesPayload) {
  // pcie_bw "1000 250 256": 1000 received messages, 250 sent, 256-byte payloads.
  const auto r = pcie_rates(1000, 250, 256);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->receive_bytes_per_second, 256000);
  EXPECT_EQ(r->transmit_bytes_per_second, 64000);
}

TEST(RocmPcieRates, NoPayloadSizeSaysNothing) {
  EXPECT_FALSE(pcie_rates(5, 5, 0));
  const auto idle = pcie_rates(0, 0, 128);
  ASSERT_TRUE(idle);
  EXPECT_EQ(*idle, (PcieRates{0, 0}));
}

TEST(RocmThrottle, AnyActiveThrottlerBitIsThrottled) {
  EXPECT_EQ(throttle_events(0), (std::vector<LabeledValue>{{"throttled", 0}}));
  EXPECT_EQ(throttle_events(0x1), (std::vector<LabeledValue>{{"throttled", 1}}));
  EXPECT_EQ(throttle_events(0x80000000u), (std::vector<LabeledValue>{{"throttled", 1}}));
}

}  // namespace
}  // namespace gpumeter::rocm
