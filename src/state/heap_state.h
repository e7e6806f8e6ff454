// HashMapKeyedStateBackend: keyed state as objects on the heap, with
// asynchronous snapshots by copy-on-write.
//
// Storage. Every registered state has one table per key group of the
// backend's range: an open-addressing ObjectTable from the entry key,
// [serialized key | serialized namespace], kept in a 32-byte KeyBytes (inline
// up to 31 bytes), to the stored object, inline in the slot: the value for
// value, reducing and aggregating state, an ErasedVector of elements for list
// state, an ErasedMap of user keys (hashed with Java's hashCode) to values for
// map state (runtime_types.h). The tables know their objects only through
// StateTypes, so this backend is compiled once for every type. VoidNamespace
// adds no bytes, so a plain keyed state looks up the current key's bytes as
// they are (no string is built per access); other namespaces are serialized
// once per setNamespace() and appended to the key in a reused buffer.
//
// Snapshots (copy-on-write per key group). Each key-group table is held by a
// std::shared_ptr together with a count of the snapshots that still have to
// read it. snapshot() (task thread, short) copies the shared_ptrs of every
// table of every state and counts itself in; the KeyedStateSnapshot it
// returns then serializes those frozen tables to the canonical format
// (snapshot.h) on any thread, and counts itself out of each table once it
// has written it (release). Before the task thread modifies a table it reads
// that count (acquire): when a snapshot still has to read the table, the task
// clones it first and modifies the clone, so the snapshot keeps seeing the
// contents it was taken with. (The count plays the role of use_count() > 1,
// but with the acquire/release ordering spelled out.) A table is cloned at
// most once per snapshot, and only when it is written before the snapshot
// has written it. Reads never clone.
//
// Restore. restore() keeps the canonical entries of the backend's key groups
// as bytes, per state name. A state's entries are deserialized into its tables
// when the state is registered (its first storage is created); a restored
// state that is never registered is carried into every later snapshot
// unchanged.
//
// Time to live. With meta.ttlMillis > 0 and meta.ttlCleanupFullSnapshot,
// entries expired at the time of snapshot() are left out of the snapshot.
//
// Threading: task thread only, except KeyedStateSnapshot::writeTo(). Storages
// keep references to their backend and must not be used after the backend's
// dispose().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sluice/core/key_hash.h>
#include <sluice/core/serializer.h>
#include <sluice/state/keyed_state_backend.h>
#include <sluice/state/snapshot.h>
#include <sluice/state/state_storage.h>
#include <sluice/state/state_type.h>

#include "state/runtime_types.h"

namespace sluice {

class HashMapKeyedStateBackend;

namespace heap {

// An entry key's bytes, as stored in a table: up to 31 bytes inline (int64
// and int32 keys of VoidNamespace state, and an int64 key with a TimeWindow
// namespace, as window state has), longer keys on the heap. 32 bytes, so a
// window's state entry needs no allocation of its own, and int64 keys
// compare as one word without a library call.
class KeyBytes {
 public:
  static constexpr size_t kMaxInline = 31;
  KeyBytes() { std::memset(raw_, 0, sizeof(raw_)); }
  explicit KeyBytes(std::string_view s) { assign(s); }
  KeyBytes(const KeyBytes& o) { assign(o.view()); }
  KeyBytes(KeyBytes&& o) noexcept {
    std::memcpy(raw_, o.raw_, sizeof(raw_));
    std::memset(o.raw_, 0, sizeof(o.raw_));
  }
  KeyBytes& operator=(const KeyBytes& o) {
    if (this != &o) {
      release();
      assign(o.view());
    }
    return *this;
  }
  KeyBytes& operator=(KeyBytes&& o) noexcept {
    if (this != &o) {
      release();
      std::memcpy(raw_, o.raw_, sizeof(raw_));
      std::memset(o.raw_, 0, sizeof(o.raw_));
    }
    return *this;
  }
  ~KeyBytes() { release(); }

  bool isInline() const { return static_cast<uint8_t>(raw_[kMaxInline]) != kHeapTag; }
  size_t size() const { return isInline() ? static_cast<uint8_t>(raw_[kMaxInline]) : heapSize(); }
  const char* data() const { return isInline() ? raw_ : heapPtr(); }
  std::string_view view() const { return {data(), size()}; }

  // Always inlined (it runs on every probe of a lookup): 8-byte keys
  // (int64) compare as one word, 4-byte keys (int32) as one half, 24-byte
  // keys (int64 key + TimeWindow) as three words.
  [[gnu::always_inline]] friend inline bool operator==(const KeyBytes& a, std::string_view b) {
    const size_t n = b.size();
    if (n == 8) {
      if (static_cast<uint8_t>(a.raw_[kMaxInline]) != 8) return false;
      uint64_t x, y;
      std::memcpy(&x, a.raw_, 8);
      std::memcpy(&y, b.data(), 8);
      return x == y;
    }
    if (n == 24) {  // an int64 key in a TimeWindow namespace (window state)
      if (static_cast<uint8_t>(a.raw_[kMaxInline]) != 24) return false;
      uint64_t x[3], y[3];
      std::memcpy(x, a.raw_, 24);
      std::memcpy(y, b.data(), 24);
      return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2])) == 0;
    }
    if (n == 4) {
      if (static_cast<uint8_t>(a.raw_[kMaxInline]) != 4) return false;
      uint32_t x, y;
      std::memcpy(&x, a.raw_, 4);
      std::memcpy(&y, b.data(), 4);
      return x == y;
    }
    return equalsSlow(a, b);
  }
  friend bool operator==(const KeyBytes& a, const KeyBytes& b) { return a == b.view(); }

 private:
  static constexpr uint8_t kHeapTag = 0xFF;
  static bool equalsSlow(const KeyBytes& a, std::string_view b) {
    const size_t n = b.size();
    if (n <= kMaxInline) {
      if (static_cast<uint8_t>(a.raw_[kMaxInline]) != n) return false;
      return n == 0 || std::memcmp(a.raw_, b.data(), n) == 0;
    }
    return !a.isInline() && a.heapSize() == n && std::memcmp(a.heapPtr(), b.data(), n) == 0;
  }
  void assign(std::string_view s) {
    std::memset(raw_, 0, sizeof(raw_));
    if (s.size() <= kMaxInline) {
      if (!s.empty()) std::memcpy(raw_, s.data(), s.size());
      raw_[kMaxInline] = static_cast<char>(s.size());
    } else {
      if (s.size() > UINT32_MAX) throw SluiceException("a state entry key exceeds 4 GiB");
      // Owned by this object: released in release().
      char* p = std::allocator<char>().allocate(s.size());
      std::memcpy(p, s.data(), s.size());
      const auto n = static_cast<uint32_t>(s.size());
      std::memcpy(raw_, &p, sizeof(p));
      std::memcpy(raw_ + 8, &n, sizeof(n));
      raw_[kMaxInline] = static_cast<char>(kHeapTag);
    }
  }
  void release() {
    if (!isInline()) std::allocator<char>().deallocate(const_cast<char*>(heapPtr()), heapSize());
  }
  const char* heapPtr() const {
    char* p;
    std::memcpy(&p, raw_, sizeof(p));
    return p;
  }
  size_t heapSize() const {
    uint32_t n;
    std::memcpy(&n, raw_ + 8, sizeof(n));
    return n;
  }
  char raw_[kMaxInline + 1];
};

// Hash of entry-key bytes (8 bytes at a time, multiply-xorshift).
struct BytesHash {
  // Always inlined, with 8-byte keys (int64) as a straight-line case: it runs
  // on every lookup.
  [[gnu::always_inline]] uint64_t operator()(std::string_view s) const noexcept {
    if (s.size() == 8) {
      uint64_t w;
      std::memcpy(&w, s.data(), 8);
      uint64_t h = ((0x9E3779B97F4A7C15ULL ^ 8) ^ w) * 0xbf58476d1ce4e5b9ULL;
      return h ^ (h >> 31);
    }
    return hashSlow(s);
  }
  static uint64_t hashSlow(std::string_view s) noexcept {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ s.size();
    const char* p = s.data();
    size_t n = s.size();
    while (n >= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
      h ^= h >> 31;
      p += 8;
      n -= 8;
    }
    if (n != 0) {
      uint64_t w = 0;
      std::memcpy(&w, p, n);
      h = (h ^ w) * 0x94d049bb133111ebULL;
      h ^= h >> 29;
    }
    return h;
  }
  uint64_t operator()(const KeyBytes& s) const noexcept { return (*this)(s.view()); }
};

// An open-addressing hash table from KeyBytes to objects of one StateType,
// both inline in one array of slots ([KeyBytes | object], padded to the
// object's alignment). Probing as FlatHashMap: linear from the top bits of a
// Fibonacci-mixed hash, one control byte per slot (0 empty, else a tag),
// backward-shift deletion. Only occupied slots hold live objects. Slot
// pointers are valid until the next insertion or erase. Copying copies every
// object (the copy-on-write clone). Not thread-safe.
class ObjectTable {
 public:
  explicit ObjectTable(const internal::StateType& type, size_t initialCapacity = 16);
  ObjectTable(const ObjectTable& other);
  ObjectTable& operator=(const ObjectTable&) = delete;
  ~ObjectTable();

  static const KeyBytes& keyOf(const char* slot) {
    return *reinterpret_cast<const KeyBytes*>(slot);
  }
  void* objectOf(char* slot) const { return slot + objectOffset_; }
  const void* objectOf(const char* slot) const { return slot + objectOffset_; }

  // The slot of `key`, or null.
  [[gnu::always_inline]] char* find(std::string_view key) const {
    const uint64_t h = mix(BytesHash{}(key));
    const uint8_t tag = tagOf(h);
    for (size_t i = h >> shift_;; i = (i + 1) & mask_) {
      const uint8_t c = ctrl_[i];
      if (c == 0) return nullptr;
      char* slot = slots_ + i * stride_;
      if (c == tag && keyOf(slot) == key) return slot;
    }
  }
  // The slot of `key`, with a default-constructed object when it was absent
  // (the bool says so).
  std::pair<char*, bool> tryEmplace(std::string_view key);
  // Removes `key`; returns whether it was present.
  bool erase(std::string_view key);
  // Removes every entry; the capacity stays.
  void clear() noexcept;

  size_t size() const { return size_; }
  size_t capacity() const { return mask_ + 1; }

  // For walking a table slot by slot (the tiered backend's eviction): the
  // slot at index `i` < capacity(), or null when it is empty.
  char* slotAt(size_t i) const { return ctrl_[i] == 0 ? nullptr : slots_ + i * stride_; }
  // Removes the entry at index `i` (which must be occupied). Entries later
  // in its probe run may move back, possibly into `i`.
  void eraseAt(size_t i);
  // Removes the entries at `indices` (occupied, distinct, ascending). Each
  // probe run they break is repaired in one pass, where eraseAt() per entry
  // would walk the rest of the run (hashing every key in it) once per
  // removed entry: removing a stretch of neighbours that way is quadratic
  // in the run's length. Entries after the removed ones may move back.
  void eraseAll(const std::vector<size_t>& indices);
  // Whether inserting one more entry reallocates the table (doubling it).
  bool growsOnInsert() const { return size_ + 1 > capacity() - capacity() / 8; }
  // The bytes the table allocates at `capacity` slots (control bytes and
  // slots); allocatedBytes() at its current capacity.
  size_t bytesAt(size_t capacity) const { return capacity * (stride_ + 1); }
  size_t allocatedBytes() const { return bytesAt(capacity()); }
  // Moves every entry into a new array of `capacity` slots, a power of two
  // of at least 16 that keeps size() within the load limit (shrinking a
  // table that eviction left sparse).
  void rehash(size_t capacity);
  // rehash(), leaving out (destroying) the entries for whose slot `drop`
  // returns true: removing many entries in one pass, where erase() would
  // shift each one's probe run. What is kept must fit `capacity`.
  void rebuild(size_t capacity, const std::function<bool(const char* slot)>& drop);

  template <class F>
  void forEach(F&& f) const {
    for (size_t i = 0; i < capacity(); ++i) {
      if (ctrl_[i] != 0) {
        const char* slot = slots_ + i * stride_;
        f(keyOf(slot), objectOf(slot));
      }
    }
  }

 private:
  static uint64_t mix(uint64_t h) { return h * 0x9E3779B97F4A7C15ULL; }
  static uint8_t tagOf(uint64_t h) { return static_cast<uint8_t>(h | 0x80); }
  void allocate(size_t capacity);
  // Moves the entry in slot `from` (key, object and control byte) into the
  // free slot `to`; `from`'s control byte is left for the caller to set.
  void moveEntry(size_t from, size_t to);
  // Moves the key and object of the slot at `from` into the free slot at
  // `to` (in this table's array or another of the same stride), leaving
  // `from` destroyed; control bytes are the caller's.
  void moveSlot(char* from, char* to);
  void release() noexcept;

  const internal::StateType& type_;
  size_t objectOffset_;
  size_t stride_;
  size_t align_;
  uint8_t* ctrl_ = nullptr;
  char* slots_ = nullptr;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

// Where an access goes: the current key's group (index within the range) and
// its entry key.
struct Addr {
  size_t group;
  std::string_view key;
};

// A slot found by one access, for the next access of the same storage to
// reuse (value() then update() of one key): the slot (which holds its entry
// key), its group, and the table's epoch when it was found. The slot is only
// remembered when the task may write it in place (no snapshot still has to
// read its table).
struct SlotHint {
  char* slot = nullptr;
  uint64_t epoch = 0;
  size_t group = 0;
};

// The frozen tables of one state, taken by snapshot(); written later on any
// thread.
class StateSnapshotPart {
 public:
  virtual ~StateSnapshotPart() = default;
  // Writes the entries of the key group at `groupIndex` (from the start of
  // the range) as state `stateIndex`. `now` is the time of snapshot().
  virtual void writeKeyGroup(size_t groupIndex, uint16_t stateIndex,
                             CanonicalSnapshotWriter& writer, int64_t now) = 0;
};

// Applies TTL cleanup (meta.ttlCleanupFullSnapshot) to one entry on its way
// into a snapshot.
class SnapshotEntryFilter {
 public:
  explicit SnapshotEntryFilter(const StateMetaInfo& meta)
      : meta_(meta), active_(meta.ttlMillis > 0 && meta.ttlCleanupFullSnapshot) {}
  void write(CanonicalSnapshotWriter& writer, uint16_t stateIndex, std::string_view key,
             std::string_view value, int64_t now) {
    if (active_) {
      bool changed = false;
      if (!ttl::keepEntry(meta_, value, now, kept_, changed)) return;
      if (changed) value = kept_;
    }
    writer.writeEntry(stateIndex, key, value);
  }

 private:
  const StateMetaInfo& meta_;
  bool active_;
  std::string kept_;
};

// What a table stores per entry and how its entries map to the canonical
// format: one entry per value or list, one per user key of a map.
struct TableLayout {
  StateStorage storage = StateStorage::kValue;
  std::shared_ptr<const internal::StateType> ns;
  // The object in each slot: the value, a ListType or a MapType.
  std::shared_ptr<const internal::StateType> stored;
  bool sameAs(const TableLayout& o) const {
    return storage == o.storage && ns->sameAs(*o.ns) && stored->sameAs(*o.stored);
  }
};

// The tables of one state, one per key group, with copy-on-write snapshots.
class StateTable {
 public:
  StateTable(const KeyedBackendParams& params, StateMetaInfo meta, TableLayout layout,
             size_t numGroups);
  const StateMetaInfo& meta() const { return meta_; }
  const TableLayout& layout() const { return layout_; }
  const internal::StateType& storedType() const { return *layout_.stored; }

  // The stored object of `key` in group `g`, or null.
  const void* find(size_t g, std::string_view key) const {
    const Group* group = groups_[g].get();
    if (group == nullptr) return nullptr;
    const char* slot = group->table.find(key);
    return slot == nullptr ? nullptr : group->table.objectOf(slot);
  }
  // find(), remembering the slot in `hint` when the task may write it in
  // place.
  const void* find(Addr a, SlotHint& hint) {
    Group* group = groups_[a.group].get();
    if (group == nullptr) return nullptr;
    char* slot = group->table.find(a.key);
    if (slot == nullptr) return nullptr;
    if (group->pendingSnapshots.load(std::memory_order_acquire) == 0) {
      hint = SlotHint{slot, epoch_, a.group};
    }
    return group->table.objectOf(slot);
  }
  // getOrInsert(), reusing the slot in `hint` when it is still that of `a`
  // (no insertion, erase, table clone or snapshot since it was found), and
  // remembering the slot otherwise.
  void* getOrInsert(Addr a, SlotHint& hint) {
    if (hint.slot != nullptr && hint.epoch == epoch_ && hint.group == a.group &&
        ObjectTable::keyOf(hint.slot) == a.key) [[likely]] {
      return groups_[a.group]->table.objectOf(hint.slot);
    }
    ObjectTable& table = writable(a.group);
    auto [slot, inserted] = table.tryEmplace(a.key);
    if (inserted) ++epoch_;
    hint = SlotHint{slot, epoch_, a.group};
    return table.objectOf(slot);
  }
  // The object `hint` remembers while it is still valid (no insertion,
  // erase, table clone or snapshot since it was taken), else null.
  void* hinted(const SlotHint& hint) {
    if (hint.slot == nullptr || hint.epoch != epoch_) return nullptr;
    return groups_[hint.group]->table.objectOf(hint.slot);
  }
  // The same, for modification (clones a table a snapshot still has to read).
  void* findMutable(size_t g, std::string_view key) {
    if (find(g, key) == nullptr) return nullptr;
    ObjectTable& table = writable(g);
    return table.objectOf(table.find(key));
  }
  // The stored object of `key`, default-constructed when absent.
  void* getOrInsert(size_t g, std::string_view key) {
    ObjectTable& table = writable(g);
    auto [slot, inserted] = table.tryEmplace(key);
    if (inserted) ++epoch_;
    return table.objectOf(slot);
  }
  void erase(size_t g, std::string_view key) {
    if (find(g, key) == nullptr) return;
    writable(g).erase(key);
    ++epoch_;
  }
  // Removes every entry of every key group. A table a snapshot still has to
  // read is left to the snapshot; the others are emptied in place, keeping
  // their capacity for what comes next.
  void clear();
  const void* find(Addr a) const { return find(a.group, a.key); }
  void* getOrInsert(Addr a) { return getOrInsert(a.group, a.key); }
  void erase(Addr a) { erase(a.group, a.key); }

  // Synchronous part of a snapshot: shares the current key-group tables.
  std::unique_ptr<StateSnapshotPart> snapshot() const;
  // Adds one canonical entry of the key group at `g`. Throws
  // SerializationError when it does not decode exactly.
  void restoreEntry(size_t g, std::string_view key, std::string_view value);
  // Calls fn(entry key, group index) for every entry.
  void forEachEntryKey(const std::function<void(std::string_view, size_t)>& fn) const;

 private:
  // One key group's table.
  struct Group {
    explicit Group(std::shared_ptr<const internal::StateType> t)
        : type(std::move(t)), table(*type) {}
    Group(const Group& other) : type(other.type), table(other.table) {}
    // Outlives the objects in `table` (snapshots may hold the group longest).
    std::shared_ptr<const internal::StateType> type;
    ObjectTable table;
    // Snapshots taken of `table` that have not written it yet. Incremented
    // by the task thread in snapshot(), decremented (release) by the
    // snapshot once written or dropped; while not 0 the task must not
    // modify `table`.
    mutable std::atomic<uint32_t> pendingSnapshots{0};
  };
  class Part;

  // The table of group `g`, for the task alone to modify.
  ObjectTable& writable(size_t g);
  // [key | namespace] of an entry key (map entries add the user key).
  size_t namespaceEnd(std::string_view entryKey) const;

  const KeyedBackendParams& params_;
  StateMetaInfo meta_;
  TableLayout layout_;
  std::vector<std::shared_ptr<Group>> groups_;
  // Changes whenever a slot pointer may have become invalid or unwritable:
  // an insertion (which may grow a table), an erase, a table created or
  // cloned, a snapshot taken. SlotHints of an older epoch are not used.
  mutable uint64_t epoch_ = 0;
};

// The serialized namespace, cached per setNamespace(), and the entry key of
// the current key and namespace.
class EntryKey {
 public:
  void setNamespace(std::string_view ns) { ns_.assign(ns.data(), ns.size()); }
  std::string_view get(const KeyedStateBackend& backend) {
    if (ns_.empty()) {
      // currentKey() without substr()'s out-of-line range check.
      const std::string_view withGroup = backend.currentKeyWithGroup();
      return withGroup.empty() ? withGroup
                               : std::string_view(withGroup.data() + 2, withGroup.size() - 2);
    }
    const std::string_view key = backend.currentKey();
    composite_.assign(key.data(), key.size());
    composite_.append(ns_);
    return composite_;
  }

 private:
  std::string ns_;
  std::string composite_;
};

}  // namespace heap

class HashMapKeyedStateBackend final : public KeyedStateBackend {
 public:
  explicit HashMapKeyedStateBackend(KeyedBackendParams params);
  ~HashMapKeyedStateBackend() override;

  const char* name() const override { return "hashmap"; }
  std::unique_ptr<KeyedStateSnapshot> snapshot() override;
  void restore(const std::vector<const CanonicalSnapshotReader*>& snapshots) override;
  void forEachKey(const std::string& stateName,
                  const std::function<void(std::string_view key, int32_t keyGroup)>& fn) override;
  bool clearState(const std::string& stateName) override;
  bool acceptsSnapshotEntries() const override { return true; }
  void addToNextSnapshot(const std::string& stateName,
                         std::shared_ptr<const std::vector<std::vector<uint8_t>>> groups) override;
  void addToNextSnapshot(const std::string& stateName,
                         std::shared_ptr<SnapshotEntrySource> source) override;
  void dispose() override;

  std::unique_ptr<internal::ValueStorage> createValueStorage(const StateMetaInfo& meta,
                                                             StorageTypes types) override;
  std::unique_ptr<internal::ListStorage> createListStorage(const StateMetaInfo& meta,
                                                           StorageTypes types) override;
  std::unique_ptr<internal::MapStorage> createMapStorage(const StateMetaInfo& meta,
                                                         StorageTypes types) override;

  // The table of state `meta.name`, created (and filled from restored
  // entries) on first use. Registers `meta` when that has not happened yet;
  // throws when the name was registered with another layout or an
  // incompatible meta.
  heap::StateTable& table(const StateMetaInfo& meta, heap::TableLayout layout);

  // The index of the current key's group within this backend's range. Throws
  // when no key is set.
  size_t currentGroupIndex() const {
    const auto g = static_cast<size_t>(currentKeyGroup() - keyGroupRange().startKeyGroup);
    if (g >= numGroups_) [[unlikely]]
      failNoCurrentKey();
    return g;
  }

 private:
  // Canonical entries restored for a state not registered yet, per group:
  // (varuint key length, key, varuint value length, value)*.
  struct RestoredEntries {
    StateMetaInfo meta;
    std::vector<std::vector<uint8_t>> groups;
  };
  static void forEachRestored(const std::vector<uint8_t>& group,
                              const std::function<void(std::string_view, std::string_view)>& fn);
  heap::StateTable* findTable(const std::string& name) const;
  void adoptTable(const std::string& name, std::unique_ptr<heap::StateTable> table);
  void checkTableMeta(const heap::StateTable& table, const StateMetaInfo& meta) const;
  [[noreturn]] void failTableType(const StateMetaInfo& meta) const;
  [[noreturn]] void failNoCurrentKey() const;

  size_t numGroups_;
  std::map<std::string, std::unique_ptr<heap::StateTable>> tables_;
  std::map<std::string, std::shared_ptr<RestoredEntries>> restored_;
  // addToNextSnapshot()'s entries, by state name, until snapshot().
  std::map<std::string, std::shared_ptr<SnapshotEntrySource>> nextSnapshot_;
};

}  // namespace sluice
