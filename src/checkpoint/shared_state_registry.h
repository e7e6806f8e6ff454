// SharedStateRegistry: reference counts of the shared files of incremental
// checkpoints (Flink's SharedStateRegistry).
//
// A file stored for a pending checkpoint belongs to that checkpoint alone
// (each upload gets a fresh name) until it completes; from then on every
// retained checkpoint that refers to it holds one reference, and the file is
// deleted with the last one. Files of checkpoints that never complete are
// unregistered and go with their checkpoint.
//
// Not thread-safe: the coordinator calls it under its lock. It never deletes
// anything itself; it returns the paths to delete, so the caller can do the
// I/O outside its lock.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "checkpoint/completed_checkpoint.h"

namespace sluice::checkpoint {

class SharedStateRegistry {
 public:
  // A completed checkpoint is retained: one reference per file it refers to.
  void registerCheckpoint(const CompletedCheckpoint& checkpoint);
  // A retained checkpoint is discarded: the files nobody refers to any more.
  std::vector<std::string> releaseCheckpoint(const CompletedCheckpoint& checkpoint);
  bool isRegistered(const std::string& location) const { return refs_.count(location) != 0; }
  // The files of a snapshot no completed checkpoint refers to (the copies
  // made for a checkpoint that will not complete).
  std::vector<std::string> unregisteredFiles(const TaskStateSnapshot& snapshot) const;
  std::vector<std::string> unregisteredFiles(const CompletedCheckpoint& checkpoint) const;
  size_t size() const { return refs_.size(); }

 private:
  std::map<std::string, int> refs_;  // location -> retained checkpoints
};

}  // namespace sluice::checkpoint
