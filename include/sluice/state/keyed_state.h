// Creating keyed state from descriptors, for any backend.
//
//   getOrCreateValueState<N>(backend, desc)   -> InternalValueState<N, T>&
//   getOrCreateListState<N>(backend, desc)    -> InternalListState<N, T>&
//   getOrCreateMapState<N>(backend, desc)     -> InternalMapState<N, UK, UV>&
//   getOrCreateReducingState<N>(backend, desc)
//   getOrCreateAggregatingState<N>(backend, desc)
//
// The first call for a name creates the state (checking it against restored
// state of that name); later calls return the same object, and asking for a
// name with another kind or type throws. Reducing and aggregating state, and
// TTL, are decorators over the backend's value/list/map storage, so every
// backend behaves the same.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include <sluice/state/heap_state.h>
#include <sluice/state/internal_state.h>
#include <sluice/state/keyed_state_backend.h>
#include <sluice/state/rocksdb_state.h>
#include <sluice/state/ttl.h>

namespace sluice {

namespace internal {

template <class V>
std::string storedSchema(const StateDescriptorBase& desc) {
  return desc.isTtlEnabled() ? TypeSerializer<TtlValue<V>>::schema() : TypeSerializer<V>::schema();
}

template <class N, class V>
StateMetaInfo makeMeta(const StateDescriptorBase& desc, std::string userKeySchema = {}) {
  StateMetaInfo meta;
  meta.name = desc.getName();
  meta.kind = desc.kind();
  meta.namespaceSchema = TypeSerializer<N>::schema();
  meta.valueSchema = storedSchema<V>(desc);
  meta.userKeySchema = std::move(userKeySchema);
  if (const auto& ttl = desc.getTtlConfig()) {
    meta.ttlMillis = ttl->getTtl().count();
    meta.ttlCleanupFullSnapshot = ttl->cleanupFullSnapshotEnabled();
    meta.ttlCleanupInCompaction = ttl->cleanupInRocksdbCompactFilterEnabled();
    meta.ttlQueryTimeAfterNumEntries = ttl->queryTimeAfterNumEntries();
  }
  return meta;
}

// Raw storage of one primitive in the backend at hand.
template <class N, class V>
std::unique_ptr<InternalValueState<N, V>> createValueStorage(KeyedStateBackend& backend,
                                                             const StateMetaInfo& meta) {
  if (backend.type() == StateBackendType::kHashMap) {
    return std::make_unique<HeapValueState<N, V>>(static_cast<HashMapKeyedStateBackend&>(backend),
                                                  meta);
  }
  return std::make_unique<RocksDbValueState<N, V>>(static_cast<RocksDbKeyedStateBackend&>(backend),
                                                   meta);
}
template <class N, class E>
std::unique_ptr<InternalListState<N, E>> createListStorage(KeyedStateBackend& backend,
                                                           const StateMetaInfo& meta) {
  if (backend.type() == StateBackendType::kHashMap) {
    return std::make_unique<HeapListState<N, E>>(static_cast<HashMapKeyedStateBackend&>(backend),
                                                 meta);
  }
  return std::make_unique<RocksDbListState<N, E>>(static_cast<RocksDbKeyedStateBackend&>(backend),
                                                  meta);
}
template <class N, class UK, class UV>
std::unique_ptr<InternalMapState<N, UK, UV>> createMapStorage(KeyedStateBackend& backend,
                                                              const StateMetaInfo& meta) {
  if (backend.type() == StateBackendType::kHashMap) {
    return std::make_unique<HeapMapState<N, UK, UV>>(
        static_cast<HashMapKeyedStateBackend&>(backend), meta);
  }
  return std::make_unique<RocksDbMapState<N, UK, UV>>(
      static_cast<RocksDbKeyedStateBackend&>(backend), meta);
}

// Value storage with TTL applied when the descriptor asks for it.
template <class N, class V>
std::unique_ptr<InternalValueState<N, V>> createValue(KeyedStateBackend& backend,
                                                      const StateDescriptorBase& desc) {
  StateMetaInfo meta = makeMeta<N, V>(desc);
  backend.registerStateMeta(meta);
  if (desc.isTtlEnabled()) {
    return std::make_unique<TtlValueState<N, V>>(createValueStorage<N, TtlValue<V>>(backend, meta),
                                                 *desc.getTtlConfig(), backend.clock());
  }
  return createValueStorage<N, V>(backend, meta);
}

template <class N, class T>
class ReducingStateImpl final : public InternalReducingState<N, T> {
 public:
  ReducingStateImpl(std::unique_ptr<InternalValueState<N, T>> value,
                    typename ReducingStateDescriptor<T>::ReduceFn reduce)
      : value_(std::move(value)), reduce_(std::move(reduce)) {}
  void setCurrentNamespace(const N& ns) override { value_->setCurrentNamespace(ns); }
  std::optional<T> get() override { return value_->value(); }
  void add(const T& v) override {
    std::optional<T> current = value_->value();
    value_->update(current ? reduce_(*current, v) : v);
  }
  void clear() override { value_->clear(); }
  void mergeNamespaces(const N& target, const std::vector<N>& sources) override {
    std::optional<T> merged;
    for (const N& s : sources) {
      value_->setCurrentNamespace(s);
      std::optional<T> v = value_->value();
      if (!v) continue;
      merged = merged ? reduce_(*merged, *v) : std::move(*v);
      value_->clear();
    }
    value_->setCurrentNamespace(target);
    if (!merged) return;
    std::optional<T> current = value_->value();
    value_->update(current ? reduce_(*current, *merged) : *merged);
  }

 private:
  std::unique_ptr<InternalValueState<N, T>> value_;
  typename ReducingStateDescriptor<T>::ReduceFn reduce_;
};

template <class N, class IN, class ACC, class OUT>
class AggregatingStateImpl final : public InternalAggregatingState<N, IN, ACC, OUT> {
 public:
  AggregatingStateImpl(std::unique_ptr<InternalValueState<N, ACC>> value,
                       std::shared_ptr<AggregateFunction<IN, ACC, OUT>> fn)
      : value_(std::move(value)), fn_(std::move(fn)) {}
  void setCurrentNamespace(const N& ns) override { value_->setCurrentNamespace(ns); }
  std::optional<OUT> get() override {
    std::optional<ACC> acc = value_->value();
    if (!acc) return std::nullopt;
    return fn_->getResult(*acc);
  }
  void add(const IN& v) override {
    std::optional<ACC> acc = value_->value();
    value_->update(fn_->add(v, acc ? std::move(*acc) : fn_->createAccumulator()));
  }
  void clear() override { value_->clear(); }
  std::optional<ACC> getInternal() override { return value_->value(); }
  void updateInternal(const ACC& acc) override { value_->update(acc); }
  void mergeNamespaces(const N& target, const std::vector<N>& sources) override {
    std::optional<ACC> merged;
    for (const N& s : sources) {
      value_->setCurrentNamespace(s);
      std::optional<ACC> v = value_->value();
      if (!v) continue;
      merged = merged ? fn_->merge(std::move(*merged), std::move(*v)) : std::move(*v);
      value_->clear();
    }
    value_->setCurrentNamespace(target);
    if (!merged) return;
    std::optional<ACC> current = value_->value();
    value_->update(current ? fn_->merge(std::move(*current), std::move(*merged))
                           : std::move(*merged));
  }

 private:
  std::unique_ptr<InternalValueState<N, ACC>> value_;
  std::shared_ptr<AggregateFunction<IN, ACC, OUT>> fn_;
};

template <class S>
struct StateHolder final : KeyedStateBackend::StateHolderBase {
  std::unique_ptr<S> state;
};

// The registered object of type S for `name`, creating it with `make()`.
template <class S, class Make>
S& getOrCreate(KeyedStateBackend& backend, const StateDescriptorBase& desc, const char* typeName,
               Make&& make) {
  auto& objects = backend.stateObjects();
  auto it = objects.find(desc.getName());
  if (it != objects.end()) {
    if (*it->second->type != typeid(S)) {
      throw SluiceException("state '" + desc.getName() + "' was first registered as " +
                            it->second->typeName + " and is now requested as " + typeName +
                            "; one name must keep one kind and type");
    }
    return *static_cast<StateHolder<S>&>(*it->second).state;
  }
  auto holder = std::make_unique<StateHolder<S>>();
  holder->type = &typeid(S);
  holder->typeName = typeName;
  holder->state = make();
  S& result = *holder->state;
  objects.emplace(desc.getName(), std::move(holder));
  return result;
}

template <class N, class T>
std::string typeText(const char* kind) {
  return std::string(kind) + "<" + TypeSerializer<T>::schema() + "> in namespace " +
         TypeSerializer<N>::schema();
}

}  // namespace internal

template <class N, class T>
InternalValueState<N, T>& getOrCreateValueState(KeyedStateBackend& backend,
                                                const ValueStateDescriptor<T>& desc) {
  return internal::getOrCreate<InternalValueState<N, T>>(
      backend, desc, internal::typeText<N, T>("ValueState").c_str(),
      [&] { return internal::createValue<N, T>(backend, desc); });
}

template <class N, class T>
InternalListState<N, T>& getOrCreateListState(KeyedStateBackend& backend,
                                              const ListStateDescriptor<T>& desc) {
  return internal::getOrCreate<InternalListState<N, T>>(
      backend, desc, internal::typeText<N, T>("ListState").c_str(),
      [&]() -> std::unique_ptr<InternalListState<N, T>> {
        StateMetaInfo meta = internal::makeMeta<N, T>(desc);
        backend.registerStateMeta(meta);
        if (desc.isTtlEnabled()) {
          return std::make_unique<TtlListState<N, T>>(
              internal::createListStorage<N, TtlValue<T>>(backend, meta), *desc.getTtlConfig(),
              backend.clock());
        }
        return internal::createListStorage<N, T>(backend, meta);
      });
}

template <class N, class UK, class UV>
InternalMapState<N, UK, UV>& getOrCreateMapState(KeyedStateBackend& backend,
                                                 const MapStateDescriptor<UK, UV>& desc) {
  std::string typeName = "MapState<" + TypeSerializer<UK>::schema() + ", " +
                         TypeSerializer<UV>::schema() + "> in namespace " +
                         TypeSerializer<N>::schema();
  return internal::getOrCreate<InternalMapState<N, UK, UV>>(
      backend, desc, typeName.c_str(), [&]() -> std::unique_ptr<InternalMapState<N, UK, UV>> {
        StateMetaInfo meta = internal::makeMeta<N, UV>(desc, TypeSerializer<UK>::schema());
        backend.registerStateMeta(meta);
        if (desc.isTtlEnabled()) {
          return std::make_unique<TtlMapState<N, UK, UV>>(
              internal::createMapStorage<N, UK, TtlValue<UV>>(backend, meta), *desc.getTtlConfig(),
              backend.clock());
        }
        return internal::createMapStorage<N, UK, UV>(backend, meta);
      });
}

template <class N, class T>
InternalReducingState<N, T>& getOrCreateReducingState(KeyedStateBackend& backend,
                                                      const ReducingStateDescriptor<T>& desc) {
  return internal::getOrCreate<InternalReducingState<N, T>>(
      backend, desc, internal::typeText<N, T>("ReducingState").c_str(), [&] {
        return std::make_unique<internal::ReducingStateImpl<N, T>>(
            internal::createValue<N, T>(backend, desc), desc.getReduceFunction());
      });
}

template <class N, class IN, class ACC, class OUT>
InternalAggregatingState<N, IN, ACC, OUT>& getOrCreateAggregatingState(
    KeyedStateBackend& backend, const AggregatingStateDescriptor<IN, ACC, OUT>& desc) {
  return internal::getOrCreate<InternalAggregatingState<N, IN, ACC, OUT>>(
      backend, desc, internal::typeText<N, ACC>("AggregatingState").c_str(), [&] {
        return std::make_unique<internal::AggregatingStateImpl<N, IN, ACC, OUT>>(
            internal::createValue<N, ACC>(backend, desc), desc.getAggregateFunction());
      });
}

}  // namespace sluice
