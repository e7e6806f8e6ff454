// KeyedStateHandler<K>: the keyed-state plumbing every keyed operator shares.
//
// It creates the operator's KeyedStateBackend in initializeState() from the
// job configuration (`state.backend.type`, RocksDB's local directory, the
// slot's managed memory), restores it from a snapshot when there is one,
// serializes each element's key once and makes it the backend's current key,
// and snapshots and disposes of the backend. Task thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <sluice/core/key_hash.h>
#include <sluice/core/serializer.h>
#include <sluice/graph/operator.h>
#include <sluice/state/keyed_state_backend.h>

namespace sluice::internal {

template <class K>
class KeyedStateHandler {
  static_assert(Serializable<K>, "a keyed operator's key type needs a sluice::TypeSerializer");

 public:
  void initialize(OperatorContext& context, const OperatorStateRestore* restore) {
    RuntimeContext& rc = context.runtimeContext();
    const int32_t maxParallelism = rc.getMaxNumberOfParallelSubtasks();
    keyGroups_ = KeyGroupAssigner(maxParallelism);
    KeyedBackendParams params;
    params.operatorName = rc.getOperatorName();
    params.subtaskIndex = rc.getIndexOfThisSubtask();
    params.maxParallelism = maxParallelism;
    params.keyGroupRange = computeKeyGroupRangeForOperatorIndex(
        maxParallelism, rc.getNumberOfParallelSubtasks(), rc.getIndexOfThisSubtask());
    params.keySchema = TypeSerializer<K>::schema();
    params.keyLength = [](const uint8_t* data, size_t size) -> size_t {
      DataInputView in(data, size);
      K scratch{};
      TypeSerializer<K>::deserialize(scratch, in);
      return in.position();
    };
    backend_ = createKeyedBackendFor(context, std::move(params), restore);
    context_ = &context;
  }

  // Makes `key` the current key of every keyed state of the operator.
  void setCurrentKey(const K& key) {
    // Small keys serialize into a stack buffer (no vector growth per record).
    uint8_t buffer[64] = {};
    keyBytes_.clear();
    DataOutputView out(buffer, sizeof buffer, keyBytes_);
    TypeSerializer<K>::serialize(key, out);
    backend_->setCurrentKey(out.data(), out.size(), keyGroups_.keyGroupOf(key));
  }

  // The key of serialized `bytes`, as forEachKey reports them.
  static K deserializeKey(std::string_view bytes) {
    DataInputView in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    K key{};
    TypeSerializer<K>::deserialize(key, in);
    return key;
  }

  // `key`'s key group, as setCurrentKey() computes it.
  int32_t keyGroupOf(const K& key) const { return keyGroups_.keyGroupOf(key); }

  bool initialized() const { return backend_ != nullptr; }
  KeyedStateBackend& backend() { return *backend_; }
  // The keyed part of checkpoint `checkpointId`: native and incremental
  // when the runtime asks for it and the backend can, canonical otherwise.
  std::unique_ptr<StateSnapshotWriter> snapshot(int64_t checkpointId) {
    if (context_->incrementalSnapshot(checkpointId)) {
      if (auto native = backend_->nativeSnapshot(checkpointId)) return native;
    }
    return adaptSnapshot(backend_->snapshot());
  }
  void dispose() {
    if (backend_) backend_->dispose();
  }

 private:
  std::unique_ptr<KeyedStateBackend> backend_;
  OperatorContext* context_ = nullptr;
  std::vector<uint8_t> keyBytes_;
  KeyGroupAssigner keyGroups_{128};
};

// Entries of one keyed state that an operator keeps in a table of its own,
// serialized per key group for its backend's next snapshot
// (KeyedStateBackend::addToNextSnapshot) instead of put into the state key
// by key: one append per key, nothing to take out again afterwards.
template <class K>
class SnapshotEntries {
 public:
  // Whether `backend` takes such entries; if so, sized to its key groups.
  bool prepare(const KeyedStateBackend& backend) {
    if (!backend.acceptsSnapshotEntries()) return false;
    const KeyGroupRange range = backend.keyGroupRange();
    firstGroup_ = range.startKeyGroup;
    lastBytes_.assign(static_cast<size_t>(range.endKeyGroup - range.startKeyGroup + 1), 0);
    return true;
  }
  bool prepared() const { return !lastBytes_.empty(); }
  // Drops what was added and not handed over (a snapshot that failed
  // halfway): call before a snapshot's first add().
  void reset() { groups_ = nullptr; }
  // `key`'s entry (in key group `keyGroup`): the value as TypeSerializer<V>
  // writes it, the state's serializer.
  template <class V>
  void add(int32_t keyGroup, const K& key, const V& value) {
    if (groups_ == nullptr) {
      // Each group reserves what it took in the last snapshot.
      groups_ = std::make_shared<std::vector<std::vector<uint8_t>>>(lastBytes_.size());
      for (size_t g = 0; g < lastBytes_.size(); ++g) (*groups_)[g].reserve(lastBytes_[g]);
    }
    const auto g = static_cast<size_t>(keyGroup - firstGroup_);  // negative: wraps, fails below
    if (g >= lastBytes_.size()) {
      throw SluiceException(
          "key group " + std::to_string(keyGroup) + " of a key in the snapshot is not in this " +
          "subtask's range [" + std::to_string(firstGroup_) + ", " +
          std::to_string(firstGroup_ + static_cast<int32_t>(lastBytes_.size()) - 1) +
          "] (was the key selector deterministic?)");
    }
    std::vector<uint8_t>& group = (*groups_)[g];
    appendPart(group, [&](DataOutputView& out) { TypeSerializer<K>::serialize(key, out); });
    appendPart(group, [&](DataOutputView& out) { TypeSerializer<V>::serialize(value, out); });
  }
  // Hands what was added since the last call (possibly nothing) to
  // `backend`'s next snapshot as state `stateName`'s entries.
  void handTo(KeyedStateBackend& backend, const std::string& stateName) {
    std::shared_ptr<std::vector<std::vector<uint8_t>>> groups = std::move(groups_);
    groups_ = nullptr;
    if (groups == nullptr) groups = std::make_shared<std::vector<std::vector<uint8_t>>>();
    groups->resize(lastBytes_.size());
    for (size_t g = 0; g < lastBytes_.size(); ++g) lastBytes_[g] = (*groups)[g].size();
    backend.addToNextSnapshot(stateName, std::move(groups));
  }

 private:
  // Appends what `write` serializes as a varuint length and the bytes
  // (serialized on the stack first: one append each).
  template <class F>
  void appendPart(std::vector<uint8_t>& group, F write) {
    uint8_t buffer[256];
    overflow_.clear();
    DataOutputView part(buffer, sizeof buffer, overflow_);
    write(part);
    uint8_t header[10];
    std::vector<uint8_t> unused;
    DataOutputView length(header, sizeof header, unused);
    length.writeVarUint(part.size());
    group.insert(group.end(), length.data(), length.data() + length.size());
    group.insert(group.end(), part.data(), part.data() + part.size());
  }

  std::shared_ptr<std::vector<std::vector<uint8_t>>> groups_;  // of the snapshot being taken
  std::vector<size_t> lastBytes_;                              // per group, in the last one
  int32_t firstGroup_ = 0;
  std::vector<uint8_t> overflow_;
};

}  // namespace sluice::internal
