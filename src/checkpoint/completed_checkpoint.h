// What a checkpoint is made of (Flink's TaskStateSnapshot, OperatorState,
// CompletedCheckpoint).
//
// A completed checkpoint holds, per operator (found again by its uid), the
// state of every parallel subtask: operator state and timers as bytes, keyed
// state as a canonical snapshot file, bytes (checkpoints kept in memory) or a
// stored native snapshot, and the source enumerator's unassigned splits.
// checkpoint_metadata.h writes and reads it as `_metadata`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <sluice/core/stream_element.h>
#include <sluice/graph/operator.h>

namespace sluice::checkpoint {

// One operator of one subtask.
struct OperatorSubtaskState {
  std::string operatorState;
  std::string timers;
  // A keyed snapshot: `path` (absolute while the job runs) or `bytes`;
  // neither when the operator has no keyed state.
  KeyedStateHandleRef keyed;
  bool hasKeyed() const { return !keyed.path.empty() || keyed.bytes != nullptr; }
  bool empty() const { return !hasKeyed() && timers.empty() && operatorState.empty(); }
};

// One task's part of a checkpoint: its chained operators, by stream node id.
struct TaskStateSnapshot {
  std::map<int, OperatorSubtaskState> operators;
};

// One operator over all its subtasks.
struct OperatorCheckpointState {
  std::string uid;
  std::string name;
  int parallelism = 1;
  int maxParallelism = 128;
  bool hasCoordinatorState = false;
  std::string coordinatorState;  // SourceCoordinatorBase::snapshotState
  std::vector<OperatorSubtaskState> subtasks;
};

struct CompletedCheckpoint {
  int64_t id = 0;
  CheckpointType type = CheckpointType::kCheckpoint;
  int64_t timestamp = 0;
  std::string jobId;
  // Where it lives; empty for a checkpoint kept in memory only.
  std::string directory;
  std::vector<OperatorCheckpointState> operators;

  const OperatorCheckpointState* find(const std::string& uid) const;
  std::string describe() const;  // "checkpoint 7 (/tmp/c/<job>/chk-7)"
  bool isSavepoint() const { return type == CheckpointType::kSavepoint; }
};

// Every shared (SST) file a snapshot or a checkpoint refers to.
void forEachSharedFile(const TaskStateSnapshot& snapshot,
                       const std::function<void(const NativeKeyedSnapshot::SstFile&)>& fn);
void forEachSharedFile(const CompletedCheckpoint& checkpoint,
                       const std::function<void(const NativeKeyedSnapshot::SstFile&)>& fn);

}  // namespace sluice::checkpoint
