// CheckpointCoordinator: triggers a job's checkpoints and savepoints, collects
// the tasks' acknowledgements and completes them (Flink's
// CheckpointCoordinator).
//
// Lifecycle of one checkpoint:
//   trigger   periodically (execution.checkpointing.interval, at most
//             max-concurrent pending, at least min-pause after the last one
//             ended), on request (savepoints, triggerCheckpoint), or once
//             every task finished (the final checkpoint). The directory is
//             created, the PendingCheckpoint registered, then the tasks
//             reached through the CheckpointTaskGateway: the source
//             enumerators snapshot and the barrier is injected at the
//             sources (finished tasks are asked directly).
//   ack       every task acknowledges with its state handles, or declines;
//             a decline, a timeout (execution.checkpointing.timeout) or a
//             failed trigger aborts the checkpoint: its files go, it counts
//             against the tolerable failures (CheckpointFailureManager), and
//             the tasks hear notifyCheckpointAborted.
//   complete  _metadata is written (temp + rename), the checkpoint is
//             retained (state.checkpoints.num-retained; older ones and the
//             shared files only they referred to are deleted), and the tasks
//             hear notifyCheckpointComplete, which is when two-phase-commit
//             sinks commit.
//
// Threading and locks. Every public method is thread-safe. Task
// acknowledgements take `mu_` only briefly; the I/O of a completion (the
// _metadata write, file sizes, retention deletes) runs outside it, on the
// thread whose acknowledgement completed the checkpoint, and completions are
// serialized by their own lock so they retire in order. Triggers are
// serialized by theirs, from taking an id to the gateway's return, so the
// tasks hear of checkpoints in id order: a task that saw a newer barrier
// gives an older one up. Calls into the gateway are never made under `mu_`.
// Time comes from a steady-time function, so tests drive triggers and
// timeouts with runDue(now) and no timer thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sluice/core/clock.h>
#include <sluice/core/job_status.h>
#include <sluice/graph/job_graph.h>

#include "checkpoint/checkpoint_coordinator_config.h"
#include "checkpoint/checkpoint_coordinator_gateway.h"
#include "checkpoint/checkpoint_failure_manager.h"
#include "checkpoint/checkpoint_stats.h"
#include "checkpoint/checkpoint_storage.h"
#include "checkpoint/pending_checkpoint.h"
#include "checkpoint/shared_state_registry.h"

namespace sluice::checkpoint {

// The running attempt's tasks, as the coordinator reaches them. Embedded,
// the scheduler implements it with calls into the tasks' mailboxes; a remote
// JobManager implements it with RPCs. The coordinator never calls it under
// its lock; calls may come from any of the coordinator's callers' threads.
class CheckpointTaskGateway {
 public:
  virtual ~CheckpointTaskGateway() = default;
  // Snapshots every source enumerator and injects `barrier` at the source
  // tasks (atomically per source, so a split assigned after the snapshot
  // reaches its reader after the barrier); tasks that already finished get
  // the trigger directly. Returns the enumerator states by stream node.
  // Fails naming the source whose enumerator could not snapshot.
  virtual Result<std::map<int, std::string>> triggerCheckpoint(
      const CheckpointBarrier& barrier, const CheckpointOptions& options) = 0;
  // Asks a task that finished while checkpoint `barrier.id` was pending for
  // its snapshot (the barrier may never reach it now).
  virtual void triggerFinishedTask(TaskId task, const CheckpointBarrier& barrier,
                                   const CheckpointOptions& options) = 0;
  virtual void notifyCheckpointComplete(int64_t id) = 0;
  virtual void notifyCheckpointAborted(int64_t id, const CheckpointOptions& options) = 0;
  // Too many checkpoints failed: the attempt fails with `cause`.
  virtual void failJob(const std::string& cause) = 0;
  // A stop-with-savepoint completed: the attempt ends and the job finishes.
  virtual void stopWithSavepointComplete() = 0;
};

class CheckpointCoordinator final : public CheckpointCoordinatorGateway {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  using SteadyNow = std::function<SteadyTime()>;

  struct JobInfo {
    std::string jobId;
    std::shared_ptr<const StreamGraph> graph;
    const JobGraph* jobGraph = nullptr;  // outlives the coordinator
    std::vector<std::string> uids;       // operatorUids(graph)
  };

  // `clock` stamps barriers (the job's processing-time clock); `steadyNow`
  // drives intervals and timeouts (std::chrono::steady_clock when empty).
  CheckpointCoordinator(CheckpointCoordinatorConfig config, JobInfo job,
                        std::shared_ptr<const Clock> clock, SteadyNow steadyNow = {});
  ~CheckpointCoordinator() override;

  const CheckpointCoordinatorConfig& config() const { return config_; }
  const CheckpointStorage& storage() const { return storage_; }
  const JobInfo& job() const { return job_; }

  // Starts the thread that calls runDue() when something is due.
  void startTimer();
  // Does what is due at `now`: aborts timed-out checkpoints, triggers a
  // periodic or final checkpoint. Returns when to call it next.
  SteadyTime runDue(SteadyTime now);

  // ---- the scheduler's side ----
  // The checkpoint an attempt restores when no checkpoint completed yet
  // (a savepoint the job started from).
  void setRestoredCheckpoint(CompletedCheckpoint checkpoint);
  // An attempt restored `checkpoint` (counted in stats(): restored, last
  // restore timestamp).
  void recordRestore(const CompletedCheckpoint& checkpoint);
  // Records kept in stats().history (web.checkpoints.history).
  void setHistorySize(int size);
  // The newest completed checkpoint or savepoint, to restore from.
  std::optional<CompletedCheckpoint> latestCompleted() const;
  // What a recovery may restore from, newest first: the latest completed
  // checkpoint or savepoint, the older retained checkpoints, then the
  // checkpoint or savepoint the job started from.
  std::vector<CompletedCheckpoint> restoreCandidates() const;
  // Checkpoint `id` was found damaged: it is no longer a restore point (its
  // files stay for inspection until the job's directory goes).
  void forgetDamaged(const CompletedCheckpoint& damaged);
  // Creates the job's checkpoint directory (Flink's
  // initializeBaseLocationsForCheckpoint), so an unusable
  // state.checkpoints.dir fails the job at submission, not at every
  // checkpoint. OK when checkpoints are kept in memory or not taken.
  Status initializeStorage() const;
  // An attempt runs `tasks`; the gateway stays valid until attemptEnded().
  void attemptStarted(CheckpointTaskGateway* gateway, std::vector<TaskId> tasks);
  // The attempt failed (a task failed or the job is being cancelled): no
  // more triggers until the next attempt.
  void attemptFailed();
  // Every task of the attempt stopped. Aborts what is pending, waits for a
  // completion in flight, and forgets the gateway.
  void attemptEnded();
  // Task `task` finished its input: pending checkpoints ask it directly.
  void taskFinished(TaskId task);
  // Every task finished: the final checkpoint (with periodic checkpoints),
  // else the final commit at once.
  void allTasksFinished();
  // The job reached `status`: stops the timer and applies retention (a
  // finished job's checkpoints go; a cancelled job's go unless
  // RETAIN_ON_CANCELLATION; a failed job's stay).
  void shutdown(JobStatus status);

  // ---- triggers ----
  // A savepoint into a new directory under `savepointBase` (or a checkpoint
  // with options.type kCheckpoint, as a manual trigger). The future fails
  // naming the cause.
  std::future<CheckpointResult> triggerCheckpoint(CheckpointOptions options,
                                                  const std::string& savepointBase);

  // ---- CheckpointCoordinatorGateway (tasks, any thread) ----
  void acknowledgeCheckpoint(int64_t id, TaskId task, TaskStateSnapshot snapshot) override;
  void declineCheckpoint(int64_t id, TaskId task, const std::string& reason,
                         bool countsAsFailure) override;

  CheckpointStats stats() const;
  size_t numberOfPending() const;
  size_t numberOfRetained() const;

 private:
  // Work decided under mu_ and done after it is released: gateway calls,
  // file deletes, promise fulfilment.
  using Deferred = std::vector<std::function<void()>>;
  class GatewayLease;

  // How a trigger came about: asked for (a savepoint, the CLI, a test),
  // the periodic schedule (skipped, with no future, while another trigger
  // passes its barrier on or when max-concurrent or min-pause no longer
  // allow it), or the final checkpoint.
  enum class TriggerKind { kRequested, kPeriodic, kFinal };
  std::future<CheckpointResult> trigger(CheckpointOptions options, const std::string& savepointBase,
                                        TriggerKind kind);
  void abortLocked(std::map<int64_t, PendingCheckpoint>::iterator it, const std::string& reason,
                   bool countsAsFailure, Deferred& deferred);
  void abortCompleting(PendingCheckpoint pending, CompletedCheckpoint* finalized,
                       const std::string& reason);
  void complete(PendingCheckpoint pending);
  void failAttemptLocked(const std::string& cause, Deferred& deferred);
  static void run(Deferred& deferred);
  void wakeTimer();

  const CheckpointCoordinatorConfig config_;
  const JobInfo job_;
  const std::shared_ptr<const Clock> clock_;
  const SteadyNow steadyNow_;
  const CheckpointStorage storage_;

  mutable std::mutex mu_;
  std::condition_variable cv_;  // timer wake-ups, gateway calls done
  CheckpointTaskGateway* gateway_ = nullptr;
  int gatewayCalls_ = 0;  // calls in flight outside mu_
  std::vector<TaskId> tasks_;
  bool attemptFailed_ = false;
  bool finalPhase_ = false;  // every task finished
  bool finalDue_ = false;    // the final checkpoint is to be (re)triggered
  // When: at once after the tasks finished; a failed final checkpoint is
  // retried an interval (and at least the min pause) later, from the timer.
  SteadyTime finalDueAt_ = SteadyTime::min();
  bool stopped_ = false;  // shutdown() ran
  bool timerRunning_ = false;
  std::map<int64_t, PendingCheckpoint> pending_;
  // Fully acknowledged, completion under way: they still count against
  // max-concurrent, so a periodic checkpoint starts only once the one
  // before it is retained and its tasks can be told.
  int completing_ = 0;
  std::deque<CompletedCheckpoint> retained_;   // checkpoints, oldest first
  std::optional<CompletedCheckpoint> latest_;  // newest checkpoint or savepoint
  // What the job started from: the last restore candidate.
  std::optional<CompletedCheckpoint> restored_;
  SharedStateRegistry registry_;
  CheckpointFailureManager failures_;
  CheckpointStats stats_;
  int64_t nextId_ = 1;
  SteadyTime lastCheckpointEnd_;
  SteadyTime nextTrigger_ = SteadyTime::max();

  std::mutex completionMu_;  // serializes completions; never taken under mu_
  std::mutex triggerMu_;     // serializes triggers; never taken under mu_
  std::thread timer_;
};

}  // namespace sluice::checkpoint
