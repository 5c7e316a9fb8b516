// The agent's config file: defaults, every key, the shipped example, and one case per kind
// of error, each checking that the message names file:line:col and the field.

#include "config/config.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <utility>

namespace gpumeter {
namespace {

using std::chrono::milliseconds;
using Strings = std::vector<std::string>;

Config parse_ok(const std::string& yaml) {
  auto c = parse_config(yaml, "test.yaml");
  EXPECT_TRUE(c.ok()) << c.error().message;
  return c.ok() ? std::move(*c) : Config{};
}

void expect_defaults(const Config& c) {
  EXPECT_TRUE(c.attribution.environment.empty());
  EXPECT_EQ(c.attribution.hpc_job_mapping_dir, "");
  EXPECT_EQ(c.attribution.kubelet.mode, KubeletConfig::Mode::kAuto);
  EXPECT_EQ(c.attribution.kubelet.refresh_interval, milliseconds(10'000));
  EXPECT_EQ(c.attribution.kubelet.timeout, milliseconds(5'000));
  EXPECT_EQ(c.attribution.kubelet.max_message_size, 16u << 20);
  EXPECT_EQ(c.attribution.kubelet.resource_names,
            (Strings{"nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*", "amd.com/gpu"}));
  EXPECT_TRUE(c.project.rules.empty());
  EXPECT_EQ(c.project.default_project, "");
  EXPECT_EQ(c.project.resolver.rules().size(), 0u);
  EXPECT_EQ(c.ledger.checkpoint_interval, milliseconds(5'000));
  EXPECT_EQ(c.ledger.labels, (Strings{"project", "user", "namespace", "pod", "container", "hpc_job"}));
  EXPECT_EQ(c.ledger.owner_retention, milliseconds(24LL * 3'600'000));
  EXPECT_TRUE(c.ledger.idle_power_watts.empty());
  EXPECT_EQ(c.processes.max_series, 256u);
  EXPECT_EQ(c.processes.retention, milliseconds(300'000));
  EXPECT_EQ(c.exposition.max_series, 0u);  // no cap
}

TEST(config_parse, EmptyFilesAndSectionsGiveDefaults) {
  expect_defaults(parse_ok(""));
  expect_defaults(parse_ok("# only a comment\n"));
  expect_defaults(parse_ok("---\n"));
  expect_defaults(parse_ok("attribution:\nproject:\nledger: ~\nprocesses: {}\n"));
  expect_defaults(parse_ok("attribution:\n  kubelet:\n"));
}

TEST(config_parse, EveryKey) {
  Config c = parse_ok(R"(attribution:
  environment: [GPUMETER_PROJECT, SLURM_JOB_ACCOUNT, _X1]
  hpc_job_mapping_dir: /run/dcgm-job-mapping
  kubelet:
    socket: /var/lib/kubelet/pod-resources/kubelet.sock
    refresh_interval: 30s
    timeout: 1500ms
    max_message_size: 8MiB
    resource_names: [nvidia.com/gpu, amd.com/gpu]
project:
  default: unassigned
  rules:
    - source: env.GPUMETER_PROJECT
    - {source: slurm_account}
    - source: namespace
      match: 'team-(.*)'
      project: '$1'
    - source: user
      map: {alice: climate, "bob smith": nlp}
ledger:
  checkpoint_interval: 1m
  labels: [user, project]
  owner_retention: 2d
  idle_power_watts: {"NVIDIA H100 80GB HBM3": 70, "NVIDIA A100-SXM4-40GB": 52.5}
processes:
  max_series: 0
  retention: 0s
exposition:
  max_series: 20000
)");
  EXPECT_EQ(c.attribution.environment, (Strings{"GPUMETER_PROJECT", "SLURM_JOB_ACCOUNT", "_X1"}));
  EXPECT_EQ(c.attribution.hpc_job_mapping_dir, "/run/dcgm-job-mapping");
  EXPECT_EQ(c.attribution.kubelet.mode, KubeletConfig::Mode::kPath);
  EXPECT_EQ(c.attribution.kubelet.socket, "/var/lib/kubelet/pod-resources/kubelet.sock");
  EXPECT_EQ(c.attribution.kubelet.refresh_interval, milliseconds(30'000));
  EXPECT_EQ(c.attribution.kubelet.timeout, milliseconds(1'500));
  EXPECT_EQ(c.attribution.kubelet.max_message_size, 8u << 20);
  EXPECT_EQ(c.attribution.kubelet.resource_names, (Strings{"nvidia.com/gpu", "amd.com/gpu"}));
  ASSERT_EQ(c.project.rules.size(), 4u);
  EXPECT_EQ(c.project.rules[2].match, "team-(.*)");
  EXPECT_EQ(c.project.default_project, "unassigned");
  EXPECT_EQ(c.ledger.checkpoint_interval, milliseconds(60'000));
  EXPECT_EQ(c.ledger.labels, (Strings{"project", "user"})) << "kept in the exposition's label order";
  EXPECT_TRUE(c.ledger.keeps_label("user"));
  EXPECT_FALSE(c.ledger.keeps_label("pod"));
  EXPECT_EQ(c.ledger.owner_retention, milliseconds(2LL * 86'400'000));
  EXPECT_EQ(c.ledger.idle_power_watts.at("NVIDIA H100 80GB HBM3"), 70.0);
  EXPECT_EQ(c.ledger.idle_power_watts.at("NVIDIA A100-SXM4-40GB"), 52.5);
  EXPECT_EQ(c.processes.max_series, 0u);
  EXPECT_EQ(c.processes.retention, milliseconds(0));
  EXPECT_EQ(c.exposition.max_series, 20000u);

  // The resolver is ready and follows the rules in order.
  Attributes a;
  a.set("namespace", "team-vision");
  a.set("user", "alice");
  EXPECT_EQ(c.project.resolver.resolve(a), "vision");
  a.set("env.GPUMETER_PROJECT", "mine");
  EXPECT_EQ(c.project.resolver.resolve(a), "mine");
  Attributes b;
  b.set("user", "bob smith");
  EXPECT_EQ(c.project.resolver.resolve(b), "nlp");
  EXPECT_EQ(c.project.resolver.resolve(Attributes{}), "unassigned");
}

TEST(config_parse, KubeletSocketModes) {
  EXPECT_EQ(parse_ok("attribution: {kubelet: {socket: auto}}").attribution.kubelet.mode, KubeletConfig::Mode::kAuto);
  EXPECT_EQ(parse_ok("attribution: {kubelet: {socket: off}}").attribution.kubelet.mode, KubeletConfig::Mode::kOff);
  EXPECT_EQ(parse_ok("attribution: {kubelet: {socket: ''}}").attribution.kubelet.mode, KubeletConfig::Mode::kOff);

  std::string root =
      (std::filesystem::temp_directory_path() / ("gpumeter-config-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(root);
  KubeletConfig k;
  EXPECT_EQ(k.effective_socket(root), "") << "auto without a kubelet socket: off";
  std::filesystem::create_directories(root + "/var/lib/kubelet/pod-resources");
  std::ofstream(root + "/var/lib/kubelet/pod-resources/kubelet.sock") << "";
  EXPECT_EQ(k.effective_socket(root), root + "/var/lib/kubelet/pod-resources/kubelet.sock");
  EXPECT_EQ(k.effective_socket(root + "/"), root + "/var/lib/kubelet/pod-resources/kubelet.sock");
  k.mode = KubeletConfig::Mode::kOff;
  EXPECT_EQ(k.effective_socket(root), "");
  k.mode = KubeletConfig::Mode::kPath;
  k.socket = "/run/k.sock";
  EXPECT_EQ(k.effective_socket(root), "/run/k.sock");
  std::filesystem::remove_all(root);
}

TEST(config_parse, AllocationPolicyFollowsTheSchedulerSources) {
  auto parse = [](const std::string& yaml) {
    auto c = parse_config(yaml, "test.yaml");
    EXPECT_TRUE(c) << c.error().message;
    return c ? *c : Config{};
  };
  // auto: scheduler when a scheduler source is on, process otherwise.
  EXPECT_EQ(effective_allocation(parse(""), ""), AllocationPolicy::kProcess);
  EXPECT_EQ(effective_allocation(parse(""), "/run/kubelet.sock"), AllocationPolicy::kScheduler);
  EXPECT_EQ(effective_allocation(parse("attribution:\n  hpc_job_mapping_dir: /run/map\n"), ""),
            AllocationPolicy::kScheduler);
  const Config slurm = parse("attribution:\n  slurm_cgroups: auto\n  slurm_refresh_interval: 2s\n");
  EXPECT_EQ(effective_allocation(slurm, ""), AllocationPolicy::kScheduler);
  EXPECT_EQ(slurm.attribution.slurm_cgroup_root("/host/"), "/host/sys/fs/cgroup");
  EXPECT_EQ(slurm.attribution.slurm_refresh_interval, std::chrono::seconds(2));
  EXPECT_EQ(parse("attribution:\n  slurm_cgroups: /cg\n").attribution.slurm_cgroup_root("/host"), "/cg");
  EXPECT_EQ(parse("attribution:\n  slurm_cgroups: off\n").attribution.slurm_cgroup_root("/"), "");
  // Set explicitly, it is what it says whatever the sources.
  EXPECT_EQ(effective_allocation(parse("ledger:\n  allocation: process\n"), "/run/kubelet.sock"),
            AllocationPolicy::kProcess);
  EXPECT_EQ(effective_allocation(parse("ledger:\n  allocation: scheduler\n"), ""), AllocationPolicy::kScheduler);
  EXPECT_EQ(to_string(parse("ledger:\n  allocation: auto\n").ledger.allocation), "auto");
}

TEST(config_parse, ShippedExample) {
  std::string path = std::string(GPUMETER_SOURCE_DIR) + "/deploy/config/gpumeter.yaml";
  auto c = load_config(path);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->attribution.environment, (Strings{"GPUMETER_PROJECT", "SLURM_JOB_ACCOUNT", "SLURM_JOB_ID"}));
  // The packaged /etc/gpumeter/gpumeter.yaml: no scheduler source, so `auto` is the process policy
  // on a node without a kubelet.
  EXPECT_EQ(c->attribution.hpc_job_mapping_dir, "");
  EXPECT_EQ(c->attribution.slurm_cgroups, "");
  EXPECT_EQ(effective_allocation(*c, ""), AllocationPolicy::kProcess);
  EXPECT_EQ(c->project.resolver.rules().size(), 4u);
  EXPECT_EQ(c->ledger.idle_power_watts.size(), 1u);
  Attributes a;
  a.set("user", "alice");
  EXPECT_EQ(c->project.resolver.resolve(a), "climate");
}

struct BadConfig {
  std::string name;
  std::string yaml;
  std::string message;  // the whole message, or its start when it ends with "..."
};

// Found by fuzz_config: yaml-cpp does not consume a ',' outside [...] or {...} and returned
// empty documents for ever, so the agent hung at start, allocating.
TEST(config_parse, StrayCommaIsAnErrorNotAHang) {
  for (const auto& [yaml, message] : std::vector<std::pair<std::string, std::string>>{
           {",feasl", "test.yaml:1:1: unexpected ','"},
           {"# comment\n  , ledger: {}\n", "test.yaml:2:3: unexpected ','"},
           {"ledger: {}\n---\n,\n", "test.yaml:3:1: unexpected ','"},
       }) {
    auto c = parse_config(yaml, "test.yaml");
    ASSERT_FALSE(c.ok()) << yaml;
    EXPECT_EQ(c.error().message, message) << yaml;
  }
}

TEST(config_parse, ErrorsNameFileLineColumnAndField) {
  std::vector<BadConfig> cases = {
      {"unknown top-level key", "ledger: {}\nledgr: {}\n",
       "test.yaml:2:1: unknown key 'ledgr' (expected one of: attribution, project, ledger, processes, exposition, "
       "compat, collectors)"},
      {"duplicate top-level key", "ledger: {}\nledger: {}\n", "test.yaml:2:1: duplicate key 'ledger'"},
      {"not a mapping", "- a\n- b\n",
       "test.yaml:1:1: expected a mapping with some of the keys attribution, project, ledger, processes, exposition, "
       "compat, collectors"},
      {"two documents", "ledger: {}\n---\nledger: {}\n", "test.yaml:3:1: expected one YAML document, found 2"},
      {"syntax error", "ledger: {checkpoint_interval: 5s\n", "test.yaml:2:1: ..."},
      {"section not a mapping", "attribution: [a]\n", "test.yaml:1:14: attribution: expected a mapping"},
      {"unknown nested key", "attribution:\n  kubelet:\n    sockt: auto\n",
       "test.yaml:3:5: attribution.kubelet: unknown key 'sockt' (expected one of: socket, refresh_interval, "
       "timeout, max_message_size, resource_names)"},
      {"duplicate nested key", "ledger:\n  labels: [project]\n  labels: [project]\n",
       "test.yaml:3:3: ledger: duplicate key 'labels'"},
      {"environment not a list", "attribution:\n  environment: GPUMETER_PROJECT\n",
       "test.yaml:2:16: attribution.environment: expected a list such as [a, b], got a single value"},
      {"environment bad name", "attribution:\n  environment: [OK, BAD-NAME]\n",
       "test.yaml:2:21: attribution.environment[1]: 'BAD-NAME' is not an environment variable name..."},
      {"environment duplicate", "attribution:\n  environment:\n    - A\n    - A\n",
       "test.yaml:4:7: attribution.environment[1]: duplicate name 'A'"},
      {"environment item a map", "attribution:\n  environment: [{a: b}]\n",
       "test.yaml:2:17: attribution.environment[0]: expected a string, got a mapping"},
      {"unknown allocation policy", "ledger:\n  allocation: pods\n",
       "test.yaml:2:15: ledger.allocation: unknown allocation policy 'pods' (expected scheduler, process or auto)"},
      {"relative slurm cgroups", "attribution:\n  slurm_cgroups: sys/fs/cgroup\n",
       "test.yaml:2:18: attribution.slurm_cgroups: must be an absolute path, got 'sys/fs/cgroup'"},
      {"slurm refresh too short", "attribution:\n  slurm_refresh_interval: 100ms\n",
       "test.yaml:2:27: attribution.slurm_refresh_interval: must be between 1s and 1h, got '100ms'"},
      {"unknown compat set", "compat:\n  sets: [dcgm-exporter, dcgm]\n",
       "test.yaml:2:25: compat.sets[1]: unknown compat set 'dcgm' (expected dcgm-exporter, dcgm-exporter-1.x or "
       "nvidia-smi)"},
      {"duplicate compat set", "compat:\n  sets: [nvidia-smi, nvidia-smi]\n",
       "test.yaml:2:22: compat.sets[1]: duplicate set 'nvidia-smi'"},
      {"relative collectors file", "compat:\n  collectors: etc/default-counters.csv\n",
       "test.yaml:2:15: compat.collectors: must be an absolute path, got 'etc/default-counters.csv'"},
      {"relative mapping dir", "attribution:\n  hpc_job_mapping_dir: run/map\n",
       "test.yaml:2:24: attribution.hpc_job_mapping_dir: must be an absolute path, got 'run/map'"},
      {"relative socket", "attribution:\n  kubelet: {socket: kubelet.sock}\n",
       "test.yaml:2:21: attribution.kubelet.socket: expected auto, off or an absolute path, got "
       "'kubelet.sock'"},
      {"bad duration", "attribution:\n  kubelet:\n    refresh_interval: 10 seconds\n",
       "test.yaml:3:23: attribution.kubelet.refresh_interval: expected a duration such as 500ms..."},
      {"plain number duration", "attribution:\n  kubelet:\n    refresh_interval: 90\n",
       "test.yaml:3:23: attribution.kubelet.refresh_interval: expected a duration such as 500ms, 10s, 1m30s or 1d "
       "(units ms, s, m, h, d, w, y), got '90'"},
      {"duration too short", "attribution:\n  kubelet:\n    refresh_interval: 500ms\n",
       "test.yaml:3:23: attribution.kubelet.refresh_interval: must be between 1s and 1h, got '500ms'"},
      {"microseconds", "attribution:\n  kubelet:\n    timeout: 1500us\n",
       "test.yaml:3:14: attribution.kubelet.timeout: expected a duration such as 500ms..."},
      {"timeout too long", "attribution:\n  kubelet:\n    timeout: 2m\n",
       "test.yaml:3:14: attribution.kubelet.timeout: must be between 100ms and 1m, got '2m'"},
      {"bad byte size", "attribution:\n  kubelet:\n    max_message_size: 16 megs\n",
       "test.yaml:3:23: attribution.kubelet.max_message_size: expected a byte size..."},
      {"byte size too small", "attribution:\n  kubelet:\n    max_message_size: 100\n",
       "test.yaml:3:23: attribution.kubelet.max_message_size: must be between 4KiB and 1GiB, got '100'"},
      {"no resource names", "attribution:\n  kubelet:\n    resource_names: []\n",
       "test.yaml:3:21: attribution.kubelet.resource_names: must name at least one resource..."},
      {"duplicate resource name", "attribution:\n  kubelet:\n    resource_names: [a/gpu, a/gpu]\n",
       "test.yaml:3:29: attribution.kubelet.resource_names[1]: duplicate resource name 'a/gpu'"},
      {"blank resource name", "attribution:\n  kubelet:\n    resource_names: ['nvidia gpu']\n",
       "test.yaml:3:22: attribution.kubelet.resource_names[0]: 'nvidia gpu' is not a resource name such as "
       "nvidia.com/gpu"},
      {"rules not a list", "project:\n  rules: {source: user}\n",
       "test.yaml:2:10: project.rules: expected a list of rules such as [{source: user}]"},
      {"rule without source", "project:\n  rules:\n    - match: 'x'\n",
       "test.yaml:3:7: project.rules[0]: missing required key 'source'"},
      {"rule unknown key", "project:\n  rules:\n    - source: user\n      mtach: x\n",
       "test.yaml:4:7: project.rules[0]: unknown key 'mtach' (expected one of: source, match, project, map)"},
      {"rule unknown source", "project:\n  rules:\n    - {source: user}\n    - {source: usr}\n",
       "test.yaml:4:16: project.rules[1].source: unknown attribute 'usr'..."},
      {"rule bad regex", "project:\n  rules:\n    - source: namespace\n      match: 'team-(.*'\n",
       // Whole, with RE2's reason: docs/configuration.md shows this message.
       "test.yaml:4:14: project.rules[0].match: invalid regular expression 'team-(.*': missing ): team-(.*"},
      {"rule group out of range", "project:\n  rules:\n    - {source: pod, match: '(a)-(b)', project: '$3'}\n",
       "test.yaml:3:48: project.rules[0].project: refers to group $3 but the match has 2 groups"},
      {"rule group without match", "project:\n  rules:\n    - {source: pod, project: 'x-$1'}\n",
       "test.yaml:3:30: project.rules[0].project: refers to group $1 but the rule has no match..."},
      {"rule empty template", "project:\n  rules:\n    - {source: pod, project: ''}\n",
       "test.yaml:3:30: project.rules[0].project: must not be empty..."},
      {"env rule not allow-listed", "attribution:\n  environment: [A]\nproject:\n  rules:\n    - source: env.B\n",
       "test.yaml:5:15: project.rules[0].source: 'env.B' reads the environment variable B, which "
       "attribution.environment does not allow; add it there"},
      {"slurm_account not allow-listed", "project:\n  rules:\n    - source: slurm_account\n",
       "test.yaml:3:15: project.rules[0].source: 'slurm_account' reads the environment variable "
       "SLURM_JOB_ACCOUNT..."},
      {"rule map empty", "project:\n  rules:\n    - source: user\n      map: {}\n",
       "test.yaml:4:12: project.rules[0].map: must have at least one entry"},
      {"rule map duplicate", "project:\n  rules:\n    - source: user\n      map:\n        a: x\n        a: y\n",
       "test.yaml:6:9: project.rules[0].map: duplicate key 'a'"},
      {"rule map value a list", "project:\n  rules:\n    - source: user\n      map: {a: [x]}\n",
       "test.yaml:4:16: project.rules[0].map.a: expected a string, got a list"},
      {"rule map empty project", "project:\n  rules:\n    - source: user\n      map: {a: ''}\n",
       "test.yaml:4:12: project.rules[0].map: the project for 'a' must not be empty"},
      {"default not a string", "project:\n  default: [a]\n",
       "test.yaml:2:12: project.default: expected a string, got a list"},
      {"default longer than a label value", "project:\n  default: " + std::string(257, 'p') + "\n",
       "test.yaml:2:12: project.default: 257 bytes long; a label value is at most 256"},
      {"map project longer than a label value",
       "project:\n  rules:\n    - source: user\n      map: {alice: " + std::string(257, 'p') + "}\n",
       "test.yaml:4:12: project.rules[0].map: the project for 'alice' is 257 bytes long; at most 256"},
      {"checkpoint too long", "ledger:\n  checkpoint_interval: 2h\n",
       "test.yaml:2:24: ledger.checkpoint_interval: must be between 1s and 1h, got '2h'"},
      {"unknown label", "ledger:\n  labels: [project, job]\n",
       "test.yaml:2:21: ledger.labels[1]: unknown owner label 'job'..."},
      {"duplicate label", "ledger:\n  labels: [project, user, user]\n",
       "test.yaml:2:27: ledger.labels[2]: duplicate label 'user'"},
      {"labels without project", "ledger:\n  labels: [user]\n",
       "test.yaml:2:11: ledger.labels: must include project..."},
      {"duration units out of order, as Prometheus rejects them", "ledger:\n  owner_retention: 30s1m\n",
       "test.yaml:2:20: ledger.owner_retention: expected a duration such as 500ms, 10s, 1m30s or 1d (units ms, s, m, "
       "h, d, w, y), got '30s1m'"},
      {"retention too short", "ledger:\n  owner_retention: 30s\n",
       "test.yaml:2:20: ledger.owner_retention: must be between 1m and 400d, got '30s'"},
      {"zero idle power", "ledger:\n  idle_power_watts: {\"NVIDIA H100 80GB HBM3\": 0}\n",
       "test.yaml:2:47: ledger.idle_power_watts[\"NVIDIA H100 80GB HBM3\"]: must be more than 0 watts, got "
       "'0'"},
      {"negative idle power", "ledger:\n  idle_power_watts:\n    A100: -5\n",
       "test.yaml:3:11: ledger.idle_power_watts.A100: must be more than 0 watts, got '-5'"},
      {"idle power too high", "ledger:\n  idle_power_watts:\n    A100: 1e6\n",
       "test.yaml:3:11: ledger.idle_power_watts.A100: must be at most 100000 watts, got '1e6'"},
      {"idle power text", "ledger:\n  idle_power_watts:\n    A100: lots\n",
       "test.yaml:3:11: ledger.idle_power_watts.A100: expected a number, got 'lots'"},
      {"duplicate model", "ledger:\n  idle_power_watts:\n    A100: 50\n    A100: 60\n",
       "test.yaml:4:5: ledger.idle_power_watts: duplicate key 'A100'"},
      {"idle power not a map", "ledger:\n  idle_power_watts: 70\n",
       "test.yaml:2:21: ledger.idle_power_watts: expected a mapping"},
      {"negative max_series", "processes:\n  max_series: -1\n",
       "test.yaml:2:15: processes.max_series: expected a non-negative integer, got '-1'"},
      {"max_series too large", "processes:\n  max_series: 1000000\n",
       "test.yaml:2:15: processes.max_series: must be between 0 and 100000, got 1000000"},
      {"series cap too small", "exposition:\n  max_series: 50\n",
       "test.yaml:2:15: exposition.max_series: must be 0 (no cap) or at least 100, got 50"},
      {"series cap too large", "exposition:\n  max_series: 20000000\n",
       "test.yaml:2:15: exposition.max_series: must be between 0 and 10000000, got 20000000"},
      {"process retention too long", "processes:\n  retention: 2d\n",
       "test.yaml:2:14: processes.retention: must be between 0s and 1d, got '2d'"},
  };
  for (const BadConfig& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = parse_config(c.yaml, "test.yaml");
    ASSERT_FALSE(r.ok()) << c.yaml;
    const std::string& msg = r.error().message;
    if (c.message.size() > 3 && c.message.substr(c.message.size() - 3) == "...") {
      std::string prefix = c.message.substr(0, c.message.size() - 3);
      EXPECT_EQ(msg.substr(0, prefix.size()), prefix) << msg;
    } else {
      EXPECT_EQ(msg, c.message);
    }
  }
}

TEST(config_parse, LoadErrors) {
  auto missing = load_config("/nonexistent/gpumeter.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ENOENT);
  EXPECT_EQ(missing.error().message,
            "/nonexistent/gpumeter.yaml: cannot read the config file: No such file or directory");

  std::string dir = std::filesystem::temp_directory_path().string();
  auto directory = load_config(dir);
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.error().code, EISDIR);

  std::string path = dir + "/gpumeter-config-test-" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(path) << "processes:\n  max_series: x\n";
  auto bad = load_config(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, path + ":2:15: processes.max_series: expected a non-negative integer, got 'x'");
  std::ofstream(path) << std::string((1 << 20) + 10, '#');
  auto big = load_config(path);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, EFBIG);
  std::filesystem::remove(path);
}

TEST(config_parse, CompatSetsCollectorsAndHostname) {
  auto c = parse_config(
      "compat:\n  sets: [dcgm-exporter, nvidia-smi]\n  collectors: /etc/dcgm-exporter/default-counters.csv\n"
      "  hostname: ''\n",
      "test.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->compat.sets, (std::vector<std::string>{"dcgm-exporter", "nvidia-smi"}));
  EXPECT_EQ(c->compat.collectors, "/etc/dcgm-exporter/default-counters.csv");
  EXPECT_TRUE(c->compat.hostname_set);
  EXPECT_EQ(c->compat.hostname, "");
  auto d = parse_config("ledger: {}\n", "test.yaml");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->compat.sets.empty());
  EXPECT_FALSE(d->compat.hostname_set);
}

TEST(config_parse, Collectors) {
  Config c = parse_ok(
      "collectors:\n  nvlink: {enabled: true, interval: 30s}\n  clocks: {interval: 10s}\n"
      "  ledger: {enabled: false}\n");
  const auto& nvlink = c.collectors[static_cast<size_t>(CollectorId::kNvlink)];
  EXPECT_EQ(nvlink.enabled, true);
  EXPECT_EQ(nvlink.interval, milliseconds(30'000));
  const auto& clocks = c.collectors[static_cast<size_t>(CollectorId::kClocks)];
  EXPECT_FALSE(clocks.enabled);
  EXPECT_EQ(clocks.interval, milliseconds(10'000));
  EXPECT_EQ(c.collectors[static_cast<size_t>(CollectorId::kLedger)].enabled, false);
  EXPECT_FALSE(c.collectors[static_cast<size_t>(CollectorId::kDevice)].enabled);
  // Errors name the key at fault.
  for (const auto& [yaml, needle] : std::vector<std::pair<std::string, std::string>>{
           {"collectors:\n  gpm: {enabled: true}\n", "gpm"},
           {"collectors:\n  nvlink: {enabled: yes please}\n", "collectors.nvlink.enabled: expected true or false"},
           {"collectors:\n  ledger: {interval: 5s}\n", "interval"},
           {"collectors:\n  ecc: {interval: 2h}\n", "collectors.ecc.interval"}}) {
    auto r = parse_config(yaml, "test.yaml");
    ASSERT_FALSE(r.ok()) << yaml;
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  }
}

}  // namespace
}  // namespace gpumeter
