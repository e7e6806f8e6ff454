// Task: one thread running one operator chain (one subtask of a job vertex).
//
// The loop is a mailbox loop: run pending mails, then either let the source
// head emit a batch or decode one buffer from the input gate, flush outputs
// whose buffer timeout passed, and sleep on the TaskWaker when there is
// nothing to do. Every operator call happens on this thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <vector>

#include <sluice/core/clock.h>
#include <sluice/core/config.h>
#include <sluice/graph/job_graph.h>

#include "runtime/buffer_pool.h"
#include "runtime/checkpoint.h"
#include "runtime/input_gate.h"
#include "runtime/mailbox.h"
#include "runtime/record_writer.h"
#include "runtime/task_waker.h"

namespace sluice::runtime {

// What feeds gate channel k of a task.
struct InputChannelInfo {
  int streamEdge = -1;
  int inputIndex = 0;
};

// Coordinator-side hooks a source task calls (implemented by the job).
class SourceCoordinatorLink {
 public:
  virtual ~SourceCoordinatorLink() = default;
  virtual void addReader(int subtask) = 0;
  virtual void requestSplit(int subtask) = 0;
};

// The job's side of checkpoints, as a task sees it (implemented by the job
// run and its checkpoint coordinator). Thread-safe.
class CheckpointResponder {
 public:
  virtual ~CheckpointResponder() = default;
  // Where the task writes its keyed snapshots for checkpoint `id`; empty to
  // keep them in memory.
  virtual std::string checkpointDirectory(int64_t id) = 0;
  // Where incremental checkpoints store SST files (<job dir>/shared); empty
  // when checkpoints are not stored in files.
  virtual std::string sharedStateDirectory() = 0;
  virtual void acknowledge(int64_t id, int vertex, int subtask, TaskStateSnapshot snapshot) = 0;
  // `countsAsFailure`: the checkpoint failed (e.g. its state could not be
  // written), as opposed to being overtaken or made moot by a finished task.
  virtual void decline(int64_t id, int vertex, int subtask, const std::string& reason,
                       bool countsAsFailure) = 0;
  // Runs `work` on the checkpoint I/O thread (the asynchronous part).
  virtual void submitAsync(std::function<void()> work) = 0;
  // The task processed all its input and finished its operators; it now
  // waits for notifyCheckpointComplete(kFinalCheckpointId) or a cancel.
  virtual void taskFinished(int vertex, int subtask) = 0;
};

struct TaskResult {
  bool failed = false;
  bool cancelled = false;
  std::string error;  // names the operator, subtask and exception
  std::map<std::string, std::unique_ptr<Accumulator>> accumulators;
  int64_t numRecordsDropped = 0;
  std::map<std::string, int64_t> counters;  // OperatorContext::incrementCounter
};

// What every task of one job shares: the configuration, the clock, and the
// resources of each slot. Thread-safe.
class TaskServices {
 public:
  TaskServices(Configuration configuration, std::shared_ptr<const Clock> clock, int numberOfSlots)
      : configuration_(std::move(configuration)),
        clock_(std::move(clock)),
        numberOfSlots_(numberOfSlots < 1 ? 1 : numberOfSlots) {}
  const Configuration& configuration() const { return configuration_; }
  const Clock& clock() const { return *clock_; }
  // With slot sharing, subtask i of every vertex runs in slot i.
  int numberOfSlots() const { return numberOfSlots_; }
  std::shared_ptr<void> slotResource(int slot, const std::string& key,
                                     const std::function<std::shared_ptr<void>()>& make);

 private:
  const Configuration configuration_;
  const std::shared_ptr<const Clock> clock_;
  const int numberOfSlots_;
  std::mutex mu_;
  std::map<std::pair<int, std::string>, std::shared_ptr<void>> resources_;
};

class Task {
 public:
  Task(const StreamGraph& graph, const JobGraph& jobGraph, int vertex, int subtask,
       int attemptNumber);
  ~Task();

  // Wiring, before run().
  InputGate& gate() { return *gate_; }
  void createGate(std::vector<InputChannelInfo> channels);
  // One writer per output job edge, in JobVertex::outputs order.
  void addWriter(int jobEdge, std::vector<RecordWriter::Target> targets, size_t segmentSize,
                 int buffersPerChannel, int floatingBuffers);
  void setSourceCoordinator(SourceCoordinatorLink* link) { coordinator_ = link; }
  // Checkpointing: where acknowledgements go and how barriers align. Without
  // a responder the task neither snapshots nor waits for the final commit.
  void setCheckpointing(CheckpointResponder* responder, CheckpointingMode mode) {
    responder_ = responder;
    mode_ = mode;
  }
  // What each chained operator (by stream node id) restores from; operators
  // not in the map start empty.
  void setRestore(std::map<int, OperatorStateRestore> restore) { restore_ = std::move(restore); }
  // Must be set before run(); outlives the task.
  void setServices(TaskServices* services) { services_ = services; }

  // Runs the task to the end; never throws.
  TaskResult run();

  // Any thread.
  void cancel();
  void postSplit(std::vector<uint8_t> split);
  void postNoMoreSplits();
  void signalInputAvailable() { waker_.wake(); }
  // Source tasks: snapshot and emit `barrier` (declined when the task has
  // already finished its input).
  void triggerCheckpoint(CheckpointBarrier barrier, CheckpointOptions options);
  // Every operator's notifyCheckpointComplete(id), on the task thread.
  void notifyCheckpointComplete(int64_t id);
  // A stop-with-savepoint failed: a source that stopped after its barrier
  // reads on (as in Flink, the job keeps running).
  void resumeAfterFailedStop();
  int vertexId() const { return vertex_.id; }
  void requestWakeupAt(TaskWaker::Clock::time_point when);  // task thread only

  const std::string& name() const { return taskName_; }
  int subtask() const { return subtask_; }

 private:
  class Context;
  class Runner;
  friend class Runner;

  const StreamGraph& graph_;
  const JobGraph& jobGraph_;
  const JobVertex& vertex_;
  const int subtask_;
  const int attemptNumber_;
  std::string taskName_;
  TaskWaker waker_;
  Mailbox mailbox_;
  std::unique_ptr<InputGate> gate_;
  std::vector<InputChannelInfo> channels_;
  std::vector<std::unique_ptr<BufferPool>> pools_;
  std::map<int, std::unique_ptr<RecordWriter>> writers_;  // by stream edge id
  SourceCoordinatorLink* coordinator_ = nullptr;
  TaskServices* services_ = nullptr;
  std::atomic<bool> cancelled_{false};
  std::atomic<int> pendingSplits_{0};  // assigned, not yet delivered to the reader
  TaskWaker::Clock::time_point wakeupAt_ = TaskWaker::Clock::time_point::max();

  // Processing-time timers of all operators in the chain (task thread only).
  struct ProcessingTimer {
    int64_t timestamp;
    uint64_t sequence;  // registration order among equal timestamps
    std::function<void(int64_t)> callback;
    bool operator>(const ProcessingTimer& o) const {
      return timestamp != o.timestamp ? timestamp > o.timestamp : sequence > o.sequence;
    }
  };
  void registerProcessingTimer(int64_t timestamp, std::function<void(int64_t)> callback);
  // Fires the timers that are due; returns the steady-clock time at which the
  // next one is due (max() when none is, or when a manual clock drives time).
  TaskWaker::Clock::time_point fireDueTimers();
  std::priority_queue<ProcessingTimer, std::vector<ProcessingTimer>, std::greater<>> timers_;
  uint64_t timerSequence_ = 0;
  bool manualClock_ = false;
  // Installed by run() while a source head is alive; called from mails.
  std::function<void(std::vector<std::vector<uint8_t>>)> onSplits_;
  std::function<void()> onNoMoreSplits_;
  std::function<void(CheckpointBarrier, CheckpointOptions)> onTrigger_;
  std::function<void(int64_t)> onNotify_;

  CheckpointResponder* responder_ = nullptr;
  CheckpointingMode mode_ = CheckpointingMode::kExactlyOnce;
  std::map<int, OperatorStateRestore> restore_;
  bool finalCommitted_ = false;  // task thread
  bool sourceStopped_ = false;   // task thread: stop-with-savepoint barrier emitted
  // Asynchronous snapshot writes not yet done; the task waits for them
  // before it closes its operators (their backends back the writes).
  std::mutex asyncMu_;
  std::condition_variable asyncDone_;
  int asyncInFlight_ = 0;

  // Incremental checkpoints (state.backend.incremental with file storage).
  bool incremental_ = false;
  // The checkpoint whose snapshot is being taken natively (task thread).
  int64_t incrementalCheckpointId_ = -1;
  // Stored SST files (unique id -> location) per chained operator: those of
  // the last checkpoint this task knows completed, which later checkpoints
  // refer to instead of copying, and those of checkpoints not yet
  // confirmed. Guarded by sharedMu_ (the task thread and the I/O thread).
  using StoredFiles = std::map<std::string, std::string>;
  std::mutex sharedMu_;
  std::map<int, StoredFiles> confirmedShared_;
  std::map<int, std::map<int64_t, StoredFiles>> pendingShared_;
};

}  // namespace sluice::runtime
