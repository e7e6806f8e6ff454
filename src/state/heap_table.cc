// The heap backend's tables: ObjectTable (objects of one StateType inline in
// an open-addressing table) and StateTable (one per key group, copy-on-write
// for snapshots, and the mapping of entries to the canonical format).
#include <algorithm>
#include <new>

#include <sluice/core/assert.h>

#include "state/heap_state.h"

namespace sluice::heap {

namespace {

size_t roundUp(size_t n, size_t align) { return (n + align - 1) / align * align; }

size_t roundUpPowerOfTwo(size_t n) {
  size_t c = 16;
  while (c < n) c <<= 1;
  return c;
}

}  // namespace

// ---------------------------------------------------------------------------
// ObjectTable

ObjectTable::ObjectTable(const internal::StateType& type, size_t initialCapacity)
    : type_(type),
      objectOffset_(roundUp(sizeof(KeyBytes), type.align())),
      align_(std::max(alignof(KeyBytes), type.align())) {
  stride_ = roundUp(objectOffset_ + type.size(), align_);
  allocate(roundUpPowerOfTwo(initialCapacity));
}

ObjectTable::ObjectTable(const ObjectTable& other)
    : type_(other.type_),
      objectOffset_(other.objectOffset_),
      stride_(other.stride_),
      align_(other.align_) {
  allocate(other.capacity());
  size_t i = 0;
  try {
    for (; i < other.capacity(); ++i) {
      if (other.ctrl_[i] == 0) continue;
      const char* from = other.slots_ + i * stride_;
      char* to = slots_ + i * stride_;
      ::new (to) KeyBytes(keyOf(from));
      try {
        type_.copyConstruct(objectOf(to), objectOf(from));
      } catch (...) {
        reinterpret_cast<KeyBytes*>(to)->~KeyBytes();
        throw;
      }
      ctrl_[i] = other.ctrl_[i];
      ++size_;
    }
  } catch (...) {
    release();
    throw;
  }
}

ObjectTable::~ObjectTable() { release(); }

void ObjectTable::allocate(size_t capacity) {
  ctrl_ = static_cast<uint8_t*>(::operator new(capacity));
  std::memset(ctrl_, 0, capacity);
  try {
    slots_ = static_cast<char*>(internal::allocateAligned(capacity * stride_, align_));
  } catch (...) {
    ::operator delete(ctrl_);
    ctrl_ = nullptr;
    throw;
  }
  mask_ = capacity - 1;
  int bits = 0;
  while ((size_t{1} << bits) < capacity) ++bits;
  shift_ = 64 - bits;
  size_ = 0;
}

void ObjectTable::release() noexcept {
  if (ctrl_ == nullptr) return;
  clear();
  internal::freeAligned(slots_, align_);
  ::operator delete(ctrl_);
  ctrl_ = nullptr;
  slots_ = nullptr;
}

void ObjectTable::clear() noexcept {
  if (ctrl_ == nullptr) return;
  for (size_t i = 0; i < capacity(); ++i) {
    if (ctrl_[i] == 0) continue;
    char* slot = slots_ + i * stride_;
    type_.destroy(objectOf(slot));
    reinterpret_cast<KeyBytes*>(slot)->~KeyBytes();
    ctrl_[i] = 0;
  }
  size_ = 0;
}

std::pair<char*, bool> ObjectTable::tryEmplace(std::string_view key) {
  const uint64_t h = mix(BytesHash{}(key));
  const uint8_t tag = tagOf(h);
  size_t i = h >> shift_;
  for (;; i = (i + 1) & mask_) {
    const uint8_t c = ctrl_[i];
    if (c == 0) break;
    char* slot = slots_ + i * stride_;
    if (c == tag && keyOf(slot) == key) return {slot, false};
  }
  if (growsOnInsert()) {
    rehash(capacity() * 2);
    return tryEmplace(key);
  }
  char* slot = slots_ + i * stride_;
  auto* k = ::new (slot) KeyBytes(key);
  try {
    type_.construct(objectOf(slot));
  } catch (...) {
    k->~KeyBytes();
    throw;
  }
  ctrl_[i] = tag;
  ++size_;
  return {slot, true};
}

bool ObjectTable::erase(std::string_view key) {
  const uint64_t h = mix(BytesHash{}(key));
  const uint8_t tag = tagOf(h);
  size_t i = h >> shift_;
  for (;; i = (i + 1) & mask_) {
    const uint8_t c = ctrl_[i];
    if (c == 0) return false;
    if (c == tag && keyOf(slots_ + i * stride_) == key) break;
  }
  eraseAt(i);
  return true;
}

void ObjectTable::moveSlot(char* from, char* to) {
  auto* fromKey = reinterpret_cast<KeyBytes*>(from);
  ::new (to) KeyBytes(std::move(*fromKey));
  fromKey->~KeyBytes();
  // Moving objects must not fail halfway: StateTypes of the engine's own
  // types move without throwing, and user types are expected to.
  type_.moveConstruct(objectOf(to), objectOf(from));
  type_.destroy(objectOf(from));
}

void ObjectTable::moveEntry(size_t from, size_t to) {
  moveSlot(slots_ + from * stride_, slots_ + to * stride_);
  ctrl_[to] = ctrl_[from];
}

void ObjectTable::eraseAt(size_t i) {
  SLUICE_ASSERT(i < capacity() && ctrl_[i] != 0, "ObjectTable::eraseAt of an empty slot");
  char* holeSlot = slots_ + i * stride_;
  type_.destroy(objectOf(holeSlot));
  reinterpret_cast<KeyBytes*>(holeSlot)->~KeyBytes();
  size_t hole = i;
  for (size_t j = (i + 1) & mask_; ctrl_[j] != 0; j = (j + 1) & mask_) {
    char* from = slots_ + j * stride_;
    const size_t home = mix(BytesHash{}(keyOf(from))) >> shift_;
    // The entry at j may fill the hole when the hole lies on its probe path,
    // i.e. within [home, j) cyclically.
    if (((j - home) & mask_) >= ((j - hole) & mask_)) {
      moveEntry(j, hole);
      hole = j;
    }
  }
  ctrl_[hole] = 0;
  --size_;
}

void ObjectTable::eraseAll(const std::vector<size_t>& indices) {
  // A removed entry's slot is first marked as a hole (a control byte no tag
  // has: tags have their top bit set), so that a walk can tell a hole, which
  // entries after it may move into, from an empty slot, which ends the run.
  constexpr uint8_t kHole = 1;
  for (size_t i : indices) {
    SLUICE_ASSERT(i < capacity() && ctrl_[i] > kHole, "ObjectTable::eraseAll of an empty slot");
    char* slot = slots_ + i * stride_;
    type_.destroy(objectOf(slot));
    reinterpret_cast<KeyBytes*>(slot)->~KeyBytes();
    ctrl_[i] = kHole;
  }
  size_ -= indices.size();
  std::vector<size_t> holes(indices);  // where holes may remain at the end
  // The holes behind the walk, as offsets from its start, ascending.
  std::vector<size_t> open;
  bool walked = false;
  size_t walkStart = 0;
  size_t walkEnd = 0;  // the empty slot that ended the last walk
  for (size_t start : indices) {
    if (walked) {
      // Covered by the last walk: it passed this hole.
      const bool wrapped = walkEnd < walkStart;
      if (wrapped || start < walkEnd) continue;
    }
    // Every entry after the hole, up to the empty slot that ends its run,
    // moves to the first hole on its probe path [home, j), if there is one.
    // The holes the walk passed are in `open`; a hole before `start` on the
    // path (a run through the table's end, walked from its later part
    // first) is left to the walk from that hole, which comes later. Holes
    // are looked up, not scanned for: at a high load a path is dozens of
    // slots long, and scanning it for every entry was most of an eviction.
    open.assign(1, 0);
    size_t j = (start + 1) & mask_;
    for (; ctrl_[j] != 0; j = (j + 1) & mask_) {
      const size_t at = (j - start) & mask_;
      if (ctrl_[j] == kHole) {
        open.push_back(at);
        continue;
      }
      if (open.empty()) continue;
      char* from = slots_ + j * stride_;
      const size_t home = mix(BytesHash{}(keyOf(from))) >> shift_;
      const size_t displacement = (j - home) & mask_;
      // A path that begins at or before `start` passes every open hole.
      const auto hole = displacement >= at
                            ? open.begin()
                            : std::lower_bound(open.begin(), open.end(), at - displacement);
      if (hole == open.end()) continue;
      moveEntry(j, (start + *hole) & mask_);
      ctrl_[j] = kHole;
      holes.push_back(j);
      open.erase(hole);
      open.push_back(at);
    }
    walked = true;
    walkStart = start;
    walkEnd = j;
  }
  for (size_t h : holes) {
    if (ctrl_[h] == kHole) ctrl_[h] = 0;
  }
}

void ObjectTable::rehash(size_t newCapacity) { rebuild(newCapacity, nullptr); }

void ObjectTable::rebuild(size_t newCapacity, const std::function<bool(const char*)>& drop) {
  SLUICE_ASSERT(newCapacity >= 16 && (newCapacity & (newCapacity - 1)) == 0 &&
                    (drop || size_ < newCapacity - newCapacity / 8),
                "ObjectTable::rehash to a capacity that is no power of two >= 16 or too small");
  uint8_t* oldCtrl = ctrl_;
  char* oldSlots = slots_;
  const size_t oldCapacity = capacity();
  const size_t oldSize = size_;
  ctrl_ = nullptr;
  try {
    allocate(newCapacity);
  } catch (...) {
    ctrl_ = oldCtrl;
    slots_ = oldSlots;
    mask_ = oldCapacity - 1;
    int bits = 0;
    while ((size_t{1} << bits) < oldCapacity) ++bits;
    shift_ = 64 - bits;
    size_ = oldSize;
    throw;
  }
  for (size_t j = 0; j < oldCapacity; ++j) {
    if (oldCtrl[j] == 0) continue;
    char* from = oldSlots + j * stride_;
    if (drop && drop(from)) {
      type_.destroy(objectOf(from));
      reinterpret_cast<KeyBytes*>(from)->~KeyBytes();
      continue;
    }
    SLUICE_ASSERT(size_ < capacity() - capacity() / 8,
                  "ObjectTable::rebuild keeps more entries than the new capacity holds");
    const uint64_t h = mix(BytesHash{}(keyOf(from)));
    size_t i = h >> shift_;
    while (ctrl_[i] != 0) i = (i + 1) & mask_;
    moveSlot(from, slots_ + i * stride_);
    ctrl_[i] = tagOf(h);
    ++size_;
  }
  internal::freeAligned(oldSlots, align_);
  ::operator delete(oldCtrl);
}

// ---------------------------------------------------------------------------
// StateTable

StateTable::StateTable(const KeyedBackendParams& params, StateMetaInfo meta, TableLayout layout,
                       size_t numGroups)
    : params_(params), meta_(std::move(meta)), layout_(std::move(layout)), groups_(numGroups) {}

ObjectTable& StateTable::writable(size_t g) {
  std::shared_ptr<Group>& group = groups_[g];
  if (!group) {
    group = std::make_shared<Group>(layout_.stored);
    ++epoch_;
  } else if (group->pendingSnapshots.load(std::memory_order_acquire) != 0) {
    // A snapshot still has to read this table: leave it to the snapshot.
    group = std::make_shared<Group>(*group);
    ++epoch_;
  }
  return group->table;
}

void StateTable::clear() {
  for (std::shared_ptr<Group>& group : groups_) {
    if (!group) continue;
    if (group->pendingSnapshots.load(std::memory_order_acquire) != 0) {
      group.reset();
    } else {
      group->table.clear();
    }
  }
  ++epoch_;
}

void StateTable::forEachEntryKey(const std::function<void(std::string_view, size_t)>& fn) const {
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (!groups_[g]) continue;
    groups_[g]->table.forEach([&](const KeyBytes& key, const void*) { fn(key.view(), g); });
  }
}

size_t StateTable::namespaceEnd(std::string_view entryKey) const {
  const size_t keyEnd =
      params_.keyLength(reinterpret_cast<const uint8_t*>(entryKey.data()), entryKey.size());
  if (keyEnd > entryKey.size()) {
    throw SerializationError("the key length " + std::to_string(keyEnd) +
                             " exceeds the entry key of " + std::to_string(entryKey.size()) +
                             " bytes");
  }
  DataInputView in(reinterpret_cast<const uint8_t*>(entryKey.data()) + keyEnd,
                   entryKey.size() - keyEnd);
  internal::ObjectBuffer ns(*layout_.ns);
  layout_.ns->deserialize(ns.get(), in);
  return keyEnd + in.position();
}

namespace {

// Deserializes exactly all of `bytes` into the object `into` of `type`.
void decodeAll(const internal::StateType& type, void* into, std::string_view bytes,
               const char* what) {
  DataInputView in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  type.deserialize(into, in);
  if (in.remaining() != 0) {
    in.failAt(in.position(), std::to_string(in.remaining()) + " bytes left over after the " + what);
  }
}

std::string_view encode(const internal::StateType& type, const void* object,
                        std::vector<uint8_t>& buf) {
  buf.clear();
  DataOutputView out(buf);
  type.serialize(object, out);
  return {reinterpret_cast<const char*>(buf.data()), buf.size()};
}

}  // namespace

void StateTable::restoreEntry(size_t g, std::string_view key, std::string_view value) {
  const size_t nsEnd = namespaceEnd(key);
  switch (layout_.storage) {
    case StateStorage::kValue: {
      if (nsEnd != key.size()) {
        throw SerializationError(std::to_string(key.size() - nsEnd) +
                                 " bytes left over after the namespace in a value entry key");
      }
      internal::ObjectBuffer v(*layout_.stored);
      decodeAll(*layout_.stored, v.get(), value, "value");
      layout_.stored->moveAssign(getOrInsert(g, key), v.get());
      return;
    }
    case StateStorage::kList: {
      if (nsEnd != key.size()) {
        throw SerializationError(std::to_string(key.size() - nsEnd) +
                                 " bytes left over after the namespace in a list entry key");
      }
      const auto& list = static_cast<const internal::ListType&>(*layout_.stored);
      internal::ObjectBuffer decoded(list);
      DataInputView in(reinterpret_cast<const uint8_t*>(value.data()), value.size());
      list.deserialize(decoded.get(), in);
      list.appendMoved(getOrInsert(g, key), decoded.get());
      return;
    }
    case StateStorage::kMap: {
      // The entry key is [key | namespace | user key]: the table key is the
      // first two.
      const auto& map = static_cast<const internal::MapType&>(*layout_.stored);
      internal::ObjectBuffer userKey(map.keyType());
      decodeAll(map.keyType(), userKey.get(), key.substr(nsEnd), "map user key");
      internal::ObjectBuffer userValue(map.valueType());
      decodeAll(map.valueType(), userValue.get(), value, "map user value");
      map.put(getOrInsert(g, key.substr(0, nsEnd)), userKey.get(), userValue.get());
      return;
    }
  }
}

class StateTable::Part final : public StateSnapshotPart {
 public:
  Part(StateMetaInfo meta, TableLayout layout, std::vector<std::shared_ptr<Group>> groups)
      : meta_(std::move(meta)), layout_(std::move(layout)), groups_(std::move(groups)) {}
  ~Part() override {
    for (size_t g = 0; g < groups_.size(); ++g) release(g);
  }
  void writeKeyGroup(size_t g, uint16_t stateIndex, CanonicalSnapshotWriter& writer,
                     int64_t now) override {
    if (g >= groups_.size() || !groups_[g]) return;
    SnapshotEntryFilter filter(meta_);
    auto emit = [&](std::string_view k, std::string_view v) {
      filter.write(writer, stateIndex, k, v, now);
    };
    const internal::StateType& stored = *layout_.stored;
    groups_[g]->table.forEach([&](const KeyBytes& key, const void* object) {
      if (layout_.storage != StateStorage::kMap) {
        emit(key.view(), encode(stored, object, buf_));
        return;
      }
      const auto& map = static_cast<const internal::MapType&>(stored);
      map.forEach(object, [&](const void* uk, const void* uv) {
        keyBuf_.assign(key.view());
        keyBuf_.append(encode(map.keyType(), uk, buf_));
        emit(keyBuf_, encode(map.valueType(), uv, buf_));
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
  // Keeps the types alive as long as the frozen tables.
  TableLayout layout_;
  std::vector<std::shared_ptr<Group>> groups_;
  std::vector<uint8_t> buf_;
  std::string keyBuf_;
};

std::unique_ptr<StateSnapshotPart> StateTable::snapshot() const {
  ++epoch_;  // remembered slots must not be written in place any more
  for (const std::shared_ptr<Group>& group : groups_) {
    if (group) group->pendingSnapshots.fetch_add(1, std::memory_order_relaxed);
  }
  return std::make_unique<Part>(meta_, layout_, groups_);
}

}  // namespace sluice::heap
