// HashMapKeyedStateBackend: its storages, snapshot, restore and the
// bookkeeping of its state tables (heap_state.h describes the design).
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "state/backend_factories.h"
#include "state/heap_state.h"

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

// Entries handed over already made (addToNextSnapshot with bytes).
class ReadyEntries final : public SnapshotEntrySource {
 public:
  explicit ReadyEntries(std::shared_ptr<const std::vector<std::vector<uint8_t>>> groups)
      : groups_(std::move(groups)) {}
  std::shared_ptr<const std::vector<std::vector<uint8_t>>> entries() override { return groups_; }

 private:
  std::shared_ptr<const std::vector<std::vector<uint8_t>>> groups_;
};

// A registered state's frozen tables followed by entries its operator
// handed over (addToNextSnapshot), which are made when the first key group
// is written: on the thread that writes the snapshot.
class WithEntriesPart final : public heap::StateSnapshotPart {
 public:
  WithEntriesPart(std::unique_ptr<heap::StateSnapshotPart> own, StateMetaInfo meta,
                  std::shared_ptr<SnapshotEntrySource> source, RestoredPart::ForEach forEach,
                  size_t numGroups, std::string operatorName)
      : own_(std::move(own)),
        meta_(std::move(meta)),
        source_(std::move(source)),
        forEach_(forEach),
        numGroups_(numGroups),
        operatorName_(std::move(operatorName)) {}
  void writeKeyGroup(size_t g, uint16_t stateIndex, CanonicalSnapshotWriter& writer,
                     int64_t now) override {
    own_->writeKeyGroup(g, stateIndex, writer, now);
    if (!entries_) {
      // Made once: a write that failed here fails the same way again.
      if (!error_.empty()) throw SluiceException(error_);
      std::shared_ptr<const std::vector<std::vector<uint8_t>>> groups;
      try {
        groups = source_->entries();
      } catch (const std::exception& e) {
        error_ = e.what();
        source_.reset();
        throw;
      }
      source_.reset();  // what the entries were made of may go now
      if (groups == nullptr || groups->size() != numGroups_) {
        error_ = "keyed state backend of " + operatorName_ + ": entries for state '" + meta_.name +
                 "' must come in " + std::to_string(numGroups_) + " key groups, got " +
                 std::to_string(groups == nullptr ? 0 : groups->size());
        throw SluiceException(error_);
      }
      entries_.emplace(meta_, std::move(groups), forEach_);
    }
    entries_->writeKeyGroup(g, stateIndex, writer, now);
  }

 private:
  std::unique_ptr<heap::StateSnapshotPart> own_;
  StateMetaInfo meta_;
  std::shared_ptr<SnapshotEntrySource> source_;
  RestoredPart::ForEach forEach_;
  size_t numGroups_;
  std::string operatorName_;
  std::optional<RestoredPart> entries_;
  std::string error_;  // why making the entries failed
};

// The current key's group and entry key, through one EntryKey.
struct Locator {
  HashMapKeyedStateBackend& backend;
  heap::EntryKey key;
  // The group first: it checks that a key is set.
  heap::Addr at() {
    const size_t g = backend.currentGroupIndex();
    return {g, key.get(backend)};
  }
};

class HeapValueStorage final : public internal::ValueStorage {
 public:
  HeapValueStorage(HashMapKeyedStateBackend& backend, heap::StateTable& table)
      : where_{backend, {}}, table_(table), type_(table.storedType()) {}
  void setNamespace(std::string_view ns) override {
    where_.key.setNamespace(ns);
    hintKey_ = 0;
  }
  const void* get() override {
    hint_.slot = nullptr;
    const void* v = table_.find(where_.at(), hint_);
    hintKey_ = hint_.slot != nullptr ? where_.backend.currentKeyVersion() : 0;
    return v;
  }
  // A read-modify-write (get, then put for the same key and namespace, the
  // keyed reduce and sum path) writes the slot get() found without looking
  // the key up again.
  void put(const void* value) override {
    if (hintKey_ != 0 && hintKey_ == where_.backend.currentKeyVersion()) [[likely]] {
      if (void* slot = table_.hinted(hint_)) {
        type_.copyAssign(slot, value);
        return;
      }
    }
    type_.copyAssign(table_.getOrInsert(where_.at(), hint_), value);
    hintKey_ = where_.backend.currentKeyVersion();
  }
  void clear() override {
    table_.erase(where_.at());
    hintKey_ = 0;
  }

 private:
  Locator where_;
  heap::StateTable& table_;
  const internal::StateType& type_;
  heap::SlotHint hint_;
  uint64_t hintKey_ = 0;  // the key version hint_ was taken for; 0: none
};

class HeapListStorage final : public internal::ListStorage {
 public:
  HeapListStorage(HashMapKeyedStateBackend& backend, heap::StateTable& table)
      : where_{backend, {}},
        table_(table),
        list_(static_cast<const internal::ListType&>(table.storedType())) {}
  void setNamespace(std::string_view ns) override { where_.key.setNamespace(ns); }
  internal::ElementSpan get() override {
    const auto* v = static_cast<const internal::ErasedVector*>(table_.find(where_.at()));
    if (v == nullptr) return {};
    return {v->data, v->size};
  }
  void add(const void* element) override {
    list_.pushBack(table_.getOrInsert(where_.at()), element);
  }
  void addAll(const void* elements, size_t count) override {
    if (count == 0) return;
    list_.appendCopies(table_.getOrInsert(where_.at()), elements, count);
  }
  void update(const void* elements, size_t count) override {
    if (count == 0) {
      clear();
      return;
    }
    void* list = table_.getOrInsert(where_.at());
    list_.clear(list);
    list_.appendCopies(list, elements, count);
  }
  void clear() override { table_.erase(where_.at()); }
  void mergeNamespaces(std::string_view target, const std::vector<std::string>& sources) override {
    internal::ObjectBuffer merged(list_);
    for (const std::string& source : sources) {
      where_.key.setNamespace(source);
      const heap::Addr a = where_.at();
      void* from = table_.findMutable(a.group, a.key);
      if (from == nullptr) continue;
      list_.appendMoved(merged.get(), from);
      table_.erase(a);
    }
    where_.key.setNamespace(target);
    if (internal::ListType::size(merged.get()) == 0) return;
    list_.appendMoved(table_.getOrInsert(where_.at()), merged.get());
  }

 private:
  Locator where_;
  heap::StateTable& table_;
  const internal::ListType& list_;
};

// An entry with an empty map is removed, so a key whose last user key was
// removed has no entry at all (forEachKey does not list it).
class HeapMapStorage final : public internal::MapStorage {
 public:
  HeapMapStorage(HashMapKeyedStateBackend& backend, heap::StateTable& table)
      : where_{backend, {}},
        table_(table),
        map_(static_cast<const internal::MapType&>(table.storedType())) {}
  void setNamespace(std::string_view ns) override { where_.key.setNamespace(ns); }
  const void* get(const void* userKey) override {
    const void* inner = table_.find(where_.at());
    return inner == nullptr ? nullptr : map_.find(inner, userKey);
  }
  void put(const void* userKey, const void* userValue) override {
    map_.put(table_.getOrInsert(where_.at()), userKey, userValue);
  }
  void remove(const void* userKey) override {
    const heap::Addr a = where_.at();
    removeFrom(a.group, a.key, userKey);
  }
  bool contains(const void* userKey) override { return get(userKey) != nullptr; }
  bool isEmpty() override {
    const void* inner = table_.find(where_.at());
    return inner == nullptr || internal::MapType::size(inner) == 0;
  }
  void clear() override { table_.erase(where_.at()); }

  // Iterates a copy of the entries taken when the iterator is created, so
  // puts and removes through the state cannot invalidate it; remove()
  // removes the last returned user key from the live state of the key and
  // namespace the iterator was created for.
  std::unique_ptr<internal::MapCursor> iterator() override {
    const heap::Addr a = where_.at();
    auto copy = std::make_unique<internal::ObjectBuffer>(map_);
    if (const void* inner = table_.find(a)) map_.copyAssign(copy->get(), inner);
    return std::make_unique<Cursor>(*this, a.group, std::string(a.key), std::move(copy));
  }

 private:
  class Cursor final : public internal::MapCursor {
   public:
    Cursor(HeapMapStorage& storage, size_t group, std::string entryKey,
           std::unique_ptr<internal::ObjectBuffer> entries)
        : storage_(storage),
          group_(group),
          entryKey_(std::move(entryKey)),
          entries_(std::move(entries)) {
      hasNext_ = storage_.map_.advance(entries_->get(), next_);
    }
    bool hasNext() override { return hasNext_; }
    void next(const void*& key, const void*& value) override {
      if (!hasNext_) throw SluiceException("MapStateIterator::next() called with no entries left");
      current_ = next_;
      canRemove_ = true;
      key = storage_.map_.keyAt(current_);
      value = storage_.map_.valueAt(current_);
      hasNext_ = storage_.map_.advance(entries_->get(), next_);
    }
    void remove() override {
      if (!canRemove_) {
        throw SluiceException("MapStateIterator::remove() must follow a call of next()");
      }
      canRemove_ = false;
      storage_.removeFrom(group_, entryKey_, storage_.map_.keyAt(current_));
    }

   private:
    HeapMapStorage& storage_;
    size_t group_;
    std::string entryKey_;
    std::unique_ptr<internal::ObjectBuffer> entries_;
    internal::MapType::Position next_;
    internal::MapType::Position current_;
    bool hasNext_ = false;
    bool canRemove_ = false;
  };

  void removeFrom(size_t g, std::string_view key, const void* userKey) {
    const void* inner = table_.find(g, key);
    if (inner == nullptr || map_.find(inner, userKey) == nullptr) return;
    void* mut = table_.findMutable(g, key);
    map_.erase(mut, userKey);
    if (internal::MapType::size(mut) == 0) table_.erase(g, key);
  }

  Locator where_;
  heap::StateTable& table_;
  const internal::MapType& map_;
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
  nextSnapshot_.clear();
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
      std::unique_ptr<heap::StateSnapshotPart> part = t->second->snapshot();
      if (auto handed = nextSnapshot_.find(t->first); handed != nextSnapshot_.end()) {
        part = std::make_unique<WithEntriesPart>(
            std::move(part), t->second->meta(), std::move(handed->second),
            &HashMapKeyedStateBackend::forEachRestored, numGroups_, params().operatorName);
      }
      parts.push_back(std::move(part));
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
  nextSnapshot_.clear();
  return std::make_unique<HeapKeyedStateSnapshot>(params().keySchema, params().maxParallelism,
                                                  keyGroupRange(), std::move(metas),
                                                  std::move(parts), clock().currentTimeMillis());
}

void HashMapKeyedStateBackend::addToNextSnapshot(
    const std::string& stateName, std::shared_ptr<const std::vector<std::vector<uint8_t>>> groups) {
  if (findTable(stateName) == nullptr) {
    throw SluiceException("keyed state backend of " + params().operatorName +
                          ": entries for state '" + stateName +
                          "' handed to a snapshot, but no such state is registered");
  }
  if (groups == nullptr || groups->size() != numGroups_) {
    throw SluiceException("keyed state backend of " + params().operatorName +
                          ": entries for state '" + stateName + "' must come in " +
                          std::to_string(numGroups_) + " key groups");
  }
  nextSnapshot_[stateName] = std::make_shared<ReadyEntries>(std::move(groups));
}

void HashMapKeyedStateBackend::addToNextSnapshot(const std::string& stateName,
                                                 std::shared_ptr<SnapshotEntrySource> source) {
  if (findTable(stateName) == nullptr) {
    throw SluiceException("keyed state backend of " + params().operatorName +
                          ": entries for state '" + stateName +
                          "' handed to a snapshot, but no such state is registered");
  }
  if (source == nullptr) {
    throw SluiceException("keyed state backend of " + params().operatorName +
                          ": null entries handed to a snapshot for state '" + stateName + "'");
  }
  nextSnapshot_[stateName] = std::move(source);
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

bool HashMapKeyedStateBackend::clearState(const std::string& stateName) {
  if (heap::StateTable* table = findTable(stateName)) table->clear();
  restored_.erase(stateName);
  return true;
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
  if (heap::StateTable* table = findTable(stateName)) {
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

heap::StateTable& HashMapKeyedStateBackend::table(const StateMetaInfo& meta,
                                                  heap::TableLayout layout) {
  if (heap::StateTable* existing = findTable(meta.name)) {
    if (!existing->layout().sameAs(layout)) failTableType(meta);
    checkTableMeta(*existing, meta);
    return *existing;
  }
  if (meta.storage() != layout.storage) failTableType(meta);
  const StateMetaInfo* registered = registeredMeta(meta.name);
  if (registered == nullptr) {
    registerStateMeta(meta);
  } else if (!registered->compatibleWith(meta)) {
    registerStateMeta(meta);  // throws, naming both
  }
  auto table = std::make_unique<heap::StateTable>(params(), meta, std::move(layout), numGroups_);
  heap::StateTable& result = *table;
  adoptTable(meta.name, std::move(table));
  return result;
}

std::unique_ptr<internal::ValueStorage> HashMapKeyedStateBackend::createValueStorage(
    const StateMetaInfo& meta, StorageTypes types) {
  heap::StateTable& t = table(meta, {StateStorage::kValue, types.ns, types.value});
  return std::make_unique<HeapValueStorage>(*this, t);
}

std::unique_ptr<internal::ListStorage> HashMapKeyedStateBackend::createListStorage(
    const StateMetaInfo& meta, StorageTypes types) {
  heap::StateTable& t = table(
      meta, {StateStorage::kList, types.ns, std::make_shared<internal::ListType>(types.value)});
  return std::make_unique<HeapListStorage>(*this, t);
}

std::unique_ptr<internal::MapStorage> HashMapKeyedStateBackend::createMapStorage(
    const StateMetaInfo& meta, StorageTypes types) {
  heap::StateTable& t =
      table(meta, {StateStorage::kMap, types.ns,
                   std::make_shared<internal::MapType>(types.userKey, types.value)});
  return std::make_unique<HeapMapStorage>(*this, t);
}

heap::StateTable* HashMapKeyedStateBackend::findTable(const std::string& name) const {
  auto it = tables_.find(name);
  return it == tables_.end() ? nullptr : it->second.get();
}

void HashMapKeyedStateBackend::adoptTable(const std::string& name,
                                          std::unique_ptr<heap::StateTable> table) {
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

void HashMapKeyedStateBackend::checkTableMeta(const heap::StateTable& table,
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

namespace sluice::internal {

namespace {

class HashMapBackendFactory final : public KeyedStateBackendFactory {
 public:
  const char* name() const override { return "hashmap"; }
  std::unique_ptr<KeyedStateBackend> create(KeyedBackendParams params) const override {
    return std::make_unique<HashMapKeyedStateBackend>(std::move(params));
  }
};

}  // namespace

std::unique_ptr<KeyedStateBackendFactory> makeHashMapBackendFactory() {
  return std::make_unique<HashMapBackendFactory>();
}

}  // namespace sluice::internal
