// RocksDbKeyedStateBackend: keyed state in an embedded RocksDB database on
// local disk, so one subtask's state may be much larger than its memory.
//
// Layout. Every state has its own column family, named by the state's name
// (a state called "default" uses RocksDB's default column family). An entry's
// key is
//
//   [key group, 2 bytes big-endian | serialized key | serialized namespace]
//
// followed, for map state, by the serialized user key. The key-group prefix
// makes every key group, and so every key-group range, one contiguous scan.
// Serialized keys and namespaces are prefix-free (fixed width or length
// prefixed), so [kg | key | ns] is a prefix of exactly the map entries of that
// key and namespace. Values use the bytes snapshot.h describes: a list is its
// elements, each as [u32 little-endian length | element bytes], and add()
// writes the new elements as a merge operand that a merge operator appends,
// without reading the list.
//
// Memory. The block cache (data, index and filter blocks) and the memtables
// are charged to one budget: an LRU cache plus a write buffer manager that
// charges memtable memory to that cache (see createRocksDbSharedResources()).
// The backends of one slot share one budget through
// KeyedBackendParams::sharedResources; a backend without it gets its own of
// KeyedBackendParams::managedMemoryBytes. Index and filter blocks live in the
// cache too (with high priority; level-0 ones pinned), so memory stays near
// the budget however large the state grows.
//
// Files. The database lives in a fresh directory
// <localDir>/sluice-rocksdb-<operator>-<subtask>-<random> (the system temp
// directory when localDir is empty). dispose() closes the database and
// removes the directory; a full snapshot still being written keeps the
// database open until it finishes or is destroyed, and the directory goes with
// the last of them. The write-ahead log is off: durability comes from
// checkpoints, as in Flink.
//
// Time to live. A state whose StateMetaInfo has ttlCleanupInCompaction and a
// positive ttlMillis gets a compaction filter that drops expired values (and,
// for lists, expired elements) whenever RocksDB compacts; it reads the clock
// at most once per ttlQueryTimeAfterNumEntries entries. List appends are
// filtered as merge operands too. RocksDB applies compaction filters
// regardless of its snapshots, so a full snapshot being written may miss
// entries that expired before it was taken and were dropped meanwhile.
//
// Snapshots. snapshot() writes the canonical format of snapshot.h (restorable
// into either backend, at any parallelism). snapshotIncremental() instead
// keeps RocksDB's own files: a RocksDB checkpoint (hard links of the immutable
// SST files plus copies of the few small files that describe them), reporting
// which SST files the previous incremental snapshot did not already have, so a
// checkpoint only uploads what is new. restoreIncremental() reopens such
// files, at the same or another parallelism.
//
// Threading: task thread only, except KeyedStateSnapshot::writeTo() (any
// thread, while the task goes on) and the compaction filter (RocksDB's
// background threads; it only reads the clock).
//
// Failure: every RocksDB Status is checked; a failed call throws
// SluiceException naming the operation, the state (or directory) and
// RocksDB's message. Undecodable stored bytes throw SerializationError.
//
// This header does not include RocksDB: the typed states below serialize with
// TypeSerializer and call the backend's byte-level methods, which are
// defined out of line in src/state/rocksdb_keyed_backend.cc.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sluice/core/serializer.h>
#include <sluice/state/internal_state.h>
#include <sluice/state/keyed_state_backend.h>
#include <sluice/state/snapshot.h>

namespace sluice {

class RocksDbKeyedStateBackend final : public KeyedStateBackend {
 public:
  // Creates the working directory and opens an empty database in it. Throws
  // SluiceException when the directory cannot be created or RocksDB fails.
  explicit RocksDbKeyedStateBackend(KeyedBackendParams params);
  ~RocksDbKeyedStateBackend() override;

  StateBackendType type() const override { return StateBackendType::kRocksDb; }

  // Takes a RocksDB snapshot (cheap); the result iterates it later, on any
  // thread, and releases it when written or destroyed. With
  // ttlCleanupFullSnapshot, expired entries are left out.
  std::unique_ptr<KeyedStateSnapshot> snapshot() override;
  void restore(const std::vector<const CanonicalSnapshotReader*>& snapshots) override;
  void forEachKey(const std::string& stateName,
                  const std::function<void(std::string_view key, int32_t keyGroup)>& fn) override;
  void dispose() override;

  // The directory this backend works in; it no longer exists after dispose().
  const std::string& workingDirectory() const;

  // Flushes every column family and compacts it fully (running the TTL
  // compaction filters). For tests and maintenance; blocks until done.
  void compactAll();

  // What the database holds in memory now, in bytes. The cache figures are
  // those of the (possibly shared) budget.
  struct MemoryUsage {
    int64_t blockCacheCapacity = 0;
    // Everything charged to the cache: blocks and the memtables' reservations.
    int64_t blockCacheUsage = 0;
    int64_t blockCachePinnedUsage = 0;
    int64_t writeBufferManagerCapacity = 0;
    // Memtable memory of all databases sharing the write buffer manager.
    int64_t memtableUsage = 0;
    // This database's table readers outside the cache.
    int64_t tableReadersUsage = 0;
  };
  MemoryUsage memoryUsage() const;

  // --- Incremental native snapshots ------------------------------------------
  //
  // snapshotIncremental() creates a RocksDB checkpoint of the database in
  // `checkpointDir` (which must not exist; its parent is created). RocksDB
  // flushes the memtables, hard-links the SST files (copies them when the
  // directory is on another file system) and copies the small files that
  // describe the database. The backend adds kIncrementalMetaFileName: the
  // states, key schema, key-group range and file lists, so the directory
  // describes itself (loadIncrementalSnapshotHandle()).
  //
  // SST files are immutable and identified by RocksDB's unique id (stored in
  // the file, so it survives copies and restores), never by name: names are
  // only unique within one database. An SST file of this snapshot whose id is
  // in `previous` is shared with it; the others are newSstFiles, the only
  // files a checkpoint needs to upload. A snapshot restored with
  // restoreIncremental() works as `previous` for the restored backend's first
  // incremental snapshot: files carried over keep their ids.
  //
  // The call is synchronous: a flush, hard links, and reading the properties
  // block of each SST file for its id. The handle's files stay valid until
  // the caller removes the directory, whatever the backend does next.

  // One SST file of an incremental snapshot.
  struct SstFile {
    std::string fileName;  // in the snapshot's directory, e.g. "000012.sst"
    // RocksDB's unique id of the file, as hex text: the same id means the
    // same contents, across databases and hosts.
    std::string uniqueId;
    uint64_t sizeBytes = 0;
    bool operator==(const SstFile&) const = default;
  };

  struct IncrementalSnapshotHandle {
    int64_t checkpointId = 0;
    KeyGroupRange keyGroupRange;
    std::string keySchema;
    int32_t maxParallelism = 0;
    // Absolute path of the directory holding every file below.
    std::string directory;
    // Every SST file the snapshot needs, sorted by name.
    std::vector<SstFile> sstFiles;
    // The SST files whose ids are not in `previous` (all of them without
    // one); sorted by name. Not stored in the directory: empty in a handle
    // that loadIncrementalSnapshotHandle() returns.
    std::vector<SstFile> newSstFiles;
    // The other files, owned by this snapshot alone: MANIFEST-*, CURRENT,
    // OPTIONS-*, the (empty) write-ahead log and kIncrementalMetaFileName.
    std::vector<std::string> privateFiles;
    // The states the snapshot holds (registered and restored ones), by name.
    std::vector<StateMetaInfo> states;
  };

  static constexpr const char* kIncrementalMetaFileName = "SLUICE-SNAPSHOT-META";

  IncrementalSnapshotHandle snapshotIncremental(int64_t checkpointId,
                                                const std::string& checkpointDir,
                                                const IncrementalSnapshotHandle* previous);

  // Rebuilds a handle from a snapshot directory's meta file (newSstFiles
  // empty). Throws SerializationError when the file is missing or corrupt.
  static IncrementalSnapshotHandle loadIncrementalSnapshotHandle(const std::string& directory);

  // Loads this backend's key groups from incremental snapshots, before any
  // state is registered (like restore()). The handles' directories must hold
  // their files; they are only read. With one handle whose range covers this
  // backend's, the database is reopened from a copy of its files (SST files
  // hard-linked) and the key groups outside this backend's range are
  // deleted; otherwise each handle is opened read-only and the entries of
  // this backend's key groups are copied in. Throws when a handle's key
  // schema or max parallelism differs from this backend's, or a file is
  // missing.
  void restoreIncremental(const std::vector<IncrementalSnapshotHandle>& handles);

  // --- Byte-level access, used by the typed states below -------------------

  // The storage of one state. Defined in the .cc; lives as long as the
  // backend.
  struct ColumnFamily;

  // The column family of state `meta.name`, created on first use (with the
  // TTL compaction filter `meta` asks for). For a state restored from a
  // snapshot, `meta` replaces the restored meta from now on.
  ColumnFamily& columnFamily(const StateMetaInfo& meta);

  // Reads the value of `key` into `value`; false when there is none.
  bool get(ColumnFamily& cf, std::string_view key, std::string& value);
  void put(ColumnFamily& cf, std::string_view key, std::string_view value);
  void remove(ColumnFamily& cf, std::string_view key);
  // Appends `operand` to the value of `key` (list state: encoded elements).
  void merge(ColumnFamily& cf, std::string_view key, std::string_view operand);
  // Removes every entry whose key starts with `prefix`.
  void removePrefix(ColumnFamily& cf, std::string_view prefix);

  // Iterates, in key order, the entries whose keys start with a prefix, as
  // they were when the iterator was created (later writes are not seen, so
  // removing entries while iterating is safe). Keeps the database open while
  // it lives.
  class PrefixIterator {
   public:
    PrefixIterator(PrefixIterator&&) noexcept;
    PrefixIterator& operator=(PrefixIterator&&) noexcept;
    ~PrefixIterator();

    bool valid() const;
    // The whole key, prefix included; valid until next().
    std::string_view key() const;
    std::string_view value() const;
    void next();

   private:
    friend class RocksDbKeyedStateBackend;
    struct Impl;
    explicit PrefixIterator(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
  };
  PrefixIterator iteratePrefix(ColumnFamily& cf, std::string_view prefix);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

namespace internal {

inline std::string_view bytesView(const std::vector<uint8_t>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// Decodes exactly `bytes` as a T; trailing bytes are corruption.
template <class T>
void decodeStored(std::string_view bytes, T& into, const std::string& stateName) {
  DataInputView in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  TypeSerializer<T>::deserialize(into, in);
  if (in.remaining() != 0) {
    throw SerializationError("state '" + stateName + "': " + std::to_string(in.remaining()) +
                             " bytes left over after decoding a stored " +
                             TypeSerializer<T>::schema());
  }
}

// Splits the next element off a stored list ([u32 LE length | bytes]...);
// false at the end. Throws SerializationError on a truncated list.
inline bool nextListElement(std::string_view& rest, std::string_view& element,
                            const std::string& stateName) {
  if (rest.empty()) return false;
  uint32_t len = 0;
  if (rest.size() < 4) {
    throw SerializationError("state '" + stateName + "': truncated list element length (" +
                             std::to_string(rest.size()) + " bytes left)");
  }
  const auto* p = reinterpret_cast<const unsigned char*>(rest.data());
  len = static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
        static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
  if (len > rest.size() - 4) {
    throw SerializationError("state '" + stateName + "': list element of " + std::to_string(len) +
                             " bytes exceeds the " + std::to_string(rest.size() - 4) +
                             " bytes left");
  }
  element = rest.substr(4, len);
  rest.remove_prefix(4 + len);
  return true;
}

// Appends `value` to `out` as one list element.
template <class T>
void appendListElement(const T& value, std::vector<uint8_t>& out) {
  const size_t lengthAt = out.size();
  out.resize(lengthAt + 4);
  DataOutputView view(out);
  TypeSerializer<T>::serialize(value, view);
  const auto len = static_cast<uint32_t>(out.size() - lengthAt - 4);
  const uint8_t le[4] = {static_cast<uint8_t>(len), static_cast<uint8_t>(len >> 8),
                         static_cast<uint8_t>(len >> 16), static_cast<uint8_t>(len >> 24)};
  std::memcpy(out.data() + lengthAt, le, 4);
}

// What every RocksDB state shares: its column family, the current
// namespace's bytes and reusable key and value buffers.
template <class N>
class RocksDbStateBase {
 protected:
  RocksDbStateBase(RocksDbKeyedStateBackend& backend, const StateMetaInfo& meta)
      : backend_(backend), cf_(backend.columnFamily(meta)), name_(meta.name) {
    setNamespaceBytes(N{});
  }

  void setNamespaceBytes(const N& ns) {
    nsBytes_.clear();
    DataOutputView out(nsBytes_);
    TypeSerializer<N>::serialize(ns, out);
  }

  // [kg | key | namespace] of the current key and namespace, in keyBuf_.
  std::string_view buildKey() { return buildKeyFor(nsBytes_); }

  std::string_view buildKeyFor(const std::vector<uint8_t>& nsBytes) {
    if (backend_.currentKeyGroup() < 0) [[unlikely]] {
      throw SluiceException("state '" + name_ + "' was accessed before any key was set");
    }
    const std::string_view k = backend_.currentKeyWithGroup();
    keyBuf_.assign(k.begin(), k.end());
    keyBuf_.insert(keyBuf_.end(), nsBytes.begin(), nsBytes.end());
    return bytesView(keyBuf_);
  }

  // [kg | key | namespace | user key] in keyBuf_.
  template <class UK>
  std::string_view buildUserKey(const UK& userKey) {
    buildKey();
    DataOutputView out(keyBuf_);
    TypeSerializer<UK>::serialize(userKey, out);
    return bytesView(keyBuf_);
  }

  RocksDbKeyedStateBackend& backend_;
  RocksDbKeyedStateBackend::ColumnFamily& cf_;
  std::string name_;
  std::vector<uint8_t> nsBytes_;
  std::vector<uint8_t> keyBuf_;
  std::vector<uint8_t> valueOut_;
  std::string valueIn_;
};

}  // namespace internal

template <class N, class V>
class RocksDbValueState final : public InternalValueState<N, V>,
                                private internal::RocksDbStateBase<N> {
  using Base = internal::RocksDbStateBase<N>;

 public:
  RocksDbValueState(RocksDbKeyedStateBackend& backend, const StateMetaInfo& meta)
      : Base(backend, meta) {}

  void setCurrentNamespace(const N& ns) override { this->setNamespaceBytes(ns); }

  std::optional<V> value() override {
    if (!this->backend_.get(this->cf_, this->buildKey(), this->valueIn_)) return std::nullopt;
    std::optional<V> result(std::in_place);
    internal::decodeStored(this->valueIn_, *result, this->name_);
    return result;
  }

  void update(const V& value) override {
    this->valueOut_.clear();
    DataOutputView out(this->valueOut_);
    TypeSerializer<V>::serialize(value, out);
    this->backend_.put(this->cf_, this->buildKey(), internal::bytesView(this->valueOut_));
  }

  void clear() override { this->backend_.remove(this->cf_, this->buildKey()); }
};

template <class N, class E>
class RocksDbListState final : public InternalListState<N, E>,
                               private internal::RocksDbStateBase<N> {
  using Base = internal::RocksDbStateBase<N>;

 public:
  RocksDbListState(RocksDbKeyedStateBackend& backend, const StateMetaInfo& meta)
      : Base(backend, meta) {}

  void setCurrentNamespace(const N& ns) override { this->setNamespaceBytes(ns); }

  std::vector<E> get() override {
    std::vector<E> result;
    if (!this->backend_.get(this->cf_, this->buildKey(), this->valueIn_)) return result;
    std::string_view rest = this->valueIn_;
    std::string_view element;
    while (internal::nextListElement(rest, element, this->name_)) {
      internal::decodeStored(element, result.emplace_back(), this->name_);
    }
    return result;
  }

  void add(const E& value) override {
    this->valueOut_.clear();
    internal::appendListElement(value, this->valueOut_);
    this->backend_.merge(this->cf_, this->buildKey(), internal::bytesView(this->valueOut_));
  }

  void addAll(const std::vector<E>& values) override {
    if (values.empty()) return;
    this->valueOut_.clear();
    for (const E& v : values) internal::appendListElement(v, this->valueOut_);
    this->backend_.merge(this->cf_, this->buildKey(), internal::bytesView(this->valueOut_));
  }

  void update(const std::vector<E>& values) override {
    if (values.empty()) {
      clear();
      return;
    }
    this->valueOut_.clear();
    for (const E& v : values) internal::appendListElement(v, this->valueOut_);
    this->backend_.put(this->cf_, this->buildKey(), internal::bytesView(this->valueOut_));
  }

  void clear() override { this->backend_.remove(this->cf_, this->buildKey()); }

  // Moves the stored bytes without decoding them: source lists are read,
  // removed, and their concatenation appended to the target with one merge.
  void mergeNamespaces(const N& target, const std::vector<N>& sources) override {
    std::vector<uint8_t> merged;
    for (const N& s : sources) {
      this->setNamespaceBytes(s);
      const std::string_view key = this->buildKey();
      if (!this->backend_.get(this->cf_, key, this->valueIn_)) continue;
      merged.insert(merged.end(), this->valueIn_.begin(), this->valueIn_.end());
      this->backend_.remove(this->cf_, key);
    }
    this->setNamespaceBytes(target);
    if (!merged.empty()) {
      this->backend_.merge(this->cf_, this->buildKey(), internal::bytesView(merged));
    }
  }
};

template <class N, class UK, class UV>
class RocksDbMapState final : public InternalMapState<N, UK, UV>,
                              private internal::RocksDbStateBase<N> {
  using Base = internal::RocksDbStateBase<N>;

 public:
  RocksDbMapState(RocksDbKeyedStateBackend& backend, const StateMetaInfo& meta)
      : Base(backend, meta) {}

  void setCurrentNamespace(const N& ns) override { this->setNamespaceBytes(ns); }

  std::optional<UV> get(const UK& key) override {
    if (!this->backend_.get(this->cf_, this->buildUserKey(key), this->valueIn_)) {
      return std::nullopt;
    }
    std::optional<UV> result(std::in_place);
    internal::decodeStored(this->valueIn_, *result, this->name_);
    return result;
  }

  void put(const UK& key, const UV& value) override {
    this->valueOut_.clear();
    DataOutputView out(this->valueOut_);
    TypeSerializer<UV>::serialize(value, out);
    this->backend_.put(this->cf_, this->buildUserKey(key), internal::bytesView(this->valueOut_));
  }

  void remove(const UK& key) override { this->backend_.remove(this->cf_, this->buildUserKey(key)); }

  bool contains(const UK& key) override {
    return this->backend_.get(this->cf_, this->buildUserKey(key), this->valueIn_);
  }

  bool isEmpty() override {
    return !this->backend_.iteratePrefix(this->cf_, this->buildKey()).valid();
  }

  void clear() override { this->backend_.removePrefix(this->cf_, this->buildKey()); }

  std::unique_ptr<MapStateIterator<UK, UV>> iterator() override {
    const std::string_view prefix = this->buildKey();
    return std::make_unique<Iterator>(this->backend_, this->cf_, prefix, this->name_);
  }

 private:
  class Iterator final : public MapStateIterator<UK, UV> {
   public:
    Iterator(RocksDbKeyedStateBackend& backend, RocksDbKeyedStateBackend::ColumnFamily& cf,
             std::string_view prefix, const std::string& name)
        : backend_(backend),
          cf_(cf),
          it_(backend.iteratePrefix(cf, prefix)),
          prefixSize_(prefix.size()),
          name_(name) {}

    bool hasNext() override { return it_.valid(); }

    std::pair<UK, UV> next() override {
      if (!it_.valid()) {
        throw SluiceException("MapStateIterator of state '" + name_ +
                              "': next() called with no entries left");
      }
      std::pair<UK, UV> entry;
      const std::string_view key = it_.key();
      internal::decodeStored(key.substr(prefixSize_), entry.first, name_);
      internal::decodeStored(it_.value(), entry.second, name_);
      lastKey_.assign(key.data(), key.size());
      canRemove_ = true;
      it_.next();
      return entry;
    }

    void remove() override {
      if (!canRemove_) {
        throw SluiceException("MapStateIterator of state '" + name_ +
                              "': remove() must follow a next() (at most once each)");
      }
      backend_.remove(cf_, lastKey_);
      canRemove_ = false;
    }

   private:
    RocksDbKeyedStateBackend& backend_;
    RocksDbKeyedStateBackend::ColumnFamily& cf_;
    RocksDbKeyedStateBackend::PrefixIterator it_;
    size_t prefixSize_;
    std::string name_;
    std::string lastKey_;
    bool canRemove_ = false;
  };
};

}  // namespace sluice
