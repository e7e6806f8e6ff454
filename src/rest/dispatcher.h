// What the REST API (Flink's WebMonitorEndpoint) reads and asks for, in
// neutral structs: the job process in embedded mode and the JobManager in
// cluster mode implement Dispatcher; rest/web_monitor renders Flink's JSON
// from these. Times are epoch milliseconds, -1 when not (yet) known.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sluice/core/status.h>

namespace sluice::rest {

struct SubtaskInfo {
  int subtask = 0;
  std::string status;  // Flink's ExecutionState: CREATED, DEPLOYING, RUNNING, FINISHED, ...
  int attempt = 0;
  std::string host;           // "127.0.0.1" (embedded: "localhost")
  std::string endpoint;       // "host:dataPort" of its TaskManager; empty: `host` is shown
  std::string taskManagerId;  // embedded: the process's pseudo TaskManager id
  int64_t startTime = -1;
  int64_t endTime = -1;
};

struct VertexInput {
  std::string sourceVertexId;
  std::string shipStrategy;  // Flink's names: FORWARD, HASH, REBALANCE, RESCALE, BROADCAST, ...
};

struct VertexInfo {
  std::string id;    // 32 lowercase hex digits, stable for the job
  int index = 0;     // position in the JobGraph
  std::string name;  // "Source: Words -> Map" (the chain's names)
  int parallelism = 1;
  int maxParallelism = 128;
  std::string status;  // aggregated: RUNNING while any subtask runs, ...
  int64_t startTime = -1;
  int64_t endTime = -1;
  std::vector<std::string> operatorNames;  // chained operators, head first
  std::vector<VertexInput> inputs;
  std::vector<SubtaskInfo> subtasks;
};

struct CheckpointInfo {
  int64_t id = 0;
  std::string status;  // IN_PROGRESS, COMPLETED, FAILED
  bool isSavepoint = false;
  int64_t triggerTimestamp = -1;
  int64_t latestAckTimestamp = -1;
  int64_t endToEndDurationMs = 0;
  int64_t checkpointedSize = 0;     // bytes this checkpoint added
  int64_t stateSize = 0;            // bytes of the whole state it refers to
  int64_t alignmentDurationMs = 0;  // longest barrier alignment of any subtask
  int numSubtasks = 0;
  int numAcknowledgedSubtasks = 0;
  std::string externalPath;  // directory of a completed, stored checkpoint
  std::string failureMessage;
  int64_t failureTimestamp = -1;
  // Per vertex id: subtasks acknowledged, and the latest acknowledgement.
  struct TaskStats {
    int numSubtasks = 0;
    int numAcknowledged = 0;
    int64_t latestAckTimestamp = -1;
    int64_t stateSize = 0;
  };
  std::map<std::string, TaskStats> tasks;
};

struct CheckpointingInfo {
  bool enabled = false;
  std::string mode = "exactly_once";  // or at_least_once
  int64_t intervalMs = 0;
  int64_t timeoutMs = 0;
  int64_t minPauseMs = 0;
  int maxConcurrent = 1;
  bool externalized = false;
  bool deleteOnCancellation = true;
  std::string stateBackend;       // "HashMapStateBackend", "EmbeddedRocksDBStateBackend"
  std::string checkpointStorage;  // "FileSystemCheckpointStorage", "JobManagerCheckpointStorage"
  bool unaligned = false;
  int tolerableFailures = 0;

  int64_t restoredCount = 0;
  int64_t completedCount = 0;
  int64_t failedCount = 0;
  int64_t inProgressCount = 0;
  // Newest first, at most `web.checkpoints.history` entries.
  std::vector<CheckpointInfo> history;
  struct Restored {
    int64_t id = 0;
    int64_t restoreTimestamp = 0;
    bool isSavepoint = false;
    std::string externalPath;
  };
  std::optional<Restored> restored;
};

struct ExceptionInfo {
  std::string exceptionName;  // "sluice::SluiceException"
  std::string stacktrace;     // the message (Sluice has no stack traces)
  int64_t timestamp = 0;
  std::string taskName;  // "Map (2/4)", empty for job-level failures
  std::string location;  // "host:port" of the TaskManager
  std::string taskManagerId;
};

struct JobInfo {
  std::string id;  // 32 lowercase hex digits
  std::string name;
  std::string state;  // Flink's JobStatus: INITIALIZING, CREATED, RUNNING, ..., FINISHED
  int64_t startTime = -1;
  int64_t endTime = -1;
  int64_t durationMs = 0;
  int maxParallelism = 128;
  bool isStoppable = false;                   // every source can stop (stop-with-savepoint)
  std::map<std::string, int64_t> timestamps;  // state name -> when it was entered
  std::vector<VertexInfo> vertices;
  CheckpointingInfo checkpoints;
  std::vector<ExceptionInfo> exceptions;  // newest first
  int64_t restarts = 0;
};

struct TaskManagerInfo {
  std::string id;
  std::string path;  // the TaskManager's RPC address, "host:port"
  int dataPort = -1;
  int64_t timeSinceLastHeartbeat = 0;  // epoch ms of the last heartbeat (Flink's field)
  int slotsNumber = 0;
  int freeSlots = 0;
  int cpuCores = 0;
  int64_t physicalMemory = 0;
  int64_t freeMemory = 0;
  int64_t managedMemory = 0;
  int64_t networkMemory = 0;
};

struct ClusterOverview {
  int taskManagers = 0;
  int slotsTotal = 0;
  int slotsAvailable = 0;
};

// Metric values by Flink's REST ids, as strings (MetricFetcher's MetricStore).
struct MetricStore {
  using Values = std::map<std::string, std::string>;
  Values jobManager;
  std::map<std::string, Values> taskManagers;  // by TaskManager id
  std::map<std::string, Values> jobs;          // by job id (jobmanager.job scope)
  // job id -> vertex id -> subtask -> values. Operator metrics are named
  // "<operator name>.<metric>", task metrics "<metric>".
  std::map<std::string, std::map<std::string, std::map<int, Values>>> tasks;
};

struct JarInfo {
  std::string id;  // "<uuid>_<file name>", as Flink's
  std::string name;
  int64_t uploaded = 0;
};

struct JarRunRequest {
  std::vector<std::string> programArgs;
  int parallelism = -1;  // -1: the job's own
  std::string savepointPath;
  bool allowNonRestoredState = false;
};

class Dispatcher {
 public:
  virtual ~Dispatcher() = default;

  // Every job this process knows, running and ended, newest first.
  virtual std::vector<JobInfo> jobs() = 0;
  // The job with `id`, or nothing.
  virtual std::optional<JobInfo> job(const std::string& id) = 0;
  virtual ClusterOverview overview() = 0;
  virtual std::vector<TaskManagerInfo> taskManagers() = 0;
  // Current metric values (may be a few seconds old in cluster mode).
  virtual MetricStore metrics() = 0;

  // Actions. Status codes: kNotFound (unknown job or jar), kInvalidArgument
  // (the job cannot do that now), others: failures.
  virtual Status cancel(const std::string& jobId) = 0;
  // Blocks until the savepoint is complete; returns its path. `terminate`:
  // stop the job afterwards (stop-with-savepoint), `drain`: emit MAX_WATERMARK first.
  virtual Result<std::string> savepoint(const std::string& jobId, const std::string& directory,
                                        bool terminate, bool drain) = 0;

  // Job libraries (cluster mode only: supportsJars() false in embedded mode).
  virtual bool supportsJars() const { return false; }
  virtual Result<JarInfo> uploadJar(const std::string& fileName, const std::string& bytes) {
    (void)fileName;
    (void)bytes;
    return Status::invalidArgument("job upload is only available in cluster mode");
  }
  virtual std::vector<JarInfo> jars() { return {}; }
  virtual Status deleteJar(const std::string& id) { return Status::notFound("no jar " + id); }
  // Submits the job in jar `id`; returns its job id.
  virtual Result<std::string> runJar(const std::string& id, const JarRunRequest& request) {
    (void)request;
    return Status::notFound("no jar " + id);
  }
};

}  // namespace sluice::rest
