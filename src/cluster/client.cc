#include "cluster/client.h"

#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include <sluice/core/config_options.h>
#include <sluice/core/status.h>

#include "cluster/job_library.h"
#include "cluster/plan_mode.h"
#include "cluster/rpc_util.h"

namespace sluice::cluster {

struct ClusterClient::Stub {
  std::unique_ptr<rpc::JobManagerService::Stub> stub;
};

namespace {

[[noreturn]] void fail(const grpc::Status& st, const std::string& address) {
  if (st.error_code() == grpc::StatusCode::UNAVAILABLE ||
      st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    throw SluiceException(
        fmt::format("cannot reach the JobManager at {}: {}", address, st.error_message()));
  }
  throw SluiceException(st.error_message());
}

void prepare(grpc::ClientContext& context, const std::string& token, int64_t deadlineMs) {
  setDeadline(context, deadlineMs);
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
}

}  // namespace

ClusterClient::ClusterClient(std::string address, std::string token)
    : address_(std::move(address)), token_(std::move(token)), stub_(std::make_unique<Stub>()) {
  stub_->stub = rpc::JobManagerService::NewStub(makeChannel(address_));
}

ClusterClient::~ClusterClient() = default;

rpc::SubmitJobResponse ClusterClient::submit(const std::string& libraryPath,
                                             const std::vector<std::string>& args,
                                             const Configuration& config) {
  std::ifstream in(libraryPath, std::ios::binary);
  if (!in) {
    throw SluiceException(
        fmt::format("cannot read job library '{}': {}", libraryPath, std::strerror(errno)));
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  rpc::SubmitJobRequest req;
  req.set_library(bytes.str());
  std::string name = libraryPath;
  if (auto slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
  req.set_library_name(name);
  for (const auto& a : args) req.add_args(a);
  Configuration sent;
  for (const std::string& key : config.keys()) {
    if (key == options::kRestAuthenticationToken.key) continue;
    sent.setString(key, *config.getString(key), config.source(key));
  }
  toProto(sent, req.mutable_config());
  req.set_fingerprint(buildFingerprint());
  grpc::ClientContext ctx;
  prepare(ctx, token_, 120000);
  rpc::SubmitJobResponse resp;
  grpc::Status st = stub_->stub->SubmitJob(&ctx, req, &resp);
  if (!st.ok()) fail(st, address_);
  return resp;
}

rpc::JobInfo ClusterClient::job(const std::string& jobId) {
  rpc::JobIdRequest req;
  req.set_job_id(jobId);
  grpc::ClientContext ctx;
  prepare(ctx, token_, 30000);
  rpc::JobInfo info;
  grpc::Status st = stub_->stub->GetJob(&ctx, req, &info);
  if (!st.ok()) fail(st, address_);
  return info;
}

std::vector<rpc::JobInfo> ClusterClient::list() {
  grpc::ClientContext ctx;
  prepare(ctx, token_, 30000);
  rpc::Empty e;
  rpc::ListJobsResponse resp;
  grpc::Status st = stub_->stub->ListJobs(&ctx, e, &resp);
  if (!st.ok()) fail(st, address_);
  return {resp.jobs().begin(), resp.jobs().end()};
}

void ClusterClient::cancel(const std::string& jobId) {
  rpc::JobIdRequest req;
  req.set_job_id(jobId);
  grpc::ClientContext ctx;
  prepare(ctx, token_, 30000);
  rpc::Empty e;
  grpc::Status st = stub_->stub->CancelJob(&ctx, req, &e);
  if (!st.ok()) fail(st, address_);
}

std::string ClusterClient::savepoint(const std::string& jobId, const std::string& directory,
                                     bool stop, bool drain) {
  rpc::SavepointRequest req;
  req.set_job_id(jobId);
  req.set_target_directory(directory);
  req.set_stop(stop);
  req.set_drain(drain);
  grpc::ClientContext ctx;
  prepare(ctx, token_, 3600 * 1000);
  rpc::SavepointResponse resp;
  grpc::Status st = stub_->stub->TriggerSavepoint(&ctx, req, &resp);
  if (!st.ok()) fail(st, address_);
  return resp.path();
}

rpc::JobInfo ClusterClient::waitForEnd(const std::string& jobId) {
  for (;;) {
    rpc::JobInfo info = job(jobId);
    const std::string& s = info.state();
    if (s == "FINISHED" || s == "FAILED" || s == "CANCELED") return info;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::string jobManagerAddress(const Configuration& config) {
  return hostPort(config.get(options::kJobManagerRpcAddress),
                  config.get(options::kJobManagerRpcPort));
}

ClusterClient clientFor(const Configuration& config) {
  return ClusterClient(jobManagerAddress(config), config.get(options::kRestAuthenticationToken));
}

void installRemoteExecutor(std::string libraryPath, std::vector<std::string> args) {
  setRemoteExecutor([libraryPath = std::move(libraryPath), args = std::move(args)](
                        std::shared_ptr<StreamGraph>, const Configuration& config) {
    Configuration submitted = config;
    submitted.setString(std::string(options::kExecutionTarget.key), "local", "the client");
    ClusterClient client = clientFor(config);
    rpc::SubmitJobResponse r = client.submit(libraryPath, args, submitted);
    std::printf("Job has been submitted with JobID %s\n", r.job_id().c_str());
    std::fflush(stdout);
    RemoteJobResult out;
    if (!config.get(options::kExecutionAttached)) return out;
    rpc::JobInfo info = client.waitForEnd(r.job_id());
    out.state = info.state() == "FINISHED"   ? JobStatus::kFinished
                : info.state() == "CANCELED" ? JobStatus::kCanceled
                                             : JobStatus::kFailed;
    out.error = info.error();
    out.netRuntimeMs = info.duration_ms();
    for (const auto& kv : info.counters()) out.counters[kv.key()] = std::stoll(kv.value());
    return out;
  });
}

}  // namespace sluice::cluster
