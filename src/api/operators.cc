// The type-independent halves of the operators in
// <sluice/internal/operators.h>, compiled once.
#include <sluice/internal/operators.h>
#include <sluice/source.h>

namespace sluice::internal {

void openHooks(const FunctionHooks& hooks, StreamingRuntimeContext& context) {
  if (hooks.rich == nullptr) return;
  hooks.rich->setRuntimeContext(&context);
  hooks.rich->open();
}

void closeHooks(const FunctionHooks& hooks) {
  if (hooks.rich == nullptr) return;
  hooks.rich->close();
  hooks.rich->setRuntimeContext(nullptr);
}

}  // namespace sluice::internal

namespace sluice::internal {

SinkOperatorCore::SinkOperatorCore() : alive_(std::make_shared<bool>(true)) {}

SinkOperatorCore::~SinkOperatorCore() { *alive_ = false; }

void SinkOperatorCore::initializeState(const OperatorStateRestore* restore) {
  functionState_.initializeBackend(context(), restore);
  writer_ = &createWriter(*this);
  checkpointed_ = dynamic_cast<CheckpointedSinkWriter*>(writer_);
  if (checkpointed_ != nullptr) {
    checkpointed_->initializeState(functionState_.backend(), restore != nullptr);
  }
}

OperatorStateSnapshot SinkOperatorCore::snapshotState(int64_t checkpointId) {
  if (writer_ != nullptr) {
    writer_->flush(false);
    if (checkpointed_ != nullptr) checkpointed_->snapshotState(checkpointId);
  }
  OperatorStateSnapshot s;
  s.operatorState = functionState_.backend().snapshot();
  return s;
}

void SinkOperatorCore::notifyCheckpointComplete(int64_t checkpointId) {
  if (checkpointed_ != nullptr && *alive_) checkpointed_->notifyCheckpointComplete(checkpointId);
}

void SinkOperatorCore::open() {
  if (writer_ == nullptr) initializeState(nullptr);  // a caller that skipped initializeState()
}

void SinkOperatorCore::finish() { writer_->flush(true); }

void SinkOperatorCore::close() {
  *alive_ = false;
  if (writer_ != nullptr) writer_->close();
}

std::optional<int64_t> SinkOperatorCore::timestamp() const {
  return currentHasTimestamp_ ? std::optional<int64_t>(currentTimestamp_) : std::nullopt;
}

int SinkOperatorCore::getSubtaskId() const {
  return const_cast<SinkOperatorCore*>(this)->context().runtimeContext().getIndexOfThisSubtask();
}

int SinkOperatorCore::getNumberOfParallelSubtasks() const {
  return const_cast<SinkOperatorCore*>(this)
      ->context()
      .runtimeContext()
      .getNumberOfParallelSubtasks();
}

RuntimeContext& SinkOperatorCore::getRuntimeContext() { return context().runtimeContext(); }

const Clock& SinkOperatorCore::clock() const {
  return const_cast<SinkOperatorCore*>(this)->context().clock();
}

bool SinkOperatorCore::registerProcessingTimer(int64_t timestamp,
                                               std::function<void(int64_t)> callback) {
  context().registerProcessingTimer(timestamp,
                                    [alive = alive_, callback = std::move(callback)](int64_t t) {
                                      if (*alive) callback(t);
                                    });
  return true;
}

}  // namespace sluice::internal

namespace sluice {
namespace internal {
namespace {
constexpr const char* kSplitsStateName = "SourceReaderState";
}  // namespace

SourceOperatorCore::SourceOperatorCore() = default;
SourceOperatorCore::~SourceOperatorCore() = default;

void SourceOperatorCore::initializeState(const OperatorStateRestore* restore) {
  state_ = std::make_unique<OperatorStateBackend>(context().runtimeContext().getOperatorName());
  if (restore != nullptr) state_->restore(restore->operatorState);
  splitsState_ = &state_->getListState(ListStateDescriptor<std::string>(kSplitsStateName));
  if (restore != nullptr) {
    for (const std::string& bytes : splitsState_->get()) {
      restoredSplits_.emplace_back(bytes.begin(), bytes.end());
    }
  }
}

OperatorStateSnapshot SourceOperatorCore::snapshotState(int64_t checkpointId) {
  splitsState_->update(snapshotReaderSplits(checkpointId));
  OperatorStateSnapshot s;
  s.operatorState = state_->snapshot();
  return s;
}

void SourceOperatorCore::open() {
  createReader(*this);
  if (!restoredSplits_.empty()) {
    addReaderSplits(restoredSplits_);
    restoredSplits_.clear();
  }
  startReader();
}

void SourceOperatorCore::close() {
  if (hasReader()) closeReader();
}

InputStatus SourceOperatorCore::emitNext() {
  // The output's numRecordsOut is published once per call, also when the
  // reader throws.
  struct Publish {
    SourceOperatorCore& core;
    ~Publish() { core.emittedTotal_.store(core.emitted_, std::memory_order_relaxed); }
  } publish{*this};
  const int64_t limit = emitted_ + kMaxRecordsPerEmit;
  for (int i = 0; i < kMaxPolls && emitted_ < limit; ++i) {
    InputStatus s = pollReader();
    if (s == InputStatus::kMoreAvailable) continue;
    // A bounded input's end: every event-time window and timer downstream
    // must fire, as in Flink.
    if (s == InputStatus::kEndOfInput) emitMaxWatermark();
    return s;
  }
  return InputStatus::kMoreAvailable;
}

void SourceOperatorCore::addSplits(const std::vector<std::vector<uint8_t>>& splits) {
  addReaderSplits(splits);
}

void SourceOperatorCore::noMoreSplits() { notifyReaderNoMoreSplits(); }

int SourceOperatorCore::getIndexOfSubtask() const {
  return const_cast<SourceOperatorCore*>(this)->context().runtimeContext().getIndexOfThisSubtask();
}

int SourceOperatorCore::currentParallelism() const {
  return const_cast<SourceOperatorCore*>(this)
      ->context()
      .runtimeContext()
      .getNumberOfParallelSubtasks();
}

void SourceOperatorCore::sendSplitRequest() { context().sendSplitRequest(); }
void SourceOperatorCore::signalAvailable() { context().signalInputAvailable(); }
void SourceOperatorCore::requestWakeupAt(std::chrono::steady_clock::time_point when) {
  context().requestWakeupAt(when);
}
RuntimeContext& SourceOperatorCore::runtimeContext() { return context().runtimeContext(); }

}  // namespace internal
}  // namespace sluice
