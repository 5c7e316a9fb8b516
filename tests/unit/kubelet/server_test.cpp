// The test server's own contract: where it listens, what it refuses, what it leaves behind.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "kubelet/pod_resources_client.h"
#include "kubelet/pod_resources_server.h"
#include "kubelet_test_support.h"

namespace gpumeter::kubelet {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

bool is_socket(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

std::vector<PodResources> none() { return {}; }

TEST(kubelet_server, StopRemovesTheSocketAndIsIdempotent) {
  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  auto server = PodResourcesServer::start(sock, none);
  ASSERT_TRUE(server.ok()) << server.error().message;
  EXPECT_EQ((*server)->socket_path(), sock);
  EXPECT_TRUE(is_socket(sock));
  (*server)->stop();
  EXPECT_FALSE(std::filesystem::exists(sock));
  (*server)->stop();
}

TEST(kubelet_server, ReplacesAStaleSocketFile) {
  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  // A socket bound and closed without unlinking: what a killed kubelet leaves.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ::close(fd);
  ASSERT_TRUE(is_socket(sock));

  auto server = PodResourcesServer::start(sock, [] { return testing::sample_node(); });
  ASSERT_TRUE(server.ok()) << server.error().message;
  auto pods = list_pod_resources(sock, 5s, 0);
  ASSERT_TRUE(pods.ok()) << pods.error().message;
  EXPECT_EQ(pods->size(), testing::sample_node().size());
}

TEST(kubelet_server, RefusesALiveSocket) {
  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  auto first = PodResourcesServer::start(sock, none);
  ASSERT_TRUE(first.ok()) << first.error().message;
  auto second = PodResourcesServer::start(sock, none);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.error().message, HasSubstr("another server is listening"));
  // The first one still answers.
  EXPECT_TRUE(list_pod_resources(sock, 5s, 0).ok());
}

TEST(kubelet_server, RefusesARegularFileAndLeavesIt) {
  testing::TempDir dir;
  const std::string path = dir.file("kubelet.sock");
  std::ofstream(path) << "not a socket";
  auto server = PodResourcesServer::start(path, none);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.error().message, HasSubstr("exists and is not a socket"));
  EXPECT_TRUE(std::filesystem::is_regular_file(path));
}

TEST(kubelet_server, ClearErrorsForBadPaths) {
  auto too_long = PodResourcesServer::start("/tmp/" + std::string(120, 'a') + ".sock", none);
  ASSERT_FALSE(too_long.ok());
  EXPECT_THAT(too_long.error().message, HasSubstr("the limit is 107"));

  testing::TempDir dir;
  auto no_dir = PodResourcesServer::start(dir.file("missing/kubelet.sock"), none);
  ASSERT_FALSE(no_dir.ok());
  EXPECT_THAT(no_dir.error().message, HasSubstr("missing does not exist"));

  auto empty = PodResourcesServer::start("", none);
  ASSERT_FALSE(empty.ok());
  auto no_fn = PodResourcesServer::start(dir.file("kubelet.sock"), nullptr);
  ASSERT_FALSE(no_fn.ok());
}

TEST(kubelet_server, LoweringTheDelayReleasesWaitingCalls) {
  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  auto server = PodResourcesServer::start(sock, [] { return testing::sample_node(); });
  ASSERT_TRUE(server.ok()) << server.error().message;
  (*server)->set_response_delay(60s);
  std::optional<Result<std::vector<PodResources>>> result;
  std::thread caller([&] { result.emplace(list_pod_resources(sock, 30s, 0)); });
  ASSERT_TRUE(testing::eventually([&] { return (*server)->list_calls() == 1; }));
  (*server)->set_response_delay(0ms);
  caller.join();
  ASSERT_TRUE(result->ok()) << result->error().message;
  EXPECT_EQ((*result)->size(), testing::sample_node().size());
}

}  // namespace
}  // namespace gpumeter::kubelet
