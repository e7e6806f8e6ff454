#include "checkpoint/state_assignment.h"

#include <set>

#include <fmt/format.h>

#include <sluice/core/key_hash.h>
#include <sluice/state/operator_state.h>

namespace sluice::checkpoint {
namespace {

bool overlaps(const KeyGroupRange& a, const KeyGroupRange& b) {
  return a.endKeyGroup >= b.startKeyGroup && a.startKeyGroup <= b.endKeyGroup;
}

// The restores of every subtask of `vertex` from `op`.
std::vector<OperatorStateRestore> assignOperator(const OperatorCheckpointState& op,
                                                 const JobVertex& vertex) {
  std::vector<std::string> opStates;
  for (const auto& st : op.subtasks) opStates.push_back(st.operatorState);
  std::vector<std::string> parts = OperatorStateBackend::repartition(opStates, vertex.parallelism);
  std::vector<OperatorStateRestore> out(static_cast<size_t>(vertex.parallelism));
  const int oldParallelism = static_cast<int>(op.subtasks.size());
  for (int s = 0; s < vertex.parallelism; ++s) {
    OperatorStateRestore& r = out[static_cast<size_t>(s)];
    r.operatorState = std::move(parts.at(static_cast<size_t>(s)));
    const KeyGroupRange range =
        computeKeyGroupRangeForOperatorIndex(vertex.maxParallelism, vertex.parallelism, s);
    for (int old = 0; old < oldParallelism; ++old) {
      const auto& st = op.subtasks[static_cast<size_t>(old)];
      if (!st.timers.empty()) r.timers.push_back(st.timers);
      if (!st.hasKeyed()) continue;
      const KeyGroupRange oldRange =
          computeKeyGroupRangeForOperatorIndex(op.maxParallelism, oldParallelism, old);
      if (overlaps(oldRange, range)) r.keyedState.push_back(st.keyed);
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> operatorUids(const StreamGraph& graph) {
  std::vector<std::string> uids;
  for (const StreamNode& node : graph.nodes()) {
    uids.push_back(node.uid.empty() ? fmt::format("auto-{}", node.id) : node.uid);
  }
  return uids;
}

Result<StateAssignment> assignStates(const CompletedCheckpoint& cp, const StreamGraph& graph,
                                     const JobGraph& jobGraph, const std::vector<std::string>& uids,
                                     bool ignoreUnclaimedState) {
  StateAssignment out;
  std::set<std::string> claimed;
  try {
    for (const StreamNode& node : graph.nodes()) {
      const OperatorCheckpointState* op = cp.find(uids.at(static_cast<size_t>(node.id)));
      if (op == nullptr) continue;
      claimed.insert(op->uid);
      const JobVertex& v = jobGraph.vertices.at(jobGraph.vertexOfNode.at(node.id));
      bool keyed = false;
      for (const auto& st : op->subtasks) keyed |= st.hasKeyed();
      if (keyed && op->maxParallelism != v.maxParallelism) {
        return Status::invalidArgument(fmt::format(
            "cannot restore operator '{}' (uid '{}') from {}: its max parallelism changed from {} "
            "to {}; keyed state is split into max-parallelism key groups, so it must stay the same",
            node.name, op->uid, cp.describe(), op->maxParallelism, v.maxParallelism));
      }
      if (op->hasCoordinatorState) out.coordinatorStates[node.id] = op->coordinatorState;
      std::vector<OperatorStateRestore> restores = assignOperator(*op, v);
      for (int s = 0; s < v.parallelism; ++s) {
        out.tasks[TaskId{v.id, s}][node.id] = std::move(restores[static_cast<size_t>(s)]);
      }
    }
  } catch (const std::exception& e) {
    // OperatorStateBackend::repartition refuses corrupt or mismatched state.
    return Status::invalidArgument(
        fmt::format("cannot restore from {}: {}", cp.describe(), e.what()));
  }
  if (!ignoreUnclaimedState) {
    for (const auto& op : cp.operators) {
      if (claimed.count(op.uid) != 0) continue;
      return Status::invalidArgument(fmt::format(
          "{} holds state of operator '{}' (uid '{}') that this job does not have; give the "
          "operator that should take it the same uid, or set "
          "execution.savepoint.ignore-unclaimed-state: true to drop that state",
          cp.describe(), op.name, op.uid));
    }
  }
  return out;
}

}  // namespace sluice::checkpoint
