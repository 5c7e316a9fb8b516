#include "kubelet/pod_resources_client.h"

#include <grpcpp/grpcpp.h>

#include <climits>
#include <mutex>
#include <set>

#include "kubelet/proto/podresources_v1.grpc.pb.h"
#include "kubelet/proto_convert.h"

namespace gpumeter::kubelet {

std::string channel_target(const std::string& socket_path) { return "unix:" + socket_path; }

std::string status_code_name(int code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      break;
  }
  return "UNKNOWN_CODE_" + std::to_string(code);
}

namespace {

std::shared_ptr<grpc::Channel> make_channel(const std::string& target, std::size_t max_message_bytes) {
  grpc::ChannelArguments args;
  if (max_message_bytes > 0) {
    args.SetMaxReceiveMessageSize(
        static_cast<int>(std::min<std::size_t>(max_message_bytes, static_cast<std::size_t>(INT_MAX))));
  }
  // A channel of our own: gRPC otherwise shares subchannels process-wide between channels with
  // the same target and arguments, and a fresh channel would inherit a dead connection's backoff.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

Error call_error(const std::string& target, const grpc::Status& status) {
  std::string message =
      "kubelet pod-resources List on " + target + ": " + std::string(status_code_name(status.error_code()));
  if (!status.error_message().empty()) message += ": " + status.error_message();
  return Error{static_cast<int>(status.error_code()), std::move(message)};
}

}  // namespace

struct PodResourcesClient::Impl {
  std::string target;
  std::size_t max_message_bytes;

  std::mutex mu;
  std::shared_ptr<v1::PodResourcesLister::Stub> stub;  // null: dial on the next call
  std::set<grpc::ClientContext*> in_flight;
  bool shut_down = false;
};

PodResourcesClient::PodResourcesClient(std::string socket_path, std::size_t max_message_bytes)
    : impl_(std::make_unique<Impl>()) {
  impl_->target = channel_target(socket_path);
  impl_->max_message_bytes = max_message_bytes;
}

PodResourcesClient::~PodResourcesClient() = default;

const std::string& PodResourcesClient::target() const { return impl_->target; }

Result<std::vector<PodResources>> PodResourcesClient::list(std::chrono::milliseconds timeout) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  std::shared_ptr<v1::PodResourcesLister::Stub> stub;
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->shut_down)
      return call_error(impl_->target, grpc::Status(grpc::StatusCode::CANCELLED, "client shut down"));
    if (!impl_->stub) {
      impl_->stub = v1::PodResourcesLister::NewStub(make_channel(impl_->target, impl_->max_message_bytes));
    }
    stub = impl_->stub;
    impl_->in_flight.insert(&context);
  }

  v1::ListPodResourcesRequest request;
  v1::ListPodResourcesResponse response;
  grpc::Status status = stub->List(&context, request, &response);

  {
    std::lock_guard lock(impl_->mu);
    impl_->in_flight.erase(&context);
    // Drop a channel that failed so the next call dials afresh (another call may already have).
    if (!status.ok() && impl_->stub == stub) impl_->stub.reset();
  }
  if (!status.ok()) return call_error(impl_->target, status);
  return from_proto(response);
}

void PodResourcesClient::shutdown() {
  std::lock_guard lock(impl_->mu);
  impl_->shut_down = true;
  for (grpc::ClientContext* context : impl_->in_flight) context->TryCancel();
  impl_->stub.reset();
}

Result<std::vector<PodResources>> list_pod_resources(const std::string& socket_path, std::chrono::milliseconds timeout,
                                                     std::size_t max_message_bytes) {
  PodResourcesClient client(socket_path, max_message_bytes);
  return client.list(timeout);
}

}  // namespace gpumeter::kubelet
