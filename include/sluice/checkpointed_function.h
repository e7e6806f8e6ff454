// CheckpointedFunction: a user function that keeps operator state of its own,
// as in Flink.
//
// A function class that also derives from CheckpointedFunction gets
// initializeState() once per subtask, before open(), and snapshotState() for
// every checkpoint, on the task thread between two elements:
//
//   class BufferingSink : public RichMapFunction<Event, Event>, public CheckpointedFunction {
//    public:
//     void initializeState(FunctionInitializationContext& ctx) override {
//       buffered_ = &ctx.getOperatorStateStore().getListState(ListStateDescriptor<Event>("buf"));
//       if (ctx.isRestored()) pending_ = buffered_->get();
//     }
//     void snapshotState(const FunctionSnapshotContext&) override { buffered_->update(pending_); }
//     ...
//   };
//
// The usual pattern keeps working data in plain members and copies it into
// the state in snapshotState(); state objects may also be used directly.
// Operator state (getOperatorStateStore) exists on every stream; keyed state
// (getKeyedStateStore) only on keyed streams. How operator state is
// redistributed on restore at another parallelism: see
// sluice/state/operator_state.h and docs/state-operator-and-broadcast.md.
//
// An exception thrown from either method fails the task.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include <sluice/core/status.h>
#include <sluice/graph/operator.h>
#include <sluice/internal/keyed_state.h>
#include <sluice/state/keyed_state_backend.h>
#include <sluice/state/operator_state.h>
#include <sluice/state/state.h>

namespace sluice {

// What snapshotState() is told about the checkpoint. Valid during the call.
class FunctionSnapshotContext {
 public:
  FunctionSnapshotContext(int64_t checkpointId, int64_t checkpointTimestamp)
      : checkpointId_(checkpointId), checkpointTimestamp_(checkpointTimestamp) {}
  // Increases from one checkpoint to the next.
  int64_t getCheckpointId() const { return checkpointId_; }
  // Milliseconds since the epoch, read from the operator's processing-time
  // clock when the operator took its snapshot.
  int64_t getCheckpointTimestamp() const { return checkpointTimestamp_; }

 private:
  int64_t checkpointId_;
  int64_t checkpointTimestamp_;
};

// Keyed state for initializeState(), as in Flink's KeyedStateStore: the same
// state objects getRuntimeContext().getState(...) returns later. There is no
// current key during initializeState(): obtain the state objects there, use
// them per element. Every call throws on a non-keyed stream.
class KeyedStateStore {
 public:
  KeyedStateStore(KeyedStateBackend* backend, std::string operatorName)
      : backend_(backend), operatorName_(std::move(operatorName)) {}

  template <class T>
  ValueState<T>& getState(const ValueStateDescriptor<T>& desc) {
    return getOrCreateValueState<VoidNamespace>(backend(), desc);
  }
  template <class T>
  ListState<T>& getListState(const ListStateDescriptor<T>& desc) {
    return getOrCreateListState<VoidNamespace>(backend(), desc);
  }
  template <class UK, class UV>
  MapState<UK, UV>& getMapState(const MapStateDescriptor<UK, UV>& desc) {
    return getOrCreateMapState<VoidNamespace>(backend(), desc);
  }
  template <class T>
  ReducingState<T>& getReducingState(const ReducingStateDescriptor<T>& desc) {
    return getOrCreateReducingState<VoidNamespace>(backend(), desc);
  }
  template <class IN, class ACC, class OUT>
  AggregatingState<IN, OUT>& getAggregatingState(
      const AggregatingStateDescriptor<IN, ACC, OUT>& desc) {
    return getOrCreateAggregatingState<VoidNamespace>(backend(), desc);
  }

  bool isKeyed() const { return backend_ != nullptr; }

 private:
  KeyedStateBackend& backend() const {
    if (backend_ == nullptr) {
      throw SluiceException(
          "Keyed state can only be used on a 'keyed stream', i.e., after a 'keyBy()' operation "
          "(operator '" +
          operatorName_ + "', getKeyedStateStore() in initializeState)");
    }
    return *backend_;
  }

  KeyedStateBackend* backend_;
  std::string operatorName_;
};

// What initializeState() gets. Valid during the call; the state objects
// obtained through it stay valid until the operator closes.
class FunctionInitializationContext {
 public:
  FunctionInitializationContext(bool restored, OperatorStateStore& operatorState,
                                KeyedStateStore& keyedState)
      : restored_(restored), operatorState_(operatorState), keyedState_(keyedState) {}
  // True when the operator is being restored from a checkpoint or savepoint
  // (even if this subtask's share of the state is empty); false on a fresh
  // start.
  bool isRestored() const { return restored_; }
  OperatorStateStore& getOperatorStateStore() { return operatorState_; }
  // Throws on use on a non-keyed stream.
  KeyedStateStore& getKeyedStateStore() { return keyedState_; }

 private:
  bool restored_;
  OperatorStateStore& operatorState_;
  KeyedStateStore& keyedState_;
};

class CheckpointedFunction {
 public:
  virtual ~CheckpointedFunction() = default;
  // Copies the function's working data into its state for checkpoint
  // `context.getCheckpointId()`.
  virtual void snapshotState(const FunctionSnapshotContext& context) = 0;
  // Obtains the function's state objects and, when restored, reads them.
  virtual void initializeState(FunctionInitializationContext& context) = 0;
};

// A user function that wants to know when a checkpoint is complete (Flink's
// CheckpointListener): e.g. to commit side effects it prepared in
// snapshotState. Called on the task thread, between records. A notice can be
// skipped when a later checkpoint completes first; once every task of a
// bounded job has finished, functions get kFinalCheckpointId.
class CheckpointListener {
 public:
  virtual ~CheckpointListener() = default;
  virtual void notifyCheckpointComplete(int64_t checkpointId) = 0;
};

}  // namespace sluice
