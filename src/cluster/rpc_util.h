// What the cluster's gRPC code shares: channels and servers with Sluice's
// message limits, Status <-> grpc::Status, configurations as key/values.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include <sluice/core/config.h>

#include "cluster.grpc.pb.h"
#include "core/metric_registry.h"

namespace sluice::cluster {

// Job libraries travel in messages: allow them up to this size.
inline constexpr int kMaxMessageBytes = 512 * 1024 * 1024;

std::shared_ptr<grpc::Channel> makeChannel(const std::string& address);
// Serves `service` on `address` (host:port; port 0 picks a free one, stored
// in *port). Throws SluiceException naming the address and `keys` (the
// options that set it) when it cannot listen.
std::unique_ptr<grpc::Server> startServer(const std::string& address, grpc::Service& service,
                                          int* port, const std::string& role,
                                          const std::string& keys);
// A deadline `ms` from now.
void setDeadline(grpc::ClientContext& context, int64_t ms);

void toProto(const Configuration& config, google::protobuf::RepeatedPtrField<rpc::KeyValue>* out);
Configuration fromProto(const google::protobuf::RepeatedPtrField<rpc::KeyValue>& kvs,
                        const std::string& source);

// Metric samples over RPC (TaskExecutorService.GetMetrics). A histogram's
// sample travels thinned to at most kMaxHistogramValues values (its
// quantiles stay close); fromProto skips samples of unknown kind or type.
inline constexpr size_t kMaxHistogramValues = 1024;
void toProto(const std::vector<metrics::MetricSample>& samples, rpc::MetricDump* out);
std::vector<metrics::MetricSample> fromProto(const rpc::MetricDump& dump);

// "host:port" for messages and channels.
std::string hostPort(const std::string& host, int port);

// The message of a failed call, naming the peer: "cannot reach the
// JobManager at localhost:6123: failed to connect to all addresses".
std::string describeRpcError(const grpc::Status& status, const std::string& what);

}  // namespace sluice::cluster
