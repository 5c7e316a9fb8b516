#include "ledger/state_summary.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ledger/usage_tracker.h"

namespace gpumeter {
namespace {

namespace fs = std::filesystem;

class OwnerByPid : public OwnerResolver {
 public:
  OwnerLabels resolve(unsigned pid, const DeviceIdentity&) override {
    OwnerLabels o;
    o.project = "p" + std::to_string(pid);
    o.pod = "pod-" + std::to_string(pid);
    return o;
  }
  void retain(const std::vector<unsigned>&) override {}
  void contribute(AttributionStatus&) const override {}
};

// Named in lower case so that `ctest -R ledger` selects it.
class ledger_state_summary : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpumeter-summary-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path() const { return (dir_ / "ledger.json").string(); }
  void write(const std::string& s) { std::ofstream(path(), std::ios::binary) << s; }
  std::string contents() const {
    std::ifstream in(path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  size_t files() const { return std::distance(fs::directory_iterator(dir_), fs::directory_iterator()); }
  fs::path dir_;
};

// A reading whose sample buffers advance by `periods` × 200 ms; pid p uses a share p/10.
DeviceReading reading(std::int64_t* clock, const std::vector<unsigned>& pids, int periods) {
  DeviceReading r;
  r.usage.processes.emplace();
  for (unsigned pid : pids) r.usage.processes->push_back({pid, 1e9 * pid, kProcessCompute});
  r.usage.utilization_samples_supported = true;
  r.usage.power_samples_supported = true;
  r.usage.process_samples_supported = true;
  for (int i = 0; i < periods; ++i) {
    *clock += 200'000;
    double total = 0;
    for (unsigned pid : pids) {
      r.usage.process_samples.push_back({pid, *clock, pid / 10.0, 0});
      total += pid / 10.0;
    }
    r.usage.utilization_samples.push_back({*clock, total});
    r.usage.power_samples.push_back({*clock, 200});
  }
  return r;
}

TEST_F(ledger_state_summary, ReadsWhatTheAgentCheckpointsWithOwnersByAllocationMostFirst) {
  OwnerByPid resolver;
  Logger log(LogLevel::kError);
  UsageTrackerOptions o;
  o.state_file = path();
  UsageTracker tracker(o, resolver, log);
  ASSERT_TRUE(tracker.load_state().ok());
  std::int64_t clock = 1'700'000'000'000'000;
  DeviceIdentity id;
  id.index = 3;
  id.uuid = "GPU-a";
  id.model = "Test GPU";
  tracker.on_reading(3, id, reading(&clock, {1, 2}, 1));
  tracker.on_reading(3, id, reading(&clock, {1, 2}, 10));  // 2 s shared by pids 1 and 2
  tracker.on_reading(3, id, reading(&clock, {2}, 5));      // 1 s for pid 2 alone
  ASSERT_TRUE(tracker.checkpoint().ok());
  const std::string before = contents();

  Snapshot expected;
  expected.gpus.resize(4);
  expected.gpus[3].identity = id;
  tracker.contribute(expected);
  ASSERT_TRUE(expected.gpus[3].ledger);

  LedgerStateSummary s = read_ledger_state_summary(path());
  EXPECT_EQ(s.status, LedgerStateSummary::Status::kOk) << s.problem;
  EXPECT_TRUE(s.problem.empty());
  ASSERT_TRUE(s.saved_unix);
  EXPECT_GT(*s.saved_unix, 1.6e9);
  ASSERT_EQ(s.gpus.size(), 1u);
  const LedgerStateGpu& g = s.gpus.at("GPU-a");
  EXPECT_TRUE(g.problem.empty());
  EXPECT_EQ(g.index, 3u);
  EXPECT_EQ(g.model, "Test GPU");
  EXPECT_DOUBLE_EQ(g.covered_seconds, expected.gpus[3].ledger->covered_seconds);
  EXPECT_DOUBLE_EQ(g.covered_seconds, 3.0);
  EXPECT_DOUBLE_EQ(g.gap_seconds, 0.0);
  ASSERT_EQ(g.owners.size(), 2u);
  EXPECT_EQ(g.owners[0].owner.project, "p2");  // alone for the last second
  EXPECT_EQ(g.owners[0].owner.pod, "pod-2");
  EXPECT_EQ(g.owners[1].owner.project, "p1");
  EXPECT_GT(g.owners[0].allocated_seconds, g.owners[1].allocated_seconds);
  EXPECT_DOUBLE_EQ(g.owners[0].allocated_seconds + g.owners[1].allocated_seconds, g.covered_seconds);
  for (const LedgerEntry& e : g.owners) {
    bool found = false;
    for (const LedgerEntry& x : expected.gpus[3].ledger->owners) {
      if (x.owner != e.owner) continue;
      found = true;
      EXPECT_DOUBLE_EQ(e.allocated_seconds, x.allocated_seconds);
      EXPECT_DOUBLE_EQ(e.busy_seconds, x.busy_seconds);
      EXPECT_DOUBLE_EQ(e.memory_byte_seconds, x.memory_byte_seconds);
      EXPECT_DOUBLE_EQ(e.energy_joules, x.energy_joules);
    }
    EXPECT_TRUE(found) << e.owner.project;
  }
  EXPECT_GT(g.owners[0].busy_seconds, 0);
  EXPECT_GT(g.owners[0].energy_joules, 0);
  EXPECT_GT(g.owners[0].memory_byte_seconds, 0);

  EXPECT_EQ(contents(), before);
  EXPECT_EQ(files(), 1u);
}

TEST_F(ledger_state_summary, MissingFileMeansNoTotalsAndNoProblem) {
  LedgerStateSummary s = read_ledger_state_summary(path());
  EXPECT_EQ(s.status, LedgerStateSummary::Status::kMissing);
  EXPECT_EQ(to_string(s.status), "missing");
  EXPECT_TRUE(s.problem.empty());
  EXPECT_TRUE(s.gpus.empty());
  EXPECT_EQ(files(), 0u);  // nothing created
}

TEST_F(ledger_state_summary, CorruptFileIsReportedAndLeftExactlyAsItIs) {
  struct Case {
    const char* contents;
    const char* problem;
  };
  const Case cases[] = {
      {"{\"format\": \"gpumeter-ledger-state\", \"vers", "not valid JSON"},
      {"", "not valid JSON"},
      {R"({"format":"something-else","version":1,"gpus":{}})", "not a gpumeter ledger state file"},
      {R"([1, 2])", "not a gpumeter ledger state file"},
      {R"({"format":"gpumeter-ledger-state","version":7,"gpus":{}})", "unsupported state version 7"},
      {R"({"format":"gpumeter-ledger-state","version":1,"gpus":[]})", "no \"gpus\" object"},
      // Fields of another type (found by fuzz_ledger_state: they threw out of the reader).
      {R"({"format":1,"version":1,"gpus":{}})", "not a gpumeter ledger state file"},
      {R"({"format":["gpumeter-ledger-state"],"version":1,"gpus":{}})", "not a gpumeter ledger state file"},
      {R"({"format":"gpumeter-ledger-state","version":"1","gpus":{}})", "unsupported state version \"1\""},
      {R"({"format":"gpumeter-ledger-state","version":1.5,"gpus":{}})", "unsupported state version 1.5"},
      {R"({"format":"gpumeter-ledger-state","version":null,"gpus":{}})", "unsupported state version null"},
  };
  for (const Case& c : cases) {
    write(c.contents);
    const auto mtime = fs::last_write_time(path());
    LedgerStateSummary s = read_ledger_state_summary(path());
    EXPECT_EQ(s.status, LedgerStateSummary::Status::kUnusable) << c.contents;
    EXPECT_EQ(to_string(s.status), "unusable");
    EXPECT_NE(s.problem.find(c.problem), std::string::npos) << s.problem;
    EXPECT_TRUE(s.gpus.empty());
    EXPECT_EQ(contents(), c.contents);
    EXPECT_EQ(fs::last_write_time(path()), mtime);
    EXPECT_EQ(files(), 1u) << "nothing set aside or written beside it";
  }
}

TEST_F(ledger_state_summary, ABadGpuEntryIsReportedForThatGpuOnly) {
  const std::string owner = R"({"project":"nlp","user":"dana","namespace":"","pod":"","container":"","hpc_job":""})";
  auto ledger = [&](double allocated) {
    return R"({"mode":"samples","cursor_us":1,"covered_seconds":10,"busy_seconds":5,"energy_joules":100,)"
           R"("gap_seconds":2,"gaps":1,"processes":[],"owners":[{"owner":)" +
           owner + R"(,"allocated_seconds":)" + std::to_string(allocated) +
           R"(,"busy_seconds":5,"memory_byte_seconds":7,"energy_joules":100,"last_active_us":1}]})";
  };
  write(R"({"format":"gpumeter-ledger-state","version":1,"saved_unix":1700000000.5,"gpus":{)"
        R"("GPU-good":{"index":0,"model":"M","ledger":)" +
        ledger(10) + "}," + R"("GPU-negative":{"index":1,"model":"M","ledger":)" + ledger(-1) + "}," +
        R"("GPU-truncated":{"index":2,"model":"M","ledger":{"mode":"samples"}},)"
        R"("GPU-odd":42}})");
  LedgerStateSummary s = read_ledger_state_summary(path());
  ASSERT_EQ(s.status, LedgerStateSummary::Status::kOk) << s.problem;
  EXPECT_DOUBLE_EQ(*s.saved_unix, 1700000000.5);
  ASSERT_EQ(s.gpus.size(), 4u);
  const auto& good = s.gpus.at("GPU-good");
  EXPECT_TRUE(good.problem.empty());
  EXPECT_DOUBLE_EQ(good.covered_seconds, 10);
  EXPECT_DOUBLE_EQ(good.gap_seconds, 2);
  ASSERT_EQ(good.owners.size(), 1u);
  EXPECT_EQ(good.owners[0].owner.user, "dana");
  EXPECT_DOUBLE_EQ(good.owners[0].memory_byte_seconds, 7);
  // One bad amount: named, and the rest of that GPU's ledger kept (the amount read as 0).
  EXPECT_NE(s.gpus.at("GPU-negative").problem.find("\"allocated_seconds\" was -1"), std::string::npos)
      << s.gpus.at("GPU-negative").problem;
  ASSERT_EQ(s.gpus.at("GPU-negative").owners.size(), 1u);
  EXPECT_DOUBLE_EQ(s.gpus.at("GPU-negative").owners[0].allocated_seconds, 0);
  EXPECT_DOUBLE_EQ(s.gpus.at("GPU-negative").owners[0].memory_byte_seconds, 7);
  EXPECT_EQ(s.gpus.at("GPU-negative").index, 1u);
  EXPECT_NE(s.gpus.at("GPU-truncated").problem.find("malformed"), std::string::npos);
  EXPECT_FALSE(s.gpus.at("GPU-odd").problem.empty());
}

TEST_F(ledger_state_summary, ADirectoryIsUnusableNotMissing) {
  LedgerStateSummary s = read_ledger_state_summary(dir_.string());
  EXPECT_EQ(s.status, LedgerStateSummary::Status::kUnusable);
  EXPECT_NE(s.problem.find(dir_.string()), std::string::npos) << s.problem;
}

}  // namespace
}  // namespace gpumeter
