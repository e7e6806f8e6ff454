#include "checkpoint/pending_checkpoint.h"

namespace sluice::checkpoint {

PendingCheckpoint::PendingCheckpoint(int64_t id, int64_t timestamp, CheckpointOptions options,
                                     SteadyTime started, std::set<TaskId> tasksToAcknowledge,
                                     bool final)
    : id_(id),
      timestamp_(timestamp),
      options_(std::move(options)),
      started_(started),
      final_(final),
      awaiting_(std::move(tasksToAcknowledge)) {}

PendingCheckpoint::Ack PendingCheckpoint::acknowledgeTask(TaskId task, TaskStateSnapshot snapshot) {
  if (awaiting_.erase(task) == 0) return Ack::kDuplicateOrUnknown;
  acks_[task] = std::move(snapshot);
  return Ack::kAccepted;
}

void PendingCheckpoint::acknowledgeCoordinators(std::map<int, std::string> states) {
  coordinatorStates_ = std::move(states);
  coordinatorsAcknowledged_ = true;
}

CompletedCheckpoint PendingCheckpoint::finalize(const std::string& jobId, const StreamGraph& graph,
                                                const JobGraph& jobGraph,
                                                const std::vector<std::string>& uids) {
  CompletedCheckpoint cp;
  cp.id = id_;
  cp.type = options_.type;
  cp.timestamp = timestamp_;
  cp.jobId = jobId;
  cp.directory = options_.targetDirectory;
  for (const StreamNode& node : graph.nodes()) {
    const JobVertex& v = jobGraph.vertices.at(jobGraph.vertexOfNode.at(node.id));
    OperatorCheckpointState op;
    op.uid = uids.at(static_cast<size_t>(node.id));
    op.name = node.name;
    op.parallelism = v.parallelism;
    op.maxParallelism = v.maxParallelism;
    auto cs = coordinatorStates_.find(node.id);
    if (cs != coordinatorStates_.end()) {
      op.hasCoordinatorState = true;
      op.coordinatorState = std::move(cs->second);
    }
    bool any = op.hasCoordinatorState;
    op.subtasks.resize(static_cast<size_t>(v.parallelism));
    for (int s = 0; s < v.parallelism; ++s) {
      auto ack = acks_.find(TaskId{v.id, s});
      if (ack == acks_.end()) continue;
      auto st = ack->second.operators.find(node.id);
      if (st == ack->second.operators.end()) continue;
      op.subtasks[static_cast<size_t>(s)] = std::move(st->second);
      any |= !op.subtasks[static_cast<size_t>(s)].empty();
    }
    if (any) cp.operators.push_back(std::move(op));
  }
  acks_.clear();
  return cp;
}

void PendingCheckpoint::fail(const std::string& why) {
  promise_.set_exception(std::make_exception_ptr(SluiceException(why)));
}

}  // namespace sluice::checkpoint
