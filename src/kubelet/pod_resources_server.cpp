#include "kubelet/pod_resources_server.h"

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>

#include "kubelet/proto/podresources_v1.grpc.pb.h"
#include "kubelet/proto_convert.h"

namespace gpumeter::kubelet {

namespace {

// True when something accepts connections on the unix socket at `path`.
bool socket_is_live(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const bool live = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return live;
}

void remove_socket_file(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(path.c_str());
}

}  // namespace

struct PodResourcesServer::Impl {
  class Service final : public v1::PodResourcesLister::Service {
   public:
    explicit Service(Impl& impl) : impl_(impl) {}

    grpc::Status List(grpc::ServerContext* context, const v1::ListPodResourcesRequest*,
                      v1::ListPodResourcesResponse* response) override {
      ++impl_.list_calls;
      if (!impl_.wait_response_delay(*context))
        return grpc::Status(grpc::StatusCode::CANCELLED, "call ended while delayed");
      try {
        to_proto(impl_.list(), response);
      } catch (const std::exception& e) {
        return grpc::Status(grpc::StatusCode::INTERNAL, e.what());
      }
      return grpc::Status::OK;
    }

    grpc::Status Get(grpc::ServerContext* context, const v1::GetPodResourcesRequest* request,
                     v1::GetPodResourcesResponse* response) override {
      if (!impl_.wait_response_delay(*context))
        return grpc::Status(grpc::StatusCode::CANCELLED, "call ended while delayed");
      try {
        for (const PodResources& pod : impl_.list()) {
          if (pod.name == request->pod_name() && pod.namespace_ == request->pod_namespace()) {
            to_proto(pod, response->mutable_pod_resources());
            return grpc::Status::OK;
          }
        }
      } catch (const std::exception& e) {
        return grpc::Status(grpc::StatusCode::INTERNAL, e.what());
      }
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "pod " + request->pod_namespace() + "/" + request->pod_name() + " not found");
    }

   private:
    Impl& impl_;
  };

  Impl(std::string path, ListFn fn) : socket_path(std::move(path)), list(std::move(fn)), service(*this) {}

  // Waits out the configured delay; false when the call or the server ended meanwhile. The
  // delay is re-read while waiting, so lowering it releases calls already waiting.
  bool wait_response_delay(grpc::ServerContext& context) {
    const auto begin = std::chrono::steady_clock::now();
    std::unique_lock lock(mu);
    for (;;) {
      if (stopping || context.IsCancelled()) return false;
      const auto until = begin + delay;
      const auto now = std::chrono::steady_clock::now();
      if (now >= until) return true;
      // IsCancelled has no notification of its own here: poll it.
      cv.wait_until(lock, std::min(until, now + std::chrono::milliseconds(20)));
    }
  }

  std::string socket_path;
  ListFn list;
  Service service;
  std::atomic<uint64_t> list_calls{0};
  std::unique_ptr<grpc::Server> server;

  std::mutex mu;  // guards delay and stopping
  std::condition_variable cv;
  std::chrono::milliseconds delay{0};
  bool stopping = false;

  std::mutex stop_mu;  // serializes stop()
  bool stopped = false;
};

Result<std::unique_ptr<PodResourcesServer>> PodResourcesServer::start(const std::string& socket_path, ListFn list) {
  const std::string what = "pod-resources server on unix:" + socket_path;
  if (socket_path.empty()) return Error{0, "pod-resources server: empty socket path"};
  if (socket_path.size() >= sizeof(sockaddr_un::sun_path)) {
    return Error{0, what + ": socket path is " + std::to_string(socket_path.size()) + " bytes, the limit is " +
                        std::to_string(sizeof(sockaddr_un::sun_path) - 1)};
  }
  if (!list) return Error{0, what + ": no List callback"};

  const std::size_t slash = socket_path.rfind('/');
  const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : socket_path.substr(0, slash);
  struct stat st {};
  if (::stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Error{0, what + ": directory " + parent + " does not exist"};
  }
  if (::lstat(socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Error{0, what + ": the path exists and is not a socket"};
    if (socket_is_live(socket_path)) return Error{0, what + ": another server is listening on it"};
    ::unlink(socket_path.c_str());  // stale, left by a server that died
  }

  auto impl = std::make_unique<Impl>(socket_path, std::move(list));
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket_path, grpc::InsecureServerCredentials());
  builder.RegisterService(&impl->service);
  impl->server = builder.BuildAndStart();
  if (!impl->server) return Error{0, what + ": gRPC could not listen (its log line says why)"};
  return std::unique_ptr<PodResourcesServer>(new PodResourcesServer(std::move(impl)));
}

PodResourcesServer::PodResourcesServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PodResourcesServer::~PodResourcesServer() { stop(); }

void PodResourcesServer::set_response_delay(std::chrono::milliseconds delay) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->delay = delay;
  }
  impl_->cv.notify_all();
}

void PodResourcesServer::stop() {
  std::lock_guard stop_lock(impl_->stop_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();  // delayed handlers return now, so Shutdown need not wait for them
  // Calls still running after the deadline are cancelled; Shutdown returns once every handler
  // has returned.
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  impl_->server->Wait();
  impl_->server.reset();
  remove_socket_file(impl_->socket_path);
}

uint64_t PodResourcesServer::list_calls() const { return impl_->list_calls.load(); }

const std::string& PodResourcesServer::socket_path() const { return impl_->socket_path; }

}  // namespace gpumeter::kubelet
