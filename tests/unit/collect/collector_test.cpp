#include "collect/collector.h"

#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "fake_backend.h"

namespace gpumeter {
namespace {

using namespace std::chrono_literals;
using testing::FakeBackend;

// Collects published snapshots; wait_for polls until a predicate over the latest holds.
class SinkRecorder {
 public:
  SnapshotSink sink() {
    return [this](std::shared_ptr<const Snapshot> s) {
      std::lock_guard lock(mu_);
      latest_ = std::move(s);
      ++count_;
    };
  }
  std::shared_ptr<const Snapshot> wait_for(const std::function<bool(const Snapshot&)>& pred,
                                           std::chrono::milliseconds limit = 5000ms) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(mu_);
        if (latest_ && pred(*latest_)) return latest_;
      }
      std::this_thread::sleep_for(5ms);
    }
    return nullptr;
  }
  int count() {
    std::lock_guard lock(mu_);
    return count_;
  }

 private:
  std::mutex mu_;
  std::shared_ptr<const Snapshot> latest_;
  int count_ = 0;
};

Logger& quiet_logger() {
  static Logger log(LogLevel::kError);
  return log;
}

CollectorOptions fast_options() {
  CollectorOptions o;
  o.interval = 40ms;
  o.build = {"test", "abc"};
  return o;
}

TEST(Collector, PublishesEveryGpuWithIdentityAndReading) {
  FakeBackend backend(3);
  SinkRecorder rec;
  Collector c({&backend}, fast_options(), rec.sink(), quiet_logger());
  c.start();
  auto snap = rec.wait_for([](const Snapshot& s) {
    return s.gpus.size() == 3 && s.gpus[0].up && s.gpus[1].up && s.gpus[2].up;
  });
  ASSERT_NE(snap, nullptr);
  EXPECT_EQ(snap->gpus[2].identity.uuid, "GPU-fake-2");
  ASSERT_NE(snap->gpus[2].reading, nullptr);
  EXPECT_EQ(snap->gpus[2].reading->power_watts, 102.0);
  EXPECT_TRUE(snap->gpus[1].collect_success);
  EXPECT_GT(snap->gpus[1].last_success_unix, 0);
  EXPECT_EQ(snap->build.version, "test");
  ASSERT_EQ(snap->backends.size(), 1u);
  EXPECT_TRUE(snap->backends[0].up);
  EXPECT_EQ(c.stop(), 0u);
}

TEST(Collector, HungGpuGoesDownWhileOthersKeepUpdating) {
  FakeBackend backend(3);
  SinkRecorder rec;
  Collector c({&backend}, fast_options(), rec.sink(), quiet_logger());
  c.start();
  ASSERT_NE(rec.wait_for([](const Snapshot& s) { return s.gpus.size() == 3 && s.gpus[1].up; }), nullptr);
  backend.set_hang(1, true);
  auto down = rec.wait_for([](const Snapshot& s) { return !s.gpus[1].up; });
  ASSERT_NE(down, nullptr);
  EXPECT_NE(down->gpus[1].down_reason.find("overdue"), std::string::npos) << down->gpus[1].down_reason;
  EXPECT_EQ(down->gpus[1].reading, nullptr);
  EXPECT_TRUE(down->gpus[0].up);
  EXPECT_TRUE(down->gpus[2].up);
  // The other GPUs are still being collected, and snapshots still flow.
  int calls0 = backend.calls(0), published = rec.count();
  std::this_thread::sleep_for(200ms);
  EXPECT_GT(backend.calls(0), calls0 + 2);
  EXPECT_GT(rec.count(), published + 2);
  EXPECT_TRUE(backend.hanging(1));
  backend.set_hang(1, false);
  EXPECT_NE(rec.wait_for([](const Snapshot& s) { return s.gpus[1].up; }), nullptr);
  EXPECT_EQ(c.stop(), 0u);
}

TEST(Collector, FailedGpuIsDownWithTheErrorAndRecovers) {
  FakeBackend backend(2);
  SinkRecorder rec;
  Collector c({&backend}, fast_options(), rec.sink(), quiet_logger());
  backend.set_fail(0, true);
  c.start();
  auto snap = rec.wait_for([](const Snapshot& s) { return s.gpus.size() == 2 && s.gpus[1].up; });
  ASSERT_NE(snap, nullptr);
  EXPECT_FALSE(snap->gpus[0].up);
  EXPECT_FALSE(snap->gpus[0].collect_success);
  EXPECT_EQ(snap->gpus[0].down_reason, "GPU is lost");
  backend.set_fail(0, false);
  EXPECT_NE(rec.wait_for([](const Snapshot& s) { return s.gpus[0].up; }), nullptr);
  EXPECT_EQ(c.stop(), 0u);
}

TEST(Collector, CountsXidEventsPerGpuAndCode) {
  FakeBackend backend(2);
  SinkRecorder rec;
  Collector c({&backend}, fast_options(), rec.sink(), quiet_logger());
  c.start();
  backend.push_event({1, DeviceEventKind::kXid, 79});
  backend.push_event({1, DeviceEventKind::kXid, 79});
  backend.push_event({0, DeviceEventKind::kXid, 13});
  auto snap = rec.wait_for([](const Snapshot& s) {
    return s.gpus.size() == 2 && s.gpus[1].xid_counts.count(79) && s.gpus[1].xid_counts.at(79) == 2 &&
           s.gpus[0].xid_counts.count(13);
  });
  ASSERT_NE(snap, nullptr);
  EXPECT_EQ(snap->gpus[0].xid_counts.at(13), 1u);
  EXPECT_EQ(snap->gpus[0].xid_counts.size(), 1u);
  EXPECT_EQ(c.stop(), 0u);
}

TEST(Collector, StopDoesNotWaitForAWorkerStuckInTheDriver) {
  // Kept alive past the test: the detached worker still runs inside collect() until released.
  static FakeBackend backend(2);
  static SinkRecorder rec;
  static Collector c({&backend}, fast_options(), rec.sink(), quiet_logger());
  c.start();
  ASSERT_NE(rec.wait_for([](const Snapshot& s) { return s.gpus.size() == 2 && s.gpus[0].up; }), nullptr);
  backend.set_hang(0, true);
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!backend.hanging(0) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(backend.hanging(0));
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(c.stop(1000ms), 1u);  // grace > the 500 ms event wait
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  backend.set_hang(0, false);
  std::this_thread::sleep_for(100ms);  // let the released worker leave
}

}  // namespace
}  // namespace gpumeter
