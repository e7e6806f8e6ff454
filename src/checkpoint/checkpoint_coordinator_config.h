// The checkpoint settings of one job (Flink's
// CheckpointCoordinatorConfiguration), read from the execution.checkpointing.*
// and state.* keys. docs/checkpoints.md lists them with their defaults.
#pragma once

#include <chrono>
#include <string>

#include <sluice/core/config.h>
#include <sluice/core/stream_element.h>

namespace sluice::checkpoint {

struct CheckpointCoordinatorConfig {
  // execution.checkpointing.interval; 0 disables periodic checkpoints.
  std::chrono::milliseconds interval{0};
  CheckpointingMode mode = CheckpointingMode::kExactlyOnce;
  std::chrono::milliseconds timeout{600000};
  std::chrono::milliseconds minPause{0};
  int maxConcurrent = 1;
  int tolerableFailures = 0;
  bool retainOnCancellation = false;  // externalized-checkpoint-retention
  int numRetained = 1;                // state.checkpoints.num-retained
  std::string checkpointsBase;        // state.checkpoints.dir; empty: in memory
  std::string savepointsBase;         // state.savepoints.dir
  bool ignoreUnclaimedState = false;  // execution.savepoint.ignore-unclaimed-state
  bool incremental = false;           // state.backend.incremental

  bool periodic() const { return interval.count() > 0; }

  // Throws SluiceException naming the key and the value it refuses.
  static CheckpointCoordinatorConfig fromConfiguration(const Configuration& config);
};

}  // namespace sluice::checkpoint
