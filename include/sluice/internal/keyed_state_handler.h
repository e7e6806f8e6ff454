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

}  // namespace sluice::internal
