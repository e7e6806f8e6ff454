// Scheduler: runs one job's attempts (Flink's DefaultScheduler with its
// restart strategy, in one process).
//
// An attempt is every subtask of the job, run by a TaskDeployment (threads
// of this process, or TaskManagers of a cluster), with the source
// coordinators; it restores the
// state the coordinator's latest completed checkpoint assigns it
// (checkpoint/state_assignment.h). When a task fails, the attempt is
// cancelled; once every task has stopped, the restart strategy decides
// whether a new attempt starts (after its delay) or the job fails. The
// scheduler is also the checkpoint coordinator's CheckpointTaskGateway: it
// reaches the running attempt's tasks and source coordinators.
//
// Thread-safe. run() is the body of the job's monitor thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sluice/core/clock.h>
#include <sluice/core/config.h>
#include <sluice/core/job_status.h>
#include <sluice/core/runtime_context.h>
#include <sluice/graph/job_graph.h>

#include "checkpoint/checkpoint_coordinator.h"
#include "core/serial_executor.h"
#include "runtime/restart_strategy.h"
#include "runtime/source_coordinator_holder.h"
#include "runtime/task.h"
#include "runtime/task_group.h"

namespace sluice::runtime {

struct JobOutcome {
  JobStatus state = JobStatus::kCreated;
  std::string error;  // the first failure's message, when kFailed
  int64_t netRuntimeMs = 0;
  std::map<std::string, Accumulator::Value> accumulators;
  int64_t numRecordsDropped = 0;
  std::map<std::string, int64_t> counters;
};

// What the REST API shows of each subtask (Flink's ExecutionState names).
struct SubtaskStatus {
  std::string state = "CREATED";  // DEPLOYING, RUNNING, FINISHED, CANCELED, FAILED
  int attempt = 0;
  int64_t startTime = -1;  // epoch ms
  int64_t endTime = -1;
  TaskLocation location;
};

// A failure of the job (Flink's exception history entry).
struct FailureRecord {
  int64_t timestamp = 0;  // epoch ms
  std::string message;
  std::string taskName;  // "Map (2/4)"; empty when no task failed
  TaskLocation location;
};

class Scheduler final : private TaskEvents, private checkpoint::CheckpointTaskGateway {
 public:
  Scheduler(std::shared_ptr<const StreamGraph> graph, const JobGraph& jobGraph,
            MiniClusterOptions options, checkpoint::CheckpointCoordinator& coordinator,
            SerialExecutor& checkpointExecutor, std::string jobId,
            std::unique_ptr<TaskDeployment> deployment = nullptr);
  ~Scheduler() override;

  // Starts the first attempt, restoring `restore` when given. Throws when
  // the restore is impossible or a source enumerator cannot start.
  void start(const checkpoint::CompletedCheckpoint* restore);
  // Runs attempts until the job reached a terminal state; then no task
  // runs. The outcome's netRuntimeMs is left to the caller.
  JobOutcome run();
  // Cancels every task; run() then reports kCanceled.
  void cancel();
  int64_t restarts() const { return restarts_.load(); }
  // [vertex][subtask] of the current attempt.
  std::vector<std::vector<SubtaskStatus>> subtaskStatuses() const;
  // The job's failures, oldest first (at most kFailureHistory).
  std::vector<FailureRecord> failures() const;
  static constexpr size_t kFailureHistory = 16;
  // The source coordinator of source vertex `vertex` in the running attempt
  // (a TaskManager's reader calls it through RPC); null when there is none.
  // Valid until the attempt ends.
  SourceCoordinatorLink* sourceCoordinator(int vertex);

 private:
  struct Attempt;

  void startAttempt(int number, const checkpoint::CompletedCheckpoint* restore);
  void failAttempt(const std::string& error);
  // Waits for the running attempt's threads; then no task runs.
  void joinAttempt();
  // Whether to start another attempt, after waiting its delay.
  bool shouldRestart(Attempt& attempt);
  // The checkpoint a restart restores: the newest retained one that
  // verifies (checkpoint_integrity.h), skipping damaged ones with a warning;
  // none when no checkpoint completed. Throws when every one is damaged, and
  // (RestorePointUnreadable, so the restart strategy retries) when one
  // cannot be read now.
  std::optional<checkpoint::CompletedCheckpoint> restorePoint();
  // Logs once, as an error, when the same failure repeats
  // kRepeatedFailureWarning times in a row: a restart loop a user should
  // know how to stop.
  void noteRepeatedFailure(const std::string& error);
  JobOutcome outcome(Attempt& attempt, const std::string& coordinatorError);

  // TaskEvents
  void taskFinished(int vertex, int subtask) override;
  void taskEnded(int vertex, int subtask, TaskResult result) override;
  // CheckpointTaskGateway
  Result<std::map<int, std::string>> triggerCheckpoint(
      const CheckpointBarrier& barrier, const checkpoint::CheckpointOptions& options) override;
  void triggerFinishedTask(checkpoint::TaskId task, const CheckpointBarrier& barrier,
                           const checkpoint::CheckpointOptions& options) override;
  void notifyCheckpointComplete(int64_t id) override;
  void notifyCheckpointAborted(int64_t id, const checkpoint::CheckpointOptions& options) override;
  void failJob(const std::string& cause) override;
  void stopWithSavepointComplete() override;

  const std::shared_ptr<const StreamGraph> graph_;
  const JobGraph& jobGraph_;
  const MiniClusterOptions options_;
  checkpoint::CheckpointCoordinator& coordinator_;
  SerialExecutor& checkpointExecutor_;
  const std::string jobId_;
  std::unique_ptr<RestartStrategy> restartStrategy_;
  std::unique_ptr<TaskDeployment> deployment_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<Attempt> attempt_;  // the running one
  bool stoppedWithSavepoint_ = false;
  bool cancelledWhileRestarting_ = false;
  std::atomic<bool> cancelRequested_{false};
  std::atomic<int64_t> restarts_{0};
  // The restart-loop warning (noteRepeatedFailure), under mu_.
  static constexpr int kRepeatedFailureWarning = 10;
  std::string lastFailure_;
  int sameFailureCount_ = 0;
  bool repeatWarned_ = false;
  // Under mu_.
  std::vector<std::vector<SubtaskStatus>> statuses_;
  std::deque<FailureRecord> failures_;
  void setStatusLocked(int vertex, int subtask, const char* state);
};

}  // namespace sluice::runtime
