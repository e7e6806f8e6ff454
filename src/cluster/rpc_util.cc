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

void toProto(const std::vector<metrics::MetricSample>& samples, rpc::MetricDump* out) {
  for (const metrics::MetricSample& s : samples) {
    rpc::MetricSampleMsg* m = out->add_samples();
    m->set_kind(static_cast<int32_t>(s.kind));
    for (const auto& [k, v] : s.variables) {
      rpc::KeyValue* kv = m->add_variables();
      kv->set_key(k);
      kv->set_value(v);
    }
    m->set_scope(s.scope);
    for (const auto& c : s.subScope) m->add_sub_scope(c);
    for (const auto& c : s.logicalSubScope) m->add_logical_sub_scope(c);
    m->set_name(s.name);
    m->set_type(static_cast<int32_t>(s.type));
    m->set_value(s.value);
    m->set_count(s.count);
    if (s.type != metrics::MetricType::kHistogram) continue;
    const HistogramStatistics& h = s.histogram;
    m->set_histogram_size(h.size);
    m->set_histogram_mean(h.mean);
    m->set_histogram_std_dev(h.stdDev);
    m->set_histogram_min(h.min);
    m->set_histogram_max(h.max);
    const size_t n = h.values.size();
    if (n <= kMaxHistogramValues) {
      for (int64_t v : h.values) m->add_histogram_values(v);
    } else {
      // Evenly spaced ranks of the sorted sample, first and last included.
      for (size_t i = 0; i < kMaxHistogramValues; ++i) {
        m->add_histogram_values(h.values[i * (n - 1) / (kMaxHistogramValues - 1)]);
      }
    }
  }
}

std::vector<metrics::MetricSample> fromProto(const rpc::MetricDump& dump) {
  std::vector<metrics::MetricSample> out;
  out.reserve(static_cast<size_t>(dump.samples_size()));
  for (const rpc::MetricSampleMsg& m : dump.samples()) {
    if (m.kind() < static_cast<int32_t>(metrics::ScopeKind::kJobManager) ||
        m.kind() > static_cast<int32_t>(metrics::ScopeKind::kOperator) ||
        m.type() < static_cast<int32_t>(metrics::MetricType::kCounter) ||
        m.type() > static_cast<int32_t>(metrics::MetricType::kHistogram)) {
      continue;
    }
    metrics::MetricSample s;
    s.kind = static_cast<metrics::ScopeKind>(m.kind());
    for (const auto& kv : m.variables()) s.variables[kv.key()] = kv.value();
    s.scope = m.scope();
    s.subScope.assign(m.sub_scope().begin(), m.sub_scope().end());
    s.logicalSubScope.assign(m.logical_sub_scope().begin(), m.logical_sub_scope().end());
    s.name = m.name();
    s.type = static_cast<metrics::MetricType>(m.type());
    s.value = m.value();
    s.count = m.count();
    if (s.type == metrics::MetricType::kHistogram) {
      s.histogram.size = m.histogram_size();
      s.histogram.mean = m.histogram_mean();
      s.histogram.stdDev = m.histogram_std_dev();
      s.histogram.min = m.histogram_min();
      s.histogram.max = m.histogram_max();
      s.histogram.values.assign(m.histogram_values().begin(), m.histogram_values().end());
    }
    out.push_back(std::move(s));
  }
  return out;
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
