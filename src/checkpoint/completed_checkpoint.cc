#include "checkpoint/completed_checkpoint.h"

#include <fmt/format.h>

namespace sluice::checkpoint {

const OperatorCheckpointState* CompletedCheckpoint::find(const std::string& uid) const {
  for (const auto& op : operators) {
    if (op.uid == uid) return &op;
  }
  return nullptr;
}

std::string CompletedCheckpoint::describe() const {
  const char* what = isSavepoint() ? "savepoint" : "checkpoint";
  if (directory.empty()) return fmt::format("{} {}", what, id);
  return fmt::format("{} {} ({})", what, id, directory);
}

void forEachSharedFile(const TaskStateSnapshot& snapshot,
                       const std::function<void(const NativeKeyedSnapshot::SstFile&)>& fn) {
  for (const auto& [node, st] : snapshot.operators) {
    if (!st.keyed.native) continue;
    for (const auto& f : st.keyed.native->sstFiles) fn(f);
  }
}

void forEachSharedFile(const CompletedCheckpoint& checkpoint,
                       const std::function<void(const NativeKeyedSnapshot::SstFile&)>& fn) {
  for (const auto& op : checkpoint.operators) {
    for (const auto& st : op.subtasks) {
      if (!st.keyed.native) continue;
      for (const auto& f : st.keyed.native->sstFiles) fn(f);
    }
  }
}

}  // namespace sluice::checkpoint
