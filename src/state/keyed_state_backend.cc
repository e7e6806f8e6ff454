// KeyedStateBackend's shared bookkeeping (parameters, state meta checks) and
// the choice of backend from `state.backend.type`.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include <sluice/state/keyed_state_backend.h>

#include "state/backend_factories.h"

namespace sluice {

namespace {

// 64-bit FNV-1a, as schemaFingerprint<T>().
uint64_t fnv1a(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : text) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

// The text a state's stored layout is identified by: kind, namespace, user
// key (map) and stored value.
std::string schemaText(const StateMetaInfo& meta) {
  std::string out = std::string(stateKindName(meta.kind)) + "<namespace=" + meta.namespaceSchema;
  if (meta.kind == StateKind::kMap) out += ", userKey=" + meta.userKeySchema;
  out += ", value=" + meta.valueSchema + ">";
  return out;
}

std::string fingerprintHex(std::string_view text) {
  char buf[19];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(fnv1a(text)));
  return buf;
}

std::string schemaWithFingerprint(const StateMetaInfo& meta) {
  const std::string text = schemaText(meta);
  return text + " (fingerprint " + fingerprintHex(text) + ")";
}

}  // namespace

const char* stateKindName(StateKind kind) {
  switch (kind) {
    case StateKind::kValue: return "value";
    case StateKind::kList: return "list";
    case StateKind::kMap: return "map";
    case StateKind::kReducing: return "reducing";
    case StateKind::kAggregating: return "aggregating";
  }
  return "unknown";
}

StateBackendType parseStateBackendType(std::string_view text) {
  const std::string name = keyedStateBackendFactory(text).name();
  if (name == "rocksdb") return StateBackendType::kRocksDb;
  if (name == "hashmap") return StateBackendType::kHashMap;
  if (name == "tiered") return StateBackendType::kTiered;
  throw SluiceException("state.backend.type '" + std::string(text) +
                        "' is not one of the built-in backends 'hashmap', 'rocksdb' and 'tiered'");
}

// ---------------------------------------------------------------------------
// The registry of backend factories

namespace {

std::string lowerCase(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

struct Registry {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<KeyedStateBackendFactory>> factories;
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry();  // never destroyed: factories outlive every backend
    for (auto& f : internal::builtinKeyedStateBackendFactories()) {
      reg->factories.emplace(f->name(), std::move(f));
    }
    return reg;
  }();
  return *r;
}

}  // namespace

const KeyedStateBackendFactory& keyedStateBackendFactory(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.factories.find(lowerCase(name));
  if (it != r.factories.end()) return *it->second;
  std::string accepted;
  size_t i = 0;
  for (const auto& entry : r.factories) {
    accepted += i == 0 ? "" : (i + 1 == r.factories.size() ? " and " : ", ");
    accepted += "'" + entry.first + "'";
    ++i;
  }
  throw SluiceException("invalid value '" + std::string(name) +
                        "' for state.backend.type: accepted values are " + accepted);
}

std::vector<std::string> keyedStateBackendNames() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [n, f] : r.factories) names.push_back(n);
  return names;
}

void registerKeyedStateBackendFactory(std::unique_ptr<KeyedStateBackendFactory> factory) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  const std::string name = lowerCase(factory->name());
  if (!r.factories.emplace(name, std::move(factory)).second) {
    throw SluiceException("a state backend named '" + name + "' is already registered");
  }
}

const char* stateBackendTypeName(StateBackendType type) {
  switch (type) {
    case StateBackendType::kHashMap: return "hashmap";
    case StateBackendType::kRocksDb: return "rocksdb";
    case StateBackendType::kTiered: return "tiered";
  }
  return "unknown";
}

// ---------------------------------------------------------------------------
// KeyedStateBackend

KeyedStateBackend::KeyedStateBackend(KeyedBackendParams params) : params_(std::move(params)) {
  const std::string who = "keyed state backend of " + params_.operatorName + " (subtask " +
                          std::to_string(params_.subtaskIndex) + ")";
  if (!params_.keyLength) {
    throw SluiceException(who + ": KeyedBackendParams::keyLength is not set");
  }
  if (params_.clock == nullptr) throw SluiceException(who + ": KeyedBackendParams::clock is null");
  if (params_.maxParallelism < 1 || params_.maxParallelism > kUpperBoundMaxParallelism) {
    throw SluiceException(who + ": max parallelism " + std::to_string(params_.maxParallelism) +
                          " is outside [1, " + std::to_string(kUpperBoundMaxParallelism) + "]");
  }
  const KeyGroupRange& r = params_.keyGroupRange;
  if (r.numberOfKeyGroups() > 0 &&
      (r.startKeyGroup < 0 || r.endKeyGroup >= params_.maxParallelism)) {
    throw SluiceException(who + ": key-group range " + r.toString() + " is not within [0, " +
                          std::to_string(params_.maxParallelism) + ")");
  }
}

KeyedStateBackend::~KeyedStateBackend() = default;

std::vector<std::string> KeyedStateBackend::stateNames() const {
  std::set<std::string> names;
  for (const auto& [name, meta] : restoredMeta_) names.insert(name);
  for (const auto& [name, meta] : registeredMeta_) names.insert(name);
  return {names.begin(), names.end()};
}

void KeyedStateBackend::registerStateMeta(const StateMetaInfo& meta) {
  if (auto it = registeredMeta_.find(meta.name); it != registeredMeta_.end()) {
    if (!it->second.compatibleWith(meta)) {
      throw StateMigrationException("state '" + meta.name + "' of " + params_.operatorName +
                                    " was registered as " + it->second.describe() + ", schema " +
                                    schemaWithFingerprint(it->second) +
                                    ", and is now registered as " + meta.describe() + ", schema " +
                                    schemaWithFingerprint(meta));
    }
    it->second = meta;
    return;
  }
  if (auto it = restoredMeta_.find(meta.name); it != restoredMeta_.end()) {
    if (!it->second.compatibleWith(meta)) {
      throw StateMigrationException(
          "cannot restore state '" + meta.name + "' of " + params_.operatorName +
          ": the snapshot holds " + it->second.describe() + ", schema " +
          schemaWithFingerprint(it->second) + ", but it is registered as " + meta.describe() +
          ", schema " + schemaWithFingerprint(meta) +
          "; keep the state's types, or give the new state another name");
    }
  }
  registeredMeta_.emplace(meta.name, meta);
}

const StateMetaInfo* KeyedStateBackend::registeredMeta(const std::string& name) const {
  auto it = registeredMeta_.find(name);
  return it == registeredMeta_.end() ? nullptr : &it->second;
}

void KeyedStateBackend::checkSnapshotCompatible(const CanonicalSnapshotReader& snapshot) const {
  if (snapshot.keySchema() != params_.keySchema) {
    throw StateMigrationException("cannot restore keyed state of " + params_.operatorName +
                                  " from '" + snapshot.sourceName() +
                                  "': the snapshot's key schema is '" + snapshot.keySchema() +
                                  "', the operator's key schema is '" + params_.keySchema + "'");
  }
  if (snapshot.maxParallelism() != params_.maxParallelism) {
    throw StateMigrationException(
        "cannot restore keyed state of " + params_.operatorName + " from '" +
        snapshot.sourceName() + "': the snapshot was taken with max parallelism " +
        std::to_string(snapshot.maxParallelism()) + ", the operator has max parallelism " +
        std::to_string(params_.maxParallelism) +
        "; the max parallelism of a keyed operator cannot change across a restore");
  }
}

void KeyedStateBackend::failKeyGroup(int32_t keyGroup) const {
  throw SluiceException("keyed state backend of " + params_.operatorName + " (subtask " +
                        std::to_string(params_.subtaskIndex) + "): key group " +
                        std::to_string(keyGroup) + " is not in its key-group range " +
                        params_.keyGroupRange.toString() +
                        " (was the key changed after keyBy, or is hashCode not deterministic?)");
}

bool KeyedStateBackend::clearState(const std::string&) { return false; }

void KeyedStateBackend::addToNextSnapshot(
    const std::string& stateName, std::shared_ptr<const std::vector<std::vector<uint8_t>>>) {
  throw SluiceException("the " + std::string(name()) + " state backend of operator '" +
                        params_.operatorName + "' takes no entries for state '" + stateName +
                        "' into its snapshots");
}

void KeyedStateBackend::addToNextSnapshot(const std::string& stateName,
                                          std::shared_ptr<SnapshotEntrySource>) {
  throw SluiceException("the " + std::string(name()) + " state backend of operator '" +
                        params_.operatorName + "' takes no entries for state '" + stateName +
                        "' into its snapshots");
}

std::unique_ptr<StateSnapshotWriter> KeyedStateBackend::nativeSnapshot(int64_t) { return nullptr; }

void KeyedStateBackend::restoreNative(const std::vector<KeyedStateHandleRef>&) {
  throw SluiceException("operator '" + params_.operatorName +
                        "' restores from an incremental RocksDB checkpoint, which only the "
                        "rocksdb and tiered state backends can read (this operator's backend is "
                        "'" +
                        name() +
                        "'); set state.backend.type: rocksdb (or tiered), or restore from a "
                        "savepoint (savepoints are canonical)");
}

std::unique_ptr<KeyedStateBackend> createKeyedStateBackend(StateBackendType type,
                                                           KeyedBackendParams params) {
  return createKeyedStateBackend(stateBackendTypeName(type), std::move(params));
}

std::unique_ptr<KeyedStateBackend> createKeyedStateBackend(std::string_view name,
                                                           KeyedBackendParams params) {
  return keyedStateBackendFactory(name).create(std::move(params));
}

}  // namespace sluice
