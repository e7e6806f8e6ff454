#include "state/rocksdb_util.h"

#include <algorithm>
#include <cstdarg>
#include <exception>
#include <string>
#include <utility>

#include <rocksdb/compaction_filter.h>
#include <rocksdb/env.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/merge_operator.h>
#include <rocksdb/table.h>

#include <sluice/state/keyed_state_backend.h>

#include "core/logging.h"

namespace sluice {

namespace {

// Flink's split of one budget (RocksDBMemoryControllerUtils): the write
// buffer manager may overshoot its limit by up to half, and its reservations
// live in the cache, so the cache gets (3 - r) / 3 of the budget and the
// write buffer manager 2r / 3; together they stay within the budget.
size_t cacheCapacity(int64_t budget, double writeBufferRatio) {
  return static_cast<size_t>((3.0 - writeBufferRatio) * static_cast<double>(budget) / 3.0);
}
size_t writeBufferManagerCapacity(int64_t budget, double writeBufferRatio) {
  return static_cast<size_t>(2.0 * static_cast<double>(budget) * writeBufferRatio / 3.0);
}

constexpr size_t kMinWriteBufferSize = 256 << 10;
constexpr size_t kMaxWriteBufferSize = 64 << 20;

// Cache shards of at least this size (at most 64 shards): a shard must hold
// the index and filter partitions and data blocks of its hash range, and one
// task thread rarely contends for a shard's mutex.
constexpr size_t kMinCacheShardSize = 32 << 20;

int cacheShardBits(size_t capacity) {
  int bits = 0;
  while (bits < 6 && (capacity >> (bits + 1)) >= kMinCacheShardSize) ++bits;
  return bits;
}

}  // namespace

RocksDbSharedResources::RocksDbSharedResources(int64_t managedMemoryBytes, double writeBufferRatio,
                                               double highPriorityPoolRatio)
    : managedMemoryBytes_(managedMemoryBytes) {
  if (managedMemoryBytes <= 0) {
    throw SluiceException("RocksDB managed memory must be positive, got " +
                          std::to_string(managedMemoryBytes) + " bytes");
  }
  if (!(writeBufferRatio > 0.0 && writeBufferRatio < 1.0)) {
    throw SluiceException(
        "state.backend.rocksdb.memory.write-buffer-ratio must be in (0, 1), got " +
        std::to_string(writeBufferRatio));
  }
  if (!(highPriorityPoolRatio >= 0.0 && highPriorityPoolRatio < 1.0)) {
    throw SluiceException(
        "state.backend.rocksdb.memory.high-prio-pool-ratio must be in [0, 1), got " +
        std::to_string(highPriorityPoolRatio));
  }
  rocksdb::LRUCacheOptions cacheOptions;
  cacheOptions.capacity = cacheCapacity(managedMemoryBytes, writeBufferRatio);
  cacheOptions.num_shard_bits = cacheShardBits(cacheOptions.capacity);
  cacheOptions.strict_capacity_limit = false;
  cacheOptions.high_pri_pool_ratio = highPriorityPoolRatio;
  cache_ = rocksdb::NewLRUCache(cacheOptions);
  const size_t wbm = writeBufferManagerCapacity(managedMemoryBytes, writeBufferRatio);
  writeBufferManager_ = std::make_shared<rocksdb::WriteBufferManager>(wbm, cache_);
  writeBufferSize_ = std::clamp(wbm / 4, kMinWriteBufferSize, kMaxWriteBufferSize);
}

std::shared_ptr<RocksDbSharedResources> createRocksDbSharedResources(int64_t managedMemoryBytes,
                                                                     double writeBufferRatio,
                                                                     double highPriorityPoolRatio) {
  return std::make_shared<RocksDbSharedResources>(managedMemoryBytes, writeBufferRatio,
                                                  highPriorityPoolRatio);
}

namespace rocksdbutil {

void fail(const rocksdb::Status& status, std::string_view operation, std::string_view what) {
  throw SluiceException("RocksDB " + std::string(operation) + " failed for " + std::string(what) +
                        ": " + status.ToString());
}

std::string keyGroupPrefix(int32_t keyGroup) {
  std::string out(2, '\0');
  out[0] = static_cast<char>((keyGroup >> 8) & 0xFF);
  out[1] = static_cast<char>(keyGroup & 0xFF);
  return out;
}

int32_t keyGroupOf(std::string_view key, std::string_view stateName) {
  if (key.size() < 2) [[unlikely]] {
    throw SerializationError("state '" + std::string(stateName) + "': stored key of " +
                             std::to_string(key.size()) +
                             " bytes is shorter than its key-group prefix");
  }
  return (static_cast<int32_t>(static_cast<unsigned char>(key[0])) << 8) |
         static_cast<int32_t>(static_cast<unsigned char>(key[1]));
}

std::string prefixSuccessor(std::string_view prefix) {
  std::string out(prefix);
  while (!out.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(out.back());
    if (last != 0xFF) {
      ++last;
      return out;
    }
    out.pop_back();
  }
  return out;
}

namespace {

// Appends list elements: operands and values are concatenations of
// [u32 length | element], so appending is concatenation, and associative.
class ListAppendOperator final : public rocksdb::AssociativeMergeOperator {
 public:
  bool Merge(const rocksdb::Slice& /*key*/, const rocksdb::Slice* existing,
             const rocksdb::Slice& value, std::string* newValue,
             rocksdb::Logger* /*logger*/) const override {
    newValue->clear();
    if (existing != nullptr) {
      newValue->reserve(existing->size() + value.size());
      newValue->assign(existing->data(), existing->size());
    }
    newValue->append(value.data(), value.size());
    return true;
  }
  const char* Name() const override { return "SluiceListAppend"; }
};

// Drops expired TTL values; rewrites lists to their unexpired elements.
// Merge operands (list appends) are filtered the same way: an operand is a
// run of list elements too, and RocksDB does not pass the result of merging
// them through the filter. RocksDB gives each compaction its own filter, on
// one thread.
class TtlCompactionFilter final : public rocksdb::CompactionFilter {
 public:
  TtlCompactionFilter(StateMetaInfo meta, const Clock* clock)
      : meta_(std::move(meta)),
        clock_(clock),
        queryEvery_(std::max<int64_t>(1, meta_.ttlQueryTimeAfterNumEntries)) {}

  Decision FilterV2(int /*level*/, const rocksdb::Slice& /*key*/, ValueType type,
                    const rocksdb::Slice& value, std::string* newValue,
                    std::string* /*skipUntil*/) const override {
    if (type != ValueType::kValue && type != ValueType::kMergeOperand) return Decision::kKeep;
    if (untilQuery_ == 0) {
      now_ = clock_->currentTimeMillis();
      untilQuery_ = queryEvery_;
    }
    --untilQuery_;
    // Exceptions must not reach RocksDB: an undecodable value is kept (and
    // fails loudly when the state reads it).
    try {
      newValue->clear();
      bool changed = false;
      if (!ttl::keepEntry(meta_, view(value), now_, *newValue, changed)) return Decision::kRemove;
      return changed ? Decision::kChangeValue : Decision::kKeep;
    } catch (const std::exception& e) {
      if (!warned_) {
        warned_ = true;
        log::warn("TTL compaction filter of state '{}' keeps an entry it cannot decode: {}",
                  meta_.name, e.what());
      }
      return Decision::kKeep;
    }
  }

  const char* Name() const override { return "SluiceTtlCompactionFilter"; }

 private:
  StateMetaInfo meta_;
  const Clock* clock_;
  int64_t queryEvery_;
  mutable int64_t untilQuery_ = 0;
  mutable int64_t now_ = 0;
  mutable bool warned_ = false;
};

class TtlCompactionFilterFactory final : public rocksdb::CompactionFilterFactory {
 public:
  explicit TtlCompactionFilterFactory(std::shared_ptr<TtlFilterConfig> config)
      : config_(std::move(config)) {}

  std::unique_ptr<rocksdb::CompactionFilter> CreateCompactionFilter(
      const rocksdb::CompactionFilter::Context& /*context*/) override {
    StateMetaInfo meta = config_->meta();
    // No filter at all for states without TTL compaction cleanup.
    if (!meta.ttlCleanupInCompaction || meta.ttlMillis <= 0) return nullptr;
    return std::make_unique<TtlCompactionFilter>(std::move(meta), config_->clock());
  }

  const char* Name() const override { return "SluiceTtlCompactionFilterFactory"; }

 private:
  std::shared_ptr<TtlFilterConfig> config_;
};

// Discards RocksDB's info log (read-only opens must not write into the
// directories they read).
class DiscardLogger final : public rocksdb::Logger {
 public:
  DiscardLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::HEADER_LEVEL) {}
  void Logv(const char* /*format*/, va_list /*ap*/) override {}
  void Logv(const rocksdb::InfoLogLevel /*level*/, const char* /*format*/,
            va_list /*ap*/) override {}
};

}  // namespace

rocksdb::DBOptions makeDbOptions(const RocksDbSharedResources& resources, bool infoLogToDir) {
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  // Table readers stay open; their index and filter blocks are in the cache.
  options.max_open_files = -1;
  options.write_buffer_manager = resources.writeBufferManager();
  options.avoid_flush_during_shutdown = true;
  options.stats_dump_period_sec = 0;
  options.stats_persist_period_sec = 0;
  options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  options.keep_log_file_num = 2;
  options.max_log_file_size = 1 << 20;
  if (!infoLogToDir) options.info_log = std::make_shared<DiscardLogger>();
  return options;
}

rocksdb::ColumnFamilyOptions makeColumnFamilyOptions(const RocksDbSharedResources& resources,
                                                     std::shared_ptr<TtlFilterConfig> ttl) {
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = resources.cache();
  table.cache_index_and_filter_blocks = true;
  table.cache_index_and_filter_blocks_with_high_priority = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10.0));
  table.optimize_filters_for_memory = true;
  // Partitioned index and filters (Flink's
  // state.backend.rocksdb.memory.partitioned-index-filters): a point read
  // loads one small index and filter partition into the cache instead of a
  // file's whole index and full filter (several MiB for a large file, more
  // than an LRU shard may hold, so read from the file on every Get). The top
  // levels stay pinned in the cache.
  table.index_type = rocksdb::BlockBasedTableOptions::kTwoLevelIndexSearch;
  table.partition_filters = true;
  table.pin_top_level_index_and_filter = true;

  rocksdb::ColumnFamilyOptions options;
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  options.write_buffer_size = resources.writeBufferSize();
  options.max_write_buffer_number = 2;
  options.merge_operator = std::make_shared<ListAppendOperator>();
  options.compaction_filter_factory = std::make_shared<TtlCompactionFilterFactory>(std::move(ttl));
  return options;
}

}  // namespace rocksdbutil
}  // namespace sluice
