// `gpumeter sim kubelet` end to end: the subcommand as the main program wires it, serving a
// real gRPC socket that the agent's own pod-resources client lists, stopped by SIGTERM.

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "kubelet/pod_resources_client.h"
#include "sim/cli/sim_cli.h"
#include "test_support.h"

namespace gpumeter::sim {
namespace {

namespace fs = std::filesystem;

// GPU 0 time-sliced: pod a from 0, pod b from 50 s, both forever; pod c ran 0-10 s only; GPU 1
// holds a plain pod; a process outside Kubernetes is not listed.
const std::string kScenario = std::string(testing::kModel) + R"(
gpus:
  - {model: m, uuid: GPU-aaaa}
  - {model: m, uuid: GPU-bbbb}
jobs:
  - {name: a, gpus: [0], pid: 1, utilization: 0.2, kubernetes: {namespace: ns1, pod: a, container: main}}
  - {name: b, start: 50, gpus: [0], pid: 2, utilization: 0.2,
     kubernetes: {namespace: ns2, pod: b, container: side}}
  - {name: c, end: 10, gpus: [0], pid: 3, utilization: 0.2, kubernetes: {namespace: ns1, pod: c, container: x}}
  - {name: d, gpus: [1], pid: 4, utilization: 0.2, kubernetes: {namespace: ns1, pod: d, container: y}}
  - {name: host, gpus: [1], pid: 5, utilization: 0.2}
)";

int run_cli(std::vector<std::string> args, std::string& err_text) {
  CLI::App app{"gpumeter"};
  int exit_code = -1;
  auto* sim = app.add_subcommand("sim", "fleet simulator");
  setup_sim_command(*sim, exit_code);
  std::ostringstream err;
  auto* old_err = std::cerr.rdbuf(err.rdbuf());
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  reversed.push_back("sim");
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    exit_code = 100 + e.get_exit_code();
  }
  std::cerr.rdbuf(old_err);
  err_text = err.str();
  return exit_code;
}

struct Served {
  int exit_code = -1;
  std::string err;
  Result<std::vector<kubelet::PodResources>> pods = Error{0, "not listed"};
};

// Runs `gpumeter sim kubelet` on a scenario whose time is about 100 s now, lists its socket once
// with the agent's client, then stops it with SIGTERM.
Served serve_and_list(const std::string& scenario, const fs::path& socket) {
  fs::remove(socket);
  const auto now_s = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  ::setenv("GPUMETER_SIM_EPOCH", std::to_string(now_s - 100).c_str(), 1);
  ::setenv("GPUMETER_SIM_TIME_SCALE", "1", 1);

  sigset_t old;
  pthread_sigmask(SIG_SETMASK, nullptr, &old);
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);  // so SIGTERM reaches only the command's wait

  Served out;
  std::thread command([&] {
    out.exit_code = run_cli({"kubelet", "--scenario", scenario, "--socket", socket.string()}, out.err);
  });
  for (int i = 0; i < 100 && !out.pods.ok(); ++i) {  // up to 5 s for the server to listen
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (fs::exists(socket)) out.pods = kubelet::list_pod_resources(socket.string(), std::chrono::seconds(5), 0);
  }
  pthread_kill(command.native_handle(), SIGTERM);
  command.join();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::unsetenv("GPUMETER_SIM_EPOCH");
  ::unsetenv("GPUMETER_SIM_TIME_SCALE");
  return out;
}

TEST(SimKubeletCli, ServesTheScenarioPodsUntilSigterm) {
  const std::string scenario = testing::write_file("kubelet-cli.yaml", kScenario);
  const fs::path socket = testing::temp_dir() / "kubelet.sock";
  // Scenario time is about 100 s now: a, b and d are listed; c is long gone.
  Served served = serve_and_list(scenario, socket);
  const int exit_code = served.exit_code;
  const std::string& err = served.err;
  const auto& pods = served.pods;

  EXPECT_EQ(exit_code, 0) << err;
  EXPECT_NE(err.find("serving pod-resources v1 List on unix:" + socket.string()), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(socket));  // removed on stop
  ASSERT_TRUE(pods.ok()) << pods.error().message;
  ASSERT_EQ(pods->size(), 3u);
  auto device_ids = [](const kubelet::PodResources& p) {
    EXPECT_EQ(p.containers.size(), 1u);
    EXPECT_EQ(p.containers[0].devices.size(), 1u);
    EXPECT_EQ(p.containers[0].devices[0].resource_name, "nvidia.com/gpu");
    return p.containers[0].devices[0].device_ids;
  };
  EXPECT_EQ((*pods)[0].namespace_, "ns1");
  EXPECT_EQ((*pods)[0].name, "a");
  EXPECT_EQ((*pods)[0].containers[0].name, "main");
  // a and c shared GPU 0 from the start (replicas 0 and 1); b came after c had gone and took
  // its free replica 1.
  EXPECT_EQ(device_ids((*pods)[0]), (std::vector<std::string>{"GPU-aaaa::0"}));
  EXPECT_EQ((*pods)[1].name, "d");
  EXPECT_EQ(device_ids((*pods)[1]), (std::vector<std::string>{"GPU-bbbb"}));
  EXPECT_EQ((*pods)[2].namespace_, "ns2");
  EXPECT_EQ((*pods)[2].name, "b");
  EXPECT_EQ(device_ids((*pods)[2]), (std::vector<std::string>{"GPU-aaaa::1"}));
}

TEST(SimKubeletCli, ListsAPodsAllocationWithNoProcess) {
  // At about 100 s: the notebook pod holds GPU 0 from 50 s with no process ever; the finished
  // pod's allocation ended at 90 s, though its process's lead would have lasted to 95 s.
  const std::string scenario = testing::write_file("kubelet-cli-alloc.yaml", std::string(testing::kModel) + R"(
gpus:
  - {model: m, uuid: GPU-aaaa}
  - {model: m, uuid: GPU-bbbb}
allocations:
  - {name: nb, start: 50, gpus: [0], kubernetes: {namespace: ns1, pod: notebook, container: jupyter}}
  - {name: done, end: 90, gpus: [1], kubernetes: {namespace: ns1, pod: done, container: main}}
jobs:
  - {name: p, allocation: done, start: 10, end: 90, gpus: [1], pid: 1, utilization: 0.2}
)");
  Served served = serve_and_list(scenario, testing::temp_dir() / "kubelet-alloc.sock");
  EXPECT_EQ(served.exit_code, 0) << served.err;
  ASSERT_TRUE(served.pods.ok()) << served.pods.error().message;
  ASSERT_EQ(served.pods->size(), 1u);
  const kubelet::PodResources& pod = (*served.pods)[0];
  EXPECT_EQ(pod.name, "notebook");
  ASSERT_EQ(pod.containers.size(), 1u);
  EXPECT_EQ(pod.containers[0].name, "jupyter");
  ASSERT_EQ(pod.containers[0].devices.size(), 1u);
  EXPECT_EQ(pod.containers[0].devices[0].resource_name, "nvidia.com/gpu");
  EXPECT_EQ(pod.containers[0].devices[0].device_ids, (std::vector<std::string>{"GPU-aaaa"}));
}

TEST(SimKubeletCli, BadInput) {
  const std::string scenario = testing::write_file("kubelet-cli.yaml", kScenario);
  std::string err;
  EXPECT_EQ(run_cli({"kubelet", "--socket", "x.sock"}, err), 2);
  EXPECT_NE(err.find("gpumeter sim kubelet: --scenario is required"), std::string::npos) << err;
  EXPECT_EQ(run_cli({"kubelet", "--scenario", scenario}, err), 2);
  EXPECT_NE(err.find("gpumeter sim kubelet: --socket is required"), std::string::npos) << err;
  EXPECT_EQ(run_cli({"kubelet", "--scenario", "/nonexistent.yaml", "--socket", "x.sock"}, err), 2);
  EXPECT_NE(err.find("/nonexistent.yaml: no such file"), std::string::npos) << err;
  EXPECT_EQ(run_cli({"kubelet", "--scenario", scenario, "--socket", "x.sock", "--lead", "-1"}, err), 2);
  EXPECT_NE(err.find("--lead: expected a scenario duration"), std::string::npos) << err;
  // A socket whose directory does not exist: a runtime error naming it.
  EXPECT_EQ(run_cli({"kubelet", "--scenario", scenario, "--socket", "/nonexistent-dir/kubelet.sock"}, err), 1);
  EXPECT_NE(err.find("/nonexistent-dir"), std::string::npos) << err;
}

}  // namespace
}  // namespace gpumeter::sim
