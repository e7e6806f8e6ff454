#include "state/runtime_types.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

#include <sluice/core/assert.h>
#include <sluice/state/snapshot.h>

namespace sluice::internal {

namespace {

size_t roundUp(size_t n, size_t align) { return (n + align - 1) / align * align; }

}  // namespace

void* allocateAligned(size_t size, size_t align) {
  if (align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) return ::operator new(size);
  return ::operator new(size, std::align_val_t(align));
}

void freeAligned(void* p, size_t align) noexcept {
  if (p == nullptr) return;
  if (align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
    ::operator delete(p);
  } else {
    ::operator delete(p, std::align_val_t(align));
  }
}

// StateType's defaults: only map key types hash and compare.
int32_t StateType::hashCode(const void*) const {
  SLUICE_ASSERT(false, "hashCode() of a type that is not a map state's key type");
  return 0;
}

bool StateType::equals(const void*, const void*) const {
  SLUICE_ASSERT(false, "equals() of a type that is not a map state's key type");
  return false;
}

ObjectBuffer::ObjectBuffer(const StateType& type)
    : type_(type), object_(allocateAligned(type.size(), type.align())) {
  try {
    type_.construct(object_);
  } catch (...) {
    freeAligned(object_, type_.align());
    throw;
  }
}

ObjectBuffer::~ObjectBuffer() {
  type_.destroy(object_);
  freeAligned(object_, type_.align());
}

void ObjectBuffer::reset() {
  type_.destroy(object_);
  type_.construct(object_);
}

// ---------------------------------------------------------------------------
// ListType

ListType::ListType(std::shared_ptr<const StateType> element)
    : StateType(sizeof(ErasedVector), alignof(ErasedVector)),
      element_(std::move(element)),
      elementSize_(element_->size()) {}

void ListType::construct(void* at) const { ::new (at) ErasedVector(); }

void ListType::copyConstruct(void* at, const void* from) const {
  auto* v = ::new (at) ErasedVector();
  try {
    const auto* f = static_cast<const ErasedVector*>(from);
    appendCopies(v, f->data, f->size);
  } catch (...) {
    destroy(v);
    throw;
  }
}

void ListType::moveConstruct(void* at, void* from) const {
  auto* f = static_cast<ErasedVector*>(from);
  ::new (at) ErasedVector(*f);
  *f = ErasedVector();
}

void ListType::destroy(void* at) const noexcept {
  auto* v = static_cast<ErasedVector*>(at);
  clear(v);
  freeAligned(v->data, element_->align());
  *v = ErasedVector();
}

void ListType::copyAssign(void* to, const void* from) const {
  if (to == from) return;
  const auto* f = static_cast<const ErasedVector*>(from);
  clear(to);
  appendCopies(to, f->data, f->size);
}

void ListType::moveAssign(void* to, void* from) const {
  if (to == from) return;
  destroy(to);
  moveConstruct(to, from);
}

void ListType::serialize(const void* value, DataOutputView& out) const {
  const auto* v = static_cast<const ErasedVector*>(value);
  std::vector<uint8_t> bytes;
  for (uint32_t i = 0; i < v->size; ++i) {
    const size_t begin = beginListElement(bytes);
    DataOutputView e(bytes);
    element_->serialize(at(v, i), e);
    endListElement(bytes, begin);
  }
  out.writeBytes(bytes.data(), bytes.size());
}

void ListType::deserialize(void* into, DataInputView& in) const {
  std::vector<uint8_t> bytes(in.remaining());
  in.readBytes(bytes.data(), bytes.size());
  ListValueReader reader(
      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  std::string_view element;
  while (reader.next(element)) {
    DataInputView e(reinterpret_cast<const uint8_t*>(element.data()), element.size());
    element_->deserialize(emplaceBack(into), e);
    if (e.remaining() != 0) {
      throw SerializationError(std::to_string(e.remaining()) +
                               " bytes left over after a list element of " + element_->schema());
    }
  }
}

std::string ListType::schema() const { return "list<" + element_->schema() + ">"; }

bool ListType::sameAs(const StateType& other) const {
  const auto* o = dynamic_cast<const ListType*>(&other);
  return o != nullptr && element_->sameAs(*o->element_);
}

void ListType::reserve(void* list, size_t capacity) const {
  auto* v = static_cast<ErasedVector*>(list);
  if (capacity <= v->capacity) return;
  if (capacity > UINT32_MAX) throw SluiceException("a list state entry exceeds 2^32 elements");
  const size_t align = element_->align();
  char* data = static_cast<char*>(allocateAligned(capacity * elementSize_, align));
  size_t moved = 0;
  try {
    for (; moved < v->size; ++moved) {
      element_->moveConstruct(data + moved * elementSize_, v->data + moved * elementSize_);
    }
  } catch (...) {
    for (size_t i = 0; i < moved; ++i) element_->destroy(data + i * elementSize_);
    freeAligned(data, align);
    throw;
  }
  for (uint32_t i = 0; i < v->size; ++i) element_->destroy(v->data + i * elementSize_);
  freeAligned(v->data, align);
  v->data = data;
  v->capacity = static_cast<uint32_t>(capacity);
}

void* ListType::emplaceBack(void* list) const {
  auto* v = static_cast<ErasedVector*>(list);
  if (v->size == v->capacity) reserve(v, std::max<size_t>(4, size_t{v->capacity} * 2));
  void* e = v->data + v->size * elementSize_;
  element_->construct(e);
  ++v->size;
  return e;
}

void ListType::pushBack(void* list, const void* element) const {
  auto* v = static_cast<ErasedVector*>(list);
  if (v->size == v->capacity) {
    // `element` may live in this list: copy it before the array moves.
    if (element >= v->data && element < v->data + v->size * elementSize_) {
      void* copy = allocateAligned(elementSize_, element_->align());
      try {
        element_->copyConstruct(copy, element);
        pushBackMove(list, copy);
      } catch (...) {
        element_->destroy(copy);
        freeAligned(copy, element_->align());
        throw;
      }
      element_->destroy(copy);
      freeAligned(copy, element_->align());
      return;
    }
    reserve(v, std::max<size_t>(4, size_t{v->capacity} * 2));
  }
  element_->copyConstruct(v->data + v->size * elementSize_, element);
  ++v->size;
}

void ListType::pushBackMove(void* list, void* element) const {
  auto* v = static_cast<ErasedVector*>(list);
  if (v->size == v->capacity) reserve(v, std::max<size_t>(4, size_t{v->capacity} * 2));
  element_->moveConstruct(v->data + v->size * elementSize_, element);
  ++v->size;
}

void ListType::appendCopies(void* list, const void* elements, size_t count) const {
  if (count == 0) return;
  auto* v = static_cast<ErasedVector*>(list);
  SLUICE_ASSERT(
      elements < v->data || elements >= v->data + v->capacity * elementSize_ || v->data == nullptr,
      "appendCopies() of a list's own elements");
  reserve(v, std::max<size_t>(size_t{v->size} + count, size_t{v->capacity}));
  const char* from = static_cast<const char*>(elements);
  for (size_t i = 0; i < count; ++i) {
    element_->copyConstruct(v->data + v->size * elementSize_, from + i * elementSize_);
    ++v->size;
  }
}

void ListType::appendMoved(void* list, void* from) const {
  auto* v = static_cast<ErasedVector*>(list);
  auto* f = static_cast<ErasedVector*>(from);
  if (f->size == 0) return;
  if (v->size == 0) {
    moveAssign(v, f);
    return;
  }
  reserve(v, size_t{v->size} + f->size);
  for (uint32_t i = 0; i < f->size; ++i) {
    element_->moveConstruct(v->data + v->size * elementSize_, f->data + i * elementSize_);
    ++v->size;
  }
  clear(f);
}

void ListType::clear(void* list) const noexcept {
  auto* v = static_cast<ErasedVector*>(list);
  for (uint32_t i = 0; i < v->size; ++i) element_->destroy(v->data + i * elementSize_);
  v->size = 0;
}

// ---------------------------------------------------------------------------
// MapType

MapType::MapType(std::shared_ptr<const StateType> key, std::shared_ptr<const StateType> value)
    : StateType(sizeof(ErasedMap), alignof(ErasedMap)),
      key_(std::move(key)),
      value_(std::move(value)) {
  nodeAlign_ = std::max({alignof(NodeHeader), key_->align(), value_->align()});
  keyOffset_ = roundUp(sizeof(NodeHeader), key_->align());
  valueOffset_ = roundUp(keyOffset_ + key_->size(), value_->align());
  nodeSize_ = roundUp(valueOffset_ + value_->size(), nodeAlign_);
}

void MapType::construct(void* at) const { ::new (at) ErasedMap(); }

void MapType::copyConstruct(void* at, const void* from) const {
  auto* m = ::new (at) ErasedMap();
  try {
    forEach(from, [&](const void* k, const void* v) { put(m, k, v); });
  } catch (...) {
    destroy(m);
    throw;
  }
}

void MapType::moveConstruct(void* at, void* from) const {
  auto* f = static_cast<ErasedMap*>(from);
  ::new (at) ErasedMap(*f);
  *f = ErasedMap();
}

void MapType::destroy(void* at) const noexcept {
  auto* m = static_cast<ErasedMap*>(at);
  clear(m);
  ::operator delete(m->buckets);
  *m = ErasedMap();
}

void MapType::copyAssign(void* to, const void* from) const {
  if (to == from) return;
  clear(to);
  forEach(from, [&](const void* k, const void* v) { put(to, k, v); });
}

void MapType::moveAssign(void* to, void* from) const {
  if (to == from) return;
  destroy(to);
  moveConstruct(to, from);
}

void MapType::serialize(const void*, DataOutputView&) const {
  SLUICE_ASSERT(false, "a heap map entry is written entry by entry, never as one value");
}

void MapType::deserialize(void*, DataInputView&) const {
  SLUICE_ASSERT(false, "a heap map entry is restored entry by entry, never as one value");
}

std::string MapType::schema() const {
  return "map<" + key_->schema() + ", " + value_->schema() + ">";
}

bool MapType::sameAs(const StateType& other) const {
  const auto* o = dynamic_cast<const MapType*>(&other);
  return o != nullptr && key_->sameAs(*o->key_) && value_->sameAs(*o->value_);
}

void** MapType::slotOf(ErasedMap& m, const void* key, int32_t& hash) const {
  hash = key_->hashCode(key);
  if (m.bucketCount == 0) return nullptr;
  // Spread the Java hash over the bucket index (a power of two).
  const uint64_t spread =
      static_cast<uint64_t>(static_cast<uint32_t>(hash)) * 0x9E3779B97F4A7C15ULL;
  void** slot = &m.buckets[spread >> 32 & (m.bucketCount - 1)];
  while (*slot != nullptr) {
    auto* header = static_cast<NodeHeader*>(*slot);
    if (header->hash == hash && key_->equals(keyOf(*slot), key)) return slot;
    slot = &header->next;
  }
  return slot;
}

const void* MapType::find(const void* map, const void* key) const {
  return find(const_cast<void*>(map), key);
}

void* MapType::find(void* map, const void* key) const {
  auto& m = *static_cast<ErasedMap*>(map);
  int32_t hash = 0;
  void** slot = slotOf(m, key, hash);
  return slot == nullptr || *slot == nullptr ? nullptr : valueOf(*slot);
}

void* MapType::newNode(int32_t hash, const void* key, const void* value) const {
  void* node = allocateAligned(nodeSize_, nodeAlign_);
  auto* header = ::new (node) NodeHeader{nullptr, hash};
  try {
    key_->copyConstruct(keyOf(node), key);
  } catch (...) {
    freeAligned(node, nodeAlign_);
    throw;
  }
  try {
    value_->copyConstruct(valueOf(node), value);
  } catch (...) {
    key_->destroy(keyOf(node));
    freeAligned(node, nodeAlign_);
    throw;
  }
  (void)header;
  return node;
}

void MapType::freeNode(void* node) const noexcept {
  value_->destroy(valueOf(node));
  key_->destroy(keyOf(node));
  freeAligned(node, nodeAlign_);
}

void MapType::rehash(ErasedMap& m, uint32_t bucketCount) const {
  void** buckets = static_cast<void**>(::operator new(sizeof(void*) * bucketCount));
  std::memset(buckets, 0, sizeof(void*) * bucketCount);
  for (uint32_t b = 0; b < m.bucketCount; ++b) {
    void* n = m.buckets[b];
    while (n != nullptr) {
      auto* header = static_cast<NodeHeader*>(n);
      void* next = header->next;
      const uint64_t spread =
          static_cast<uint64_t>(static_cast<uint32_t>(header->hash)) * 0x9E3779B97F4A7C15ULL;
      void*& head = buckets[spread >> 32 & (bucketCount - 1)];
      header->next = head;
      head = n;
      n = next;
    }
  }
  ::operator delete(m.buckets);
  m.buckets = buckets;
  m.bucketCount = bucketCount;
}

void MapType::put(void* map, const void* key, const void* value) const {
  auto& m = *static_cast<ErasedMap*>(map);
  int32_t hash = 0;
  void** slot = slotOf(m, key, hash);
  if (slot != nullptr && *slot != nullptr) {
    value_->copyAssign(valueOf(*slot), value);
    return;
  }
  void* node = newNode(hash, key, value);
  if (m.size + 1 > m.bucketCount) {  // load factor at most 1
    try {
      rehash(m, m.bucketCount == 0 ? 8 : m.bucketCount * 2);
    } catch (...) {
      freeNode(node);
      throw;
    }
    slot = slotOf(m, key, hash);
  }
  *slot = node;
  ++m.size;
}

bool MapType::erase(void* map, const void* key) const {
  auto& m = *static_cast<ErasedMap*>(map);
  int32_t hash = 0;
  void** slot = slotOf(m, key, hash);
  if (slot == nullptr || *slot == nullptr) return false;
  void* node = *slot;
  *slot = static_cast<NodeHeader*>(node)->next;
  freeNode(node);
  --m.size;
  return true;
}

bool MapType::advance(const void* map, Position& p) const {
  const auto* m = static_cast<const ErasedMap*>(map);
  if (p.node != nullptr) {
    p.node = nextOf(p.node);
    if (p.node != nullptr) return true;
    ++p.bucket;
  }
  for (; p.bucket < m->bucketCount; ++p.bucket) {
    if (m->buckets[p.bucket] != nullptr) {
      p.node = m->buckets[p.bucket];
      return true;
    }
  }
  return false;
}

void MapType::clear(void* map) const noexcept {
  auto& m = *static_cast<ErasedMap*>(map);
  for (uint32_t b = 0; b < m.bucketCount; ++b) {
    void* n = m.buckets[b];
    while (n != nullptr) {
      void* next = static_cast<NodeHeader*>(n)->next;
      freeNode(n);
      n = next;
    }
    m.buckets[b] = nullptr;
  }
  m.size = 0;
}

// ---------------------------------------------------------------------------
// TtlType

TtlType::TtlType(std::shared_ptr<const StateType> inner)
    : StateType(roundUp(roundUp(sizeof(int64_t), inner->align()) + inner->size(),
                        std::max(alignof(int64_t), inner->align())),
                std::max(alignof(int64_t), inner->align())),
      inner_(std::move(inner)),
      valueOffset_(roundUp(sizeof(int64_t), inner_->align())) {}

void TtlType::construct(void* at) const {
  setTimestamp(at, 0);
  inner_->construct(value(at));
}

void TtlType::copyConstruct(void* at, const void* from) const {
  setTimestamp(at, timestamp(from));
  inner_->copyConstruct(value(at), value(from));
}

void TtlType::moveConstruct(void* at, void* from) const {
  setTimestamp(at, timestamp(from));
  inner_->moveConstruct(value(at), value(from));
}

void TtlType::destroy(void* at) const noexcept { inner_->destroy(value(at)); }

void TtlType::copyAssign(void* to, const void* from) const {
  inner_->copyAssign(value(to), value(from));
  setTimestamp(to, timestamp(from));
}

void TtlType::moveAssign(void* to, void* from) const {
  inner_->moveAssign(value(to), value(from));
  setTimestamp(to, timestamp(from));
}

void TtlType::serialize(const void* v, DataOutputView& out) const {
  out.writeI64(timestamp(v));
  inner_->serialize(value(v), out);
}

void TtlType::deserialize(void* into, DataInputView& in) const {
  setTimestamp(into, in.readI64());
  inner_->deserialize(value(into), in);
}

std::string TtlType::schema() const { return "ttl<" + inner_->schema() + ">"; }

bool TtlType::sameAs(const StateType& other) const {
  const auto* o = dynamic_cast<const TtlType*>(&other);
  return o != nullptr && inner_->sameAs(*o->inner_);
}

}  // namespace sluice::internal
