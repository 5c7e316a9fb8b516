// PCIe throughput before R555 on the scripted NVML (fake_nvml.h): where fields 197/198 answer
// NOT_SUPPORTED and GPM does not measure PCIe, the backend serves the rates
// nvmlDeviceGetPcieThroughput samples, read on the throughput reader's thread (each call blocks
// 20 ms on a real driver), never on the collecting thread.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "backend/nvml/nvml_backend.h"
#include "fake_clock.h"
#include "fake_nvml.h"

namespace gpumeter {
namespace {

using namespace std::chrono_literals;
using fake::script;

constexpr const char* kThroughput = "nvmlDeviceGetPcieThroughput";

class NvmlPcieTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::reset();
    script().has_pcie_throughput = true;
    script().pcie_kb_per_second[0][NVML_PCIE_UTIL_TX_BYTES] = 1000;
    script().pcie_kb_per_second[0][NVML_PCIE_UTIL_RX_BYTES] = 3000;
    script().pcie_kb_per_second[1][NVML_PCIE_UTIL_TX_BYTES] = 7;
    script().pcie_kb_per_second[1][NVML_PCIE_UTIL_RX_BYTES] = 9;
  }
  std::unique_ptr<NvmlBackend> make() { return fake::backend_on(clock_, log_); }
  // The driver counts PCIe bytes (fields 197/198, R555+), on every GPU.
  void count_bytes() {
    script().field_rc[{NVML_FI_DEV_PCIE_COUNT_TX_BYTES, 0}] = NVML_SUCCESS;
    script().field_rc[{NVML_FI_DEV_PCIE_COUNT_RX_BYTES, 0}] = NVML_SUCCESS;
  }
  // The reader's thread has read what was due and waits for its next round.
  void settle() { ASSERT_TRUE(clock_.settle(1)); }

  testing::FakeClock clock_;
  Logger log_{LogLevel::kError};
};

TEST_F(NvmlPcieTest, ServesTheSampledRatesWhereTheDriverCountsNoPcieBytes) {
  auto b = make();
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->pcie.transmit_bytes.has_value());             // fields 197/198: NOT_SUPPORTED
  EXPECT_FALSE(r->pcie.transmit_bytes_per_second.has_value());  // nothing read yet
  settle();
  EXPECT_EQ(fake::calls_of(kThroughput), 2);  // GPU 0, each way; GPU 1 was never collected
  r = b->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->pcie.transmit_bytes_per_second, 1000.0 * 1024);
  EXPECT_EQ(r->pcie.receive_bytes_per_second, 3000.0 * 1024);
  EXPECT_FALSE(r->pcie.transmit_bytes.has_value());  // a rate is no byte counter
  // The next round, a second later, reads both GPUs once collected.
  ASSERT_TRUE(b->collect(1).ok());
  clock_.advance(1s);
  settle();
  EXPECT_EQ(fake::calls_of(kThroughput), 6);
  EXPECT_EQ(b->collect(1)->pcie.receive_bytes_per_second, 9.0 * 1024);
}

TEST_F(NvmlPcieTest, TheDriversByteCountersLeaveTheCallUnmade) {
  count_bytes();
  auto b = make();
  for (int i = 0; i < 3; ++i) {
    auto r = b->collect(0);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->pcie.transmit_bytes, 0.0);
    EXPECT_FALSE(r->pcie.transmit_bytes_per_second.has_value());
    clock_.advance(1s);
  }
  EXPECT_EQ(fake::calls_of(kThroughput), 0);
}

TEST_F(NvmlPcieTest, GpmMeasuresPcieWhereTheProfilingCollectorSamplesIt) {
  script().gpm_supported[0] = true;
  auto b = make();
  ASSERT_TRUE(b->collect(0, CollectScope::kFull, CollectorSet::all()).ok());
  EXPECT_EQ(fake::calls_of(kThroughput), 0);
  // The profiling collector off (or not due): the driver's sampled rates stand in.
  CollectorSet no_profiling = CollectorSet::all();
  no_profiling.set(CollectorId::kProfiling, false);
  ASSERT_TRUE(b->collect(0, CollectScope::kFull, no_profiling).ok());
  settle();
  EXPECT_EQ(fake::calls_of(kThroughput), 2);
  EXPECT_EQ(b->collect(0, CollectScope::kFull, no_profiling)->pcie.transmit_bytes_per_second, 1000.0 * 1024);
  // Profiling again: the GPU is no longer read, and its sampled rates are gone.
  auto r = b->collect(0, CollectScope::kFull, CollectorSet::all());
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->pcie.transmit_bytes_per_second.has_value());
  clock_.advance(1s);
  settle();
  EXPECT_EQ(fake::calls_of(kThroughput), 2);
}

TEST_F(NvmlPcieTest, AGpuThatCannotSampleIsAskedOnce) {
  script().rc[kThroughput] = NVML_ERROR_NOT_SUPPORTED;  // a vGPU guest
  auto b = make();
  ASSERT_TRUE(b->collect(0).ok());
  settle();
  clock_.advance(1s);
  settle();
  EXPECT_EQ(fake::calls_of(kThroughput), 1);
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->pcie.transmit_bytes_per_second.has_value());
}

// Lets the blocked call return, however the test ends: the backend joins the reader's thread.
struct ReleaseBlockedCall {
  ~ReleaseBlockedCall() {
    {
      std::lock_guard lock(script().block_mu);
      script().release = true;
    }
    script().block_cv.notify_all();
  }
};

TEST_F(NvmlPcieTest, CollectionsGoOnWhileTheThroughputCallBlocks) {
  script().block_call = kThroughput;  // the call measures until the test releases it
  {
    auto b = make();
    ReleaseBlockedCall release;
    ASSERT_TRUE(b->collect(0).ok());
    {
      std::unique_lock lock(script().block_mu);
      ASSERT_TRUE(script().block_cv.wait_for(lock, 10s, [] { return script().blocked; }));
    }
    // The reader's thread is inside the call: every GPU's collections still complete.
    auto collections = std::async(std::launch::async, [&] {
      for (int i = 0; i < 3; ++i) {
        if (!b->collect(0).ok() || !b->collect(1).ok()) return false;
      }
      return true;
    });
    ASSERT_EQ(collections.wait_for(10s), std::future_status::ready) << "a collection waited for the throughput call";
    EXPECT_TRUE(collections.get());
  }  // released, then destroyed: the reader's thread is joined
}

}  // namespace
}  // namespace gpumeter
