#pragma once
// A real PodResourcesLister gRPC server on a unix socket, answering List from a callback. The
// tests run the client against it, and a simulator can stand it in for a kubelet. Library
// gpumeter_kubelet_server; the agent itself links only gpumeter_kubelet.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kubelet/pod_resources.h"
#include "util/result.h"

namespace gpumeter::kubelet {

class PodResourcesServer {
 public:
  // Called on a gRPC thread for every List (and Get); may run concurrently with itself.
  // An exception thrown from it becomes an INTERNAL status with its what() text.
  using ListFn = std::function<std::vector<PodResources>()>;

  // Listens on `socket_path`. A stale socket file left by a dead server is replaced; a live
  // one, or any other kind of file, is an error, and so is a missing parent directory.
  static Result<std::unique_ptr<PodResourcesServer>> start(const std::string& socket_path, ListFn list);

  ~PodResourcesServer();  // stop()
  PodResourcesServer(const PodResourcesServer&) = delete;
  PodResourcesServer& operator=(const PodResourcesServer&) = delete;

  // Every later List waits this long before answering (a hung kubelet). The wait ends early
  // when the client cancels or gives up, or when the server stops.
  void set_response_delay(std::chrono::milliseconds delay);

  // Stops listening, ends calls in flight and removes the socket file. Idempotent.
  void stop();

  uint64_t list_calls() const;  // List calls received, including ones still delayed
  const std::string& socket_path() const;

 private:
  struct Impl;
  explicit PodResourcesServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpumeter::kubelet
