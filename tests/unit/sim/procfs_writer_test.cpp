// `gpumeter sim procfs`: the windows each pid's entry exists in, the content of every file as
// an agent parses it, atomic updates of the tree, and the follow loop on an injected clock.

#include "sim/host/procfs_writer.h"
#include "sim/scenario/scenario_clock.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "test_support.h"

namespace gpumeter::sim {
namespace {

namespace fs = std::filesystem;
using testing::entries;
using testing::fresh_dir;
constexpr auto read = testing::read_file;
constexpr Micros S = kMicrosPerSecond;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// /proc/<pid>/stat as agents parse it: comm is between the first '(' and the last ')', the
// other fields are space-separated after it. Returns fields 1..52 (index 0 is field 1).
std::vector<std::string> stat_fields(const std::string& line) {
  std::vector<std::string> f;
  const auto open = line.find('(');
  const auto close = line.rfind(')');
  EXPECT_NE(open, std::string::npos);
  EXPECT_NE(close, std::string::npos);
  f.push_back(line.substr(0, open - 1));
  f.push_back(line.substr(open + 1, close - open - 1));
  std::string rest = line.substr(close + 2);
  if (!rest.empty() && rest.back() == '\n') rest.pop_back();
  for (const std::string& x : split(rest, ' ')) f.push_back(x);
  return f;
}

const std::string kScenario = std::string(testing::kModel) + R"(
gpus: {count: 2, model: m}
duration: 1000
users: {alice: 2050, bob: 1001}
jobs:
  - name: "train (x) y"
    start: 10
    end: 60
    gpus: [0, 1]
    pids: [100, 101]
    uid: 2050
    cgroup: /kubepods.slice/kubepods-pod1.slice/cri-containerd-abc.scope
    env: {GPUMETER_PROJECT: nlp, POD_NAMESPACE: team-nlp}
    utilization: 0.5
  - name: slurm-v1
    start: 20
    end: 30
    gpus: [1]
    pid: 300
    uid: 7777
    cgroup: /slurm/uid_7777/job_1/step_0
    cgroup_version: 1
    env: {PATH: /opt/bin, SLURM_JOB_ID: "1"}
    utilization: 0.2
  - {name: reuse-a, start: 100, end: 200, gpus: [0], pid: 500, utilization: 0.1}
  - {name: reuse-b, start: 204, end: 300, gpus: [0], pid: 500, uid: 1001, utilization: 0.1}
  - {name: reuse-c, start: 400, gpus: [1], pid: 500, utilization: 0.1}
  - {name: same-instant-a, start: 0.001, end: 0.002, gpus: [1], pid: 600, utilization: 0.1}
  - {name: same-instant-b, start: 0.002, end: 0.003, gpus: [1], pid: 600, utilization: 0.1}
  - {name: never, start: 2000, gpus: [1], pid: 700, utilization: 0.1}
)";

TEST(ProcfsWindows, LeadAroundEachRunAndPidReuseSplitAtTheMidpoint) {
  Scenario s = testing::parse_ok(kScenario);
  auto w = process_windows(s, 5 * S);
  // pid order, then time; `never` starts after the scenario's end and has no window.
  ASSERT_EQ(w.size(), 8u);
  EXPECT_EQ(w[0].pid, 100u);
  EXPECT_EQ(w[0].from, 5 * S);
  EXPECT_EQ(w[0].to, 65 * S);
  EXPECT_EQ(w[1].pid, 101u);
  EXPECT_EQ(w[2].pid, 300u);
  EXPECT_EQ(w[2].job, 1u);
  // pid 500: a ends at 200, b starts at 204 (gap under two leads: split at 202); c starts at
  // 400, far enough from b's end to keep both leads; the scenario's end bounds c.
  EXPECT_EQ(w[3].job, 2u);
  EXPECT_EQ(w[3].from, 95 * S);
  EXPECT_EQ(w[3].to, 202 * S);
  EXPECT_EQ(w[4].job, 3u);
  EXPECT_EQ(w[4].from, 202 * S);
  EXPECT_EQ(w[4].to, 305 * S);
  EXPECT_EQ(w[5].job, 4u);
  EXPECT_EQ(w[5].from, 395 * S);
  EXPECT_EQ(w[5].to, 1005 * S);
  // Start times: clock ticks since a boot one day before time 0, distinct for each reuse.
  EXPECT_EQ(w[0].start_ticks, (86400u + 10u) * 100u);
  EXPECT_EQ(w[3].start_ticks, (86400u + 100u) * 100u);
  EXPECT_EQ(w[4].start_ticks, (86400u + 204u) * 100u);
  EXPECT_EQ(w[5].start_ticks, (86400u + 400u) * 100u);
  // Two runs within one clock tick still get different start times.
  EXPECT_EQ(w[6].pid, 600u);
  EXPECT_EQ(w[6].to, w[7].from);
  EXPECT_EQ(w[7].start_ticks, w[6].start_ticks + 1);

  // With an epoch, the boot sits on the whole second a day before it, and btime plus the start
  // ticks gives the simulated unix time of the job's start to the tick.
  const std::int64_t epoch_us = 1'790'000'000'250'000;  // .25 s past a whole second
  const SimulatedBoot boot = boot_for_epoch(epoch_us);
  ASSERT_TRUE(boot.btime.has_value());
  EXPECT_EQ(*boot.btime, 1'790'000'000 - 86400);
  EXPECT_EQ(boot.before_scenario, 86400 * S + 250'000);
  auto booted = process_windows(s, 5 * S, boot.before_scenario);
  EXPECT_EQ(static_cast<std::int64_t>(booted[0].start_ticks) * 10'000 + *boot.btime * S, epoch_us + 10 * S);
  EXPECT_FALSE(boot_for_epoch(std::nullopt).btime.has_value());
  EXPECT_NE(proc_stat_file(12345).find("\nbtime 12345\n"), std::string::npos);

  auto none = process_windows(s, 0);
  EXPECT_EQ(none[0].from, 10 * S);
  EXPECT_EQ(none[0].to, 60 * S);
  EXPECT_EQ(none[3].to, 200 * S);
  EXPECT_EQ(none[4].from, 204 * S);
}

TEST(ProcfsWindows, JobsWithoutEndRunForever) {
  Scenario s = testing::parse_ok(std::string(testing::kModel) +
                                 "gpus: {count: 1, model: m}\njobs:\n"
                                 "  - {name: a, gpus: [0], pid: 1, utilization: 0.5}\n");
  auto w = process_windows(s, 5 * S);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].from, -5 * S);
  EXPECT_EQ(w[0].to, kForever);
}

TEST(ProcfsFiles, StatIsARealFormatLine) {
  Scenario s = testing::parse_ok(kScenario);
  auto w = process_windows(s, 5 * S);
  const std::string line = proc_stat(s.jobs[0], w[0]);
  EXPECT_EQ(line.back(), '\n');
  auto f = stat_fields(line);
  ASSERT_EQ(f.size(), 52u) << line;
  EXPECT_EQ(f[0], "100");
  EXPECT_EQ(f[1], "train (x) y");  // a name with spaces and parentheses survives the last-')' rule
  EXPECT_EQ(f[2], "S");
  EXPECT_EQ(f[21], std::to_string((86400 + 10) * 100));  // field 22, starttime
  for (std::size_t i = 2; i < f.size(); ++i) EXPECT_FALSE(f[i].empty()) << "field " << i + 1;

  // comm is cut to 15 bytes, as the kernel keeps it.
  Job long_name = s.jobs[0];
  long_name.name = "nlp-llm-pretrain-worker";
  EXPECT_EQ(proc_comm(long_name), "nlp-llm-pretrai");
  EXPECT_EQ(stat_fields(proc_stat(long_name, w[0]))[1], "nlp-llm-pretrai");
  Job odd = s.jobs[0];
  odd.name = "a\nb)";
  EXPECT_EQ(proc_comm(odd), "a?b)");
}

TEST(ProcfsFiles, StatusCarriesTheUid) {
  Scenario s = testing::parse_ok(kScenario);
  auto w = process_windows(s, 5 * S);
  const std::string status = proc_status(s, s.jobs[1], w[2]);
  std::map<std::string, std::string> fields;
  for (const std::string& line : split(status, '\n')) {
    auto colon = line.find(':');
    ASSERT_NE(colon, std::string::npos) << line;
    ASSERT_EQ(line[colon + 1], '\t') << line;
    fields[line.substr(0, colon)] = line.substr(colon + 2);
  }
  EXPECT_EQ(fields["Name"], "slurm-v1");
  EXPECT_EQ(fields["Pid"], "300");
  EXPECT_EQ(fields["Tgid"], "300");
  EXPECT_EQ(fields["Uid"], "7777\t7777\t7777\t7777");
  EXPECT_EQ(fields["Gid"], "7777\t7777\t7777\t7777");
  EXPECT_EQ(fields["State"], "S (sleeping)");
}

TEST(ProcfsFiles, CgroupV2AndV1) {
  Scenario s = testing::parse_ok(kScenario);
  EXPECT_EQ(proc_cgroup(s.jobs[0]), "0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-abc.scope\n");
  const auto v1 = split(proc_cgroup(s.jobs[1]), '\n');
  ASSERT_EQ(v1.size(), 12u);
  std::set<std::string> controllers;
  for (const std::string& line : v1) {
    auto parts = split(line, ':');
    ASSERT_EQ(parts.size(), 3u) << line;
    EXPECT_NE(parts[0], "0") << "a v1-only host has no unified line";
    EXPECT_EQ(parts[2], "/slurm/uid_7777/job_1/step_0");
    controllers.insert(parts[1]);
  }
  EXPECT_EQ(v1.front(), "12:devices:/slurm/uid_7777/job_1/step_0");
  EXPECT_EQ(v1.back(), "1:name=systemd:/slurm/uid_7777/job_1/step_0");
  for (const char* c : {"memory", "cpu,cpuacct", "devices", "name=systemd", "pids", "freezer"})
    EXPECT_TRUE(controllers.count(c)) << c;
  Job root = s.jobs[2];  // no cgroup: the root cgroup
  EXPECT_EQ(proc_cgroup(root), "0::/\n");
}

TEST(ProcfsFiles, EnvironIsNulSeparatedWithPathAndHome) {
  Scenario s = testing::parse_ok(kScenario);
  const std::string env = proc_environ(s, s.jobs[0]);
  ASSERT_FALSE(env.empty());
  EXPECT_EQ(env.back(), '\0');
  EXPECT_EQ(env.find('\n'), std::string::npos);
  EXPECT_EQ(split(env, '\0'),
            (std::vector<std::string>{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                      "HOME=/home/alice", "GPUMETER_PROJECT=nlp", "POD_NAMESPACE=team-nlp"}));
  // The job's own PATH wins; an unknown uid's home is /; root's is /root.
  EXPECT_EQ(split(proc_environ(s, s.jobs[1]), '\0'),
            (std::vector<std::string>{"HOME=/", "PATH=/opt/bin", "SLURM_JOB_ID=1"}));
  EXPECT_EQ(split(proc_environ(s, s.jobs[2]), '\0')[1], "HOME=/root");
}

TEST(ProcfsFiles, PasswdHasRootAndTheScenarioUsers) {
  Scenario s = testing::parse_ok(kScenario);
  const auto lines = split(etc_passwd(s), '\n');
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "root:x:0:0:root:/root:/bin/bash");
  EXPECT_EQ(lines[1], "alice:x:2050:2050::/home/alice:/bin/bash");
  EXPECT_EQ(lines[2], "bob:x:1001:1001::/home/bob:/bin/bash");
  for (const std::string& line : lines) EXPECT_EQ(split(line + "\n", ':').size(), 7u) << line;
}

TEST(ProcfsTree, SyncWritesReplacesAndRemovesEntries) {
  Scenario s = testing::parse_ok(kScenario);
  fs::path dir = fresh_dir("tree");
  auto tree = ProcfsTree::open(dir, s, 5 * S);
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  EXPECT_EQ(read(dir / "etc" / "passwd"), etc_passwd(s));
  EXPECT_TRUE(entries(dir / "proc").empty());

  ASSERT_TRUE((*tree)->sync(25 * S).ok());
  EXPECT_EQ(entries(dir / "proc"), (std::set<std::string>{"100", "101", "300"}));
  EXPECT_EQ(entries(dir / "proc" / "300"),
            (std::set<std::string>{"cgroup", "cmdline", "comm", "environ", "stat", "status"}));
  EXPECT_EQ(read(dir / "proc" / "300" / "comm"), "slurm-v1\n");
  EXPECT_EQ(read(dir / "proc" / "300" / "cgroup"), proc_cgroup(s.jobs[1]));
  EXPECT_EQ(read(dir / "proc" / "100" / "environ"), proc_environ(s, s.jobs[0]));
  EXPECT_EQ(read(dir / "proc" / "101" / "cmdline"), std::string("train (x) y") + '\0');

  ASSERT_TRUE((*tree)->sync(150 * S).ok());
  EXPECT_EQ(entries(dir / "proc"), (std::set<std::string>{"500"}));
  EXPECT_EQ(read(dir / "proc" / "500" / "comm"), "reuse-a\n");
  // The same pid for another job: replaced in place, with its new start time and owner.
  ASSERT_TRUE((*tree)->sync(202 * S).ok());
  EXPECT_EQ(entries(dir / "proc"), (std::set<std::string>{"500"}));  // no temporary left over
  EXPECT_EQ(read(dir / "proc" / "500" / "comm"), "reuse-b\n");
  EXPECT_EQ(stat_fields(read(dir / "proc" / "500" / "stat"))[21], std::to_string((86400 + 204) * 100));
  EXPECT_NE(read(dir / "proc" / "500" / "status").find("Uid:\t1001\t"), std::string::npos);
  EXPECT_EQ((*tree)->present(), (std::map<unsigned, std::size_t>{{500, 3}}));

  ASSERT_TRUE((*tree)->sync(350 * S).ok());
  EXPECT_TRUE(entries(dir / "proc").empty());
  // Before the epoch the library reads time 0, and so does the tree.
  ASSERT_TRUE((*tree)->sync(-100 * S).ok());
  EXPECT_EQ(entries(dir / "proc"), (std::set<std::string>{"600"}));
}

TEST(ProcfsTree, ARebasedTreeCountsStartTimesFromItsNewBoot) {
  // A held clock's tree opens a day after its boot and learns its epoch 7 s later: a job that
  // starts 204 s into the scenario started 1 day + 7 s + 204 s after the boot.
  Scenario s = testing::parse_ok(kScenario);
  fs::path dir = fresh_dir("rebase");
  auto tree = ProcfsTree::open(dir, s, 5 * S, SimulatedBoot{1'000'000, 86400 * S});
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  (*tree)->rebase((86400 + 7) * S);
  ASSERT_TRUE((*tree)->sync(202 * S).ok());
  EXPECT_EQ(stat_fields(read(dir / "proc" / "500" / "stat"))[21], std::to_string((86400 + 7 + 204) * 100));
  EXPECT_NE(read(dir / "proc" / "stat").find("btime 1000000\n"), std::string::npos);
}

TEST(ProcfsTree, TakesOverWhatAnEarlierRunLeft) {
  Scenario s = testing::parse_ok(kScenario);
  fs::path dir = fresh_dir("takeover");
  fs::create_directories(dir / "proc" / "100");
  std::ofstream(dir / "proc" / "100" / "comm") << "stale\n";
  fs::create_directories(dir / "proc" / "999");
  fs::create_directories(dir / "proc" / ".42.tmp");
  fs::create_directories(dir / "proc" / ".43.old");
  fs::create_directories(dir / "proc" / "self-notes");  // not a pid: left alone
  auto tree = ProcfsTree::open(dir, s, 5 * S);
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  EXPECT_EQ(entries(dir / "proc"), (std::set<std::string>{"100", "999", "self-notes"}));
  ASSERT_TRUE((*tree)->sync(40 * S).ok());
  EXPECT_EQ(entries(dir / "proc"), (std::set<std::string>{"100", "101", "self-notes"}));
  EXPECT_EQ(read(dir / "proc" / "100" / "comm"), "train (x) y\n");
}

TEST(ProcfsTree, NextChangeIsTheNextWindowEdge) {
  Scenario s = testing::parse_ok(kScenario);
  fs::path dir = fresh_dir("edges");
  auto tree = ProcfsTree::open(dir, s, 5 * S);
  ASSERT_TRUE(tree.ok());
  // pid 600 passes from same-instant-a to -b at the midpoint of their (empty) gap, 2 ms.
  EXPECT_EQ((*tree)->next_change_after(-50 * S), 2000);
  EXPECT_EQ((*tree)->next_change_after(0), 2000);
  EXPECT_EQ((*tree)->next_change_after(5 * S), 5003000);
  EXPECT_EQ((*tree)->next_change_after(5003000), 15 * S);
  EXPECT_EQ((*tree)->next_change_after(15 * S), 35 * S);
  EXPECT_EQ((*tree)->next_change_after(395 * S), 1005 * S);
  EXPECT_EQ((*tree)->next_change_after(1005 * S), kForever);
}

// A clock that jumps to whatever time is waited for, and stops past `stop_after`.
class SteppingClock : public HostClock {
 public:
  explicit SteppingClock(Micros start, Micros stop_after) : t_(start), stop_after_(stop_after) {}
  Micros now() override { return t_; }
  bool started() const override { return true; }
  std::optional<std::int64_t> epoch_unix_us() const override { return std::nullopt; }
  bool wait_until(Micros t) override {
    waits.push_back(t);
    if (t > stop_after_) return false;
    t_ = t;
    return true;
  }
  std::vector<Micros> waits;

 private:
  Micros t_;
  Micros stop_after_;
};

TEST(ProcfsFollow, EntriesAppearLeadBeforeAndGoLeadAfter) {
  Scenario s = testing::parse_ok(kScenario);
  fs::path dir = fresh_dir("follow");
  auto tree = ProcfsTree::open(dir, s, 5 * S);
  ASSERT_TRUE(tree.ok());
  SteppingClock clock(0, 500 * S);
  // pid -> the times its entry (and which job) came and went, seen on disk after each sync.
  std::map<std::string, std::vector<std::pair<Micros, std::string>>> seen;
  std::set<std::string> before;
  std::map<std::string, std::string> comm_before;
  auto observe = [&](Micros t) {
    std::set<std::string> now = entries(dir / "proc");
    std::map<std::string, std::string> comm_now;
    for (const std::string& pid : now) {
      ASSERT_NE(pid[0], '.') << "a temporary entry is visible at " << t;
      comm_now[pid] = read(dir / "proc" / pid / "comm");
      ASSERT_FALSE(comm_now[pid].empty());
      if (!before.count(pid) || comm_before[pid] != comm_now[pid]) seen[pid].push_back({t, "+" + comm_now[pid]});
    }
    for (const std::string& pid : before) {
      if (!now.count(pid)) seen[pid].push_back({t, "-"});
    }
    before = now;
    comm_before = comm_now;
  };
  ASSERT_TRUE(follow(**tree, clock, observe).ok());
  using Events = std::vector<std::pair<Micros, std::string>>;
  EXPECT_EQ(seen["100"], (Events{{5 * S, "+train (x) y\n"}, {65 * S, "-"}}));
  EXPECT_EQ(seen["300"], (Events{{15 * S, "+slurm-v1\n"}, {35 * S, "-"}}));
  EXPECT_EQ(seen["500"],
            (Events{{95 * S, "+reuse-a\n"}, {202 * S, "+reuse-b\n"}, {305 * S, "-"}, {395 * S, "+reuse-c\n"}}));
  // comm is cut to 15 bytes: "same-instant-a" fits, and so does "same-instant-b".
  EXPECT_EQ(seen["600"], (Events{{0, "+same-instant-a\n"}, {2000, "+same-instant-b\n"}, {5003000, "-"}}));
  EXPECT_EQ(seen.count("700"), 0u);
  // It slept from edge to edge, never polling, and stopped when the clock said so.
  EXPECT_EQ(clock.waits.back(), 1005 * S);
  EXPECT_EQ(clock.waits.size(), 11u);
}

// An environment of exactly these variables, for make_scenario_clock().
EnvLookup env_of(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST(ProcfsClock, FollowsTheLibrarysEpochAndScale) {
  Scenario s = testing::parse_ok(kScenario);
  const double now = static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count()) /
                     1e6;
  const EnvLookup env = env_of({{"GPUMETER_SIM_EPOCH", std::to_string(now - 10)}, {"GPUMETER_SIM_TIME_SCALE", "100"}});
  auto clock = make_scenario_clock(s, "x.yaml", env, std::nullopt);
  ASSERT_TRUE(clock.ok()) << clock.error().message;
  const Micros t = (*clock)->now();
  EXPECT_GE(t, 1000 * S);
  EXPECT_LT(t, 1030 * S);
  // A scenario second is 10 ms of wall time here.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE((*clock)->wait_until(t + 2 * S));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE((*clock)->now(), t + 2 * S);
  EXPECT_LT(waited, std::chrono::milliseconds(500));

  // No epoch and no fallback: time stands at 0. A fallback epoch starts the clock there.
  auto frozen = make_scenario_clock(
      s, "x.yaml", [](const char*) -> const char* { return nullptr; }, std::nullopt);
  ASSERT_TRUE(frozen.ok());
  EXPECT_EQ((*frozen)->now(), 0);
  auto started = make_scenario_clock(
      s, "x.yaml", [](const char*) -> const char* { return nullptr; }, static_cast<std::int64_t>((now - 3) * 1e9));
  ASSERT_TRUE(started.ok());
  EXPECT_GE((*started)->now(), 3 * S);  // the scenario's own time_scale, 1
  EXPECT_LT((*started)->now(), 30 * S);

  auto bad = make_scenario_clock(
      s, "x.yaml",
      [](const char* name) -> const char* { return std::string(name) == "GPUMETER_SIM_EPOCH" ? "yesterday" : nullptr; },
      std::nullopt);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "GPUMETER_SIM_EPOCH: expected unix time in seconds, got 'yesterday'");
}

double unix_seconds_now() {
  return static_cast<double>(
             std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
                 .count()) /
         1e6;
}

fs::path made_dir(const std::string& name) {
  fs::path dir = fresh_dir(name);
  fs::create_directories(dir);
  return dir;
}

void write_epoch(const fs::path& file, const std::string& text) {
  const fs::path tmp = file.string() + ".tmp";
  std::ofstream(tmp) << text;
  fs::rename(tmp, file);
}

TEST(ProcfsClock, AHeldClockStandsAtZeroUntilItsFileIsWritten) {
  sigset_t old;
  pthread_sigmask(SIG_SETMASK, nullptr, &old);
  block_stop_signals();  // the waiting thread inherits the mask
  Scenario s = testing::parse_ok(kScenario);
  const fs::path file = made_dir("held-clock") / "epoch";
  const EnvLookup env = env_of({{"GPUMETER_SIM_EPOCH_FILE", file.string()}, {"GPUMETER_SIM_TIME_SCALE", "100"}});
  auto clock = make_scenario_clock(s, "x.yaml", env, std::nullopt);
  ASSERT_TRUE(clock.ok()) << clock.error().message;
  EXPECT_EQ((*clock)->now(), 0);
  // While held, scenario time 0 is now: a tree opened then boots a day before it.
  const double before = unix_seconds_now();
  ASSERT_TRUE((*clock)->epoch_unix_us().has_value());
  EXPECT_GE(static_cast<double>(*(*clock)->epoch_unix_us()) / 1e6, before - 1e-3);

  // Nothing but the file ends the wait: not the passing of wall time, nor a file that is not yet
  // a number.
  std::atomic<bool> done{false};
  bool arrived = false;
  std::thread waiter([&] {
    arrived = (*clock)->wait_until(S);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  write_epoch(file, "");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(done.load());
  EXPECT_EQ((*clock)->now(), 0);
  // Written: the epoch is 10 wall seconds ago, 1000 scenario seconds at scale 100.
  write_epoch(file, std::to_string(unix_seconds_now() - 10) + "\n");
  waiter.join();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  EXPECT_TRUE(arrived);
  EXPECT_GE((*clock)->now(), 1000 * S);
  EXPECT_LT((*clock)->now(), 1030 * S);

  // The epoch is fixed once read: a later file changes nothing.
  const auto epoch = (*clock)->epoch_unix_us();
  write_epoch(file, "5\n");
  EXPECT_EQ((*clock)->epoch_unix_us(), epoch);

  auto both = make_scenario_clock(
      s, "x.yaml", env_of({{"GPUMETER_SIM_EPOCH", "5"}, {"GPUMETER_SIM_EPOCH_FILE", file.string()}}), std::nullopt);
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.error().message, "GPUMETER_SIM_EPOCH and GPUMETER_SIM_EPOCH_FILE cannot both be set");
}

TEST(ScenarioClock, HeldTimestampsFollowTheWallClockAndContinueAtTheEpoch) {
  const fs::path file = made_dir("held-stamps") / "epoch";
  ScenarioClock clock(1.0, file.string());
  EXPECT_FALSE(clock.epoch_ns().has_value());
  const auto wall_us = [] { return ScenarioClock::wall_now_ns() / 1000; };
  const std::int64_t a = wall_us();
  const std::int64_t held = clock.unix_micros(clock.now());
  EXPECT_GE(held, a);
  EXPECT_LE(held, wall_us());
  write_epoch(file, std::to_string(unix_seconds_now() - 2));
  ASSERT_TRUE(clock.epoch_ns().has_value());
  const std::int64_t b = wall_us();
  const std::int64_t started = clock.unix_micros(clock.now());
  // Scenario time now plus the epoch is the wall clock, to the microsecond of rounding.
  EXPECT_GE(started, b - 1);
  EXPECT_LE(started, wall_us());
  EXPECT_GE(started, held);
  EXPECT_GE(clock.now(), 2 * S - S / 1000);
}

TEST(ScenarioClock, AnEpochFileIsReadAsUnixSeconds) {
  const fs::path dir = made_dir("epoch-file");
  EXPECT_FALSE(read_epoch_file((dir / "missing").string()).has_value());
  write_epoch(dir / "e", "12.5\n");
  EXPECT_EQ(read_epoch_file((dir / "e").string()), std::optional<std::int64_t>(12'500'000'000));
  for (const char* bad : {"", "soon", "12.5 13", "-1", "nan"}) {
    write_epoch(dir / "e", bad);
    EXPECT_FALSE(read_epoch_file((dir / "e").string()).has_value()) << bad;
  }
  fs::create_directory(dir / "d");
  EXPECT_FALSE(read_epoch_file((dir / "d").string()).has_value());
}

TEST(ProcfsClock, AStopSignalEndsTheWait) {
  sigset_t old;
  pthread_sigmask(SIG_SETMASK, nullptr, &old);
  block_stop_signals();
  Scenario s = testing::parse_ok(kScenario);
  auto clock = make_scenario_clock(
      s, "x.yaml", [](const char*) -> const char* { return nullptr; },
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  ASSERT_TRUE(clock.ok());
  ASSERT_EQ(::raise(SIGTERM), 0);  // blocked, so it waits for the clock to take it
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE((*clock)->wait_until(3600 * S));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_FALSE(wait_for_stop_signal(1'000'000));  // consumed; 1 ms timeout
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

TEST(ProcfsFollow, RunsOnTheWallClockUntilStopped) {
  // 1 scenario second = 100 ms of wall time: the job runs 2-4 s (200-400 ms), its entry
  // comes at 1.5 s (150 ms) and goes at 4.5 s (450 ms).
  Scenario s = testing::parse_ok(std::string(testing::kModel) +
                                 "gpus: {count: 1, model: m}\ntime_scale: 10\njobs:\n"
                                 "  - {name: quick, start: 2, end: 4, gpus: [0], pid: 4242, utilization: 0.5}\n");
  fs::path dir = fresh_dir("follow-wall");
  auto tree = ProcfsTree::open(dir, s, S / 2);
  ASSERT_TRUE(tree.ok());
  sigset_t old;
  pthread_sigmask(SIG_SETMASK, nullptr, &old);
  block_stop_signals();  // the follower thread inherits the mask
  const auto epoch_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto clock = make_scenario_clock(
      s, "x.yaml", [](const char*) -> const char* { return nullptr; }, epoch_ns);
  ASSERT_TRUE(clock.ok());
  std::vector<std::pair<Micros, std::size_t>> syncs;  // time, entries present
  std::atomic<bool> done{false};
  Result<void> result;
  std::thread follower([&] {
    result = follow(**tree, **clock, [&](Micros t) { syncs.push_back({t, entries(dir / "proc").size()}); });
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_FALSE(done.load());
  pthread_kill(follower.native_handle(), SIGTERM);
  follower.join();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ASSERT_TRUE(result.ok()) << result.error().message;
  ASSERT_EQ(syncs.size(), 3u);
  EXPECT_LT(syncs[0].first, 3 * S / 2);
  EXPECT_EQ(syncs[0].second, 0u);
  // Synced at the edge or just after it (the clock has moved on by the time it wakes).
  EXPECT_GE(syncs[1].first, 3 * S / 2);
  EXPECT_LT(syncs[1].first, 2 * S);
  EXPECT_EQ(syncs[1].second, 1u);
  EXPECT_GE(syncs[2].first, 9 * S / 2);
  EXPECT_LT(syncs[2].first, 5 * S);
  EXPECT_EQ(syncs[2].second, 0u);
}

}  // namespace
}  // namespace gpumeter::sim
