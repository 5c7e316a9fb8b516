#include "collect/collection_scheduler.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <thread>

#include "fake_backend.h"
#include "fake_clock.h"

namespace gpumeter {
namespace {

using namespace std::chrono_literals;
using testing::FakeBackend;
using testing::FakeClock;

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

CollectionSchedulerOptions fast_options() {
  CollectionSchedulerOptions o;
  o.interval = 40ms;
  o.build = {"test", "abc"};
  return o;
}

TEST(CollectionScheduler, PublishesEveryGpuWithIdentityAndReading) {
  FakeBackend backend(3);
  SinkRecorder rec;
  CollectionScheduler c({&backend}, fast_options(), rec.sink(), quiet_logger());
  c.start();
  auto snap = rec.wait_for(
      [](const Snapshot& s) { return s.gpus.size() == 3 && s.gpus[0].up && s.gpus[1].up && s.gpus[2].up; });
  ASSERT_NE(snap, nullptr);
  EXPECT_EQ(snap->gpus[2].identity.uuid, "GPU-fake-2");
  ASSERT_NE(snap->gpus[2].reading, nullptr);
  EXPECT_EQ(snap->gpus[2].reading->device.power_watts, 102.0);
  EXPECT_TRUE(snap->gpus[1].collect_success);
  EXPECT_GT(snap->gpus[1].last_success_unix, 0);
  EXPECT_EQ(snap->build.version, "test");
  ASSERT_EQ(snap->backends.size(), 1u);
  EXPECT_TRUE(snap->backends[0].up);
  EXPECT_EQ(c.stop(), 0u);
}

TEST(CollectionScheduler, NumbersTheGpusOfSeveralBackendsOneAfterTheOther) {
  // A node with NVIDIA and AMD GPUs: both backends number their own GPUs from 0, the agent's
  // index must tell every GPU apart.
  FakeBackend nvidia(2), amd(2);
  SinkRecorder rec;
  CollectionScheduler c({&nvidia, &amd}, fast_options(), rec.sink(), quiet_logger());
  c.start();
  auto snap = rec.wait_for([](const Snapshot& s) {
    return s.gpus.size() == 4 && s.gpus[0].up && s.gpus[1].up && s.gpus[2].up && s.gpus[3].up;
  });
  ASSERT_NE(snap, nullptr);
  for (unsigned i = 0; i < 4; ++i) EXPECT_EQ(snap->gpus[i].identity.index, i);
  EXPECT_EQ(snap->gpus[3].identity.uuid, "GPU-fake-1");  // the second backend's GPU 1
  EXPECT_EQ(c.stop(), 0u);
}

TEST(CollectionScheduler, HungGpuGoesDownWhileOthersKeepUpdating) {
  FakeBackend backend(3);
  SinkRecorder rec;
  CollectionScheduler c({&backend}, fast_options(), rec.sink(), quiet_logger());
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

TEST(CollectionScheduler, FailedGpuIsDownWithTheErrorAndRecovers) {
  FakeBackend backend(2);
  SinkRecorder rec;
  CollectionScheduler c({&backend}, fast_options(), rec.sink(), quiet_logger());
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

TEST(CollectionScheduler, CountsXidEventsPerGpuAndCode) {
  FakeBackend backend(2);
  SinkRecorder rec;
  CollectionScheduler c({&backend}, fast_options(), rec.sink(), quiet_logger());
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

// Counts what the ledger would see: readings by kind (a usage-only reading says 0.25) and
// failures.
class RecordingObserver : public ReadingObserver {
 public:
  void on_reading(size_t, const DeviceIdentity& id, const DeviceReading& r) override {
    std::lock_guard lock(mu_);
    ++(r.device.utilization_ratio == 0.25 ? usage : full);
    last_identity = id;
  }
  void on_failure(size_t, const DeviceIdentity&) override {
    std::lock_guard lock(mu_);
    ++failures;
  }
  void contribute(Snapshot&) const override {}
  std::mutex mu_;
  int full = 0, usage = 0, failures = 0;
  DeviceIdentity last_identity;
};

constexpr CollectScope F = CollectScope::kFull;
constexpr CollectScope U = CollectScope::kUsage;

// Runs one GPU on a fake clock for `seconds`, one second at a time, each step once the worker
// and the publisher wait for a time still ahead; returns the scopes collected, in order.
std::vector<CollectScope> schedule(std::chrono::milliseconds interval, int seconds,
                                   RecordingObserver* observer = nullptr) {
  FakeBackend backend(1);
  FakeClock clock;
  SinkRecorder rec;
  CollectionSchedulerOptions o = fast_options();
  o.interval = interval;
  o.clock = &clock;
  o.observer = observer;
  CollectionScheduler c({&backend}, o, rec.sink(), quiet_logger());
  c.start();
  for (int s = 0; s < seconds; ++s) {
    EXPECT_TRUE(clock.settle(2)) << "at " << s << " s";
    clock.advance(1s);
  }
  EXPECT_TRUE(clock.settle(2));
  EXPECT_EQ(c.stop(), 0u);
  return backend.scopes(0);
}

TEST(CollectionScheduler, DrainsTheSampleBuffersEveryFiveSecondsBetweenFullCollections) {
  RecordingObserver observer;
  auto got = schedule(30s, 60, &observer);
  std::vector<CollectScope> want = {F, U, U, U, U, U, F, U, U, U, U, U, F};
  EXPECT_EQ(got, want);
  // Usage readings reach the ledger too.
  EXPECT_EQ(observer.full, 3);
  EXPECT_EQ(observer.usage, 10);
}

TEST(CollectionScheduler, AnIntervalNotAMultipleOfTheDrainKeepsBothSchedules) {
  std::vector<CollectScope> want = {F, U, U, F, U, U, F};  // 0 5 10 | 12 17 22 | 24
  EXPECT_EQ(schedule(12s, 24), want);
}

TEST(CollectionScheduler, ShortIntervalsCollectOnlyInFull) {
  EXPECT_EQ(schedule(1s, 10), std::vector<CollectScope>(11, F));
  EXPECT_EQ(schedule(5s, 20), std::vector<CollectScope>(5, F));
}

TEST(CollectionScheduler, UsageReadingsDoNotReplaceTheSnapshotReadingAndTheirFailuresLeaveTheGpuUp) {
  FakeBackend backend(1);
  FakeClock clock;
  SinkRecorder rec;
  RecordingObserver observer;
  CollectionSchedulerOptions o = fast_options();
  o.interval = 30s;
  o.clock = &clock;
  o.observer = &observer;
  CollectionScheduler c({&backend}, o, rec.sink(), quiet_logger());
  c.start();
  for (int s = 0; s < 7; ++s) {
    ASSERT_TRUE(clock.settle(2));
    if (s == 6) backend.set_fail_usage(0, true);
    clock.advance(1s);
  }
  ASSERT_TRUE(clock.settle(2));  // full at 0, usage at 5 (good), at 10 not yet
  for (int s = 7; s < 11; ++s) {
    clock.advance(1s);
    ASSERT_TRUE(clock.settle(2));
  }
  EXPECT_EQ((std::vector<CollectScope>{F, U, U}), backend.scopes(0));
  auto snap = c.assemble();
  ASSERT_TRUE(snap->gpus[0].up) << snap->gpus[0].down_reason;
  ASSERT_NE(snap->gpus[0].reading, nullptr);
  EXPECT_EQ(snap->gpus[0].reading->device.utilization_ratio, 0.5);  // the full collection's
  EXPECT_EQ(observer.usage, 1);
  EXPECT_EQ(observer.failures, 1);  // the ledger is told, so it does not stretch over it
  EXPECT_EQ(c.stop(), 0u);
}

TEST(CollectionScheduler, AUsageReadThatHangsDoesNotHoldBackTheOtherGpusSnapshots) {
  FakeBackend backend(2);
  FakeClock clock;
  SinkRecorder rec;
  CollectionSchedulerOptions o = fast_options();
  o.interval = 30s;
  o.clock = &clock;
  CollectionScheduler c({&backend}, o, rec.sink(), quiet_logger());
  c.start();
  ASSERT_TRUE(clock.settle(3));  // two workers and the publisher
  // The last worker wakes the publisher and goes to sleep: for a moment all three can look
  // asleep before the publisher runs and publishes round 0.
  for (int i = 0; i < 10000 && rec.count() < 1; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(clock.settle(3));
  ASSERT_EQ(rec.count(), 1);
  backend.set_hang(1, true);  // its usage read at 5 s never returns
  for (int s = 0; s < 30; ++s) {
    clock.advance(1s);
    ASSERT_TRUE(clock.settle(s < 4 ? 3 : 2)) << "at " << s + 1 << " s";
  }
  // Published at 30 s without waiting half an interval for GPU 1's full collection (the clock
  // stands still, so it can publish that round once and no more; it may still be waking).
  for (int i = 0; i < 10000 && rec.count() < 2; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(clock.settle(2));
  EXPECT_EQ(rec.count(), 2);
  EXPECT_EQ(backend.scopes(0).back(), F);
  EXPECT_TRUE(backend.hanging(1));
  backend.set_hang(1, false);
  EXPECT_EQ(c.stop(), 0u);
}

TEST(CollectionScheduler, TheFirstSuccessAfterAFailureIdentifiesTheGpuAgain) {
  FakeBackend backend(1);
  FakeClock clock;
  SinkRecorder rec;
  RecordingObserver observer;
  CollectionSchedulerOptions o = fast_options();
  o.interval = 1s;
  o.clock = &clock;
  o.observer = &observer;
  CollectionScheduler c({&backend}, o, rec.sink(), quiet_logger());
  c.start();
  auto step = [&] {
    clock.advance(1s);
    ASSERT_TRUE(clock.settle(2));
  };
  ASSERT_TRUE(clock.settle(2));
  EXPECT_EQ(c.assemble()->gpus[0].identity.driver_version, "550.54.15");
  step();
  step();
  EXPECT_EQ(backend.identifies(0), 1);  // not on every collection
  backend.set_fail(0, true);
  step();
  step();
  EXPECT_FALSE(c.assemble()->gpus[0].up);
  backend.set_driver_version("560.35.03");  // upgraded while the GPU was failing
  backend.set_fail(0, false);
  step();
  step();
  step();
  auto snap = c.assemble();
  EXPECT_TRUE(snap->gpus[0].up);
  EXPECT_EQ(snap->gpus[0].identity.driver_version, "560.35.03");
  EXPECT_EQ(observer.last_identity.driver_version, "560.35.03");  // the ledger sees it too
  EXPECT_EQ(backend.identifies(0), 2);
  EXPECT_EQ(c.stop(), 0u);
}

TEST(CollectionScheduler, StopDoesNotWaitForAWorkerStuckInTheDriver) {
  // Kept alive past the test: the detached worker still runs inside collect() until released.
  static FakeBackend backend(2);
  static SinkRecorder rec;
  static CollectionScheduler c({&backend}, fast_options(), rec.sink(), quiet_logger());
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

TEST(CollectionScheduler, ReadsOnlyTheEnabledCollectorsEachAtItsInterval) {
  FakeBackend backend(1);
  SinkRecorder rec;
  CollectionSchedulerOptions o = fast_options();
  o.plan.enabled = CollectorSet::defaults().set(CollectorId::kProfiling, false);  // nvlink off too
  o.plan.interval[static_cast<size_t>(CollectorId::kClocks)] = 3'600'000ms;       // read once in this test
  CollectionScheduler c({&backend}, o, rec.sink(), quiet_logger());
  c.start();
  auto snap = rec.wait_for([&](const Snapshot& s) { return s.gpus[0].up && backend.calls(0) >= 4; });
  ASSERT_NE(snap, nullptr);
  const auto groups = backend.groups(0);
  ASSERT_GE(groups.size(), 4u);
  EXPECT_TRUE(groups[0].has(CollectorId::kClocks));
  for (size_t i = 0; i < groups.size(); ++i) {
    EXPECT_FALSE(groups[i].has(CollectorId::kNvlink)) << i;
    EXPECT_FALSE(groups[i].has(CollectorId::kProfiling)) << i;
    EXPECT_TRUE(groups[i].has(CollectorId::kPcie)) << i;
    if (i > 0) {
      EXPECT_FALSE(groups[i].has(CollectorId::kClocks)) << i;
    }
  }
  // The clocks read by the first collection are carried into every later reading; the PCIe
  // value is the latest collection's.
  snap =
      rec.wait_for([](const Snapshot& s) { return s.gpus[0].reading && s.gpus[0].reading->pcie.link_generation > 2; });
  ASSERT_NE(snap, nullptr);
  ASSERT_EQ(snap->gpus[0].reading->clocks.hertz.size(), 1u);
  EXPECT_EQ(snap->gpus[0].reading->clocks.hertz[0].value, 1.0);
  EXPECT_TRUE(snap->gpus[0].reading->nvlinks.empty());
  // One run per enabled device collector, the clocks' from its one read.
  std::vector<std::string> names;
  for (const auto& run : snap->gpus[0].runs) names.emplace_back(collector_name(run.collector));
  EXPECT_EQ(names, (std::vector<std::string>{"device", "clocks", "ecc", "pcie", "mig"}));
  EXPECT_EQ(c.stop(), 0u);
}

// The processes collector reports the backend's read of them; the ledger, the observer's work on
// the reading; the event wait, its outcome only.
TEST(CollectionScheduler, ProcessesLedgerAndEventsReportTheirRuns) {
  FakeBackend backend(1);
  SinkRecorder rec;
  RecordingObserver observer;
  CollectionSchedulerOptions o = fast_options();
  o.observer = &observer;
  CollectionScheduler c({&backend}, o, rec.sink(), quiet_logger());
  c.start();
  backend.push_event({0, DeviceEventKind::kXid, 79});
  auto runs_of = [](const Snapshot& s) {
    std::map<std::string, CollectorRun> out;
    for (const auto& run : s.gpus[0].runs) out[std::string(collector_name(run.collector))] = run;
    return out;
  };
  auto snap = rec.wait_for(
      [&](const Snapshot& s) { return s.gpus[0].up && runs_of(s).count("ledger") == 1 && !s.collectors.empty(); });
  ASSERT_NE(snap, nullptr);
  auto runs = runs_of(*snap);
  ASSERT_EQ(runs.count("processes"), 1u);
  EXPECT_TRUE(runs["processes"].success);
  EXPECT_EQ(runs["processes"].duration_seconds, 0.002);  // the backend's figure
  EXPECT_TRUE(runs["ledger"].success);
  EXPECT_GE(runs["ledger"].duration_seconds, 0.0);
  ASSERT_EQ(snap->collectors.size(), 1u);
  EXPECT_EQ(snap->collectors[0].collector, "events");
  EXPECT_TRUE(snap->collectors[0].success);
  EXPECT_FALSE(snap->collectors[0].duration_seconds);

  // A failed collection fails both runs; with both collectors off, neither is reported.
  backend.set_fail(0, true);
  snap = rec.wait_for([&](const Snapshot& s) { return !s.gpus[0].up && !runs_of(s)["ledger"].success; });
  ASSERT_NE(snap, nullptr);
  EXPECT_FALSE(runs_of(*snap)["processes"].success);
  backend.set_fail(0, false);
  CollectionPlan plan;
  plan.enabled = CollectorSet::defaults().set(CollectorId::kLedger, false).set(CollectorId::kProcesses, false);
  c.set_plan(plan);
  snap = rec.wait_for([&](const Snapshot& s) {
    return s.gpus[0].up && runs_of(s).count("ledger") == 0 && runs_of(s).count("processes") == 0;
  });
  ASSERT_NE(snap, nullptr);
  EXPECT_EQ(runs_of(*snap).count("device"), 1u);
  EXPECT_EQ(c.stop(), 0u);
}

TEST(CollectionScheduler, ANewPlanTakesEffectWithoutARestart) {
  FakeBackend backend(1);
  SinkRecorder rec;
  CollectionScheduler c({&backend}, fast_options(), rec.sink(), quiet_logger());
  c.start();
  ASSERT_NE(rec.wait_for([](const Snapshot& s) { return s.gpus[0].up && !s.gpus[0].reading->nvlinks.empty(); }),
            nullptr);
  CollectionPlan plan;
  plan.enabled = CollectorSet::defaults().set(CollectorId::kPcie, false);
  c.set_plan(plan);
  const int after = backend.calls(0);
  auto snap = rec.wait_for([&](const Snapshot& s) {
    return backend.calls(0) > after + 1 && s.gpus[0].reading && s.gpus[0].reading->nvlinks.empty() &&
           !s.gpus[0].reading->pcie.link_generation;
  });
  ASSERT_NE(snap, nullptr);
  for (const auto& run : snap->gpus[0].runs) {
    EXPECT_NE(run.collector, CollectorId::kPcie);
    EXPECT_NE(run.collector, CollectorId::kNvlink);
  }
  EXPECT_EQ(c.stop(), 0u);
}

TEST(CollectionScheduler, AFailedCollectorRunIsReportedAndReadAgainAtOnce) {
  FakeBackend backend(1);
  backend.set_failing_collector(0, CollectorId::kEcc);
  SinkRecorder rec;
  CollectionSchedulerOptions o = fast_options();
  o.plan.interval[static_cast<size_t>(CollectorId::kEcc)] = 3'600'000ms;
  CollectionScheduler c({&backend}, o, rec.sink(), quiet_logger());
  c.start();
  auto snap = rec.wait_for([&](const Snapshot& s) { return s.gpus[0].up && backend.calls(0) >= 3; });
  ASSERT_NE(snap, nullptr);
  EXPECT_TRUE(snap->gpus[0].up);  // one collector failing leaves the GPU up
  bool found = false;
  for (const auto& run : snap->gpus[0].runs) {
    if (run.collector == CollectorId::kEcc) {
      found = true;
      EXPECT_FALSE(run.success);
    } else {
      EXPECT_TRUE(run.success) << collector_name(run.collector);
    }
  }
  EXPECT_TRUE(found);
  // Its interval does not hold back a collector whose last run failed.
  const auto groups = backend.groups(0);
  for (size_t i = 0; i < groups.size(); ++i) EXPECT_TRUE(groups[i].has(CollectorId::kEcc)) << i;
  EXPECT_EQ(c.stop(), 0u);
}

TEST(CollectionScheduler, EventsOffCountsNoXid) {
  FakeBackend backend(1);
  SinkRecorder rec;
  CollectionSchedulerOptions o = fast_options();
  o.plan.enabled.set(CollectorId::kEvents, false);
  CollectionScheduler c({&backend}, o, rec.sink(), quiet_logger());
  c.start();
  backend.push_event({0, DeviceEventKind::kXid, 79});
  ASSERT_NE(rec.wait_for([&](const Snapshot& s) { return s.gpus[0].up && backend.calls(0) >= 5; }), nullptr);
  auto snap = rec.wait_for([](const Snapshot& s) { return s.gpus[0].up; });
  ASSERT_NE(snap, nullptr);
  EXPECT_TRUE(snap->gpus[0].xid_counts.empty());
  // Switched on, the queued event is counted.
  CollectionPlan plan;
  c.set_plan(plan);
  EXPECT_NE(rec.wait_for([](const Snapshot& s) { return s.gpus[0].xid_counts.count(79) == 1; }), nullptr);
  EXPECT_EQ(c.stop(), 0u);
}

TEST(CollectionScheduler, ASwitchedOffCollectorExportsNothingABackendReadAnyway) {
  FakeBackend backend(1);  // reads power (the device collector's) whatever it is asked
  SinkRecorder rec;
  CollectionSchedulerOptions o = fast_options();
  o.plan.enabled = CollectorSet::defaults().set(CollectorId::kDevice, false).set(CollectorId::kLedger, false);
  CollectionScheduler c({&backend}, o, rec.sink(), quiet_logger());
  c.start();
  auto snap = rec.wait_for([](const Snapshot& s) { return s.gpus[0].up; });
  ASSERT_NE(snap, nullptr);
  EXPECT_FALSE(snap->gpus[0].reading->device.power_watts);
  EXPECT_FALSE(snap->gpus[0].reading->device.utilization_ratio);
  EXPECT_FALSE(snap->gpus[0].reading->clocks.hertz.empty());
  EXPECT_FALSE(backend.groups(0).front().has(CollectorId::kDevice));
  EXPECT_EQ(c.stop(), 0u);
}

}  // namespace
}  // namespace gpumeter
