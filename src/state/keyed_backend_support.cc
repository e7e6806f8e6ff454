// Which keyed state backend an operator subtask gets, and its restore: the
// untyped half of KeyedStateHandler<K> (internal/keyed_state_handler.h).
#include <algorithm>

#include <sluice/core/config_options.h>
#include <sluice/state/keyed_state_backend.h>

namespace sluice::internal {

namespace {

class SnapshotWriterAdapter final : public StateSnapshotWriter {
 public:
  explicit SnapshotWriterAdapter(std::unique_ptr<KeyedStateSnapshot> snapshot)
      : snapshot_(std::move(snapshot)) {}
  void writeTo(std::ostream& out) override { snapshot_->writeTo(out); }

 private:
  std::unique_ptr<KeyedStateSnapshot> snapshot_;
};

}  // namespace

std::unique_ptr<KeyedStateBackend> createKeyedBackendFor(OperatorContext& context,
                                                         KeyedBackendParams params,
                                                         const OperatorStateRestore* restore) {
  const KeyedStateBackendFactory& factory =
      keyedStateBackendFactory(context.configuration().get(options::kStateBackendType));
  params.clock = &context.clock();
  factory.configure(params, context);
  std::unique_ptr<KeyedStateBackend> backend = factory.create(std::move(params));
  const auto isNative = [](const KeyedStateHandleRef& h) { return h.native != nullptr; };
  if (restore != nullptr &&
      std::any_of(restore->keyedState.begin(), restore->keyedState.end(), isNative)) {
    backend->restoreNative(restore->keyedState);
  } else if (restore != nullptr && !restore->keyedState.empty()) {
    std::vector<CanonicalSnapshotReader> readers;
    readers.reserve(restore->keyedState.size());
    for (const KeyedStateHandleRef& handle : restore->keyedState) {
      readers.push_back(handle.bytes ? CanonicalSnapshotReader::fromBytes(handle.bytes, handle.path)
                                     : CanonicalSnapshotReader::fromFile(handle.path));
    }
    std::vector<const CanonicalSnapshotReader*> pointers;
    for (const auto& r : readers) pointers.push_back(&r);
    backend->restore(pointers);
  }
  return backend;
}

std::unique_ptr<StateSnapshotWriter> adaptSnapshot(std::unique_ptr<KeyedStateSnapshot> snapshot) {
  return std::make_unique<SnapshotWriterAdapter>(std::move(snapshot));
}

}  // namespace sluice::internal
