#include "checkpoint/checkpoint_stats.h"

#include <algorithm>
#include <filesystem>

#include "checkpoint/checkpoint_metadata.h"

namespace sluice::checkpoint {

void CheckpointStats::recordCompleted(const CompletedCheckpoint& checkpoint, int64_t durationMs,
                                      int64_t sizeBytes) {
  ++completed;
  totalDurationMs += durationMs;
  maxDurationMs = std::max(maxDurationMs, durationMs);
  totalSizeBytes += sizeBytes;
  maxSizeBytes = std::max(maxSizeBytes, sizeBytes);
  latestCompletedId = checkpoint.id;
  latestCompletedDirectory = checkpoint.directory;
  lastDurationMs = durationMs;
  lastSizeBytes = sizeBytes;
  if (CheckpointRecord* r = find(checkpoint.id)) {
    r->status = CheckpointRecord::Status::kCompleted;
    r->durationMs = durationMs;
    r->sizeBytes = sizeBytes;
    r->externalPath = checkpoint.directory;
    --inProgress;
  }
}

CheckpointRecord* CheckpointStats::find(int64_t id) {
  for (auto it = history.rbegin(); it != history.rend(); ++it) {
    if (it->id == id) return &*it;
  }
  return nullptr;
}

void CheckpointStats::addRecord(CheckpointRecord record) {
  if (record.status == CheckpointRecord::Status::kInProgress) ++inProgress;
  history.push_back(std::move(record));
  // In-progress records are kept even beyond the limit, so that their
  // completion is counted.
  while (static_cast<int>(history.size()) > std::max(1, historySize) &&
         history.front().status != CheckpointRecord::Status::kInProgress) {
    history.pop_front();
  }
}

int64_t checkpointSize(const CompletedCheckpoint& cp, int64_t newSharedBytes) {
  namespace fs = std::filesystem;
  int64_t size = newSharedBytes;
  std::error_code ec;
  auto fileSize = [&](const fs::path& p) {
    auto s = fs::file_size(p, ec);
    return ec ? int64_t{0} : static_cast<int64_t>(s);
  };
  if (!cp.directory.empty()) size += fileSize(fs::path(cp.directory) / kMetadataFileName);
  for (const auto& op : cp.operators) {
    if (cp.directory.empty()) size += static_cast<int64_t>(op.coordinatorState.size());
    for (const auto& st : op.subtasks) {
      if (cp.directory.empty()) {
        size += static_cast<int64_t>(st.operatorState.size() + st.timers.size());
      }
      if (st.keyed.bytes) size += static_cast<int64_t>(st.keyed.bytes->size());
      if (st.keyed.native) {
        for (const auto& f : st.keyed.native->privateFiles) {
          size += fileSize(fs::path(st.keyed.path) / f);
        }
      } else if (!st.keyed.path.empty()) {
        size += fileSize(st.keyed.path);
      }
    }
  }
  return size;
}

}  // namespace sluice::checkpoint
