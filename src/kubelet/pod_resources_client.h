#pragma once
// Client for the kubelet's PodResourcesLister.List over its unix socket.
//
// Every call has a deadline, so a hung kubelet costs at most `timeout`. The reply size limit is
// explicit: gRPC's default receive limit (4 MiB) is too small for nodes with thousands of pods
// and is what makes dcgm-exporter lose pod attribution there. Errors name the target, the gRPC
// status code and its message, e.g.
//   "kubelet pod-resources List on unix:/var/lib/kubelet/pod-resources/kubelet.sock:
//    DEADLINE_EXCEEDED: Deadline Exceeded"
// and Error::code holds the numeric grpc::StatusCode.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kubelet/pod_resources.h"
#include "util/result.h"

namespace gpumeter::kubelet {

// gRPC's default receive limit; what a client gets when it does not raise it.
inline constexpr std::size_t kGrpcDefaultMaxReceiveBytes = std::size_t{4} << 20;

// "unix:<path>", the gRPC target for a socket path (absolute or relative).
std::string channel_target(const std::string& socket_path);

// The canonical gRPC status code name ("OK", "DEADLINE_EXCEEDED", ...) for a numeric code,
// "UNKNOWN_CODE_<n>" for codes outside the gRPC set.
std::string status_code_name(int code);

// One List call on a fresh channel. max_message_bytes bounds the reply (0 = gRPC's default,
// 4 MiB; values above INT_MAX are clamped).
Result<std::vector<PodResources>> list_pod_resources(const std::string& socket_path, std::chrono::milliseconds timeout,
                                                     std::size_t max_message_bytes);

// The same call on a channel kept across calls (one connection to the kubelet instead of one per
// refresh). After any failed call the channel is dropped and the next call dials afresh, so a
// restarted kubelet (a new socket inode) is picked up at once rather than after gRPC's
// reconnect backoff. Thread-safe.
class PodResourcesClient {
 public:
  PodResourcesClient(std::string socket_path, std::size_t max_message_bytes);
  ~PodResourcesClient();
  PodResourcesClient(const PodResourcesClient&) = delete;
  PodResourcesClient& operator=(const PodResourcesClient&) = delete;

  Result<std::vector<PodResources>> list(std::chrono::milliseconds timeout);

  // Cancels the calls in flight (they return CANCELLED at once) and makes every later call
  // fail with CANCELLED without dialing. Used to stop a watcher promptly.
  void shutdown();

  const std::string& target() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpumeter::kubelet
