// HashMapKeyedStateBackend: snapshot, restore and the bookkeeping of its
// state tables (heap_state.h describes the design).
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <sluice/state/heap_state.h>

namespace sluice {

namespace {

// The snapshot of a restored state that was never registered: its canonical
// entries, as restored.
class RestoredPart final : public heap::StateSnapshotPart {
 public:
  using ForEach = void (*)(const std::vector<uint8_t>&,
                           const std::function<void(std::string_view, std::string_view)>&);
  RestoredPart(StateMetaInfo meta, std::shared_ptr<const std::vector<std::vector<uint8_t>>> groups,
               ForEach forEach)
      : meta_(std::move(meta)), groups_(std::move(groups)), forEach_(forEach) {}
  void writeKeyGroup(size_t g, uint16_t stateIndex, CanonicalSnapshotWriter& writer,
                     int64_t now) override {
    if (g >= groups_->size()) return;
    heap::SnapshotEntryFilter filter(meta_);
    forEach_((*groups_)[g], [&](std::string_view key, std::string_view value) {
      filter.write(writer, stateIndex, key, value, now);
    });
  }

 private:
  StateMetaInfo meta_;
  // Shares ownership of the restored entries (aliasing the backend's record).
  std::shared_ptr<const std::vector<std::vector<uint8_t>>> groups_;
  ForEach forEach_;
};

class HeapKeyedStateSnapshot final : public KeyedStateSnapshot {
 public:
  HeapKeyedStateSnapshot(std::string keySchema, int32_t maxParallelism, KeyGroupRange range,
                         std::vector<StateMetaInfo> metas,
                         std::vector<std::unique_ptr<heap::StateSnapshotPart>> parts, int64_t now)
      : keySchema_(std::move(keySchema)),
        maxParallelism_(maxParallelism),
        range_(range),
        metas_(std::move(metas)),
        parts_(std::move(parts)),
        now_(now) {}

  KeyedSnapshotInfo writeTo(std::ostream& out) override {
    if (written_) throw SluiceException("KeyedStateSnapshot::writeTo may be called only once");
    written_ = true;
    CanonicalSnapshotWriter writer(out, keySchema_, maxParallelism_, range_, metas_);
    for (int32_t kg = range_.startKeyGroup; kg <= range_.endKeyGroup; ++kg) {
      writer.beginKeyGroup(kg);
      const auto g = static_cast<size_t>(kg - range_.startKeyGroup);
      for (size_t i = 0; i < parts_.size(); ++i) {
        parts_[i]->writeKeyGroup(g, static_cast<uint16_t>(i), writer, now_);
      }
    }
    KeyedSnapshotInfo info = writer.finish();
    parts_.clear();  // release the frozen tables as soon as possible
    return info;
  }

 private:
  std::string keySchema_;
  int32_t maxParallelism_;
  KeyGroupRange range_;
  std::vector<StateMetaInfo> metas_;
  std::vector<std::unique_ptr<heap::StateSnapshotPart>> parts_;
  int64_t now_;
  bool written_ = false;
};

}  // namespace

HashMapKeyedStateBackend::HashMapKeyedStateBackend(KeyedBackendParams params)
    : KeyedStateBackend(std::move(params)),
      numGroups_(static_cast<size_t>(keyGroupRange().numberOfKeyGroups())) {}

HashMapKeyedStateBackend::~HashMapKeyedStateBackend() { dispose(); }

void HashMapKeyedStateBackend::dispose() {
  // The state objects refer to the tables: drop them first.
  stateObjects().clear();
  tables_.clear();
  restored_.clear();
}

std::unique_ptr<KeyedStateSnapshot> HashMapKeyedStateBackend::snapshot() {
  // Both maps are sorted by name and disjoint (registering a restored state
  // moves its entries into its table): merge them in name order.
  std::vector<StateMetaInfo> metas;
  std::vector<std::unique_ptr<heap::StateSnapshotPart>> parts;
  auto t = tables_.begin();
  auto r = restored_.begin();
  while (t != tables_.end() || r != restored_.end()) {
    if (r == restored_.end() || (t != tables_.end() && t->first < r->first)) {
      metas.push_back(t->second->meta());
      parts.push_back(t->second->snapshot());
      ++t;
    } else {
      const std::shared_ptr<RestoredEntries>& entries = r->second;
      metas.push_back(entries->meta);
      parts.push_back(std::make_unique<RestoredPart>(
          entries->meta,
          std::shared_ptr<const std::vector<std::vector<uint8_t>>>(entries, &entries->groups),
          &HashMapKeyedStateBackend::forEachRestored));
      ++r;
    }
  }
  return std::make_unique<HeapKeyedStateSnapshot>(params().keySchema, params().maxParallelism,
                                                  keyGroupRange(), std::move(metas),
                                                  std::move(parts), clock().currentTimeMillis());
}

void HashMapKeyedStateBackend::restore(
    const std::vector<const CanonicalSnapshotReader*>& snapshots) {
  if (!tables_.empty()) {
    throw SluiceException("keyed state backend of " + params().operatorName +
                          ": restore() must come before any state is registered");
  }
  const int32_t start = keyGroupRange().startKeyGroup;
  for (const CanonicalSnapshotReader* snapshot : snapshots) {
    checkSnapshotCompatible(*snapshot);
    std::vector<RestoredEntries*> targets;
    for (const StateMetaInfo& meta : snapshot->states()) {
      auto known = restoredMeta_.find(meta.name);
      if (known != restoredMeta_.end() && !known->second.compatibleWith(meta)) {
        throw StateMigrationException("cannot restore state '" + meta.name + "' of " +
                                      params().operatorName + ": '" + snapshot->sourceName() +
                                      "' holds it as " + meta.describe() +
                                      ", another snapshot as " + known->second.describe());
      }
      restoredMeta_[meta.name] = meta;
      std::shared_ptr<RestoredEntries>& entries = restored_[meta.name];
      if (!entries) {
        entries = std::make_shared<RestoredEntries>();
        entries->groups.resize(numGroups_);
      } else if (entries.use_count() != 1) {
        // A snapshot taken since the last restore still holds these.
        entries = std::make_shared<RestoredEntries>(*entries);
      }
      entries->meta = meta;
      targets.push_back(entries.get());
    }
    snapshot->forEachEntry(keyGroupRange(), [&](int32_t keyGroup, uint16_t stateIndex,
                                                std::string_view key, std::string_view value) {
      std::vector<uint8_t>& group = targets[stateIndex]->groups[keyGroup - start];
      DataOutputView out(group);
      out.writeString(key);
      out.writeString(value);
    });
  }
}

void HashMapKeyedStateBackend::forEachRestored(
    const std::vector<uint8_t>& group,
    const std::function<void(std::string_view, std::string_view)>& fn) {
  DataInputView in(group.data(), group.size());
  while (in.remaining() != 0) {
    const std::string_view key = in.readStringView();
    const std::string_view value = in.readStringView();
    fn(key, value);
  }
}

void HashMapKeyedStateBackend::forEachKey(
    const std::string& stateName,
    const std::function<void(std::string_view key, int32_t keyGroup)>& fn) {
  const auto& keyLength = params().keyLength;
  std::vector<std::set<std::string>> keys(numGroups_);
  auto collect = [&](std::string_view entryKey, size_t g) {
    const size_t n = keyLength(reinterpret_cast<const uint8_t*>(entryKey.data()), entryKey.size());
    keys[g].emplace(entryKey.substr(0, std::min(n, entryKey.size())));
  };
  if (heap::StateTableBase* table = findTable(stateName)) {
    table->forEachEntryKey(collect);
  } else if (auto it = restored_.find(stateName); it != restored_.end()) {
    const std::shared_ptr<RestoredEntries> entries = it->second;
    for (size_t g = 0; g < numGroups_; ++g) {
      forEachRestored(entries->groups[g],
                      [&](std::string_view key, std::string_view) { collect(key, g); });
    }
  }
  const int32_t start = keyGroupRange().startKeyGroup;
  for (size_t g = 0; g < numGroups_; ++g) {
    for (const std::string& key : keys[g]) fn(key, start + static_cast<int32_t>(g));
  }
}

heap::StateTableBase* HashMapKeyedStateBackend::findTable(const std::string& name) const {
  auto it = tables_.find(name);
  return it == tables_.end() ? nullptr : it->second.get();
}

void HashMapKeyedStateBackend::adoptTable(const std::string& name,
                                          std::unique_ptr<heap::StateTableBase> table) {
  auto it = restored_.find(name);
  if (it != restored_.end()) {
    const std::shared_ptr<RestoredEntries> entries = it->second;
    for (size_t g = 0; g < numGroups_; ++g) {
      try {
        forEachRestored(entries->groups[g], [&](std::string_view key, std::string_view value) {
          table->restoreEntry(g, key, value);
        });
      } catch (const SerializationError& e) {
        throw SerializationError(
            "restoring state '" + name + "' of " + params().operatorName + " (key group " +
            std::to_string(keyGroupRange().startKeyGroup + static_cast<int32_t>(g)) +
            "): " + e.what());
      }
    }
    restored_.erase(it);
  }
  tables_.emplace(name, std::move(table));
}

void HashMapKeyedStateBackend::checkTableMeta(const heap::StateTableBase& table,
                                              const StateMetaInfo& meta) const {
  if (!table.meta().compatibleWith(meta)) {
    throw StateMigrationException("state '" + meta.name + "' of " + params().operatorName +
                                  " exists as " + table.meta().describe() +
                                  " and is now requested as " + meta.describe());
  }
}

void HashMapKeyedStateBackend::failTableType(const StateMetaInfo& meta) const {
  throw SluiceException("state '" + meta.name + "' of " + params().operatorName +
                        ": cannot create " + meta.describe() +
                        " with these types: the name is in use with other types, or the meta "
                        "does not describe the state's types");
}

void HashMapKeyedStateBackend::failNoCurrentKey() const {
  throw SluiceException("keyed state of " + params().operatorName +
                        " accessed without a current key (setCurrentKey was not called)");
}

}  // namespace sluice
