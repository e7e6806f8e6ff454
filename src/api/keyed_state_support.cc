// The untyped half of KeyedStateHandler<K>: which backend a keyed operator
// gets, with which memory and directory, and its restore.
#include <algorithm>
#include <filesystem>
#include <system_error>

#include <sluice/core/config_options.h>
#include <sluice/keyed_state_handler.h>
#include <sluice/state/rocksdb_state.h>

namespace sluice::internal {

namespace {

namespace fs = std::filesystem;

class SnapshotWriterAdapter final : public StateSnapshotWriter {
 public:
  explicit SnapshotWriterAdapter(std::unique_ptr<KeyedStateSnapshot> snapshot)
      : snapshot_(std::move(snapshot)) {}
  void writeTo(std::ostream& out) override { snapshot_->writeTo(out); }

 private:
  std::unique_ptr<KeyedStateSnapshot> snapshot_;
};

// A RocksDB checkpoint in a staging directory of the backend's working
// directory (same file system, so SST files are hard links). The runtime
// copies the files to checkpoint storage; the staging directory goes with
// the writer.
class NativeSnapshotWriter final : public StateSnapshotWriter {
 public:
  explicit NativeSnapshotWriter(const RocksDbKeyedStateBackend::IncrementalSnapshotHandle& h) {
    snapshot_.directory = h.directory;
    snapshot_.startKeyGroup = h.keyGroupRange.startKeyGroup;
    snapshot_.endKeyGroup = h.keyGroupRange.endKeyGroup;
    for (const auto& f : h.sstFiles) {
      snapshot_.sstFiles.push_back({f.fileName, f.uniqueId, f.sizeBytes, std::string()});
    }
    snapshot_.privateFiles = h.privateFiles;
  }
  ~NativeSnapshotWriter() override {
    std::error_code ec;
    fs::remove_all(snapshot_.directory, ec);
  }
  void writeTo(std::ostream&) override {
    throw SluiceException("the native snapshot in '" + snapshot_.directory +
                          "' has no stream form; store its files instead");
  }
  const NativeKeyedSnapshot* nativeSnapshot() const override { return &snapshot_; }

 private:
  NativeKeyedSnapshot snapshot_;
};

// Restores `backend` from stored native snapshots: each one's files are
// gathered (hard-linked where possible) into a directory under the
// backend's working directory, as RocksDB wrote them, and reopened.
void restoreNative(KeyedStateBackend& backend, OperatorContext& context,
                   const std::vector<KeyedStateHandleRef>& handles) {
  auto* rocksdb = dynamic_cast<RocksDbKeyedStateBackend*>(&backend);
  const std::string& op = context.runtimeContext().getOperatorName();
  if (rocksdb == nullptr) {
    throw SluiceException("operator '" + op +
                          "' restores from an incremental RocksDB checkpoint, which only the "
                          "rocksdb state backend can read; set state.backend.type: rocksdb, or "
                          "restore from a savepoint (savepoints are canonical)");
  }
  std::vector<std::string> staging;
  struct Cleanup {
    std::vector<std::string>& dirs;
    ~Cleanup() {
      std::error_code ec;
      for (const auto& d : dirs) fs::remove_all(d, ec);
    }
  } cleanup{staging};
  std::vector<RocksDbKeyedStateBackend::IncrementalSnapshotHandle> loaded;
  for (const KeyedStateHandleRef& h : handles) {
    if (!h.native) {
      throw SluiceException("operator '" + op +
                            "' restores from a mix of native (incremental) and canonical keyed "
                            "snapshots; '" +
                            h.path + "' is canonical");
    }
    const NativeKeyedSnapshot& n = *h.native;
    const fs::path dir =
        fs::path(rocksdb->workingDirectory()) / ("restore-" + std::to_string(staging.size()));
    staging.push_back(dir.string());
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::create_directories(dir, ec);
    if (ec) {
      throw SluiceException("cannot create directory '" + dir.string() + "': " + ec.message());
    }
    auto place = [&](const fs::path& from, const std::string& name, bool link) {
      std::error_code e;
      if (link) {
        fs::create_hard_link(from, dir / name, e);
        if (!e) return;
        e.clear();
      }
      fs::copy_file(from, dir / name, e);
      if (e) {
        throw SluiceException("cannot restore operator '" + op + "' from '" + from.string() +
                              "': " + e.message());
      }
    };
    for (const auto& f : n.sstFiles) place(f.location, f.fileName, true);
    for (const auto& f : n.privateFiles) place(fs::path(n.directory) / f, f, false);
    RocksDbKeyedStateBackend::IncrementalSnapshotHandle m =
        RocksDbKeyedStateBackend::loadIncrementalSnapshotHandle(dir.string());
    if (m.keyGroupRange.startKeyGroup != n.startKeyGroup ||
        m.keyGroupRange.endKeyGroup != n.endKeyGroup) {
      throw SluiceException("native snapshot '" + n.directory + "' of operator '" + op +
                            "' describes key groups other than its checkpoint entry says");
    }
    loaded.push_back(std::move(m));
  }
  rocksdb->restoreIncremental(loaded);
}

}  // namespace

std::unique_ptr<StateSnapshotWriter> nativeSnapshot(KeyedStateBackend& backend,
                                                    int64_t checkpointId) {
  auto* rocksdb = dynamic_cast<RocksDbKeyedStateBackend*>(&backend);
  if (rocksdb == nullptr) return nullptr;
  const fs::path dir =
      fs::path(rocksdb->workingDirectory()) / ("checkpoint-" + std::to_string(checkpointId));
  std::error_code ec;
  fs::remove_all(dir, ec);  // left from an earlier try of the same id
  return std::make_unique<NativeSnapshotWriter>(
      rocksdb->snapshotIncremental(checkpointId, dir.string(), nullptr));
}

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
  const auto isNative = [](const KeyedStateHandleRef& h) { return h.native != nullptr; };
  if (restore != nullptr &&
      std::any_of(restore->keyedState.begin(), restore->keyedState.end(), isNative)) {
    restoreNative(*backend, context, restore->keyedState);
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
