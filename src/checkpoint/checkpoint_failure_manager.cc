#include "checkpoint/checkpoint_failure_manager.h"

#include <fmt/format.h>

namespace sluice::checkpoint {

std::optional<std::string> CheckpointFailureManager::checkpointFailed(const std::string& reason,
                                                                      bool final) {
  ++consecutive_;
  if (consecutive_ <= tolerable_) return std::nullopt;
  if (final) {
    return fmt::format(
        "Exceeded checkpoint tolerable failure threshold: the final checkpoint failed {} "
        "time(s) (execution.checkpointing.tolerable-failed-checkpoints = {}); the last time "
        "because {}",
        consecutive_, tolerable_, reason);
  }
  return fmt::format(
      "Exceeded checkpoint tolerable failure threshold: {} consecutive checkpoint(s) failed "
      "(execution.checkpointing.tolerable-failed-checkpoints = {}); the last one failed "
      "because {}",
      consecutive_, tolerable_, reason);
}

}  // namespace sluice::checkpoint
