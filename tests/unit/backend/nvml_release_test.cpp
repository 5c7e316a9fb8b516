// An operator's release of the GPUs (Backend::release): NVML is shut down at once, every
// collection fails with UNINITIALIZED while it lasts, and the library is opened again once the
// period has passed, or at the next collection after a release of 0.

#include <gtest/gtest.h>

#include <chrono>

#include "backend/nvml/nvml_backend.h"
#include "fake_clock.h"
#include "fake_nvml.h"

namespace gpumeter {
namespace {

using namespace std::chrono_literals;
using fake::script;

class ReleaseTest : public ::testing::Test {
 protected:
  void SetUp() override { fake::reset(); }
  std::unique_ptr<NvmlBackend> make() {
    NvmlBackendOptions o;
    o.clock = &clock_;
    o.reinit_lock_timeout = 50ms;
    auto b = NvmlBackend::create(std::make_unique<fake::FakeSymbols>(std::set<std::string>{}), o, log_);
    EXPECT_TRUE(b->status().up) << b->status().detail;
    return b;
  }
  testing::FakeClock clock_;
  Logger log_{LogLevel::kError};
};

TEST_F(ReleaseTest, NvmlIsClosedForThePeriodThenOpenedAgain) {
  auto b = make();
  ASSERT_TRUE(b->collect(0).ok());
  const int handles = script().calls["nvmlDeviceGetHandleByIndex_v2"];
  const std::int64_t before_us = clock_.wall_us();

  auto released = b->release(30s);
  ASSERT_TRUE(released.ok()) << released.error().message;
  EXPECT_TRUE(*released);
  EXPECT_EQ(script().shutdowns, 1);  // closed at once, not at the next collection
  BackendStatus st = b->status();
  EXPECT_FALSE(st.up);
  EXPECT_EQ(st.released_until_us, before_us + 30'000'000);
  EXPECT_NE(st.detail.find("released"), std::string::npos) << st.detail;

  clock_.advance(29s);
  for (unsigned gpu : {0u, 1u}) {
    auto failed = b->collect(gpu);
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.error().code, NVML_ERROR_UNINITIALIZED);
    EXPECT_FALSE(b->identify(gpu).ok());
  }
  auto waited = b->wait_event(0ms);
  ASSERT_FALSE(waited.ok());
  EXPECT_EQ(waited.error().code, NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(script().inits, 1);  // no driver call while released

  clock_.advance(1s);
  auto r = b->collect(0);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(script().inits, 2);
  st = b->status();
  EXPECT_TRUE(st.up);
  EXPECT_EQ(st.released_until_us, 0);
  EXPECT_EQ(script().calls["nvmlDeviceGetHandleByIndex_v2"], handles + 1);  // handles acquired anew
  EXPECT_TRUE(b->collect(1).ok());
}

TEST_F(ReleaseTest, AReleaseOfZeroTakesTheGpusBackAtTheNextCollection) {
  auto b = make();
  ASSERT_TRUE(b->collect(0).ok());
  ASSERT_TRUE(b->release(10min).ok());
  EXPECT_FALSE(b->collect(0).ok());
  auto back = b->release(0ms);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(script().inits, 1);
  EXPECT_TRUE(b->collect(0).ok());
  EXPECT_EQ(script().inits, 2);
  EXPECT_TRUE(b->status().up);
  // A release of 0 while holding changes nothing.
  ASSERT_TRUE(b->release(0ms).ok());
  EXPECT_TRUE(b->collect(1).ok());
  EXPECT_EQ(script().shutdowns, 1);
}

TEST_F(ReleaseTest, ADriverUnloadedMeanwhileIsRetriedWithBackoff) {
  auto b = make();
  ASSERT_TRUE(b->release(5s).ok());
  script().init_rc = NVML_ERROR_DRIVER_NOT_LOADED;
  clock_.advance(5s);
  EXPECT_FALSE(b->collect(0).ok());
  EXPECT_EQ(script().inits, 2);
  script().init_rc.reset();
  clock_.advance(1100ms);
  EXPECT_TRUE(b->collect(0).ok());
  EXPECT_EQ(script().inits, 3);
  EXPECT_TRUE(b->status().up);
  EXPECT_EQ(b->status().released_until_us, 0);
}

}  // namespace
}  // namespace gpumeter
