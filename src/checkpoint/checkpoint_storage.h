// Where a job's checkpoints and savepoints live, and how state files get
// there (Flink's FsCheckpointStorageAccess).
//
//   <state.checkpoints.dir>/<job-id>/chk-<n>/        one checkpoint
//   <state.checkpoints.dir>/<job-id>/shared/         SST files of incremental
//                                                    checkpoints, shared by
//                                                    the checkpoints that
//                                                    refer to them
//   <savepoint base>/savepoint-<job-id prefix>-<n>/  one savepoint
//
// Without state.checkpoints.dir, checkpoints are kept in memory: no
// directory, and keyed snapshots travel as bytes.
//
// Errors are Status values naming the path and the OS error.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <sluice/core/status.h>
#include <sluice/graph/operator.h>

namespace sluice::checkpoint {

class CheckpointStorage {
 public:
  // `checkpointsBase` is state.checkpoints.dir (a file:// prefix is
  // dropped); empty keeps checkpoints in memory.
  CheckpointStorage(const std::string& jobId, std::string checkpointsBase);

  // <base>/<job id>, in normal form; empty in memory.
  const std::string& jobDirectory() const { return jobDirectory_; }
  // <job dir>/shared; empty in memory.
  std::string sharedDirectory() const;

  // Creates the directory of checkpoint `id` (chk-<id>), or of a savepoint
  // under `savepointBase`, and returns it; empty for a checkpoint kept in
  // memory.
  Result<std::string> initializeLocation(int64_t id, bool savepoint,
                                         const std::string& savepointBase) const;

 private:
  const std::string jobId_;
  std::string jobDirectory_;
};

// Drops a leading "file://".
std::string stripFileScheme(std::string path);

// Creates `path` and its parents.
Status createDirectories(const std::string& path);

// Removes a directory and everything in it (best effort: errors are ignored,
// as there is nothing left to do about them).
void discardDirectory(const std::string& directory);

// SST files already stored, by RocksDB unique id (location and checksum
// set).
using StoredSstFiles = std::map<std::string, NativeKeyedSnapshot::SstFile>;

// Incremental checkpoints (state.backend.incremental). Stores a native
// keyed snapshot: its private files into `privateDirectory`
// (<chk-n>/<node>-<subtask>/), its SST files into `sharedDirectory`, each
// under a fresh name, recording each copy's size and checksum. An SST file
// whose unique id is in `stored` (the files of the last checkpoint this
// task knows completed) is referred to there instead of copied. Appends the
// copies it made to `uploaded`; on failure removes them and what it wrote.
Result<KeyedStateHandleRef> storeNativeSnapshot(const NativeKeyedSnapshot& local,
                                                const std::string& privateDirectory,
                                                const std::string& sharedDirectory,
                                                const StoredSstFiles& stored,
                                                std::vector<std::string>& uploaded);

}  // namespace sluice::checkpoint
