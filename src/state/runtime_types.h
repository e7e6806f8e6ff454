// StateTypes the backends build at run time from the users' types: a list of
// elements (the heap backend's list entries), a map of user keys to values
// (its map entries), and a value with its TTL timestamp.
//
// Objects of these types are plain structs of the bytes below; they do not
// know their type, so every operation goes through the type object, which
// knows the element / key / value types. A type must outlive its objects:
// owners hold it by shared_ptr.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <sluice/state/state_type.h>

namespace sluice::internal {

// ---------------------------------------------------------------------------
// Lists

// A growable array of objects of one element type (ListType owns the
// meaning). 16 bytes, so a heap table slot stays small.
struct ErasedVector {
  char* data = nullptr;
  uint32_t size = 0;
  uint32_t capacity = 0;
};

// Serializes as the list value of the canonical format (snapshot.h): each
// element as [u32 little-endian length | element bytes]; deserialize reads
// such elements until the input ends and appends them.
class ListType final : public StateType {
 public:
  explicit ListType(std::shared_ptr<const StateType> element);
  const StateType& element() const { return *element_; }

  void construct(void* at) const override;
  void copyConstruct(void* at, const void* from) const override;
  void moveConstruct(void* at, void* from) const override;
  void destroy(void* at) const noexcept override;
  void copyAssign(void* to, const void* from) const override;
  void moveAssign(void* to, void* from) const override;
  void serialize(const void* value, DataOutputView& out) const override;
  void deserialize(void* into, DataInputView& in) const override;
  std::string schema() const override;
  bool sameAs(const StateType& other) const override;

  // Element access and changes; `list` points to an ErasedVector of this type.
  static size_t size(const void* list) { return static_cast<const ErasedVector*>(list)->size; }
  const void* at(const void* list, size_t i) const {
    return static_cast<const ErasedVector*>(list)->data + i * elementSize_;
  }
  void* at(void* list, size_t i) const {
    return static_cast<ErasedVector*>(list)->data + i * elementSize_;
  }
  void pushBack(void* list, const void* element) const;
  void pushBackMove(void* list, void* element) const;
  // Appends a default-constructed element and returns it.
  void* emplaceBack(void* list) const;
  // Appends copies of the `count` elements of the array `elements`.
  void appendCopies(void* list, const void* elements, size_t count) const;
  // Moves every element of `from` to the end of `list`; `from` ends empty.
  void appendMoved(void* list, void* from) const;
  void clear(void* list) const noexcept;
  void reserve(void* list, size_t capacity) const;

 private:
  std::shared_ptr<const StateType> element_;
  size_t elementSize_;
};

// ---------------------------------------------------------------------------
// Maps

// A chained hash map from user keys to user values (MapType owns the
// meaning): buckets of nodes, each node one allocation holding the key and
// the value. Keys hash with the key type's hashCode (Java's, as Flink's heap
// backend) and compare with its equals.
struct ErasedMap {
  void** buckets = nullptr;
  uint32_t bucketCount = 0;
  uint32_t size = 0;
};

// Not serializable as one value: a map's entries are separate entries of the
// canonical format; serialize() and deserialize() assert.
class MapType final : public StateType {
 public:
  MapType(std::shared_ptr<const StateType> key, std::shared_ptr<const StateType> value);
  const StateType& keyType() const { return *key_; }
  const StateType& valueType() const { return *value_; }

  void construct(void* at) const override;
  void copyConstruct(void* at, const void* from) const override;
  void moveConstruct(void* at, void* from) const override;
  void destroy(void* at) const noexcept override;
  void copyAssign(void* to, const void* from) const override;
  void moveAssign(void* to, void* from) const override;
  void serialize(const void* value, DataOutputView& out) const override;
  void deserialize(void* into, DataInputView& in) const override;
  std::string schema() const override;
  bool sameAs(const StateType& other) const override;

  static size_t size(const void* map) { return static_cast<const ErasedMap*>(map)->size; }
  // The value of `key`, or null.
  const void* find(const void* map, const void* key) const;
  void* find(void* map, const void* key) const;
  // Sets `key` to a copy of `value`, inserting it when absent.
  void put(void* map, const void* key, const void* value) const;
  // Removes `key`; returns whether it was there.
  bool erase(void* map, const void* key) const;
  void clear(void* map) const noexcept;
  // Walks the entries one by one: start from Position{} and call advance()
  // until it returns false. Any change of the map invalidates positions.
  struct Position {
    uint32_t bucket = 0;
    const void* node = nullptr;
  };
  bool advance(const void* map, Position& p) const;
  const void* keyAt(const Position& p) const { return keyOf(p.node); }
  const void* valueAt(const Position& p) const { return valueOf(p.node); }
  std::shared_ptr<const StateType> sharedKeyType() const { return key_; }
  std::shared_ptr<const StateType> sharedValueType() const { return value_; }

  // Calls fn(key, value) for every entry, in no particular order.
  template <class F>
  void forEach(const void* map, F&& fn) const {
    const auto* m = static_cast<const ErasedMap*>(map);
    for (uint32_t b = 0; b < m->bucketCount; ++b) {
      for (const void* n = m->buckets[b]; n != nullptr; n = nextOf(n)) {
        fn(keyOf(n), valueOf(n));
      }
    }
  }

 private:
  struct NodeHeader {
    void* next;
    int32_t hash;
  };
  static const void* nextOf(const void* node) { return static_cast<const NodeHeader*>(node)->next; }
  const void* keyOf(const void* node) const { return static_cast<const char*>(node) + keyOffset_; }
  void* keyOf(void* node) const { return static_cast<char*>(node) + keyOffset_; }
  const void* valueOf(const void* node) const {
    return static_cast<const char*>(node) + valueOffset_;
  }
  void* valueOf(void* node) const { return static_cast<char*>(node) + valueOffset_; }
  void** slotOf(ErasedMap& m, const void* key, int32_t& hash) const;
  void* newNode(int32_t hash, const void* key, const void* value) const;
  void freeNode(void* node) const noexcept;
  void rehash(ErasedMap& m, uint32_t bucketCount) const;

  std::shared_ptr<const StateType> key_;
  std::shared_ptr<const StateType> value_;
  size_t keyOffset_;
  size_t valueOffset_;
  size_t nodeSize_;
  size_t nodeAlign_;
};

// ---------------------------------------------------------------------------
// Time to live

// A value and the time it was last accessed: [i64 timestamp | value], also
// serialized in that order (snapshot.h's TTL layout). Schema "ttl<inner>".
class TtlType final : public StateType {
 public:
  explicit TtlType(std::shared_ptr<const StateType> inner);
  const StateType& inner() const { return *inner_; }

  static int64_t timestamp(const void* v) { return *static_cast<const int64_t*>(v); }
  static void setTimestamp(void* v, int64_t ts) { *static_cast<int64_t*>(v) = ts; }
  const void* value(const void* v) const { return static_cast<const char*>(v) + valueOffset_; }
  void* value(void* v) const { return static_cast<char*>(v) + valueOffset_; }

  void construct(void* at) const override;
  void copyConstruct(void* at, const void* from) const override;
  void moveConstruct(void* at, void* from) const override;
  void destroy(void* at) const noexcept override;
  void copyAssign(void* to, const void* from) const override;
  void moveAssign(void* to, void* from) const override;
  void serialize(const void* value, DataOutputView& out) const override;
  void deserialize(void* into, DataInputView& in) const override;
  std::string schema() const override;
  bool sameAs(const StateType& other) const override;

 private:
  std::shared_ptr<const StateType> inner_;
  size_t valueOffset_;
};

// One object of a type, in storage of its own (scratch space for values
// decoded from bytes). Default-constructed on creation.
class ObjectBuffer {
 public:
  explicit ObjectBuffer(const StateType& type);
  ~ObjectBuffer();
  ObjectBuffer(const ObjectBuffer&) = delete;
  ObjectBuffer& operator=(const ObjectBuffer&) = delete;
  void* get() { return object_; }
  const void* get() const { return object_; }
  // Destroys and default-constructs the object again.
  void reset();

 private:
  const StateType& type_;
  void* object_;
};

// Allocation with the alignment a StateType asks for.
void* allocateAligned(size_t size, size_t align);
void freeAligned(void* p, size_t align) noexcept;

}  // namespace sluice::internal
