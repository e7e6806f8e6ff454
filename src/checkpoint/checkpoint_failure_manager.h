// CheckpointFailureManager: when failed checkpoints fail the job (Flink's
// CheckpointFailureManager and execution.checkpointing.tolerable-failed-
// checkpoints).
//
// Consecutive failed checkpoints are counted; a completed one resets the
// count. Once the count exceeds the tolerable number, the job fails with a
// message naming the count, the setting and the last cause. Savepoints
// never count. Not thread-safe: the coordinator calls it under its lock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace sluice::checkpoint {

class CheckpointFailureManager {
 public:
  explicit CheckpointFailureManager(int tolerableFailures) : tolerable_(tolerableFailures) {}

  // A checkpoint failed because of `reason`. Returns the job's failure
  // message when it must fail now.
  std::optional<std::string> checkpointFailed(const std::string& reason, bool final);
  void checkpointCompleted() { consecutive_ = 0; }
  int64_t consecutiveFailures() const { return consecutive_; }

 private:
  const int64_t tolerable_;
  // 64 bits: at any tolerance up to INT32_MAX the count cannot wrap.
  int64_t consecutive_ = 0;
};

}  // namespace sluice::checkpoint
