// PendingCheckpoint: a checkpoint that was triggered and is not complete yet
// (Flink's PendingCheckpoint).
//
// It waits for an acknowledgement from every task of the running attempt
// and for the states of the source enumerators (taken when it was
// triggered). Once it has all of them, finalize() turns it into the
// CompletedCheckpoint that _metadata stores. Not thread-safe: the
// coordinator holds it under its lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <sluice/graph/job_graph.h>

#include "checkpoint/checkpoint_options.h"
#include "checkpoint/completed_checkpoint.h"

namespace sluice::checkpoint {

// What a triggered checkpoint or savepoint became.
struct CheckpointResult {
  int64_t id = 0;
  std::string directory;  // empty for a checkpoint kept in memory
};

class PendingCheckpoint {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  PendingCheckpoint(int64_t id, int64_t timestamp, CheckpointOptions options, SteadyTime started,
                    std::set<TaskId> tasksToAcknowledge, bool final);

  int64_t id() const { return id_; }
  int64_t timestamp() const { return timestamp_; }
  const CheckpointOptions& options() const { return options_; }
  const std::string& directory() const { return options_.targetDirectory; }
  SteadyTime started() const { return started_; }
  // The checkpoint taken once every task finished; its completion lets
  // two-phase-commit sinks commit their last transaction.
  bool isFinal() const { return final_; }
  bool isSavepoint() const { return options_.type == CheckpointType::kSavepoint; }
  CheckpointBarrier barrier() const { return CheckpointBarrier{id_, timestamp_, options_.type}; }

  enum class Ack { kAccepted, kDuplicateOrUnknown };
  Ack acknowledgeTask(TaskId task, TaskStateSnapshot snapshot);
  void acknowledgeCoordinators(std::map<int, std::string> states);
  bool isAwaiting(TaskId task) const { return awaiting_.count(task) != 0; }
  // The tasks still to acknowledge.
  const std::set<TaskId>& awaited() const { return awaiting_; }
  bool isFullyAcknowledged() const { return awaiting_.empty() && coordinatorsAcknowledged_; }
  // The task snapshots received so far.
  const std::map<TaskId, TaskStateSnapshot>& acknowledged() const { return acks_; }

  // The completed checkpoint: the acknowledged state of every operator with
  // state, by uid. Moves the acknowledged state out.
  CompletedCheckpoint finalize(const std::string& jobId, const StreamGraph& graph,
                               const JobGraph& jobGraph, const std::vector<std::string>& uids);

  // Savepoints and manual checkpoints: who waits for the outcome.
  std::future<CheckpointResult> result() { return promise_.get_future(); }
  void succeed(CheckpointResult result) { promise_.set_value(std::move(result)); }
  void fail(const std::string& why);

 private:
  int64_t id_;
  int64_t timestamp_;
  CheckpointOptions options_;
  SteadyTime started_;
  bool final_;
  std::set<TaskId> awaiting_;
  std::map<TaskId, TaskStateSnapshot> acks_;
  bool coordinatorsAcknowledged_ = false;
  std::map<int, std::string> coordinatorStates_;  // stream node -> enumerator state
  std::promise<CheckpointResult> promise_;
};

}  // namespace sluice::checkpoint
