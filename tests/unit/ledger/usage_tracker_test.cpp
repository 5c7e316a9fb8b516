#include "ledger/usage_tracker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

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
  ASSERT_EQ(s.gpus[0].processes.size(), 2u);
  EXPECT_EQ(s.gpus[0].processes[0].pid, 3u);  // memory is 1 GB × pid
  EXPECT_EQ(s.gpus[0].processes[1].pid, 4u);
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
  EXPECT_TRUE(back.gpus[0].processes.empty());  // the limit applies again
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
  polled.utilization_ratio = 0.5;
  polled.power_watts = 100;
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
    t.load_state();
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
    t2.load_state();
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
    t.load_state();
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
  t2.load_state();
  t2.on_reading(0, id, reading(&clock, {2}));
  Snapshot s = snapshot_for({id});
  t2.contribute(s);
  ASSERT_TRUE(s.gpus[0].ledger);
  EXPECT_GE(s.gpus[0].ledger->covered_seconds, published);
}

}  // namespace
}  // namespace gpumeter
