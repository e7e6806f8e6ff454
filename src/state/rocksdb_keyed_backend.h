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
// checkpoints, as in Flink. The directory holds an owner lock, LOCK.sluice,
// flock()ed while the backend lives, and the first backend of a process in a
// localDir removes the directories there that a dead process left (killed
// jobs never reach dispose()); see rocksdb_util.h and docs/state.md.
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
// This header does not include RocksDB: the storages (rocksdb_state.cc)
// serialize with their StateTypes and call the backend's byte-level methods,
// defined in rocksdb_keyed_backend.cc.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sluice/core/serializer.h>
#include <sluice/state/keyed_state_backend.h>
#include <sluice/state/snapshot.h>

namespace sluice {

class RocksDbKeyedStateBackend final : public KeyedStateBackend {
 public:
  // Options of the databases that differ from the rocksdb backend's, for
  // the tiered backend, whose RocksDB this is.
  struct Tuning {
    // A whole-key bloom filter per memtable, so that a Get of a key the
    // memtable does not hold skips the memtable's skip list: a cache in
    // front reads mostly keys written long ago.
    bool memtableBloomFilter = false;
    // Data blocks written uncompressed: a Get whose block is not in the
    // block cache then reads it without decompressing it (the block cache
    // holds blocks uncompressed either way, so it holds as much), and
    // flushes and compactions do not compress. Costs disk space.
    bool uncompressed = false;
    // Level-0 files that start a compaction into level 1 (0: RocksDB's
    // default of 4). With a cache in front, most writes are write-backs of
    // evicted entries spread over the whole key range, so every L0->L1
    // compaction rewrites all of level 1, and the block cache's copies of
    // its blocks go stale with it: fewer, larger compactions keep it warm.
    int level0CompactionTrigger = 0;
    // Memtable inserts start from where the last insert of the same key
    // group stopped (RocksDB's insert hints, the key group as the prefix).
    // Write-backs come as batches sorted by key, so each insert lands near
    // the one before; without a hint, RocksDB searches the skip list from
    // its top whenever another key lies between the two. Off when the
    // backend's key groups' hints would take more than 1/32 of a memtable;
    // a memtable that takes a range deletion is flushed right after it
    // (rescaling), since RocksDB 7.8 shares hints between point keys and
    // range deletions.
    bool memtableInsertHints = false;
  };

  // Creates the working directory and opens an empty database in it. Throws
  // SluiceException when the directory cannot be created or RocksDB fails.
  explicit RocksDbKeyedStateBackend(KeyedBackendParams params);
  RocksDbKeyedStateBackend(KeyedBackendParams params, Tuning tuning);
  ~RocksDbKeyedStateBackend() override;

  const char* name() const override { return "rocksdb"; }

  // Takes a RocksDB snapshot (cheap); the result iterates it later, on any
  // thread, and releases it when written or destroyed. With
  // ttlCleanupFullSnapshot, expired entries are left out.
  std::unique_ptr<KeyedStateSnapshot> snapshot() override;
  void restore(const std::vector<const CanonicalSnapshotReader*>& snapshots) override;
  void forEachKey(const std::string& stateName,
                  const std::function<void(std::string_view key, int32_t keyGroup)>& fn) override;
  void dispose() override;

  std::unique_ptr<internal::ValueStorage> createValueStorage(const StateMetaInfo& meta,
                                                             StorageTypes types) override;
  std::unique_ptr<internal::ListStorage> createListStorage(const StateMetaInfo& meta,
                                                           StorageTypes types) override;
  std::unique_ptr<internal::MapStorage> createMapStorage(const StateMetaInfo& meta,
                                                         StorageTypes types) override;

  // Incremental checkpoints: a RocksDB checkpoint of the database in a
  // staging directory of the working directory (same file system, so SST
  // files are hard links); the runtime copies the files to checkpoint
  // storage, and the staging directory goes with the writer.
  std::unique_ptr<StateSnapshotWriter> nativeSnapshot(int64_t checkpointId) override;
  // Gathers each stored snapshot's files (hard-linked where possible) into a
  // directory under the working directory, as RocksDB wrote them, and
  // reopens them with restoreIncremental().
  void restoreNative(const std::vector<KeyedStateHandleRef>& handles) override;

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

  // --- Byte-level access, used by the storages (rocksdb_state.cc) -----------

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

  // Writes applied together: the batch*() calls collect puts, removals and
  // merges (copying the bytes), writePending() applies them in one
  // WriteBatch, sorted by column family and key (a stable sort: writes of one
  // key keep their order), so that the memtables' skip lists are filled in
  // order, each insert starting where the last one ended. Reads do not see
  // collected writes before that. (The tiered backend's write-back of evicted
  // and flushed entries.)
  void batchPut(ColumnFamily& cf, std::string_view key, std::string_view value);
  void batchRemove(ColumnFamily& cf, std::string_view key);
  void batchMerge(ColumnFamily& cf, std::string_view key, std::string_view operand);
  // Memory the collected writes take (their bytes and bookkeeping).
  size_t pendingBytes() const;
  void writePending();

  // --- Snapshots with writes on top (the tiered backend's dirty entries) ---
  //
  // A snapshot of the database as it is now with writes on top that the
  // database itself never sees. beginSnapshotWith() has RocksDB make a
  // checkpoint of itself in a staging directory of the working directory
  // (memtables flushed, SST files hard-linked); the writes collected with
  // batchPut() and friends then go into it, unwritten, with spillPending()
  // (to a file next to it, so that the task holds one batch in memory at a
  // time); snapshotWith() or nativeSnapshotWith() makes the snapshot. When
  // it is written (the canonical one's writeTo(), the native writer's
  // nativeSnapshot(), on any thread), the copy is opened without
  // compactions and the writes are written into it; the copy is then
  // iterated (canonical) or flushed and is the snapshot (native: restored
  // like any other). A failure there (a full disk) throws from writeTo() or
  // nativeSnapshot(), naming the file. The staging directory and the file
  // of writes go with the snapshot (or with the copy, if no snapshot is
  // made of it).
  enum class WriteOp : uint8_t { kPut, kDelete, kMerge };
  class CopyWithWrites;
  // For nativeSnapshotWith(`checkpointId`) when `native`, else for
  // snapshotWith().
  std::shared_ptr<CopyWithWrites> beginSnapshotWith(bool native, int64_t checkpointId);
  // Appends the collected writes to `copy`'s and forgets them (also when
  // appending fails: a full disk).
  void spillPending(CopyWithWrites& copy);
  // Forgets the collected writes.
  void discardPending();
  std::unique_ptr<KeyedStateSnapshot> snapshotWith(std::shared_ptr<CopyWithWrites> copy);
  std::unique_ptr<StateSnapshotWriter> nativeSnapshotWith(std::shared_ptr<CopyWithWrites> copy);

  // The states restored by restore(), restoreNative() or
  // restoreIncremental(), by name.
  const std::map<std::string, StateMetaInfo>& restoredStates() const { return restoredMeta_; }

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
  // The writes of a snapshot, in a file.
  class SnapshotWrites;

 public:
  // RocksDB's latest sequence number: it changes with every write (for
  // tests that check that nothing was written).
  uint64_t latestSequenceNumber() const;

 private:
  // What nativeSnapshotWith()'s writer runs once, on the I/O thread: the
  // writes written into `copy`, which is then flushed, closed and described.
  static IncrementalSnapshotHandle finishNative(CopyWithWrites& copy);
  // A native snapshot writer of `directory` that runs `finish` on its first
  // nativeSnapshot() call (rocksdb_native.cc).
  static std::unique_ptr<StateSnapshotWriter> lazyNativeWriter(
      std::string directory, std::function<IncrementalSnapshotHandle()> finish);
  std::unique_ptr<Impl> impl_;
};

// Shared by the RocksDB backends of one slot: one block cache and one write
// buffer manager sized from the slot's managed memory.
std::shared_ptr<RocksDbSharedResources> createRocksDbSharedResources(
    int64_t managedMemoryBytes, double writeBufferRatio = 0.5, double highPriorityPoolRatio = 0.1);

namespace internal {
// What the rocksdb factory sets in `params` for an operator subtask: the
// working directory (state.backend.rocksdb.localdir) and the memory budget
// (the slot's managed memory, shared through a slot resource unless
// state.backend.rocksdb.memory.managed is false). The tiered factory uses
// it for its RocksDB too.
void configureRocksDbParams(KeyedBackendParams& params, OperatorContext& context);
}  // namespace internal

}  // namespace sluice
