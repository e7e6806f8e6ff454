// StreamingRuntimeContext: the RuntimeContext a rich function receives, with
// access to keyed state (as Flink's StreamingRuntimeContext).
//
// Each operator wraps the runtime's RuntimeContext in one of these; keyed
// operators also attach their KeyedStateBackend. State obtained here is
// scoped to the key of the element being processed: use it only inside
// processElement / onTimer (and the other per-element callbacks), not in
// open() to read values.
#pragma once

#include <string>

#include <sluice/core/runtime_context.h>
#include <sluice/internal/keyed_state.h>
#include <sluice/state/keyed_state_backend.h>
#include <sluice/state/state.h>

namespace sluice {

class StreamingRuntimeContext final : public RuntimeContext {
 public:
  StreamingRuntimeContext() = default;
  explicit StreamingRuntimeContext(RuntimeContext* base) : base_(base) {}

  void setBase(RuntimeContext* base) { base_ = base; }
  void setKeyedStateBackend(KeyedStateBackend* backend) {
    keyed_ = backend;
    noKeyReason_ = nullptr;
  }
  // Makes keyed state unavailable until the next setKeyedStateBackend(); a
  // state access meanwhile throws `reason` (a string literal).
  void detachKeyedState(const char* reason) {
    keyed_ = nullptr;
    noKeyReason_ = reason;
  }
  // The operator's keyed state backend; null on a non-keyed stream.
  KeyedStateBackend* keyedStateBackend() const { return keyed_; }

  template <class T>
  ValueState<T>& getState(const ValueStateDescriptor<T>& desc) {
    return getOrCreateValueState<VoidNamespace>(keyedOrThrow(), desc);
  }
  template <class T>
  ListState<T>& getListState(const ListStateDescriptor<T>& desc) {
    return getOrCreateListState<VoidNamespace>(keyedOrThrow(), desc);
  }
  template <class UK, class UV>
  MapState<UK, UV>& getMapState(const MapStateDescriptor<UK, UV>& desc) {
    return getOrCreateMapState<VoidNamespace>(keyedOrThrow(), desc);
  }
  template <class T>
  ReducingState<T>& getReducingState(const ReducingStateDescriptor<T>& desc) {
    return getOrCreateReducingState<VoidNamespace>(keyedOrThrow(), desc);
  }
  template <class IN, class ACC, class OUT>
  AggregatingState<IN, OUT>& getAggregatingState(
      const AggregatingStateDescriptor<IN, ACC, OUT>& desc) {
    return getOrCreateAggregatingState<VoidNamespace>(keyedOrThrow(), desc);
  }

  // RuntimeContext, delegated to the runtime's context.
  int getIndexOfThisSubtask() const override { return base().getIndexOfThisSubtask(); }
  int getNumberOfParallelSubtasks() const override { return base().getNumberOfParallelSubtasks(); }
  int getMaxNumberOfParallelSubtasks() const override {
    return base().getMaxNumberOfParallelSubtasks();
  }
  int getAttemptNumber() const override { return base().getAttemptNumber(); }
  const std::string& getTaskName() const override { return base().getTaskName(); }
  const std::string& getOperatorName() const override { return base().getOperatorName(); }
  const std::string& getTaskNameWithSubtasks() const override {
    return base().getTaskNameWithSubtasks();
  }
  const std::string& getJobName() const override { return base().getJobName(); }
  void addAccumulator(const std::string& name, Accumulator* acc) override {
    base().addAccumulator(name, acc);
  }
  Accumulator* getAccumulator(const std::string& name) const override {
    return base().getAccumulator(name);
  }
  MetricGroup& getMetricGroup() override { return base().getMetricGroup(); }

 private:
  RuntimeContext& base() const {
    if (base_ == nullptr) throw SluiceException("StreamingRuntimeContext used before setup");
    return *base_;
  }
  KeyedStateBackend& keyedOrThrow() const {
    if (keyed_ == nullptr && noKeyReason_ != nullptr) {
      throw SluiceException(std::string(noKeyReason_) + " (operator '" + base().getOperatorName() +
                            "')");
    }
    if (keyed_ == nullptr) {
      throw SluiceException(
          "Keyed state can only be used on a 'keyed stream', i.e., after a 'keyBy()' operation "
          "(operator '" +
          base().getOperatorName() + "')");
    }
    return *keyed_;
  }

  RuntimeContext* base_ = nullptr;
  KeyedStateBackend* keyed_ = nullptr;
  const char* noKeyReason_ = nullptr;
};

}  // namespace sluice
