// Scenario files: a complete good file, the deploy/ scenarios, and one test per kind of
// error, each checking that the message names file:line:col and the field.

#include "sim/scenario/scenario_parse.h"

#include <gtest/gtest.h>

#include <set>

#include "sim/physics/timeline.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

constexpr Micros S = kMicrosPerSecond;

const std::string kGood = R"(description: everything the schema has
driver_version: "535.129.03"
cuda_driver_version: "12.2"
time_scale: 60
duration: 2h
uuid_seed: node-a
models:
  big:
    name: NVIDIA H100 80GB HBM3
    memory: 81559MiB
    memory_reserved: 512MiB
    power: {limit: 700, idle: 70.5, max: 690}
    temperature: {idle: 31, max: 72, memory_offset: 6}
    clocks:
      graphics: {idle: 345, max: 1980}
      sm: {idle: 345, max: 1980}
      memory: {idle: 2619, max: 2619}
      video: {idle: 765, max: 1545}
    fan: {idle: 0.25, max: 0.9}
    pcie: {generation: 5, width: 16, tx_bytes_per_second: 1GiB, rx_bytes_per_second: 2GiB,
           device_id: 0x2330, subsystem_id: 0x16C110DE}
    vbios_version: 96.00.74.00.0B
    ecc: false
gpus:
  - {model: big, uuid: GPU-11111111-2222-3333-4444-555555555555, serial: "1650000000001",
     pci_bus_id: "00000000:18:00.0"}
  - {model: big}
jobs:
  - name: train
    start: 1m
    end: 1h
    gpus: [0, 1]
    pids: [100, 101]
    uid: 1000
    cgroup: /kubepods.slice/pod.slice
    kubernetes: {namespace: team-nlp, pod: train-0.a, container: trainer}
    env: {GPUMETER_PROJECT: nlp, TEAM: a}
    memory: 40GiB
    utilization: {pattern: square, high: 0.9, low: 0.1, period: 10m, duty: 0.3, phase: 1m}
  - name: infer
    gpus: [1]
    pid: 200
    cgroup_version: 1
    utilization: 0.25
users: {dana: 1000, bob: 1001, _svc.x-1: 4000000000}
faults:
  - {kind: lost, gpu: 1, at: 10m, duration: 1m}
  - {kind: unknown_errors, gpu: 0, at: 20m, duration: 30s}
  - {kind: hang, gpu: 0, at: 30m, seconds: 1.5, call: nvmlDeviceGetPowerUsage}
  - {kind: xid, gpu: 1, at: 50m, code: 79}
  - {kind: xid, gpu: 0, at: 40m, code: 48}
  - {kind: driver_reload, at: 1h}
)";

TEST(ScenarioParse, ReadsEveryField) {
  Scenario s = testing::parse_ok(kGood);
  EXPECT_EQ(s.driver_version, "535.129.03");
  EXPECT_EQ(s.cuda_driver_version, 12020);
  EXPECT_EQ(s.time_scale, 60);
  EXPECT_EQ(s.duration, 7200 * S);
  ASSERT_EQ(s.models.size(), 1u);
  const GpuModelSpec& m = s.models[0];
  EXPECT_EQ(m.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(m.memory_total_bytes, 81559ULL << 20);
  EXPECT_EQ(m.memory_reserved_bytes, 512ULL << 20);
  EXPECT_EQ(m.power_limit_mw, 700000);
  EXPECT_EQ(m.idle_power_mw, 70500);
  EXPECT_EQ(m.max_power_mw, 690000);
  EXPECT_EQ(m.max_temperature_c, 72u);
  EXPECT_EQ(m.memory_temperature_offset_c, 6u);
  EXPECT_EQ(m.sm_clock.max_mhz, 1980u);
  EXPECT_EQ(m.memory_clock.idle_mhz, 2619u);
  EXPECT_TRUE(m.fan);
  EXPECT_EQ(m.fan_idle_percent, 25u);
  EXPECT_EQ(m.fan_max_percent, 90u);
  EXPECT_EQ(m.pcie_generation, 5u);
  EXPECT_EQ(m.pcie_tx_bytes_per_second, double(1ULL << 30));
  EXPECT_EQ(m.pci_device_id, 0x233010DEu);
  EXPECT_EQ(m.pci_subsystem_id, 0x16C110DEu);
  EXPECT_FALSE(m.ecc);

  ASSERT_EQ(s.gpus.size(), 2u);
  EXPECT_EQ(s.gpus[0].uuid, "GPU-11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(s.gpus[0].serial, "1650000000001");
  EXPECT_EQ(s.gpus[0].pci.bus, 0x18u);
  EXPECT_EQ(s.gpus[1].uuid.rfind("GPU-", 0), 0u);
  EXPECT_EQ(s.gpus[1].uuid.size(), 40u);
  EXPECT_NE(s.gpus[1].pci.bus, s.gpus[0].pci.bus);

  ASSERT_EQ(s.jobs.size(), 2u);
  const Job& train = s.jobs[0];
  EXPECT_EQ(train.start, 60 * S);
  EXPECT_EQ(train.end, 3600 * S);
  EXPECT_EQ(train.pids, (std::vector<unsigned>{100, 101}));
  EXPECT_EQ(train.uid, 1000u);
  EXPECT_EQ(train.cgroup, "/kubepods.slice/pod.slice");
  ASSERT_EQ(train.env.size(), 2u);
  EXPECT_EQ(train.env[0], (std::pair<std::string, std::string>{"GPUMETER_PROJECT", "nlp"}));
  EXPECT_EQ(train.memory_bytes, 40ULL << 30);
  EXPECT_EQ(train.cgroup_version, 2);
  EXPECT_EQ(train.kubernetes.namespace_, "team-nlp");
  EXPECT_EQ(train.kubernetes.pod, "train-0.a");
  EXPECT_EQ(train.kubernetes.container, "trainer");
  EXPECT_EQ(s.jobs[1].cgroup_version, 1);
  EXPECT_TRUE(s.jobs[1].kubernetes.empty());
  EXPECT_EQ(s.users,
            (std::vector<std::pair<std::string, unsigned>>{{"dana", 1000}, {"bob", 1001}, {"_svc.x-1", 4000000000U}}));
  const auto* sq = std::get_if<SquarePattern>(&train.utilization);
  ASSERT_NE(sq, nullptr);
  EXPECT_EQ(sq->high, 90);
  EXPECT_EQ(sq->period, 600 * S);
  EXPECT_EQ(sq->high_time, 180 * S);
  EXPECT_EQ(sq->phase, 60 * S);
  EXPECT_EQ(s.jobs[1].pids, (std::vector<unsigned>{200}));
  EXPECT_EQ(s.jobs[1].end, kForever);
  EXPECT_EQ(std::get<ConstantPattern>(s.jobs[1].utilization).percent, 25);

  ASSERT_EQ(s.lost.size(), 1u);
  EXPECT_EQ(s.lost[0].duration, 60 * S);
  ASSERT_EQ(s.unknown_errors.size(), 1u);
  ASSERT_EQ(s.hangs.size(), 1u);
  EXPECT_EQ(s.hangs[0].wall_seconds, 1.5);
  EXPECT_EQ(s.hangs[0].call, "nvmlDeviceGetPowerUsage");
  ASSERT_EQ(s.xids.size(), 2u);
  EXPECT_EQ(s.xids[0].code, 48u);  // sorted by time
  EXPECT_EQ(s.driver_reloads, (std::vector<Micros>{3600 * S}));
  EXPECT_EQ(s.fault_count(), 6u);
}

TEST(ScenarioParse, DefaultIdentitiesAreDeterministicAndSeeded) {
  const std::string yaml = std::string(testing::kModel) + "gpus: {count: 3, model: m}\n";
  Scenario a = testing::parse_ok(yaml);
  Scenario b = testing::parse_ok(yaml);
  Scenario c = testing::parse_ok(yaml + "uuid_seed: other-node\n");
  ASSERT_EQ(a.gpus.size(), 3u);
  for (unsigned i = 0; i < 3; ++i) {
    EXPECT_EQ(a.gpus[i].uuid, b.gpus[i].uuid);
    EXPECT_EQ(a.gpus[i].serial, b.gpus[i].serial);
    EXPECT_NE(a.gpus[i].uuid, c.gpus[i].uuid);
    EXPECT_EQ(a.gpus[i].serial.size(), 13u);
  }
  EXPECT_NE(a.gpus[0].uuid, a.gpus[1].uuid);
  EXPECT_EQ(a.driver_version, "550.90.07");
  EXPECT_EQ(a.duration, kForever);
}

TEST(ScenarioParse, DeployScenariosAreValid) {
  for (const char* name :
       {"h100-8x-three-teams.yaml", "bench-8x-64proc.yaml", "bench-8x-500proc.yaml", "faults-demo.yaml"}) {
    auto s = load_scenario(std::string(GPUMETER_SOURCE_DIR) + "/deploy/scenarios/" + name);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_FALSE(s->gpus.empty()) << name;
    EXPECT_FALSE(s->jobs.empty()) << name;
  }
  auto bench = load_scenario(std::string(GPUMETER_SOURCE_DIR) + "/deploy/scenarios/bench-8x-64proc.yaml");
  ASSERT_TRUE(bench.ok());
  EXPECT_EQ(bench->jobs.size(), 64u);
  auto teams = load_scenario(std::string(GPUMETER_SOURCE_DIR) + "/deploy/scenarios/h100-8x-three-teams.yaml");
  ASSERT_TRUE(teams.ok());
  EXPECT_EQ(teams->users.size(), 4u);
  EXPECT_EQ(teams->jobs[0].kubernetes.pod, "llm-pretrain-worker-0");
  EXPECT_EQ(teams->jobs.back().cgroup_version, 1);
  auto big = load_scenario(std::string(GPUMETER_SOURCE_DIR) + "/deploy/scenarios/bench-8x-500proc.yaml");
  ASSERT_TRUE(big.ok());
  ASSERT_EQ(big->jobs.size(), 500u);
  std::set<std::string> cgroups;
  std::vector<unsigned> per_gpu(big->gpus.size());
  for (const Job& j : big->jobs) {
    cgroups.insert(j.cgroup);
    ++per_gpu[j.gpus[0]];
    EXPECT_EQ(j.start, 0);
    EXPECT_EQ(j.end, kForever);
  }
  EXPECT_EQ(cgroups.size(), 500u);
  EXPECT_EQ(per_gpu, (std::vector<unsigned>{63, 63, 63, 63, 62, 62, 62, 62}));
  auto faults = load_scenario(std::string(GPUMETER_SOURCE_DIR) + "/deploy/scenarios/faults-demo.yaml");
  ASSERT_TRUE(faults.ok());
  EXPECT_FALSE(faults->lost.empty());
  EXPECT_FALSE(faults->hangs.empty());
  EXPECT_FALSE(faults->xids.empty());
  EXPECT_FALSE(faults->unknown_errors.empty());
  EXPECT_FALSE(faults->driver_reloads.empty());
}

// The integration tests' real-time scenarios promise exact per-process figures: every state
// change on a whole second and no GPU asked for more than 100 %.
TEST(ScenarioParse, LedgerScenariosChangeOnWholeSecondsWithinOneGpu) {
  for (const char* name : {"ledger-mixed.yaml", "ledger-churn.yaml"}) {
    auto s = load_scenario(std::string(GPUMETER_SOURCE_DIR) + "/tests/integration/scenarios/" + name);
    ASSERT_TRUE(s.ok()) << s.error().message;
    ASSERT_NE(s->duration, kForever) << name;
    EXPECT_LE(s->duration, 45 * S) << name;
    // The ledger test starts its agent 3 s before scenario time 0 and compares from time 0.
    for (const Job& j : s->jobs) EXPECT_GE(j.start, 3 * S) << name << " " << j.name;
    for (unsigned g = 0; g < s->gpus.size(); ++g) {
      GpuTimeline timeline(*s, g);
      timeline.for_each_segment(0, s->duration, [&](const Segment& seg) {
        EXPECT_EQ(seg.start % S, 0) << name << " GPU " << g;
        EXPECT_EQ(seg.end % S, 0) << name << " GPU " << g;
        EXPECT_LE(seg.sum_percent, 100) << name << " GPU " << g << " at " << to_seconds(seg.start);
      });
    }
  }
  auto churn = load_scenario(std::string(GPUMETER_SOURCE_DIR) + "/tests/integration/scenarios/ledger-churn.yaml");
  ASSERT_TRUE(churn.ok());
  EXPECT_EQ(churn->jobs.size(), 100u);
  std::set<unsigned> pids;
  for (const Job& j : churn->jobs) {
    pids.insert(j.pids[0]);
    EXPECT_GE(j.end - j.start, 2 * S);
    EXPECT_LE(j.end - j.start, 3 * S);
  }
  EXPECT_EQ(pids.size(), 100u);
  auto mixed = load_scenario(std::string(GPUMETER_SOURCE_DIR) + "/tests/integration/scenarios/ledger-mixed.yaml");
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->gpus.size(), 8u);
  ASSERT_EQ(mixed->driver_reloads.size(), 1u);
  EXPECT_GE(mixed->driver_reloads[0], 15 * S);
  EXPECT_LE(mixed->driver_reloads[0], 25 * S);
}

struct BadCase {
  const char* what;
  std::string yaml;
  std::string expected;  // the start of the message
};

std::string with_model(const std::string& rest) { return std::string(testing::kModel) + rest; }

// kModel starts with a blank line, so its first line ("models:") is line 2, and the
// lines after it start at line 14.
TEST(ScenarioParse, ErrorsNameFileLineColumnAndField) {
  const std::string gpus = "gpus: {count: 2, model: m}\n";
  const BadCase cases[] = {
      {"syntax", "models: [1, 2\n", "test.yaml:2:1: "},
      {"empty", "", "test.yaml:1:1: the scenario is empty"},
      {"unknown top-level key", with_model(gpus + "dration: 5\n"), "test.yaml:15:1: unknown key 'dration'"},
      {"duplicate key", with_model(gpus + "duration: 5\nduration: 6\n"), "test.yaml:16:1: duplicate key 'duration'"},
      {"unknown model key", "models:\n  m:\n    nmae: x\n", "test.yaml:3:5: models.m: unknown key 'nmae'"},
      {"missing model field", "models:\n  m:\n    name: x\n", "test.yaml:3:5: models.m: missing required key 'memory'"},
      {"bad byte size", R"(models:
  m:
    name: x
    memory: 80 gigs
)",
       "test.yaml:4:13: models.m.memory: expected a byte size"},
      {"unknown gpu model", with_model("gpus: {count: 2, model: h100}\n"),
       "test.yaml:14:25: gpus.model: unknown model 'h100' (models: m)"},
      {"too many GPUs", with_model("gpus: {count: 257, model: m}\n"), "test.yaml:14:15: gpus.count: must be between"},
      {"bad pci bus id", with_model("gpus:\n  - {model: m, pci_bus_id: zz}\n"),
       "test.yaml:15:28: gpus[0].pci_bus_id: expected a PCI bus id"},
      {"duplicate uuid", with_model("gpus:\n  - {model: m, uuid: GPU-a}\n  - {model: m, uuid: GPU-a}\n"),
       "test.yaml:16:5: gpus[1]: uuid GPU-a is also used by gpus[0]"},
      {"ratio not in whole percent", with_model(gpus + "jobs:\n  - {name: j, gpus: [0], pid: 1, utilization: 0.955}\n"),
       "test.yaml:16:47: jobs[0].utilization: expected a ratio from 0 to 1 in steps of 0.01"},
      {"ratio above one", with_model(gpus + "jobs:\n  - {name: j, gpus: [0], pid: 1, utilization: 1.5}\n"),
       "test.yaml:16:47: jobs[0].utilization: expected a ratio"},
      {"gpu index out of range", with_model(gpus + "jobs:\n  - {name: j, gpus: [0, 2], pid: 1, utilization: 0.5}\n"),
       "test.yaml:16:25: jobs[0].gpus[1]: must be between 0 and 1, got 2"},
      {"pid and pids", with_model(gpus + "jobs:\n  - {name: j, gpus: [0], pid: 1, pids: [1], utilization: 0.5}\n"),
       "test.yaml:16:5: jobs[0]: needs exactly one of 'pid'"},
      {"pids length", with_model(gpus + "jobs:\n  - {name: j, gpus: [0, 1], pids: [1], utilization: 0.5}\n"),
       "test.yaml:16:35: jobs[0].pids: expected a list of 2 pids"},
      {"end before start",
       with_model(gpus + "jobs:\n  - {name: j, start: 10, end: 5, gpus: [0], pid: 1, utilization: 0.5}\n"),
       "test.yaml:16:31: jobs[0].end: must be later than start"},
      {"bad duration", with_model(gpus + "jobs:\n  - {name: j, start: 5 min, gpus: [0], pid: 1, utilization: 0.5}\n"),
       "test.yaml:16:22: jobs[0].start: expected a non-negative duration"},
      {"unknown pattern",
       with_model(gpus + "jobs:\n  - {name: j, gpus: [0], pid: 1, utilization: {pattern: sine, value: 1}}\n"),
       "test.yaml:16:57: jobs[0].utilization.pattern: unknown pattern 'sine'"},
      {"key of another pattern",
       with_model(gpus + "jobs:\n  - {name: j, gpus: [0], pid: 1, utilization: {pattern: constant, high: 1}}\n"),
       "test.yaml:16:67: jobs[0].utilization: unknown key 'high' (expected one of: pattern, value)"},
      {"square without period",
       with_model(gpus + "jobs:\n  - {name: j, gpus: [0], pid: 1, utilization: {pattern: square, high: 1}}\n"),
       "test.yaml:16:47: jobs[0].utilization: missing required key 'period'"},
      {"trace going back in time",
       with_model(gpus + "jobs:\n  - name: j\n    gpus: [0]\n    pid: 1\n    utilization:\n      pattern: trace\n"
                         "      points: [[0, 0.5], [10, 0.2], [5, 0.1]]\n"),
       "test.yaml:21:38: jobs[0].utilization.points[2][0]: times must increase strictly"},
      {"duplicate job name",
       with_model(gpus + "jobs:\n  - {name: j, gpus: [0], pid: 1, utilization: 0.5}\n"
                         "  - {name: j, gpus: [1], pid: 2, utilization: 0.5}\n"),
       "test.yaml:17:12: jobs[1].name: job name 'j' is used twice"},
      {"memory over capacity",
       with_model(gpus + "jobs:\n  - {name: a, gpus: [0], pid: 1, memory: 10GiB, utilization: 0.5}\n"
                         "  - {name: b, start: 5, gpus: [0], pid: 2, memory: 10GiB, utilization: 0.5}\n"),
       "test.yaml:17:5: jobs[1]: jobs on GPU 0 would hold 21474836480 bytes at 5 s"},
      {"pid shared at the same time",
       with_model(gpus + "jobs:\n  - {name: a, end: 10, gpus: [0], pid: 7, utilization: 0.5}\n"
                         "  - {name: b, start: 5, gpus: [1], pid: 7, utilization: 0.5}\n"),
       "test.yaml:17:5: jobs[1]: pid 7 is also used by job 'a'"},
      {"unknown fault kind", with_model(gpus + "faults:\n  - {kind: fire, gpu: 0, at: 1}\n"),
       "test.yaml:16:12: faults[0].kind: unknown fault kind 'fire'"},
      {"fault on missing GPU", with_model(gpus + "faults:\n  - {kind: lost, gpu: 5, at: 1, duration: 2}\n"),
       "test.yaml:16:23: faults[0].gpu: must be between 0 and 1, got 5"},
      {"hang on unknown call",
       with_model(gpus + "faults:\n  - {kind: hang, gpu: 0, at: 1, seconds: 1, call: nvmlDeviceGetPower}\n"),
       "test.yaml:16:51: faults[0].call: 'nvmlDeviceGetPower' is not an NVML device function"},
      {"negative time scale", with_model(gpus + "time_scale: -1\n"), "test.yaml:15:13: time_scale: must be between"},
      {"cgroup version 3",
       with_model(gpus + "jobs:\n  - {name: j, gpus: [0], pid: 1, cgroup_version: 3, utilization: 0.5}\n"),
       "test.yaml:16:50: jobs[0].cgroup_version: must be between 1 and 2, got 3"},
      {"kubernetes without container",
       with_model(gpus + "jobs:\n  - {name: j, gpus: [0], pid: 1, kubernetes: {namespace: a, pod: b},\n"
                         "     utilization: 0.5}\n"),
       "test.yaml:16:46: jobs[0].kubernetes: missing required key 'container'"},
      {"kubernetes unknown key",
       with_model(gpus + "jobs:\n  - {name: j, gpus: [0], pid: 1,\n"
                         "     kubernetes: {namespace: a, pod: b, container: c, node: n}, utilization: 0.5}\n"),
       "test.yaml:17:55: jobs[0].kubernetes: unknown key 'node' (expected one of: namespace, pod, "
       "container)"},
      {"kubernetes not a mapping",
       with_model(gpus + "jobs:\n  - {name: j, gpus: [0], pid: 1, kubernetes: a/b, utilization: 0.5}\n"),
       "test.yaml:16:46: jobs[0].kubernetes: expected a mapping"},
      {"kubernetes bad namespace",
       with_model(gpus + "jobs:\n  - {name: j, gpus: [0], pid: 1,\n"
                         "     kubernetes: {namespace: Team_A, pod: b, container: c}, utilization: 0.5}\n"),
       "test.yaml:17:30: jobs[0].kubernetes.namespace: 'Team_A' is not a Kubernetes namespace name"},
      {"kubernetes bad pod",
       with_model(gpus + "jobs:\n  - {name: j, gpus: [0], pid: 1,\n"
                         "     kubernetes: {namespace: a, pod: -b, container: c}, utilization: 0.5}\n"),
       "test.yaml:17:38: jobs[0].kubernetes.pod: '-b' is not a Kubernetes pod name"},
      {"kubernetes empty container",
       with_model(gpus + "jobs:\n  - {name: j, gpus: [0], pid: 1,\n"
                         "     kubernetes: {namespace: a, pod: b, container: \"\"}, utilization: 0.5}\n"),
       "test.yaml:17:52: jobs[0].kubernetes.container: '' is not a Kubernetes container name"},
      {"duplicate env key",
       with_model(gpus + "jobs:\n  - {name: j, gpus: [0], pid: 1, env: {A: 1, A: 2}, utilization: 0.5}\n"),
       "test.yaml:16:46: jobs[0].env: duplicate key 'A'"},
      {"users not a mapping", with_model(gpus + "users: [alice]\n"),
       "test.yaml:15:8: users: expected a mapping of user names to uids"},
      {"duplicate user", with_model(gpus + "users: {alice: 2050, alice: 2051}\n"),
       "test.yaml:15:22: users: duplicate user 'alice'"},
      {"duplicate uid", with_model(gpus + "users: {alice: 2050, carol: 2050}\n"),
       "test.yaml:15:29: users.carol: uid 2050 is also used by user 'alice'"},
      {"user name with a colon", with_model(gpus + "users: {\"a:b\": 2050}\n"),
       "test.yaml:15:9: users: 'a:b' is not a valid user name"},
      {"user named root", with_model(gpus + "users: {root: 5}\n"),
       "test.yaml:15:9: users: 'root' (uid 0) is always present"},
      {"user with uid 0", with_model(gpus + "users: {admin: 0}\n"), "test.yaml:15:16: users.admin: uid 0 is root's"},
      {"bad uid", with_model(gpus + "users: {alice: -1}\n"),
       "test.yaml:15:16: users.alice: expected a non-negative integer, got '-1'"},
  };
  for (const BadCase& c : cases) {
    auto s = parse_scenario(c.yaml, "test.yaml");
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_EQ(s.error().message.rfind(c.expected, 0), 0u)
        << c.what << "\n  got:      " << s.error().message << "\n  expected: " << c.expected;
  }
}

TEST(ScenarioParse, LoadNamesTheFile) {
  auto missing = load_scenario("/nonexistent/scenario.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, "/nonexistent/scenario.yaml: no such file");
  std::string path = testing::write_file("bad.yaml", "models:\n  m: {name: x}\n");
  auto bad = load_scenario(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message.rfind(path + ":2:6: models.m: missing required key 'memory'", 0), 0u)
      << bad.error().message;
  auto dir = load_scenario(testing::temp_dir().string());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.error().message.find("not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace gpumeter::sim
