// The untyped half of creating keyed state (internal/keyed_state.h): the
// state's meta, time-to-live, and the backend's storage.
#include <sluice/state/keyed_state_backend.h>

#include "state/runtime_types.h"
#include "state/ttl_state.h"

namespace sluice::internal {

namespace {

// What a snapshot records of the state `desc` describes, and what restored
// state of its name is checked against. With TTL the stored type is the
// TTL-wrapped one.
StateMetaInfo makeMeta(const StateDescriptorBase& desc, const KeyedStateBackend::StorageTypes& t) {
  StateMetaInfo meta;
  meta.name = desc.getName();
  meta.kind = desc.kind();
  meta.namespaceSchema = t.ns->schema();
  meta.valueSchema = desc.isTtlEnabled() ? "ttl<" + t.value->schema() + ">" : t.value->schema();
  if (t.userKey) meta.userKeySchema = t.userKey->schema();
  if (const auto& ttl = desc.getTtlConfig()) {
    meta.ttlMillis = ttl->getTtl().count();
    meta.ttlCleanupFullSnapshot = ttl->cleanupFullSnapshotEnabled();
    meta.ttlCleanupInCompaction = ttl->cleanupInRocksdbCompactFilterEnabled();
    meta.ttlQueryTimeAfterNumEntries = ttl->queryTimeAfterNumEntries();
  }
  return meta;
}

}  // namespace

std::unique_ptr<ValueStorage> createValueStorage(KeyedStateBackend& backend,
                                                 const StateDescriptorBase& desc,
                                                 KeyedStateBackend::StorageTypes types) {
  const StateMetaInfo meta = makeMeta(desc, types);
  backend.registerStateMeta(meta);
  if (!desc.isTtlEnabled()) return backend.createValueStorage(meta, std::move(types));
  auto ttl = std::make_shared<TtlType>(types.value);
  types.value = ttl;
  return makeTtlValueStorage(backend.createValueStorage(meta, std::move(types)), std::move(ttl),
                             *desc.getTtlConfig(), backend.clock());
}

std::unique_ptr<ListStorage> createListStorage(KeyedStateBackend& backend,
                                               const StateDescriptorBase& desc,
                                               KeyedStateBackend::StorageTypes types) {
  const StateMetaInfo meta = makeMeta(desc, types);
  backend.registerStateMeta(meta);
  if (!desc.isTtlEnabled()) return backend.createListStorage(meta, std::move(types));
  auto ttl = std::make_shared<TtlType>(types.value);
  types.value = ttl;
  return makeTtlListStorage(backend.createListStorage(meta, std::move(types)), std::move(ttl),
                            *desc.getTtlConfig(), backend.clock());
}

std::unique_ptr<MapStorage> createMapStorage(KeyedStateBackend& backend,
                                             const StateDescriptorBase& desc,
                                             KeyedStateBackend::StorageTypes types) {
  const StateMetaInfo meta = makeMeta(desc, types);
  backend.registerStateMeta(meta);
  if (!desc.isTtlEnabled()) return backend.createMapStorage(meta, std::move(types));
  auto ttl = std::make_shared<TtlType>(types.value);
  std::shared_ptr<const StateType> userKey = types.userKey;
  types.value = ttl;
  return makeTtlMapStorage(backend.createMapStorage(meta, std::move(types)), std::move(ttl),
                           std::move(userKey), *desc.getTtlConfig(), backend.clock());
}

void failStateType(const std::string& name, const std::string& registeredAs,
                   const std::string& requestedAs) {
  throw SluiceException("state '" + name + "' was first registered as " + registeredAs +
                        " and is now requested as " + requestedAs +
                        "; one name must keep one kind and type");
}

}  // namespace sluice::internal
