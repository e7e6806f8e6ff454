// The RocksDB pieces behind RocksDbKeyedStateBackend: the memory budget
// (RocksDbSharedResources), the options every database and column family
// gets, the list-append merge operator, the TTL compaction filter, small
// key helpers, and the working directories with their owner locks. Private
// to src/state.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <rocksdb/cache.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/status.h>
#include <rocksdb/write_buffer_manager.h>

#include <sluice/core/clock.h>
#include <sluice/state/snapshot.h>

namespace rocksdb {
class DB;
}  // namespace rocksdb

namespace sluice {

// The index and filter format of the SST files the databases sharing one
// block cache write next. Full (one index block and one bloom filter per
// file, Flink's default) while every database's index and filters would
// take at most a quarter of the cache: a point read then probes each
// file's filter directly. Partitioned (Flink's
// state.backend.rocksdb.memory.partitioned-index-filters) once they would
// take more: a full filter of a large file is megabytes, and one evicted
// from a cache that cannot hold them all is read whole again by the next
// Get, where a partition is 4 KiB. Back to full below an eighth, so that a
// size near the line does not flip the format at every flush. Files keep
// the format they were written with; RocksDB reads either. Each database
// reports its estimate after every flush and compaction (makeDbOptions'
// listener). Thread-safe.
class MetadataFormat {
 public:
  explicit MetadataFormat(size_t cacheCapacity) : cacheCapacity_(cacheCapacity) {}

  bool partitioned() const { return partitioned_.load(std::memory_order_relaxed); }
  // The estimated index and filter bytes of all files of the database
  // `db` (any identity; one per database), replacing its last report.
  void report(const void* db, int64_t bytes);
  // `db` is closed: its files no longer count.
  void forget(const void* db);

  // The estimate for `keys` entries in `sstBytes` of SST files: bloom
  // filters at 10 bits per entry, an index entry of about 32 bytes per
  // 4 KiB data block.
  static int64_t estimateBytes(int64_t keys, int64_t sstBytes) {
    return keys * 10 / 8 + sstBytes / 4096 * 32;
  }

 private:
  void decide();  // mu_ held

  const size_t cacheCapacity_;
  std::mutex mu_;
  std::vector<std::pair<const void*, int64_t>> reports_;
  std::atomic<bool> partitioned_{false};
};

// One memory budget for RocksDB: an LRU block cache and a write buffer
// manager that charges memtable memory to that cache, as Flink's
// RocksDBMemoryControllerUtils sizes them. The cache has as many shards as
// keep each at least 32 MiB (at most 64), so a shard holds what its share of
// reads needs rather than evicting it. Shared (via shared_ptr) by every
// database of a slot; thread-safe.
class RocksDbSharedResources {
 public:
  RocksDbSharedResources(int64_t managedMemoryBytes, double writeBufferRatio,
                         double highPriorityPoolRatio);

  const std::shared_ptr<rocksdb::Cache>& cache() const { return cache_; }
  const std::shared_ptr<rocksdb::WriteBufferManager>& writeBufferManager() const {
    return writeBufferManager_;
  }
  int64_t managedMemoryBytes() const { return managedMemoryBytes_; }
  // The memtable size of one column family: a fraction of the write buffer
  // manager's capacity, so flushes start well before the budget is reached.
  size_t writeBufferSize() const { return writeBufferSize_; }
  const std::shared_ptr<MetadataFormat>& metadataFormat() const { return metadataFormat_; }

 private:
  int64_t managedMemoryBytes_;
  size_t writeBufferSize_;
  std::shared_ptr<rocksdb::Cache> cache_;
  std::shared_ptr<rocksdb::WriteBufferManager> writeBufferManager_;
  std::shared_ptr<MetadataFormat> metadataFormat_;
};

namespace rocksdbutil {

// Throws SluiceException("RocksDB <operation> failed for <what>: <message>").
[[noreturn]] void fail(const rocksdb::Status& status, std::string_view operation,
                       std::string_view what);
// fail() unless `status` is OK.
inline void check(const rocksdb::Status& status, std::string_view operation,
                  std::string_view what) {
  if (!status.ok()) [[unlikely]]
    fail(status, operation, what);
}

inline rocksdb::Slice slice(std::string_view s) { return {s.data(), s.size()}; }
inline std::string_view view(const rocksdb::Slice& s) { return {s.data(), s.size()}; }

// The 2-byte big-endian key-group prefix.
std::string keyGroupPrefix(int32_t keyGroup);
// The key group a stored key starts with; throws on a key shorter than 2.
int32_t keyGroupOf(std::string_view key, std::string_view stateName);
// The smallest string greater than every string that starts with `prefix`;
// empty when there is none (prefix all 0xFF).
std::string prefixSuccessor(std::string_view prefix);

// Which TTL cleanup a column family's compaction filter does. The factory
// reads it whenever a compaction starts, so a state registered after its
// column family was created (restored) still gets the registered settings.
class TtlFilterConfig {
 public:
  TtlFilterConfig(StateMetaInfo meta, const Clock* clock) : meta_(std::move(meta)), clock_(clock) {}
  void setMeta(const StateMetaInfo& meta) {
    std::lock_guard lock(mu_);
    meta_ = meta;
  }
  StateMetaInfo meta() const {
    std::lock_guard lock(mu_);
    return meta_;
  }
  const Clock* clock() const { return clock_; }

 private:
  mutable std::mutex mu_;
  StateMetaInfo meta_;
  const Clock* clock_;
};

// The options of every database the backend opens. RocksDB's info log goes
// to Sluice's log at WARN and above, prefixed with `description` (what the
// database holds), not to a file in the database's directory. A listener
// reports the database's index and filter estimate to the resources'
// MetadataFormat after every flush and compaction.
rocksdb::DBOptions makeDbOptions(const RocksDbSharedResources& resources,
                                 const std::string& description);

// Reports `db`'s index and filter estimate to the MetadataFormat of the
// options it was opened with (makeDbOptions), as its listener does after
// every flush and compaction: a database opened on existing files counts
// before its first.
void reportMetadataSize(rocksdb::DB* db);

// Column family options that differ from the rocksdb backend's defaults
// (RocksDbKeyedStateBackend::Tuning says why the tiered backend sets them).
struct ColumnFamilyTuning {
  // A whole-key bloom filter per memtable.
  bool memtableBloomFilter = false;
  // Blocks written uncompressed rather than with Snappy.
  bool uncompressed = false;
  // Level-0 files that start a compaction into level 1; 0: RocksDB's (4).
  int level0CompactionTrigger = 0;
  // A memtable insert hint per key group (the keys' 2-byte prefix).
  bool memtableInsertHints = false;
};

// The options of one column family: the shared cache with bloom filters and
// an index, full or partitioned as the resources' MetadataFormat says when
// a file is written, cached, with partitions' top levels and L0's blocks
// pinned; the list-append merge operator; a
// TTL compaction filter factory reading `ttl`; and `tuning`.
rocksdb::ColumnFamilyOptions makeColumnFamilyOptions(const RocksDbSharedResources& resources,
                                                     std::shared_ptr<TtlFilterConfig> ttl,
                                                     const ColumnFamilyTuning& tuning = {});

// ---------------------------------------------------------------------------
// Working directories
//
// Each backend works in <localDir>/sluice-rocksdb-<operator>-<subtask>-<16
// hex digits>, which holds the owner lock LOCK.sluice: a file naming the
// owner's pid and process start time (/proc/self/stat field 22), for people,
// and flock()ed exclusively by the owner for as long as the directory is in
// use. The kernel releases the lock when the owner dies, however it dies, so
// a lock that can be taken means the owner is gone (pid reuse does not
// matter). The lock file is written under a temporary name and renamed into
// place once locked, so no one ever sees an unlocked LOCK.sluice of a live
// owner.

inline constexpr std::string_view kWorkingDirectoryPrefix = "sluice-rocksdb-";
inline constexpr std::string_view kOwnerLockFile = "LOCK.sluice";

// An exclusive flock() on an open file; released (the fd closed) on
// destruction. Move-only.
class OwnerLock {
 public:
  OwnerLock() = default;
  explicit OwnerLock(int fd) : fd_(fd) {}
  ~OwnerLock();
  OwnerLock(OwnerLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  OwnerLock& operator=(OwnerLock&& other) noexcept;
  OwnerLock(const OwnerLock&) = delete;
  OwnerLock& operator=(const OwnerLock&) = delete;

 private:
  int fd_ = -1;
};

struct WorkingDirectory {
  std::string path;  // absolute
  OwnerLock lock;
};

// Creates `localDir` if missing and a fresh working directory in it named
// `namePrefix` + 16 random hex digits, holding its owner lock. Throws
// SluiceException naming the path and the reason.
WorkingDirectory createWorkingDirectory(const std::filesystem::path& localDir,
                                        const std::string& namePrefix);

// How long a working directory without an owner lock (made by a version
// before the locks) must be unchanged before it is removed: the newest
// modification time of it, its entries and theirs.
inline constexpr std::chrono::hours kUnlockedWorkingDirectoryMinAge{1};

// Removes, recursively, every directory <localDir>/sluice-rocksdb-* that no
// live process owns: one whose LOCK.sluice this call can lock, or one
// without LOCK.sluice whose name has the working-directory form, in which no
// RocksDB database is open (no process holds a LOCK file of a subdirectory)
// and nothing changed for kUnlockedWorkingDirectoryMinAge. Symbolic links
// are never followed. Logs each directory removed (info) and every failure
// (warning); returns the paths removed.
std::vector<std::string> removeAbandonedWorkingDirectories(const std::filesystem::path& localDir);

// removeAbandonedWorkingDirectories(localDir), once per process for each
// localDir (later calls return at once). Thread-safe.
void removeAbandonedWorkingDirectoriesOnce(const std::filesystem::path& localDir);

}  // namespace rocksdbutil
}  // namespace sluice
