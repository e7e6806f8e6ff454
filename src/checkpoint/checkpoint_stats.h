// What the checkpoint coordinator did so far (Flink's CheckpointStatsTracker,
// the counts and sizes JobClient::getCheckpointStats() reports).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "checkpoint/completed_checkpoint.h"

namespace sluice::checkpoint {

// One checkpoint or savepoint of the history (Flink's AbstractCheckpointStats).
// Times are epoch milliseconds.
struct CheckpointRecord {
  enum class Status { kInProgress, kCompleted, kFailed };
  int64_t id = 0;
  Status status = Status::kInProgress;
  bool isSavepoint = false;
  int64_t triggerTimestamp = 0;
  int64_t latestAckTimestamp = -1;
  int64_t durationMs = 0;
  int64_t sizeBytes = 0;  // what this checkpoint added (checkpointSize())
  int numSubtasks = 0;
  int numAcknowledged = 0;
  std::string externalPath;
  std::string failureMessage;
  int64_t failureTimestamp = -1;
  struct Vertex {
    int numSubtasks = 0;
    int numAcknowledged = 0;
    int64_t latestAckTimestamp = -1;
  };
  std::map<int, Vertex> vertices;  // by job vertex
};

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

  int64_t inProgress = 0;
  int64_t lastDurationMs = -1;  // of the latest completed one
  int64_t lastSizeBytes = -1;
  // Restores from a checkpoint or savepoint (the first attempt's included).
  int64_t restored = 0;
  int64_t lastRestoreTimestamp = -1;
  int64_t lastRestoredId = -1;
  bool lastRestoredIsSavepoint = false;
  std::string lastRestoredPath;
  // Newest last, at most historySize records (web.checkpoints.history).
  std::deque<CheckpointRecord> history;
  int historySize = 10;

  void recordCompleted(const CompletedCheckpoint& checkpoint, int64_t durationMs,
                       int64_t sizeBytes);
  CheckpointRecord* find(int64_t id);
  void addRecord(CheckpointRecord record);
};

// Bytes a checkpoint added: state inline in the metadata plus keyed files,
// and of an incremental checkpoint only `newSharedBytes`, the shared files
// no earlier retained checkpoint holds (Flink's "checkpointed data size").
// Reads file sizes: call outside locks.
int64_t checkpointSize(const CompletedCheckpoint& checkpoint, int64_t newSharedBytes);

}  // namespace sluice::checkpoint
