// What a task tells the checkpoint coordinator (Flink's
// CheckpointCoordinatorGateway). Embedded, the coordinator implements it
// directly; in a cluster, the TaskManager sends the same calls over RPC.
// Thread-safe: tasks call it from their threads and the checkpoint I/O
// thread.
#pragma once

#include <cstdint>
#include <string>

#include "checkpoint/checkpoint_options.h"
#include "checkpoint/completed_checkpoint.h"

namespace sluice::checkpoint {

class CheckpointCoordinatorGateway {
 public:
  virtual ~CheckpointCoordinatorGateway() = default;
  // Task `task` wrote its state for checkpoint `id`.
  virtual void acknowledgeCheckpoint(int64_t id, TaskId task, TaskStateSnapshot snapshot) = 0;
  // Task `task` cannot take part in checkpoint `id`. `countsAsFailure`: the
  // checkpoint failed (its state could not be taken or written), as opposed
  // to being overtaken by a newer one or made moot by a finished task.
  virtual void declineCheckpoint(int64_t id, TaskId task, const std::string& reason,
                                 bool countsAsFailure) = 0;
};

}  // namespace sluice::checkpoint
