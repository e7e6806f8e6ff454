// Task: one thread running one operator chain (one subtask of a job vertex;
// Flink's StreamTask).
//
// run() builds the OperatorChain, restores and opens it, then runs the
// mailbox loop: run pending mails (split assignments, checkpoint triggers
// and notices, cancellation), fire due processing-time timers, let the
// InputProcessor take one step (a source batch, or one network buffer),
// flush outputs whose buffer timeout passed, and sleep on the TaskWaker when
// there is nothing to do. At the end of input the chain finishes, end of
// partition goes downstream, and the task waits for the job's final commit
// (notifyCheckpointComplete(kFinalCheckpointId)) before it closes. Every
// operator call happens on this thread; checkpoints are taken by the
// SubtaskCheckpointer between two steps.
//
// The public methods other than run() may be called from any thread; they
// post mails.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sluice/graph/job_graph.h>

#include "checkpoint/checkpoint_coordinator_gateway.h"
#include "checkpoint/checkpoint_options.h"
#include "checkpoint/subtask_checkpointer.h"
#include "runtime/buffer_pool.h"
#include "runtime/input_gate.h"
#include "runtime/input_processor.h"
#include "runtime/mailbox.h"
#include "runtime/operator_chain.h"
#include "runtime/processing_timers.h"
#include "runtime/record_writer.h"
#include "runtime/task_control.h"
#include "runtime/task_environment.h"
#include "runtime/task_metrics.h"
#include "runtime/task_waker.h"

namespace sluice::runtime {

// What the scheduler hears from a task besides its result.
class TaskListener {
 public:
  virtual ~TaskListener() = default;
  // The task processed all its input and finished its operators; it now
  // waits for notifyCheckpointComplete(kFinalCheckpointId) or a cancel.
  virtual void taskFinished(int vertex, int subtask) = 0;
};

class Task final : public TaskControl, private ChainHost, private CheckpointHandler {
 public:
  Task(const StreamGraph& graph, const JobGraph& jobGraph, int vertex, int subtask,
       int attemptNumber);
  ~Task() override;

  // Wiring, before run().
  InputGate& gate() { return *gate_; }
  void createGate(std::vector<InputChannelInfo> channels);
  // One writer per output job edge, in JobVertex::outputs order.
  void addWriter(int jobEdge, std::vector<RecordWriter::Target> targets, size_t segmentSize,
                 int buffersPerChannel, int floatingBuffers);
  void setSourceCoordinator(SourceCoordinatorLink* link) { coordinator_ = link; }
  // Must be set before run(); both outlive the task.
  void setServices(TaskServices* services) { services_ = services; }
  void setListener(TaskListener* listener) { listener_ = listener; }
  // Checkpointing: where acknowledgements go, how barriers align, and where
  // incremental checkpoints store SST files (empty: every snapshot is
  // canonical). Without a gateway the task neither snapshots nor waits for
  // the final commit.
  void setCheckpointing(checkpoint::CheckpointCoordinatorGateway* gateway, CheckpointingMode mode,
                        std::string incrementalSharedDirectory);
  // What each chained operator (by stream node id) restores from; operators
  // not in the map start empty.
  void setRestore(std::map<int, OperatorStateRestore> restore) { restore_ = std::move(restore); }

  // Runs the task to the end; never throws.
  TaskResult run();

  // Any thread (TaskControl).
  void cancel() override;
  void postSplit(std::vector<uint8_t> split) override;
  void postNoMoreSplits() override;
  void signalInputAvailable() override { waker_.wake(); }
  // Source tasks, and tasks that finished: snapshot (and emit the barrier).
  void triggerCheckpoint(CheckpointBarrier barrier, checkpoint::CheckpointOptions options) override;
  // Every operator's notifyCheckpointComplete(id), on the task thread.
  void notifyCheckpointComplete(int64_t id) override;
  // The coordinator aborted checkpoint `id`: an alignment of it ends; after
  // a failed stop-with-savepoint a stopped source reads on.
  void notifyCheckpointAborted(int64_t id, checkpoint::CheckpointOptions options) override;

  int vertexId() const { return info_.vertex; }
  int subtask() const { return info_.subtask; }
  const std::string& name() const { return info_.taskName; }

 private:
  enum class Phase { kCreated, kRunning, kFinished, kEnded };

  // ChainHost
  void requestSplit() override;
  void requestWakeupAt(std::chrono::steady_clock::time_point when) override;
  void registerProcessingTimer(int64_t timestamp, std::function<void(int64_t)> callback) override;
  bool isIncrementalSnapshot(int64_t checkpointId) override;
  // CheckpointHandler
  void performCheckpoint(const CheckpointBarrier& barrier,
                         const checkpoint::CheckpointOptions& options) override;
  void declineCheckpoint(int64_t id, const std::string& reason) override;
  bool checkpointOvertaken(int64_t id) const override;

  void registerIoMetrics();
  void runInputLoop(InputProcessor& processor);
  void flushDueOutputs(TaskWaker::Clock::time_point now, TaskWaker::Clock::time_point& deadline);
  void finishAndAwaitFinalCommit();
  void checkNoLateSplits() const;
  void cleanUp(TaskResult& result);
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

  const StreamGraph& graph_;
  const JobGraph& jobGraph_;
  const JobVertex& vertex_;
  TaskInfo info_;
  TaskWaker waker_;
  Mailbox mailbox_;
  std::unique_ptr<InputGate> gate_;
  std::vector<InputChannelInfo> channels_;
  std::vector<std::unique_ptr<BufferPool>> pools_;
  std::map<int, std::unique_ptr<RecordWriter>> writers_;  // by stream edge id
  SourceCoordinatorLink* coordinator_ = nullptr;
  TaskServices* services_ = nullptr;
  TaskListener* listener_ = nullptr;
  checkpoint::CheckpointCoordinatorGateway* checkpointGateway_ = nullptr;
  CheckpointingMode mode_ = CheckpointingMode::kExactlyOnce;
  std::string incrementalSharedDirectory_;
  std::map<int, OperatorStateRestore> restore_;
  std::atomic<bool> cancelled_{false};
  std::atomic<int> pendingSplits_{0};  // assigned, not yet delivered to the reader

  // Task thread, while run() runs.
  Phase phase_ = Phase::kCreated;
  std::unique_ptr<TaskMetrics> metrics_;
  std::unique_ptr<OperatorChain> chain_;
  std::unique_ptr<InputProcessor> processor_;
  SourceInputProcessor* source_ = nullptr;  // processor_, when the head is a source
  std::unique_ptr<checkpoint::SubtaskCheckpointer> checkpointer_;
  std::unique_ptr<ProcessingTimers> timers_;
  TaskWaker::Clock::time_point wakeupAt_ = TaskWaker::Clock::time_point::max();
  TaskWaker::Clock::time_point nextFlush_ = TaskWaker::Clock::now();
  bool finalCommitted_ = false;
};

}  // namespace sluice::runtime
