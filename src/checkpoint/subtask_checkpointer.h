// SubtaskCheckpointer: one task's side of a checkpoint (Flink's
// SubtaskCheckpointCoordinatorImpl).
//
// On the task thread, between two elements: every chained operator emits
// what must precede the barrier (prepareSnapshotPreBarrier), the barrier
// goes downstream, and every operator captures its state (snapshotState;
// cheap: copy-on-write tables or a RocksDB checkpoint). Then, on the
// checkpoint I/O executor, the captured keyed state is written out (a
// canonical file per operator, bytes for in-memory checkpoints, or a native
// snapshot stored incrementally) and the task acknowledges with the handles.
// Any failure declines the checkpoint instead of failing the task, as in
// Flink; the failure counts against execution.checkpointing.tolerable-
// failed-checkpoints. A failure in prepareSnapshotPreBarrier (user code that
// emits) fails the task.
//
// Incremental checkpoints: a native snapshot refers to the stored SST files
// of the last checkpoint this task knows completed instead of copying them.
//
// Threading: checkpointState, notifyCheckpointComplete and the destructor on
// the task thread; the upload on the executor. The operators must outlive
// the uploads: waitForPendingUploads() before they close.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>

#include <sluice/graph/operator.h>

#include "checkpoint/checkpoint_coordinator_gateway.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/checkpoint_storage.h"
#include "core/serial_executor.h"

namespace sluice::checkpoint {

// One operator of the task's chain, as the checkpointer sees it.
struct ChainedOperatorRef {
  int node = -1;  // stream node id
  const std::string* name = nullptr;
  StreamOperatorBase* op = nullptr;
};

class SubtaskCheckpointer {
 public:
  struct Setup {
    TaskId task;
    int parallelism = 1;
    std::string taskName;
    CheckpointCoordinatorGateway* coordinator = nullptr;  // not null
    SerialExecutor* executor = nullptr;                   // not null
    // <job dir>/shared with state.backend.incremental and file storage;
    // empty otherwise (every snapshot is canonical).
    std::string incrementalSharedDirectory;
  };
  explicit SubtaskCheckpointer(Setup setup);
  ~SubtaskCheckpointer();
  SubtaskCheckpointer(const SubtaskCheckpointer&) = delete;
  SubtaskCheckpointer& operator=(const SubtaskCheckpointer&) = delete;

  // The shared files of this job that the restored state refers to: the
  // first checkpoint may refer to them (a retained checkpoint of another
  // job is not ours to share: it is copied, like Flink's NO_CLAIM mode).
  void rememberRestoredFiles(const std::map<int, OperatorStateRestore>& restore);

  // Takes checkpoint `barrier.id` of `operators` (head first).
  // `emitBarrier` forwards the barrier downstream; null for a task that has
  // finished its input (its outputs have ended; it snapshots the state its
  // operators finished with).
  void checkpointState(const CheckpointBarrier& barrier, const CheckpointOptions& options,
                       std::span<const ChainedOperatorRef> operators,
                       const std::function<void()>& emitBarrier);

  // Checkpoint `id` completed: its stored files are what later ones refer to.
  void notifyCheckpointComplete(int64_t id);

  // Whether the snapshot being taken now for `checkpointId` may be native
  // (OperatorContext::incrementalSnapshot).
  bool isIncrementalSnapshot(int64_t checkpointId) const {
    return incrementalCheckpointId_ == checkpointId;
  }
  // The newest checkpoint this task snapshotted, or -1.
  int64_t lastCheckpointId() const { return lastCheckpointId_; }
  // Whether checkpointState() ran for checkpoint `id` (among the last 64).
  bool tookCheckpoint(int64_t id) const {
    return std::find(taken_.begin(), taken_.end(), id) != taken_.end();
  }

  // Blocks until every upload this task started has acknowledged or
  // declined.
  void waitForPendingUploads();

 private:
  using StoredFiles = StoredSstFiles;  // unique id -> stored file
  struct Upload;

  void upload(const std::shared_ptr<Upload>& upload);
  Status writeKeyed(Upload& upload, std::vector<std::string>& uploaded,
                    std::map<int, StoredFiles>& stored);
  void decline(int64_t id, const std::string& reason, bool countsAsFailure);

  const Setup setup_;
  int64_t incrementalCheckpointId_ = -1;  // task thread
  int64_t lastCheckpointId_ = -1;         // task thread
  std::deque<int64_t> taken_;             // task thread: the last ids checkpointState() ran for

  std::mutex mu_;  // the task thread and the executor
  std::condition_variable uploadsDone_;
  int uploadsInFlight_ = 0;
  // Stored SST files per chained operator (by node): those of the last
  // checkpoint known completed, and those of checkpoints not yet confirmed.
  std::map<int, StoredFiles> confirmedFiles_;
  std::map<int, std::map<int64_t, StoredFiles>> pendingFiles_;
};

}  // namespace sluice::checkpoint
