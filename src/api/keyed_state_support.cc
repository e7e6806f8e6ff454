// The untyped half of KeyedStateHandler<K>: which backend a keyed operator
// gets, with which memory and directory, and its restore.
#include <sluice/core/config_options.h>
#include <sluice/keyed_state_handler.h>

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
  const Configuration& config = context.configuration();
  const StateBackendType type = parseStateBackendType(config.get(options::kStateBackendType));
  params.clock = &context.clock();
  if (type == StateBackendType::kRocksDb) {
    params.localDir = config.get(options::kStateBackendRocksDbLocalDir);
    const int64_t budget = context.managedMemoryPerSlot();
    params.managedMemoryBytes = budget;
    if (config.get(options::kStateBackendRocksDbMemoryManaged)) {
      const double writeBufferRatio =
          config.get(options::kStateBackendRocksDbMemoryWriteBufferRatio);
      const double highPrioRatio = config.get(options::kStateBackendRocksDbMemoryHighPrioPoolRatio);
      // One cache and write buffer manager per slot, shared by every RocksDB
      // state of the slot's operators, as Flink does with managed memory.
      params.sharedResources = std::static_pointer_cast<RocksDbSharedResources>(
          context.slotResource("rocksdb.managed-memory", [&]() -> std::shared_ptr<void> {
            return createRocksDbSharedResources(budget, writeBufferRatio, highPrioRatio);
          }));
    }
  }
  std::unique_ptr<KeyedStateBackend> backend = createKeyedStateBackend(type, std::move(params));
  if (restore != nullptr && !restore->keyedState.empty()) {
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
