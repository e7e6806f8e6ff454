// BarrierAligner: what a task with several input channels does with the
// checkpoint barriers they deliver (Flink's SingleCheckpointBarrierHandler
// for exactly-once and CheckpointBarrierTracker for at-least-once).
//
// Exactly-once: the first barrier of a checkpoint starts its alignment. A
// channel that delivered that barrier is blocked: the input processor stops
// reading it (its further buffers wait) until every channel has delivered
// the barrier or ended. Then the checkpoint is triggered (the task snapshots
// and forwards the barrier) and the blocked channels resume. So the snapshot
// reflects exactly the records before the barrier on every channel.
//
// At-least-once: the same count, without blocking: records after a barrier
// may reach the snapshot's state, and are replayed after a restore.
//
// A barrier of a newer checkpoint before the current one is aligned
// overtakes it: the older one is declined (not counted as a failure; the
// coordinator goes on with the newer one). Barriers of checkpoints already
// taken, declined or aborted are ignored. abortCheckpoint() is the
// coordinator's "checkpoint n was aborted" (timeout, a decline elsewhere):
// an alignment of n ends and blocked channels resume.
//
// Not thread-safe: the task thread only. Actions run inside the call that
// caused them.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <sluice/core/stream_element.h>

#include "checkpoint/checkpoint_options.h"

namespace sluice::checkpoint {

class BarrierAligner {
 public:
  class Actions {
   public:
    virtual ~Actions() = default;
    // Every channel delivered the barrier of `barrier.id` or ended.
    virtual void triggerCheckpointOnBarrier(const CheckpointBarrier& barrier,
                                            const CheckpointOptions& options) = 0;
    // This task will not take checkpoint `id`.
    virtual void declineCheckpointOnBarrier(int64_t id, const std::string& reason) = 0;
  };

  BarrierAligner(int channels, CheckpointingMode mode, Actions& actions);

  // A barrier on `channel`. Returns true when the channel is blocked now.
  bool processBarrier(int channel, const CheckpointBarrier& barrier,
                      const CheckpointOptions& options);
  // `channel` ended; it counts as having delivered every later barrier.
  void processEndOfPartition(int channel);
  // The coordinator aborted checkpoint `id`.
  void abortCheckpoint(int64_t id);

  bool isBlocked(int channel) const { return blocked_[static_cast<size_t>(channel)] != 0; }
  // Channels unblocked since they were last taken, to be read again.
  bool hasResumable() const { return !resumable_.empty(); }
  int takeResumable();

  // The checkpoint being aligned, or -1.
  int64_t currentCheckpoint() const { return aligning_; }
  int numberOfChannels() const { return static_cast<int>(blocked_.size()); }

 private:
  void startAlignment(const CheckpointBarrier& barrier, const CheckpointOptions& options);
  void endAlignment();
  void maybeComplete();
  bool isGivenUp(int64_t id) const;

  const CheckpointingMode mode_;
  Actions& actions_;
  std::vector<char> blocked_;
  std::vector<char> delivered_;  // the barrier of aligning_
  std::vector<char> ended_;
  std::vector<int> resumable_;
  int64_t aligning_ = -1;
  int64_t last_ = -1;          // newest checkpoint triggered or given up
  std::set<int64_t> aborted_;  // aborted checkpoints newer than last_ and aligning_
  CheckpointBarrier barrier_;
  CheckpointOptions options_;
};

}  // namespace sluice::checkpoint
