// `gpumeter sim truth|check` through CLI11, as the main program wires them.

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "mig_scenario.h"
#include "sim/cli/sim_cli.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

CliRun run(std::vector<std::string> args) {
  CLI::App app{"gpumeter"};
  CliRun r;
  auto* sim = app.add_subcommand("sim", "fleet simulator");
  setup_sim_command(*sim, r.exit_code);
  std::ostringstream out, err;
  auto* old_out = std::cout.rdbuf(out.rdbuf());
  auto* old_err = std::cerr.rdbuf(err.rdbuf());
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  reversed.push_back("sim");
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    r.exit_code = 100 + e.get_exit_code();
  }
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

const std::string kScenario = std::string(testing::kModel) + R"(
gpus: {count: 2, model: m}
duration: 100
jobs:
  - {name: a, start: 10, end: 60, gpus: [0], pid: 100, uid: 1000, cgroup: /a.scope,
     env: {GPUMETER_PROJECT: p1}, kubernetes: {namespace: team-a, pod: a-0, container: main},
     memory: 1GiB, utilization: 0.5}
  - {name: b, start: 30, gpus: [0, 1], pids: [200, 201], uid: 2000, cgroup_version: 1, cgroup: /slurm/b,
     utilization: 0.25}
users: {dana: 1000, alice: 2000}
faults:
  - {kind: xid, gpu: 1, at: 5, code: 79}
)";

TEST(SimCli, TruthJsonHasStableKeysAndExactValues) {
  std::string path = testing::write_file("cli.yaml", kScenario);
  CliRun r = run({"truth", "--scenario", path, "--from", "0", "--to", "100", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::ordered_json::parse(r.out);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"scenario", "from_seconds", "to_seconds", "window_seconds", "gpus", "jobs",
                                            "users"}));
  std::vector<std::string> users;
  for (auto it = j["users"].begin(); it != j["users"].end(); ++it) users.push_back(it.key());
  EXPECT_EQ(users, (std::vector<std::string>{"dana", "alice"}));  // file order
  EXPECT_EQ(j["users"]["alice"], 2000);
  ASSERT_EQ(j["gpus"].size(), 2u);
  std::vector<std::string> gpu_keys;
  for (auto it = j["gpus"][0].begin(); it != j["gpus"][0].end(); ++it) gpu_keys.push_back(it.key());
  EXPECT_EQ(gpu_keys,
            (std::vector<std::string>{"gpu", "uuid", "model", "busy_seconds", "energy_joules", "idle_energy_joules",
                                      "memory_byte_seconds", "allocated_seconds", "idle_seconds", "profiling"}));
  // GPU 0: 50% on [10, 30), 75% on [30, 60), 25% on [60, 100).
  EXPECT_NEAR(j["gpus"][0]["busy_seconds"].template get<double>(), 10 + 22.5 + 10, 1e-9);
  EXPECT_NEAR(j["gpus"][0]["idle_seconds"].template get<double>(), 10, 1e-9);
  ASSERT_EQ(j["jobs"].size(), 3u);
  EXPECT_EQ(j["jobs"][0]["name"], "a");
  EXPECT_EQ(j["jobs"][0]["pid"], 100);
  EXPECT_EQ(j["jobs"][0]["uid"], 1000);
  EXPECT_EQ(j["jobs"][0]["cgroup"], "/a.scope");
  EXPECT_EQ(j["jobs"][0]["env"]["GPUMETER_PROJECT"], "p1");
  std::vector<std::string> job_keys;
  for (auto it = j["jobs"][0].begin(); it != j["jobs"][0].end(); ++it) job_keys.push_back(it.key());
  EXPECT_EQ(job_keys, (std::vector<std::string>{"name", "gpu", "uuid", "pid", "uid", "cgroup", "env", "kubernetes",
                                                "allocated_seconds", "busy_seconds", "memory_byte_seconds",
                                                "energy_joules", "idle_power_energy_joules"}));
  EXPECT_EQ(j["jobs"][0]["kubernetes"].dump(), R"({"namespace":"team-a","pod":"a-0","container":"main"})");
  EXPECT_FALSE(j["jobs"][1].contains("kubernetes"));  // not a pod: left out
  EXPECT_NEAR(j["jobs"][0]["allocated_seconds"].template get<double>(), 20 + 15, 1e-9);
  EXPECT_EQ(j["jobs"][2]["name"], "b");
  EXPECT_EQ(j["jobs"][2]["gpu"], 1);
  EXPECT_EQ(j["jobs"][2]["pid"], 201);
}

TEST(SimCli, TruthTableIsAligned) {
  std::string path = testing::write_file("cli.yaml", kScenario);
  CliRun r = run({"truth", "--scenario", path, "--to", "1m40s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line, header;
  std::vector<std::string> gpu_lines;
  while (std::getline(lines, line)) {
    if (line.rfind("GPU", 0) == 0) header = line;
    if (!header.empty() && line.rfind("JOB", 0) == 0) break;
    if (!header.empty() && !line.empty()) gpu_lines.push_back(line);
  }
  ASSERT_EQ(gpu_lines.size(), 3u) << r.out;
  // Right-aligned numbers: every row ends its BUSY_S column where the header does.
  std::size_t busy_end = header.find("BUSY_S") + 6;
  EXPECT_EQ(gpu_lines[1].substr(busy_end - 6, 6), "42.500") << r.out;
  EXPECT_NE(r.out.find("/a.scope"), std::string::npos);
}

TEST(SimCli, TruthDefaultsToTheScenarioDuration) {
  std::string path = testing::write_file("cli.yaml", kScenario);
  CliRun r = run({"truth", "--scenario", path, "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["to_seconds"], 100.0);
}

TEST(SimCli, BadInputExitsTwoWithAMessage) {
  std::string path = testing::write_file("cli.yaml", kScenario);
  std::string bad = testing::write_file("cli-bad.yaml", "models: {m: {name: x}}\n");
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{"truth", "--to", "10"}, "--scenario is required"},
      {{"truth", "--scenario", "/nonexistent.yaml", "--to", "10"}, "/nonexistent.yaml: no such file"},
      {{"truth", "--scenario", bad, "--to", "10"}, bad + ":1:13: models.m: missing required key 'memory'"},
      {{"truth", "--scenario", path, "--from", "50", "--to", "50"}, "--from (50 s) must be earlier than --to (50 s)"},
      {{"truth", "--scenario", path, "--from", "ten"}, "--from: expected scenario seconds"},
      {{"truth", "--scenario", path, "--format", "xml"}, "--format must be table or json, got 'xml'"},
      {{"check", "--scenario", bad}, bad + ":1:13:"},
      {{"check"}, "--scenario is required"},
  };
  for (const Case& c : cases) {
    CliRun r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args[0] << " " << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << "got: " << r.err << "\nexpected: " << c.message;
    EXPECT_TRUE(r.out.empty());
  }
}

TEST(SimCli, TruthJsonUsersIsAnEmptyObjectWithoutUsers) {
  std::string path = testing::write_file("cli-nousers.yaml", std::string(testing::kModel) + R"(
gpus: {count: 1, model: m}
jobs:
  - {name: a, gpus: [0], pid: 100, utilization: 0.5}
)");
  CliRun r = run({"truth", "--scenario", path, "--to", "10", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["users"], nlohmann::json::object());
}

TEST(SimCli, ProcfsWritesTheProcessesPresentAtATime) {
  std::string path = testing::write_file("cli.yaml", kScenario);
  auto dir = testing::temp_dir() / "cli-procfs";
  std::filesystem::remove_all(dir);
  CliRun r = run({"procfs", "--scenario", path, "--out", dir.string(), "--at", "40"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, dir.string() + "/proc: 3 processes at scenario time 40 s\n");
  for (const char* pid : {"100", "200", "201"}) EXPECT_TRUE(std::filesystem::exists(dir / "proc" / pid / "stat"));
  EXPECT_TRUE(std::filesystem::exists(dir / "etc" / "passwd"));

  // A later time replaces the tree's content: a ended at 60, its entry goes 5 s later.
  r = run({"procfs", "--scenario", path, "--out", dir.string(), "--at", "64.999999"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir / "proc" / "100"));
  r = run({"procfs", "--scenario", path, "--out", dir.string(), "--at", "65", "--lead", "5s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "proc" / "100"));
  EXPECT_TRUE(std::filesystem::exists(dir / "proc" / "201"));
  // A zero lead: only what runs at that instant.
  r = run({"procfs", "--scenario", path, "--out", dir.string(), "--at", "9", "--lead", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, dir.string() + "/proc: 0 processes at scenario time 9 s\n");
}

TEST(SimCli, ProcfsWithoutEpochWritesTimeZero) {
  std::string path = testing::write_file("cli.yaml", kScenario);
  auto dir = testing::temp_dir() / "cli-procfs-now";
  std::filesystem::remove_all(dir);
  ::unsetenv("GPUMETER_SIM_EPOCH");
  CliRun r = run({"procfs", "--scenario", path, "--out", dir.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, dir.string() + "/proc: 0 processes at scenario time 0 s\n");  // a starts at 10
  // With an epoch 37 s ago at scale 1, now is 37 s: a (10-60) and b (30-) run.
  const double epoch = static_cast<double>(std::time(nullptr)) - 37;
  ::setenv("GPUMETER_SIM_EPOCH", std::to_string(epoch).c_str(), 1);
  ::setenv("GPUMETER_SIM_TIME_SCALE", "1", 1);
  r = run({"procfs", "--scenario", path, "--out", dir.string()});
  ::unsetenv("GPUMETER_SIM_EPOCH");
  ::unsetenv("GPUMETER_SIM_TIME_SCALE");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("3 processes at scenario time 3"), std::string::npos) << r.out;
}

TEST(SimCli, ProcfsBadInput) {
  std::string path = testing::write_file("cli.yaml", kScenario);
  std::string bad = testing::write_file("cli-bad.yaml", "models: {m: {name: x}}\n");
  auto dir = (testing::temp_dir() / "cli-procfs-bad").string();
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string message;
  };
  const Case cases[] = {
      {{"procfs", "--out", dir}, 2, "gpumeter sim procfs: --scenario is required"},
      {{"procfs", "--scenario", path}, 2, "gpumeter sim procfs: --out is required"},
      {{"procfs", "--scenario", bad, "--out", dir}, 2, bad + ":1:13: models.m: missing required key 'memory'"},
      {{"procfs", "--scenario", path, "--out", dir, "--lead", "soon"}, 2, "--lead: expected a scenario duration"},
      {{"procfs", "--scenario", path, "--out", dir, "--at", "-5"}, 2, "--at: expected scenario seconds"},
      {{"procfs", "--scenario", path, "--out", dir, "--at", "5", "--follow"},
       2,
       "--at and --follow cannot be combined"},
      {{"procfs", "--scenario", path, "--out", "/proc/gpumeter-cannot-write-here"},
       1,
       "gpumeter sim procfs: cannot create /proc/gpumeter-cannot-write-here/proc"},
  };
  for (const Case& c : cases) {
    CliRun r = run(c.args);
    EXPECT_EQ(r.exit_code, c.code) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << "got: " << r.err << "\nexpected: " << c.message;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  ::setenv("GPUMETER_SIM_TIME_SCALE", "fast", 1);
  CliRun r = run({"procfs", "--scenario", path, "--out", dir});
  ::unsetenv("GPUMETER_SIM_TIME_SCALE");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("GPUMETER_SIM_TIME_SCALE: expected a number above 0"), std::string::npos) << r.err;
}

TEST(SimCli, CheckSummarizesTheScenario) {
  std::string path = testing::write_file("cli.yaml", kScenario);
  CliRun r = run({"check", "--scenario", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, path + ": ok: 2 GPUs (2 x Test GPU 16GB), 2 jobs, 1 faults, 0 quirks, duration 100 s\n");
}

TEST(SimCli, CheckListsQuirks) {
  std::string path = testing::write_file("quirks.yaml", kScenario + R"(
quirks:
  - {kind: call_error, gpu: 1, call: nvmlDeviceGetFanSpeed, error: unknown, at: 5, duration: 10}
  - {kind: process_record_layout, record_bytes: 32}
  - {kind: garbage_process_records, gpu: 0, at: 60}
)");
  CliRun r = run({"check", "--scenario", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, path +
                       ": ok: 2 GPUs (2 x Test GPU 16GB), 2 jobs, 1 faults, 3 quirks, duration 100 s\n"
                       "  quirk: call_error: nvmlDeviceGetFanSpeed fails with unknown on GPU 1, from 5 s to 15 s\n"
                       "  quirk: process_record_layout: _v3 process records of 32 bytes on every GPU, from 0 s on\n"
                       "  quirk: garbage_process_records on GPU 0, from 60 s on\n");
}

// A scenario with `mig:` adds the per-instance truth, as the last JSON key and a table, under
// both policies; one without keeps its output unchanged.
TEST(SimCli, TruthShowsMigInstancesWhenTheScenarioHasThem) {
  const std::string path = testing::write_file("cli-mig.yaml", testing::mig_yaml());
  for (const char* policy : {"process", "scheduler"}) {
    CliRun r = run({"truth", "--scenario", path, "--format", "json", "--policy", policy});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::ordered_json::parse(r.out);
    ASSERT_TRUE(j.contains("mig")) << policy;
    EXPECT_EQ((--j.end()).key(), "mig");
    const auto& instances = j["mig"]["instances"];
    ASSERT_EQ(instances.size(), 5u);
    EXPECT_EQ(instances[0]["name"], "train");
    EXPECT_EQ(instances[0]["gpu_instance"], 1);
    EXPECT_EQ(instances[0]["profile"], "3g.40gb");
    EXPECT_EQ(instances[0]["mig_uuid"].get<std::string>().rfind("MIG-", 0), 0u);
    EXPECT_DOUBLE_EQ(j["mig"]["gpus"][0]["slice_seconds"].get<double>(), 630.0);
    const auto& merged_owner = instances[4]["owners"][0];
    EXPECT_EQ(merged_owner["owner"], std::string(policy) == "scheduler" ? "notebook-f" : "nb-f-kernel");
  }
  CliRun table = run({"truth", "--scenario", path});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("MIG instances"), std::string::npos);
  EXPECT_NE(table.out.find("GPU 0: 630.000 slice-seconds, 0.000 unallocated"), std::string::npos) << table.out;
  CliRun plain =
      run({"truth", "--scenario", testing::write_file("cli-plain.yaml", kScenario), "--to", "100", "--format", "json"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(nlohmann::ordered_json::parse(plain.out).contains("mig"));
}

}  // namespace
}  // namespace gpumeter::sim
