// KubeletWatcher against the real server: first fill, a hung kubelet, a kubelet that goes
// away and comes back on the same socket path, and prompt shutdown.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kubelet/device_map.h"
#include "kubelet/pod_resources_server.h"
#include "kubelet_test_support.h"

namespace gpumeter::kubelet {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

KubeletWatcher::Options fast_options(const std::string& sock) {
  KubeletWatcher::Options o;
  o.socket_path = sock;
  o.refresh_interval = 50ms;
  o.timeout = 1s;
  o.resource_names = {"nvidia.com/gpu"};
  return o;
}

std::unique_ptr<PodResourcesServer> must_start(const std::string& path, PodResourcesServer::ListFn fn) {
  auto server = PodResourcesServer::start(path, std::move(fn));
  if (!server.ok()) {
    ADD_FAILURE() << server.error().message;
    return nullptr;
  }
  return std::move(server).value();
}

TEST(kubelet_watcher, PublishesTheMapAndRefreshesIt) {
  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  testing::PodList list(testing::sample_node());
  auto server = must_start(sock, list.fn());
  ASSERT_TRUE(server);
  testing::CapturedLog log_file;
  Logger log(LogLevel::kInfo, LogFormat::kLogfmt, log_file.file());

  KubeletWatcher watcher(fast_options(sock), log);
  EXPECT_EQ(watcher.latest(), nullptr);
  EXPECT_FALSE(watcher.stats().up);
  watcher.start();
  ASSERT_TRUE(testing::eventually([&] { return watcher.latest() != nullptr; }));
  auto first = watcher.latest();
  EXPECT_EQ(first->by_device.size(), 3u);  // two whole GPUs and one shared; the NIC filtered out
  EXPECT_EQ(first->by_device.at(testing::kUuidC).size(), 2u);
  auto stats = watcher.stats();
  EXPECT_TRUE(stats.up);
  EXPECT_GE(stats.successes, 1u);
  EXPECT_EQ(stats.failures, 0u);
  ASSERT_TRUE(stats.last_success.has_value());
  EXPECT_EQ(*stats.last_success, first->fetched_at);

  // A pod ends: a later refresh publishes a new map; the old one is untouched.
  list.set({testing::sample_node()[0]});
  ASSERT_TRUE(testing::eventually([&] { return watcher.latest()->by_device.count(testing::kUuidC) == 0; }));
  EXPECT_EQ(first->by_device.size(), 3u);
  EXPECT_EQ(watcher.latest()->by_device.size(), 2u);

  watcher.stop();
  EXPECT_EQ(log_file.count("level=info msg=\"kubelet pod-resources API up\""), 1u);
  EXPECT_EQ(log_file.count("level=warn"), 0u);
}

TEST(kubelet_watcher, HungKubeletKeepsTheOldMapAndCountsFailures) {
  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  auto server = must_start(sock, [] { return testing::sample_node(); });
  ASSERT_TRUE(server);
  testing::CapturedLog log_file;
  Logger log(LogLevel::kInfo, LogFormat::kLogfmt, log_file.file());

  auto options = fast_options(sock);
  options.timeout = 300ms;
  KubeletWatcher watcher(options, log);
  watcher.start();
  ASSERT_TRUE(testing::eventually([&] { return watcher.stats().up; }));
  const auto before = watcher.latest();
  ASSERT_NE(before, nullptr);

  server->set_response_delay(60s);
  ASSERT_TRUE(testing::eventually([&] { return watcher.stats().failures >= 2; }));
  const auto stats = watcher.stats();
  EXPECT_FALSE(stats.up);
  EXPECT_THAT(stats.last_error, HasSubstr("DEADLINE_EXCEEDED"));
  EXPECT_EQ(watcher.latest(), before);  // the same map, older
  EXPECT_EQ(stats.last_success, before->fetched_at);
  // Each attempt is bounded by the timeout.
  EXPECT_LT(std::chrono::duration<double>(stats.last_duration).count(), 0.3 + 2.0);

  const auto t0 = std::chrono::steady_clock::now();
  watcher.stop();
  EXPECT_LT(testing::seconds_since(t0), 2.0);
  EXPECT_EQ(log_file.count("level=warn"), 1u);
}

TEST(kubelet_watcher, StopReturnsPromptlyDuringALongCall) {
  // A deadline far beyond the bound below: stop() must cancel the call, not wait it out.
  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  auto server = must_start(sock, [] { return testing::sample_node(); });
  ASSERT_TRUE(server);
  server->set_response_delay(120s);
  Logger log(LogLevel::kInfo, LogFormat::kLogfmt, stderr);
  auto options = fast_options(sock);
  options.timeout = 60s;
  KubeletWatcher watcher(options, log);
  watcher.start();
  ASSERT_TRUE(testing::eventually([&] { return server->list_calls() >= 1; }));
  std::this_thread::sleep_for(100ms);  // the call is now in flight on the watcher's thread

  const auto t0 = std::chrono::steady_clock::now();
  watcher.stop();
  EXPECT_LT(testing::seconds_since(t0), 2.0);
  EXPECT_EQ(watcher.latest(), nullptr);
  // A call cut short by stop() is not a kubelet failure.
  EXPECT_EQ(watcher.stats().failures, 0u);
  watcher.stop();   // idempotent
  watcher.start();  // no restart after stop
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(server->list_calls(), 1u);
}

TEST(kubelet_watcher, KubeletGoesAwayAndComesBackOnTheSamePath) {
  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  auto server = must_start(sock, [] { return testing::sample_node(); });
  ASSERT_TRUE(server);
  testing::CapturedLog log_file;
  Logger log(LogLevel::kInfo, LogFormat::kLogfmt, log_file.file());

  KubeletWatcher watcher(fast_options(sock), log);
  watcher.start();
  ASSERT_TRUE(testing::eventually([&] { return watcher.stats().up; }));
  const auto old_map = watcher.latest();

  server->stop();  // the socket file is removed, as when the kubelet restarts
  ASSERT_TRUE(testing::eventually([&] { return !watcher.stats().up; }));
  const uint64_t failures_then = watcher.stats().failures;
  ASSERT_TRUE(testing::eventually([&] { return watcher.stats().failures >= failures_then + 3; }));
  EXPECT_EQ(watcher.latest(), old_map);
  EXPECT_THAT(watcher.stats().last_error, HasSubstr("UNAVAILABLE"));

  // The new kubelet has only the training pod.
  server = must_start(sock, [] { return std::vector<PodResources>{testing::sample_node()[0]}; });
  ASSERT_TRUE(server);
  ASSERT_TRUE(testing::eventually([&] { return watcher.stats().up; }));
  const auto new_map = watcher.latest();
  ASSERT_NE(new_map, old_map);
  EXPECT_EQ(new_map->by_device.size(), 2u);
  EXPECT_THAT(new_map->by_device.at(testing::kUuidA),
              ElementsAre(DeviceOwner{"ml", "train-0", "trainer", "nvidia.com/gpu"}));
  EXPECT_GT(new_map->fetched_at, old_map->fetched_at);
  EXPECT_THAT(watcher.stats().last_error, HasSubstr("UNAVAILABLE"));  // kept for diagnosis

  watcher.stop();
  // One warn line for the outage however many retries failed, one info line for the recovery.
  EXPECT_EQ(log_file.count("level=warn"), 1u);
  EXPECT_EQ(log_file.count("kubelet pod-resources API recovered"), 1u);
}

TEST(kubelet_watcher, NoKubeletAtStart) {
  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  testing::CapturedLog log_file;
  Logger log(LogLevel::kInfo, LogFormat::kLogfmt, log_file.file());
  KubeletWatcher watcher(fast_options(sock), log);
  watcher.start();
  ASSERT_TRUE(testing::eventually([&] { return watcher.stats().failures >= 3; }));
  EXPECT_EQ(watcher.latest(), nullptr);
  EXPECT_FALSE(watcher.stats().up);
  EXPECT_FALSE(watcher.stats().last_success.has_value());

  auto server = must_start(sock, [] { return testing::sample_node(); });
  ASSERT_TRUE(server);
  ASSERT_TRUE(testing::eventually([&] { return watcher.latest() != nullptr; }));
  watcher.stop();
  const auto lines = log_file.lines();
  EXPECT_EQ(log_file.count("level=warn"), 1u);
  EXPECT_EQ(log_file.count("map_age=none"), 1u);
}

TEST(kubelet_watcher, DestructorStopsTheThread) {
  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  auto server = must_start(sock, [] { return testing::sample_node(); });
  ASSERT_TRUE(server);
  Logger log(LogLevel::kWarn, LogFormat::kLogfmt, stderr);
  {
    KubeletWatcher watcher(fast_options(sock), log);
    watcher.start();
    ASSERT_TRUE(testing::eventually([&] { return watcher.stats().up; }));
  }
  const uint64_t calls = server->list_calls();
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(server->list_calls(), calls);
}

}  // namespace
}  // namespace gpumeter::kubelet
