// State assignment: which part of a completed checkpoint each subtask of a
// job restores, at any parallelism (Flink's StateAssignmentOperation).
//
// Operators are matched by uid (operatorUids()). For each matched operator:
//   - operator state is repartitioned to the new parallelism by its mode
//     (OperatorStateBackend::repartition: split, union or broadcast);
//   - a new subtask gets every old keyed snapshot whose key-group range
//     overlaps its own (the backend reads only its own key groups), so max
//     parallelism must not change;
//   - timers of every old subtask go to every new subtask (each keeps the
//     timers of its key groups);
//   - the source enumerator's state goes to the new enumerator.
// State of an operator the job does not have is refused, unless
// execution.savepoint.ignore-unclaimed-state drops it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <sluice/core/status.h>
#include <sluice/graph/job_graph.h>

#include "checkpoint/checkpoint_options.h"
#include "checkpoint/completed_checkpoint.h"

namespace sluice::checkpoint {

// The uid of every stream node, by node id: the user's .uid(...), or
// "auto-<node id>" for a node without one (which therefore restores only
// into a job of the same shape).
std::vector<std::string> operatorUids(const StreamGraph& graph);

struct StateAssignment {
  // The restore of each chained operator (by stream node id) of each task.
  std::map<TaskId, std::map<int, OperatorStateRestore>> tasks;
  // The enumerator state of each source (by stream node id).
  std::map<int, std::string> coordinatorStates;
};

// Plans the restore of `jobGraph` from `checkpoint`. Fails (InvalidArgument,
// naming the operator, its uid and the checkpoint) when the checkpoint holds
// state the job cannot take.
Result<StateAssignment> assignStates(const CompletedCheckpoint& checkpoint,
                                     const StreamGraph& graph, const JobGraph& jobGraph,
                                     const std::vector<std::string>& uids,
                                     bool ignoreUnclaimedState);

}  // namespace sluice::checkpoint
