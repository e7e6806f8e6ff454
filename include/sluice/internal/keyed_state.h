// Creating keyed state from descriptors: the typed front ends over a
// backend's untyped storages.
//
//   getOrCreateValueState<N>(backend, desc)   -> InternalValueState<N, T>&
//   getOrCreateListState<N>(backend, desc)    -> InternalListState<N, T>&
//   getOrCreateMapState<N>(backend, desc)     -> InternalMapState<N, UK, UV>&
//   getOrCreateReducingState<N>(backend, desc)
//   getOrCreateAggregatingState<N>(backend, desc)
//
// The first call for a name creates the state (the backend checks it against
// restored state of that name); later calls return the same object, and
// asking for a name with another kind or type throws. What is typed lives
// here and is small: copying objects in and out of the storage, the
// namespace's serialization, and reducing and aggregating state (built on
// value storage, with the user's function). Everything else — the backends,
// time-to-live, snapshots — is compiled once in src/state.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include <sluice/core/owned.h>
#include <sluice/state/internal_state.h>
#include <sluice/state/keyed_state_backend.h>
#include <sluice/state/state_storage.h>
#include <sluice/state/state_type.h>

namespace sluice::internal {

// The serialized namespace, set on a storage. VoidNamespace is empty, which
// is what a new storage starts with, so it costs nothing.
template <class N>
class NamespaceSetter {
 public:
  static constexpr bool kVoid = std::is_same_v<N, VoidNamespace>;
  void set(StateStorageBase& storage, const N& ns) {
    if constexpr (!kVoid) storage.setNamespace(serialize(ns));
  }
  // Into the inline buffer (a window is 16 bytes), the vector only when a
  // namespace does not fit: no resize per call.
  std::string_view serialize(const N& ns) {
    overflow_.clear();
    DataOutputView out(buffer_, sizeof buffer_, overflow_);
    TypeSerializer<N>::serialize(ns, out);
    return {reinterpret_cast<const char*>(out.data()), out.size()};
  }
  std::vector<std::string> serializeAll(const std::vector<N>& namespaces) {
    std::vector<std::string> out;
    out.reserve(namespaces.size());
    for (const N& ns : namespaces) out.emplace_back(serialize(ns));
    return out;
  }

 private:
  uint8_t buffer_[32] = {};
  std::vector<uint8_t> overflow_;
};

template <class N, class V>
class ValueStateImpl final : public InternalValueState<N, V> {
 public:
  explicit ValueStateImpl(std::unique_ptr<ValueStorage> storage) : storage_(std::move(storage)) {}
  void setCurrentNamespace(const N& ns) override { ns_.set(*storage_, ns); }
  std::optional<V> value() override {
    const void* v = storage_->get();
    if (v == nullptr) return std::nullopt;
    return *static_cast<const V*>(v);
  }
  void update(const V& value) override { storage_->put(&value); }
  void clear() override { storage_->clear(); }

 private:
  std::unique_ptr<ValueStorage> storage_;
  NamespaceSetter<N> ns_;
};

template <class N, class E>
class ListStateImpl final : public InternalListState<N, E> {
 public:
  explicit ListStateImpl(std::unique_ptr<ListStorage> storage) : storage_(std::move(storage)) {}
  void setCurrentNamespace(const N& ns) override { ns_.set(*storage_, ns); }
  std::vector<E> get() override {
    const ElementSpan span = storage_->get();
    const E* first = static_cast<const E*>(span.data);
    return std::vector<E>(first, first + span.size);
  }
  void getInto(std::vector<E>& out) override {
    const ElementSpan span = storage_->get();
    const E* first = static_cast<const E*>(span.data);
    out.assign(first, first + span.size);
  }
  void add(const E& value) override { storage_->add(&value); }
  void addAll(const std::vector<E>& values) override {
    if (values.empty()) return;
    if constexpr (std::is_same_v<E, bool>) {
      for (bool v : values) storage_->add(&v);
    } else {
      storage_->addAll(values.data(), values.size());
    }
  }
  void update(const std::vector<E>& values) override {
    if constexpr (std::is_same_v<E, bool>) {
      // vector<bool> is not an array of bool.
      std::unique_ptr<bool[]> copy(new bool[values.size() + 1]);
      for (size_t i = 0; i < values.size(); ++i) copy[i] = values[i];
      storage_->update(copy.get(), values.size());
    } else {
      storage_->update(values.data(), values.size());
    }
  }
  void clear() override { storage_->clear(); }
  void mergeNamespaces(const N& target, const std::vector<N>& sources) override {
    std::vector<std::string> from = ns_.serializeAll(sources);
    storage_->mergeNamespaces(ns_.serialize(target), from);
  }

 private:
  std::unique_ptr<ListStorage> storage_;
  NamespaceSetter<N> ns_;
};

template <class UK, class UV>
class MapStateIteratorImpl final : public MapStateIterator<UK, UV> {
 public:
  explicit MapStateIteratorImpl(std::unique_ptr<MapCursor> cursor) : cursor_(std::move(cursor)) {}
  bool hasNext() override { return cursor_->hasNext(); }
  std::pair<UK, UV> next() override {
    const void* k = nullptr;
    const void* v = nullptr;
    cursor_->next(k, v);
    return {*static_cast<const UK*>(k), *static_cast<const UV*>(v)};
  }
  void remove() override { cursor_->remove(); }

 private:
  std::unique_ptr<MapCursor> cursor_;
};

template <class N, class UK, class UV>
class MapStateImpl final : public InternalMapState<N, UK, UV> {
 public:
  explicit MapStateImpl(std::unique_ptr<MapStorage> storage) : storage_(std::move(storage)) {}
  void setCurrentNamespace(const N& ns) override { ns_.set(*storage_, ns); }
  std::optional<UV> get(const UK& key) override {
    const void* v = storage_->get(&key);
    if (v == nullptr) return std::nullopt;
    return *static_cast<const UV*>(v);
  }
  void put(const UK& key, const UV& value) override { storage_->put(&key, &value); }
  void remove(const UK& key) override { storage_->remove(&key); }
  bool contains(const UK& key) override { return storage_->contains(&key); }
  bool isEmpty() override { return storage_->isEmpty(); }
  void clear() override { storage_->clear(); }
  std::unique_ptr<MapStateIterator<UK, UV>> iterator() override {
    return internal::makeOwned<MapStateIteratorImpl<UK, UV>>(storage_->iterator());
  }

 private:
  std::unique_ptr<MapStorage> storage_;
  NamespaceSetter<N> ns_;
};

// Reducing and aggregating state keep one value (the accumulator) per entry
// in value storage and combine with the user's function here, the same way
// for every backend. With TTL the storage applies it, so add() reads the
// current value as a read would: an invisible expired value is replaced, a
// returned expired one is combined (as Flink's TtlReduceFunction).
template <class N, class T>
class ReducingStateImpl final : public InternalReducingState<N, T> {
 public:
  using ReduceFn = typename ReducingStateDescriptor<T>::ReduceFn;
  ReducingStateImpl(std::unique_ptr<ValueStorage> storage, ReduceFn reduce)
      : storage_(std::move(storage)), reduce_(std::move(reduce)) {}
  void setCurrentNamespace(const N& ns) override { ns_.set(*storage_, ns); }
  std::optional<T> get() override {
    const void* v = storage_->get();
    if (v == nullptr) return std::nullopt;
    return *static_cast<const T*>(v);
  }
  void add(const T& value) override {
    const void* current = storage_->get();
    if (current == nullptr) {
      storage_->put(&value);
      return;
    }
    const T reduced = reduce_(*static_cast<const T*>(current), value);
    storage_->put(&reduced);
  }
  void clear() override { storage_->clear(); }
  void mergeNamespaces(const N& target, const std::vector<N>& sources) override {
    std::optional<T> merged;
    for (const N& s : sources) {
      ns_.set(*storage_, s);
      const void* v = storage_->get();
      if (v == nullptr) continue;
      const T& value = *static_cast<const T*>(v);
      merged = merged ? reduce_(*merged, value) : value;
      storage_->clear();
    }
    ns_.set(*storage_, target);
    if (!merged) return;
    const void* current = storage_->get();
    if (current != nullptr) merged = reduce_(*static_cast<const T*>(current), *merged);
    storage_->put(&*merged);
  }

 private:
  std::unique_ptr<ValueStorage> storage_;
  ReduceFn reduce_;
  NamespaceSetter<N> ns_;
};

template <class N, class IN, class ACC, class OUT>
class AggregatingStateImpl final : public InternalAggregatingState<N, IN, ACC, OUT> {
 public:
  AggregatingStateImpl(std::unique_ptr<ValueStorage> storage,
                       std::shared_ptr<AggregateFunction<IN, ACC, OUT>> fn)
      : storage_(std::move(storage)), fn_(std::move(fn)) {}
  void setCurrentNamespace(const N& ns) override { ns_.set(*storage_, ns); }
  std::optional<OUT> get() override {
    const void* acc = storage_->get();
    if (acc == nullptr) return std::nullopt;
    return fn_->getResult(*static_cast<const ACC*>(acc));
  }
  void add(const IN& value) override {
    const void* current = storage_->get();
    const ACC acc = fn_->add(
        value, current != nullptr ? *static_cast<const ACC*>(current) : fn_->createAccumulator());
    storage_->put(&acc);
  }
  void clear() override { storage_->clear(); }
  std::optional<ACC> getInternal() override {
    const void* acc = storage_->get();
    if (acc == nullptr) return std::nullopt;
    return *static_cast<const ACC*>(acc);
  }
  void updateInternal(const ACC& accumulator) override { storage_->put(&accumulator); }
  void mergeNamespaces(const N& target, const std::vector<N>& sources) override {
    std::optional<ACC> merged;
    for (const N& s : sources) {
      ns_.set(*storage_, s);
      const void* v = storage_->get();
      if (v == nullptr) continue;
      ACC value = *static_cast<const ACC*>(v);
      merged = merged ? fn_->merge(std::move(*merged), std::move(value)) : std::move(value);
      storage_->clear();
    }
    ns_.set(*storage_, target);
    if (!merged) return;
    const void* current = storage_->get();
    if (current != nullptr) {
      merged = fn_->merge(*static_cast<const ACC*>(current), std::move(*merged));
    }
    storage_->put(&*merged);
  }

 private:
  std::unique_ptr<ValueStorage> storage_;
  std::shared_ptr<AggregateFunction<IN, ACC, OUT>> fn_;
  NamespaceSetter<N> ns_;
};

template <class S>
struct StateHolder final : KeyedStateBackend::StateHolderBase {
  std::unique_ptr<S> state;
};

// The registered object of type S for `desc`'s name, creating it with
// `make()`; `describe()` names S for the error when the name has another one.
template <class S, class Describe, class Make>
S& getOrCreate(KeyedStateBackend& backend, const StateDescriptorBase& desc, Describe&& describe,
               Make&& make) {
  auto& objects = backend.stateObjects();
  auto it = objects.find(desc.getName());
  if (it != objects.end()) {
    if (*it->second->type != typeid(S)) {
      failStateType(desc.getName(), it->second->typeName, describe());
    }
    return *static_cast<StateHolder<S>&>(*it->second).state;
  }
  auto holder = std::make_unique<StateHolder<S>>();
  holder->type = &typeid(S);
  holder->typeName = describe();
  holder->state = make();
  S& result = *holder->state;
  objects.emplace(desc.getName(), std::move(holder));
  return result;
}

template <class N, class T>
std::string describeState(const char* kind) {
  return std::string(kind) + "<" + TypeSerializer<T>::schema() + "> in namespace " +
         TypeSerializer<N>::schema();
}

}  // namespace sluice::internal

namespace sluice {

template <class N, class T>
InternalValueState<N, T>& getOrCreateValueState(KeyedStateBackend& backend,
                                                const ValueStateDescriptor<T>& desc) {
  return internal::getOrCreate<InternalValueState<N, T>>(
      backend, desc, [] { return internal::describeState<N, T>("ValueState"); },
      [&] {
        return internal::makeOwned<internal::ValueStateImpl<N, T>>(internal::createValueStorage(
            backend, desc,
            {internal::sharedStateTypeOf<N>(), internal::sharedStateTypeOf<T>(), {}}));
      });
}

template <class N, class T>
InternalListState<N, T>& getOrCreateListState(KeyedStateBackend& backend,
                                              const ListStateDescriptor<T>& desc) {
  return internal::getOrCreate<InternalListState<N, T>>(
      backend, desc, [] { return internal::describeState<N, T>("ListState"); },
      [&] {
        return internal::makeOwned<internal::ListStateImpl<N, T>>(internal::createListStorage(
            backend, desc,
            {internal::sharedStateTypeOf<N>(), internal::sharedStateTypeOf<T>(), {}}));
      });
}

template <class N, class UK, class UV>
InternalMapState<N, UK, UV>& getOrCreateMapState(KeyedStateBackend& backend,
                                                 const MapStateDescriptor<UK, UV>& desc) {
  return internal::getOrCreate<InternalMapState<N, UK, UV>>(
      backend, desc,
      [] {
        return "MapState<" + TypeSerializer<UK>::schema() + ", " + TypeSerializer<UV>::schema() +
               "> in namespace " + TypeSerializer<N>::schema();
      },
      [&] {
        return internal::makeOwned<internal::MapStateImpl<N, UK, UV>>(internal::createMapStorage(
            backend, desc,
            {internal::sharedStateTypeOf<N>(), internal::sharedStateTypeOf<UV>(),
             internal::sharedMapKeyTypeOf<UK>()}));
      });
}

template <class N, class T>
InternalReducingState<N, T>& getOrCreateReducingState(KeyedStateBackend& backend,
                                                      const ReducingStateDescriptor<T>& desc) {
  return internal::getOrCreate<InternalReducingState<N, T>>(
      backend, desc, [] { return internal::describeState<N, T>("ReducingState"); },
      [&] {
        return internal::makeOwned<internal::ReducingStateImpl<N, T>>(
            internal::createValueStorage(
                backend, desc,
                {internal::sharedStateTypeOf<N>(), internal::sharedStateTypeOf<T>(), {}}),
            desc.getReduceFunction());
      });
}

template <class N, class IN, class ACC, class OUT>
InternalAggregatingState<N, IN, ACC, OUT>& getOrCreateAggregatingState(
    KeyedStateBackend& backend, const AggregatingStateDescriptor<IN, ACC, OUT>& desc) {
  return internal::getOrCreate<InternalAggregatingState<N, IN, ACC, OUT>>(
      backend, desc, [] { return internal::describeState<N, ACC>("AggregatingState"); },
      [&] {
        return internal::makeOwned<internal::AggregatingStateImpl<N, IN, ACC, OUT>>(
            internal::createValueStorage(
                backend, desc,
                {internal::sharedStateTypeOf<N>(), internal::sharedStateTypeOf<ACC>(), {}}),
            desc.getAggregateFunction());
      });
}

}  // namespace sluice
