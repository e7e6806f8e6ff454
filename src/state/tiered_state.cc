// The tiered backend's storages: each access finds its entry in its state's
// cache table, or loads it from RocksDB, works on the cached object, and
// keeps the backend's memory count (tiered_keyed_backend.h describes the
// design).
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sluice/core/assert.h>
#include <sluice/state/snapshot.h>

#include "state/tiered_keyed_backend.h"

namespace sluice {
namespace tiered {

namespace {

using internal::ErasedVector;
using internal::ListType;
using internal::MapType;
using internal::ObjectBuffer;
using internal::StateType;

// Deserializes exactly `bytes` into the live object `into`.
void decodeStoredExactly(const StateType& type, void* into, std::string_view bytes,
                         const std::string& stateName) {
  DataInputView in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  type.deserialize(into, in);
  if (in.remaining() != 0) {
    throw SerializationError("state '" + stateName + "': " + std::to_string(in.remaining()) +
                             " bytes left over after decoding a stored " + type.schema());
  }
}

size_t capacityOf(const void* list) { return static_cast<const ErasedVector*>(list)->capacity; }

// What every tiered storage shares: its backend and cache table, the entry
// key of the current key and namespace, and the key group it pins.
class StorageBase {
 public:
  StorageBase(const StorageBase&) = delete;
  StorageBase& operator=(const StorageBase&) = delete;

 protected:
  StorageBase(TieredKeyedStateBackend& backend, std::shared_ptr<CacheTable> table)
      : backend_(backend), table_(std::move(table)) {
    table_->addPin(&pin_);
  }
  ~StorageBase() { table_->removePin(&pin_); }

  // The current key's group (pinned from now until the next access) and
  // entry key.
  heap::Addr at() {
    const size_t g = backend_.currentGroupIndex();
    pin_ = g;
    return {g, key_.get(backend_)};
  }
  void* entry(char* slot) const { return table_->entry(slot); }
  static Header& header(void* entry) { return CachedType::header(entry); }
  // The RocksDB value of `a`'s entry into the backend's read buffer; false
  // when RocksDB has none.
  bool read(const heap::Addr& a) {
    backend_.countLoad();
    return backend_.rocksDb().get(table_->columnFamily(), table_->rocksKey(a.group, a.key),
                                  backend_.readBuffer());
  }

  TieredKeyedStateBackend& backend_;
  std::shared_ptr<CacheTable> table_;
  heap::EntryKey key_;
  size_t pin_ = static_cast<size_t>(-1);
};

// ---------------------------------------------------------------------------
// Values (also reducing and aggregating state)

class TieredValueStorage final : public internal::ValueStorage, private StorageBase {
 public:
  TieredValueStorage(TieredKeyedStateBackend& backend, std::shared_ptr<CacheTable> table)
      : StorageBase(backend, std::move(table)),
        type_(table_->storedType()),
        entryType_(table_->entryType()),
        estimate_(type_) {}

  void setNamespace(std::string_view ns) override {
    key_.setNamespace(ns);
    hintKey_ = 0;
  }

  const void* get() override {
    const heap::Addr a = at();
    char* slot = table_->find(a.group, a.key);
    void* e;
    if (slot != nullptr) [[likely]] {
      e = entry(slot);
      touch(header(e));
    } else {
      // The access that loads an entry is not counted as a use: an entry
      // earns its uses by being accessed again while cached, so the hand
      // takes the keys read once before the ones read twice.
      slot = load(a);
      e = entry(slot);
    }
    remember(slot);
    return (header(e).flags & kPresent) != 0 ? entryType_.object(e) : nullptr;
  }

  // A read-modify-write (get, then put for the same key and namespace)
  // writes the slot get() found without looking the key up again.
  void put(const void* value) override {
    const uint32_t charge = estimate_(value);
    char* slot = hinted();
    // The get() before this put() counted the access already: counting it
    // twice would give every key loaded for a read-modify-write two uses,
    // almost the three of a hot key, and the hand would keep the one-off
    // keys as long as the hot ones. A put that creates the entry counts
    // no use either (see get()).
    bool counted = slot != nullptr;
    bool reserved = false;
    if (slot == nullptr) {
      const heap::Addr a = at();
      slot = table_->find(a.group, a.key);
      if (slot == nullptr) {
        slot = table_->insert(a.group, a.key, charge);
        header(entry(slot)).flags = kStored;  // RocksDB may hold an older value
        reserved = true;
        counted = true;
      }
    }
    void* e = entry(slot);
    Header& h = header(e);
    if (!reserved && charge > h.charge) backend_.reserve(charge - h.charge);
    type_.copyAssign(entryType_.object(e), value);
    backend_.charge(static_cast<int64_t>(charge) - h.charge);
    h.charge = charge;
    h.flags |= kPresent | kDirty;
    if (!counted) touch(h);
    remember(slot);
  }

  void clear() override {
    const heap::Addr a = at();
    hintKey_ = 0;
    uint8_t stored = kStored;  // unknown: RocksDB may hold a value
    // An entry this creates has no use (see get()); one that was cached
    // was used again.
    uint8_t uses = 0;
    if (char* slot = table_->find(a.group, a.key)) {
      Header& h = header(entry(slot));
      touch(h);
      if ((h.flags & kPresent) == 0) return;  // already absent
      stored = h.flags & kStored;
      uses = kRef;
      // A fresh entry rather than a reset object: that frees what the
      // value's type holds.
      table_->erase(a.group, a.key);
    }
    char* slot = table_->insert(a.group, a.key, 0);
    header(entry(slot)).flags = static_cast<uint8_t>(uses | (stored != 0 ? kStored | kDirty : 0));
  }

 private:
  char* load(const heap::Addr& a) {
    const bool found = read(a);
    const std::string& bytes = backend_.readBuffer();
    const uint32_t charge = found ? estimate_.ofSerialized(bytes.size()) : 0;
    char* slot = table_->insert(a.group, a.key, charge);
    if (!found) return slot;  // cached as absent
    void* e = entry(slot);
    try {
      decodeStoredExactly(type_, entryType_.object(e), bytes, table_->meta().name);
    } catch (...) {
      table_->erase(a.group, a.key);
      throw;
    }
    Header& h = header(e);
    h.flags = kPresent | kStored;
    h.charge = charge;
    backend_.charge(charge);
    return slot;
  }

  void remember(char* slot) {
    hint_ = slot;
    hintEpoch_ = table_->epoch();
    hintKey_ = backend_.currentKeyVersion();
  }
  // The slot the last access found while it is still that of the current
  // key and namespace and unmoved; its group is still pinned.
  char* hinted() const {
    if (hintKey_ != 0 && hintKey_ == backend_.currentKeyVersion() && hintEpoch_ == table_->epoch())
        [[likely]] {
      return hint_;
    }
    return nullptr;
  }

  const StateType& type_;
  const CachedType& entryType_;
  SizeEstimator estimate_;
  char* hint_ = nullptr;
  uint64_t hintEpoch_ = 0;
  uint64_t hintKey_ = 0;  // the key version hint_ is for; 0: none
};

// ---------------------------------------------------------------------------
// Lists

class TieredListStorage final : public internal::ListStorage, private StorageBase {
 public:
  TieredListStorage(TieredKeyedStateBackend& backend, std::shared_ptr<CacheTable> table)
      : StorageBase(backend, std::move(table)),
        list_(table_->listType()),
        entryType_(table_->entryType()),
        estimate_(list_.element()),
        scratch_(list_) {}

  void setNamespace(std::string_view ns) override { key_.setNamespace(ns); }

  internal::ElementSpan get() override {
    const heap::Addr a = at();
    char* slot = table_->find(a.group, a.key);
    if (slot == nullptr) {
      slot = load(a);
    } else if ((header(entry(slot)).flags & kComplete) == 0) {
      complete(a, slot);
    }
    void* e = entry(slot);
    touch(header(e));
    const auto* v = static_cast<const ErasedVector*>(entryType_.object(e));
    return {v->data, v->size};
  }

  void add(const void* element) override { append(element, 1); }
  void addAll(const void* elements, size_t count) override {
    if (count > 0) append(elements, count);
  }

  void update(const void* elements, size_t count) override {
    if (count == 0) {
      clear();
      return;
    }
    const int64_t heapBytes = estimateAll(elements, count);
    const heap::Addr a = at();
    char* slot = table_->find(a.group, a.key);
    bool reserved = false;
    if (slot == nullptr) {
      slot = table_->insert(a.group, a.key, heapBytes + arrayBytes(list_, count));
      header(entry(slot)).flags = kStored;  // RocksDB may hold a list
      reserved = true;
    }
    void* e = entry(slot);
    Header& h = header(e);
    void* v = entryType_.object(e);
    // The old elements go first, then the array grows if it must (the new
    // array is allocated before the old one goes).
    list_.clear(v);
    adjust(h, arrayBytes(list_, v) - h.charge);
    const int64_t growth = count > capacityOf(v) ? arrayBytes(list_, count) : 0;
    if (!reserved) backend_.reserve(heapBytes + growth);
    list_.appendCopies(v, elements, count);
    adjust(h, arrayBytes(list_, v) + heapBytes - h.charge);
    h.flags =
        static_cast<uint8_t>((h.flags & (kStored | kUseMask)) | kComplete | kRewrite | kDirty);
    touch(h);
  }

  void clear() override {
    const heap::Addr a = at();
    uint8_t stored = kStored;  // unknown: RocksDB may hold a list
    if (char* slot = table_->find(a.group, a.key)) {
      const Header& h = header(entry(slot));
      stored = h.flags & kStored;
      table_->erase(a.group, a.key);
    }
    char* slot = table_->insert(a.group, a.key, 0);
    header(entry(slot)).flags =
        static_cast<uint8_t>(kComplete | kRef | (stored != 0 ? kStored | kDirty | kRewrite : 0));
  }

  // Each source is read (completed) and cleared; the target is appended to,
  // without reading it.
  void mergeNamespaces(std::string_view target, const std::vector<std::string>& sources) override {
    ObjectBuffer merged(list_);
    for (const std::string& source : sources) {
      key_.setNamespace(source);
      const internal::ElementSpan span = get();
      if (span.size == 0) continue;
      list_.appendCopies(merged.get(), span.data, span.size);
      clear();
    }
    key_.setNamespace(target);
    const auto* v = static_cast<const ErasedVector*>(merged.get());
    if (v->size > 0) append(v->data, v->size);
  }

 private:
  int64_t estimateAll(const void* elements, size_t count) {
    if (estimate_.heapFree()) return 0;
    int64_t bytes = 0;
    const size_t size = list_.element().size();
    for (size_t i = 0; i < count; ++i) {
      bytes += estimate_(static_cast<const char*>(elements) + i * size);
    }
    return bytes;
  }

  void adjust(Header& h, int64_t delta) {
    h.charge = toCharge(static_cast<int64_t>(h.charge) + delta);
    backend_.charge(delta);
  }

  // Appends to the cached list, or to a new append-only entry when the key
  // is not cached: the list is not read.
  void append(const void* elements, size_t count) {
    const int64_t heapBytes = estimateAll(elements, count);
    const heap::Addr a = at();
    char* slot = table_->find(a.group, a.key);
    bool reserved = false;
    if (slot == nullptr) {
      slot =
          table_->insert(a.group, a.key, heapBytes + arrayBytes(list_, std::max<size_t>(4, count)));
      header(entry(slot)).flags = kStored;  // append-only: RocksDB may hold the head
      reserved = true;
    }
    void* e = entry(slot);
    Header& h = header(e);
    void* v = entryType_.object(e);
    const size_t size = internal::ListType::size(v);
    const size_t capacity = capacityOf(v);
    // Growing allocates the new array before the old one goes.
    const size_t grownCapacity = size + count <= capacity
                                     ? capacity
                                     : std::max(size + count, std::max<size_t>(4, capacity * 2));
    const int64_t growth = grownCapacity > capacity ? arrayBytes(list_, grownCapacity) : 0;
    if (!reserved) backend_.reserve(heapBytes + growth);
    const int64_t before = arrayBytes(list_, v);
    if (count == 1) {
      list_.pushBack(v, elements);
    } else {
      list_.appendCopies(v, elements, count);
    }
    adjust(h, arrayBytes(list_, v) - before + heapBytes);
    h.flags |= kDirty;
    touch(h);
  }

  // Decodes RocksDB's list bytes into scratch_; returns the elements' heap
  // estimate.
  int64_t decode(std::string_view bytes) {
    list_.clear(scratch_.get());
    int64_t heapBytes = 0;
    ListValueReader reader(bytes);
    std::string_view element;
    while (reader.next(element)) {
      DataInputView in(reinterpret_cast<const uint8_t*>(element.data()), element.size());
      list_.element().deserialize(list_.emplaceBack(scratch_.get()), in);
      if (in.remaining() != 0) {
        throw SerializationError(
            "state '" + table_->meta().name + "': " + std::to_string(in.remaining()) +
            " bytes left over after decoding a stored " + list_.element().schema());
      }
      heapBytes += estimate_.ofSerialized(element.size());
    }
    return heapBytes;
  }

  char* load(const heap::Addr& a) {
    const bool found = read(a);
    list_.clear(scratch_.get());
    const int64_t heapBytes = found ? decode(backend_.readBuffer()) : 0;
    const size_t n = internal::ListType::size(scratch_.get());
    const int64_t charge = heapBytes + arrayBytes(list_, n == 0 ? 0 : capacityOf(scratch_.get()));
    char* slot = table_->insert(a.group, a.key, charge);
    void* e = entry(slot);
    if (n > 0) list_.moveAssign(entryType_.object(e), scratch_.get());
    Header& h = header(e);
    h.flags = static_cast<uint8_t>(kComplete | (found ? kStored : 0));
    h.charge = toCharge(charge);
    CachedType::storedElements(e) = static_cast<uint32_t>(n);
    backend_.charge(charge);
    return slot;
  }

  // Makes an append-only entry complete: RocksDB's elements, then the
  // appended ones.
  void complete(const heap::Addr& a, char* slot) {
    const bool found = read(a);
    list_.clear(scratch_.get());
    const int64_t storedHeap = found ? decode(backend_.readBuffer()) : 0;
    const size_t storedCount = internal::ListType::size(scratch_.get());
    void* e = entry(slot);
    Header& h = header(e);
    void* v = entryType_.object(e);
    const int64_t pendingHeap = h.charge - arrayBytes(list_, v);
    const size_t total = storedCount + internal::ListType::size(v);
    backend_.reserve(storedHeap + arrayBytes(list_, total) - arrayBytes(list_, v));
    list_.appendMoved(scratch_.get(), v);
    list_.moveAssign(v, scratch_.get());
    adjust(h, arrayBytes(list_, v) + storedHeap + pendingHeap - h.charge);
    CachedType::storedElements(e) = static_cast<uint32_t>(storedCount);
    h.flags = static_cast<uint8_t>((h.flags & ~kRewrite) | kComplete | (found ? kStored : 0));
  }

  const ListType& list_;
  const CachedType& entryType_;
  SizeEstimator estimate_;
  ObjectBuffer scratch_;  // a list being decoded
};

// ---------------------------------------------------------------------------
// Maps

class TieredMapStorage final : public internal::MapStorage, private StorageBase {
 public:
  TieredMapStorage(TieredKeyedStateBackend& backend, std::shared_ptr<CacheTable> table)
      : StorageBase(backend, std::move(table)),
        map_(table_->mapType()),
        valueType_(table_->mapValueType()),
        entryType_(table_->entryType()),
        keyEstimate_(map_.keyType()),
        valueEstimate_(valueType_.inner()),
        // A node: its header (next, hash), the user key and the cached value,
        // with alignment and the allocation's overhead.
        nodeBytes_(static_cast<int64_t>(16 + map_.keyType().size() + valueType_.size() + 8) +
                   kAllocationOverhead),
        scratch_(valueType_) {}

  void setNamespace(std::string_view ns) override { key_.setNamespace(ns); }

  const void* get(const void* userKey) override {
    const heap::Addr a = at();
    char* slot = entrySlot(a);
    void* e = entry(slot);
    Header& h = header(e);
    touch(h);
    if (const void* cv = map_.find(entryType_.object(e), userKey)) {
      return (CachedType::header(cv).flags & kPresent) != 0 ? valueType_.object(cv) : nullptr;
    }
    if ((h.flags & kComplete) != 0) return nullptr;
    return load(a, slot, userKey);
  }

  void put(const void* userKey, const void* userValue) override {
    const heap::Addr a = at();
    char* slot = entrySlot(a);
    void* e = entry(slot);
    Header& h = header(e);
    void* m = entryType_.object(e);
    const int64_t nodeCharge = nodeBytes_ + keyEstimate_(userKey) + valueEstimate_(userValue);
    if (void* cv = map_.find(m, userKey)) {
      Header& vh = CachedType::header(cv);
      if (nodeCharge > vh.charge) backend_.reserve(nodeCharge - vh.charge);
      valueType_.inner().copyAssign(valueType_.object(cv), userValue);
      adjust(h, nodeCharge - vh.charge);
      vh.charge = toCharge(nodeCharge);
      vh.flags |= kPresent | kDirty;
    } else {
      scratch_.reset();
      valueType_.inner().copyAssign(valueType_.object(scratch_.get()), userValue);
      // A user key the entry has not seen may be in RocksDB unless the
      // entry is complete.
      const uint8_t stored = (h.flags & kComplete) != 0 ? 0 : kStored;
      insertNode(h, m, userKey, nodeCharge, static_cast<uint8_t>(kPresent | kDirty | stored));
    }
    h.flags |= kDirty;
    touch(h);
  }

  void remove(const void* userKey) override { removeAt(at(), userKey); }

  bool contains(const void* userKey) override { return get(userKey) != nullptr; }

  bool isEmpty() override {
    const heap::Addr a = at();
    char* slot = entrySlot(a);
    void* e = entry(slot);
    Header& h = header(e);
    touch(h);
    void* m = entryType_.object(e);
    if (anyPresent(m)) return false;
    if ((h.flags & kComplete) != 0) return true;
    // RocksDB may hold user keys the entry has not seen: ask it, after
    // writing the entry's removals.
    writeBackEntry(a.group, slot);
    const bool empty = !backend_.rocksDb()
                            .iteratePrefix(table_->columnFamily(), table_->rocksKey(a.group, a.key))
                            .valid();
    if (empty) {
      // Every cached user key is a written-back removal: drop them.
      const int64_t before = h.charge;
      map_.destroy(m);
      map_.construct(m);
      adjust(h, -before);
      h.flags |= kComplete;
    }
    return empty;
  }

  void clear() override {
    const heap::Addr a = at();
    RocksDbKeyedStateBackend& rocks = backend_.rocksDb();
    char* slot = table_->find(a.group, a.key);
    if (slot != nullptr && (header(entry(slot)).flags & kComplete) != 0) {
      // RocksDB holds at most the cached user keys it was given.
      void* m = entryType_.object(entry(slot));
      MapType::Position p;
      while (map_.advance(m, p)) {
        if ((CachedType::header(map_.valueAt(p)).flags & kStored) != 0) {
          rocks.batchRemove(table_->columnFamily(), userRocksKey(a, map_.keyAt(p)));
        }
      }
      rocks.writePending();
    } else {
      rocks.removePrefix(table_->columnFamily(), table_->rocksKey(a.group, a.key));
    }
    if (slot != nullptr) table_->erase(a.group, a.key);
    slot = table_->insert(a.group, a.key, 0);
    header(entry(slot)).flags = kComplete | kRef;
  }

  // Iterates RocksDB (after writing the entry's changes back), as the
  // rocksdb backend does: the entries as they were when the iterator was
  // created; remove() removes through the cache.
  std::unique_ptr<internal::MapCursor> iterator() override {
    const heap::Addr a = at();
    if (char* slot = table_->find(a.group, a.key)) {
      void* e = entry(slot);
      Header& h = header(e);
      touch(h);
      if ((h.flags & kComplete) != 0 && !anyPresent(entryType_.object(e))) {
        return std::make_unique<Cursor>(*this, a.group, std::string(a.key), std::nullopt, 0);
      }
      writeBackEntry(a.group, slot);
    }
    const std::string_view prefix = table_->rocksKey(a.group, a.key);
    return std::make_unique<Cursor>(
        *this, a.group, std::string(a.key),
        backend_.rocksDb().iteratePrefix(table_->columnFamily(), prefix), prefix.size());
  }

 private:
  class Cursor final : public internal::MapCursor {
   public:
    Cursor(TieredMapStorage& storage, size_t group, std::string entryKey,
           std::optional<RocksDbKeyedStateBackend::PrefixIterator> it, size_t prefixSize)
        : storage_(storage),
          group_(group),
          entryKey_(std::move(entryKey)),
          it_(std::move(it)),
          prefixSize_(prefixSize),
          key_(storage.map_.keyType()),
          value_(storage.valueType_.inner()) {}

    bool hasNext() override { return it_.has_value() && it_->valid(); }

    void next(const void*& key, const void*& value) override {
      if (!hasNext()) {
        throw SluiceException("MapStateIterator of state '" + storage_.table_->meta().name +
                              "': next() called with no entries left");
      }
      const std::string& name = storage_.table_->meta().name;
      key_.reset();
      decodeStoredExactly(storage_.map_.keyType(), key_.get(), it_->key().substr(prefixSize_),
                          name);
      value_.reset();
      decodeStoredExactly(storage_.valueType_.inner(), value_.get(), it_->value(), name);
      canRemove_ = true;
      it_->next();
      key = key_.get();
      value = value_.get();
    }

    void remove() override {
      if (!canRemove_) {
        throw SluiceException("MapStateIterator of state '" + storage_.table_->meta().name +
                              "': remove() must follow a next() (at most once each)");
      }
      canRemove_ = false;
      storage_.pin_ = group_;
      storage_.removeAt({group_, entryKey_}, key_.get());
    }

   private:
    TieredMapStorage& storage_;
    size_t group_;
    std::string entryKey_;
    std::optional<RocksDbKeyedStateBackend::PrefixIterator> it_;
    size_t prefixSize_;
    ObjectBuffer key_;    // the user key next() returned last
    ObjectBuffer value_;  // and its value
    bool canRemove_ = false;
  };

  // The cached entry of `a`, inserted (knowing nothing) when absent. `a`'s
  // group is pinned.
  char* entrySlot(const heap::Addr& a) {
    char* slot = table_->find(a.group, a.key);
    return slot != nullptr ? slot : table_->insert(a.group, a.key, 0);
  }

  // [key group | key | namespace | user key].
  std::string_view userRocksKey(const heap::Addr& a, const void* userKey) {
    rocksKey_.assign(table_->rocksKey(a.group, a.key));
    keyBytes_.clear();
    DataOutputView out(keyBytes_);
    map_.keyType().serialize(userKey, out);
    rocksKey_.append(reinterpret_cast<const char*>(keyBytes_.data()), keyBytes_.size());
    return rocksKey_;
  }

  void adjust(Header& h, int64_t delta) {
    h.charge = toCharge(static_cast<int64_t>(h.charge) + delta);
    backend_.charge(delta);
  }

  bool anyPresent(const void* m) const {
    MapType::Position p;
    while (map_.advance(m, p)) {
      if ((CachedType::header(map_.valueAt(p)).flags & kPresent) != 0) return true;
    }
    return false;
  }

  // Adds the node (userKey, scratch_) to the map `m` of the entry with
  // header `h`, with `flags` and `nodeCharge`.
  void insertNode(Header& h, void* m, const void* userKey, int64_t nodeCharge, uint8_t flags) {
    const auto* map = static_cast<const internal::ErasedMap*>(m);
    // Growing the buckets allocates the new array before the old one goes.
    const int64_t growth = map->size + 1 > map->bucketCount
                               ? static_cast<int64_t>(sizeof(void*)) *
                                         (map->bucketCount == 0 ? 8 : 2 * map->bucketCount) +
                                     kAllocationOverhead
                               : 0;
    backend_.reserve(nodeCharge + growth);
    Header& vh = CachedType::header(scratch_.get());
    vh.charge = toCharge(nodeCharge);
    vh.flags = flags;
    const int64_t before = bucketBytes(m);
    map_.put(m, userKey, scratch_.get());
    adjust(h, nodeCharge + bucketBytes(m) - before);
  }

  // Loads the user key from RocksDB into the (incomplete) entry.
  const void* load(const heap::Addr& a, char* slot, const void* userKey) {
    backend_.countLoad();
    std::string& bytes = backend_.readBuffer();
    const bool found =
        backend_.rocksDb().get(table_->columnFamily(), userRocksKey(a, userKey), bytes);
    scratch_.reset();
    if (found) {
      decodeStoredExactly(valueType_.inner(), valueType_.object(scratch_.get()), bytes,
                          table_->meta().name);
    }
    const int64_t nodeCharge = nodeBytes_ + keyEstimate_(userKey) +
                               (found ? valueEstimate_.ofSerialized(bytes.size()) : 0);
    void* e = entry(slot);
    void* m = entryType_.object(e);
    insertNode(header(e), m, userKey, nodeCharge,
               static_cast<uint8_t>(found ? kPresent | kStored : 0));
    return found ? valueType_.object(map_.find(m, userKey)) : nullptr;
  }

  void removeAt(const heap::Addr& a, const void* userKey) {
    char* slot = entrySlot(a);
    void* e = entry(slot);
    Header& h = header(e);
    touch(h);
    void* m = entryType_.object(e);
    const int64_t tombstone = nodeBytes_ + keyEstimate_(userKey);
    if (const void* cv = map_.find(m, userKey)) {
      const Header vh = CachedType::header(cv);
      if ((vh.flags & kPresent) == 0) return;  // already removed
      map_.erase(m, userKey);
      adjust(h, -static_cast<int64_t>(vh.charge));
      if ((vh.flags & kStored) == 0) return;  // RocksDB never had it
    } else if ((h.flags & kComplete) != 0) {
      return;  // neither cached nor in RocksDB
    }
    scratch_.reset();
    insertNode(h, m, userKey, tombstone, static_cast<uint8_t>(kDirty | kStored));
    h.flags |= kDirty;
  }

  void writeBackEntry(size_t g, char* slot) {
    if ((header(entry(slot)).flags & kDirty) == 0) return;
    table_->writeBack(g, slot, CacheTable::WriteBack::kFlush);
    backend_.rocksDb().writePending();
  }

  const MapType& map_;
  const CachedType& valueType_;
  const CachedType& entryType_;
  SizeEstimator keyEstimate_;
  SizeEstimator valueEstimate_;
  const int64_t nodeBytes_;
  ObjectBuffer scratch_;  // a cached value being inserted
  std::string rocksKey_;
  std::vector<uint8_t> keyBytes_;
};

}  // namespace

}  // namespace tiered

std::unique_ptr<internal::ValueStorage> TieredKeyedStateBackend::createValueStorage(
    const StateMetaInfo& meta, StorageTypes types) {
  return std::make_unique<tiered::TieredValueStorage>(
      *this, table(meta, {StateStorage::kValue, types.ns, types.value, nullptr}));
}

std::unique_ptr<internal::ListStorage> TieredKeyedStateBackend::createListStorage(
    const StateMetaInfo& meta, StorageTypes types) {
  return std::make_unique<tiered::TieredListStorage>(
      *this, table(meta, {StateStorage::kList, types.ns, types.value, nullptr}));
}

std::unique_ptr<internal::MapStorage> TieredKeyedStateBackend::createMapStorage(
    const StateMetaInfo& meta, StorageTypes types) {
  return std::make_unique<tiered::TieredMapStorage>(
      *this, table(meta, {StateStorage::kMap, types.ns, types.value, types.userKey}));
}

}  // namespace sluice
