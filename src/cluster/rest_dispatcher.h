// The JobManager's REST API, web UI and metrics (Flink's WebMonitorEndpoint
// with its Dispatcher and MetricFetcher): a rest::Dispatcher over the
// JobManager's jobs and TaskManagers, the job libraries uploaded with
// POST /jars/upload (kept under web.upload.dir), the TaskManagers' metrics
// fetched over RPC at most once per metrics.fetcher.update-interval, the
// JobManager's own metric group, and the process's metric reporters.
//
// The JobManager implements JobManagerBackend; ClusterRest calls it from the
// REST server's threads and from metric snapshots (the JobManager's gauges).
// submit() and savepoint() block the request that asked; a TaskManager that
// does not answer the metric fetcher holds REST requests for metrics up to
// its short deadline.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include <sluice/core/config.h>
#include <sluice/core/status.h>

#include "runtime/mini_cluster.h"

namespace sluice::cluster {

// What the REST layer reads from and asks of the JobManager. Thread-safe.
class JobManagerBackend {
 public:
  virtual ~JobManagerBackend() = default;

  // A job as the JobManager's entry shows it (a copy, taken under its lock).
  struct JobView {
    std::string id;
    std::string name;
    int64_t startTimeMs = 0;  // submission
    int64_t endTimeMs = -1;   // when it could not start
    std::shared_ptr<const StreamGraph> graph;
    std::shared_ptr<runtime::JobRun> run;  // null until started
    bool waitingForSlots = false;          // its deployment exists, the run does not yet
    std::string startError;                // it could not start
  };
  // Every job, newest first.
  virtual std::vector<JobView> jobViews() = 0;
  virtual std::optional<JobView> jobView(const std::string& id) = 0;

  struct TaskManagerView {
    std::string id;
    std::string host;
    int rpcPort = 0;
    int dataPort = 0;
    int slots = 0;
    int freeSlots = 0;
    int64_t lastHeartbeatEpochMs = 0;
    int cpuCores = 0;
    int64_t physicalMemory = 0;
    int64_t freeMemory = 0;
    int64_t managedMemory = 0;
    int64_t networkMemory = 0;
  };
  // The registered TaskManagers, in registration order.
  virtual std::vector<TaskManagerView> taskManagerViews() = 0;
  virtual int runningJobs() = 0;

  // A job to submit, as SubmitJob carries it.
  struct Submission {
    std::string library;  // the bytes
    std::string libraryName;
    std::vector<std::string> args;
    Configuration config;
  };
  // Submits as SubmitJob does; on success sets *jobId and *jobName.
  virtual grpc::Status submit(const Submission& submission, std::string* jobId,
                              std::string* jobName) = 0;
  virtual grpc::Status cancel(const std::string& jobId) = 0;
  virtual grpc::Status savepoint(const std::string& jobId, const std::string& directory,
                                 bool terminate, bool drain, std::string* path) = 0;

  // The JobManager's configuration and its blob store's directory.
  virtual const Configuration& configuration() const = 0;
  virtual std::string blobDirectory() const = 0;
};

// A gRPC status as a Status for the REST API: NOT_FOUND -> kNotFound,
// FAILED_PRECONDITION and INVALID_ARGUMENT -> kInvalidArgument, others kInternal.
Status fromGrpc(const grpc::Status& status);

class ClusterRest {
 public:
  // Starts the metric reporters, the JobManager's metric group and the REST
  // endpoint (rest.bind-address:rest.port). Throws SluiceException naming
  // the address and the keys when the port cannot be bound.
  ClusterRest(JobManagerBackend& backend, const Configuration& config);
  // Stops serving and waits for requests in flight; the backend must live
  // until then.
  ~ClusterRest();
  ClusterRest(const ClusterRest&) = delete;
  ClusterRest& operator=(const ClusterRest&) = delete;

  // "http://127.0.0.1:8081".
  std::string address() const;
  int prometheusPort() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::cluster
