// StateType: what the state backends do with objects of a type they do not
// know.
//
// Keyed state is typed where the user sees it (ValueState<T>, ListState<T>,
// MapState<UK, UV>) and untyped inside the backends, which live in src/state
// and are compiled once. The typed front ends (internal/keyed_state.h) hand
// the backends objects as `void*` together with the StateType that describes
// them: how to construct, copy, move, destroy, serialize and deserialize one,
// and its size and alignment, so a backend can keep objects inline in its own
// tables. stateTypeOf<T>() returns the one StateType of T; it is the only
// per-type code a state instantiates. Backends build other StateTypes at run
// time from these (a list of T, a map of UK to UV, a T with a TTL timestamp).
//
// Contract: every pointer passed to a StateType method points to storage of
// size() bytes aligned to align(), holding a live object of the type (or, for
// the construct methods, raw storage). Methods may throw what T's own
// constructors, assignments and serializer throw; destroy() does not throw.
// Thread-safe: StateTypes are immutable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <typeinfo>
#include <utility>

#include <sluice/core/key_hash.h>
#include <sluice/core/serializer.h>

namespace sluice::internal {

class StateType {
 public:
  StateType(size_t size, size_t align) : size_(size), align_(align) {}
  virtual ~StateType() = default;
  StateType(const StateType&) = delete;
  StateType& operator=(const StateType&) = delete;

  size_t size() const { return size_; }
  size_t align() const { return align_; }

  virtual void construct(void* at) const = 0;  // default-constructs
  virtual void copyConstruct(void* at, const void* from) const = 0;
  virtual void moveConstruct(void* at, void* from) const = 0;
  virtual void destroy(void* at) const noexcept = 0;
  virtual void copyAssign(void* to, const void* from) const = 0;
  virtual void moveAssign(void* to, void* from) const = 0;
  virtual void serialize(const void* value, DataOutputView& out) const = 0;
  // Overwrites the live object `into` (TypeSerializer<T>::deserialize).
  virtual void deserialize(void* into, DataInputView& in) const = 0;
  virtual std::string schema() const = 0;

  // Map state keys only (MapKeyType): Java's hashCode of the key, and equality.
  virtual int32_t hashCode(const void* value) const;
  virtual bool equals(const void* a, const void* b) const;

  // True when objects of `other` have this type's C++ type, so storage made
  // for one holds the other's objects (schemas alone may coincide).
  virtual bool sameAs(const StateType& other) const = 0;
  // The C++ type of a compile-time StateType; null for the types backends
  // build at run time.
  virtual const std::type_info* cppType() const { return nullptr; }

 private:
  const size_t size_;
  const size_t align_;
};

template <class T>
class TypedStateType : public StateType {
  static_assert(Serializable<T>, "a state's types need a sluice::TypeSerializer");

 public:
  TypedStateType() : StateType(sizeof(T), alignof(T)) {}
  void construct(void* at) const override { ::new (at) T(); }
  void copyConstruct(void* at, const void* from) const override {
    ::new (at) T(*static_cast<const T*>(from));
  }
  void moveConstruct(void* at, void* from) const override {
    ::new (at) T(std::move(*static_cast<T*>(from)));
  }
  void destroy(void* at) const noexcept override { static_cast<T*>(at)->~T(); }
  void copyAssign(void* to, const void* from) const override {
    *static_cast<T*>(to) = *static_cast<const T*>(from);
  }
  void moveAssign(void* to, void* from) const override {
    *static_cast<T*>(to) = std::move(*static_cast<T*>(from));
  }
  void serialize(const void* value, DataOutputView& out) const override {
    TypeSerializer<T>::serialize(*static_cast<const T*>(value), out);
  }
  void deserialize(void* into, DataInputView& in) const override {
    TypeSerializer<T>::deserialize(*static_cast<T*>(into), in);
  }
  std::string schema() const override { return TypeSerializer<T>::schema(); }
  bool sameAs(const StateType& other) const override {
    return other.cppType() != nullptr && *other.cppType() == typeid(T);
  }
  const std::type_info* cppType() const override { return &typeid(T); }
};

// A map state's user key type: also hashed (Java's hashCode, as Flink's heap
// backend does) and compared.
template <class T>
class MapKeyType final : public TypedStateType<T> {
 public:
  int32_t hashCode(const void* value) const override {
    return javaHashCode(*static_cast<const T*>(value));
  }
  bool equals(const void* a, const void* b) const override {
    return *static_cast<const T*>(a) == *static_cast<const T*>(b);
  }
};

// The StateType of T, and of T as a map state's user key. The objects live
// for the whole process; the shared_ptr forms own nothing (backends keep the
// types they are given as shared_ptr, since run-time types are owned).
template <class T>
const StateType& stateTypeOf() {
  static const TypedStateType<T> type;
  return type;
}
template <class T>
std::shared_ptr<const StateType> sharedStateTypeOf() {
  return std::shared_ptr<const StateType>(std::shared_ptr<const StateType>(), &stateTypeOf<T>());
}
template <class T>
std::shared_ptr<const StateType> sharedMapKeyTypeOf() {
  static const MapKeyType<T> type;
  return std::shared_ptr<const StateType>(std::shared_ptr<const StateType>(), &type);
}

}  // namespace sluice::internal
