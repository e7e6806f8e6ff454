// KeyedStateBackend: the keyed state of one operator in one subtask.
//
// The backend does not know the key type. The keyed operator serializes each
// element's key once (TypeSerializer<K>) and passes the bytes and the key
// group to setCurrentKey(); every state then addresses its entry by those
// bytes plus the serialized namespace. This keeps one implementation per
// backend for all key types, makes snapshots canonical for free, and lets
// RocksDB use the bytes as they are: [key group, 2 bytes big-endian | key |
// namespace], so a key-group range is one contiguous scan.
//
// The backend does not know the state's types either: it stores objects
// described by StateTypes (state_type.h) in storages (state_storage.h), and
// the typed states a user sees are thin front ends over those
// (internal/keyed_state.h), so a backend is compiled once, in src/state.
//
// Backends are chosen by name (`state.backend.type`) from a registry of
// KeyedStateBackendFactory: "hashmap" (heap tables per key group,
// copy-on-write for asynchronous snapshots), "rocksdb" (one column family
// per state) and "tiered" (a memory-bounded cache of heap-format entries in
// front of a rocksdb backend). A new backend is a new factory in src/state
// plus one line in the registry; nothing user-facing changes.
//
// Threading: task thread only, except that the KeyedStateSnapshot returned
// by snapshot() may be written on any thread while the task goes on.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include <sluice/core/clock.h>
#include <sluice/core/key_hash.h>
#include <sluice/graph/operator.h>
#include <sluice/state/snapshot.h>
#include <sluice/state/state.h>
#include <sluice/state/state_storage.h>
#include <sluice/state/state_type.h>

namespace sluice {

// The built-in backends, for StreamExecutionEnvironment::setStateBackend.
enum class StateBackendType : uint8_t { kHashMap, kRocksDb, kTiered };

// "hashmap", "rocksdb" or "tiered" (case-insensitive); anything else throws a
// SluiceException (there is no ConfigException) naming `state.backend.type`,
// the value and the accepted values.
StateBackendType parseStateBackendType(std::string_view text);
const char* stateBackendTypeName(StateBackendType type);

// Shared by the RocksDB backends of one slot: one block cache and one write
// buffer manager sized from the slot's managed memory. Opaque here.
class RocksDbSharedResources;

struct KeyedBackendParams {
  // For error messages and the RocksDB working directory name.
  std::string operatorName = "operator";
  int32_t subtaskIndex = 0;
  int32_t maxParallelism = 128;
  KeyGroupRange keyGroupRange{0, 127};
  // The key type's schema (TypeSerializer<K>::schema()), stored with
  // snapshots and checked on restore.
  std::string keySchema;
  // How many bytes the serialized key at the start of `data` takes.
  std::function<size_t(const uint8_t* data, size_t size)> keyLength;
  // Time for TTL. Never null; the caller keeps it alive.
  const Clock* clock = &SystemClock::instance();

  // RocksDB only. The backend works in a fresh directory under `localDir`
  // and removes it in dispose(); a process killed before that leaves it
  // behind, and the next backend in `localDir` removes it (docs/state.md,
  // "Working directories"). With `sharedResources` it charges its
  // block cache and memtables to them, otherwise to its own budget of
  // `managedMemoryBytes`.
  std::string localDir;
  int64_t managedMemoryBytes = 64ll << 20;
  std::shared_ptr<RocksDbSharedResources> sharedResources;

  // Tiered only (`state.backend.tiered.memory`): the most memory the
  // backend's cache of entries may take, in bytes. Its RocksDB is sized by
  // the fields above, as the rocksdb backend's.
  int64_t tieredMemoryBytes = 256ll << 20;
};

class KeyedStateSnapshot {
 public:
  virtual ~KeyedStateSnapshot() = default;
  // Writes the canonical snapshot of the backend as it was when snapshot()
  // returned. May run on any thread, once.
  virtual KeyedSnapshotInfo writeTo(std::ostream& out) = 0;
};

// Entries handed to a snapshot that it makes when it is written
// (KeyedStateBackend::addToNextSnapshot): asked for at most once, on the
// thread that writes the snapshot.
class SnapshotEntrySource {
 public:
  virtual ~SnapshotEntrySource() = default;
  // Per key group of the backend's range, in addToNextSnapshot's format.
  virtual std::shared_ptr<const std::vector<std::vector<uint8_t>>> entries() = 0;
};

class KeyedStateBackend {
 public:
  explicit KeyedStateBackend(KeyedBackendParams params);
  virtual ~KeyedStateBackend();
  KeyedStateBackend(const KeyedStateBackend&) = delete;
  KeyedStateBackend& operator=(const KeyedStateBackend&) = delete;

  // The backend's registered name ("hashmap", "rocksdb", "tiered").
  virtual const char* name() const = 0;
  const KeyedBackendParams& params() const { return params_; }
  const KeyGroupRange& keyGroupRange() const { return params_.keyGroupRange; }
  const Clock& clock() const { return *params_.clock; }

  // The key the next state accesses are for. `keyGroup` must be in this
  // backend's range.
  void setCurrentKey(const uint8_t* keyBytes, size_t size, int32_t keyGroup) {
    if (!params_.keyGroupRange.contains(keyGroup)) [[unlikely]]
      failKeyGroup(keyGroup);
    currentKey_.resize(2 + size);
    currentKey_[0] = static_cast<char>((keyGroup >> 8) & 0xFF);
    currentKey_[1] = static_cast<char>(keyGroup & 0xFF);
    if (size != 0) std::memcpy(currentKey_.data() + 2, keyBytes, size);
    currentKeyGroup_ = keyGroup;
    ++currentKeyVersion_;
  }
  // Changes with every setCurrentKey() (never 0 once a key was set): a
  // storage may reuse what it looked up while the version stays the same.
  uint64_t currentKeyVersion() const { return currentKeyVersion_; }
  // The current key's serialized bytes.
  std::string_view currentKey() const {
    return currentKey_.empty() ? std::string_view() : std::string_view(currentKey_).substr(2);
  }
  // [key group (2 bytes, big-endian) | serialized key].
  std::string_view currentKeyWithGroup() const { return currentKey_; }
  int32_t currentKeyGroup() const { return currentKeyGroup_; }

  // Synchronous part of a full snapshot (short); the result writes the
  // canonical format later, on any thread, while processing continues.
  virtual std::unique_ptr<KeyedStateSnapshot> snapshot() = 0;

  // Loads the entries of this backend's key groups from `snapshots` (any
  // subset or superset of key groups each; entries outside the range are
  // skipped). Call before any state is registered. Throws when a snapshot's
  // key schema differs from this backend's, naming both.
  virtual void restore(const std::vector<const CanonicalSnapshotReader*>& snapshots) = 0;

  // Calls `fn` once for every key that has an entry in state `stateName`
  // (any namespace), with its serialized bytes and key group. The set of
  // keys is fixed when the call starts; `fn` may access and clear state of
  // the key it is given.
  virtual void forEachKey(
      const std::string& stateName,
      const std::function<void(std::string_view key, int32_t keyGroup)>& fn) = 0;

  // Removes every entry of state `stateName` (every key and namespace) in
  // one call and returns true, when the backend can do that cheaply
  // (hashmap); otherwise returns false and changes nothing, and the caller
  // clears key by key. A snapshot taken before keeps what it was taken with.
  virtual bool clearState(const std::string& stateName);

  // Entries of state `stateName` that its operator keeps outside the
  // backend (the sliced and session window operators' and the keyed
  // reduce's tables), handed to the next snapshot() instead of being put
  // into the state key by key: per key group of this backend's range, from
  // its start, (varuint key length, key, varuint value length, value)*, the
  // key as setCurrentKey() takes it followed by the namespace's bytes, the
  // value as the state's serializer writes it. The snapshot writes them as that
  // state's entries, after its own. Only where acceptsSnapshotEntries()
  // (hashmap); the state must be registered.
  virtual bool acceptsSnapshotEntries() const { return false; }
  virtual void addToNextSnapshot(const std::string& stateName,
                                 std::shared_ptr<const std::vector<std::vector<uint8_t>>> groups);
  // The same entries, made when the snapshot is written instead of now:
  // `source` holds a copy of what they are made of, and the snapshot asks
  // it for them once, on the thread that writes it, which need not be the
  // task's. So the synchronous part of a checkpoint only copies.
  virtual void addToNextSnapshot(const std::string& stateName,
                                 std::shared_ptr<SnapshotEntrySource> source);

  // Releases everything (RocksDB: closes the database and removes its
  // directory). Idempotent; the destructor calls it.
  virtual void dispose() = 0;

  // A native snapshot for incremental checkpoint `checkpointId` (RocksDB's
  // own files), or null when the backend has no native format; the caller
  // then takes snapshot().
  virtual std::unique_ptr<StateSnapshotWriter> nativeSnapshot(int64_t checkpointId);
  // Loads this backend's key groups from stored native snapshots, before any
  // state is registered. The default refuses, naming the backend.
  virtual void restoreNative(const std::vector<KeyedStateHandleRef>& handles);

  // --- storage of states, used by internal/keyed_state.h ---------------------
  //
  // The storage of state `meta.name`, after checking `meta` against the state
  // registered or restored under that name (throws StateMigrationException
  // naming both when they differ). The types describe the namespace and the
  // stored objects: the value, the list element, the map's user key (a
  // MapKeyType) and value; with TTL, the stored types are TTL-wrapped
  // (TtlType). Storages keep their types alive and must not be used after
  // dispose().
  struct StorageTypes {
    std::shared_ptr<const internal::StateType> ns;
    std::shared_ptr<const internal::StateType> value;    // value, element, user value
    std::shared_ptr<const internal::StateType> userKey;  // map state only
  };
  virtual std::unique_ptr<internal::ValueStorage> createValueStorage(const StateMetaInfo& meta,
                                                                     StorageTypes types) = 0;
  virtual std::unique_ptr<internal::ListStorage> createListStorage(const StateMetaInfo& meta,
                                                                   StorageTypes types) = 0;
  virtual std::unique_ptr<internal::MapStorage> createMapStorage(const StateMetaInfo& meta,
                                                                 StorageTypes types) = 0;

  // Names of the states registered or restored so far.
  std::vector<std::string> stateNames() const;

  // --- used by internal/keyed_state.h ---------------------------------------

  // Before a state is created: checks `meta` against the state of the same
  // name restored from a snapshot, if any, and remembers it. Throws
  // StateMigrationException naming the state and both schemas when they
  // differ.
  void registerStateMeta(const StateMetaInfo& meta);
  const StateMetaInfo* registeredMeta(const std::string& name) const;

  // The user-level state objects, one per name (see internal/keyed_state.h).
  struct StateHolderBase {
    virtual ~StateHolderBase() = default;
    const std::type_info* type = nullptr;
    std::string typeName;
  };
  std::map<std::string, std::unique_ptr<StateHolderBase>>& stateObjects() { return stateObjects_; }

 protected:
  // Meta of states found in restored snapshots, by name.
  std::map<std::string, StateMetaInfo> restoredMeta_;
  // Meta of states registered since; restoredMeta_ entries not registered yet
  // are still part of every snapshot.
  std::map<std::string, StateMetaInfo> registeredMeta_;
  // Checks a snapshot's key schema and max parallelism against this backend.
  void checkSnapshotCompatible(const CanonicalSnapshotReader& snapshot) const;

 private:
  [[noreturn]] void failKeyGroup(int32_t keyGroup) const;

  KeyedBackendParams params_;
  std::string currentKey_;
  int32_t currentKeyGroup_ = -1;
  uint64_t currentKeyVersion_ = 0;
  std::map<std::string, std::unique_ptr<StateHolderBase>> stateObjects_;
};

// Thrown when restored state cannot be read with the registering descriptor.
class StateMigrationException : public SluiceException {
 public:
  using SluiceException::SluiceException;
};

namespace internal {
// Creating the storage of a state from its descriptor (what
// internal/keyed_state.h's typed front ends call; src/state): registers the
// state's meta (with TTL when the descriptor asks for it) and creates its
// storage in `backend`, TTL-decorated when needed. `types` are the user's.
std::unique_ptr<ValueStorage> createValueStorage(KeyedStateBackend& backend,
                                                 const StateDescriptorBase& desc,
                                                 KeyedStateBackend::StorageTypes types);
std::unique_ptr<ListStorage> createListStorage(KeyedStateBackend& backend,
                                               const StateDescriptorBase& desc,
                                               KeyedStateBackend::StorageTypes types);
std::unique_ptr<MapStorage> createMapStorage(KeyedStateBackend& backend,
                                             const StateDescriptorBase& desc,
                                             KeyedStateBackend::StorageTypes types);
// Throws the "one name must keep one kind and type" error.
[[noreturn]] void failStateType(const std::string& name, const std::string& registeredAs,
                                const std::string& requestedAs);

// The backend of an operator subtask: the factory `state.backend.type` names,
// configured from the job and the slot, restored from `restore` (canonical or
// native snapshots) when it is not null.
std::unique_ptr<KeyedStateBackend> createKeyedBackendFor(OperatorContext& context,
                                                         KeyedBackendParams params,
                                                         const OperatorStateRestore* restore);
// Adapts a backend snapshot to the runtime's writer interface.
std::unique_ptr<StateSnapshotWriter> adaptSnapshot(std::unique_ptr<KeyedStateSnapshot> snapshot);
}  // namespace internal

// Creates a backend of one kind. Registered once per process by name.
class KeyedStateBackendFactory {
 public:
  virtual ~KeyedStateBackendFactory() = default;
  // Lower case, as `state.backend.type` spells it.
  virtual const char* name() const = 0;
  // Completes `params` for an operator subtask from the job's configuration
  // and its slot (working directory, managed memory, shared caches).
  virtual void configure(KeyedBackendParams& params, OperatorContext& context) const {
    (void)params;
    (void)context;
  }
  virtual std::unique_ptr<KeyedStateBackend> create(KeyedBackendParams params) const = 0;
};

// The factory registered as `name` (case-insensitive). Throws SluiceException
// naming `state.backend.type`, the value and the registered names.
const KeyedStateBackendFactory& keyedStateBackendFactory(std::string_view name);
// Registered names, sorted.
std::vector<std::string> keyedStateBackendNames();
// Adds a factory (e.g. a test's); a name registered twice throws.
void registerKeyedStateBackendFactory(std::unique_ptr<KeyedStateBackendFactory> factory);

// Creates the backend `type` names, from `params` alone.
std::unique_ptr<KeyedStateBackend> createKeyedStateBackend(StateBackendType type,
                                                           KeyedBackendParams params);
std::unique_ptr<KeyedStateBackend> createKeyedStateBackend(std::string_view name,
                                                           KeyedBackendParams params);

}  // namespace sluice
