// SourceCoordinatorHolder: the coordinator side of one source vertex (Flink's
// SourceCoordinator): owns the split enumerator, serializes every call into
// it, and hands its split assignments to the reader tasks' mailboxes.
// Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <sluice/graph/operator.h>

#include "checkpoint/checkpoint_options.h"
#include "runtime/task.h"
#include "runtime/task_control.h"

namespace sluice::runtime {

class SourceCoordinatorHolder final : public SourceCoordinatorLink,
                                      public SplitEnumeratorContextBase {
 public:
  // `restored`: the enumerator state of the checkpoint the attempt restores.
  SourceCoordinatorHolder(std::vector<TaskControl*> tasks, const OperatorFactory& factory,
                          const std::string* restored);

  void start();
  void close();

  // Snapshots the enumerator and triggers every reader under one lock, so a
  // split assigned after the snapshot reaches its reader after the barrier
  // (Flink closes the coordinator's event valve for the same reason).
  std::string snapshotAndTrigger(const CheckpointBarrier& barrier,
                                 const checkpoint::CheckpointOptions& options);

  void addReader(int subtask) override;
  void requestSplit(int subtask) override;
  int currentParallelism() const override { return static_cast<int>(tasks_.size()); }
  void assignSplit(int subtask, std::vector<uint8_t> split) override;
  void signalNoMoreSplits(int subtask) override;

 private:
  std::vector<TaskControl*> tasks_;
  std::recursive_mutex mu_;  // the enumerator may call back into us
  std::unique_ptr<SourceCoordinatorBase> coordinator_;
};

}  // namespace sluice::runtime
