#include "checkpoint/barrier_aligner.h"

#include <fmt/format.h>

#include <sluice/core/assert.h>

namespace sluice::checkpoint {

BarrierAligner::BarrierAligner(int channels, CheckpointingMode mode, Actions& actions)
    : mode_(mode),
      actions_(actions),
      blocked_(static_cast<size_t>(channels), 0),
      delivered_(static_cast<size_t>(channels), 0),
      ended_(static_cast<size_t>(channels), 0) {}

bool BarrierAligner::isGivenUp(int64_t id) const { return id <= last_ || aborted_.count(id) != 0; }

bool BarrierAligner::processBarrier(int channel, const CheckpointBarrier& barrier,
                                    const CheckpointOptions& options) {
  const auto c = static_cast<size_t>(channel);
  SLUICE_ASSERT(!ended_[c], "a barrier arrived on a channel that has ended");
  if (isGivenUp(barrier.id)) return false;
  if (barrier.id < aligning_) return false;  // older than the one being aligned: superseded
  if (barrier.id > aligning_) {
    if (aligning_ >= 0) {
      const int64_t overtaken = aligning_;
      last_ = aligning_;
      endAlignment();
      actions_.declineCheckpointOnBarrier(
          overtaken, fmt::format("barrier {} arrived before checkpoint {} was aligned", barrier.id,
                                 overtaken));
    }
    startAlignment(barrier, options);
  }
  delivered_[c] = 1;
  if (mode_ == CheckpointingMode::kExactlyOnce) blocked_[c] = 1;
  maybeComplete();
  return blocked_[c] != 0;
}

void BarrierAligner::processEndOfPartition(int channel) {
  ended_[static_cast<size_t>(channel)] = 1;
  maybeComplete();
}

void BarrierAligner::abortCheckpoint(int64_t id) {
  if (isGivenUp(id)) return;
  if (id == aligning_) {
    last_ = id;
    endAlignment();
  } else if (id > aligning_) {
    aborted_.insert(id);
  }
}

int BarrierAligner::takeResumable() {
  const int c = resumable_.back();
  resumable_.pop_back();
  return c;
}

void BarrierAligner::startAlignment(const CheckpointBarrier& barrier,
                                    const CheckpointOptions& options) {
  aligning_ = barrier.id;
  barrier_ = barrier;
  options_ = options;
  // Aborts of checkpoints older than this one are moot now.
  aborted_.erase(aborted_.begin(), aborted_.lower_bound(barrier.id));
}

void BarrierAligner::endAlignment() {
  for (size_t c = 0; c < blocked_.size(); ++c) {
    delivered_[c] = 0;
    if (blocked_[c]) {
      blocked_[c] = 0;
      resumable_.push_back(static_cast<int>(c));
    }
  }
  aligning_ = -1;
}

void BarrierAligner::maybeComplete() {
  if (aligning_ < 0) return;
  for (size_t c = 0; c < blocked_.size(); ++c) {
    if (!delivered_[c] && !ended_[c]) return;
  }
  last_ = aligning_;
  const CheckpointBarrier barrier = barrier_;
  const CheckpointOptions options = options_;
  endAlignment();
  actions_.triggerCheckpointOnBarrier(barrier, options);
}

}  // namespace sluice::checkpoint
