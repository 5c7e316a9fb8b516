#include "ledger/usage_tracker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <thread>

#include "fake_clock.h"
#include "ledger/state_file.h"

namespace gpumeter {
namespace {

namespace fs = std::filesystem;

class FakeResolver : public OwnerResolver {
 public:
  OwnerLabels resolve(unsigned pid, const DeviceIdentity&) override {
    OwnerLabels o;
    o.project = "p" + std::to_string(pid % 2);
    o.user = "u" + std::to_string(pid);
    o.pod = "pod-" + std::to_string(pid);
    return o;
  }
  void retain(const std::vector<unsigned>& live) override { retained = live; }
  void contribute(AttributionStatus& st) const override { st.owner_lookups = 77; }
  std::vector<unsigned> retained;
};

DeviceIdentity gpu(unsigned index, std::string uuid) {
  DeviceIdentity id;
  id.index = index;
  id.uuid = std::move(uuid);
  id.model = "Test GPU";
  return id;
}

// A reading whose utilization buffer advances by `periods` × 200 ms from `*clock`.
DeviceReading reading(std::int64_t* clock, std::vector<unsigned> pids, int periods = 5, double util = 0.5) {
  DeviceReading r;
  r.usage.processes.emplace();
  for (unsigned pid : pids) r.usage.processes->push_back({pid, 1e9 * pid, kProcessCompute});
  r.usage.utilization_samples_supported = true;
  r.usage.power_samples_supported = true;
  r.usage.process_samples_supported = true;
  for (int i = 0; i < periods; ++i) {
    *clock += 200'000;
    r.usage.utilization_samples.push_back({*clock, util});
    r.usage.power_samples.push_back({*clock, 100});
    for (unsigned pid : pids) r.usage.process_samples.push_back({pid, *clock, util / pids.size(), 0});
  }
  return r;
}

// What the collector publishes: every GPU up unless listed in `down`.
Snapshot snapshot_for(std::vector<DeviceIdentity> ids, std::vector<unsigned> down = {}) {
  Snapshot s;
  for (auto& id : ids) {
    GpuSnapshot g;
    g.identity = id;
    g.up = std::find(down.begin(), down.end(), id.index) == down.end();
    s.gpus.push_back(g);
  }
  return s;
}

TEST(UsageTracker, LabelSetReductionMergesOwners) {
  FakeResolver res;
  Logger log(LogLevel::kError);
  UsageTrackerOptions o;
  o.labels = {"project"};
  UsageTracker t(o, res, log);
  std::int64_t clock = 1'700'000'000'000'000;
  auto id = gpu(0, "GPU-a");
  t.on_reading(0, id, reading(&clock, {1, 3}));
  t.on_reading(0, id, reading(&clock, {1, 3}));
  Snapshot s = snapshot_for({id});
  t.contribute(s);
  ASSERT_TRUE(s.gpus[0].ledger);
  ASSERT_EQ(s.gpus[0].ledger->owners.size(), 1u);  // pids 1 and 3 are both project p1
  const auto& e = s.gpus[0].ledger->owners[0];
  EXPECT_EQ(e.owner.project, "p1");
  EXPECT_EQ(e.owner.user, "");
  EXPECT_DOUBLE_EQ(e.allocated_seconds, 1.0);
  // Per-process series keep the full owner labels.
  ASSERT_EQ(s.gpus[0].processes.size(), 2u);
  EXPECT_EQ(s.gpus[0].processes[0].owner.user, "u1");
  EXPECT_EQ(s.attribution.owner_lookups, 77u);
  EXPECT_EQ(res.retained, (std::vector<unsigned>{1, 3}));
}

TEST(UsageTracker, ProcessSeriesLimitKeepsTheLargestAndCountsDrops) {
  FakeResolver res;
  Logger log(LogLevel::kError);
  UsageTrackerOptions o;
  o.max_process_series = 2;
  UsageTracker t(o, res, log);
  std::int64_t clock = 1'700'000'000'000'000;
  auto id = gpu(0, "GPU-a");
  t.on_reading(0, id, reading(&clock, {1, 2, 3, 4}));
  Snapshot s = snapshot_for({id});
  t.contribute(s);
  // Every process is in the snapshot (the JSON API lists them all); the limit marks which are
  // served as series.
  std::vector<std::pair<unsigned, bool>> listed;
  for (const auto& p : s.gpus[0].processes) listed.emplace_back(p.pid, p.series);
  // memory is 1 GB × pid: the largest two are kept
  EXPECT_EQ(listed, (std::vector<std::pair<unsigned, bool>>{{1, false}, {2, false}, {3, true}, {4, true}}));
  EXPECT_EQ(s.attribution.series_dropped.at("process"), 2u);
  Snapshot again = snapshot_for({id});
  t.contribute(again);  // the same two stay dropped: not counted twice
  EXPECT_EQ(again.attribution.series_dropped.at("process"), 2u);
}

TEST(UsageTracker, ExitedProcessesReadZeroThenDisappear) {
  FakeResolver res;
  Logger log(LogLevel::kError);
  UsageTrackerOptions o;
  o.process_retention = std::chrono::milliseconds(0);
  UsageTracker t(o, res, log);
  std::int64_t clock = 1'700'000'000'000'000;
  auto id = gpu(0, "GPU-a");
  t.on_reading(0, id, reading(&clock, {5}));
  t.on_reading(0, id, reading(&clock, {}));
  Snapshot s = snapshot_for({id});
  t.contribute(s);
  EXPECT_TRUE(s.gpus[0].processes.empty());
}

// A lost or hung GPU keeps its processes in the tracker (they come back with it), but their
// last memory and utilization must not be served as current ones, nor take places under the
// per-process limit from the GPUs that are up. Its ledger totals stay: they are true.
TEST(UsageTracker, ADownGpuServesNoProcessSeriesAndKeepsItsLedger) {
  FakeResolver res;
  Logger log(LogLevel::kError);
  UsageTrackerOptions o;
  o.max_process_series = 2;
  UsageTracker t(o, res, log);
  std::int64_t clock_a = 1'700'000'000'000'000, clock_b = clock_a;
  auto a = gpu(0, "GPU-a");
  auto b = gpu(1, "GPU-b");
  for (int i = 0; i < 2; ++i) {
    t.on_reading(0, a, reading(&clock_a, {1, 2}));
    t.on_reading(1, b, reading(&clock_b, {7, 8}));  // more memory (1 GB × pid): first under the limit
  }
  Snapshot lost = snapshot_for({a, b}, {1});
  t.contribute(lost);
  EXPECT_TRUE(lost.gpus[1].processes.empty());
  ASSERT_EQ(lost.gpus[0].processes.size(), 2u);
  EXPECT_EQ(lost.gpus[0].processes[0].pid, 1u);
  EXPECT_EQ(lost.attribution.series_dropped.at("process"), 0u);
  ASSERT_TRUE(lost.gpus[1].ledger);
  EXPECT_DOUBLE_EQ(lost.gpus[1].ledger->covered_seconds, 1.0);
  EXPECT_EQ(res.retained, (std::vector<unsigned>{1, 2, 7, 8}));  // its processes' owners stay cached

  Snapshot back = snapshot_for({a, b});
  t.contribute(back);
  ASSERT_EQ(back.gpus[1].processes.size(), 2u);
  EXPECT_EQ(back.gpus[1].processes[0].pid, 7u);
  EXPECT_TRUE(back.gpus[1].processes[0].series);
  ASSERT_EQ(back.gpus[0].processes.size(), 2u);
  EXPECT_FALSE(back.gpus[0].processes[0].series);  // the limit applies again
  EXPECT_FALSE(back.gpus[0].processes[1].series);
}

TEST(UsageTracker, ANewUuidInASlotStartsANewLedger) {
  FakeResolver res;
  Logger log(LogLevel::kError);
  UsageTracker t({}, res, log);
  std::int64_t clock = 1'700'000'000'000'000;
  t.on_reading(0, gpu(0, "GPU-old"), reading(&clock, {1}));
  t.on_reading(0, gpu(0, "GPU-old"), reading(&clock, {1}));
  t.on_reading(0, gpu(0, "GPU-new"), reading(&clock, {1}));
  Snapshot s = snapshot_for({gpu(0, "GPU-new")});
  t.contribute(s);
  ASSERT_TRUE(s.gpus[0].ledger);
  EXPECT_DOUBLE_EQ(s.gpus[0].ledger->covered_seconds, 0.0);  // its first tick only starts it
}

TEST(UsageTracker, AFailedCollectionIsNotStretchedOverWithoutSampleBuffers) {
  FakeResolver res;
  Logger log(LogLevel::kError);
  UsageTracker t({}, res, log);
  auto id = gpu(0, "GPU-a");
  DeviceReading polled;  // no sample buffers (MIG, old drivers): integrated over wall time
  polled.device.utilization_ratio = 0.5;
  polled.device.power_watts = 100;
  polled.usage.processes.emplace();
  polled.usage.processes->push_back({1, 1e9, kProcessCompute});
  auto covered = [&] {
    Snapshot s = snapshot_for({id});
    t.contribute(s);
    return std::pair(s.gpus[0].ledger->covered_seconds, s.gpus[0].ledger->gap_seconds);
  };
  // Wall time must move between readings for anything to be integrated.
  auto later = [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); };
  t.on_reading(0, id, polled);
  later();
  t.on_reading(0, id, polled);
  const auto [before, no_gap] = covered();
  EXPECT_GT(before, 0);
  EXPECT_EQ(no_gap, 0);
  later();
  t.on_failure(0, id);
  later();
  t.on_reading(0, id, polled);
  const auto [after, gap] = covered();
  EXPECT_EQ(after, before);  // the reading after the failure restarts the integration
  EXPECT_GT(gap, 0);
}

// A tracker's surroundings with a state file in a directory of its own.
struct Persisted {
  explicit Persisted(const std::string& name)
      : dir(fs::temp_directory_path() / ("gpumeter-" + name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    options.state_file = (dir / "ledger.json").string();
  }
  ~Persisted() { fs::remove_all(dir); }
  fs::path dir;
  FakeResolver res;
  Logger log{LogLevel::kError};
  UsageTrackerOptions options;
  std::int64_t clock = 1'700'000'000'000'000;
  DeviceIdentity id = gpu(0, "GPU-a");
};

TEST(UsageTracker, CheckpointAndRestoreResumeTheCounters) {
  Persisted p("tracker");
  auto& [dir, res, log, o, clock, id] = p;
  double before;
  {
    UsageTracker t(o, res, log);
    ASSERT_TRUE(t.load_state().ok());
    t.on_reading(0, id, reading(&clock, {2}));
    t.on_reading(0, id, reading(&clock, {2}));
    ASSERT_TRUE(t.checkpoint().ok());
    Snapshot s = snapshot_for({id});
    t.contribute(s);
    before = s.gpus[0].ledger->owners.at(0).allocated_seconds;
    EXPECT_TRUE(s.attribution.checkpoint_success);
  }
  {
    UsageTracker t2(o, res, log);
    ASSERT_TRUE(t2.load_state().ok());
    t2.on_reading(0, id, reading(&clock, {2}));  // continues from the saved cursor
    Snapshot s = snapshot_for({id});
    t2.contribute(s);
    ASSERT_EQ(s.gpus[0].ledger->owners.size(), 1u);
    EXPECT_DOUBLE_EQ(s.gpus[0].ledger->owners.at(0).allocated_seconds, before);  // what the file holds
    ASSERT_TRUE(t2.checkpoint().ok());
    Snapshot after = snapshot_for({id});
    t2.contribute(after);
    EXPECT_DOUBLE_EQ(after.gpus[0].ledger->owners.at(0).allocated_seconds, before + 1.0);
  }
}

// With a state file, scrapes see only checkpointed values: a restart resumes from the file, so
// no exported value can exceed what the next agent starts from (Prometheus would read the drop
// as a counter reset and count the whole total again).
TEST(UsageTracker, ScrapesSeeOnlyCheckpointedValues) {
  Persisted p("publish");
  auto& [dir, res, log, o, clock, id] = p;
  double published;
  {
    UsageTracker t(o, res, log);
    ASSERT_TRUE(t.load_state().ok());
    t.on_reading(0, id, reading(&clock, {2}));
    t.on_reading(0, id, reading(&clock, {2}));
    Snapshot before_checkpoint = snapshot_for({id});
    t.contribute(before_checkpoint);
    EXPECT_FALSE(before_checkpoint.gpus[0].ledger);  // nothing saved yet, nothing shown
    ASSERT_TRUE(t.checkpoint().ok());
    Snapshot s = snapshot_for({id});
    t.contribute(s);
    ASSERT_TRUE(s.gpus[0].ledger);
    published = s.gpus[0].ledger->covered_seconds;
    EXPECT_GT(published, 0.0);
    t.on_reading(0, id, reading(&clock, {2}));
    Snapshot later = snapshot_for({id});
    t.contribute(later);
    EXPECT_DOUBLE_EQ(later.gpus[0].ledger->covered_seconds, published);  // not saved yet
  }
  // The destructor saved once more; the file and every value shown agree or exceed.
  UsageTracker t2(o, res, log);
  ASSERT_TRUE(t2.load_state().ok());
  t2.on_reading(0, id, reading(&clock, {2}));
  Snapshot s = snapshot_for({id});
  t2.contribute(s);
  ASSERT_TRUE(s.gpus[0].ledger);
  EXPECT_GE(s.gpus[0].ledger->covered_seconds, published);
}

// Reads what a Logger wrote to a temporary file.
struct CapturedLog {
  CapturedLog() : file(std::tmpfile()), log(LogLevel::kInfo, LogFormat::kLogfmt, file) {}
  ~CapturedLog() { std::fclose(file); }
  std::string text() {
    std::fflush(file);
    std::rewind(file);
    std::string out;
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof buf, file)) out.append(buf, n);
    return out;
  }
  static size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }
  std::FILE* file;
  Logger log;
};

// Fake clocks: the wall clock and the monotonic one, which steps never move.
struct Clocks {
  Clocks() {
    clock.set_wall_us(1'800'000'000'000'000);
    clock.set_now(Clock::time_point(std::chrono::seconds(5'000)));
  }
  testing::FakeClock clock;
  std::string boot = "boot-1";
  void install(UsageTrackerOptions& o) {
    o.clock = &clock;
    o.boot_id = [this] { return boot; };
  }
};

TEST(UsageTracker, AStateFileThatCannotBeReadStopsTheStartAndIsNotOverwritten) {
  Persisted p("unreadable");
  fs::create_directories(p.options.state_file);
  std::ofstream(fs::path(p.options.state_file) / "keep") << "x";
  UsageTracker t(p.options, p.res, p.log);
  auto loaded = t.load_state();
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().code, 2);
  EXPECT_NE(loaded.error().message.find(p.options.state_file), std::string::npos) << loaded.error().message;
  EXPECT_TRUE(fs::exists(fs::path(p.options.state_file) / "keep"));
}

// A state file refused at start (here: over the size limit) is never written, neither by a
// checkpoint nor by the last one at stop, which used to replace it with an empty ledger.
TEST(UsageTracker, AStateFileRefusedAtStartIsNeverWritten) {
  Persisted p("refused");
  { std::ofstream(p.options.state_file) << "{\"format\": \"gpumeter-ledger\"}"; }
  const auto size = kMaxLedgerStateBytes + 1;
  fs::resize_file(p.options.state_file, size);
  const auto modified = fs::last_write_time(p.options.state_file);
  {
    UsageTracker t(p.options, p.res, p.log);
    auto loaded = t.load_state();
    ASSERT_FALSE(loaded.ok());
    EXPECT_NE(loaded.error().message.find("it is left as it is"), std::string::npos) << loaded.error().message;
    t.on_reading(0, p.id, reading(&p.clock, {2}));
    auto written = t.checkpoint();
    ASSERT_FALSE(written.ok());
    EXPECT_NE(written.error().message.find("not loaded"), std::string::npos) << written.error().message;
    t.start();
    t.stop();
  }  // and the destructor
  EXPECT_EQ(fs::file_size(p.options.state_file), size);
  EXPECT_EQ(fs::last_write_time(p.options.state_file), modified);
}

TEST(UsageTracker, AClockStepIsLoggedOnceAndFollowed) {
  CapturedLog cap;
  FakeResolver res;
  Clocks clocks;
  UsageTrackerOptions o;
  clocks.install(o);
  UsageTracker t(o, res, cap.log);
  std::int64_t sample_a = clocks.clock.wall_us(), sample_b = clocks.clock.wall_us();
  const DeviceIdentity a = gpu(0, "GPU-a"), b = gpu(1, "GPU-b");
  for (int i = 0; i < 2; ++i) {
    t.on_reading(0, a, reading(&sample_a, {2}));
    t.on_reading(1, b, reading(&sample_b, {3}));
    clocks.clock.advance_wall(std::chrono::microseconds(1'000'000));
    clocks.clock.advance(std::chrono::microseconds(1'000'000));
  }
  // One hour back: both GPUs see it at their next reading, on samples of the new clock.
  clocks.clock.advance_wall(-std::chrono::microseconds(3'600'000'000));
  sample_a -= 3'600'000'000;
  sample_b -= 3'600'000'000;
  DeviceReading ra = reading(&sample_a, {2}), rb = reading(&sample_b, {3});
  ra.usage.clock_step_us = rb.usage.clock_step_us = -3'600'000'000;
  t.on_reading(0, a, ra);
  t.on_reading(1, b, rb);
  const std::string text = cap.text();
  EXPECT_EQ(CapturedLog::count(text, "wall clock stepped"), 1u) << text;
  EXPECT_NE(text.find("step_seconds=-3600.000"), std::string::npos) << text;
  Snapshot s = snapshot_for({a, b});
  t.contribute(s);
  for (const auto& g : s.gpus) EXPECT_NEAR(g.ledger->covered_seconds, 2.0, 1e-9) << g.identity.uuid;
  EXPECT_EQ(s.attribution.clock_steps, 2u);
}

TEST(UsageTracker, AStepForwardLongerThanTheRetentionPrunesNoOwner) {
  FakeResolver res;
  Logger log{LogLevel::kError};
  Clocks clocks;
  UsageTrackerOptions o;
  clocks.install(o);
  UsageTracker t(o, res, log);
  std::int64_t sample = clocks.clock.wall_us();
  const DeviceIdentity id = gpu(0, "GPU-a");
  t.on_reading(0, id, reading(&sample, {2}));
  t.on_reading(0, id, reading(&sample, {2}));
  const std::int64_t step = 2 * 24 * 3'600'000'000LL;  // the retention is 24 h
  clocks.clock.advance_wall(std::chrono::microseconds(step + 1'000'000));
  clocks.clock.advance(std::chrono::microseconds(1'000'000));
  sample += step;
  DeviceReading r = reading(&sample, {});  // the process ended: only __idle__ is charged
  r.usage.clock_step_us = step;
  t.on_reading(0, id, r);
  Snapshot s = snapshot_for({id});
  t.contribute(s);
  ASSERT_TRUE(s.gpus[0].ledger);
  double allocated = 0;
  bool kept = false;
  for (const auto& owner : s.gpus[0].ledger->owners) {
    allocated += owner.allocated_seconds;
    kept = kept || owner.owner.project == "p0";
  }
  EXPECT_TRUE(kept);
  EXPECT_NEAR(allocated, s.gpus[0].ledger->covered_seconds, 1e-9);
  EXPECT_EQ(s.attribution.series_dropped.at("owner"), 0u);
}

// Restarted on a clock an hour behind: within one boot, the monotonic clock saved in the state
// file says by how much, and the ledger continues exactly; on another boot nobody knows, and it
// restarts from the GPU's now with one gap.
TEST(UsageTracker, AStepWhileTheAgentWasDownIsFollowedWithinOneBoot) {
  for (const bool same_boot : {true, false}) {
    Persisted p(same_boot ? "down-same-boot" : "down-other-boot");
    Clocks clocks;
    clocks.install(p.options);
    std::int64_t sample = clocks.clock.wall_us();
    {
      UsageTracker t(p.options, p.res, p.log);
      ASSERT_TRUE(t.load_state().ok());
      t.on_reading(0, p.id, reading(&sample, {2}));
      t.on_reading(0, p.id, reading(&sample, {2}));
      ASSERT_TRUE(t.checkpoint().ok());
    }
    clocks.clock.advance_wall(
        std::chrono::microseconds(2'000'000 - 3'600'000'000));  // down for 2 s, and the clock went back an hour
    clocks.clock.advance(std::chrono::microseconds(2'000'000));
    if (!same_boot) clocks.boot = "boot-2";
    sample -= 3'600'000'000 + 1'000'000;  // the buffer reaches back 1 s before the cursor
    UsageTracker t(p.options, p.res, p.log);
    ASSERT_TRUE(t.load_state().ok());
    t.on_reading(0, p.id, reading(&sample, {2}, 15));
    t.on_reading(0, p.id, reading(&sample, {2}));
    ASSERT_TRUE(t.checkpoint().ok());
    Snapshot s = snapshot_for({p.id});
    t.contribute(s);
    ASSERT_TRUE(s.gpus[0].ledger);
    // Before the restart: 1 s. Same boot: the 2 s down (read back from the buffer) and 1 s
    // after. Another boot: only the 1 s after the restart.
    EXPECT_NEAR(s.gpus[0].ledger->covered_seconds, same_boot ? 4.0 : 2.0, 1e-9);
    EXPECT_EQ(s.gpus[0].ledger->gap_seconds, 0);
  }
}

TEST(UsageTracker, AFailingCheckpointIsLoggedOnceThenRarelyAndItsRecoveryToo) {
  CapturedLog cap;
  Persisted p("failing");
  Clocks clocks;
  clocks.install(p.options);
  p.options.state_file = (p.dir / "missing" / "ledger.json").string();
  UsageTracker t(p.options, p.res, cap.log);
  ASSERT_TRUE(t.load_state().ok());  // absent: nothing to resume
  t.on_reading(0, p.id, reading(&p.clock, {2}));
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(t.checkpoint().ok());
    clocks.clock.advance(std::chrono::microseconds(60'000'000));  // a minute apart
  }
  EXPECT_EQ(CapturedLog::count(cap.text(), "cannot save the ledger state"), 1u) << cap.text();
  clocks.clock.advance(std::chrono::microseconds(10 * 60'000'000LL));
  EXPECT_FALSE(t.checkpoint().ok());
  std::string text = cap.text();
  EXPECT_EQ(CapturedLog::count(text, "cannot save the ledger state"), 2u) << text;
  EXPECT_NE(text.find("failed_checkpoints=5"), std::string::npos) << text;  // since the first line
  fs::create_directories(p.dir / "missing");
  EXPECT_TRUE(t.checkpoint().ok());
  text = cap.text();
  EXPECT_NE(text.find("ledger state saved again"), std::string::npos) << text;
  EXPECT_NE(text.find("failed_checkpoints=6"), std::string::npos) << text;
  Snapshot s = snapshot_for({p.id});
  t.contribute(s);
  EXPECT_EQ(s.attribution.checkpoint_failures, 6u);
  EXPECT_TRUE(s.attribution.checkpoint_success);
}

// The first checkpoints come at start and right after a GPU's first reading, not a whole
// interval later: an agent in a crash loop still keeps its cursor.
TEST(UsageTracker, TheFirstCheckpointsComeRightAfterStart) {
  Persisted p("first-checkpoint");
  p.options.checkpoint_interval = std::chrono::hours(1);
  UsageTracker t(p.options, p.res, p.log);
  ASSERT_TRUE(t.load_state().ok());
  auto wait_for = [](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);  // generous
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return done();
  };
  auto saved = [&] {
    std::ifstream in(p.options.state_file);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  t.start();
  EXPECT_TRUE(wait_for([&] { return fs::exists(p.options.state_file); }));
  t.on_reading(0, p.id, reading(&p.clock, {2}));
  EXPECT_TRUE(wait_for([&] { return saved().find("GPU-a") != std::string::npos; })) << saved();
  t.stop();
}

}  // namespace
}  // namespace gpumeter
