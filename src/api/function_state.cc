#include <sluice/internal/function_state.h>

namespace sluice::internal {

FunctionStateHandler::FunctionStateHandler() = default;
FunctionStateHandler::~FunctionStateHandler() = default;

void FunctionStateHandler::initializeBackend(OperatorContext& context,
                                             const OperatorStateRestore* restore) {
  context_ = &context;
  restored_ = restore != nullptr;
  backend_ = std::make_unique<OperatorStateBackend>(context.runtimeContext().getOperatorName());
  if (restore != nullptr) backend_->restore(restore->operatorState);
}

void FunctionStateHandler::initializeCheckpointed(CheckpointedFunction* function,
                                                  KeyedStateBackend* keyed) {
  if (function == nullptr) return;
  KeyedStateStore keyedStore(keyed, backend().operatorName());
  FunctionInitializationContext ctx(restored_, backend(), keyedStore);
  function->initializeState(ctx);
}

std::string FunctionStateHandler::snapshotCheckpointed(CheckpointedFunction* function,
                                                       int64_t checkpointId) {
  OperatorStateBackend& operatorState = backend();
  if (function != nullptr) {
    FunctionSnapshotContext ctx(checkpointId, context_->clock().currentTimeMillis());
    function->snapshotState(ctx);
  }
  return operatorState.snapshot();
}

void FunctionStateHandler::throwNotInitialized() {
  throw SluiceException("operator state used before the operator's initializeState()");
}

}  // namespace sluice::internal
