// What the checkpoint coordinator did so far (Flink's CheckpointStatsTracker,
// the counts and sizes JobClient::getCheckpointStats() reports).
#pragma once

#include <cstdint>
#include <string>

#include "checkpoint/completed_checkpoint.h"

namespace sluice::checkpoint {

struct CheckpointStats {
  int64_t completed = 0;  // checkpoints and savepoints
  int64_t failed = 0;     // declined, timed out or not written
  int64_t restarts = 0;   // attempts after the first (filled in by the scheduler)
  int64_t latestCompletedId = -1;
  std::string latestCompletedDirectory;  // empty for in-memory checkpoints
  int64_t totalDurationMs = 0;           // trigger to completion, over completed ones
  int64_t maxDurationMs = 0;
  int64_t totalSizeBytes = 0;  // state written, over completed ones
  int64_t maxSizeBytes = 0;

  void recordCompleted(const CompletedCheckpoint& checkpoint, int64_t durationMs,
                       int64_t sizeBytes);
};

// Bytes a checkpoint added: state inline in the metadata plus keyed files,
// and of an incremental checkpoint only `newSharedBytes`, the shared files
// no earlier retained checkpoint holds (Flink's "checkpointed data size").
// Reads file sizes: call outside locks.
int64_t checkpointSize(const CompletedCheckpoint& checkpoint, int64_t newSharedBytes);

}  // namespace sluice::checkpoint
