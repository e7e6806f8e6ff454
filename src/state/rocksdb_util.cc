#include "state/rocksdb_util.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <rocksdb/compaction_filter.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/listener.h>
#include <rocksdb/merge_operator.h>
#include <rocksdb/slice_transform.h>
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
  metadataFormat_ = std::make_shared<MetadataFormat>(cacheOptions.capacity);
}

void MetadataFormat::report(const void* db, int64_t bytes) {
  std::lock_guard lock(mu_);
  auto it =
      std::find_if(reports_.begin(), reports_.end(), [db](const auto& r) { return r.first == db; });
  if (it == reports_.end()) {
    reports_.emplace_back(db, bytes);
  } else {
    it->second = bytes;
  }
  decide();
}

void MetadataFormat::forget(const void* db) {
  std::lock_guard lock(mu_);
  std::erase_if(reports_, [db](const auto& r) { return r.first == db; });
  decide();
}

void MetadataFormat::decide() {
  int64_t total = 0;
  for (const auto& r : reports_) total += r.second;
  const auto capacity = static_cast<int64_t>(cacheCapacity_);
  if (total > capacity / 4) {
    partitioned_.store(true, std::memory_order_relaxed);
  } else if (total < capacity / 8) {
    partitioned_.store(false, std::memory_order_relaxed);
  }
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

// RocksDB's info log, forwarded to Sluice's log at WARN and above with the
// database's description, instead of a LOG file in the directory. A file
// would be written to the disk the state is on: when that disk is full,
// Debian's librocksdb (built with assertions) aborts the process on the
// info log's next write after a failed one, where the failed state write
// itself fails the task with its OS error. Read-only opens of snapshot
// directories must not write into them either.
class ForwardingLogger final : public rocksdb::Logger {
 public:
  explicit ForwardingLogger(std::string description)
      : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL), description_(std::move(description)) {}

  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    // HEADER_LEVEL is the options dump at open, not a warning.
    if (level < rocksdb::InfoLogLevel::WARN_LEVEL || level > rocksdb::InfoLogLevel::FATAL_LEVEL) {
      return;
    }
    char text[1024];  // longer messages are cut
    const int n = std::vsnprintf(text, sizeof text, format, ap);
    if (n < 0) return;
    std::string_view message(text, std::min(static_cast<size_t>(n), sizeof text - 1));
    while (!message.empty() && message.back() == '\n') message.remove_suffix(1);
    // RocksDB's checkpoint (every native snapshot) disables file deletions
    // in two nested places and warns about the nesting; it is harmless.
    if (message.find("File Deletions Disabled, but already disabled") != std::string_view::npos ||
        message.find("File Deletions Enable, but not really enabled") != std::string_view::npos) {
      return;
    }
    // Called on RocksDB's threads, perhaps under its mutex: nothing may
    // escape (formatting can throw bad_alloc).
    try {
      log::logAt(
          level == rocksdb::InfoLogLevel::WARN_LEVEL ? log::Level::kWarn : log::Level::kError,
          "RocksDB of {}: {}", description_, message);
    } catch (...) {
    }
  }

 private:
  std::string description_;
};

}  // namespace

namespace {

// Reports a database's index and filter estimate (MetadataFormat) after
// every flush and compaction, from RocksDB's background thread, which holds
// no database lock while listeners run, and once after the database is
// opened (reportMetadataSize). One per database.
class MetadataSizeListener final : public rocksdb::EventListener {
 public:
  explicit MetadataSizeListener(std::shared_ptr<MetadataFormat> format)
      : format_(std::move(format)) {}
  ~MetadataSizeListener() override { format_->forget(this); }

  void OnFlushCompleted(rocksdb::DB* db, const rocksdb::FlushJobInfo&) override { update(db); }
  void OnCompactionCompleted(rocksdb::DB* db, const rocksdb::CompactionJobInfo&) override {
    update(db);
  }

  // Never throws: RocksDB's listeners must not. One report at a time, so
  // that a flush's and a compaction's finishing together cannot leave the
  // older reading in place. RocksDB calls listeners without its own lock,
  // and nothing takes this lock under it.
  void update(rocksdb::DB* db) noexcept {
    try {
      std::lock_guard lock(mu_);
      uint64_t keys = 0, sstBytes = 0;
      if (db->GetAggregatedIntProperty(rocksdb::DB::Properties::kEstimateNumKeys, &keys) &&
          db->GetAggregatedIntProperty(rocksdb::DB::Properties::kLiveSstFilesSize, &sstBytes)) {
        format_->report(this, MetadataFormat::estimateBytes(static_cast<int64_t>(keys),
                                                            static_cast<int64_t>(sstBytes)));
      }
    } catch (const std::exception& e) {
      // The format stays as it was; the next flush or compaction reports again.
      log::warn("RocksDB index and filter estimate not updated: {}", e.what());
    }
  }

 private:
  std::mutex mu_;
  std::shared_ptr<MetadataFormat> format_;
};

// Block-based tables whose index and filter format is chosen per file: the
// files a flush or compaction writes get `full`'s or `partitioned`'s
// options as `format` says at that moment. Reading needs no choice: a
// block-based table reader takes the index type from the file's properties
// and finds a full or a partitioned filter by its meta block's name, so
// `partitioned` (also the options RocksDB sees through Inner()) reads both.
class SwitchingTableFactory final : public rocksdb::TableFactory {
 public:
  SwitchingTableFactory(std::shared_ptr<rocksdb::TableFactory> full,
                        std::shared_ptr<rocksdb::TableFactory> partitioned,
                        std::shared_ptr<const MetadataFormat> format)
      : full_(std::move(full)), partitioned_(std::move(partitioned)), format_(std::move(format)) {}

  const char* Name() const override { return "SluiceSwitchingBlockBasedTable"; }
  const rocksdb::Customizable* Inner() const override { return partitioned_.get(); }
  // Block-based, for what RocksDB decides by asking: the 30-day ttl and
  // periodic compactions it gives block-based tables (which bring the TTL
  // compaction filter to files no other compaction touches) and the check
  // of a compaction's output record count. RocksDB reaches the options
  // through Inner() (GetOptions<BlockBasedTableOptions>); it casts a
  // factory to BlockBasedTableFactory only where Name() is "BlockBasedTable",
  // which this one's is not.
  bool IsInstanceOf(const std::string& name) const override {
    return name == rocksdb::TableFactory::kBlockBasedTableName() ||
           rocksdb::TableFactory::IsInstanceOf(name);
  }

  rocksdb::Status NewTableReader(const rocksdb::ReadOptions& ro,
                                 const rocksdb::TableReaderOptions& options,
                                 std::unique_ptr<rocksdb::RandomAccessFileReader>&& file,
                                 uint64_t fileSize, std::unique_ptr<rocksdb::TableReader>* reader,
                                 bool prefetchIndexAndFilterInCache) const override {
    return partitioned_->NewTableReader(ro, options, std::move(file), fileSize, reader,
                                        prefetchIndexAndFilterInCache);
  }
  rocksdb::TableBuilder* NewTableBuilder(const rocksdb::TableBuilderOptions& options,
                                         rocksdb::WritableFileWriter* file) const override {
    return (format_->partitioned() ? partitioned_ : full_)->NewTableBuilder(options, file);
  }
  bool IsDeleteRangeSupported() const override { return partitioned_->IsDeleteRangeSupported(); }
  rocksdb::Status ValidateOptions(const rocksdb::DBOptions& db,
                                  const rocksdb::ColumnFamilyOptions& cf) const override {
    rocksdb::Status s = full_->ValidateOptions(db, cf);
    return s.ok() ? partitioned_->ValidateOptions(db, cf) : s;
  }
  std::string GetPrintableOptions() const override {
    return "switching between full and partitioned index and filters; partitioned:\n" +
           partitioned_->GetPrintableOptions();
  }

 private:
  std::shared_ptr<rocksdb::TableFactory> full_;
  std::shared_ptr<rocksdb::TableFactory> partitioned_;
  std::shared_ptr<const MetadataFormat> format_;
};

}  // namespace

void reportMetadataSize(rocksdb::DB* db) {
  for (const auto& listener : db->GetDBOptions().listeners) {
    if (auto* l = dynamic_cast<MetadataSizeListener*>(listener.get())) l->update(db);
  }
}

rocksdb::DBOptions makeDbOptions(const RocksDbSharedResources& resources,
                                 const std::string& description) {
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  // RocksDB's own checks stay on: every block read is checked against its
  // checksum (ReadOptions::verify_checksums, the default) and the files
  // are checked on open. Restored SST files were already checked whole
  // against the checksums in _metadata (checkpoint_integrity.h).
  options.paranoid_checks = true;
  // Table readers stay open; their index and filter blocks are in the cache.
  options.max_open_files = -1;
  options.write_buffer_manager = resources.writeBufferManager();
  options.avoid_flush_during_shutdown = true;
  options.stats_dump_period_sec = 0;
  options.stats_persist_period_sec = 0;
  options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  options.info_log = std::make_shared<ForwardingLogger>(description);
  options.listeners.push_back(std::make_shared<MetadataSizeListener>(resources.metadataFormat()));
  return options;
}

rocksdb::ColumnFamilyOptions makeColumnFamilyOptions(const RocksDbSharedResources& resources,
                                                     std::shared_ptr<TtlFilterConfig> ttl,
                                                     const ColumnFamilyTuning& tuning) {
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = resources.cache();
  table.cache_index_and_filter_blocks = true;
  table.cache_index_and_filter_blocks_with_high_priority = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10.0));
  table.optimize_filters_for_memory = true;
  // Partitioned index and filters (Flink's
  // state.backend.rocksdb.memory.partitioned-index-filters) for the files
  // written while the databases' index and filters would not fit a quarter
  // of the cache (MetadataFormat): a point read loads one small index and
  // filter partition into the cache instead of a file's whole index and full
  // filter (several MiB for a large file). The top levels stay pinned.
  rocksdb::BlockBasedTableOptions partitioned = table;
  partitioned.index_type = rocksdb::BlockBasedTableOptions::kTwoLevelIndexSearch;
  partitioned.partition_filters = true;
  partitioned.pin_top_level_index_and_filter = true;

  rocksdb::ColumnFamilyOptions options;
  options.table_factory = std::make_shared<SwitchingTableFactory>(
      std::shared_ptr<rocksdb::TableFactory>(rocksdb::NewBlockBasedTableFactory(table)),
      std::shared_ptr<rocksdb::TableFactory>(rocksdb::NewBlockBasedTableFactory(partitioned)),
      resources.metadataFormat());
  options.write_buffer_size = resources.writeBufferSize();
  options.max_write_buffer_number = 2;
  options.merge_operator = std::make_shared<ListAppendOperator>();
  options.compaction_filter_factory = std::make_shared<TtlCompactionFilterFactory>(std::move(ttl));
  if (tuning.uncompressed) options.compression = rocksdb::kNoCompression;
  if (tuning.level0CompactionTrigger > 0) {
    options.level0_file_num_compaction_trigger = tuning.level0CompactionTrigger;
  }
  if (tuning.memtableInsertHints) {
    options.memtable_insert_with_hint_prefix_extractor.reset(
        rocksdb::NewFixedPrefixTransform(keyGroupPrefix(0).size()));
  }
  if (tuning.memtableBloomFilter) {
    // 5% of the memtable's size for the filter (RocksDB caps the ratio at
    // 25%), over whole keys: no prefix extractor is set.
    options.memtable_prefix_bloom_size_ratio = 0.05;
    options.memtable_whole_key_filtering = true;
  }
  return options;
}

// ---------------------------------------------------------------------------
// Working directories

namespace {

namespace fs = std::filesystem;

std::string randomHex16() {
  std::random_device rd;
  const uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 0; i < 16; ++i) out[i] = kDigits[(v >> (60 - 4 * i)) & 0xF];
  return out;
}

// This process's start time in clock ticks after boot (/proc/self/stat
// field 22), or "unknown".
std::string processStartTime() {
  std::ifstream in("/proc/self/stat");
  const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return "unknown";
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {  // field 3 (the state) follows the name
    if (!(fields >> field)) return "unknown";
  }
  return field;
}

bool isDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool isLowerHex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

// "sluice-rocksdb-<operator>-<subtask>-<16 hex digits>", the name every
// version gave its working directories.
bool hasWorkingDirectoryName(std::string_view name) {
  if (!name.starts_with(kWorkingDirectoryPrefix)) return false;
  name.remove_prefix(kWorkingDirectoryPrefix.size());
  if (name.size() < 1 + 1 + 1 + 1 + 16 || name[name.size() - 17] != '-' ||
      !isLowerHex(name.substr(name.size() - 16))) {
    return false;
  }
  name.remove_suffix(17);  // "<operator>-<subtask>"
  const size_t dash = name.rfind('-');
  return dash != std::string_view::npos && dash > 0 && isDigits(name.substr(dash + 1));
}

// The newest modification time of `path` and, for a directory, of what is
// in it, `depth` levels down; symbolic links are not followed.
int64_t newestChange(const fs::path& path, int depth) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return 0;
  int64_t newest = static_cast<int64_t>(st.st_mtime);
  if (depth > 0 && S_ISDIR(st.st_mode)) {
    std::error_code ec;
    for (fs::directory_iterator it(path, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      newest = std::max(newest, newestChange(it->path(), depth - 1));
    }
  }
  return newest;
}

// Whether another process holds the POSIX lock RocksDB takes on the LOCK
// file of an open database, in a subdirectory of `dir`. (Called only for
// directories this process cannot have opened a database in: closing the
// probe would drop this process's own lock on the file.)
bool databaseOpenIn(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::error_code typeError;
    if (!fs::is_directory(it->symlink_status(typeError))) continue;
    const std::string lock = (it->path() / "LOCK").string();
    const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    struct flock probe {};
    probe.l_type = F_WRLCK;
    probe.l_whence = SEEK_SET;
    const bool held = ::fcntl(fd, F_GETLK, &probe) == 0 && probe.l_type != F_UNLCK;
    ::close(fd);
    if (held) return true;
  }
  return false;
}

// The owner lock file's text on one line, for the log.
std::string ownerText(int fd) {
  char buf[256];
  const ssize_t n = ::pread(fd, buf, sizeof(buf), 0);
  if (n <= 0) return "owner unknown";
  std::string text(buf, static_cast<size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

bool removeDirectory(const fs::path& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) {
    log::warn("RocksDB: cannot remove the abandoned working directory '{}': {}", dir.string(),
              ec.message());
    return false;
  }
  return true;
}

}  // namespace

OwnerLock::~OwnerLock() {
  if (fd_ >= 0) ::close(fd_);
}

OwnerLock& OwnerLock::operator=(OwnerLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

WorkingDirectory createWorkingDirectory(const fs::path& localDir, const std::string& namePrefix) {
  std::error_code ec;
  fs::create_directories(localDir, ec);
  if (ec) {
    throw SluiceException("cannot create the RocksDB local directory '" + localDir.string() +
                          "': " + ec.message());
  }
  fs::path dir;
  for (int attempt = 0;; ++attempt) {
    const fs::path candidate = localDir / (namePrefix + randomHex16());
    if (fs::create_directory(candidate, ec)) {
      dir = fs::absolute(candidate, ec);
      if (!ec) break;
    }
    if (ec || attempt >= 16) {
      throw SluiceException("cannot create the RocksDB working directory '" + candidate.string() +
                            "': " + ec.message());
    }
  }
  // Locked under a temporary name, then renamed: a sweeper finds no lock
  // file (and leaves the fresh directory alone) or a held one.
  const fs::path temporary = dir / (std::string(kOwnerLockFile) + ".tmp");
  auto fail = [&](const std::string& what, int err) {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
    throw SluiceException("cannot " + what + " the owner lock '" + temporary.string() +
                          "' of a RocksDB working directory: " + std::strerror(err));
  };
  const int fd = ::open(temporary.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail("create", errno);
  OwnerLock lock(fd);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) fail("lock", errno);
  const std::string text =
      "pid " + std::to_string(::getpid()) + "\nstart-time " + processStartTime() + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write", errno);
    }
    done += static_cast<size_t>(n);
  }
  if (::rename(temporary.c_str(), (dir / kOwnerLockFile).c_str()) != 0) fail("rename", errno);
  return WorkingDirectory{dir.string(), std::move(lock)};
}

std::vector<std::string> removeAbandonedWorkingDirectories(const fs::path& localDir) {
  std::vector<std::string> removed;
  std::vector<fs::path> candidates;
  std::error_code ec;
  for (fs::directory_iterator it(localDir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::error_code typeError;
    if (!it->path().filename().string().starts_with(kWorkingDirectoryPrefix)) continue;
    if (!fs::is_directory(it->symlink_status(typeError))) continue;
    candidates.push_back(it->path());
  }
  if (ec && ec != std::errc::no_such_file_or_directory) {
    log::warn("RocksDB: cannot look through '{}' for abandoned working directories: {}",
              localDir.string(), ec.message());
  }
  const int64_t unchangedSince =
      static_cast<int64_t>(std::time(nullptr)) -
      std::chrono::duration_cast<std::chrono::seconds>(kUnlockedWorkingDirectoryMinAge).count();
  for (const fs::path& dir : candidates) {
    const fs::path lockPath = dir / kOwnerLockFile;
    const int fd = ::open(lockPath.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
      if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        ::close(fd);
        if (err != EWOULDBLOCK) {
          log::warn("RocksDB: cannot test the owner lock '{}': {}", lockPath.string(),
                    std::strerror(err));
        }
        continue;  // held: the owner lives
      }
      const std::string owner = ownerText(fd);
      const bool ok = removeDirectory(dir);  // while holding the lock
      ::close(fd);
      if (ok) {
        log::info("RocksDB: removed the working directory '{}' of a process that has ended ({})",
                  dir.string(), owner);
        removed.push_back(dir.string());
      }
      continue;
    }
    if (errno != ENOENT) {
      log::warn("RocksDB: cannot open the owner lock '{}': {}", lockPath.string(),
                std::strerror(errno));
      continue;
    }
    // No owner lock: a directory of a version before the locks, or one being
    // created right now (fresh, so left alone by the age test, which comes
    // first; see databaseOpenIn()).
    if (!hasWorkingDirectoryName(dir.filename().string())) continue;
    if (newestChange(dir, 2) > unchangedSince) continue;
    if (databaseOpenIn(dir)) continue;
    std::error_code existsError;
    if (fs::exists(fs::symlink_status(lockPath, existsError))) continue;  // locked meanwhile
    if (removeDirectory(dir)) {
      log::info(
          "RocksDB: removed the working directory '{}', which has no owner lock (an older "
          "version's), holds no open database and was unchanged for over {} h",
          dir.string(), kUnlockedWorkingDirectoryMinAge.count());
      removed.push_back(dir.string());
    }
  }
  return removed;
}

void removeAbandonedWorkingDirectoriesOnce(const fs::path& localDir) {
  static std::mutex mu;
  static std::set<std::string> done;
  std::error_code ec;
  fs::path key = fs::absolute(localDir, ec);
  if (ec) key = localDir;
  {
    std::lock_guard lock(mu);
    if (!done.insert(key.lexically_normal().string()).second) return;
  }
  removeAbandonedWorkingDirectories(localDir);
}

}  // namespace rocksdbutil
}  // namespace sluice
