// What a checkpoint is made of, where it is stored, and how a job restarts.
//
// A completed checkpoint holds, per operator (found again by its uid), the
// state of every parallel subtask: operator state and timers as bytes, keyed
// state as a canonical snapshot file (or bytes, for checkpoints kept in
// memory), and the source enumerator's unassigned splits. With a checkpoint
// directory it is written as
//
//   <dir>/<job-id>/chk-<n>/_metadata          this file, written last (temp + rename)
//   <dir>/<job-id>/chk-<n>/<node>-<subtask>.keyed   canonical keyed snapshots
//
// and a savepoint as <savepoint-dir>/savepoint-<job-id prefix>-<n>/ with the
// same layout. Paths inside _metadata are relative to its directory, so a
// checkpoint or savepoint can be moved or copied as a whole.
//
// With state.backend.incremental, RocksDB keyed state is stored natively
// instead: <chk-n>/<node>-<subtask>/ holds a snapshot's private files and
// <dir>/<job-id>/shared/ its SST files, shared by the checkpoints that
// contain them (the coordinator counts references and deletes a file when
// no retained checkpoint refers to it).
//
// _metadata layout: "SLUICECP" u32 version=2, i64 id, u8 type, i64 timestamp,
// string jobId, u32 numOperators, per operator: string uid, string name,
// i32 parallelism, i32 maxParallelism, bool hasCoordinatorState, string
// coordinatorState, u32 numSubtasks, per subtask: string operatorState,
// string timers, u8 keyedKind (0 none, 1 file, 2 inline bytes, 3 native),
// then for 0-2 string keyed (relative file name or bytes), for 3 string
// privateDir, i32 startKeyGroup, i32 endKeyGroup, u32 n x (string fileName,
// string uniqueId, u64 size, string location relative to the checkpoint),
// u32 m x string privateFile; then "SLUICEND". Version 1 (no kind 3) loads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <sluice/core/config.h>
#include <sluice/core/stream_element.h>
#include <sluice/graph/operator.h>

namespace sluice::runtime {

enum class CheckpointingMode { kExactlyOnce, kAtLeastOnce };

// What a barrier asks of the tasks besides a snapshot.
struct CheckpointOptions {
  CheckpointType type = CheckpointType::kCheckpoint;
  // stop-with-savepoint: sources stop after the barrier; with `drain` they
  // first emit the maximum watermark, so every event-time window fires.
  bool terminate = false;
  bool drain = false;
};

// One operator of one subtask.
struct OperatorSubtaskState {
  std::string operatorState;
  std::string timers;
  // A keyed snapshot: `path` (absolute while the job runs) or `bytes`;
  // neither when the operator has no keyed state.
  KeyedStateHandleRef keyed;
  bool hasKeyed() const { return !keyed.path.empty() || keyed.bytes != nullptr; }
};

// One task's part of a checkpoint: its chained operators, by stream node id.
struct TaskStateSnapshot {
  std::map<int, OperatorSubtaskState> operators;
};

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
};

inline constexpr const char* kMetadataFileName = "_metadata";

// Writes `checkpoint.directory`/_metadata atomically (temporary file, fsync,
// rename). Keyed snapshot paths must lie in that directory. Throws
// SluiceException naming the file and the cause.
void writeCheckpointMetadata(const CompletedCheckpoint& checkpoint);

// Reads a checkpoint or savepoint: its directory or its _metadata file.
// Throws SluiceException naming the path for a missing or corrupt file.
CompletedCheckpoint loadCheckpoint(const std::string& path);

// Incremental checkpoints (state.backend.incremental). A native keyed
// snapshot is stored as its private files in `privateDirectory`
// (<chk-n>/<node>-<subtask>/) and its SST files in `sharedDirectory`
// (<job>/shared/), each under a fresh name. An SST file whose unique id is in
// `stored` (id -> location, the files of the last checkpoint this task knows
// completed) is referenced there instead of copied. Appends the copies it
// made to `uploaded`; on failure removes them and what it wrote, and throws
// SluiceException naming the file.
KeyedStateHandleRef storeNativeSnapshot(const NativeKeyedSnapshot& local,
                                        const std::string& privateDirectory,
                                        const std::string& sharedDirectory,
                                        const std::map<std::string, std::string>& stored,
                                        std::vector<std::string>& uploaded);

// Every shared (SST) file a snapshot or a checkpoint refers to.
void forEachSharedFile(const TaskStateSnapshot& snapshot,
                       const std::function<void(const NativeKeyedSnapshot::SstFile&)>& fn);
void forEachSharedFile(const CompletedCheckpoint& checkpoint,
                       const std::function<void(const NativeKeyedSnapshot::SstFile&)>& fn);

// Removes a checkpoint directory and everything in it (best effort).
void discardCheckpointDirectory(const std::string& directory);

// Creates `path` and its parents; throws SluiceException with strerror.
void createDirectories(const std::string& path);

// A random 32-hex-digit job id, as Flink's JobID prints.
std::string generateJobId();

// ---------------------------------------------------------------------------
// Restart strategies (Flink's restart-strategy.* keys).

class RestartStrategy {
 public:
  virtual ~RestartStrategy() = default;
  // Called once per failure at `now`: the delay before the restart, or
  // nullopt when the job must fail.
  virtual std::optional<std::chrono::milliseconds> onFailure(
      std::chrono::steady_clock::time_point now) = 0;
  virtual std::string describe() const = 0;
};

// From restart-strategy.type and its parameters; `checkpointingEnabled`
// decides the default as Flink does. Throws SluiceException for an unknown
// type or a bad parameter, naming the key.
std::unique_ptr<RestartStrategy> createRestartStrategy(const Configuration& config,
                                                       bool checkpointingEnabled);

}  // namespace sluice::runtime
