// The untyped storage of one keyed state, as a backend provides it.
//
// A keyed state's user-facing object (ValueState<T>, ...) is a thin typed
// front end (internal/keyed_state.h) over one of these storages, which a
// backend creates for the state's name and StateTypes
// (KeyedStateBackend::createValueStorage and friends). Storages address the
// entry of the backend's current key (KeyedStateBackend::setCurrentKey) in
// the namespace set last with setNamespace(); a new storage is in the empty
// namespace, which VoidNamespace serializes to.
//
// Objects cross this interface as pointers to objects of the storage's
// StateTypes: `value` for value storage, `element` for list storage, `key`
// and `value` for map storage. A pointer a storage returns stays valid until
// the next call on that storage (or on its cursor); callers copy what they
// keep. Pointers passed in are only read during the call.
//
// Threading: the task thread, like the backend. Failures throw: storages are
// called from user code (a state access inside processElement), where an
// exception fails the task and the restart strategy decides.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::internal {

class StateStorageBase {
 public:
  virtual ~StateStorageBase() = default;
  // The serialized namespace of the next accesses (empty for VoidNamespace).
  virtual void setNamespace(std::string_view namespaceBytes) = 0;
};

class ValueStorage : public StateStorageBase {
 public:
  // The current entry's value, or null when it has none.
  virtual const void* get() = 0;
  virtual void put(const void* value) = 0;
  virtual void clear() = 0;
};

// A run of list elements laid out as an array of the element type.
struct ElementSpan {
  const void* data = nullptr;
  size_t size = 0;
};

class ListStorage : public StateStorageBase {
 public:
  // The current entry's elements in insertion order (empty when none).
  virtual ElementSpan get() = 0;
  virtual void add(const void* element) = 0;
  // `elements` is an array of `count` elements (count > 0).
  virtual void addAll(const void* elements, size_t count) = 0;
  // Replaces the elements; count 0 clears the entry.
  virtual void update(const void* elements, size_t count) = 0;
  virtual void clear() = 0;
  // Appends the lists of the `sources` namespaces to the list of `target`
  // (for the current key) and clears the sources; list elements keep their
  // order within each source. Leaves the namespace unspecified.
  virtual void mergeNamespaces(std::string_view target,
                               const std::vector<std::string>& sources) = 0;
};

// Iterates the entries of one key's map (MapStateIterator's semantics).
class MapCursor {
 public:
  virtual ~MapCursor() = default;
  virtual bool hasNext() = 0;
  // Steps to the next entry; `key` and `value` stay valid until the next call
  // on this cursor. Throws when there is none.
  virtual void next(const void*& key, const void*& value) = 0;
  // Removes the entry next() returned last. Throws without such an entry.
  virtual void remove() = 0;
};

class MapStorage : public StateStorageBase {
 public:
  virtual const void* get(const void* userKey) = 0;
  virtual void put(const void* userKey, const void* userValue) = 0;
  virtual void remove(const void* userKey) = 0;
  virtual bool contains(const void* userKey) = 0;
  virtual bool isEmpty() = 0;
  virtual void clear() = 0;
  virtual std::unique_ptr<MapCursor> iterator() = 0;
};

}  // namespace sluice::internal
