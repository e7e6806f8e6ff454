// RocksDB's native snapshots for incremental checkpoints (taking and
// restoring them), and the factory that configures the backend from the job.
#include <exception>
#include <filesystem>
#include <functional>
#include <mutex>
#include <system_error>

#include <sluice/core/config_options.h>

#include "state/backend_factories.h"
#include "state/rocksdb_keyed_backend.h"

namespace sluice {

namespace {

namespace fs = std::filesystem;

// A RocksDB checkpoint in a staging directory of the backend's working
// directory (same file system, so SST files are hard links). The runtime
// copies the files to checkpoint storage; the staging directory goes with
// the writer. A writer made with `finish` (nativeSnapshotWith()) runs it on
// the first nativeSnapshot() call, on the thread that writes the snapshot.
class NativeSnapshotWriter final : public StateSnapshotWriter {
 public:
  using Handle = RocksDbKeyedStateBackend::IncrementalSnapshotHandle;
  explicit NativeSnapshotWriter(const Handle& h) : directory_(h.directory) { describe(h); }
  NativeSnapshotWriter(std::string directory, std::function<Handle()> finish)
      : directory_(std::move(directory)), finish_(std::move(finish)) {}
  ~NativeSnapshotWriter() override {
    finish_ = nullptr;  // what it holds (it may own the directory) goes first
    std::error_code ec;
    fs::remove_all(directory_, ec);
  }
  void writeTo(std::ostream&) override {
    throw SluiceException("the native snapshot in '" + directory_ +
                          "' has no stream form; store its files instead");
  }
  const NativeKeyedSnapshot* nativeSnapshot() const override {
    std::call_once(finished_, [this] {
      if (finish_ == nullptr) return;
      try {
        describe(finish_());
      } catch (...) {
        error_ = std::current_exception();
      }
    });
    if (error_ != nullptr) std::rethrow_exception(error_);
    return &snapshot_;
  }

 private:
  void describe(const Handle& h) const {
    snapshot_.directory = h.directory;
    snapshot_.startKeyGroup = h.keyGroupRange.startKeyGroup;
    snapshot_.endKeyGroup = h.keyGroupRange.endKeyGroup;
    for (const auto& f : h.sstFiles) {
      snapshot_.sstFiles.push_back({f.fileName, f.uniqueId, f.sizeBytes, std::string()});
    }
    snapshot_.privateFiles = h.privateFiles;
  }

  std::string directory_;
  mutable std::function<Handle()> finish_;
  mutable std::once_flag finished_;
  mutable std::exception_ptr error_;
  mutable NativeKeyedSnapshot snapshot_;
};

}  // namespace

std::unique_ptr<StateSnapshotWriter> RocksDbKeyedStateBackend::nativeSnapshot(
    int64_t checkpointId) {
  const fs::path dir =
      fs::path(workingDirectory()) / ("checkpoint-" + std::to_string(checkpointId));
  std::error_code ec;
  fs::remove_all(dir, ec);  // left from an earlier try of the same id
  return std::make_unique<NativeSnapshotWriter>(
      snapshotIncremental(checkpointId, dir.string(), nullptr));
}

std::unique_ptr<StateSnapshotWriter> RocksDbKeyedStateBackend::lazyNativeWriter(
    std::string directory, std::function<IncrementalSnapshotHandle()> finish) {
  return std::make_unique<NativeSnapshotWriter>(std::move(directory), std::move(finish));
}

void RocksDbKeyedStateBackend::restoreNative(const std::vector<KeyedStateHandleRef>& handles) {
  RocksDbKeyedStateBackend* rocksdb = this;
  const std::string& op = params().operatorName;
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
  restoreIncremental(loaded);
}

namespace internal {

void configureRocksDbParams(KeyedBackendParams& params, OperatorContext& context) {
  const Configuration& config = context.configuration();
  params.localDir = config.get(options::kStateBackendRocksDbLocalDir);
  const int64_t budget = context.managedMemoryPerSlot();
  params.managedMemoryBytes = budget;
  if (!config.get(options::kStateBackendRocksDbMemoryManaged)) return;
  const double writeBufferRatio = config.get(options::kStateBackendRocksDbMemoryWriteBufferRatio);
  const double highPrioRatio = config.get(options::kStateBackendRocksDbMemoryHighPrioPoolRatio);
  // One cache and write buffer manager per slot, shared by every RocksDB
  // state of the slot's operators, as Flink does with managed memory.
  params.sharedResources = std::static_pointer_cast<RocksDbSharedResources>(
      context.slotResource("rocksdb.managed-memory", [&]() -> std::shared_ptr<void> {
        return createRocksDbSharedResources(budget, writeBufferRatio, highPrioRatio);
      }));
}

namespace {

class RocksDbBackendFactory final : public KeyedStateBackendFactory {
 public:
  const char* name() const override { return "rocksdb"; }
  void configure(KeyedBackendParams& params, OperatorContext& context) const override {
    configureRocksDbParams(params, context);
  }
  std::unique_ptr<KeyedStateBackend> create(KeyedBackendParams params) const override {
    return std::make_unique<RocksDbKeyedStateBackend>(std::move(params));
  }
};

}  // namespace

std::unique_ptr<KeyedStateBackendFactory> makeRocksDbBackendFactory() {
  return std::make_unique<RocksDbBackendFactory>();
}

}  // namespace internal

}  // namespace sluice
