// The List client against the real gRPC server on a unix socket.

#include <gmock/gmock.h>
#include <grpcpp/support/status_code_enum.h>
#include <gtest/gtest.h>

#include "kubelet/pod_resources_client.h"
#include "kubelet/pod_resources_server.h"
#include "kubelet_test_support.h"

namespace gpumeter::kubelet {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::unique_ptr<PodResourcesServer> must_start(const std::string& path, PodResourcesServer::ListFn fn) {
  auto server = PodResourcesServer::start(path, std::move(fn));
  if (!server.ok()) {
    ADD_FAILURE() << server.error().message;
    return nullptr;
  }
  return std::move(server).value();
}

TEST(kubelet_client, ListsPodsDevicesAndContainers) {
  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  auto server = must_start(sock, [] { return testing::sample_node(); });
  ASSERT_TRUE(server);

  auto pods = list_pod_resources(sock, 5s, 16 << 20);
  ASSERT_TRUE(pods.ok()) << pods.error().message;
  EXPECT_EQ(*pods, testing::sample_node());
  EXPECT_EQ(server->list_calls(), 1u);
}

TEST(kubelet_client, DraClaimDevicesCrossTheWire) {
  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  std::vector<PodResources> node = testing::sample_node();
  node[0].containers[0].claim_devices = {{"gpu.nvidia.com", "node-1", "gpu-2"}};
  auto server = must_start(sock, [&] { return node; });
  ASSERT_TRUE(server);
  auto pods = list_pod_resources(sock, 5s, 16 << 20);
  ASSERT_TRUE(pods.ok()) << pods.error().message;
  EXPECT_EQ(*pods, node);
}

TEST(kubelet_client, EmptyNode) {
  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  auto server = must_start(sock, [] { return std::vector<PodResources>{}; });
  ASSERT_TRUE(server);
  auto pods = list_pod_resources(sock, 5s, 0);
  ASSERT_TRUE(pods.ok()) << pods.error().message;
  EXPECT_TRUE(pods->empty());
}

TEST(kubelet_client, ReusesItsChannelAcrossCalls) {
  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  testing::PodList list(testing::sample_node());
  auto server = must_start(sock, list.fn());
  ASSERT_TRUE(server);
  PodResourcesClient client(sock, 16 << 20);
  EXPECT_EQ(client.target(), "unix:" + sock);
  for (int i = 0; i < 5; ++i) {
    auto pods = client.list(5s);
    ASSERT_TRUE(pods.ok()) << pods.error().message;
    EXPECT_EQ(pods->size(), i == 0 ? 5u : 1u);
    list.set({testing::sample_node()[1]});
  }
  EXPECT_EQ(server->list_calls(), 5u);
}

// 3000 pods with long names and many devices: a reply well over gRPC's default 4 MiB.
std::vector<PodResources> big_node(std::size_t* string_bytes) {
  std::vector<PodResources> pods;
  *string_bytes = 0;
  const std::string long_suffix(180, 'x');
  for (int p = 0; p < 3000; ++p) {
    PodResources pod{"batch-job-" + std::to_string(p) + "-" + long_suffix, "tenant-" + std::to_string(p % 40), {}};
    *string_bytes += pod.name.size() + pod.namespace_.size();
    for (int c = 0; c < 3; ++c) {
      ContainerResources container{"worker-" + std::to_string(c), {{"nvidia.com/gpu", {}}}};
      *string_bytes += container.name.size() + container.devices[0].resource_name.size();
      for (int d = 0; d < 12; ++d) {
        char id[64];
        std::snprintf(id, sizeof id, "GPU-%08x-0000-4000-8000-%012d::%d", p, c * 12 + d, d);
        container.devices[0].device_ids.emplace_back(id);
        *string_bytes += container.devices[0].device_ids.back().size();
      }
      pod.containers.push_back(std::move(container));
    }
    pods.push_back(std::move(pod));
  }
  return pods;
}

TEST(kubelet_client, ReplyOverFourMebibytesNeedsTheRaisedLimit) {
  std::size_t string_bytes = 0;
  const std::vector<PodResources> pods = big_node(&string_bytes);
  // The strings alone exceed 4 MiB, so the encoded reply does too.
  ASSERT_GT(string_bytes, kGrpcDefaultMaxReceiveBytes);

  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  auto server = must_start(sock, [&] { return pods; });
  ASSERT_TRUE(server);

  for (std::size_t limit : {kGrpcDefaultMaxReceiveBytes, std::size_t{0}}) {
    auto small = list_pod_resources(sock, 20s, limit);
    ASSERT_FALSE(small.ok()) << "limit " << limit;
    EXPECT_EQ(small.error().code, grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(small.error().message,
                StartsWith("kubelet pod-resources List on unix:" + sock + ": RESOURCE_EXHAUSTED"));
  }

  auto big = list_pod_resources(sock, 20s, 16 << 20);
  ASSERT_TRUE(big.ok()) << big.error().message;
  EXPECT_EQ(big->size(), 3000u);
  EXPECT_EQ(*big, pods);
}

TEST(kubelet_client, HungServerGivesDeadlineExceededWithinTheTimeout) {
  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  auto server = must_start(sock, [] { return testing::sample_node(); });
  ASSERT_TRUE(server);
  server->set_response_delay(60s);

  const auto t0 = std::chrono::steady_clock::now();
  auto pods = list_pod_resources(sock, 500ms, 16 << 20);
  const double took = testing::seconds_since(t0);
  ASSERT_FALSE(pods.ok());
  EXPECT_EQ(pods.error().code, grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(pods.error().message, StartsWith("kubelet pod-resources List on unix:" + sock + ": DEADLINE_EXCEEDED"));
  EXPECT_LT(took, 0.5 + 2.0);

  // The server notices the client gave up; its stop() does not wait out the delay.
  const auto t1 = std::chrono::steady_clock::now();
  server->stop();
  EXPECT_LT(testing::seconds_since(t1), 2.0 + 2.0);
}

TEST(kubelet_client, NoSocketIsUnavailable) {
  testing::TempDir dir;
  const std::string sock = dir.file("absent.sock");
  const auto t0 = std::chrono::steady_clock::now();
  auto pods = list_pod_resources(sock, 3s, 16 << 20);
  ASSERT_FALSE(pods.ok());
  EXPECT_EQ(pods.error().code, grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(pods.error().message, StartsWith("kubelet pod-resources List on unix:" + sock + ": UNAVAILABLE"));
  EXPECT_LT(testing::seconds_since(t0), 3.0 + 2.0);
}

TEST(kubelet_client, ServerErrorCarriesCodeAndMessage) {
  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  auto server = must_start(sock, []() -> std::vector<PodResources> { throw std::runtime_error("checkpoint corrupt"); });
  ASSERT_TRUE(server);
  auto pods = list_pod_resources(sock, 5s, 16 << 20);
  ASSERT_FALSE(pods.ok());
  EXPECT_EQ(pods.error().code, grpc::StatusCode::INTERNAL);
  EXPECT_EQ(pods.error().message, "kubelet pod-resources List on unix:" + sock + ": INTERNAL: checkpoint corrupt");
}

TEST(kubelet_client, ChannelRecoversWhenTheServerComesBack) {
  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  PodResourcesClient client(sock, 16 << 20);
  auto server = must_start(sock, [] { return testing::sample_node(); });
  ASSERT_TRUE(server);
  ASSERT_TRUE(client.list(5s).ok());

  server->stop();
  auto down = client.list(2s);
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.error().code, grpc::StatusCode::UNAVAILABLE) << down.error().message;

  // A new server on the same path (a restarted kubelet, new socket inode): the next call works,
  // not only after gRPC's reconnect backoff.
  server = must_start(sock, [] { return std::vector<PodResources>{testing::sample_node()[0]}; });
  ASSERT_TRUE(server);
  auto up = client.list(5s);
  ASSERT_TRUE(up.ok()) << up.error().message;
  EXPECT_EQ(up->size(), 1u);
}

TEST(kubelet_client, ShutdownCancelsACallInFlight) {
  testing::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  auto server = must_start(sock, [] { return testing::sample_node(); });
  ASSERT_TRUE(server);
  server->set_response_delay(60s);
  PodResourcesClient client(sock, 16 << 20);

  std::optional<Result<std::vector<PodResources>>> result;
  std::thread caller([&] { result.emplace(client.list(60s)); });
  ASSERT_TRUE(testing::eventually([&] { return server->list_calls() == 1; }));
  const auto t0 = std::chrono::steady_clock::now();
  client.shutdown();
  caller.join();
  EXPECT_LT(testing::seconds_since(t0), 2.0);
  ASSERT_TRUE(result.has_value());
  ASSERT_FALSE(result->ok());
  EXPECT_EQ(result->error().code, grpc::StatusCode::CANCELLED);

  auto later = client.list(5s);
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.error().code, grpc::StatusCode::CANCELLED);
  EXPECT_EQ(server->list_calls(), 1u);
}

TEST(kubelet_client, StatusCodeNames) {
  EXPECT_EQ(status_code_name(grpc::StatusCode::OK), "OK");
  EXPECT_EQ(status_code_name(grpc::StatusCode::DEADLINE_EXCEEDED), "DEADLINE_EXCEEDED");
  EXPECT_EQ(status_code_name(grpc::StatusCode::RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(status_code_name(grpc::StatusCode::UNAUTHENTICATED), "UNAUTHENTICATED");
  EXPECT_EQ(status_code_name(99), "UNKNOWN_CODE_99");
  EXPECT_EQ(channel_target("/var/lib/kubelet/pod-resources/kubelet.sock"),
            "unix:/var/lib/kubelet/pod-resources/kubelet.sock");
}

}  // namespace
}  // namespace gpumeter::kubelet
