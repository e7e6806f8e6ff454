// TieredKeyedStateBackend ("tiered"): keyed state in a memory-bounded cache
// of heap-format entries in front of a RocksDB backend.
//
// Tiers. Each registered state has one cache table per key group, as the
// hashmap backend has (heap_state.h): an ObjectTable from the entry key,
// [serialized key | serialized namespace], to the stored object inline in the
// slot: the value, an ErasedVector of list elements, or an ErasedMap of the
// map's cached user keys (runtime_types.h). Each object is preceded by a small
// header (CachedType): its estimated heap bytes and flags. Behind the cache is
// a RocksDbKeyedStateBackend (the rocksdb backend itself, in its own working
// directory, its memory from managed memory), which holds every entry in the
// rocksdb backend's layout: one column family per state, keys [key group |
// key | namespace (| user key)], values in snapshot.h's bytes, except that
// its SST files are uncompressed and its memtables have bloom filters and
// insert hints per key group (RocksDbKeyedStateBackend::Tuning). RocksDB is
// the truth for every entry the cache does not hold or holds clean.
//
// Reads. An access finds its entry in the cache (a hit costs what the
// hashmap backend's access costs, plus counting the use) or loads it from
// RocksDB (one Get, deserialized into a new cache entry). A key RocksDB does
// not have is cached as absent, so repeated reads of a missing key, and the
// first update of a new one, do not go to RocksDB again.
//
// Writes change the cached object and mark the entry dirty; RocksDB sees
// them when the entry is evicted or flush() is called (snapshots copy the
// changes without writing them back; see below). A list
// add() to a key that is not cached does not read the list: the entry starts
// append-only, holding just the new elements, which are written back as a
// merge operand (the rocksdb backend's list-append merge operator); a
// complete cached list that was only appended to since it was loaded writes
// back only its new tail, also as a merge. Map entries cache user keys one
// by one (each with its own dirty flag, removed ones as tombstones) and know
// whether they hold every user key of the map ("complete": after clear(), or
// an isEmpty() that found none). Map iteration writes the entry's dirty user
// keys back and iterates RocksDB, as the rocksdb backend does.
//
// Memory. The backend counts what the cache holds: every group table's
// allocation (control bytes and slots, i.e. the key bytes, the header and
// each object's inline bytes, at the table's capacity), plus per entry an
// estimate of the heap memory its object owns: 0 for arithmetic types (also
// TTL-wrapped), otherwise the object's serialized size plus 16 bytes (one
// allocation), measured on every write; for a list its element array plus
// each element's estimate; for a map its bucket array and, per node, the
// node's allocation plus the user key's and value's estimates; and keys
// longer than 31 bytes. Before a change adds memory, the backend makes room
// by evicting, so the count stays within KeyedBackendParams::
// tieredMemoryBytes. Not counted (fixed overhead): the backend and storage
// objects and their scratch buffers, one entry being decoded, the RocksDB
// write batch of one eviction round, and RocksDB itself (its block cache and
// memtables come from managed memory, as for the rocksdb backend).
//
// Eviction. Each entry counts its uses since it was last looked at, up to
// 3 (GCLOCK: frequently used entries survive longer than with one reference
// bit, which suits skewed keys). A value entry's uses start at 0: the
// access that loads or creates it, and the put() of a read-modify-write
// after its get(), do not count, so a key read once goes before one read
// again. Entries come in two classes, as the two FIFO queues of S3-FIFO
// (Yang et al., SOSP 2023) do, here on one CLOCK: an entry starts on
// probation unless the ghost (tiered::Ghost: fingerprints of the entries
// recently evicted on probation) remembers it, in which case it starts
// proven. Where entries are evicted, a CLOCK hand looks at them:
//   - on probation: with uses, it becomes proven and loses one; without,
//     it is evicted and remembered by the ghost;
//   - proven: with uses, it loses one; without, it is evicted, but only
//     while at most a tenth of its key group's entries in this state are on
//     probation (CacheTable counts them per group); otherwise the hand
//     passes it.
// So keys used once are evicted quickly, without pushing out the keys that
// are used again, and a key that comes back soon after its eviction is
// kept the next time. Evicting means writing back to RocksDB when dirty
// and removing. The ghost has about an eighth as many slots as there are
// cached entries (a power of two, at most a 32nd of the budget, none before
// the first eviction), 2 bytes each, counted in the budget. There are two
// hands:
//   - A group table that is full (7/8 of its slots) does not double while
//     the budget has no room for that: its own hand evicts a quarter of its
//     slots' worth of entries instead, and the table is rebuilt without
//     them in one pass (cheaper than a backward shift per entry). So the
//     budget buys slots that are used; otherwise, with capacities doubling,
//     the tables of a full budget would mostly be half empty. For entries
//     that own no heap memory this is all the eviction there is.
//   - When a change needs more memory than is free, the backend's hand
//     walks the slots of all tables in stripes (the first 1/64 of every
//     group table of every state, then the next 1/64, ...: evicting a
//     group at a time would leave that group's table sparse while the
//     others grow) and frees what the change needs plus 1/64 of the budget.
//     Sparse group tables are shrunk, empty ones freed.
// Each round's write-backs go to RocksDB in one sorted WriteBatch.
//
// Each storage pins the key group of its last access: eviction by other
// storages leaves pinned groups alone, so a pointer a storage returned
// stays valid until its next call (the state_storage.h contract) and the
// slot an access is working on does not move. The count can therefore
// exceed the budget only by what the pinned groups hold when nothing else
// is left to evict.
//
// Snapshots. snapshot() and nativeSnapshot() do not write the dirty entries
// back. Their synchronous part serializes each dirty entry's changes (what
// its write-back would write: a put, a removal or a list's merge) into a
// file of RocksDB's working directory, a batch at a time, leaving the
// entry dirty and RocksDB as it is, and has RocksDB make a checkpoint of
// itself in a staging directory (its memtables flushed, SST files
// hard-linked). When the snapshot is written, on the I/O thread, that copy
// is opened and the changes are written into it
// (RocksDbKeyedStateBackend::snapshotWith()): the copy is the canonical
// snapshot's source, or the native (incremental) snapshot itself, whose
// files the rocksdb backend restores too, and the other way round. The
// task thread's part is a walk over the cache and sequential writes of the
// dirty entries' bytes, not RocksDB writes. Entries dirty at several
// checkpoints are written into each one's copy. Restores load RocksDB; the
// cache starts empty.
//
// Time to live works as on the other backends: the TTL decorators
// (ttl_state.h) wrap these storages, RocksDB's compaction filter and the
// full-snapshot filter are the rocksdb backend's.
//
// Threading: task thread only, except KeyedStateSnapshot::writeTo(). Storages
// must not be used after the backend's dispose().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/state/keyed_state_backend.h>
#include <sluice/state/snapshot.h>
#include <sluice/state/state_storage.h>
#include <sluice/state/state_type.h>

#include "state/heap_state.h"
#include "state/rocksdb_keyed_backend.h"
#include "state/runtime_types.h"

namespace sluice {

class TieredKeyedStateBackend;

namespace tiered {

// Entry flags (Header::flags; map user keys use kDirty, kPresent, kStored).
// The two low bits count uses (0-3, saturating): every access adds one, the
// CLOCK hand takes one each time it passes, and evicts an entry at 0. So an
// entry used often survives several passes of the hand (GCLOCK), which keeps
// the frequently used keys of a skewed workload better than a single
// reference bit would.
inline constexpr uint8_t kUseMask = 3;
inline constexpr uint8_t kDirty = 4;      // holds changes RocksDB does not have
inline constexpr uint8_t kPresent = 8;    // values, user keys: has a value (else cached absent)
inline constexpr uint8_t kStored = 16;    // RocksDB may hold data for this entry
inline constexpr uint8_t kComplete = 32;  // list: holds the whole list; map: every user key
inline constexpr uint8_t kRewrite = 64;   // list: written back whole, not as a tail
inline constexpr uint8_t kVictim = 128;   // chosen for eviction, about to be removed
// One use, for new entries.
inline constexpr uint8_t kRef = 1;

// In front of every cached object (and every cached map value).
struct Header {
  uint32_t charge = 0;  // estimated heap bytes the object owns
  uint8_t flags = 0;
  // 0: on probation (new, or loaded, and not used again since); 1: proven,
  // i.e. used again while cached, or loaded again soon after its eviction
  // (S3-FIFO's small and main queues; see the file comment, "Eviction").
  uint8_t proven = 0;
  uint8_t unused[2] = {};
};
static_assert(sizeof(Header) == 8);

// Fingerprints of entries recently evicted while on probation (S3-FIFO's
// ghost queue, approximated): a direct-mapped array of 16-bit
// fingerprints (15 bits of hash each). Each eviction overwrites one slot,
// so an entry is forgotten after about as many evictions as there are
// slots; a false positive (one in 32,768 per lookup of an occupied slot)
// only admits an entry as proven.
class Ghost {
 public:
  size_t slots() const { return fingerprints_.size(); }
  int64_t bytes() const { return static_cast<int64_t>(slots() * sizeof(uint16_t)); }
  // Forgets everything; `slots` is 0 or a power of two.
  void reset(size_t slots);
  // `hash`: a well-mixed 64-bit hash of the entry (state, group and key).
  void add(uint64_t hash) {
    if (!fingerprints_.empty()) fingerprints_[hash >> shift_] = fingerprint(hash);
  }
  bool contains(uint64_t hash) const {
    return !fingerprints_.empty() && fingerprints_[hash >> shift_] == fingerprint(hash);
  }

 private:
  // Never 0, which marks a slot nothing was evicted into.
  static uint16_t fingerprint(uint64_t hash) { return static_cast<uint16_t>(hash | 1); }
  std::vector<uint16_t> fingerprints_;
  int shift_ = 63;
};

// One heap allocation's bookkeeping, as counted.
inline constexpr int64_t kAllocationOverhead = 16;

// Counts a use of the entry with header `h`.
inline void touch(Header& h) {
  if ((h.flags & kUseMask) != kUseMask) ++h.flags;
}

// Keys longer than KeyBytes::kMaxInline live on the heap.
inline int64_t keyCharge(size_t keySize) {
  return keySize > heap::KeyBytes::kMaxInline ? static_cast<int64_t>(keySize) + kAllocationOverhead
                                              : 0;
}

// A list's element array of `capacity` elements, as counted.
inline int64_t arrayBytes(const internal::ListType& list, size_t capacity) {
  return capacity == 0
             ? 0
             : static_cast<int64_t>(capacity * list.element().size()) + kAllocationOverhead;
}
inline int64_t arrayBytes(const internal::ListType& list, const void* object) {
  return arrayBytes(list, static_cast<const internal::ErasedVector*>(object)->capacity);
}

// A map's bucket array, as counted.
inline int64_t bucketBytes(const void* map) {
  const auto* m = static_cast<const internal::ErasedMap*>(map);
  return m->bucketCount == 0
             ? 0
             : static_cast<int64_t>(m->bucketCount * sizeof(void*)) + kAllocationOverhead;
}

// A charge as a Header stores it; throws for an entry of 4 GiB or more.
uint32_t toCharge(int64_t bytes);

// An object of `inner` with a Header in front: [Header | object], and for
// list entries [Header | u32 stored elements | u32 unused | object]. The
// stored-elements count says how many leading elements RocksDB already holds
// (a list only appended to since then writes back just the rest).
class CachedType final : public internal::StateType {
 public:
  CachedType(std::shared_ptr<const internal::StateType> inner, bool listHeader);
  const internal::StateType& inner() const { return *inner_; }

  static Header& header(void* entry) { return *static_cast<Header*>(entry); }
  static const Header& header(const void* entry) { return *static_cast<const Header*>(entry); }
  static uint32_t& storedElements(void* entry) {
    return *reinterpret_cast<uint32_t*>(static_cast<char*>(entry) + sizeof(Header));
  }
  void* object(void* entry) const { return static_cast<char*>(entry) + offset_; }
  const void* object(const void* entry) const { return static_cast<const char*>(entry) + offset_; }

  void construct(void* at) const override;
  void copyConstruct(void* at, const void* from) const override;
  void moveConstruct(void* at, void* from) const override;
  void destroy(void* at) const noexcept override;
  void copyAssign(void* to, const void* from) const override;
  void moveAssign(void* to, void* from) const override;
  // Cache entries are never serialized whole: these assert.
  void serialize(const void* value, DataOutputView& out) const override;
  void deserialize(void* into, DataInputView& in) const override;
  std::string schema() const override;
  bool sameAs(const StateType& other) const override;

 private:
  std::shared_ptr<const internal::StateType> inner_;
  size_t headerBytes_;
  size_t offset_;
};

// Estimates the heap bytes an object of one type owns (see the file
// comment): nothing for arithmetic types, else its serialized size + 16.
class SizeEstimator {
 public:
  explicit SizeEstimator(const internal::StateType& type);
  bool heapFree() const { return heapFree_; }
  uint32_t operator()(const void* object) { return heapFree_ ? 0 : ofSerialized(measure(object)); }
  // The estimate of an object whose serialized form has `n` bytes.
  uint32_t ofSerialized(size_t n) const;

 private:
  size_t measure(const void* object);
  const internal::StateType& type_;
  bool heapFree_;
  std::vector<uint8_t> overflow_;
};

// What a state's cache table stores and how it maps to RocksDB.
struct Layout {
  StateStorage storage = StateStorage::kValue;
  std::shared_ptr<const internal::StateType> ns;
  std::shared_ptr<const internal::StateType> value;    // value, list element, map user value
  std::shared_ptr<const internal::StateType> userKey;  // map state only
  bool sameAs(const Layout& o) const;
};

// The cache of one state: a table per key group, and how its entries are
// written back. Owned by the backend and shared with the state's storages
// (which register their pins here).
class CacheTable {
 public:
  CacheTable(TieredKeyedStateBackend& backend, StateMetaInfo meta, Layout layout,
             RocksDbKeyedStateBackend::ColumnFamily& cf, size_t numGroups);
  CacheTable(const CacheTable&) = delete;
  CacheTable& operator=(const CacheTable&) = delete;

  const StateMetaInfo& meta() const { return meta_; }
  const Layout& layout() const { return layout_; }
  RocksDbKeyedStateBackend::ColumnFamily& columnFamily() const { return cf_; }
  // The type of the slots' objects: [Header | stored object].
  const CachedType& entryType() const { return *entry_; }
  // The stored object's type: the value type, a ListType or a MapType whose
  // values are CachedTypes of the user value (mapValueType()).
  const internal::StateType& storedType() const { return entry_->inner(); }
  const internal::ListType& listType() const {
    return static_cast<const internal::ListType&>(entry_->inner());
  }
  const internal::MapType& mapType() const {
    return static_cast<const internal::MapType&>(entry_->inner());
  }
  const CachedType& mapValueType() const { return *mapValue_; }

  // The entry (Header and object) in a slot of this table's group tables.
  void* entry(char* slot) const { return slot + entryOffset_; }
  static const heap::KeyBytes& keyOf(const char* slot) { return heap::ObjectTable::keyOf(slot); }

  heap::ObjectTable* group(size_t g) const { return groups_[g].get(); }
  // The slot of `key` in group `g`, or null.
  char* find(size_t g, std::string_view key) const {
    const heap::ObjectTable* t = groups_[g].get();
    return t == nullptr ? nullptr : t->find(key);
  }
  // Inserts a fresh entry (default object, flags and charge 0; proven when
  // the ghost remembers it, else on probation) for `key`, which group `g`
  // must not hold, after making room for it and for `objectCharge` more
  // bytes the caller charges once it has filled the object. The caller has
  // pinned `g`.
  char* insert(size_t g, std::string_view key, int64_t objectCharge);
  // Removes the entry of `key` from group `g` (no write-back), uncharging it.
  void erase(size_t g, std::string_view key);
  // Changes whenever a slot pointer of this table may have become invalid.
  uint64_t epoch() const { return epoch_; }

  // [key group | entry key], the entry's RocksDB key, in a reused buffer.
  std::string_view rocksKey(size_t g, std::string_view entryKey);

  // What a write-back is for.
  enum class WriteBack {
    kFlush,     // the entry stays cached, clean
    kEvict,     // the entry is about to be removed (an append-only list
                // keeps its elements)
    kSnapshot,  // for a snapshot, which adds the writes to a copy of
                // RocksDB: the entry and RocksDB stay as they are
  };
  // Writes a dirty entry's changes to the backend's pending RocksDB batch
  // and, unless for a snapshot, marks it clean.
  void writeBack(size_t g, char* slot, WriteBack why);
  // Writes every dirty entry back (the batch in chunks); entries stay cached.
  void flush();
  // Appends the changes of every dirty entry to `copy`'s writes, a batch
  // at a time (WriteBack::kSnapshot); changes nothing.
  void collectForSnapshot(RocksDbKeyedStateBackend::CopyWithWrites& copy);
  // Whether any entry is dirty (stops at the first).
  bool anyDirty() const;

  // The ghost's hash of the entry `key` of group `g` of this state.
  uint64_t ghostHash(size_t g, std::string_view key) const {
    return (heap::BytesHash{}(key) ^ salt_ ^ (g * 0xd6e8feb86659fd93ULL)) * 0x9E3779B97F4A7C15ULL;
  }

  // A storage's pinned group (SIZE_MAX: none), registered while it lives.
  void addPin(const size_t* pin) { pins_.push_back(pin); }
  void removePin(const size_t* pin);
  bool pinned(size_t g) const {
    for (const size_t* p : pins_) {
      if (*p == g) return true;
    }
    return false;
  }

  // Bytes of one group table's allocation, as counted.
  static int64_t tableBytes(const heap::ObjectTable& t) {
    return static_cast<int64_t>(t.allocatedBytes()) + kTableOverhead;
  }

 private:
  friend class sluice::TieredKeyedStateBackend;
  // The ObjectTable object and its two allocations' headers.
  static constexpr int64_t kTableOverhead = static_cast<int64_t>(sizeof(heap::ObjectTable)) + 48;

  void encodeList(const void* list, size_t from, std::vector<uint8_t>& out) const;
  // Calls f(group index, slot) for every cached entry.
  template <class F>
  void forEachEntry(F&& f);

  TieredKeyedStateBackend& backend_;
  StateMetaInfo meta_;
  Layout layout_;
  RocksDbKeyedStateBackend::ColumnFamily& cf_;
  std::shared_ptr<const CachedType> mapValue_;  // maps only
  std::shared_ptr<const CachedType> entry_;     // outlives the tables below
  size_t entryOffset_;                          // as ObjectTable::objectOf's
  int64_t newTableBytes_;                       // a new group table, as counted
  std::vector<std::unique_ptr<heap::ObjectTable>> groups_;
  std::vector<const size_t*> pins_;
  std::vector<size_t> localHands_;     // per group: where evictInGroup() goes on
  std::vector<uint32_t> onProbation_;  // per group: entries on probation
  uint64_t salt_;                      // tells this state's entries apart in the ghost
  uint64_t epoch_ = 0;
  std::string keyBuf_;
  std::vector<uint8_t> valueBuf_;
};

}  // namespace tiered

class TieredKeyedStateBackend final : public KeyedStateBackend {
 public:
  // Creates the RocksDB backend behind the cache (its working directory and
  // database). Throws SluiceException when tieredMemoryBytes is not
  // positive or RocksDB cannot start.
  explicit TieredKeyedStateBackend(KeyedBackendParams params);
  ~TieredKeyedStateBackend() override;

  const char* name() const override { return "tiered"; }
  // RocksDB's canonical snapshot with the dirty entries on top (see the
  // file comment).
  std::unique_ptr<KeyedStateSnapshot> snapshot() override;
  void restore(const std::vector<const CanonicalSnapshotReader*>& snapshots) override;
  void forEachKey(const std::string& stateName,
                  const std::function<void(std::string_view key, int32_t keyGroup)>& fn) override;
  void dispose() override;
  // RocksDB's native snapshot with the dirty entries on top.
  std::unique_ptr<StateSnapshotWriter> nativeSnapshot(int64_t checkpointId) override;
  // Native snapshots of the tiered or the rocksdb backend.
  void restoreNative(const std::vector<KeyedStateHandleRef>& handles) override;

  std::unique_ptr<internal::ValueStorage> createValueStorage(const StateMetaInfo& meta,
                                                             StorageTypes types) override;
  std::unique_ptr<internal::ListStorage> createListStorage(const StateMetaInfo& meta,
                                                           StorageTypes types) override;
  std::unique_ptr<internal::MapStorage> createMapStorage(const StateMetaInfo& meta,
                                                         StorageTypes types) override;

  // What the cache holds and has done, for tests, benchmarks and metrics.
  struct CacheStats {
    int64_t budgetBytes = 0;
    int64_t usedBytes = 0;      // as counted (see the file comment)
    int64_t peakUsedBytes = 0;  // the most usedBytes has been
    int64_t entries = 0;        // cached entries, absent ones included
    int64_t loads = 0;          // reads that went to RocksDB
    int64_t evictions = 0;      // entries evicted
    int64_t writeBacks = 0;     // dirty entries written to RocksDB
    int64_t evictionRounds = 0;
  };
  CacheStats cacheStats() const;
  // Writes every dirty entry back (for tests and benchmarks; snapshots do
  // not).
  void flush();
  // Writes every dirty entry back and drops every entry, the pinned ones
  // too: pointers the storages returned are invalid afterwards. For tests
  // and benchmarks, between accesses.
  void evictAll();
  // The RocksDB backend behind the cache.
  RocksDbKeyedStateBackend& rocksDb() { return *rocks_; }

  // --- used by the storages (tiered_state.cc) ---------------------------------

  // The cache table of state `meta.name`, created (with its column family)
  // on first use; registers `meta` when that has not happened yet. Throws
  // when the name is in use with another layout or an incompatible meta.
  std::shared_ptr<tiered::CacheTable> table(const StateMetaInfo& meta, tiered::Layout layout);
  // The index of the current key's group within the range. Throws when no
  // key is set, or after dispose().
  size_t currentGroupIndex() const {
    const auto g = static_cast<size_t>(currentKeyGroup() - keyGroupRange().startKeyGroup);
    if (g >= liveGroups_) [[unlikely]]
      failNoCurrentKey();
    return g;
  }
  // Makes room (evicts) so that `bytes` more stay within the budget.
  void reserve(int64_t bytes) {
    if (used_ + bytes > budget_) [[unlikely]]
      makeRoom(bytes);
  }
  // Whether `bytes` more stay within the budget without evicting.
  bool fits(int64_t bytes) const { return used_ + bytes <= budget_; }
  // Makes room in the full group `g` of `t` for inserts without growing
  // it, evicting its least recently used entries (CLOCK within the group),
  // unless another storage pins the group. Returns whether it did.
  bool evictInGroup(tiered::CacheTable& t, size_t g);
  // Counts `delta` more (or fewer) bytes held.
  void charge(int64_t delta) {
    used_ += delta;
    if (used_ > peak_) peak_ = used_;
  }
  // Whether the ghost remembers the entry of hash `h` (CacheTable::ghostHash).
  bool inGhost(uint64_t h) const { return ghost_.contains(h); }
  // Resizes the ghost when the last eviction round asked for that, making
  // room for it first. Call where reserve() may evict.
  void resizeGhostIfPlanned() {
    if (ghostPlanned_ != ghost_.slots()) [[unlikely]]
      resizeGhost();
  }
  void countLoad() { ++loads_; }
  void countWriteBack() { ++writeBacks_; }
  // Scratch space for reading RocksDB values.
  std::string& readBuffer() { return readBuf_; }

 private:
  // Whether any cached entry is dirty.
  bool anyDirty() const;
  // A staging copy of RocksDB (for a native snapshot of `checkpointId`
  // when `native`) with the changes of every dirty entry to add to it; the
  // entries stay dirty. What eviction collected is written to RocksDB first.
  std::shared_ptr<RocksDbKeyedStateBackend::CopyWithWrites> withDirtyEntries(bool native,
                                                                             int64_t checkpointId);
  void makeRoom(int64_t bytes);
  // What the hand does with the entry of header `h` (see the file comment,
  // "Eviction"): returns whether to evict it; remembers an entry evicted on
  // probation in the ghost. `evictProven`: whether proven entries without
  // uses may go (few entries of the group on probation).
  bool pass(tiered::CacheTable& t, size_t g, const char* slot, tiered::Header& h, bool evictProven);
  // Sets the ghost's size for the entries now cached (applied by the next
  // resizeGhostIfPlanned()), once per tables x groups evictions: counting
  // the entries walks every group table.
  void planGhost();
  void resizeGhost();
  // Evicts entries of slots [from, to) of group `g` of `t` (none when the
  // group is pinned) until `want` bytes are freed; returns the bytes freed
  // and sets `next` to the slot to continue with, or to SIZE_MAX when the
  // range is done.
  int64_t evictRange(tiered::CacheTable& t, size_t g, size_t from, size_t to, int64_t want,
                     size_t& next);
  // Frees group `g`'s table when empty, or shrinks it when sparse; returns
  // the bytes freed.
  int64_t shrink(tiered::CacheTable& t, size_t g);
  void adoptRestoredStates();
  [[noreturn]] void failNoCurrentKey() const;
  [[noreturn]] void failTableType(const StateMetaInfo& meta) const;

  std::unique_ptr<RocksDbKeyedStateBackend> rocks_;
  size_t numGroups_;
  size_t liveGroups_;  // numGroups_, or 0 once disposed
  int64_t budget_;
  int64_t slack_;  // extra bytes an eviction round frees
  int64_t used_ = 0;
  int64_t peak_ = 0;
  // In creation order: the CLOCK hand walks them so.
  std::vector<std::shared_ptr<tiered::CacheTable>> tables_;
  std::map<std::string, std::shared_ptr<tiered::CacheTable>> byName_;
  // The CLOCK hand sweeps stripes: the first 1/kStripes of the slots of
  // every group of every table, then the next, so that eviction thins all
  // group tables alike and none is left sparse while others grow.
  static constexpr size_t kStripes = 64;
  struct Hand {
    size_t stripe = 0;
    size_t table = 0;
    size_t group = 0;
    size_t slot = 0;  // within the stripe, where the last round stopped
  } hand_;
  int64_t loads_ = 0;
  int64_t evictions_ = 0;
  int64_t writeBacks_ = 0;
  int64_t evictionRounds_ = 0;
  std::string readBuf_;
  std::vector<size_t> victims_;  // evictRange's slots to remove, reused
  tiered::Ghost ghost_;
  size_t ghostPlanned_ = 0;    // the ghost's slots after its next resize
  int64_t nextGhostPlan_ = 0;  // planGhost() counts entries at these evictions
};

}  // namespace sluice
