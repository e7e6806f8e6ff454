// HashMapKeyedStateBackend: keyed state as objects on the heap, with
// asynchronous snapshots by copy-on-write.
//
// Storage. Every registered state has one table per key group of the
// backend's range: a FlatHashMap from the entry key, [serialized key |
// serialized namespace], kept in a 16-byte KeyBytes (inline up to 15 bytes),
// to the stored object: V for value state, std::vector<E> for
// list state, an unordered map UK -> UV (hashed with javaHashCode) for map
// state. VoidNamespace adds no bytes, so a plain keyed state looks up the
// current key's bytes as they are (no string is built per access); other
// namespaces are serialized once per setCurrentNamespace() and appended to
// the key in a reused buffer.
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
// when the state is registered (its first Heap*State is constructed); a
// restored state that is never registered is carried into every later
// snapshot unchanged.
//
// Time to live. With meta.ttlMillis > 0 and meta.ttlCleanupFullSnapshot,
// entries expired at the time of snapshot() are left out of the snapshot.
//
// Threading: task thread only, except KeyedStateSnapshot::writeTo(). State
// objects keep references to their backend and must not be used after the
// backend's dispose().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <sluice/core/flat_hash_map.h>
#include <sluice/core/key_hash.h>
#include <sluice/core/serializer.h>
#include <sluice/state/internal_state.h>
#include <sluice/state/keyed_state_backend.h>
#include <sluice/state/snapshot.h>

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

// Hash of map-state user keys: their Java hashCode, spread over 64 bits.
template <class T>
struct JavaHash {
  size_t operator()(const T& v) const {
    return static_cast<size_t>(static_cast<uint32_t>(javaHashCode(v))) * 0x9E3779B97F4A7C15ULL;
  }
};

// Serializes `value` and returns the bytes (valid until the next call).
template <class T>
std::string_view encode(const T& value, std::vector<uint8_t>& buf) {
  buf.clear();
  DataOutputView out(buf);
  TypeSerializer<T>::serialize(value, out);
  return {reinterpret_cast<const char*>(buf.data()), buf.size()};
}

// Deserializes exactly all of `bytes` into `into`.
template <class T>
void decodeAll(T& into, std::string_view bytes, const char* what) {
  DataInputView in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  TypeSerializer<T>::deserialize(into, in);
  if (in.remaining() != 0) {
    in.failAt(in.position(), std::to_string(in.remaining()) + " bytes left over after the " + what);
  }
}

// Where the key ends in an entry key, and where the namespace ends after it.
struct EntryKeySplit {
  size_t keyEnd = 0;
  size_t namespaceEnd = 0;
};
// Throws SerializationError when the key or namespace does not decode.
template <class N>
EntryKeySplit splitEntryKey(const KeyedBackendParams& params, std::string_view entryKey) {
  EntryKeySplit split;
  split.keyEnd =
      params.keyLength(reinterpret_cast<const uint8_t*>(entryKey.data()), entryKey.size());
  if (split.keyEnd > entryKey.size()) {
    throw SerializationError("the key length " + std::to_string(split.keyEnd) +
                             " exceeds the entry key of " + std::to_string(entryKey.size()) +
                             " bytes");
  }
  DataInputView in(reinterpret_cast<const uint8_t*>(entryKey.data()) + split.keyEnd,
                   entryKey.size() - split.keyEnd);
  N ns{};
  TypeSerializer<N>::deserialize(ns, in);
  split.namespaceEnd = split.keyEnd + in.position();
  return split;
}

// Per storage kind: encode() writes the canonical entries of one stored
// object through emit(entryKey, valueBytes); restore() decodes one canonical
// entry into the stored object that slotFor(tableKey) returns (created when
// absent). Both throw SerializationError on bytes that do not decode exactly.
// The codec type also identifies the table's type when a state is looked up
// again.
template <class N, class V>
struct ValueCodec {
  using Stored = V;
  static constexpr StateKind kKind = StateKind::kValue;
  static bool matches(const StateMetaInfo& m) {
    return m.namespaceSchema == TypeSerializer<N>::schema() &&
           m.valueSchema == TypeSerializer<V>::schema();
  }
  template <class Emit>
  static void encode(std::string_view entryKey, const V& v, std::vector<uint8_t>& buf, std::string&,
                     Emit&& emit) {
    emit(entryKey, heap::encode(v, buf));
  }
  template <class SlotFor>
  static void restore(const KeyedBackendParams& params, std::string_view key,
                      std::string_view value, SlotFor&& slotFor) {
    EntryKeySplit split = splitEntryKey<N>(params, key);
    if (split.namespaceEnd != key.size()) {
      throw SerializationError(std::to_string(key.size() - split.namespaceEnd) +
                               " bytes left over after the namespace in a value entry key");
    }
    V v{};
    decodeAll(v, value, "value");
    slotFor(key) = std::move(v);
  }
};

template <class N, class E>
struct ListCodec {
  using Stored = std::vector<E>;
  static constexpr StateKind kKind = StateKind::kList;
  static bool matches(const StateMetaInfo& m) {
    return m.namespaceSchema == TypeSerializer<N>::schema() &&
           m.valueSchema == TypeSerializer<E>::schema();
  }
  template <class Emit>
  static void encode(std::string_view entryKey, const Stored& list, std::vector<uint8_t>& buf,
                     std::string&, Emit&& emit) {
    buf.clear();
    DataOutputView out(buf);
    for (const E& e : list) {
      const size_t lenAt = buf.size();
      out.writeU32(0);
      TypeSerializer<E>::serialize(e, out);
      const auto len = static_cast<uint32_t>(buf.size() - lenAt - 4);
      for (int i = 0; i < 4; ++i) buf[lenAt + i] = static_cast<uint8_t>(len >> (8 * i));
    }
    emit(entryKey, std::string_view(reinterpret_cast<const char*>(buf.data()), buf.size()));
  }
  template <class SlotFor>
  static void restore(const KeyedBackendParams& params, std::string_view key,
                      std::string_view value, SlotFor&& slotFor) {
    EntryKeySplit split = splitEntryKey<N>(params, key);
    if (split.namespaceEnd != key.size()) {
      throw SerializationError(std::to_string(key.size() - split.namespaceEnd) +
                               " bytes left over after the namespace in a list entry key");
    }
    Stored into;
    size_t pos = 0;
    while (pos < value.size()) {
      if (value.size() - pos < 4) {
        throw SerializationError("truncated list element length at byte offset " +
                                 std::to_string(pos) + " of a list value");
      }
      const auto* p = reinterpret_cast<const uint8_t*>(value.data()) + pos;
      const uint32_t len = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                           (static_cast<uint32_t>(p[2]) << 16) |
                           (static_cast<uint32_t>(p[3]) << 24);
      if (len > value.size() - pos - 4) {
        throw SerializationError("list element length " + std::to_string(len) +
                                 " exceeds the bytes that remain at byte offset " +
                                 std::to_string(pos) + " of a list value");
      }
      into.emplace_back();
      decodeAll(into.back(), value.substr(pos + 4, len), "list element");
      pos += 4 + len;
    }
    Stored& target = slotFor(key);
    target.insert(target.end(), std::make_move_iterator(into.begin()),
                  std::make_move_iterator(into.end()));
  }
};

template <class N, class UK, class UV>
struct MapCodec {
  using Inner = std::unordered_map<UK, UV, JavaHash<UK>>;
  using Stored = Inner;
  static constexpr StateKind kKind = StateKind::kMap;
  static bool matches(const StateMetaInfo& m) {
    return m.namespaceSchema == TypeSerializer<N>::schema() &&
           m.userKeySchema == TypeSerializer<UK>::schema() &&
           m.valueSchema == TypeSerializer<UV>::schema();
  }
  template <class Emit>
  static void encode(std::string_view entryKey, const Inner& map, std::vector<uint8_t>& buf,
                     std::string& keyBuf, Emit&& emit) {
    for (const auto& [uk, uv] : map) {
      keyBuf.assign(entryKey);
      std::string_view ukBytes = heap::encode(uk, buf);
      keyBuf.append(ukBytes);
      emit(std::string_view(keyBuf), heap::encode(uv, buf));
    }
  }
  // The entry key is [key | namespace | user key]: the table key is the
  // first two.
  template <class SlotFor>
  static void restore(const KeyedBackendParams& params, std::string_view key,
                      std::string_view value, SlotFor&& slotFor) {
    EntryKeySplit split = splitEntryKey<N>(params, key);
    UK uk{};
    decodeAll(uk, key.substr(split.namespaceEnd), "map user key");
    UV uv{};
    decodeAll(uv, value, "map user value");
    slotFor(key.substr(0, split.namespaceEnd)).insert_or_assign(std::move(uk), std::move(uv));
  }
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

// Where an access goes: the current key's group (index within the range) and
// its entry key.
struct Addr {
  size_t group;
  std::string_view key;
};

// A slot found by one access, for the next access of the same state object
// to reuse (value() then update() of one key): the slot (which holds its
// entry key), its group, and the table's epoch when it was found. The slot is
// only remembered when the task may write it in place (no snapshot still has
// to read its table).
template <class Stored>
struct SlotHint {
  typename FlatHashMap<KeyBytes, Stored, BytesHash>::Slot* slot = nullptr;
  uint64_t epoch = 0;
  size_t group = 0;
};

// What the backend knows of every state table, whatever its type.
class StateTableBase {
 public:
  explicit StateTableBase(StateMetaInfo meta) : meta_(std::move(meta)) {}
  virtual ~StateTableBase() = default;
  const StateMetaInfo& meta() const { return meta_; }

  // Synchronous part of a snapshot: shares the current key-group tables.
  virtual std::unique_ptr<StateSnapshotPart> snapshot() const = 0;
  // Adds one canonical entry of the key group at `groupIndex`.
  virtual void restoreEntry(size_t groupIndex, std::string_view key, std::string_view value) = 0;
  // Calls fn(entry key, group index) for every entry.
  virtual void forEachEntryKey(
      const std::function<void(std::string_view entryKey, size_t groupIndex)>& fn) const = 0;

 private:
  StateMetaInfo meta_;
};

template <class Codec>
class StateTable final : public StateTableBase {
 public:
  using Stored = typename Codec::Stored;
  using Map = FlatHashMap<KeyBytes, Stored, BytesHash>;

  StateTable(const KeyedBackendParams& params, StateMetaInfo meta, size_t numGroups)
      : StateTableBase(std::move(meta)), params_(params), groups_(numGroups) {}

  // The stored object of `key` in group `g`, or null.
  const Stored* find(size_t g, std::string_view key) const {
    const Group* group = groups_[g].get();
    if (group == nullptr) return nullptr;
    const typename Map::Slot* slot = group->map.find(key);
    return slot == nullptr ? nullptr : &slot->value;
  }
  // find(), remembering the slot in `hint` when the task may write it in
  // place.
  const Stored* find(Addr a, SlotHint<Stored>& hint) {
    Group* group = groups_[a.group].get();
    if (group == nullptr) return nullptr;
    typename Map::Slot* slot = group->map.find(a.key);
    if (slot == nullptr) return nullptr;
    if (group->pendingSnapshots.load(std::memory_order_acquire) == 0)
      rememberIn(hint, epoch_, a, slot);
    return &slot->value;
  }
  // getOrInsert(), reusing the slot in `hint` when it is still that of `a`
  // (no insertion, erase, table clone or snapshot since it was found), and
  // remembering the slot otherwise.
  Stored& getOrInsert(Addr a, SlotHint<Stored>& hint) {
    if (hint.slot != nullptr && hint.epoch == epoch_ && hint.group == a.group &&
        hint.slot->key == a.key) [[likely]] {
      return hint.slot->value;
    }
    Map& map = writable(a.group);
    auto [slot, inserted] = map.tryEmplace(a.key);
    if (inserted) ++epoch_;
    rememberIn(hint, epoch_, a, slot);
    return slot->value;
  }

  // The same, for modification (clones a table a snapshot still has to read).
  Stored* findMutable(size_t g, std::string_view key) {
    if (find(g, key) == nullptr) return nullptr;
    return &writable(g).find(key)->value;
  }
  // The stored object of `key`, default-constructed when absent.
  Stored& getOrInsert(size_t g, std::string_view key) {
    auto [slot, inserted] = writable(g).tryEmplace(key);
    if (inserted) ++epoch_;
    return slot->value;
  }
  void erase(size_t g, std::string_view key) {
    if (find(g, key) == nullptr) return;
    writable(g).erase(key);
    ++epoch_;
  }
  const Stored* find(Addr a) const { return find(a.group, a.key); }
  Stored& getOrInsert(Addr a) { return getOrInsert(a.group, a.key); }
  void erase(Addr a) { erase(a.group, a.key); }

  std::unique_ptr<StateSnapshotPart> snapshot() const override {
    ++epoch_;  // remembered slots must not be written in place any more
    for (const std::shared_ptr<Group>& group : groups_) {
      if (group) group->pendingSnapshots.fetch_add(1, std::memory_order_relaxed);
    }
    return std::make_unique<Part>(meta(), groups_);
  }

  void restoreEntry(size_t g, std::string_view key, std::string_view value) override {
    Codec::restore(params_, key, value,
                   [&](std::string_view tableKey) -> Stored& { return getOrInsert(g, tableKey); });
  }

  void forEachEntryKey(const std::function<void(std::string_view, size_t)>& fn) const override {
    for (size_t g = 0; g < groups_.size(); ++g) {
      if (!groups_[g]) continue;
      groups_[g]->map.forEach([&](const KeyBytes& key, const Stored&) { fn(key.view(), g); });
    }
  }

 private:
  // One key group's table.
  struct Group {
    Group() = default;
    explicit Group(const Map& m) : map(m) {}
    Map map;
    // Snapshots taken of `map` that have not written it yet. Incremented by
    // the task thread in snapshot(), decremented (release) by the snapshot
    // once written or dropped; while not 0 the task must not modify `map`.
    mutable std::atomic<uint32_t> pendingSnapshots{0};
  };

  // The table of group `g`, for the task alone to modify.
  Map& writable(size_t g) {
    std::shared_ptr<Group>& group = groups_[g];
    if (!group) {
      group = std::make_shared<Group>();
      ++epoch_;
    } else if (group->pendingSnapshots.load(std::memory_order_acquire) != 0) {
      // A snapshot still has to read this table: leave it to the snapshot.
      group = std::make_shared<Group>(group->map);
      ++epoch_;
    }
    return group->map;
  }

  static void rememberIn(SlotHint<Stored>& hint, uint64_t epoch, Addr a, typename Map::Slot* slot) {
    hint.slot = slot;
    hint.epoch = epoch;
    hint.group = a.group;
  }

  class Part final : public StateSnapshotPart {
   public:
    Part(StateMetaInfo meta, std::vector<std::shared_ptr<Group>> groups)
        : meta_(std::move(meta)), groups_(std::move(groups)) {}
    ~Part() override {
      for (size_t g = 0; g < groups_.size(); ++g) release(g);
    }
    void writeKeyGroup(size_t g, uint16_t stateIndex, CanonicalSnapshotWriter& writer,
                       int64_t now) override {
      if (g >= groups_.size() || !groups_[g]) return;
      SnapshotEntryFilter filter(meta_);
      groups_[g]->map.forEach([&](const KeyBytes& key, const Stored& stored) {
        Codec::encode(key.view(), stored, buf_, keyBuf_,
                      [&](std::string_view k, std::string_view v) {
                        filter.write(writer, stateIndex, k, v, now);
                      });
      });
      release(g);
    }

   private:
    // Done with group `g`: the task may modify it in place again.
    void release(size_t g) {
      if (!groups_[g]) return;
      groups_[g]->pendingSnapshots.fetch_sub(1, std::memory_order_release);
      groups_[g].reset();
    }

    StateMetaInfo meta_;
    std::vector<std::shared_ptr<Group>> groups_;
    std::vector<uint8_t> buf_;
    std::string keyBuf_;
  };

  const KeyedBackendParams& params_;
  std::vector<std::shared_ptr<Group>> groups_;
  // Changes whenever a slot pointer may have become invalid or unwritable:
  // an insertion (which may grow a table), an erase, a table created or
  // cloned, a snapshot taken. SlotHints of an older epoch are not used.
  mutable uint64_t epoch_ = 0;
};

// The serialized namespace, cached per setCurrentNamespace(), and the entry
// key of the current key and namespace.
template <class N>
class EntryKey {
 public:
  static constexpr bool kVoid = std::is_same_v<N, VoidNamespace>;

  void setNamespace(const N& ns) {
    if constexpr (!kVoid) {
      ns_.clear();
      DataOutputView out(ns_);
      TypeSerializer<N>::serialize(ns, out);
    }
  }
  std::string_view get(const KeyedStateBackend& backend) {
    if constexpr (kVoid) {
      // currentKey() without substr()'s out-of-line range check.
      const std::string_view withGroup = backend.currentKeyWithGroup();
      return withGroup.empty() ? withGroup
                               : std::string_view(withGroup.data() + 2, withGroup.size() - 2);
    } else {
      const std::string_view key = backend.currentKey();
      composite_.assign(key.data(), key.size());
      composite_.append(reinterpret_cast<const char*>(ns_.data()), ns_.size());
      return composite_;
    }
  }

 private:
  std::vector<uint8_t> ns_;
  std::string composite_;
};

}  // namespace heap

class HashMapKeyedStateBackend final : public KeyedStateBackend {
 public:
  explicit HashMapKeyedStateBackend(KeyedBackendParams params);
  ~HashMapKeyedStateBackend() override;

  StateBackendType type() const override { return StateBackendType::kHashMap; }
  std::unique_ptr<KeyedStateSnapshot> snapshot() override;
  void restore(const std::vector<const CanonicalSnapshotReader*>& snapshots) override;
  void forEachKey(const std::string& stateName,
                  const std::function<void(std::string_view key, int32_t keyGroup)>& fn) override;
  void dispose() override;

  // --- used by the Heap*State classes ---------------------------------------

  // The table of state `meta.name`, created (and filled from restored
  // entries) on first use. Registers `meta` when that has not happened yet;
  // throws when the name was registered with another type or an incompatible
  // meta.
  template <class Codec>
  heap::StateTable<Codec>& table(const StateMetaInfo& meta);

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
  heap::StateTableBase* findTable(const std::string& name) const;
  void adoptTable(const std::string& name, std::unique_ptr<heap::StateTableBase> table);
  void checkTableMeta(const heap::StateTableBase& table, const StateMetaInfo& meta) const;
  [[noreturn]] void failTableType(const StateMetaInfo& meta) const;
  [[noreturn]] void failNoCurrentKey() const;

  size_t numGroups_;
  std::map<std::string, std::unique_ptr<heap::StateTableBase>> tables_;
  std::map<std::string, std::shared_ptr<RestoredEntries>> restored_;
};

template <class Codec>
heap::StateTable<Codec>& HashMapKeyedStateBackend::table(const StateMetaInfo& meta) {
  if (heap::StateTableBase* existing = findTable(meta.name)) {
    auto* typed = dynamic_cast<heap::StateTable<Codec>*>(existing);
    if (typed == nullptr) failTableType(meta);
    checkTableMeta(*typed, meta);
    return *typed;
  }
  if (storageOf(meta.kind) != storageOf(Codec::kKind) || !Codec::matches(meta)) {
    failTableType(meta);
  }
  const StateMetaInfo* registered = registeredMeta(meta.name);
  if (registered == nullptr) {
    registerStateMeta(meta);
  } else if (!registered->compatibleWith(meta)) {
    registerStateMeta(meta);  // throws, naming both
  }
  auto table = std::make_unique<heap::StateTable<Codec>>(params(), meta, numGroups_);
  heap::StateTable<Codec>& result = *table;
  adoptTable(meta.name, std::move(table));
  return result;
}

// ---------------------------------------------------------------------------
// The primitives. Each is a view on its table for the backend's current key
// and the namespace set last.

template <class N, class V>
class HeapValueState final : public InternalValueState<N, V> {
 public:
  using Codec = heap::ValueCodec<N, V>;
  HeapValueState(HashMapKeyedStateBackend& backend, const StateMetaInfo& meta)
      : backend_(backend), table_(backend.table<Codec>(meta)) {}

  void setCurrentNamespace(const N& ns) override { key_.setNamespace(ns); }
  std::optional<V> value() override {
    const V* v = table_.find(at(), hint_);
    if (v == nullptr) return std::nullopt;
    return *v;
  }
  // Reuses the slot value() found for the same key and namespace.
  void update(const V& value) override { table_.getOrInsert(at(), hint_) = value; }
  void clear() override { table_.erase(at()); }

 private:
  // The group first: it checks that a key is set.
  heap::Addr at() {
    const size_t g = backend_.currentGroupIndex();
    return {g, key_.get(backend_)};
  }

  HashMapKeyedStateBackend& backend_;
  heap::StateTable<Codec>& table_;
  heap::EntryKey<N> key_;
  heap::SlotHint<V> hint_;
};

template <class N, class E>
class HeapListState final : public InternalListState<N, E> {
 public:
  using Codec = heap::ListCodec<N, E>;
  HeapListState(HashMapKeyedStateBackend& backend, const StateMetaInfo& meta)
      : backend_(backend), table_(backend.table<Codec>(meta)) {}

  void setCurrentNamespace(const N& ns) override { key_.setNamespace(ns); }
  std::vector<E> get() override {
    const std::vector<E>* list = table_.find(at());
    return list == nullptr ? std::vector<E>{} : *list;
  }
  void add(const E& value) override { table_.getOrInsert(at()).push_back(value); }
  void addAll(const std::vector<E>& values) override {
    if (values.empty()) return;
    std::vector<E>& list = table_.getOrInsert(at());
    list.insert(list.end(), values.begin(), values.end());
  }
  void update(const std::vector<E>& values) override {
    if (values.empty()) {
      clear();
      return;
    }
    table_.getOrInsert(at()) = values;
  }
  void clear() override { table_.erase(at()); }

 private:
  // The group first: it checks that a key is set.
  heap::Addr at() {
    const size_t g = backend_.currentGroupIndex();
    return {g, key_.get(backend_)};
  }

  HashMapKeyedStateBackend& backend_;
  heap::StateTable<Codec>& table_;
  heap::EntryKey<N> key_;
};

// An entry with an empty map is removed, so a key whose last user key was
// removed has no entry at all (forEachKey does not list it).
template <class N, class UK, class UV>
class HeapMapState final : public InternalMapState<N, UK, UV> {
 public:
  using Codec = heap::MapCodec<N, UK, UV>;
  using Inner = typename Codec::Inner;
  HeapMapState(HashMapKeyedStateBackend& backend, const StateMetaInfo& meta)
      : backend_(backend), table_(backend.table<Codec>(meta)) {}

  void setCurrentNamespace(const N& ns) override { key_.setNamespace(ns); }
  std::optional<UV> get(const UK& userKey) override {
    const Inner* inner = table_.find(at());
    if (inner == nullptr) return std::nullopt;
    auto it = inner->find(userKey);
    if (it == inner->end()) return std::nullopt;
    return it->second;
  }
  void put(const UK& userKey, const UV& value) override {
    table_.getOrInsert(at()).insert_or_assign(userKey, value);
  }
  void remove(const UK& userKey) override {
    const heap::Addr a = at();
    removeFrom(a.group, a.key, userKey);
  }
  bool contains(const UK& userKey) override {
    const Inner* inner = table_.find(at());
    return inner != nullptr && inner->find(userKey) != inner->end();
  }
  bool isEmpty() override {
    const Inner* inner = table_.find(at());
    return inner == nullptr || inner->empty();
  }
  void clear() override { table_.erase(at()); }

  // Iterates a copy of the entries taken when the iterator is created, so
  // puts and removes through the state cannot invalidate it; remove()
  // removes the last returned user key from the live state of the key and
  // namespace the iterator was created for.
  std::unique_ptr<MapStateIterator<UK, UV>> iterator() override {
    const heap::Addr a = at();
    std::vector<std::pair<UK, UV>> entries;
    if (const Inner* inner = table_.find(a)) entries.assign(inner->begin(), inner->end());
    return std::make_unique<Iterator>(*this, a.group, std::string(a.key), std::move(entries));
  }

 private:
  class Iterator final : public MapStateIterator<UK, UV> {
   public:
    Iterator(HeapMapState& state, size_t group, std::string entryKey,
             std::vector<std::pair<UK, UV>> entries)
        : state_(state),
          group_(group),
          entryKey_(std::move(entryKey)),
          entries_(std::move(entries)) {}
    bool hasNext() override { return next_ < entries_.size(); }
    std::pair<UK, UV> next() override {
      if (next_ >= entries_.size()) {
        throw SluiceException("MapStateIterator::next() called with no entries left");
      }
      canRemove_ = true;
      std::pair<UK, UV>& e = entries_[next_++];
      return {e.first, std::move(e.second)};
    }
    void remove() override {
      if (!canRemove_) {
        throw SluiceException("MapStateIterator::remove() must follow a call of next()");
      }
      canRemove_ = false;
      state_.removeFrom(group_, entryKey_, entries_[next_ - 1].first);
    }

   private:
    HeapMapState& state_;
    size_t group_;
    std::string entryKey_;
    std::vector<std::pair<UK, UV>> entries_;
    size_t next_ = 0;
    bool canRemove_ = false;
  };

  void removeFrom(size_t g, std::string_view key, const UK& userKey) {
    const Inner* inner = table_.find(g, key);
    if (inner == nullptr || inner->find(userKey) == inner->end()) return;
    Inner* mut = table_.findMutable(g, key);
    mut->erase(userKey);
    if (mut->empty()) table_.erase(g, key);
  }

  // The group first: it checks that a key is set.
  heap::Addr at() {
    const size_t g = backend_.currentGroupIndex();
    return {g, key_.get(backend_)};
  }

  HashMapKeyedStateBackend& backend_;
  heap::StateTable<Codec>& table_;
  heap::EntryKey<N> key_;
};

}  // namespace sluice
