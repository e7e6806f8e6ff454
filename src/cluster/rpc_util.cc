#include "cluster/rpc_util.h"

#include <chrono>

#include <fmt/format.h>

#include <sluice/core/status.h>

namespace sluice::cluster {

std::shared_ptr<grpc::Channel> makeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // A lost peer shows within seconds, not after TCP's minutes.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

std::unique_ptr<grpc::Server> startServer(const std::string& address, grpc::Service& service,
                                          int* port, const std::string& role,
                                          const std::string& keys) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || *port == 0) {
    throw SluiceException(
        fmt::format("the {} cannot listen on {} ({}): the address is in use or not local", role,
                    address, keys));
  }
  return server;
}

void setDeadline(grpc::ClientContext& context, int64_t ms) {
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
}

void toProto(const Configuration& config, google::protobuf::RepeatedPtrField<rpc::KeyValue>* out) {
  for (const std::string& key : config.keys()) {
    rpc::KeyValue* kv = out->Add();
    kv->set_key(key);
    kv->set_value(*config.getString(key));
  }
}

Configuration fromProto(const google::protobuf::RepeatedPtrField<rpc::KeyValue>& kvs,
                        const std::string& source) {
  Configuration config;
  for (const auto& kv : kvs) config.setString(kv.key(), kv.value(), source);
  return config;
}

std::string hostPort(const std::string& host, int port) { return fmt::format("{}:{}", host, port); }

std::string describeRpcError(const grpc::Status& status, const std::string& what) {
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
      status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return fmt::format("cannot reach {}: {}", what, status.error_message());
  }
  return fmt::format("{}: {}", what, status.error_message());
}

}  // namespace sluice::cluster
