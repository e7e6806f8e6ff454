#include "state/rocksdb_keyed_backend.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/perf_level.h>
#include <rocksdb/snapshot.h>
#include <rocksdb/sst_file_reader.h>
#include <rocksdb/table.h>
#include <rocksdb/table_properties.h>
#include <rocksdb/unique_id.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>

#include "core/logging.h"
#include "state/rocksdb_util.h"

namespace sluice {

namespace fs = std::filesystem;
using rocksdbutil::check;
using rocksdbutil::keyGroupOf;
using rocksdbutil::keyGroupPrefix;
using rocksdbutil::slice;
using rocksdbutil::view;

namespace {

// Restores and prefix removals write in batches of about this many bytes.
constexpr size_t kWriteBatchBytes = 4 << 20;

// Bounds of every stored key: key groups are below 2^15.
const std::string kBeginOfKeys;
const std::string kEndOfKeys("\xff\xff", 2);

constexpr char kMetaMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'I', 'S'};
constexpr uint32_t kMetaVersion = 1;

// A directory removed when the last of its owners lets go; then its owner
// lock (a working directory's) is released.
class OwnedDirectory {
 public:
  explicit OwnedDirectory(std::string path, rocksdbutil::OwnerLock lock = {})
      : path_(std::move(path)), lock_(std::move(lock)) {}
  ~OwnedDirectory() {
    std::error_code ec;
    fs::remove_all(path_, ec);
    if (ec) log::warn("cannot remove RocksDB directory '{}': {}", path_, ec.message());
  }
  OwnedDirectory(const OwnedDirectory&) = delete;
  OwnedDirectory& operator=(const OwnedDirectory&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  rocksdbutil::OwnerLock lock_;
};

std::string sanitizeForPath(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 48)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    out.push_back(ok ? c : '_');
  }
  return out.empty() ? "operator" : out;
}

std::string fsError(const std::string& what, const fs::path& path, const std::error_code& ec) {
  return what + " '" + path.string() + "': " + ec.message();
}

bool covers(const KeyGroupRange& outer, const KeyGroupRange& inner) {
  return inner.numberOfKeyGroups() == 0 ||
         (outer.startKeyGroup <= inner.startKeyGroup && inner.endKeyGroup <= outer.endKeyGroup);
}

KeyGroupRange intersect(const KeyGroupRange& a, const KeyGroupRange& b) {
  return {std::max(a.startKeyGroup, b.startKeyGroup), std::min(a.endKeyGroup, b.endKeyGroup)};
}

// RocksDB's unique id of an SST file, read from its properties block.
std::string sstUniqueId(const std::string& path) {
  rocksdb::Options options;
  rocksdb::BlockBasedTableOptions table;
  table.no_block_cache = true;
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  rocksdb::SstFileReader reader(options);
  check(reader.Open(path), "SstFileReader::Open", "file '" + path + "'");
  const std::shared_ptr<const rocksdb::TableProperties> props = reader.GetTableProperties();
  if (props == nullptr) throw SluiceException("RocksDB SST file '" + path + "' has no properties");
  std::string id;
  check(rocksdb::GetUniqueIdFromTableProperties(*props, &id), "GetUniqueIdFromTableProperties",
        "file '" + path + "'");
  return rocksdb::UniqueIdToHumanString(id);
}

}  // namespace

// ---------------------------------------------------------------------------
// Shared pieces

namespace {

// An open database and its column family handles. Shared by the backend,
// snapshots being written and prefix iterators; when the last one lets go it
// closes the database, then removes its directory (and, through `workDir`,
// the working directory once nothing else uses it).
struct Database {
  std::shared_ptr<RocksDbSharedResources> resources;
  std::shared_ptr<OwnedDirectory> workDir;
  std::unique_ptr<OwnedDirectory> dir;
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;

  Database() = default;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database() {
    if (db == nullptr) return;
    for (rocksdb::ColumnFamilyHandle* h : handles) {
      const rocksdb::Status s = db->DestroyColumnFamilyHandle(h);
      if (!s.ok()) log::warn("RocksDB DestroyColumnFamilyHandle failed: {}", s.ToString());
    }
    const rocksdb::Status s = db->Close();
    if (!s.ok()) {
      log::warn("RocksDB Close of '{}' failed: {}", dir ? dir->path() : "?", s.ToString());
    }
    db.reset();
  }
};

}  // namespace

struct RocksDbKeyedStateBackend::ColumnFamily {
  std::string name;
  rocksdb::ColumnFamilyHandle* handle = nullptr;  // owned by the Database
  std::shared_ptr<rocksdbutil::TtlFilterConfig> ttl;
  // Whether a state (registered or restored) lives here; "default" may not.
  bool isState = false;
  StateMetaInfo meta;
  std::string what;  // "state 'x' of operator 'y' (subtask 0)", for errors
};

struct RocksDbKeyedStateBackend::Impl {
  std::string description;  // "operator 'y' (subtask 0)"
  std::shared_ptr<RocksDbSharedResources> resources;
  std::string workDirPath;
  std::shared_ptr<OwnedDirectory> workDir;
  std::shared_ptr<Database> database;  // null once disposed
  int32_t generation = 0;              // numbers the database directories
  int32_t snapshotCopies = 0;          // numbers snapshotWith()'s staging directories
  // Every column family of the open database, by name.
  std::map<std::string, std::unique_ptr<ColumnFamily>> columnFamilies;
  rocksdb::WriteOptions writeOptions;
  rocksdb::ReadOptions readOptions;
  RocksDbKeyedStateBackend::Tuning tuning;
  // Writes collected by batchPut() and friends, until writePending(): their
  // bytes in one buffer, and where each one's are.
  using Op = WriteOp;
  struct PendingWrite {
    ColumnFamily* cf;
    Op op;
    size_t key;  // offset in pendingBytes; the value follows the key
    uint32_t keySize;
    uint32_t valueSize;
  };
  std::string pendingBytes;
  std::vector<PendingWrite> pending;
  std::vector<uint32_t> pendingOrder;
  rocksdb::WriteBatch batch;

  void addPending(ColumnFamily& cf, Op op, std::string_view key, std::string_view value) {
    if (key.size() > UINT32_MAX || value.size() > UINT32_MAX) {
      throw SluiceException("a RocksDB write of more than 4 GiB for " + cf.what);
    }
    pending.push_back({&cf, op, pendingBytes.size(), static_cast<uint32_t>(key.size()),
                       static_cast<uint32_t>(value.size())});
    pendingBytes.append(key);
    pendingBytes.append(value);
  }

  rocksdb::DB* db() const {
    if (database == nullptr) [[unlikely]] {
      throw SluiceException("the RocksDB keyed state backend of " + description +
                            " was used after dispose()");
    }
    return database->db.get();
  }
  std::string stateWhat(const std::string& name) const {
    return "state '" + name + "' of " + description;
  }
};

struct RocksDbKeyedStateBackend::PrefixIterator::Impl {
  std::shared_ptr<Database> database;
  std::string upper;
  rocksdb::Slice upperSlice;
  std::unique_ptr<rocksdb::Iterator> it;
  const std::string* what = nullptr;

  void checkStatus() const {
    if (!it->Valid()) check(it->status(), "iteration", *what);
  }
};

// ---------------------------------------------------------------------------
// Life cycle

namespace {

using ColumnFamilyMap =
    std::map<std::string, std::unique_ptr<RocksDbKeyedStateBackend::ColumnFamily>>;

rocksdbutil::ColumnFamilyTuning cfTuning(const RocksDbKeyedStateBackend::Tuning& t) {
  rocksdbutil::ColumnFamilyTuning c;
  c.memtableBloomFilter = t.memtableBloomFilter;
  c.uncompressed = t.uncompressed;
  c.level0CompactionTrigger = t.level0CompactionTrigger;
  c.memtableInsertHints = t.memtableInsertHints;
  return c;
}

// The meta of state `name` in `metas`, or one that only names it (a column
// family without a state: "default").
StateMetaInfo metaOrName(const std::map<std::string, StateMetaInfo>& metas,
                         const std::string& name) {
  auto it = metas.find(name);
  if (it != metas.end()) return it->second;
  StateMetaInfo meta;
  meta.name = name;
  return meta;
}

// Opens (creating if needed) the database in `path`, which it owns from now
// on, with its column families, each with its TTL config from `metas` (none
// for other names), and puts them into `cfsOut`.
std::shared_ptr<Database> openDatabase(const std::string& path, bool existing,
                                       const std::map<std::string, StateMetaInfo>& metas,
                                       const std::shared_ptr<RocksDbSharedResources>& resources,
                                       const std::shared_ptr<OwnedDirectory>& workDir,
                                       const Clock* clock, const std::string& description,
                                       const rocksdbutil::ColumnFamilyTuning& tuning,
                                       ColumnFamilyMap& cfsOut) {
  const rocksdb::DBOptions dbOptions = rocksdbutil::makeDbOptions(*resources, description);
  std::vector<std::string> names;
  if (existing) {
    check(rocksdb::DB::ListColumnFamilies(dbOptions, path, &names), "ListColumnFamilies",
          "directory '" + path + "' of " + description);
  } else {
    names.push_back(rocksdb::kDefaultColumnFamilyName);
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  std::vector<std::shared_ptr<rocksdbutil::TtlFilterConfig>> configs;
  for (const std::string& name : names) {
    configs.push_back(
        std::make_shared<rocksdbutil::TtlFilterConfig>(metaOrName(metas, name), clock));
    descriptors.emplace_back(
        name, rocksdbutil::makeColumnFamilyOptions(*resources, configs.back(), tuning));
  }

  auto database = std::make_shared<Database>();
  database->resources = resources;
  database->workDir = workDir;
  database->dir = std::make_unique<OwnedDirectory>(path);
  if (!existing) {
    // RocksDB lists a new database's directory before creating it, and logs
    // not finding it as an error.
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) {
      throw SluiceException("cannot create RocksDB directory '" + path + "' of " + description +
                            ": " + ec.message());
    }
  }
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status s =
      rocksdb::DB::Open(dbOptions, path, descriptors, &database->handles, &raw);
  database->db.reset(raw);
  check(s, "Open", "directory '" + path + "' of " + description);
  rocksdbutil::reportMetadataSize(database->db.get());

  cfsOut.clear();
  for (size_t i = 0; i < names.size(); ++i) {
    auto cf = std::make_unique<RocksDbKeyedStateBackend::ColumnFamily>();
    cf->name = names[i];
    cf->handle = database->handles[i];
    cf->ttl = configs[i];
    auto it = metas.find(names[i]);
    cf->isState = it != metas.end();
    if (cf->isState) cf->meta = it->second;
    cf->what = "state '" + names[i] + "' of " + description;
    cfsOut.emplace(names[i], std::move(cf));
  }
  return database;
}

}  // namespace

RocksDbKeyedStateBackend::RocksDbKeyedStateBackend(KeyedBackendParams params)
    : RocksDbKeyedStateBackend(std::move(params), Tuning()) {}

RocksDbKeyedStateBackend::RocksDbKeyedStateBackend(KeyedBackendParams params, Tuning tuning)
    : KeyedStateBackend(std::move(params)), impl_(std::make_unique<Impl>()) {
  impl_->tuning = tuning;
  const KeyedBackendParams& p = this->params();
  impl_->description =
      "operator '" + p.operatorName + "' (subtask " + std::to_string(p.subtaskIndex) + ")";
  const KeyGroupRange& range = p.keyGroupRange;
  if (range.numberOfKeyGroups() > 0 &&
      (range.startKeyGroup < 0 || range.endKeyGroup >= p.maxParallelism ||
       p.maxParallelism > kUpperBoundMaxParallelism)) {
    throw SluiceException("RocksDB backend of " + impl_->description + ": key-group range " +
                          range.toString() + " does not fit max parallelism " +
                          std::to_string(p.maxParallelism));
  }
  impl_->resources = p.sharedResources != nullptr
                         ? p.sharedResources
                         : createRocksDbSharedResources(p.managedMemoryBytes);
  impl_->writeOptions.disableWAL = true;
  // RocksDB's per-thread perf counters (its PerfContext) are on by
  // default, and Sluice reads none of them. Counting costs two thread-local
  // lookups per key comparison and block access, and a thread-local
  // variable of a shared library (Debian's librocksdb) is reached through a
  // __tls_get_addr call each time: 9% of the task thread of a point-read-heavy
  // state (docs/benchmarks.md, "Round twenty"). Off for this thread, the
  // task thread that creates and uses the backend.
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  // An insert hint costs a memtable about 250 bytes for each key group
  // written into it (RocksDB's splice, from the memtable's arena, and its
  // map entry): kept to a small share of a memtable, so that a subtask
  // owning many key groups (a large max parallelism) does not flush more
  // often for them.
  constexpr size_t kInsertHintBytes = 256;
  if (impl_->tuning.memtableInsertHints &&
      static_cast<size_t>(range.numberOfKeyGroups()) * kInsertHintBytes >
          impl_->resources->writeBufferSize() / 32) {
    impl_->tuning.memtableInsertHints = false;
  }

  const fs::path base = p.localDir.empty() ? fs::temp_directory_path() : fs::path(p.localDir);
  const std::string prefix = std::string(rocksdbutil::kWorkingDirectoryPrefix) +
                             sanitizeForPath(p.operatorName) + "-" +
                             std::to_string(p.subtaskIndex) + "-";
  rocksdbutil::WorkingDirectory work = rocksdbutil::createWorkingDirectory(base, prefix);
  impl_->workDirPath = work.path;
  impl_->workDir = std::make_shared<OwnedDirectory>(work.path, std::move(work.lock));
  // After this backend's own directory is locked, so that it is not taken
  // for abandoned.
  rocksdbutil::removeAbandonedWorkingDirectoriesOnce(base);
  const std::string dbPath =
      (fs::path(impl_->workDirPath) / ("db-" + std::to_string(impl_->generation))).string();
  impl_->database =
      openDatabase(dbPath, false, {}, impl_->resources, impl_->workDir, p.clock, impl_->description,
                   cfTuning(impl_->tuning), impl_->columnFamilies);
}

RocksDbKeyedStateBackend::~RocksDbKeyedStateBackend() { dispose(); }

void RocksDbKeyedStateBackend::dispose() {
  if (impl_ == nullptr) return;
  // The column family objects stay (states may still refer to them); their
  // handles die with the database, and every access now throws.
  impl_->database.reset();
  impl_->workDir.reset();
}

const std::string& RocksDbKeyedStateBackend::workingDirectory() const { return impl_->workDirPath; }

// ---------------------------------------------------------------------------
// Byte-level access

RocksDbKeyedStateBackend::ColumnFamily& RocksDbKeyedStateBackend::columnFamily(
    const StateMetaInfo& meta) {
  rocksdb::DB* db = impl_->db();
  auto it = impl_->columnFamilies.find(meta.name);
  if (it == impl_->columnFamilies.end()) {
    auto cf = std::make_unique<ColumnFamily>();
    cf->name = meta.name;
    cf->what = impl_->stateWhat(meta.name);
    cf->ttl = std::make_shared<rocksdbutil::TtlFilterConfig>(meta, params().clock);
    check(db->CreateColumnFamily(rocksdbutil::makeColumnFamilyOptions(*impl_->resources, cf->ttl,
                                                                      cfTuning(impl_->tuning)),
                                 meta.name, &cf->handle),
          "CreateColumnFamily", cf->what);
    impl_->database->handles.push_back(cf->handle);
    it = impl_->columnFamilies.emplace(meta.name, std::move(cf)).first;
  }
  ColumnFamily& cf = *it->second;
  cf.isState = true;
  cf.meta = meta;
  cf.ttl->setMeta(meta);
  return cf;
}

bool RocksDbKeyedStateBackend::get(ColumnFamily& cf, std::string_view key, std::string& value) {
  const rocksdb::Status s = impl_->db()->Get(impl_->readOptions, cf.handle, slice(key), &value);
  if (s.IsNotFound()) return false;
  check(s, "Get", cf.what);
  return true;
}

void RocksDbKeyedStateBackend::put(ColumnFamily& cf, std::string_view key, std::string_view value) {
  check(impl_->db()->Put(impl_->writeOptions, cf.handle, slice(key), slice(value)), "Put", cf.what);
}

void RocksDbKeyedStateBackend::remove(ColumnFamily& cf, std::string_view key) {
  check(impl_->db()->Delete(impl_->writeOptions, cf.handle, slice(key)), "Delete", cf.what);
}

void RocksDbKeyedStateBackend::merge(ColumnFamily& cf, std::string_view key,
                                     std::string_view operand) {
  check(impl_->db()->Merge(impl_->writeOptions, cf.handle, slice(key), slice(operand)), "Merge",
        cf.what);
}

void RocksDbKeyedStateBackend::removePrefix(ColumnFamily& cf, std::string_view prefix) {
  rocksdb::WriteBatch batch;
  for (PrefixIterator it = iteratePrefix(cf, prefix); it.valid(); it.next()) {
    check(batch.Delete(cf.handle, slice(it.key())), "WriteBatch::Delete", cf.what);
    if (batch.GetDataSize() >= kWriteBatchBytes) {
      check(impl_->db()->Write(impl_->writeOptions, &batch), "Write", cf.what);
      batch.Clear();
    }
  }
  if (batch.Count() > 0) check(impl_->db()->Write(impl_->writeOptions, &batch), "Write", cf.what);
}

void RocksDbKeyedStateBackend::batchPut(ColumnFamily& cf, std::string_view key,
                                        std::string_view value) {
  impl_->addPending(cf, Impl::Op::kPut, key, value);
}

void RocksDbKeyedStateBackend::batchRemove(ColumnFamily& cf, std::string_view key) {
  impl_->addPending(cf, Impl::Op::kDelete, key, {});
}

void RocksDbKeyedStateBackend::batchMerge(ColumnFamily& cf, std::string_view key,
                                          std::string_view operand) {
  impl_->addPending(cf, Impl::Op::kMerge, key, operand);
}

size_t RocksDbKeyedStateBackend::pendingBytes() const {
  return impl_->pendingBytes.size() + impl_->pending.size() * sizeof(Impl::PendingWrite);
}

uint64_t RocksDbKeyedStateBackend::latestSequenceNumber() const {
  return impl_->db()->GetLatestSequenceNumber();
}

namespace {

// Fills `batch` with `writes` (their key and value bytes in `bytes`),
// sorted by column family and key, stably: writes of one key keep their
// order (std::stable_sort would take a temporary buffer from the nothrow
// operator new, hence the index as the last criterion). `handleOf(w)` is
// the column family of write `w`.
template <class Write, class HandleOf>
void fillSorted(const std::vector<Write>& writes, std::string_view bytes,
                std::vector<uint32_t>& order, rocksdb::WriteBatch& batch, HandleOf handleOf,
                const std::string& what) {
  auto keyOf = [bytes](const Write& w) { return bytes.substr(w.key, w.keySize); };
  auto valueOf = [bytes](const Write& w) {
    return slice(bytes.substr(w.key + w.keySize, w.valueSize));
  };
  order.resize(writes.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const Write& x = writes[a];
    const Write& y = writes[b];
    if (x.cf != y.cf) return std::less<>()(x.cf, y.cf);
    const int c = keyOf(x).compare(keyOf(y));
    return c != 0 ? c < 0 : a < b;
  });
  batch.Clear();
  for (uint32_t i : order) {
    const Write& w = writes[i];
    rocksdb::ColumnFamilyHandle* cf = handleOf(w);
    const rocksdb::Slice key = slice(keyOf(w));
    switch (w.op) {
      case RocksDbKeyedStateBackend::WriteOp::kPut:
        check(batch.Put(cf, key, valueOf(w)), "WriteBatch::Put", what);
        break;
      case RocksDbKeyedStateBackend::WriteOp::kDelete:
        check(batch.Delete(cf, key), "WriteBatch::Delete", what);
        break;
      case RocksDbKeyedStateBackend::WriteOp::kMerge:
        check(batch.Merge(cf, key, valueOf(w)), "WriteBatch::Merge", what);
        break;
    }
  }
}

std::string osError(const std::string& what, const fs::path& path, int error) {
  return what + " '" + path.string() + "': " + std::strerror(error);
}

}  // namespace

void RocksDbKeyedStateBackend::writePending() {
  Impl& m = *impl_;
  if (m.pending.empty()) return;
  rocksdb::DB* db = m.db();
  fillSorted(
      m.pending, m.pendingBytes, m.pendingOrder, m.batch,
      [](const Impl::PendingWrite& w) { return w.cf->handle; }, m.description);
  m.pending.clear();
  m.pendingBytes.clear();
  const rocksdb::Status s = db->Write(m.writeOptions, &m.batch);
  m.batch.Clear();
  check(s, "Write", m.description);
}

RocksDbKeyedStateBackend::PrefixIterator::PrefixIterator(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
RocksDbKeyedStateBackend::PrefixIterator::PrefixIterator(PrefixIterator&&) noexcept = default;
RocksDbKeyedStateBackend::PrefixIterator& RocksDbKeyedStateBackend::PrefixIterator::operator=(
    PrefixIterator&&) noexcept = default;
RocksDbKeyedStateBackend::PrefixIterator::~PrefixIterator() {
  // The iterator must go before the database it reads.
  if (impl_ != nullptr) impl_->it.reset();
}

bool RocksDbKeyedStateBackend::PrefixIterator::valid() const { return impl_->it->Valid(); }
std::string_view RocksDbKeyedStateBackend::PrefixIterator::key() const {
  return view(impl_->it->key());
}
std::string_view RocksDbKeyedStateBackend::PrefixIterator::value() const {
  return view(impl_->it->value());
}
void RocksDbKeyedStateBackend::PrefixIterator::next() {
  impl_->it->Next();
  impl_->checkStatus();
}

RocksDbKeyedStateBackend::PrefixIterator RocksDbKeyedStateBackend::iteratePrefix(
    ColumnFamily& cf, std::string_view prefix) {
  rocksdb::DB* db = impl_->db();
  auto it = std::make_unique<PrefixIterator::Impl>();
  it->database = impl_->database;
  it->what = &cf.what;
  it->upper = rocksdbutil::prefixSuccessor(prefix);
  rocksdb::ReadOptions options;
  if (!it->upper.empty()) {
    it->upperSlice = slice(it->upper);
    options.iterate_upper_bound = &it->upperSlice;
  }
  it->it.reset(db->NewIterator(options, cf.handle));
  it->it->Seek(slice(prefix));
  it->checkStatus();
  return PrefixIterator(std::move(it));
}

// ---------------------------------------------------------------------------
// Full (canonical) snapshots

namespace {

// A state as a canonical snapshot writes it.
struct SnapshotState {
  rocksdb::ColumnFamilyHandle* handle;
  StateMetaInfo meta;
  std::string what;
};

// Read options for a scan of the keys of key groups [range.start, range.end]
// (as of `snapshot`, or now when null) that does not fill the block cache.
// It owns the bounds, so it stays where it was made.
class KeyGroupScan {
 public:
  KeyGroupScan(const KeyGroupRange& range, const rocksdb::Snapshot* snapshot)
      : lower_(keyGroupPrefix(range.startKeyGroup)),
        upper_(keyGroupPrefix(range.endKeyGroup + 1)),
        lowerSlice_(slice(lower_)),
        upperSlice_(slice(upper_)) {
    options_.snapshot = snapshot;
    options_.fill_cache = false;
    options_.iterate_lower_bound = &lowerSlice_;
    options_.iterate_upper_bound = &upperSlice_;
  }
  KeyGroupScan(const KeyGroupScan&) = delete;
  KeyGroupScan& operator=(const KeyGroupScan&) = delete;

  const rocksdb::ReadOptions& options() const { return options_; }
  // Where the scan starts.
  const rocksdb::Slice& first() const { return lowerSlice_; }

 private:
  std::string lower_;
  std::string upper_;
  rocksdb::Slice lowerSlice_;
  rocksdb::Slice upperSlice_;
  rocksdb::ReadOptions options_;
};

// Writes the canonical snapshot of `states` in `db` (as of `snapshot`, or
// now when null) to `out`. With ttlCleanupFullSnapshot, expired entries are
// left out.
KeyedSnapshotInfo writeCanonical(rocksdb::DB& db, const rocksdb::Snapshot* snapshot,
                                 const std::vector<SnapshotState>& states,
                                 const KeyedBackendParams& params, std::ostream& out) {
  const KeyGroupRange range = params.keyGroupRange;
  std::vector<StateMetaInfo> metas;
  for (const SnapshotState& s : states) metas.push_back(s.meta);
  CanonicalSnapshotWriter writer(out, params.keySchema, params.maxParallelism, range,
                                 std::move(metas));
  const int64_t now = params.clock->currentTimeMillis();

  const KeyGroupScan scan(range, snapshot);

  // One iterator per state, advanced key group by key group, so each
  // column family is scanned once.
  std::vector<std::unique_ptr<rocksdb::Iterator>> iterators;
  if (range.numberOfKeyGroups() > 0) {
    for (const SnapshotState& s : states) {
      iterators.emplace_back(db.NewIterator(scan.options(), s.handle));
      iterators.back()->Seek(scan.first());
    }
  }
  std::string kept;
  for (int32_t kg = range.startKeyGroup; kg <= range.endKeyGroup; ++kg) {
    writer.beginKeyGroup(kg);
    for (size_t i = 0; i < states.size(); ++i) {
      const SnapshotState& state = states[i];
      const bool filterTtl = state.meta.ttlCleanupFullSnapshot && state.meta.ttlMillis > 0;
      rocksdb::Iterator& it = *iterators[i];
      for (; it.Valid(); it.Next()) {
        const std::string_view key = view(it.key());
        if (keyGroupOf(key, state.meta.name) != kg) break;
        std::string_view value = view(it.value());
        if (filterTtl) {
          bool changed = false;
          kept.clear();
          if (!ttl::keepEntry(state.meta, value, now, kept, changed)) continue;
          if (changed) value = kept;
        }
        writer.writeEntry(static_cast<uint16_t>(i), key.substr(2), value);
      }
      if (!it.Valid()) check(it.status(), "snapshot iteration", state.what);
    }
  }
  return writer.finish();
}

class RocksDbFullSnapshot final : public KeyedStateSnapshot {
 public:
  RocksDbFullSnapshot(std::shared_ptr<Database> database, std::vector<SnapshotState> states,
                      const KeyedBackendParams& params)
      : database_(std::move(database)),
        snapshot_(database_->db->GetSnapshot()),
        states_(std::move(states)),
        params_(params) {}

  ~RocksDbFullSnapshot() override { release(); }

  KeyedSnapshotInfo writeTo(std::ostream& out) override {
    if (snapshot_ == nullptr) {
      throw SluiceException("a RocksDB keyed state snapshot can be written only once");
    }
    KeyedSnapshotInfo info = writeCanonical(*database_->db, snapshot_, states_, params_, out);
    release();
    return info;
  }

 private:
  void release() {
    if (snapshot_ != nullptr) {
      database_->db->ReleaseSnapshot(snapshot_);
      snapshot_ = nullptr;
    }
  }

  std::shared_ptr<Database> database_;
  const rocksdb::Snapshot* snapshot_;
  std::vector<SnapshotState> states_;
  KeyedBackendParams params_;
};

}  // namespace

std::unique_ptr<KeyedStateSnapshot> RocksDbKeyedStateBackend::snapshot() {
  impl_->db();
  std::vector<SnapshotState> states;
  for (const auto& [name, cf] : impl_->columnFamilies) {
    if (cf->isState) states.push_back({cf->handle, cf->meta, cf->what});
  }
  if (states.size() >= 0xFFFF) {
    throw SluiceException("RocksDB backend of " + impl_->description + " has " +
                          std::to_string(states.size()) +
                          " states; a snapshot holds at most 65534");
  }
  return std::make_unique<RocksDbFullSnapshot>(impl_->database, std::move(states), params());
}

// ---------------------------------------------------------------------------
// Restore

namespace {

// Writes puts in batches of about kWriteBatchBytes.
class BatchWriter {
 public:
  BatchWriter(rocksdb::DB* db, const rocksdb::WriteOptions& options, std::string what)
      : db_(db), options_(options), what_(std::move(what)) {}
  void put(rocksdb::ColumnFamilyHandle* cf, std::string_view key, std::string_view value) {
    check(batch_.Put(cf, slice(key), slice(value)), "WriteBatch::Put", what_);
    if (batch_.GetDataSize() >= kWriteBatchBytes) flush();
  }
  void flush() {
    if (batch_.Count() == 0) return;
    check(db_->Write(options_, &batch_), "Write", what_);
    batch_.Clear();
  }

 private:
  rocksdb::DB* db_;
  const rocksdb::WriteOptions& options_;
  std::string what_;
  rocksdb::WriteBatch batch_;
};

}  // namespace

void RocksDbKeyedStateBackend::restore(
    const std::vector<const CanonicalSnapshotReader*>& snapshots) {
  rocksdb::DB* db = impl_->db();
  if (!stateObjects().empty() || !registeredMeta_.empty()) {
    throw SluiceException("RocksDB backend of " + impl_->description +
                          ": restore() must come before any state is registered");
  }
  BatchWriter writer(db, impl_->writeOptions, "restore of " + impl_->description);
  std::string key;
  for (const CanonicalSnapshotReader* snapshot : snapshots) {
    checkSnapshotCompatible(*snapshot);
    std::vector<ColumnFamily*> targets;
    for (const StateMetaInfo& meta : snapshot->states()) {
      auto [it, inserted] = restoredMeta_.emplace(meta.name, meta);
      if (!inserted && !(it->second.compatibleWith(meta) && meta.compatibleWith(it->second))) {
        throw StateMigrationException("restored snapshots disagree about state '" + meta.name +
                                      "': " + it->second.describe() + " vs " + meta.describe() +
                                      " in " + snapshot->sourceName());
      }
      targets.push_back(&columnFamily(it->second));
    }
    snapshot->forEachEntry(keyGroupRange(), [&](int32_t keyGroup, uint16_t stateIndex,
                                                std::string_view entryKey, std::string_view value) {
      if (stateIndex >= targets.size()) {
        throw SerializationError(snapshot->sourceName() + ": entry of state index " +
                                 std::to_string(stateIndex) + " but the snapshot has " +
                                 std::to_string(targets.size()) + " states");
      }
      key = keyGroupPrefix(keyGroup);
      key.append(entryKey);
      writer.put(targets[stateIndex]->handle, key, value);
    });
  }
  writer.flush();
}

// ---------------------------------------------------------------------------
// Keys, compaction, memory

void RocksDbKeyedStateBackend::forEachKey(
    const std::string& stateName,
    const std::function<void(std::string_view key, int32_t keyGroup)>& fn) {
  rocksdb::DB* db = impl_->db();
  auto found = impl_->columnFamilies.find(stateName);
  if (found == impl_->columnFamilies.end() || !found->second->isState) return;
  const ColumnFamily& cf = *found->second;
  const auto& keyLength = params().keyLength;
  if (!keyLength) {
    throw SluiceException("RocksDB backend of " + impl_->description +
                          ": forEachKey needs KeyedBackendParams::keyLength");
  }
  std::vector<std::pair<std::string, int32_t>> keys;
  {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(impl_->readOptions, cf.handle));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const std::string_view stored = view(it->key());
      const int32_t kg = keyGroupOf(stored, stateName);
      const std::string_view rest = stored.substr(2);
      const size_t n = keyLength(reinterpret_cast<const uint8_t*>(rest.data()), rest.size());
      if (n > rest.size()) {
        throw SerializationError("state '" + stateName + "': key length " + std::to_string(n) +
                                 " exceeds the stored key's " + std::to_string(rest.size()) +
                                 " bytes");
      }
      const std::string_view k = rest.substr(0, n);
      if (keys.empty() || keys.back().second != kg || keys.back().first != k) {
        keys.emplace_back(std::string(k), kg);
      }
    }
    check(it->status(), "iteration", cf.what);
  }
  for (const auto& [k, kg] : keys) fn(k, kg);
}

void RocksDbKeyedStateBackend::compactAll() {
  rocksdb::DB* db = impl_->db();
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  for (const auto& [name, cf] : impl_->columnFamilies) handles.push_back(cf->handle);
  rocksdb::FlushOptions flush;
  flush.wait = true;
  check(db->Flush(flush, handles), "Flush", impl_->description);
  rocksdb::CompactRangeOptions compact;
  compact.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  for (const auto& [name, cf] : impl_->columnFamilies) {
    check(db->CompactRange(compact, cf->handle, nullptr, nullptr), "CompactRange", cf->what);
  }
}

RocksDbKeyedStateBackend::MemoryUsage RocksDbKeyedStateBackend::memoryUsage() const {
  MemoryUsage usage;
  const RocksDbSharedResources& res = *impl_->resources;
  usage.blockCacheCapacity = static_cast<int64_t>(res.cache()->GetCapacity());
  usage.blockCacheUsage = static_cast<int64_t>(res.cache()->GetUsage());
  usage.blockCachePinnedUsage = static_cast<int64_t>(res.cache()->GetPinnedUsage());
  usage.writeBufferManagerCapacity = static_cast<int64_t>(res.writeBufferManager()->buffer_size());
  usage.memtableUsage = static_cast<int64_t>(res.writeBufferManager()->memory_usage());
  uint64_t readers = 0;
  if (impl_->database != nullptr && impl_->database->db->GetAggregatedIntProperty(
                                        "rocksdb.estimate-table-readers-mem", &readers)) {
    usage.tableReadersUsage = static_cast<int64_t>(readers);
  }
  return usage;
}

// ---------------------------------------------------------------------------
// Incremental snapshots

namespace {

void writeMetaFile(const fs::path& path,
                   const RocksDbKeyedStateBackend::IncrementalSnapshotHandle& h) {
  std::vector<uint8_t> bytes;
  DataOutputView out(bytes);
  out.writeBytes(kMetaMagic, sizeof kMetaMagic);
  out.writeU32(kMetaVersion);
  out.writeI64(h.checkpointId);
  out.writeString(h.keySchema);
  out.writeI32(h.maxParallelism);
  out.writeI32(h.keyGroupRange.startKeyGroup);
  out.writeI32(h.keyGroupRange.endKeyGroup);
  out.writeU32(static_cast<uint32_t>(h.states.size()));
  for (const StateMetaInfo& m : h.states) writeStateMetaInfo(m, out);
  out.writeU32(static_cast<uint32_t>(h.sstFiles.size()));
  for (const auto& f : h.sstFiles) {
    out.writeString(f.fileName);
    out.writeString(f.uniqueId);
    out.writeU64(f.sizeBytes);
  }
  // The meta file itself is not listed.
  std::vector<std::string> others;
  for (const std::string& f : h.privateFiles) {
    if (f != RocksDbKeyedStateBackend::kIncrementalMetaFileName) others.push_back(f);
  }
  out.writeU32(static_cast<uint32_t>(others.size()));
  for (const std::string& f : others) out.writeString(f);

  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file)
    throw SluiceException("cannot write incremental snapshot meta file '" + path.string() + "'");
}

}  // namespace

namespace {

// The absolute path of a new snapshot directory `checkpointDir` (which must
// not exist), its parent created.
fs::path newSnapshotDirectory(const std::string& checkpointDir, const std::string& description) {
  if (checkpointDir.empty()) {
    throw SluiceException("snapshot of " + description +
                          ": the checkpoint directory must not be empty");
  }
  std::error_code ec;
  const fs::path dir = fs::absolute(checkpointDir, ec);
  if (ec) throw SluiceException(fsError("invalid checkpoint directory", checkpointDir, ec));
  if (fs::exists(dir, ec)) {
    throw SluiceException("snapshot directory '" + dir.string() + "' already exists");
  }
  fs::create_directories(dir.parent_path(), ec);
  if (ec) throw SluiceException(fsError("cannot create directory", dir.parent_path(), ec));
  return dir;
}

// Has RocksDB make a checkpoint of `db` in `dir`: memtables flushed, SST
// files hard-linked, the small files copied.
void createCheckpoint(rocksdb::DB* db, const fs::path& dir, const std::string& description) {
  rocksdb::Checkpoint* raw = nullptr;
  check(rocksdb::Checkpoint::Create(db, &raw), "Checkpoint::Create", description);
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // log_size_for_flush 0: always flush, since the write-ahead log is off.
  check(checkpoint->CreateCheckpoint(dir.string(), 0), "CreateCheckpoint",
        "directory '" + dir.string() + "' of " + description);
}

// Fills in `handle`'s file lists from the database files in `dir` and
// writes its meta file there.
void describeSnapshotDirectory(
    const fs::path& dir, RocksDbKeyedStateBackend::IncrementalSnapshotHandle& handle,
    const RocksDbKeyedStateBackend::IncrementalSnapshotHandle* previous) {
  using SstFile = RocksDbKeyedStateBackend::SstFile;
  handle.directory = dir.string();
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    // RocksDB's lock file of a database opened there (a copy a snapshot
    // added writes to) is not part of it.
    if (name == "LOCK") continue;
    if (entry.path().extension() == ".sst") {
      const uintmax_t size = entry.file_size(ec);
      if (ec) throw SluiceException(fsError("cannot read the size of", entry.path(), ec));
      handle.sstFiles.push_back({name, sstUniqueId(entry.path().string()), size});
    } else {
      handle.privateFiles.push_back(name);
    }
  }
  if (ec) throw SluiceException(fsError("cannot list", dir, ec));
  auto byName = [](const SstFile& a, const SstFile& b) { return a.fileName < b.fileName; };
  std::sort(handle.sstFiles.begin(), handle.sstFiles.end(), byName);
  std::set<std::string> previousIds;
  if (previous != nullptr) {
    for (const SstFile& f : previous->sstFiles) previousIds.insert(f.uniqueId);
  }
  for (const SstFile& f : handle.sstFiles) {
    if (!previousIds.contains(f.uniqueId)) handle.newSstFiles.push_back(f);
  }
  handle.privateFiles.push_back(RocksDbKeyedStateBackend::kIncrementalMetaFileName);
  std::sort(handle.privateFiles.begin(), handle.privateFiles.end());
  writeMetaFile(dir / RocksDbKeyedStateBackend::kIncrementalMetaFileName, handle);
}

// Removes a half-written snapshot directory unless disarmed.
struct RemoveOnFailure {
  fs::path dir;
  bool armed = true;
  ~RemoveOnFailure() {
    if (!armed) return;
    std::error_code e;
    fs::remove_all(dir, e);
  }
};

}  // namespace

RocksDbKeyedStateBackend::IncrementalSnapshotHandle RocksDbKeyedStateBackend::snapshotIncremental(
    int64_t checkpointId, const std::string& checkpointDir,
    const IncrementalSnapshotHandle* previous) {
  rocksdb::DB* db = impl_->db();
  const fs::path dir = newSnapshotDirectory(checkpointDir, impl_->description);
  RemoveOnFailure cleanup{dir};
  createCheckpoint(db, dir, impl_->description);
  IncrementalSnapshotHandle handle;
  handle.checkpointId = checkpointId;
  handle.keyGroupRange = keyGroupRange();
  handle.keySchema = params().keySchema;
  handle.maxParallelism = params().maxParallelism;
  for (const auto& [name, cf] : impl_->columnFamilies) {
    if (cf->isState) handle.states.push_back(cf->meta);
  }
  describeSnapshotDirectory(dir, handle, previous);
  cleanup.armed = false;
  return handle;
}

RocksDbKeyedStateBackend::IncrementalSnapshotHandle
RocksDbKeyedStateBackend::loadIncrementalSnapshotHandle(const std::string& directory) {
  const fs::path path = fs::absolute(directory) / kIncrementalMetaFileName;
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    throw SerializationError("cannot open incremental snapshot meta file '" + path.string() + "'");
  }
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (file.bad()) {
    throw SerializationError("cannot read incremental snapshot meta file '" + path.string() + "'");
  }
  try {
    DataInputView in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    char magic[sizeof kMetaMagic];
    in.readBytes(magic, sizeof magic);
    if (!std::equal(std::begin(magic), std::end(magic), std::begin(kMetaMagic))) {
      in.failAt(0, "not an incremental snapshot meta file (bad magic)");
    }
    const uint32_t version = in.readU32();
    if (version != kMetaVersion) in.failAt(8, "unsupported version " + std::to_string(version));
    IncrementalSnapshotHandle h;
    h.directory = fs::absolute(directory).string();
    h.checkpointId = in.readI64();
    in.readString(h.keySchema);
    h.maxParallelism = in.readI32();
    h.keyGroupRange.startKeyGroup = in.readI32();
    h.keyGroupRange.endKeyGroup = in.readI32();
    for (uint32_t n = in.readU32(); n > 0; --n) h.states.push_back(readStateMetaInfo(in));
    for (uint32_t n = in.readU32(); n > 0; --n) {
      SstFile f;
      in.readString(f.fileName);
      in.readString(f.uniqueId);
      f.sizeBytes = in.readU64();
      h.sstFiles.push_back(std::move(f));
    }
    for (uint32_t n = in.readU32(); n > 0; --n) in.readString(h.privateFiles.emplace_back());
    if (in.remaining() != 0) in.failAt(in.position(), "unexpected trailing bytes");
    h.privateFiles.push_back(kIncrementalMetaFileName);
    std::sort(h.privateFiles.begin(), h.privateFiles.end());
    return h;
  } catch (const SerializationError& e) {
    throw SerializationError("incremental snapshot meta file '" + path.string() + "': " + e.what());
  }
}

void RocksDbKeyedStateBackend::restoreIncremental(
    const std::vector<IncrementalSnapshotHandle>& handles) {
  impl_->db();
  if (!stateObjects().empty() || !registeredMeta_.empty()) {
    throw SluiceException("RocksDB backend of " + impl_->description +
                          ": restoreIncremental() must come before any state is registered");
  }
  if (handles.empty()) return;

  // The directories describe themselves; the handles must agree with them.
  std::vector<IncrementalSnapshotHandle> loaded;
  for (const IncrementalSnapshotHandle& h : handles) {
    IncrementalSnapshotHandle m = loadIncrementalSnapshotHandle(h.directory);
    const std::string source = "incremental snapshot '" + m.directory + "'";
    if (m.keySchema != params().keySchema) {
      throw StateMigrationException(source + " has keys of type " + m.keySchema + ", but " +
                                    impl_->description + " has keys of type " + params().keySchema);
    }
    if (m.maxParallelism != params().maxParallelism) {
      throw StateMigrationException(
          source + " was taken with max parallelism " + std::to_string(m.maxParallelism) +
          ", but " + impl_->description + " has " + std::to_string(params().maxParallelism));
    }
    if (m.keyGroupRange != h.keyGroupRange) {
      throw SluiceException(source + " holds key groups " + m.keyGroupRange.toString() +
                            " but its handle says " + h.keyGroupRange.toString());
    }
    std::vector<std::string> files = m.privateFiles;
    for (const SstFile& f : m.sstFiles) files.push_back(f.fileName);
    for (const std::string& f : files) {
      std::error_code ec;
      if (!fs::is_regular_file(fs::path(m.directory) / f, ec)) {
        throw SluiceException(source + " is missing its file '" + f + "'");
      }
    }
    for (const StateMetaInfo& meta : m.states) {
      auto [it, inserted] = restoredMeta_.emplace(meta.name, meta);
      if (!inserted && !(it->second.compatibleWith(meta) && meta.compatibleWith(it->second))) {
        throw StateMigrationException("restored snapshots disagree about state '" + meta.name +
                                      "': " + it->second.describe() + " vs " + meta.describe() +
                                      " in " + source);
      }
    }
    loaded.push_back(std::move(m));
  }

  const KeyGroupRange ours = keyGroupRange();
  bool haveStates = false;
  for (const auto& [name, cf] : impl_->columnFamilies) haveStates = haveStates || cf->isState;

  if (loaded.size() == 1 && covers(loaded[0].keyGroupRange, ours) && !haveStates) {
    // Reopen from a copy of the snapshot's files, then drop the key groups
    // that are not ours.
    const IncrementalSnapshotHandle& m = loaded[0];
    const fs::path dbDir =
        fs::path(impl_->workDirPath) / ("db-" + std::to_string(++impl_->generation));
    std::error_code ec;
    fs::create_directory(dbDir, ec);
    if (ec) throw SluiceException(fsError("cannot create directory", dbDir, ec));
    for (const SstFile& f : m.sstFiles) {
      // SST files are immutable: a hard link is a copy.
      fs::create_hard_link(fs::path(m.directory) / f.fileName, dbDir / f.fileName, ec);
      if (ec) {
        ec.clear();
        fs::copy_file(fs::path(m.directory) / f.fileName, dbDir / f.fileName, ec);
        if (ec)
          throw SluiceException(fsError("cannot copy", fs::path(m.directory) / f.fileName, ec));
      }
    }
    for (const std::string& f : m.privateFiles) {
      if (f == kIncrementalMetaFileName) continue;
      fs::copy_file(fs::path(m.directory) / f, dbDir / f, ec);
      if (ec) throw SluiceException(fsError("cannot copy", fs::path(m.directory) / f, ec));
    }
    std::map<std::string, StateMetaInfo> metas;
    for (const StateMetaInfo& meta : m.states) metas.emplace(meta.name, meta);
    ColumnFamilyMap columnFamilies;
    std::shared_ptr<Database> database =
        openDatabase(dbDir.string(), true, metas, impl_->resources, impl_->workDir, params().clock,
                     impl_->description, cfTuning(impl_->tuning), columnFamilies);
    // The empty database goes (with its directory); no state refers to it.
    impl_->database = std::move(database);
    impl_->columnFamilies = std::move(columnFamilies);
    rocksdb::DB* db = impl_->database->db.get();
    const bool deletedRanges = m.keyGroupRange.startKeyGroup < ours.startKeyGroup ||
                               m.keyGroupRange.endKeyGroup > ours.endKeyGroup;
    for (const auto& [name, cf] : impl_->columnFamilies) {
      if (m.keyGroupRange.startKeyGroup < ours.startKeyGroup) {
        check(db->DeleteRange(impl_->writeOptions, cf->handle, slice(kBeginOfKeys),
                              slice(keyGroupPrefix(ours.startKeyGroup))),
              "DeleteRange", cf->what);
      }
      if (m.keyGroupRange.endKeyGroup > ours.endKeyGroup) {
        check(db->DeleteRange(impl_->writeOptions, cf->handle,
                              slice(keyGroupPrefix(ours.endKeyGroup + 1)), slice(kEndOfKeys)),
              "DeleteRange", cf->what);
      }
    }
    if (deletedRanges && impl_->tuning.memtableInsertHints) {
      // RocksDB 7.8 keeps one insert hint per prefix for a memtable's point
      // keys and range deletions alike (fixed upstream in 2024,
      // facebook/rocksdb#12558), so a point insert after a range deletion
      // of the same prefix could follow a hint into the wrong skip list.
      // No key of these ranges is written here, but the memtables holding
      // the range deletions take no more writes either: the next ones
      // start without hints.
      check(db->Flush(rocksdb::FlushOptions(), impl_->database->handles), "Flush",
            impl_->description);
    }
    return;
  }

  // Copy the entries of our key groups out of each snapshot.
  rocksdb::DB* db = impl_->db();
  BatchWriter writer(db, impl_->writeOptions, "incremental restore of " + impl_->description);
  for (const IncrementalSnapshotHandle& m : loaded) {
    const KeyGroupRange part = intersect(m.keyGroupRange, ours);
    if (part.numberOfKeyGroups() == 0) continue;
    const std::string source = "incremental snapshot '" + m.directory + "'";
    const rocksdb::DBOptions dbOptions =
        rocksdbutil::makeDbOptions(*impl_->resources, source + " for " + impl_->description);
    std::vector<std::string> names;
    check(rocksdb::DB::ListColumnFamilies(dbOptions, m.directory, &names), "ListColumnFamilies",
          source);
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (const std::string& name : names) {
      descriptors.emplace_back(
          name, rocksdbutil::makeColumnFamilyOptions(*impl_->resources,
                                                     std::make_shared<rocksdbutil::TtlFilterConfig>(
                                                         StateMetaInfo{}, params().clock)));
    }
    Database source_db;
    rocksdb::DB* raw = nullptr;
    const rocksdb::Status s =
        rocksdb::DB::OpenForReadOnly(dbOptions, m.directory, descriptors, &source_db.handles, &raw);
    source_db.db.reset(raw);
    check(s, "OpenForReadOnly", source);

    const KeyGroupScan scan(part, nullptr);
    for (size_t i = 0; i < names.size(); ++i) {
      auto meta = restoredMeta_.find(names[i]);
      if (meta == restoredMeta_.end()) continue;  // "default" without a state
      ColumnFamily& target = columnFamily(meta->second);
      std::unique_ptr<rocksdb::Iterator> it(
          source_db.db->NewIterator(scan.options(), source_db.handles[i]));
      for (it->Seek(scan.first()); it->Valid(); it->Next()) {
        writer.put(target.handle, view(it->key()), view(it->value()));
      }
      check(it->status(), "iteration", source);
    }
  }
  writer.flush();
  // Restored states without entries in our key groups stay part of every
  // snapshot too.
  for (const auto& [name, meta] : restoredMeta_) columnFamily(meta);
}

// ---------------------------------------------------------------------------
// Snapshots with writes on top

// The writes of a snapshot, in a file of the working directory: chunks of
// [u32 writes | u64 bytes | per write: u32 column family, u8 op, u32 key
// size, u32 value size | the keys and values back to back]. Appended on
// the task thread, read once the snapshot is written; the file goes with
// the object.
class RocksDbKeyedStateBackend::SnapshotWrites {
 public:
  SnapshotWrites(fs::path file, std::string description)
      : file_(std::move(file)), description_(std::move(description)) {
    fd_ = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0) fail("cannot create", errno);
  }
  SnapshotWrites(const SnapshotWrites&) = delete;
  SnapshotWrites& operator=(const SnapshotWrites&) = delete;
  ~SnapshotWrites() {
    if (fd_ >= 0) ::close(fd_);
    std::error_code ec;
    fs::remove(file_, ec);
  }

  const fs::path& file() const { return file_; }
  int64_t count() const { return count_; }
  const std::vector<std::string>& names() const { return names_; }

  // Appends `writes` as one chunk.
  void append(const std::vector<Impl::PendingWrite>& writes, const std::string& bytes) {
    if (writes.empty()) return;
    buffer_.clear();
    DataOutputView out(buffer_);
    out.writeU32(static_cast<uint32_t>(writes.size()));
    out.writeU64(bytes.size());
    const ColumnFamily* last = nullptr;
    uint32_t index = 0;
    for (const Impl::PendingWrite& w : writes) {
      if (w.cf != last) {
        auto [it, inserted] = indexOf_.emplace(w.cf, static_cast<uint32_t>(names_.size()));
        if (inserted) names_.push_back(w.cf->name);
        index = it->second;
        last = w.cf;
      }
      out.writeU32(index);
      out.writeU8(static_cast<uint8_t>(w.op));
      out.writeU32(w.keySize);
      out.writeU32(w.valueSize);
    }
    writeAll(buffer_.data(), buffer_.size());
    writeAll(bytes.data(), bytes.size());
    count_ += static_cast<int64_t>(writes.size());
  }

  // Done appending.
  void close() {
    if (fd_ < 0) return;
    const int r = ::close(fd_);
    fd_ = -1;
    if (r != 0) fail("cannot write", errno);
  }

  // One chunk as read back: the column family is an index into names().
  struct Write {
    uint32_t cf;
    WriteOp op;
    size_t key;  // offset in the chunk's bytes; the value follows the key
    uint32_t keySize;
    uint32_t valueSize;
  };
  // Calls apply(writes, bytes) for every chunk, in order.
  template <class Apply>
  void forEachChunk(Apply&& apply) const {
    errno = 0;
    std::ifstream in(file_, std::ios::binary);
    if (!in) fail("cannot open", errno);
    std::error_code ec;
    const uintmax_t fileSize = fs::file_size(file_, ec);
    if (ec) fail("cannot read the size of", ec.value());
    std::vector<Write> writes;
    std::string bytes;
    std::vector<uint8_t> header;
    for (uintmax_t offset = 0; offset != fileSize;) {
      header.resize(12);
      if (fileSize - offset < 12) corrupt(offset, "a chunk header is cut short");
      if (!in.read(reinterpret_cast<char*>(header.data()), 12)) fail("cannot read", errno);
      DataInputView h(header.data(), header.size());
      const uint32_t n = h.readU32();
      const uint64_t total = h.readU64();
      const uintmax_t chunk = 12 + static_cast<uintmax_t>(n) * kRecordBytes + total;
      if (total > fileSize || chunk > fileSize - offset) {
        corrupt(offset, "a chunk runs past the end of the file");
      }
      header.resize(static_cast<size_t>(n) * kRecordBytes);
      bytes.resize(total);
      if (!in.read(reinterpret_cast<char*>(header.data()),
                   static_cast<std::streamsize>(header.size())) ||
          !in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
        fail("cannot read", errno);
      }
      DataInputView r(header.data(), header.size());
      writes.clear();
      size_t at = 0;
      for (uint32_t i = 0; i < n; ++i) {
        Write w{};
        w.cf = r.readU32();
        const uint8_t op = r.readU8();
        w.op = static_cast<WriteOp>(op);
        w.keySize = r.readU32();
        w.valueSize = r.readU32();
        w.key = at;
        at += static_cast<size_t>(w.keySize) + w.valueSize;
        if (w.cf >= names_.size() || op > static_cast<uint8_t>(WriteOp::kMerge) ||
            at > bytes.size()) {
          corrupt(offset, "write " + std::to_string(i) + " of its chunk is invalid");
        }
        writes.push_back(w);
      }
      if (at != bytes.size()) corrupt(offset, "a chunk's writes do not cover its bytes");
      offset += chunk;
      apply(writes, std::string_view(bytes));
    }
  }

 private:
  static constexpr size_t kRecordBytes = 13;
  [[noreturn]] void fail(const std::string& what, int error) const {
    throw SluiceException("snapshot of " + description_ + ": " +
                          osError(what, file_, error != 0 ? error : EIO));
  }
  [[noreturn]] void corrupt(uintmax_t offset, const std::string& what) const {
    throw SluiceException("snapshot of " + description_ + ": the file of its writes '" +
                          file_.string() + "' is corrupt at byte " + std::to_string(offset) + ": " +
                          what);
  }
  void writeAll(const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::write(fd_, p, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail("cannot write", errno);
      }
      p += n;
      size -= static_cast<size_t>(n);
    }
  }

  fs::path file_;
  std::string description_;
  int fd_ = -1;
  int64_t count_ = 0;
  std::vector<std::string> names_;
  std::map<const ColumnFamily*, uint32_t> indexOf_;
  std::vector<uint8_t> buffer_;
};

class RocksDbKeyedStateBackend::CopyWithWrites {
 public:
  // Owns `dir` (a staging checkpoint), and the file of writes it makes
  // next to it.
  CopyWithWrites(fs::path dir, const fs::path& writesFile, bool native, int64_t checkpointId,
                 std::map<std::string, StateMetaInfo> states,
                 std::shared_ptr<RocksDbSharedResources> resources,
                 std::shared_ptr<OwnedDirectory> workDir, KeyedBackendParams params,
                 std::string description, rocksdbutil::ColumnFamilyTuning tuning)
      : dir_(std::move(dir)),
        native_(native),
        checkpointId_(checkpointId),
        writes_(writesFile, description),
        states_(std::move(states)),
        resources_(std::move(resources)),
        workDir_(std::move(workDir)),
        params_(std::move(params)),
        description_(std::move(description)),
        tuning_(tuning) {}
  CopyWithWrites(const CopyWithWrites&) = delete;
  CopyWithWrites& operator=(const CopyWithWrites&) = delete;
  // Closes the copy and removes it.
  ~CopyWithWrites() {
    try {
      close();
    } catch (const std::exception& e) {
      log::warn("{}", e.what());
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  const fs::path& dir() const { return dir_; }
  // Whether it is for a native snapshot, and that one's checkpoint id.
  bool native() const { return native_; }
  int64_t checkpointId() const { return checkpointId_; }
  SnapshotWrites& writes() { return writes_; }
  const KeyedBackendParams& params() const { return params_; }
  // The states of the database when the checkpoint was made, by name.
  const std::map<std::string, StateMetaInfo>& states() const { return states_; }
  std::string what(const std::string& state) const {
    return "state '" + state + "' of " + description_;
  }

  // Opens the copy and writes the writes into it; it stays open until
  // close(). With `flush`, its memtables are flushed afterwards.
  void open(bool flush) {
    if (db_ != nullptr) {
      throw SluiceException("the snapshot copy '" + dir_.string() + "' of " + description_ +
                            " is open already");
    }
    names_.clear();
    dbOptions_ = rocksdbutil::makeDbOptions(*resources_, description_);
    dbOptions_.create_if_missing = false;
    // The copy is no part of the shared cache's index and filter estimate,
    // opens its table readers only as needed (the live database's are
    // open already) and reads no table statistics on open.
    dbOptions_.listeners.clear();
    dbOptions_.max_open_files = 20;
    dbOptions_.skip_stats_update_on_db_open = true;
    // Its memtables are its own, small and few (kCopyWriteBuffer each, two
    // per state), outside managed memory: charged to the slot's write
    // buffer manager they would make the live database flush early, and at
    // the live database's size they would hold several more MiB while a
    // checkpoint is written.
    dbOptions_.write_buffer_manager = nullptr;
    dbOptions_.db_write_buffer_size = 0;
    const std::string where = "the snapshot copy '" + dir_.string() + "' of " + description_;
    check(rocksdb::DB::ListColumnFamilies(dbOptions_, dir_.string(), &names_), "ListColumnFamilies",
          where);
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (const std::string& name : names_) {
      rocksdb::ColumnFamilyOptions o = rocksdbutil::makeColumnFamilyOptions(
          *resources_,
          std::make_shared<rocksdbutil::TtlFilterConfig>(metaOrName(states_, name), params_.clock),
          tuning_);
      // No compactions: the copy lives for one snapshot (its level-0
      // files then stop no writes; a full memtable still waits for its
      // flush). The one below merges files and must not run the TTL
      // filter: what an entry held at the snapshot is what it holds.
      o.disable_auto_compactions = true;
      o.compaction_filter_factory = nullptr;
      o.write_buffer_size = kCopyWriteBuffer;
      descriptors.emplace_back(name, o);
    }
    rocksdb::DB* raw = nullptr;
    const rocksdb::Status s =
        rocksdb::DB::Open(dbOptions_, dir_.string(), descriptors, &handles_, &raw);
    db_.reset(raw);
    check(s, "Open", where);
    std::vector<std::set<std::string>> level0(handles_.size());
    for (size_t i = 0; i < handles_.size(); ++i) level0[i] = level0Files(handles_[i]);
    apply(where);
    if (!flush) return;
    rocksdb::FlushOptions options;
    options.wait = true;
    check(db_->Flush(options, handles_), "Flush", where);
    // The writes went through small memtables: one level-0 file per MiB,
    // which a backend restored from the copy would have to compact before
    // it could write again. They become one file of their own (uncompressed
    // as the column family says; CompactionOptions would use Snappy): the
    // copy's other files are the live database's, shared with earlier
    // checkpoints, and stay as they are.
    rocksdb::CompactionOptions compaction;
    compaction.compression = rocksdb::kDisableCompressionOption;
    for (size_t i = 0; i < handles_.size(); ++i) {
      std::vector<std::string> added;
      for (const std::string& f : level0Files(handles_[i])) {
        if (!level0[i].contains(f)) added.push_back(f);
      }
      if (added.size() < 2) continue;
      check(db_->CompactFiles(compaction, handles_[i], added, 0), "CompactFiles",
            what(names_[i]) + " in the snapshot copy '" + dir_.string() + "'");
    }
  }

  rocksdb::DB& db() const { return *db_; }
  // The open copy's column family of `name`, or null.
  rocksdb::ColumnFamilyHandle* handle(const std::string& name) const {
    auto it = std::find(names_.begin(), names_.end(), name);
    return it == names_.end() || handles_.empty() ? nullptr : handles_[it - names_.begin()];
  }

  static constexpr size_t kCopyWriteBuffer = 1 << 20;

  // The names of the level-0 files of a column family of the open copy.
  std::set<std::string> level0Files(rocksdb::ColumnFamilyHandle* handle) const {
    rocksdb::ColumnFamilyMetaData meta;
    db_->GetColumnFamilyMetaData(handle, &meta);
    std::set<std::string> names;
    if (!meta.levels.empty()) {
      for (const rocksdb::SstFileMetaData& f : meta.levels[0].files) names.insert(f.name);
    }
    return names;
  }

  void close() {
    if (db_ == nullptr) return;
    for (rocksdb::ColumnFamilyHandle* h : handles_) {
      const rocksdb::Status s = db_->DestroyColumnFamilyHandle(h);
      if (!s.ok()) log::warn("RocksDB DestroyColumnFamilyHandle failed: {}", s.ToString());
    }
    handles_.clear();
    const rocksdb::Status s = db_->Close();
    db_.reset();
    check(s, "Close", "the snapshot copy '" + dir_.string() + "' of " + description_);
  }

 private:
  // Writes the snapshot's writes into the copy, a chunk per WriteBatch
  // sorted by key.
  void apply(const std::string& where) {
    const SnapshotWrites& w = writes_;
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    for (const std::string& name : w.names()) {
      rocksdb::ColumnFamilyHandle* h = handle(name);
      if (h == nullptr) {
        throw SluiceException(what(name) + " is missing from RocksDB's checkpoint in '" +
                              dir_.string() + "'");
      }
      handles.push_back(h);
    }
    rocksdb::WriteOptions options;
    options.disableWAL = true;
    std::vector<uint32_t> order;
    rocksdb::WriteBatch batch;
    w.forEachChunk([&](const std::vector<SnapshotWrites::Write>& writes, std::string_view bytes) {
      fillSorted(
          writes, bytes, order, batch,
          [&](const SnapshotWrites::Write& x) { return handles[x.cf]; }, where);
      check(db_->Write(options, &batch), "Write", where);
    });
  }

  fs::path dir_;
  bool native_;
  int64_t checkpointId_;
  SnapshotWrites writes_;
  std::map<std::string, StateMetaInfo> states_;
  std::shared_ptr<RocksDbSharedResources> resources_;
  std::shared_ptr<OwnedDirectory> workDir_;  // holds dir_
  KeyedBackendParams params_;
  std::string description_;
  rocksdbutil::ColumnFamilyTuning tuning_;
  rocksdb::DBOptions dbOptions_;
  std::vector<std::string> names_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  std::unique_ptr<rocksdb::DB> db_;
};

std::shared_ptr<RocksDbKeyedStateBackend::CopyWithWrites>
RocksDbKeyedStateBackend::beginSnapshotWith(bool native, int64_t checkpointId) {
  rocksdb::DB* db = impl_->db();
  const std::string n = std::to_string(++impl_->snapshotCopies);
  const fs::path work(impl_->workDirPath);
  const fs::path dir =
      work / (native ? "checkpoint-" + std::to_string(checkpointId) : "snapshot-" + n);
  std::error_code ec;
  fs::remove_all(dir, ec);  // left from an earlier try of the same id
  newSnapshotDirectory(dir.string(), impl_->description);
  RemoveOnFailure cleanup{dir};
  createCheckpoint(db, dir, impl_->description);
  std::map<std::string, StateMetaInfo> states;
  for (const auto& [name, cf] : impl_->columnFamilies) {
    if (cf->isState) states.emplace(name, cf->meta);
  }
  auto copy = std::make_shared<CopyWithWrites>(
      dir, work / ("snapshot-writes-" + n), native, checkpointId, std::move(states),
      impl_->resources, impl_->workDir, params(), impl_->description, cfTuning(impl_->tuning));
  cleanup.armed = false;
  return copy;
}

void RocksDbKeyedStateBackend::spillPending(CopyWithWrites& copy) {
  Impl& m = *impl_;
  try {
    copy.writes().append(m.pending, m.pendingBytes);
  } catch (...) {
    discardPending();
    throw;
  }
  discardPending();
}

void RocksDbKeyedStateBackend::discardPending() {
  impl_->pending.clear();
  impl_->pendingBytes.clear();
}

RocksDbKeyedStateBackend::IncrementalSnapshotHandle RocksDbKeyedStateBackend::finishNative(
    CopyWithWrites& copy) {
  try {
    copy.open(true);
    copy.close();
  } catch (...) {
    try {
      copy.close();  // its memtables and table readers go now, not with the writer
    } catch (const std::exception& e) {
      log::warn("{}", e.what());
    }
    throw;
  }
  IncrementalSnapshotHandle handle;
  handle.checkpointId = copy.checkpointId();
  handle.keyGroupRange = copy.params().keyGroupRange;
  handle.keySchema = copy.params().keySchema;
  handle.maxParallelism = copy.params().maxParallelism;
  for (const auto& [name, meta] : copy.states()) handle.states.push_back(meta);
  describeSnapshotDirectory(copy.dir(), handle, nullptr);
  return handle;
}

namespace {

// snapshotWith()'s canonical snapshot: the staging copy, opened with the
// writes when written.
class RocksDbCopySnapshot final : public KeyedStateSnapshot {
 public:
  using Copy = std::shared_ptr<RocksDbKeyedStateBackend::CopyWithWrites>;
  explicit RocksDbCopySnapshot(Copy copy) : copy_(std::move(copy)) {}

  KeyedSnapshotInfo writeTo(std::ostream& out) override;

 private:
  static KeyedSnapshotInfo write(RocksDbKeyedStateBackend::CopyWithWrites& copy, std::ostream& out);
  Copy copy_;                 // removed once written (or failed)
  std::exception_ptr error_;  // why it failed, for a second try
};

KeyedSnapshotInfo RocksDbCopySnapshot::writeTo(std::ostream& out) {
  if (error_ != nullptr) std::rethrow_exception(error_);
  if (copy_ == nullptr) {
    throw SluiceException("a RocksDB keyed state snapshot can be written only once");
  }
  // Written once, whatever happens: the copy goes when this returns.
  const Copy copy = std::move(copy_);
  try {
    return write(*copy, out);
  } catch (...) {
    error_ = std::current_exception();
    throw;
  }
}

KeyedSnapshotInfo RocksDbCopySnapshot::write(RocksDbKeyedStateBackend::CopyWithWrites& copy,
                                             std::ostream& out) {
  copy.open(false);
  std::vector<SnapshotState> states;
  for (const auto& [name, meta] : copy.states()) {
    rocksdb::ColumnFamilyHandle* handle = copy.handle(name);
    if (handle == nullptr) {
      throw SluiceException(copy.what(name) + " is missing from RocksDB's checkpoint in '" +
                            copy.dir().string() + "'");
    }
    states.push_back({handle, meta, copy.what(name)});
  }
  if (states.size() >= 0xFFFF) {
    throw SluiceException("a RocksDB snapshot holds at most 65534 states, not " +
                          std::to_string(states.size()));
  }
  return writeCanonical(copy.db(), nullptr, states, copy.params(), out);
}

}  // namespace

std::unique_ptr<StateSnapshotWriter> RocksDbKeyedStateBackend::nativeSnapshotWith(
    std::shared_ptr<CopyWithWrites> copy) {
  if (!copy->native()) {
    throw SluiceException("snapshot of " + impl_->description +
                          ": a copy begun for a canonical snapshot taken as a native one");
  }
  copy->writes().close();
  std::string directory = copy->dir().string();
  return lazyNativeWriter(std::move(directory), [copy] { return finishNative(*copy); });
}

std::unique_ptr<KeyedStateSnapshot> RocksDbKeyedStateBackend::snapshotWith(
    std::shared_ptr<CopyWithWrites> copy) {
  if (copy->native()) {
    throw SluiceException("snapshot of " + impl_->description +
                          ": a copy begun for a native snapshot taken as a canonical one");
  }
  copy->writes().close();
  return std::make_unique<RocksDbCopySnapshot>(std::move(copy));
}

}  // namespace sluice
