// TaskControl: what the scheduler and the source coordinators do to a running
// task, wherever it runs. A Task in this process implements it directly; in a
// cluster, the JobManager holds a proxy that sends the same calls to the
// TaskManager running the task. Every method may be called from any thread
// and returns at once (the task handles it on its own thread).
#pragma once

#include <cstdint>
#include <vector>

#include <sluice/core/stream_element.h>

#include "checkpoint/checkpoint_options.h"

namespace sluice::runtime {

class TaskControl {
 public:
  virtual ~TaskControl() = default;
  virtual void cancel() = 0;
  virtual void postSplit(std::vector<uint8_t> split) = 0;
  virtual void postNoMoreSplits() = 0;
  // Source tasks, and tasks that finished: snapshot (and emit the barrier).
  virtual void triggerCheckpoint(CheckpointBarrier barrier,
                                 checkpoint::CheckpointOptions options) = 0;
  virtual void notifyCheckpointComplete(int64_t id) = 0;
  virtual void notifyCheckpointAborted(int64_t id, checkpoint::CheckpointOptions options) = 0;
};

}  // namespace sluice::runtime
