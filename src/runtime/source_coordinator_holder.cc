#include "runtime/source_coordinator_holder.h"

namespace sluice::runtime {

SourceCoordinatorHolder::SourceCoordinatorHolder(std::vector<TaskControl*> tasks,
                                                 const OperatorFactory& factory,
                                                 const std::string* restored)
    : tasks_(std::move(tasks)) {
  coordinator_ = factory.createCoordinator(*this, restored);
}

void SourceCoordinatorHolder::start() {
  std::lock_guard lock(mu_);
  coordinator_->start();
}

void SourceCoordinatorHolder::close() {
  std::lock_guard lock(mu_);
  coordinator_->close();
}

std::string SourceCoordinatorHolder::snapshotAndTrigger(
    const CheckpointBarrier& barrier, const checkpoint::CheckpointOptions& options) {
  std::lock_guard lock(mu_);
  std::string state = coordinator_->snapshotState(barrier.id);
  for (TaskControl* t : tasks_) t->triggerCheckpoint(barrier, options);
  return state;
}

void SourceCoordinatorHolder::addReader(int subtask) {
  std::lock_guard lock(mu_);
  coordinator_->addReader(subtask);
}

void SourceCoordinatorHolder::requestSplit(int subtask) {
  std::lock_guard lock(mu_);
  coordinator_->handleSplitRequest(subtask);
}

void SourceCoordinatorHolder::assignSplit(int subtask, std::vector<uint8_t> split) {
  tasks_.at(static_cast<size_t>(subtask))->postSplit(std::move(split));
}

void SourceCoordinatorHolder::signalNoMoreSplits(int subtask) {
  tasks_.at(static_cast<size_t>(subtask))->postNoMoreSplits();
}

}  // namespace sluice::runtime
