#include "checkpoint/shared_state_registry.h"

namespace sluice::checkpoint {

void SharedStateRegistry::registerCheckpoint(const CompletedCheckpoint& checkpoint) {
  forEachSharedFile(checkpoint,
                    [&](const NativeKeyedSnapshot::SstFile& f) { ++refs_[f.location]; });
}

std::vector<std::string> SharedStateRegistry::releaseCheckpoint(
    const CompletedCheckpoint& checkpoint) {
  std::vector<std::string> unused;
  forEachSharedFile(checkpoint, [&](const NativeKeyedSnapshot::SstFile& f) {
    auto it = refs_.find(f.location);
    if (it == refs_.end() || --it->second > 0) return;
    refs_.erase(it);
    unused.push_back(f.location);
  });
  return unused;
}

std::vector<std::string> SharedStateRegistry::unregisteredFiles(
    const TaskStateSnapshot& snapshot) const {
  std::vector<std::string> out;
  forEachSharedFile(snapshot, [&](const NativeKeyedSnapshot::SstFile& f) {
    if (!isRegistered(f.location)) out.push_back(f.location);
  });
  return out;
}

std::vector<std::string> SharedStateRegistry::unregisteredFiles(
    const CompletedCheckpoint& checkpoint) const {
  std::vector<std::string> out;
  forEachSharedFile(checkpoint, [&](const NativeKeyedSnapshot::SstFile& f) {
    if (!isRegistered(f.location)) out.push_back(f.location);
  });
  return out;
}

}  // namespace sluice::checkpoint
