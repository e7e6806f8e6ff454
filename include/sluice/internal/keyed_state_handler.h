// KeyedStateHandler<K>: the keyed-state plumbing every keyed operator shares.
//
// It creates the operator's KeyedStateBackend in initializeState() from the
// job configuration (`state.backend.type`, RocksDB's local directory, the
// slot's managed memory), restores it from a snapshot when there is one,
// serializes each element's key once and makes it the backend's current key,
// and snapshots and disposes of the backend. Task thread only, but for the
// SnapshotEntrySource that SnapshotEntries hands a snapshot, which runs on
// the thread that writes it.
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
  const KeyGroupAssigner& keyGroups() const { return keyGroups_; }

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
// handed to its backend's next snapshot (KeyedStateBackend::addToNextSnapshot)
// instead of put into the state key by key. The synchronous part of a
// checkpoint only copies the table (the caller's `frozen` copy); the
// snapshot serializes the copy when it is written, on the thread that
// writes it, and then frees it.
template <class K>
class SnapshotEntries {
 public:
  // Whether `backend` takes such entries; if so, sized to its key groups,
  // which `keyGroups` assigns keys to.
  bool prepare(const KeyedStateBackend& backend, const KeyGroupAssigner& keyGroups) {
    if (!backend.acceptsSnapshotEntries()) return false;
    const KeyGroupRange range = backend.keyGroupRange();
    firstGroup_ = range.startKeyGroup;
    numGroups_ = static_cast<size_t>(range.endKeyGroup - range.startKeyGroup + 1);
    keyGroups_ = keyGroups;
    operator_ = "operator '" + backend.params().operatorName + "' (subtask " +
                std::to_string(backend.params().subtaskIndex) + ")";
    return true;
  }
  bool prepared() const { return numGroups_ != 0; }

  // Hands `backend`'s next snapshot state `stateName`'s entries as
  // `frozen` holds them: when the snapshot is written, `fill(frozen, add)`
  // calls add(key, value) for each entry, `value` a V as the state's
  // serializer writes it. `fill` must use nothing but `frozen`: it runs
  // on another thread while the task goes on.
  template <class V, class Frozen, class Fill>
  void handTo(KeyedStateBackend& backend, const std::string& stateName, Frozen frozen, Fill fill) {
    backend.addToNextSnapshot(
        stateName, std::make_shared<Source<V, Frozen, Fill>>(
                       std::move(frozen), std::move(fill), keyGroups_, firstGroup_, numGroups_,
                       operator_ + ", state '" + stateName + "'"));
  }

 private:
  template <class V, class Frozen, class Fill>
  class Source final : public SnapshotEntrySource {
   public:
    Source(Frozen frozen, Fill fill, KeyGroupAssigner keyGroups, int32_t firstGroup,
           size_t numGroups, std::string what)
        : frozen_(std::move(frozen)),
          fill_(std::move(fill)),
          keyGroups_(keyGroups),
          firstGroup_(firstGroup),
          numGroups_(numGroups),
          what_(std::move(what)) {}

    std::shared_ptr<const std::vector<std::vector<uint8_t>>> entries() override {
      auto groups = std::make_shared<std::vector<std::vector<uint8_t>>>(numGroups_);
      std::vector<uint8_t> overflow;
      fill_(frozen_, [&](const K& key, const V& value) {
        const int32_t keyGroup = keyGroups_.keyGroupOf(key);
        const auto g = static_cast<size_t>(keyGroup - firstGroup_);  // negative: wraps
        if (g >= numGroups_) {
          throw SluiceException(what_ + ": key group " + std::to_string(keyGroup) +
                                " of a key in the snapshot is not in this subtask's range [" +
                                std::to_string(firstGroup_) + ", " +
                                std::to_string(firstGroup_ + static_cast<int32_t>(numGroups_) - 1) +
                                "] (was the key selector deterministic?)");
        }
        std::vector<uint8_t>& group = (*groups)[g];
        appendPart(group, overflow,
                   [&](DataOutputView& out) { TypeSerializer<K>::serialize(key, out); });
        appendPart(group, overflow,
                   [&](DataOutputView& out) { TypeSerializer<V>::serialize(value, out); });
      });
      frozen_ = Frozen{};  // written once: the copy may go
      return groups;
    }

   private:
    Frozen frozen_;
    Fill fill_;
    KeyGroupAssigner keyGroups_;
    int32_t firstGroup_;
    size_t numGroups_;
    std::string what_;  // "operator '...' (subtask n), state '...'", for errors
  };

  // Appends what `write` serializes as a varuint length and the bytes
  // (serialized on the stack first: one append each).
  template <class F>
  static void appendPart(std::vector<uint8_t>& group, std::vector<uint8_t>& overflow, F write) {
    uint8_t buffer[256];
    overflow.clear();
    DataOutputView part(buffer, sizeof buffer, overflow);
    write(part);
    uint8_t header[10];
    std::vector<uint8_t> unused;
    DataOutputView length(header, sizeof header, unused);
    length.writeVarUint(part.size());
    group.insert(group.end(), length.data(), length.data() + length.size());
    group.insert(group.end(), part.data(), part.data() + part.size());
  }

  KeyGroupAssigner keyGroups_{128};
  int32_t firstGroup_ = 0;
  size_t numGroups_ = 0;
  std::string operator_;  // "operator '...' (subtask n)"
};

}  // namespace sluice::internal
