#include "runtime/task.h"

#include <fmt/format.h>

#include "core/logging.h"

namespace sluice::runtime {

std::shared_ptr<void> TaskServices::slotResource(
    int slot, const std::string& key, const std::function<std::shared_ptr<void>()>& make) {
  std::lock_guard lock(mu_);
  auto& r = resources_[{slot, key}];
  if (!r) r = make();
  return r;
}

Task::Task(const StreamGraph& graph, const JobGraph& jobGraph, int vertex, int subtask,
           int attemptNumber)
    : graph_(graph), jobGraph_(jobGraph), vertex_(jobGraph.vertices.at(vertex)), mailbox_(waker_) {
  info_.taskName = vertex_.name;
  info_.jobName = jobGraph.jobName;
  info_.vertex = vertex_.id;
  info_.subtask = subtask;
  info_.parallelism = vertex_.parallelism;
  info_.maxParallelism = vertex_.maxParallelism;
  info_.attemptNumber = attemptNumber;
}

Task::~Task() = default;

void Task::createGate(std::vector<InputChannelInfo> channels) {
  channels_ = std::move(channels);
  gate_ = std::make_unique<InputGate>(static_cast<int>(channels_.size()), waker_);
}

void Task::addWriter(int jobEdge, std::vector<RecordWriter::Target> targets, size_t segmentSize,
                     int buffersPerChannel, int floatingBuffers) {
  int segments = static_cast<int>(targets.size()) * buffersPerChannel + floatingBuffers;
  pools_.push_back(std::make_unique<BufferPool>(segmentSize, segments));
  // Local channels carry typed batches of the edge's record type, each
  // kBatchSegments segments' worth of records.
  const TypeOps* type = graph_.edge(jobGraph_.edges.at(jobEdge).streamEdge).type.get();
  const size_t batchBytes = kBatchSegments * segmentSize;
  pools_.back()->setBatchFactory([type, batchBytes] { return type->createBatch(batchBytes); },
                                 batchBytes);
  writers_[jobGraph_.edges.at(jobEdge).streamEdge] = std::make_unique<RecordWriter>(
      std::move(targets), *pools_.back(), jobGraph_.bufferTimeoutMs == 0);
}

void Task::setCheckpointing(checkpoint::CheckpointCoordinatorGateway* gateway,
                            CheckpointingMode mode, std::string incrementalSharedDirectory) {
  checkpointGateway_ = gateway;
  mode_ = mode;
  incrementalSharedDirectory_ = std::move(incrementalSharedDirectory);
}

// ---- any thread ----------------------------------------------------------------

void Task::cancel() {
  cancelled_.store(true);
  for (auto& p : pools_) p->cancel();
  waker_.wake();
}

void Task::postSplit(std::vector<uint8_t> split) {
  pendingSplits_.fetch_add(1);
  mailbox_.post([this, s = std::move(split)]() mutable {
    // A split that comes after the reader ended stays counted, and the task
    // fails for it (checkNoLateSplits).
    if (source_ == nullptr) return;
    pendingSplits_.fetch_sub(1);
    source_->source().addSplits({std::move(s)});
  });
}

void Task::postNoMoreSplits() {
  mailbox_.post([this] {
    if (source_ != nullptr) source_->source().noMoreSplits();
  });
}

void Task::triggerCheckpoint(CheckpointBarrier barrier, checkpoint::CheckpointOptions options) {
  mailbox_.post([this, barrier, options] {
    if (phase_ == Phase::kRunning) {
      processor_->triggerCheckpoint(barrier, options);
    } else if (phase_ == Phase::kFinished && checkpointer_) {
      // A task that finished its input snapshots without barriers (its
      // outputs have ended): its operators' state as they finished. Checkpoints
      // taken while other tasks still run include it (Flink's FLIP-147).
      if (checkpointer_->tookCheckpoint(barrier.id)) return;  // took part through its barrier
      if (barrier.id < checkpointer_->lastCheckpointId()) {
        // Overtaken by a newer trigger (one sent while the task finished):
        // declined, as a running task declines it (performCheckpoint).
        declineCheckpoint(barrier.id, fmt::format("the task took checkpoint {} before it",
                                                  checkpointer_->lastCheckpointId()));
        return;
      }
      checkpointer_->checkpointState(barrier, options, chain_->operators(), nullptr);
      chain_->resetCurrentOperator();
    } else if (checkpointGateway_ != nullptr) {
      checkpointGateway_->declineCheckpoint(barrier.id, {info_.vertex, info_.subtask},
                                            "the task is not running", false);
    }
  });
}

void Task::notifyCheckpointComplete(int64_t id) {
  mailbox_.post([this, id] {
    if (phase_ != Phase::kRunning && phase_ != Phase::kFinished) return;
    if (checkpointer_) checkpointer_->notifyCheckpointComplete(id);
    chain_->notifyCheckpointComplete(id);
    if (id == kFinalCheckpointId) finalCommitted_ = true;
  });
}

void Task::notifyCheckpointAborted(int64_t id, checkpoint::CheckpointOptions options) {
  mailbox_.post([this, id, options] {
    if (phase_ == Phase::kRunning) processor_->abortCheckpoint(id, options);
  });
}

// ---- ChainHost and CheckpointHandler (task thread) --------------------------------

void Task::requestSplit() {
  if (coordinator_ != nullptr) coordinator_->requestSplit(info_.subtask);
}

void Task::requestWakeupAt(TaskWaker::Clock::time_point when) {
  if (when < wakeupAt_) wakeupAt_ = when;
}

void Task::registerProcessingTimer(int64_t timestamp, std::function<void(int64_t)> callback) {
  timers_->add(timestamp, std::move(callback));
}

bool Task::isIncrementalSnapshot(int64_t checkpointId) {
  return checkpointer_ && checkpointer_->isIncrementalSnapshot(checkpointId);
}

void Task::performCheckpoint(const CheckpointBarrier& barrier,
                             const checkpoint::CheckpointOptions& options) {
  if (!checkpointer_) return;
  if (checkpointOvertaken(barrier.id)) {
    // A trigger that overtook this one came first (the coordinator sends
    // them in order, so only a lost or delayed message does this): its
    // barrier is out already, and this one would follow it downstream,
    // where it is given up. Declined, so that it fails now instead of at
    // its timeout.
    declineCheckpoint(barrier.id, fmt::format("the task took checkpoint {} before it",
                                              checkpointer_->lastCheckpointId()));
    return;
  }
  checkpointer_->checkpointState(barrier, options, chain_->operators(), [&] {
    const std::vector<uint8_t> bytes = checkpoint::encodeBarrier(barrier, options);
    for (auto& [id, w] : writers_) {
      w->broadcastBarrier(bytes.data(), bytes.size());
      w->flushAll();
    }
  });
  chain_->resetCurrentOperator();
}

bool Task::checkpointOvertaken(int64_t id) const {
  return checkpointer_ && id <= checkpointer_->lastCheckpointId();
}

void Task::declineCheckpoint(int64_t id, const std::string& reason) {
  if (checkpointGateway_ != nullptr) {
    checkpointGateway_->declineCheckpoint(id, {info_.vertex, info_.subtask}, reason, false);
  }
}

// ---- the task thread -----------------------------------------------------------------

TaskResult Task::run() {
  log::setThreadName(
      fmt::format("{} ({}/{})", info_.taskName, info_.subtask + 1, info_.parallelism));
  TaskResult result;
  // A manual clock wakes the task when a test moves it, so that due
  // processing-time timers fire without waiting on wall time.
  const auto* manual = dynamic_cast<const ManualClock*>(&services_->clock());
  const int64_t clockListener = manual ? manual->addListener([this] { waker_.wake(); }) : 0;
  timers_ = std::make_unique<ProcessingTimers>(services_->clock(), manual != nullptr);
  metrics_ =
      std::make_unique<TaskMetrics>(*services_, info_, jobVertexHexId(jobGraph_, info_.vertex));
  chain_ = std::make_unique<OperatorChain>(graph_, jobGraph_, vertex_, info_, *services_,
                                           static_cast<ChainHost&>(*this), *metrics_);
  if (checkpointGateway_ != nullptr) {
    checkpoint::SubtaskCheckpointer::Setup setup;
    setup.task = {info_.vertex, info_.subtask};
    setup.parallelism = info_.parallelism;
    setup.taskName = info_.taskName;
    setup.coordinator = checkpointGateway_;
    setup.executor = &services_->checkpointExecutor();
    setup.incrementalSharedDirectory = incrementalSharedDirectory_;
    checkpointer_ = std::make_unique<checkpoint::SubtaskCheckpointer>(std::move(setup));
  }
  if (!gate_) createGate({});
  try {
    chain_->build(writers_);
    if (checkpointer_) checkpointer_->rememberRestoredFiles(restore_);
    chain_->initializeAndOpen(restore_);
    restore_.clear();  // restored state may be large; the operators hold it now
    if (auto* source = dynamic_cast<SourceOperatorBase*>(&chain_->head())) {
      auto p =
          std::make_unique<SourceInputProcessor>(*source, static_cast<CheckpointHandler&>(*this));
      source_ = p.get();
      processor_ = std::move(p);
    } else {
      processor_ = std::make_unique<NetworkInputProcessor>(
          chain_->head(), *gate_, channels_, graph_, mode_, static_cast<CheckpointHandler&>(*this));
    }
    registerIoMetrics();
    phase_ = Phase::kRunning;
    if (source_ != nullptr && coordinator_ != nullptr) coordinator_->addReader(info_.subtask);
    runInputLoop(*processor_);
    if (!cancelled()) finishAndAwaitFinalCommit();
  } catch (const TaskCancelledException&) {
    result.cancelled = true;
  } catch (const OperatorFailure& f) {
    // After a cancel, user code may turn the cancellation into its own
    // exception; that is still a cancel, not a failure.
    if (!cancelled_.load()) chain_->fail(result, f.operatorName(), f.what());
  } catch (...) {
    if (!cancelled_.load())
      chain_->fail(result, chain_->currentOperator(), describeCurrentException());
  }
  if (cancelled_.load()) result.cancelled = true;
  phase_ = Phase::kEnded;
  if (manual != nullptr) manual->removeListener(clockListener);
  cleanUp(result);
  return result;
}

void Task::registerIoMetrics() {
  TaskMetrics::Io io;
  io.input = processor_.get();
  io.gate = gate_.get();
  io.inputCapacity =
      static_cast<int>(channels_.size()) * 2 + 8;  // the default credits per channel and gate
  for (auto& p : pools_) io.outputPools.push_back(p.get());
  for (auto& [id, w] : writers_) io.writers.push_back(w.get());
  io.recordsOut = chain_->registerMetrics(*processor_);
  io.isSource = source_ != nullptr;
  metrics_->registerIo(std::move(io));
}

void Task::runInputLoop(InputProcessor& processor) {
  for (;;) {
    if (mailbox_.hasMail()) mailbox_.runAll();
    if (cancelled()) return;
    const auto timerDue = timers_->fireDue([this] { return cancelled(); });
    const InputStatus status = processor.processInput();
    if (status == InputStatus::kEndOfInput) return;
    const auto now = TaskWaker::Clock::now();
    auto deadline = timerDue;
    flushDueOutputs(now, deadline);
    if (status != InputStatus::kNothingAvailable || mailbox_.hasMail()) continue;
    const auto until = std::min(deadline, wakeupAt_);
    if (until > now) {
      metrics_->idleBegin();
      waker_.waitUntil(until);
      metrics_->idleEnd();
    }
    // A wake-up the reader asked for is spent once its time has come.
    if (wakeupAt_ <= TaskWaker::Clock::now()) wakeupAt_ = TaskWaker::Clock::time_point::max();
  }
}

void Task::flushDueOutputs(TaskWaker::Clock::time_point now,
                           TaskWaker::Clock::time_point& deadline) {
  if (jobGraph_.bufferTimeoutMs < 0) return;
  bool pending = false;
  for (auto& [id, w] : writers_) pending |= w->hasPendingData();
  if (!pending) return;
  if (now >= nextFlush_) {
    for (auto& [id, w] : writers_) w->flushAll();
    nextFlush_ = now + std::chrono::milliseconds(jobGraph_.bufferTimeoutMs);
    return;
  }
  if (nextFlush_ < deadline) deadline = nextFlush_;
}

void Task::finishAndAwaitFinalCommit() {
  chain_->finish();
  for (auto& [id, w] : writers_) w->broadcastEndOfPartition();
  // Two-phase-commit sinks pre-committed their last transaction in
  // finish(); it is committed once every task of the job got this far.
  phase_ = Phase::kFinished;
  source_ = nullptr;
  if (checkpointGateway_ == nullptr || listener_ == nullptr) return;
  listener_->taskFinished(info_.vertex, info_.subtask);
  while (!finalCommitted_ && !cancelled()) {
    if (mailbox_.hasMail()) {
      mailbox_.runAll();
      checkNoLateSplits();
      continue;
    }
    waker_.waitUntil(timers_->fireDue([this] { return cancelled(); }));
  }
}

void Task::checkNoLateSplits() const {
  if (pendingSplits_.load() == 0) return;
  chain_->resetCurrentOperator();
  throw SluiceException(fmt::format(
      "{} split(s) were assigned after the source reader had finished", pendingSplits_.load()));
}

void Task::cleanUp(TaskResult& result) {
  source_ = nullptr;
  // Snapshots being written read the operators' state backends.
  if (checkpointer_) checkpointer_->waitForPendingUploads();
  timers_->clear();
  chain_->close(result, cancelled_.load());
  chain_->collectMetrics(result);
  // The views read the chain's outputs, the processor and the pools.
  metrics_->close();
  if (!result.failed && !result.cancelled && pendingSplits_.load() > 0) {
    // A split assigned after the reader had ended would be lost silently.
    chain_->fail(result, graph_.node(vertex_.head()).name,
                 fmt::format("{} split(s) were assigned after the source reader had finished",
                             pendingSplits_.load()));
  }
  mailbox_.clear();
  if (processor_) processor_->release();
  gate_->releaseAll();
  for (auto& [id, w] : writers_) w->releaseAll();
  chain_->release();
}

}  // namespace sluice::runtime
