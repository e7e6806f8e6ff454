// The RocksDB pieces behind RocksDbKeyedStateBackend: the memory budget
// (RocksDbSharedResources), the options every database and column family
// gets, the list-append merge operator, the TTL compaction filter, and small
// key helpers. Private to src/state.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <rocksdb/cache.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/status.h>
#include <rocksdb/write_buffer_manager.h>

#include <sluice/core/clock.h>
#include <sluice/state/snapshot.h>

namespace sluice {

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

 private:
  int64_t managedMemoryBytes_;
  size_t writeBufferSize_;
  std::shared_ptr<rocksdb::Cache> cache_;
  std::shared_ptr<rocksdb::WriteBufferManager> writeBufferManager_;
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

// The options of every database the backend opens. `infoLogToDir` false
// discards RocksDB's LOG (for read-only opens of snapshot directories).
rocksdb::DBOptions makeDbOptions(const RocksDbSharedResources& resources, bool infoLogToDir);

// The options of one column family: the shared cache with partitioned bloom
// filters and a partitioned (two-level) index, cached, with the top levels
// and L0's blocks pinned; the list-append merge operator; a
// TTL compaction filter factory reading `ttl`.
rocksdb::ColumnFamilyOptions makeColumnFamilyOptions(const RocksDbSharedResources& resources,
                                                     std::shared_ptr<TtlFilterConfig> ttl);

}  // namespace rocksdbutil
}  // namespace sluice
