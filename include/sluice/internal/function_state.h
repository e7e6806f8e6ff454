// The operator-state plumbing of operators that run user functions: the
// CheckpointedFunction and CheckpointListener hooks, and the operator's
// OperatorStateBackend. Engine code (the operators in internal/); users see
// the interfaces in <sluice/checkpointed_function.h>.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include <sluice/checkpointed_function.h>
#include <sluice/graph/operator.h>
#include <sluice/state/keyed_state_backend.h>
#include <sluice/state/operator_state.h>

namespace sluice::internal {

// Calls f.notifyCheckpointComplete when F is a CheckpointListener.
template <class F>
void notifyFunction(F& function, int64_t checkpointId) {
  if constexpr (std::is_base_of_v<CheckpointListener, F>) {
    static_cast<CheckpointListener&>(function).notifyCheckpointComplete(checkpointId);
  } else {
    (void)function;
    (void)checkpointId;
  }
}

// The operator-state plumbing every operator with a user function shares:
// owns the operator's OperatorStateBackend, restores it, and runs the
// function's CheckpointedFunction hooks. Task thread only.
//
// In the operator (F the user function type, keyed_ its KeyedStateHandler on
// keyed streams):
//
//   void initializeState(const OperatorStateRestore* restore) override {
//     functionState_.initialize(this->context(), restore, f_);            // non-keyed
//     functionState_.initialize(this->context(), restore, f_, &keyed_.backend());  // keyed
//   }
//   OperatorStateSnapshot snapshotState(int64_t checkpointId) override {
//     OperatorStateSnapshot s;
//     s.keyedState = keyed_.snapshot(checkpointId);                         // keyed only
//     s.operatorState = functionState_.snapshot(f_, checkpointId);
//     return s;
//   }
//
// Operators that register state of their own in between (broadcast state)
// call initializeBackend() and initializeFunction() separately.
class FunctionStateHandler {
 public:
  FunctionStateHandler();
  ~FunctionStateHandler();

  // Creates the backend and restores this subtask's share, when restoring.
  void initializeBackend(OperatorContext& context, const OperatorStateRestore* restore);

  // Calls the function's initializeState() if it is a CheckpointedFunction.
  // `keyed` is the operator's keyed backend, null on non-keyed streams.
  template <class F>
  void initializeFunction(F& function, KeyedStateBackend* keyed = nullptr) {
    initializeCheckpointed(checkpointedOf(function), keyed);
  }
  // The same for a function known only at run time (null: not checkpointed).
  void initializeCheckpointed(CheckpointedFunction* function, KeyedStateBackend* keyed = nullptr);

  template <class F>
  void initialize(OperatorContext& context, const OperatorStateRestore* restore, F& function,
                  KeyedStateBackend* keyed = nullptr) {
    initializeBackend(context, restore);
    initializeFunction(function, keyed);
  }

  // Runs the function's snapshotState() if it is a CheckpointedFunction and
  // serializes the operator state (OperatorStateSnapshot::operatorState).
  template <class F>
  std::string snapshot(F& function, int64_t checkpointId) {
    return snapshotCheckpointed(checkpointedOf(function), checkpointId);
  }
  std::string snapshotCheckpointed(CheckpointedFunction* function, int64_t checkpointId);

  bool initialized() const { return backend_ != nullptr; }
  bool isRestored() const { return restored_; }
  OperatorStateBackend& backend() {
    if (backend_ == nullptr) throwNotInitialized();
    return *backend_;
  }

 private:
  template <class F>
  static CheckpointedFunction* checkpointedOf(F& function) {
    if constexpr (std::is_base_of_v<CheckpointedFunction, F>) {
      return &function;
    } else {
      (void)function;
      return nullptr;
    }
  }
  [[noreturn]] static void throwNotInitialized();

  OperatorContext* context_ = nullptr;
  std::unique_ptr<OperatorStateBackend> backend_;
  bool restored_ = false;
};

}  // namespace sluice::internal
