// A test harness that drives one operator instance by hand, like Flink's
// OneInputStreamOperatorTestHarness: setup -> initializeState (fresh or from
// a snapshot) -> open -> elements on either input -> snapshotState -> close,
// with an output that collects every record, checkpoint-complete
// notifications and a simulated crash, and helpers that cut the
// snapshots of all old subtasks into the restores of new subtasks at another
// parallelism (operator state repartitioned, keyed state by key group).
//
// Single-threaded: everything runs on the test's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <sluice/core/clock.h>
#include <sluice/core/config.h>
#include <sluice/core/runtime_context.h>
#include <sluice/graph/operator.h>
#include <sluice/state/operator_state.h>

namespace sluice::testing {

class HarnessRuntimeContext final : public RuntimeContext {
 public:
  HarnessRuntimeContext(std::string operatorName, int subtask, int parallelism, int maxParallelism)
      : subtask_(subtask),
        parallelism_(parallelism),
        maxParallelism_(maxParallelism),
        name_(std::move(operatorName)),
        nameWithSubtasks_(name_ + " (" + std::to_string(subtask + 1) + "/" +
                          std::to_string(parallelism) + ")") {}
  int getIndexOfThisSubtask() const override { return subtask_; }
  int getNumberOfParallelSubtasks() const override { return parallelism_; }
  int getMaxNumberOfParallelSubtasks() const override { return maxParallelism_; }
  int getAttemptNumber() const override { return 0; }
  const std::string& getTaskName() const override { return name_; }
  const std::string& getOperatorName() const override { return name_; }
  const std::string& getTaskNameWithSubtasks() const override { return nameWithSubtasks_; }
  const std::string& getJobName() const override { return job_; }
  void addAccumulator(const std::string&, Accumulator*) override {}
  Accumulator* getAccumulator(const std::string&) const override { return nullptr; }

 private:
  int subtask_;
  int parallelism_;
  int maxParallelism_;
  std::string name_;
  std::string nameWithSubtasks_;
  std::string job_ = "harness job";
};

class HarnessOperatorContext final : public OperatorContext {
 public:
  HarnessOperatorContext(std::string operatorName, int subtask, int parallelism, int maxParallelism)
      : runtime_(std::move(operatorName), subtask, parallelism, maxParallelism) {}

  RuntimeContext& runtimeContext() override { return runtime_; }
  OutputBase* sideOutput(const std::string& tagId) override {
    auto it = sideOutputs_.find(tagId);
    return it == sideOutputs_.end() ? nullptr : it->second;
  }
  void countDroppedRecord() override { ++droppedRecords_; }
  void sendSplitRequest() override {}
  void signalInputAvailable() override {}
  void requestWakeupAt(std::chrono::steady_clock::time_point) override {}
  const Configuration& configuration() override { return config_; }
  const Clock& clock() override { return clock_; }
  std::shared_ptr<void> slotResource(const std::string& key,
                                     const std::function<std::shared_ptr<void>()>& make) override {
    auto& r = resources_[key];
    if (!r) r = make();
    return r;
  }
  int64_t managedMemoryPerSlot() override { return 32ll << 20; }
  void registerProcessingTimer(int64_t timestamp, std::function<void(int64_t)> callback) override {
    timers_.emplace(timestamp, std::move(callback));
  }
  void incrementCounter(const std::string& name, int64_t n) override { counters_[name] += n; }

  // Moves the manual clock to `millis` and fires every processing-time timer
  // due by then, in timestamp order (timers registered while firing included).
  void setProcessingTime(int64_t millis) {
    clock_.setCurrentTime(millis);
    while (!timers_.empty() && timers_.begin()->first <= millis) {
      auto node = timers_.extract(timers_.begin());
      node.mapped()(node.key());
    }
  }
  int64_t counter(const std::string& name) const {
    auto it = counters_.find(name);
    return it == counters_.end() ? 0 : it->second;
  }

  Configuration& config() { return config_; }
  ManualClock& manualClock() { return clock_; }
  void addSideOutput(const std::string& tagId, OutputBase* output) { sideOutputs_[tagId] = output; }
  int64_t droppedRecords() const { return droppedRecords_; }

 private:
  HarnessRuntimeContext runtime_;
  Configuration config_;
  ManualClock clock_{1'000'000};
  std::map<std::string, OutputBase*> sideOutputs_;
  std::map<std::string, std::shared_ptr<void>> resources_;
  std::multimap<int64_t, std::function<void(int64_t)>> timers_;
  std::map<std::string, int64_t> counters_;
  int64_t droppedRecords_ = 0;
};

// Collects every record and watermark an operator emits.
template <class T>
class CollectingOutput final : public Output<T> {
 public:
  void collect(const StreamRecord<T>& record) override { records.push_back(record); }
  void emitWatermark(Watermark watermark) override { watermarks.push_back(watermark); }
  void emitWatermarkStatus(WatermarkStatus) override {}
  std::vector<T> values() const {
    std::vector<T> out;
    for (const auto& r : records) out.push_back(r.value);
    return out;
  }
  std::vector<StreamRecord<T>> records;
  std::vector<Watermark> watermarks;
};

// What one subtask's snapshot leaves behind, with the keyed part written out.
struct CapturedSnapshot {
  std::string operatorState;
  std::shared_ptr<const std::string> keyedState;  // null without keyed state
  std::string timers;                             // empty without timers
};

// The restore of each of `newParallelism` subtasks from the snapshots of all
// old subtasks: operator state repartitioned, every keyed snapshot offered
// to every new subtask (each backend reads only its own key groups).
inline std::vector<OperatorStateRestore> redistribute(const std::vector<CapturedSnapshot>& old,
                                                      int newParallelism) {
  std::vector<std::string> operatorStates;
  for (const auto& s : old) operatorStates.push_back(s.operatorState);
  std::vector<std::string> parts =
      OperatorStateBackend::repartition(operatorStates, newParallelism);
  std::vector<OperatorStateRestore> restores(static_cast<size_t>(newParallelism));
  for (int i = 0; i < newParallelism; ++i) {
    restores[i].operatorState = std::move(parts[i]);
    for (size_t j = 0; j < old.size(); ++j) {
      if (!old[j].timers.empty()) restores[i].timers.push_back(old[j].timers);
      if (old[j].keyedState) {
        restores[i].keyedState.push_back(
            KeyedStateHandleRef{"old subtask " + std::to_string(j), old[j].keyedState, nullptr});
      }
    }
  }
  return restores;
}

// Drives one operator instance. OUT is its output type.
template <class OUT>
class OperatorHarness {
 public:
  OperatorHarness(std::unique_ptr<StreamOperatorBase> op, int subtask = 0, int parallelism = 1,
                  int maxParallelism = 128, std::string operatorName = "harness operator")
      : context_(std::move(operatorName), subtask, parallelism, maxParallelism),
        op_(std::move(op)) {}
  ~OperatorHarness() {
    if (opened_ && !closed_) op_->close();
  }
  OperatorHarness(const OperatorHarness&) = delete;
  OperatorHarness& operator=(const OperatorHarness&) = delete;
  OperatorHarness(OperatorHarness&&) = delete;

  HarnessOperatorContext& context() { return context_; }
  StreamOperatorBase& op() { return *op_; }
  CollectingOutput<OUT>& output() { return output_; }
  std::vector<OUT> values() const { return output_.values(); }

  // setup -> initializeState(restore) -> open.
  void open(const OperatorStateRestore* restore = nullptr) {
    op_->setup(context_, output_);
    op_->initializeState(restore);
    op_->open();
    opened_ = true;
  }

  template <class IN>
  void processElement(int input, const IN& value, std::optional<int64_t> timestamp = {}) {
    StreamRecord<IN> record(value);
    record.hasTimestamp = timestamp.has_value();
    record.timestamp = timestamp.value_or(kMinTimestamp);
    static_cast<Input<IN>*>(op_->inputPointer(input))->processElement(record);
  }
  void processWatermark(int input, int64_t timestamp) {
    op_->processWatermark(input, Watermark{timestamp});
  }

  OperatorStateSnapshot snapshotState(int64_t checkpointId) {
    return op_->snapshotState(checkpointId);
  }
  // snapshotState with the keyed part written out, ready for redistribute().
  CapturedSnapshot snapshot(int64_t checkpointId) {
    OperatorStateSnapshot s = op_->snapshotState(checkpointId);
    CapturedSnapshot captured;
    captured.operatorState = std::move(s.operatorState);
    captured.timers = std::move(s.timers);
    if (s.keyedState) {
      std::ostringstream out;
      s.keyedState->writeTo(out);
      captured.keyedState = std::make_shared<const std::string>(out.str());
    }
    return captured;
  }

  // The checkpoint coordinator's "checkpoint `checkpointId` completed".
  void notifyCheckpointComplete(int64_t checkpointId) {
    op_->notifyCheckpointComplete(checkpointId);
  }

  // End of input, then the job-wide final commit the runtime sends once
  // every task has finished (notifyCheckpointComplete(kFinalCheckpointId)).
  void finish() {
    op_->finish();
    op_->notifyCheckpointComplete(kFinalCheckpointId);
  }
  void close() {
    op_->close();
    closed_ = true;
  }
  // A process that dies: the operator is destroyed without close() (nothing
  // it would clean up in close() is cleaned up). op() is gone afterwards.
  void crash() {
    closed_ = true;
    op_.reset();
  }

 private:
  HarnessOperatorContext context_;
  std::unique_ptr<StreamOperatorBase> op_;
  CollectingOutput<OUT> output_;
  bool opened_ = false;
  bool closed_ = false;
};

}  // namespace sluice::testing
