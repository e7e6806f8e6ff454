// The embedded mini-cluster: runs one job's subtasks as threads in this
// process, wired by in-process channels. A standalone cluster runs the same
// Task code and swaps only the channels (ARCHITECTURE.md).
//
// JobRun is the job as its client sees it: it reads the job's checkpoint
// settings, creates the CheckpointCoordinator and the Scheduler, and runs
// the scheduler on a monitor thread until the job is terminal.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <sluice/core/job_status.h>
#include <sluice/graph/job_graph.h>

#include "checkpoint/checkpoint_coordinator.h"
#include "checkpoint/checkpoint_stats.h"
#include "core/metric_registry.h"
#include "core/serial_executor.h"
#include "runtime/scheduler.h"

namespace sluice::runtime {

// One running job. Thread-safe.
class JobRun {
 public:
  // `graph` must be resolved. Starts all tasks. Throws SluiceException for
  // an invalid checkpoint configuration or a savepoint the job cannot
  // restore.
  //
  // `deployment` runs the attempts' tasks (null: threads of this process);
  // it is made for the job once its id and graph are known. `jobId` empty:
  // a new random id.
  using DeploymentFactory = std::function<std::unique_ptr<TaskDeployment>(
      const std::string& jobId, const JobGraph& jobGraph)>;
  static std::shared_ptr<JobRun> start(std::shared_ptr<const StreamGraph> graph,
                                       MiniClusterOptions options,
                                       const DeploymentFactory& deployment = nullptr,
                                       std::string jobId = "");
  ~JobRun();

  JobStatus state() const;
  // Cancels every task; wait() then reports kCanceled.
  void cancel();
  // Blocks until the job reached a terminal state.
  JobOutcome wait();
  const JobGraph& jobGraph() const { return jobGraph_; }
  const std::string& jobId() const { return jobId_; }
  const std::shared_ptr<const StreamGraph>& streamGraph() const { return graph_; }
  Scheduler& scheduler() { return *scheduler_; }
  checkpoint::CheckpointCoordinator& coordinator() { return *coordinator_; }
  // Milliseconds since the job started.
  int64_t runtimeMs() const;

  // Takes a savepoint into a new directory under `directory` (empty: the
  // state.savepoints.dir option) and returns its path once it is complete.
  // With `terminate`, the job then ends (FINISHED); with `drain` as well,
  // sources first emit the maximum watermark so that every window fires.
  // Throws SluiceException when the savepoint fails.
  std::string triggerSavepoint(const std::string& directory, bool terminate = false,
                               bool drain = false);
  // Takes a checkpoint now, besides the periodic ones, and returns its id
  // once it is complete. Throws SluiceException when it fails.
  int64_t triggerCheckpoint();
  // Calls `f` once the job has reached its terminal state: on the monitor
  // thread when it ends later, on the caller's thread when it has already
  // ended. The run is intact while `f` runs.
  void onEnd(std::function<void(JobRun&)> f);
  checkpoint::CheckpointStats checkpointStats() const;
  // When the job was submitted and when it ended (epoch ms; -1: running).
  int64_t startTimeMs() const { return startTimeMs_; }
  int64_t endTimeMs() const { return endTimeMs_.load(); }
  // The job's configuration, as its operators see it.
  const Configuration& configuration() const { return configuration_; }

 private:
  JobRun() = default;
  void monitor();
  void registerJobMetrics(const std::string& host);

  std::shared_ptr<const StreamGraph> graph_;
  JobGraph jobGraph_;
  std::string jobId_;
  std::chrono::steady_clock::time_point started_;
  // Declared in destruction order: the scheduler's tasks use the
  // coordinator and the executor.
  std::unique_ptr<SerialExecutor> checkpointExecutor_;
  std::unique_ptr<checkpoint::CheckpointCoordinator> coordinator_;
  std::unique_ptr<Scheduler> scheduler_;
  mutable std::mutex mu_;
  std::condition_variable done_;
  JobOutcome outcome_;
  std::function<void(JobRun&)> onEnd_;  // under mu_
  std::thread monitor_;
  int64_t startTimeMs_ = 0;
  std::atomic<int64_t> endTimeMs_{-1};
  Configuration configuration_;
  std::shared_ptr<metrics::MetricGroupImpl> metricGroup_;
};

// The id of this process's embedded TaskManager (metrics, REST).
const std::string& embeddedTaskManagerId();

}  // namespace sluice::runtime
