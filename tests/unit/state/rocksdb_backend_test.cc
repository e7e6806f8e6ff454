// RocksDbKeyedStateBackend: the storage primitives against std::map models
// (namespaces, many keys over many key groups, map removal while iterating,
// list appends through the merge operator), full canonical snapshots and
// restores (into RocksDB, into the hashmap backend, at another parallelism,
// written on another thread), the working directory's life cycle, the TTL
// compaction filter, incremental native snapshots (new-file accounting,
// restore by reopening and by copying, into smaller and larger ranges), the
// memory budget, and RocksDB errors.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>
#include <rocksdb/table_properties.h>
#include <rocksdb/write_batch.h>

#include <sluice/core/clock.h>
#include <sluice/core/key_hash.h>
#include <sluice/core/serializer.h>
#include <sluice/internal/keyed_state.h>
#include <sluice/state/keyed_state_backend.h>
#include <sluice/state/snapshot.h>
#include <sluice/state/state_type.h>

#include "harness/file_size_limit.h"
#include "harness/temp_dir.h"
#include "harness/wait.h"
#include "state/heap_state.h"
#include "state/rocksdb_keyed_backend.h"
#include "state/rocksdb_util.h"
#include "unit/state/state_test_util.h"

namespace sluice {

// What a TTL state stores: the last access time, then the value (the wire
// format of the TTL decorators), so tests can write timestamps by hand.
template <class T>
struct TtlValue {
  T value{};
  int64_t lastAccessTimestamp = 0;
  bool operator==(const TtlValue&) const = default;
};

template <class T>
struct TypeSerializer<TtlValue<T>> {
  static constexpr size_t kMinEncodedSize = 8;
  static void serialize(const TtlValue<T>& v, DataOutputView& out) {
    out.writeI64(v.lastAccessTimestamp);
    TypeSerializer<T>::serialize(v.value, out);
  }
  static void deserialize(TtlValue<T>& into, DataInputView& in) {
    into.lastAccessTimestamp = in.readI64();
    TypeSerializer<T>::deserialize(into.value, in);
  }
  static std::string schema() { return "ttl<" + TypeSerializer<T>::schema() + ">"; }
};

namespace rocksdb_backend_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Handle = RocksDbKeyedStateBackend::IncrementalSnapshotHandle;

constexpr KeyGroupRange kAllGroups{0, 127};

// A fresh directory under /tmp, removed with everything in it.
using test::TempDir;

std::unique_ptr<RocksDbKeyedStateBackend> newBackend(
    const TempDir& dir, KeyGroupRange range = kAllGroups, const Clock* clock = nullptr,
    std::shared_ptr<RocksDbSharedResources> shared = nullptr) {
  KeyedBackendParams params = paramsFor<int64_t>(range);
  params.operatorName = "Keyed Sum/1";
  params.localDir = dir.path();
  params.managedMemoryBytes = 16 << 20;
  params.sharedResources = std::move(shared);
  if (clock != nullptr) params.clock = clock;
  return std::make_unique<RocksDbKeyedStateBackend>(std::move(params));
}

std::shared_ptr<const std::string> writeSnapshot(KeyedStateSnapshot& snapshot) {
  std::ostringstream out;
  snapshot.writeTo(out);
  return std::make_shared<const std::string>(out.str());
}

void restoreFrom(KeyedStateBackend& backend, std::shared_ptr<const std::string> bytes) {
  CanonicalSnapshotReader reader = CanonicalSnapshotReader::fromBytes(std::move(bytes));
  backend.restore({&reader});
}

// The keys (decoded) forEachKey reports, checking each one's key group.
std::set<int64_t> keysOf(KeyedStateBackend& backend, const std::string& state) {
  std::set<int64_t> keys;
  backend.forEachKey(state, [&](std::string_view bytes, int32_t keyGroup) {
    const auto key = decodeTestKey<int64_t>(bytes);
    EXPECT_EQ(keyGroup, assignToKeyGroup(key, 128)) << "key " << key;
    EXPECT_TRUE(keys.insert(key).second) << "key " << key << " reported twice";
  });
  return keys;
}

bool inRange(int64_t key, KeyGroupRange range) {
  return range.contains(assignToKeyGroup(key, 128));
}

// ---------------------------------------------------------------------------
// A reference workload over value, list and map state, kept in models.

const ValueStateDescriptor<std::string> kValueDesc("value");
const ListStateDescriptor<int64_t> kListDesc("list");
const MapStateDescriptor<std::string, int64_t> kMapDesc("map");

struct Model {
  std::map<std::pair<int64_t, int64_t>, std::string> values;  // (key, namespace)
  std::map<int64_t, std::vector<int64_t>> lists;
  std::map<int64_t, std::map<std::string, int64_t>> maps;

  Model restrictedTo(KeyGroupRange range) const {
    Model m;
    for (const auto& [k, v] : values) {
      if (inRange(k.first, range)) m.values.emplace(k, v);
    }
    for (const auto& [k, v] : lists) {
      if (inRange(k, range)) m.lists.emplace(k, v);
    }
    for (const auto& [k, v] : maps) {
      if (inRange(k, range)) m.maps.emplace(k, v);
    }
    return m;
  }
};

// Random writes to keys [firstKey, firstKey + numKeys) of `range`, mirrored
// into `model`.
void writeWorkload(KeyedStateBackend& backend, Model& model, int64_t firstKey, int64_t numKeys,
                   uint32_t seed, int ops) {
  auto& value = getOrCreateValueState<int64_t>(backend, kValueDesc);
  auto& list = getOrCreateListState<VoidNamespace>(backend, kListDesc);
  auto& map = getOrCreateMapState<VoidNamespace>(backend, kMapDesc);
  std::mt19937 rng(seed);
  for (int i = 0; i < ops; ++i) {
    int64_t key = 0;
    do {
      key = firstKey + static_cast<int64_t>(rng() % numKeys);
    } while (!inRange(key, backend.keyGroupRange()));
    setKey(backend, key);
    const int64_t ns = rng() % 3;
    const auto r = static_cast<int64_t>(rng() % 1000);
    switch (rng() % 6) {
      case 0:
      case 1:
        value.setCurrentNamespace(ns);
        value.update("v" + std::to_string(r));
        model.values[{key, ns}] = "v" + std::to_string(r);
        break;
      case 2:
        list.add(r);
        model.lists[key].push_back(r);
        break;
      case 3:
        map.put("u" + std::to_string(r % 17), r);
        model.maps[key]["u" + std::to_string(r % 17)] = r;
        break;
      case 4:
        if (r % 4 == 0) {
          value.setCurrentNamespace(ns);
          value.clear();
          model.values.erase({key, ns});
        } else {
          map.remove("u" + std::to_string(r % 17));
          if (model.maps.contains(key)) {
            model.maps[key].erase("u" + std::to_string(r % 17));
            if (model.maps[key].empty()) model.maps.erase(key);
          }
        }
        break;
      default:
        list.addAll({r, r + 1});
        model.lists[key].push_back(r);
        model.lists[key].push_back(r + 1);
        break;
    }
  }
}

// Asserts that `backend` holds exactly `model` for keys [0, numKeys).
void expectContents(KeyedStateBackend& backend, const Model& model, int64_t numKeys) {
  auto& value = getOrCreateValueState<int64_t>(backend, kValueDesc);
  auto& list = getOrCreateListState<VoidNamespace>(backend, kListDesc);
  auto& map = getOrCreateMapState<VoidNamespace>(backend, kMapDesc);
  for (int64_t key = 0; key < numKeys; ++key) {
    if (!inRange(key, backend.keyGroupRange())) continue;
    setKey(backend, key);
    for (int64_t ns = 0; ns < 3; ++ns) {
      value.setCurrentNamespace(ns);
      auto it = model.values.find({key, ns});
      const std::optional<std::string> expected =
          it == model.values.end() ? std::nullopt : std::optional<std::string>(it->second);
      ASSERT_EQ(value.value(), expected) << "key " << key << " namespace " << ns;
    }
    auto l = model.lists.find(key);
    ASSERT_EQ(list.get(), l == model.lists.end() ? std::vector<int64_t>{} : l->second)
        << "key " << key;
    auto m = model.maps.find(key);
    const auto entries = map.entries();
    using Entries = std::map<std::string, int64_t>;
    ASSERT_EQ(Entries(entries.begin(), entries.end()),
              m == model.maps.end() ? Entries() : m->second)
        << "key " << key;
  }
  std::set<int64_t> valueKeys;
  for (const auto& [k, v] : model.values) valueKeys.insert(k.first);
  EXPECT_EQ(keysOf(backend, "value"), valueKeys);
  std::set<int64_t> listKeys;
  for (const auto& [k, v] : model.lists) listKeys.insert(k);
  EXPECT_EQ(keysOf(backend, "list"), listKeys);
}

// ---------------------------------------------------------------------------
// Primitives

TEST(RocksDbBackend, ValueStateWithNamespacesMatchesModel) {
  TempDir dir;
  auto backend = newBackend(dir);
  auto& state = getOrCreateValueState<int64_t>(*backend, ValueStateDescriptor<int64_t>("count"));
  std::map<std::pair<int64_t, int64_t>, int64_t> model;
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const int64_t key = rng() % 500;
    const int64_t ns = rng() % 4;
    setKey(*backend, key);
    state.setCurrentNamespace(ns);
    switch (rng() % 4) {
      case 0: {
        auto it = model.find({key, ns});
        ASSERT_EQ(state.value(), it == model.end() ? std::nullopt : std::optional(it->second));
        break;
      }
      case 1:
        state.clear();
        model.erase({key, ns});
        break;
      default: {
        const int64_t v = static_cast<int64_t>(rng());
        state.update(v);
        model[{key, ns}] = v;
      }
    }
  }
  for (int64_t key = 0; key < 500; ++key) {
    setKey(*backend, key);
    for (int64_t ns = 0; ns < 4; ++ns) {
      state.setCurrentNamespace(ns);
      auto it = model.find({key, ns});
      ASSERT_EQ(state.value(), it == model.end() ? std::nullopt : std::optional(it->second));
    }
  }
}

TEST(RocksDbBackend, ListStateAppendsThroughTheMergeOperator) {
  TempDir dir;
  auto backend = newBackend(dir);
  auto& list = getOrCreateListState<int64_t>(*backend, ListStateDescriptor<std::string>("l"));
  std::map<std::pair<int64_t, int64_t>, std::vector<std::string>> model;
  auto check = [&] {
    for (int64_t key = 0; key < 20; ++key) {
      setKey(*backend, key);
      for (int64_t ns = 0; ns < 2; ++ns) {
        list.setCurrentNamespace(ns);
        auto it = model.find({key, ns});
        ASSERT_EQ(list.get(), it == model.end() ? std::vector<std::string>{} : it->second)
            << key << "/" << ns;
      }
    }
  };
  // Appends only: merge operands, never read while written.
  for (int i = 0; i < 2000; ++i) {
    const int64_t key = i % 20;
    const int64_t ns = (i / 20) % 2;
    setKey(*backend, key);
    list.setCurrentNamespace(ns);
    const std::string element(static_cast<size_t>(i % 7), static_cast<char>('a' + i % 26));
    list.add(element);
    model[{key, ns}].push_back(element);
  }
  check();
  // Operands merged into flushed and compacted values, then more operands.
  backend->compactAll();
  check();
  for (int64_t key = 0; key < 20; ++key) {
    setKey(*backend, key);
    list.setCurrentNamespace(0);
    list.addAll({"x", "", "y"});
    for (const char* e : {"x", "", "y"}) model[{key, 0}].push_back(e);
  }
  check();

  setKey(*backend, int64_t{3});
  list.setCurrentNamespace(1);
  list.update({"only"});
  model[{3, 1}] = {"only"};
  list.addAll({});
  setKey(*backend, int64_t{4});
  list.setCurrentNamespace(1);
  list.update({});
  model.erase({4, 1});
  setKey(*backend, int64_t{5});
  list.setCurrentNamespace(0);
  list.clear();
  model.erase({5, 0});
  check();

  // mergeNamespaces: sources appended to the target in order and cleared.
  setKey(*backend, int64_t{6});
  list.mergeNamespaces(0, {1, 7});
  auto& target = model[{6, 0}];
  target.insert(target.end(), model[{6, 1}].begin(), model[{6, 1}].end());
  model.erase({6, 1});
  model.erase({6, 7});
  check();
  list.setCurrentNamespace(7);
  EXPECT_TRUE(list.get().empty());
}

TEST(RocksDbBackend, MapStateOperationsAndRemovalWhileIterating) {
  TempDir dir;
  auto backend = newBackend(dir);
  auto& map = getOrCreateMapState<int64_t>(*backend, MapStateDescriptor<std::string, int64_t>("m"));
  std::map<std::pair<int64_t, int64_t>, std::map<std::string, int64_t>> model;
  auto slot = [&](int64_t key, int64_t ns) -> std::map<std::string, int64_t>& {
    return model[std::make_pair(key, ns)];
  };
  std::mt19937 rng(11);
  for (int i = 0; i < 5000; ++i) {
    const int64_t key = rng() % 30;
    const int64_t ns = rng() % 3;
    const std::string uk = "k" + std::to_string(rng() % 40);
    setKey(*backend, key);
    map.setCurrentNamespace(ns);
    auto& m = slot(key, ns);
    switch (rng() % 5) {
      case 0:
        map.remove(uk);
        m.erase(uk);
        break;
      case 1: {
        auto it = m.find(uk);
        ASSERT_EQ(map.get(uk), it == m.end() ? std::nullopt : std::optional(it->second));
        ASSERT_EQ(map.contains(uk), it != m.end());
        break;
      }
      default: {
        const int64_t v = rng() % 100;
        map.put(uk, v);
        m[uk] = v;
      }
    }
  }
  auto entriesOf = [&](int64_t key, int64_t ns) {
    setKey(*backend, key);
    map.setCurrentNamespace(ns);
    const auto e = map.entries();
    return std::map<std::string, int64_t>(e.begin(), e.end());
  };
  for (int64_t key = 0; key < 30; ++key) {
    for (int64_t ns = 0; ns < 3; ++ns) {
      ASSERT_EQ(entriesOf(key, ns), slot(key, ns));
      ASSERT_EQ(map.isEmpty(), slot(key, ns).empty());
    }
  }

  // Remove the odd values while iterating key 1, namespace 2.
  setKey(*backend, int64_t{1});
  map.setCurrentNamespace(2);
  ASSERT_FALSE(slot(1, 2).empty());
  size_t seen = 0;
  auto it = map.iterator();
  EXPECT_THROW(it->remove(), SluiceException);  // before next()
  while (it->hasNext()) {
    auto [k, v] = it->next();
    ++seen;
    EXPECT_EQ(slot(1, 2).at(k), v);
    if (v % 2 == 1) {
      it->remove();
      EXPECT_THROW(it->remove(), SluiceException);  // twice
    }
  }
  EXPECT_THROW(it->next(), SluiceException);
  EXPECT_EQ(seen, slot(1, 2).size());
  std::erase_if(slot(1, 2), [](const auto& e) { return e.second % 2 == 1; });
  EXPECT_EQ(entriesOf(1, 2), slot(1, 2));

  // Removing everything through the iterator empties the map.
  setKey(*backend, int64_t{2});
  map.setCurrentNamespace(0);
  for (auto all = map.iterator(); all->hasNext();) {
    all->next();
    all->remove();
  }
  EXPECT_TRUE(map.isEmpty());
  slot(2, 0).clear();

  // clear() removes one key and namespace only.
  setKey(*backend, int64_t{3});
  map.setCurrentNamespace(1);
  map.clear();
  slot(3, 1).clear();
  for (int64_t key = 0; key < 30; ++key) {
    for (int64_t ns = 0; ns < 3; ++ns) ASSERT_EQ(entriesOf(key, ns), slot(key, ns));
  }
}

TEST(RocksDbBackend, MapPrefixesOfDifferentKeysAndNamespacesDoNotOverlap) {
  TempDir dir;
  KeyedBackendParams params = paramsFor<std::string>(kAllGroups);
  params.localDir = dir.path();
  RocksDbKeyedStateBackend backend(std::move(params));
  auto& map =
      getOrCreateMapState<std::string>(backend, MapStateDescriptor<std::string, int32_t>("m"));
  // Keys and namespaces whose bytes could run into each other without
  // length prefixes, all in one key group.
  const std::vector<std::string> keys = {"a", "ab", "b", ""};
  const std::vector<std::string> namespaces = {"", "b", "bb"};
  auto setRawKey = [&](const std::string& k) {
    const auto bytes = testKeyBytes(k);
    backend.setCurrentKey(bytes.data(), bytes.size(), 5);
  };
  int32_t n = 0;
  for (const auto& k : keys) {
    for (const auto& ns : namespaces) {
      setRawKey(k);
      map.setCurrentNamespace(ns);
      map.put(k + "|" + ns, n++);
    }
  }
  n = 0;
  for (const auto& k : keys) {
    for (const auto& ns : namespaces) {
      setRawKey(k);
      map.setCurrentNamespace(ns);
      const auto entries = map.entries();
      ASSERT_EQ(entries.size(), 1u) << k << "|" << ns;
      EXPECT_EQ(entries[0], std::make_pair(k + "|" + ns, n++));
    }
  }
  std::set<std::string> reported;
  backend.forEachKey("m", [&](std::string_view bytes, int32_t kg) {
    EXPECT_EQ(kg, 5);
    reported.insert(decodeTestKey<std::string>(bytes));
  });
  EXPECT_EQ(reported, std::set<std::string>(keys.begin(), keys.end()));
}

TEST(RocksDbBackend, ManyKeysAcrossKeyGroupsAndForEachKey) {
  TempDir dir;
  auto backend = newBackend(dir);
  Model model;
  writeWorkload(*backend, model, 0, 3000, 1, 30000);
  expectContents(*backend, model, 3000);
  std::set<int32_t> groups;
  for (const auto& [k, v] : model.values) groups.insert(assignToKeyGroup(k.first, 128));
  EXPECT_EQ(groups.size(), 128u);

  // forEachKey's callback may clear the state of the key it is given.
  auto& value = getOrCreateValueState<int64_t>(*backend, kValueDesc);
  int calls = 0;
  backend->forEachKey("value", [&](std::string_view bytes, int32_t) {
    ++calls;
    setKey(*backend, decodeTestKey<int64_t>(bytes));
    for (int64_t ns = 0; ns < 3; ++ns) {
      value.setCurrentNamespace(ns);
      value.clear();
    }
  });
  std::set<int64_t> valueKeys;
  for (const auto& [k, v] : model.values) valueKeys.insert(k.first);
  EXPECT_EQ(calls, static_cast<int>(valueKeys.size()));
  EXPECT_TRUE(keysOf(*backend, "value").empty());
  EXPECT_TRUE(keysOf(*backend, "no such state").empty());
}

TEST(RocksDbBackend, ReducingAndAggregatingStateOnRocksDb) {
  TempDir dir;
  auto backend = newBackend(dir);
  auto& sum = getOrCreateReducingState<int64_t>(
      *backend, ReducingStateDescriptor<int64_t>(
                    "sum", [](const int64_t& a, const int64_t& b) { return a + b; }));
  for (int64_t key = 0; key < 50; ++key) {
    setKey(*backend, key);
    for (int64_t ns = 0; ns < 3; ++ns) {
      sum.setCurrentNamespace(ns);
      for (int64_t i = 0; i <= key; ++i) sum.add(i);
    }
    sum.mergeNamespaces(0, {1, 2});
  }
  for (int64_t key = 0; key < 50; ++key) {
    setKey(*backend, key);
    sum.setCurrentNamespace(0);
    EXPECT_EQ(sum.get(), std::optional<int64_t>(3 * key * (key + 1) / 2));
    sum.setCurrentNamespace(1);
    EXPECT_EQ(sum.get(), std::nullopt);
  }
}

TEST(RocksDbBackend, AccessWithoutACurrentKeyThrows) {
  TempDir dir;
  auto backend = newBackend(dir);
  auto& state = getOrCreateValueState<VoidNamespace>(*backend, ValueStateDescriptor<int64_t>("v"));
  EXPECT_THROW(state.value(), SluiceException);
}

// ---------------------------------------------------------------------------
// Full snapshots

TEST(RocksDbBackend, FullSnapshotRestoresIdenticalContents) {
  TempDir dir;
  auto backend = newBackend(dir);
  Model model;
  writeWorkload(*backend, model, 0, 1000, 2, 15000);
  const Model atSnapshot = model;

  std::unique_ptr<KeyedStateSnapshot> snapshot = backend->snapshot();
  // The task goes on writing while another thread writes the snapshot.
  std::shared_ptr<const std::string> bytes;
  std::thread writer([&] { bytes = writeSnapshot(*snapshot); });
  writeWorkload(*backend, model, 0, 1000, 3, 15000);
  writer.join();
  std::ostringstream again;
  EXPECT_THROW(snapshot->writeTo(again), SluiceException);  // written once only
  expectContents(*backend, model, 1000);

  TempDir dir2;
  auto restored = newBackend(dir2);
  restoreFrom(*restored, bytes);
  expectContents(*restored, atSnapshot, 1000);

  // The canonical format restores into the hashmap backend too.
  HashMapKeyedStateBackend heap(paramsFor<int64_t>(kAllGroups));
  restoreFrom(heap, bytes);
  expectContents(heap, atSnapshot, 1000);

  // And from the hashmap backend back into RocksDB.
  TempDir dir3;
  auto roundTrip = newBackend(dir3);
  restoreFrom(*roundTrip, writeSnapshot(*heap.snapshot()));
  expectContents(*roundTrip, atSnapshot, 1000);
}

TEST(RocksDbBackend, FullSnapshotRestoresAtAnotherParallelism) {
  TempDir dir;
  auto backend = newBackend(dir);
  Model model;
  writeWorkload(*backend, model, 0, 1000, 4, 15000);
  auto bytes = writeSnapshot(*backend->snapshot());
  backend.reset();

  // Scale out to two subtasks, then back in to one from their snapshots.
  const KeyGroupRange low{0, 63};
  const KeyGroupRange high{64, 127};
  auto a = newBackend(dir, low);
  auto b = newBackend(dir, high);
  restoreFrom(*a, bytes);
  restoreFrom(*b, bytes);
  expectContents(*a, model.restrictedTo(low), 1000);
  expectContents(*b, model.restrictedTo(high), 1000);

  auto bytesA = writeSnapshot(*a->snapshot());
  auto bytesB = writeSnapshot(*b->snapshot());
  auto merged = newBackend(dir);
  CanonicalSnapshotReader readerA = CanonicalSnapshotReader::fromBytes(bytesA);
  CanonicalSnapshotReader readerB = CanonicalSnapshotReader::fromBytes(bytesB);
  merged->restore({&readerA, &readerB});
  expectContents(*merged, model, 1000);
}

TEST(RocksDbBackend, RestoredButUnregisteredStateStaysInSnapshots) {
  TempDir dir;
  auto backend = newBackend(dir);
  Model model;
  writeWorkload(*backend, model, 0, 200, 5, 3000);
  auto bytes = writeSnapshot(*backend->snapshot());

  auto second = newBackend(dir);
  restoreFrom(*second, bytes);
  EXPECT_THAT(second->stateNames(), ::testing::UnorderedElementsAre("value", "list", "map"));
  // Only "value" is registered before the next snapshot.
  getOrCreateValueState<int64_t>(*second, kValueDesc);
  auto bytes2 = writeSnapshot(*second->snapshot());

  auto third = newBackend(dir);
  restoreFrom(*third, bytes2);
  expectContents(*third, model, 200);
}

TEST(RocksDbBackend, RestoreChecksSchemasAndOrder) {
  TempDir dir;
  auto backend = newBackend(dir);
  setKey(*backend, int64_t{1});
  getOrCreateValueState<VoidNamespace>(*backend, ValueStateDescriptor<int64_t>("v")).update(5);
  auto bytes = writeSnapshot(*backend->snapshot());

  // Another key type.
  KeyedBackendParams params = paramsFor<std::string>(kAllGroups);
  params.localDir = dir.path();
  RocksDbKeyedStateBackend strings(std::move(params));
  EXPECT_THROW(restoreFrom(strings, bytes), StateMigrationException);

  // Another value type for the restored state.
  auto restored = newBackend(dir);
  restoreFrom(*restored, bytes);
  EXPECT_THROW(
      getOrCreateValueState<VoidNamespace>(*restored, ValueStateDescriptor<std::string>("v")),
      StateMigrationException);

  // Restoring after a state was registered.
  auto late = newBackend(dir);
  getOrCreateValueState<VoidNamespace>(*late, ValueStateDescriptor<int64_t>("v"));
  EXPECT_THROW(restoreFrom(*late, bytes), SluiceException);
}

// ---------------------------------------------------------------------------
// Working directory

TEST(RocksDbBackend, WorkingDirectoryIsRemovedOnDispose) {
  TempDir dir;
  auto backend = newBackend(dir);
  const fs::path work = backend->workingDirectory();
  EXPECT_EQ(work.parent_path(), fs::path(dir.path()));
  EXPECT_THAT(work.filename().string(), ::testing::StartsWith("sluice-rocksdb-Keyed_Sum_1-0-"));
  auto& state = getOrCreateValueState<VoidNamespace>(*backend, ValueStateDescriptor<int64_t>("v"));
  setKey(*backend, int64_t{1});
  state.update(1);
  backend->compactAll();
  EXPECT_TRUE(fs::is_directory(work));
  EXPECT_FALSE(fs::is_empty(work));

  // A second backend of the same operator and subtask gets its own directory.
  auto other = newBackend(dir);
  EXPECT_NE(other->workingDirectory(), work.string());
  other.reset();  // the destructor disposes
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);

  backend->dispose();
  EXPECT_FALSE(fs::exists(work));
  backend->dispose();  // idempotent
  EXPECT_THAT([&] { state.value(); },
              ::testing::ThrowsMessage<SluiceException>(HasSubstr("dispose")));
}

// A child process that runs `setUp`, reports the line it returns through a
// pipe (or "error: ..." when it throws), then waits to be killed; what
// setUp() opened stays open.
struct ChildProcess {
  pid_t pid = -1;
  std::string line;  // empty, with `error` set, when the child failed
  std::string error;
};

template <class F>
ChildProcess startChild(F setUp) {
  ChildProcess child;
  int fds[2];
  if (::pipe(fds) != 0) {
    child.error = std::string("pipe: ") + std::strerror(errno);
    return child;
  }
  child.pid = ::fork();
  if (child.pid == 0) {
    ::close(fds[0]);
    std::string line;
    bool ok = false;
    try {
      line = setUp() + "\n";
      ok = true;
    } catch (const std::exception& e) {
      line = std::string("error: ") + e.what() + "\n";
    }
    if (::write(fds[1], line.data(), line.size()) < 0) ::_exit(2);
    if (!ok) ::_exit(1);
    for (;;) ::pause();  // until the parent kills us
  }
  ::close(fds[1]);
  if (child.pid < 0) {
    child.error = std::string("fork: ") + std::strerror(errno);
    ::close(fds[0]);
    return child;
  }
  std::string line;
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, 60'000) <= 0) {  // bounds a broken run only
      child.error = "the child did not report its working directory";
      break;
    }
    char c;
    const ssize_t n = ::read(fds[0], &c, 1);
    if (n <= 0) {
      child.error = "the child exited before reporting: " + line;
      break;
    }
    if (c == '\n') break;
    line += c;
  }
  ::close(fds[0]);
  if (child.error.empty() && line.starts_with("error: ")) child.error = line;
  if (child.error.empty()) child.line = line;
  return child;
}

// A child with a backend in `local`; its line is the working directory.
ChildProcess startBackendProcess(const TempDir& local) {
  return startChild([&] {
    static std::unique_ptr<RocksDbKeyedStateBackend> backend;  // the child's, never disposed
    backend = newBackend(local);
    return backend->workingDirectory();
  });
}

// A child holding a write lock on `file` with fcntl, as RocksDB locks the
// LOCK file of an open database.
ChildProcess startLockingProcess(const fs::path& file) {
  return startChild([&] {
    const int fd = ::open(file.c_str(), O_RDWR | O_CREAT, 0644);
    if (fd < 0) throw std::runtime_error(std::string("open: ") + std::strerror(errno));
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    if (::fcntl(fd, F_SETLK, &lock) != 0) {
      throw std::runtime_error(std::string("fcntl: ") + std::strerror(errno));
    }
    return std::string("locked");
  });
}

void setModificationTimes(const fs::path& dir, fs::file_time_type time) {
  for (const auto& e : fs::recursive_directory_iterator(dir)) fs::last_write_time(e.path(), time);
  fs::last_write_time(dir, time);
}

void killAndWait(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

std::string readAll(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A process holding a backend is killed (it never disposes). The next
// process's first backend in that localDir removes the dead process's
// working directory and keeps those whose owner lock is held: another live
// process's and its own. Directories without an owner lock (older versions)
// go once unchanged for an hour; other names are never touched.
TEST(RocksDbBackend, WorkingDirectoriesOfDeadProcessesAreRemoved) {
  TempDir local;
  // As an older version left them: no owner lock. One still has its
  // database open in a live process.
  const fs::path stale = local.path() / "sluice-rocksdb-Old_Op-0-0123456789abcdef";
  const fs::path recent = local.path() / "sluice-rocksdb-Old_Op-1-fedcba9876543210";
  const fs::path open = local.path() / "sluice-rocksdb-Old_Op-2-00000000000000aa";
  const fs::path otherName = local.path() / "sluice-rocksdb-notes";
  for (const fs::path& d : {stale, recent, open, otherName}) {
    fs::create_directories(d / "db-0");
    std::ofstream(d / "db-0" / "CURRENT") << "MANIFEST-000001\n";
  }
  ChildProcess oldVersion = startLockingProcess(open / "db-0" / "LOCK");
  ChildProcess dead = startBackendProcess(local);
  ChildProcess alive = startBackendProcess(local);
  struct Reap {
    std::vector<pid_t> pids;
    ~Reap() {
      for (pid_t p : pids) killAndWait(p);
    }
  } reap{{oldVersion.pid, dead.pid, alive.pid}};
  ASSERT_EQ(oldVersion.error, "");
  ASSERT_EQ(dead.error, "");
  ASSERT_EQ(alive.error, "");
  ASSERT_TRUE(fs::is_directory(dead.line));
  ASSERT_TRUE(fs::is_directory(alive.line));
  EXPECT_THAT(readAll(fs::path(dead.line) / "LOCK.sluice"),
              ::testing::MatchesRegex("pid " + std::to_string(dead.pid) + "\nstart-time [0-9]+\n"));
  // Aged only now: the children's own sweeps ran before.
  const auto twoHoursAgo = fs::file_time_type::clock::now() - std::chrono::hours(2);
  for (const fs::path& d : {stale, open, otherName}) setModificationTimes(d, twoHoursAgo);

  killAndWait(dead.pid);
  reap.pids = {oldVersion.pid, alive.pid};
  auto backend = newBackend(local);
  EXPECT_FALSE(fs::exists(dead.line)) << "the killed process's directory is removed";
  EXPECT_TRUE(fs::exists(fs::path(alive.line) / "LOCK.sluice")) << "a live owner's stays";
  EXPECT_TRUE(fs::is_directory(backend->workingDirectory()));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(recent)) << "changed within the hour";
  EXPECT_TRUE(fs::exists(open / "db-0" / "CURRENT")) << "its database is open";
  EXPECT_TRUE(fs::exists(otherName));

  // Once the other processes die too, a sweep removes their directories;
  // this process's own, whose lock it holds, stays.
  killAndWait(alive.pid);
  killAndWait(oldVersion.pid);
  reap.pids.clear();
  std::vector<std::string> removed = rocksdbutil::removeAbandonedWorkingDirectories(local.path());
  std::sort(removed.begin(), removed.end());
  std::vector<std::string> expectedRemoved = {alive.line, fs::absolute(open).string()};
  std::sort(expectedRemoved.begin(), expectedRemoved.end());
  EXPECT_EQ(removed, expectedRemoved);
  EXPECT_TRUE(fs::is_directory(backend->workingDirectory()));
  auto& state = getOrCreateValueState<VoidNamespace>(*backend, ValueStateDescriptor<int64_t>("v"));
  setKey(*backend, int64_t{1});
  state.update(7);
  EXPECT_EQ(state.value(), 7) << "the backend still works";
  const std::string own = backend->workingDirectory();
  backend.reset();
  EXPECT_FALSE(fs::exists(own));
}

TEST(RocksDbBackend, EmptyLocalDirUsesTheTempDirectory) {
  KeyedBackendParams params = paramsFor<int64_t>(kAllGroups);
  RocksDbKeyedStateBackend backend(std::move(params));
  const fs::path work = backend.workingDirectory();
  EXPECT_EQ(work.parent_path(), fs::temp_directory_path());
  backend.dispose();
  EXPECT_FALSE(fs::exists(work));
}

// The thread that creates a backend stops RocksDB's perf counting (Sluice
// reads none of it; each count is a thread-local lookup in the shared
// library); other threads keep RocksDB's default.
TEST(RocksDbBackend, CreatingThreadCountsNoPerfContext) {
  TempDir dir;
  rocksdb::PerfLevel before = rocksdb::PerfLevel::kUninitialized;
  rocksdb::PerfLevel after = rocksdb::PerfLevel::kUninitialized;
  uint64_t comparisons = 1;
  std::optional<int64_t> read;
  std::string error;
  std::thread task([&] {
    try {
      before = rocksdb::GetPerfLevel();
      KeyedBackendParams params = paramsFor<int64_t>(kAllGroups);
      params.localDir = dir.path();
      RocksDbKeyedStateBackend backend(std::move(params));
      after = rocksdb::GetPerfLevel();
      auto& state =
          getOrCreateValueState<VoidNamespace>(backend, ValueStateDescriptor<int64_t>("v"));
      rocksdb::get_perf_context()->Reset();
      for (int64_t k = 0; k < 100; ++k) {
        setKey(backend, k);
        state.update(k * 3);
      }
      setKey(backend, int64_t{42});
      read = state.value();
      comparisons = rocksdb::get_perf_context()->user_key_comparison_count;
      backend.dispose();
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  task.join();
  ASSERT_EQ(error, "");
  EXPECT_EQ(before, rocksdb::PerfLevel::kEnableCount);
  EXPECT_EQ(after, rocksdb::PerfLevel::kDisable);
  EXPECT_EQ(read, std::optional<int64_t>(126));
  EXPECT_EQ(comparisons, 0u);
  // Per thread: another thread that made no backend still counts.
  rocksdb::PerfLevel other = rocksdb::PerfLevel::kUninitialized;
  std::thread([&] { other = rocksdb::GetPerfLevel(); }).join();
  EXPECT_EQ(other, rocksdb::PerfLevel::kEnableCount);
}

TEST(RocksDbBackend, SnapshotBeingWrittenOutlivesDispose) {
  TempDir dir;
  auto backend = newBackend(dir);
  Model model;
  writeWorkload(*backend, model, 0, 100, 6, 1000);
  const std::string work = backend->workingDirectory();
  auto snapshot = backend->snapshot();
  backend->dispose();
  EXPECT_TRUE(fs::exists(work));  // the snapshot still reads the database
  auto bytes = writeSnapshot(*snapshot);
  snapshot.reset();
  EXPECT_FALSE(fs::exists(work));
  auto restored = newBackend(dir);
  restoreFrom(*restored, bytes);
  expectContents(*restored, model, 100);
}

// ---------------------------------------------------------------------------
// Time to live

StateMetaInfo ttlMeta(const std::string& name, StateKind kind, int64_t ttlMillis, bool inCompaction,
                      int64_t queryEvery = 1) {
  StateMetaInfo meta;
  meta.name = name;
  meta.kind = kind;
  meta.namespaceSchema = TypeSerializer<VoidNamespace>::schema();
  meta.valueSchema = TypeSerializer<TtlValue<int64_t>>::schema();
  if (kind == StateKind::kMap) meta.userKeySchema = TypeSerializer<int64_t>::schema();
  meta.ttlMillis = ttlMillis;
  meta.ttlCleanupInCompaction = inCompaction;
  meta.ttlQueryTimeAfterNumEntries = queryEvery;
  return meta;
}

template <class S>
std::unique_ptr<S> rawState(RocksDbKeyedStateBackend& backend, const StateMetaInfo& meta) {
  backend.registerStateMeta(meta);
  return std::make_unique<S>(backend, meta);
}

using Stamped = TtlValue<int64_t>;
KeyedStateBackend::StorageTypes stampedTypes(bool map = false) {
  return {internal::sharedStateTypeOf<VoidNamespace>(), internal::sharedStateTypeOf<Stamped>(),
          map ? internal::sharedMapKeyTypeOf<int64_t>() : nullptr};
}

// The storages under the TTL decorators, typed by hand.
class RawValue {
 public:
  RawValue(KeyedStateBackend& backend, const StateMetaInfo& meta)
      : storage_(backend.createValueStorage(meta, stampedTypes())) {
    storage_->setNamespace({});
  }
  void update(const Stamped& v) { storage_->put(&v); }
  std::optional<Stamped> value() {
    const void* v = storage_->get();
    return v == nullptr ? std::nullopt : std::optional(*static_cast<const Stamped*>(v));
  }

 private:
  std::unique_ptr<internal::ValueStorage> storage_;
};

class RawList {
 public:
  RawList(KeyedStateBackend& backend, const StateMetaInfo& meta)
      : storage_(backend.createListStorage(meta, stampedTypes())) {
    storage_->setNamespace({});
  }
  void add(const Stamped& v) { storage_->add(&v); }
  void addAll(const std::vector<Stamped>& v) { storage_->addAll(v.data(), v.size()); }
  std::vector<Stamped> get() {
    const internal::ElementSpan span = storage_->get();
    const auto* first = static_cast<const Stamped*>(span.data);
    return std::vector<Stamped>(first, first + span.size);
  }

 private:
  std::unique_ptr<internal::ListStorage> storage_;
};

class RawMap {
 public:
  RawMap(KeyedStateBackend& backend, const StateMetaInfo& meta)
      : storage_(backend.createMapStorage(meta, stampedTypes(true))) {
    storage_->setNamespace({});
  }
  void put(int64_t key, const Stamped& v) { storage_->put(&key, &v); }
  std::map<int64_t, Stamped> entries() {
    std::map<int64_t, Stamped> out;
    auto cursor = storage_->iterator();
    while (cursor->hasNext()) {
      const void* k = nullptr;
      const void* v = nullptr;
      cursor->next(k, v);
      out.emplace(*static_cast<const int64_t*>(k), *static_cast<const Stamped*>(v));
    }
    return out;
  }

 private:
  std::unique_ptr<internal::MapStorage> storage_;
};

TEST(RocksDbBackend, TtlCompactionFilterDropsExpiredEntries) {
  TempDir dir;
  ManualClock clock(0);
  auto backend = newBackend(dir, kAllGroups, &clock);
  // The storage under the TTL decorators, so reads do not clean up.
  auto value = rawState<RawValue>(*backend, ttlMeta("value", StateKind::kValue, 100, true));
  auto list = rawState<RawList>(*backend, ttlMeta("list", StateKind::kList, 100, true, 1000));
  auto map = rawState<RawMap>(*backend, ttlMeta("map", StateKind::kMap, 100, true, 7));
  auto kept = rawState<RawValue>(*backend, ttlMeta("no-cleanup", StateKind::kValue, 100, false));
  // Expired at now = 1050: last access + 100 <= 1050, i.e. timestamp <= 950.
  auto isLive = [](int64_t ts) { return ts > 950; };
  for (int64_t key = 0; key < 100; ++key) {
    setKey(*backend, key);
    value->update({key, key * 10});
    kept->update({key, key * 10});
    for (int64_t ts : {int64_t{0}, 990 - key, 500 + key, int64_t{1000}}) list->add({key, ts});
    for (int64_t uk = 0; uk < 5; ++uk) map->put(uk, {uk, key * 10 + uk * 5});
  }
  clock.setCurrentTime(1050);
  backend->compactAll();

  for (int64_t key = 0; key < 100; ++key) {
    setKey(*backend, key);
    const std::optional<TtlValue<int64_t>> v = value->value();
    ASSERT_EQ(v.has_value(), isLive(key * 10)) << key;
    if (v) {
      EXPECT_EQ(*v, (TtlValue<int64_t>{key, key * 10}));
    }
    EXPECT_EQ(kept->value(), (TtlValue<int64_t>{key, key * 10}));
    std::vector<TtlValue<int64_t>> expectedList;
    for (int64_t ts : {int64_t{0}, 990 - key, 500 + key, int64_t{1000}}) {
      if (isLive(ts)) expectedList.push_back({key, ts});
    }
    EXPECT_EQ(list->get(), expectedList) << key;
    std::map<int64_t, TtlValue<int64_t>> expectedMap;
    for (int64_t uk = 0; uk < 5; ++uk) {
      if (isLive(key * 10 + uk * 5)) expectedMap[uk] = {uk, key * 10 + uk * 5};
    }
    const auto entries = map->entries();
    using Entries = std::map<int64_t, TtlValue<int64_t>>;
    EXPECT_EQ(Entries(entries.begin(), entries.end()), expectedMap) << key;
  }
  EXPECT_EQ(keysOf(*backend, "no-cleanup").size(), 100u);
}

// Counts how often the compaction filter reads the time.
class CountingClock final : public Clock {
 public:
  int64_t currentTimeMillis() const override {
    reads_.fetch_add(1);
    return 1000;
  }
  int64_t reads() const { return reads_.load(); }

 private:
  mutable std::atomic<int64_t> reads_{0};
};

TEST(RocksDbBackend, TtlCompactionFilterReadsTheClockEveryNEntries) {
  TempDir dir;
  auto readsFor = [&](int64_t queryEvery) {
    CountingClock clock;
    auto backend = newBackend(dir, kAllGroups, &clock);
    auto value =
        rawState<RawValue>(*backend, ttlMeta("value", StateKind::kValue, 100, true, queryEvery));
    for (int64_t key = 0; key < 500; ++key) {
      setKey(*backend, key);
      value->update({key, 2000});  // none expires
    }
    backend->compactAll();
    EXPECT_EQ(keysOf(*backend, "value").size(), 500u);
    return clock.reads();
  };
  // Every entry passes a filter at least once (one compaction or two).
  const int64_t everyEntry = readsFor(1);
  EXPECT_GE(everyEntry, 500);
  EXPECT_LE(everyEntry, 1000);
  // Once per filter, plus once per 200 entries.
  const int64_t every200 = readsFor(200);
  EXPECT_GE(every200, 3);
  EXPECT_LE(every200, 2 * 3);
}

TEST(RocksDbBackend, TtlDescriptorsInstallTheCompactionFilter) {
  TempDir dir;
  ManualClock clock(1000);
  auto backend = newBackend(dir, kAllGroups, &clock);
  ValueStateDescriptor<int64_t> cleaned("cleaned");
  cleaned.enableTimeToLive(StateTtlConfig::newBuilder(std::chrono::milliseconds(100))
                               .cleanupInRocksdbCompactFilter(1)
                               .build());
  ValueStateDescriptor<int64_t> notCleaned("not-cleaned");
  notCleaned.enableTimeToLive(StateTtlConfig::newBuilder(std::chrono::milliseconds(100))
                                  .disableCleanupInBackground()
                                  .build());
  auto& a = getOrCreateValueState<VoidNamespace>(*backend, cleaned);
  auto& b = getOrCreateValueState<VoidNamespace>(*backend, notCleaned);
  for (int64_t key = 0; key < 50; ++key) {
    setKey(*backend, key);
    a.update(key);
    b.update(key);
  }
  clock.advance(99);
  backend->compactAll();
  EXPECT_EQ(keysOf(*backend, "cleaned").size(), 50u);  // not yet expired
  clock.advance(1);
  backend->compactAll();
  EXPECT_TRUE(keysOf(*backend, "cleaned").empty());
  EXPECT_EQ(keysOf(*backend, "not-cleaned").size(), 50u);
}

TEST(RocksDbBackend, FullSnapshotLeavesOutExpiredEntries) {
  TempDir dir;
  ManualClock clock(0);
  auto backend = newBackend(dir, kAllGroups, &clock);
  StateMetaInfo meta = ttlMeta("list", StateKind::kList, 100, false);
  meta.ttlCleanupFullSnapshot = true;
  auto list = rawState<RawList>(*backend, meta);
  for (int64_t key = 0; key < 20; ++key) {
    setKey(*backend, key);
    list->addAll({{1, 0}, {2, 10 * key}, {3, 500}});
  }
  clock.setCurrentTime(250);  // alive: timestamps above 150
  auto bytes = writeSnapshot(*backend->snapshot());
  auto restored = newBackend(dir, kAllGroups, &clock);
  restoreFrom(*restored, bytes);
  auto restoredList = rawState<RawList>(*restored, meta);
  for (int64_t key = 0; key < 20; ++key) {
    setKey(*restored, key);
    std::vector<TtlValue<int64_t>> expected;
    if (10 * key > 150) expected.push_back({2, 10 * key});
    expected.push_back({3, 500});
    EXPECT_EQ(restoredList->get(), expected) << key;
  }
}

// ---------------------------------------------------------------------------
// Incremental snapshots

std::set<std::string> idsOf(const std::vector<RocksDbKeyedStateBackend::SstFile>& files) {
  std::set<std::string> ids;
  for (const auto& f : files) ids.insert(f.uniqueId);
  return ids;
}

TEST(RocksDbBackend, IncrementalSnapshotsReportOnlyNewFiles) {
  TempDir dir;
  auto backend = newBackend(dir);
  Model model;
  writeWorkload(*backend, model, 0, 500, 8, 5000);
  const Handle h1 = backend->snapshotIncremental(1, dir.file("chk-1"), nullptr);
  ASSERT_FALSE(h1.sstFiles.empty());
  EXPECT_EQ(h1.newSstFiles, h1.sstFiles);
  EXPECT_EQ(h1.checkpointId, 1);
  EXPECT_EQ(h1.keyGroupRange, kAllGroups);
  EXPECT_EQ(h1.directory, fs::absolute(dir.file("chk-1")).string());
  EXPECT_THAT(h1.privateFiles, ::testing::Contains("CURRENT"));
  EXPECT_THAT(h1.privateFiles, ::testing::Contains(::testing::StartsWith("MANIFEST-")));
  EXPECT_THAT(h1.privateFiles, ::testing::Contains(::testing::StartsWith("OPTIONS-")));
  EXPECT_THAT(h1.privateFiles,
              ::testing::Contains(RocksDbKeyedStateBackend::kIncrementalMetaFileName));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(h1.directory)) {
    names.push_back(e.path().filename().string());
  }
  std::vector<std::string> listed = h1.privateFiles;
  for (const auto& f : h1.sstFiles) {
    listed.push_back(f.fileName);
    EXPECT_EQ(fs::file_size(fs::path(h1.directory) / f.fileName), f.sizeBytes);
  }
  EXPECT_THAT(names, ::testing::UnorderedElementsAreArray(listed));

  // More writes, then a second snapshot: only the new flush is new.
  writeWorkload(*backend, model, 0, 500, 9, 5000);
  const Model atH2 = model;
  const Handle h2 = backend->snapshotIncremental(2, dir.file("chk-2"), &h1);
  ASSERT_FALSE(h2.newSstFiles.empty());
  const std::set<std::string> ids1 = idsOf(h1.sstFiles);
  for (const auto& f : h2.newSstFiles) EXPECT_FALSE(ids1.contains(f.uniqueId)) << f.fileName;
  const std::set<std::string> newIds = idsOf(h2.newSstFiles);
  size_t shared = 0;
  for (const auto& f : h2.sstFiles) {
    if (!newIds.contains(f.uniqueId)) {
      EXPECT_TRUE(ids1.contains(f.uniqueId)) << f.fileName;
      ++shared;
    }
  }
  EXPECT_GT(shared, 0u);  // nothing was compacted away in between
  EXPECT_EQ(shared + h2.newSstFiles.size(), h2.sstFiles.size());

  // The directory describes itself.
  Handle loaded = RocksDbKeyedStateBackend::loadIncrementalSnapshotHandle(h2.directory);
  EXPECT_TRUE(loaded.newSstFiles.empty());
  loaded.newSstFiles = h2.newSstFiles;
  EXPECT_EQ(loaded.sstFiles, h2.sstFiles);
  EXPECT_EQ(loaded.privateFiles, h2.privateFiles);
  EXPECT_EQ(loaded.checkpointId, 2);
  EXPECT_EQ(loaded.keySchema, h2.keySchema);
  EXPECT_EQ(loaded.states.size(), 3u);

  // Writes after the snapshot are not in it; the snapshot outlives its backend.
  writeWorkload(*backend, model, 0, 500, 10, 2000);
  backend.reset();

  auto restored = newBackend(dir);
  restored->restoreIncremental({h2});
  expectContents(*restored, atH2, 500);
  // The restored files keep their ids: nothing new without writes.
  const Handle h3 = restored->snapshotIncremental(3, dir.file("chk-3"), &h2);
  EXPECT_TRUE(h3.newSstFiles.empty());
  EXPECT_EQ(idsOf(h3.sstFiles), idsOf(h2.sstFiles));
}

TEST(RocksDbBackend, IncrementalRestoreIntoSmallerAndLargerRanges) {
  TempDir dir;
  auto backend = newBackend(dir);
  Model model;
  writeWorkload(*backend, model, 0, 800, 12, 10000);
  const Handle full = backend->snapshotIncremental(1, dir.file("full"), nullptr);
  backend.reset();

  // Scale out: one handle covers each smaller range, reopened and clipped.
  const KeyGroupRange low{0, 63};
  const KeyGroupRange high{64, 127};
  auto a = newBackend(dir, low);
  auto b = newBackend(dir, high);
  a->restoreIncremental({full});
  b->restoreIncremental({full});
  Model modelA = model.restrictedTo(low);
  Model modelB = model.restrictedTo(high);
  expectContents(*a, modelA, 800);
  expectContents(*b, modelB, 800);
  // Both write on, then snapshot incrementally.
  writeWorkload(*a, modelA, 0, 800, 13, 3000);
  writeWorkload(*b, modelB, 0, 800, 14, 3000);
  const Handle ha = a->snapshotIncremental(2, dir.file("a-2"), &full);
  const Handle hb = b->snapshotIncremental(2, dir.file("b-2"), &full);
  EXPECT_FALSE(ha.newSstFiles.empty());
  EXPECT_LT(ha.newSstFiles.size(), ha.sstFiles.size());  // files of `full` are reused
  EXPECT_EQ(ha.keyGroupRange, low);
  a.reset();
  b.reset();

  // Scale in: two handles, copied entry by entry.
  Model merged = modelA;
  merged.values.insert(modelB.values.begin(), modelB.values.end());
  merged.lists.insert(modelB.lists.begin(), modelB.lists.end());
  merged.maps.insert(modelB.maps.begin(), modelB.maps.end());
  auto listing = [](const std::string& directory) {
    std::map<std::string, uintmax_t> files;
    for (const auto& e : fs::directory_iterator(directory)) {
      files[e.path().filename().string()] = e.file_size();
    }
    return files;
  };
  const auto filesA = listing(ha.directory);
  auto c = newBackend(dir);
  c->restoreIncremental({ha, hb});
  expectContents(*c, merged, 800);
  EXPECT_EQ(listing(ha.directory), filesA);  // opened read-only, left as it was

  // A range that straddles both handles.
  const KeyGroupRange middle{32, 95};
  auto d = newBackend(dir, middle);
  d->restoreIncremental({ha, hb});
  expectContents(*d, merged.restrictedTo(middle), 800);
  // Its own incremental snapshot restores again.
  const Handle hd = d->snapshotIncremental(3, dir.file("d-3"), nullptr);
  auto e = newBackend(dir, middle);
  e->restoreIncremental({hd});
  expectContents(*e, merged.restrictedTo(middle), 800);
}

TEST(RocksDbBackend, IncrementalSnapshotErrors) {
  TempDir dir;
  auto backend = newBackend(dir);
  setKey(*backend, int64_t{3});
  getOrCreateValueState<VoidNamespace>(*backend, ValueStateDescriptor<int64_t>("v")).update(1);
  const Handle h = backend->snapshotIncremental(1, dir.file("chk"), nullptr);
  // The directory must be fresh.
  EXPECT_THAT([&] { backend->snapshotIncremental(2, dir.file("chk"), nullptr); },
              ::testing::ThrowsMessage<SluiceException>(HasSubstr("already exists")));
  // Another key type.
  KeyedBackendParams params = paramsFor<std::string>(kAllGroups);
  params.localDir = dir.path();
  RocksDbKeyedStateBackend strings(std::move(params));
  EXPECT_THROW(strings.restoreIncremental({h}), StateMigrationException);
  // A missing file.
  ASSERT_FALSE(h.sstFiles.empty());
  fs::remove(fs::path(h.directory) / h.sstFiles[0].fileName);
  auto restored = newBackend(dir);
  EXPECT_THAT([&] { restored->restoreIncremental({h}); },
              ::testing::ThrowsMessage<SluiceException>(HasSubstr(h.sstFiles[0].fileName)));
  // A corrupt meta file.
  {
    std::ofstream meta(fs::path(h.directory) / RocksDbKeyedStateBackend::kIncrementalMetaFileName,
                       std::ios::trunc);
    meta << "SLUICEIS";
  }
  EXPECT_THROW(RocksDbKeyedStateBackend::loadIncrementalSnapshotHandle(h.directory),
               SerializationError);
}

// ---------------------------------------------------------------------------
// Memory and errors

TEST(RocksDbBackend, MemoryStaysWithinTheBudget) {
  TempDir dir;
  constexpr int64_t kBudget = 8 << 20;
  auto shared = createRocksDbSharedResources(kBudget, 0.5, 0.1);
  auto backend = newBackend(dir, kAllGroups, nullptr, shared);
  auto& state =
      getOrCreateValueState<VoidNamespace>(*backend, ValueStateDescriptor<std::string>("blob"));
  std::mt19937_64 rng(3);
  std::string blob(1000, '\0');
  constexpr int64_t kKeys = 5 * kBudget / 1000;  // five times the budget
  auto fill = [&](int64_t key) {
    std::mt19937_64 r(static_cast<uint64_t>(key));
    for (char& c : blob) c = static_cast<char>(r());
  };
  RocksDbKeyedStateBackend::MemoryUsage peak;
  auto track = [&] {
    const auto u = backend->memoryUsage();
    peak.blockCacheUsage = std::max(peak.blockCacheUsage, u.blockCacheUsage);
    peak.memtableUsage = std::max(peak.memtableUsage, u.memtableUsage);
    peak.tableReadersUsage = std::max(peak.tableReadersUsage, u.tableReadersUsage);
  };
  for (int64_t key = 0; key < kKeys; ++key) {
    setKey(*backend, key);
    fill(key);
    state.update(blob);
    if (key % 1000 == 0) track();
  }
  for (int i = 0; i < 20000; ++i) {
    const auto key = static_cast<int64_t>(rng() % kKeys);
    setKey(*backend, key);
    fill(key);
    ASSERT_EQ(state.value(), blob) << key;
    if (i % 1000 == 0) track();
  }
  track();
  const auto usage = backend->memoryUsage();
  // Flink's split: the cache gets (3 - 0.5) / 3 of the budget, the write
  // buffer manager 2 * 0.5 / 3, charged to the cache.
  EXPECT_EQ(usage.blockCacheCapacity, static_cast<int64_t>(2.5 * kBudget / 3));
  EXPECT_EQ(usage.writeBufferManagerCapacity, static_cast<int64_t>(kBudget / 3.0));
  // The data on disk is several times the budget ...
  uintmax_t onDisk = 0;
  for (const auto& e : fs::recursive_directory_iterator(backend->workingDirectory())) {
    if (e.path().extension() == ".sst") onDisk += e.file_size();
  }
  EXPECT_GT(onDisk, static_cast<uintmax_t>(4 * kBudget));
  // ... while memory stays near the budget: everything charged to the cache
  // (blocks, index and filter blocks, memtable reservations) within its
  // capacity plus one shard's worth of slack, memtables within the write
  // buffer manager's limit plus one write buffer, table readers small.
  EXPECT_LE(peak.blockCacheUsage, usage.blockCacheCapacity + (1 << 20));
  EXPECT_LE(peak.memtableUsage, usage.writeBufferManagerCapacity + (1 << 20));
  EXPECT_LE(peak.tableReadersUsage, 1 << 20);
  EXPECT_GT(peak.blockCacheUsage, usage.blockCacheCapacity / 2);  // the cache is used
}

TEST(RocksDbBackend, SharedResourcesValidateTheirArguments) {
  EXPECT_THROW(createRocksDbSharedResources(0), SluiceException);
  EXPECT_THROW(createRocksDbSharedResources(1 << 20, 1.0), SluiceException);
  EXPECT_THROW(createRocksDbSharedResources(1 << 20, 0.5, -0.1), SluiceException);
}

TEST(RocksDbBackend, RocksDbFailuresNameTheOperation) {
  TempDir dir;
  auto backend = newBackend(dir);
  auto& state = getOrCreateValueState<VoidNamespace>(*backend, ValueStateDescriptor<int64_t>("v"));
  setKey(*backend, int64_t{1});
  state.update(1);
  // Pull the directory out from under the database: the flush cannot write.
  fs::remove_all(backend->workingDirectory());
  EXPECT_THAT([&] { backend->compactAll(); },
              ::testing::ThrowsMessage<SluiceException>(
                  ::testing::AllOf(HasSubstr("RocksDB Flush failed"), HasSubstr("Keyed Sum/1"))));
}

// A write error (a file-size limit of one byte: EFBIG, which RocksDB treats
// as fatal): the flush fails naming the operation, the operator, the file
// and the OS error, later writes fail the same way rather than being lost,
// and the process does not abort (RocksDB's own info log was a file in the
// same directory, and Debian's librocksdb asserted on its next line after a
// failed write).
TEST(RocksDbBackend, AFullDiskNamesTheFileAndTheOsError) {
  TempDir dir;
  auto backend = newBackend(dir);
  auto& state =
      getOrCreateValueState<VoidNamespace>(*backend, ValueStateDescriptor<std::string>("v"));
  for (int64_t key = 0; key < 2000; ++key) {
    setKey(*backend, key);
    state.update(std::string(100, static_cast<char>('a' + key % 26)));
  }
  // No info log file on the disk the state is on.
  EXPECT_EQ(rocksDbLogFilesBelow(dir.path()), std::vector<std::string>{});
  EXPECT_TRUE(fs::exists(fs::path(backend->workingDirectory()) / "db-0" / "CURRENT"));
  const auto isTheFullDisk = ::testing::AllOf(HasSubstr("Keyed Sum/1"), HasSubstr(dir.str()),
                                              HasSubstr(".sst"), HasSubstr("File too large"));
  {
    test::FileSizeLimit full(1);
    EXPECT_THAT([&] { backend->compactAll(); },
                ::testing::ThrowsMessage<SluiceException>(
                    ::testing::AllOf(HasSubstr("RocksDB Flush failed"), isTheFullDisk)));
  }
  EXPECT_THAT(
      [&] {
        setKey(*backend, int64_t{1});
        state.update("after");
      },
      ::testing::ThrowsMessage<SluiceException>(
          ::testing::AllOf(HasSubstr("RocksDB Put failed"), isTheFullDisk)));
}

// Collected writes go to RocksDB together, sorted by key, and the writes of
// one key keep their order (the tiered backend's write-back).
TEST(RocksDbBackend, BatchedWritesApplyInOrderPerKey) {
  TempDir dir;
  auto backend = newBackend(dir);
  StateMetaInfo meta;
  meta.name = "raw";
  meta.kind = StateKind::kList;
  meta.namespaceSchema = "void";
  meta.valueSchema = "int64";
  RocksDbKeyedStateBackend::ColumnFamily& cf = backend->columnFamily(meta);
  auto listOf = [](std::initializer_list<std::string_view> elements) {
    std::vector<uint8_t> out;
    for (std::string_view e : elements) {
      const size_t begin = beginListElement(out);
      out.insert(out.end(), e.begin(), e.end());
      endListElement(out, begin);
    }
    return std::string(out.begin(), out.end());
  };
  backend->put(cf, "c", listOf({"old"}));
  backend->batchPut(cf, "z", listOf({"z1"}));
  backend->batchPut(cf, "a", listOf({"a1"}));
  backend->batchMerge(cf, "a", listOf({"a2"}));
  backend->batchRemove(cf, "c");
  backend->batchMerge(cf, "c", listOf({"c1"}));
  backend->batchPut(cf, "b", listOf({"b1"}));
  backend->batchRemove(cf, "b");
  EXPECT_GT(backend->pendingBytes(), 0u);
  std::string value;
  EXPECT_FALSE(backend->get(cf, "a", value)) << "a collected write is visible before the write";
  backend->writePending();
  EXPECT_EQ(backend->pendingBytes(), 0u);
  ASSERT_TRUE(backend->get(cf, "a", value));
  EXPECT_EQ(value, listOf({"a1", "a2"}));
  EXPECT_FALSE(backend->get(cf, "b", value));
  ASSERT_TRUE(backend->get(cf, "c", value));
  EXPECT_EQ(value, listOf({"c1"}));
  ASSERT_TRUE(backend->get(cf, "z", value));
  EXPECT_EQ(value, listOf({"z1"}));
  backend->writePending();  // nothing collected: nothing happens
}

// ---------------------------------------------------------------------------
// Index and filter format (MetadataFormat)

TEST(MetadataFormat, PartitionedAboveAQuarterOfTheCacheFullAgainBelowAnEighth) {
  MetadataFormat format(8000);
  const int a = 0, b = 0;
  EXPECT_FALSE(format.partitioned());
  format.report(&a, 1500);
  EXPECT_FALSE(format.partitioned());
  format.report(&b, 600);  // 2100 of 8000: over a quarter
  EXPECT_TRUE(format.partitioned());
  format.report(&a, 500);  // 1100: under a quarter, not under an eighth
  EXPECT_TRUE(format.partitioned());
  format.forget(&b);  // 500
  EXPECT_FALSE(format.partitioned());
  EXPECT_EQ(MetadataFormat::estimateBytes(8000, 4096 * 10), 10000 + 320);
}

// The index partitions of each SST file of `db`, by file name.
std::map<std::string, uint64_t> indexPartitionsByFile(rocksdb::DB* db) {
  rocksdb::TablePropertiesCollection tables;
  rocksdbutil::check(db->GetPropertiesOfAllTables(&tables), "GetPropertiesOfAllTables", "test");
  std::map<std::string, uint64_t> out;
  for (const auto& [file, props] : tables) out[file] = props->index_partitions;
  return out;
}

TEST(MetadataFormat, FilesWrittenOnceTheMetadataOutgrowsTheCacheArePartitionedAndAllStayReadable) {
  TempDir dir("metadata-format");
  const std::string path = (dir.path() / "db").string();
  fs::create_directories(path);
  // A state without time to live: the compaction filter keeps everything.
  auto ttl =
      std::make_shared<rocksdbutil::TtlFilterConfig>(StateMetaInfo{}, &SystemClock::instance());
  // Opens the database on `resources` as the backend does (the options
  // hold the listener; they die with the database).
  auto open = [&](const RocksDbSharedResources& resources) {
    rocksdb::Options options(rocksdbutil::makeDbOptions(resources, "test database"),
                             rocksdbutil::makeColumnFamilyOptions(resources, ttl));
    rocksdb::DB* raw = nullptr;
    rocksdbutil::check(rocksdb::DB::Open(options, path, &raw), "Open", path);
    rocksdbutil::reportMetadataSize(raw);
    return std::unique_ptr<rocksdb::DB>(raw);
  };
  auto key = [](int i) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "k%09d", i);
    return std::string(buf);
  };
  auto write = [&](rocksdb::DB* db, int from, int to) {
    rocksdb::WriteBatch batch;
    for (int i = from; i < to; ++i) batch.Put(key(i), "v" + std::to_string(i));
    rocksdbutil::check(db->Write(rocksdb::WriteOptions(), &batch), "Write", path);
    rocksdbutil::check(db->Flush(rocksdb::FlushOptions()), "Flush", path);
  };
  // 1 MiB: a cache of about 0.83 MiB, a quarter of it is the estimate of
  // about 175k keys.
  auto resources = createRocksDbSharedResources(1 << 20);
  const std::shared_ptr<MetadataFormat> format = resources->metadataFormat();
  std::unique_ptr<rocksdb::DB> db = open(*resources);
  // RocksDB treats the wrapper as block-based: the 30-day ttl and periodic
  // compactions that bring the TTL compaction filter to cold files.
  EXPECT_EQ(db->GetOptions().ttl, 30u * 24 * 60 * 60);
  EXPECT_EQ(db->GetOptions().periodic_compaction_seconds, 30u * 24 * 60 * 60);
  write(db.get(), 0, 1000);
  ASSERT_FALSE(format->partitioned());
  const auto small = indexPartitionsByFile(db.get());
  ASSERT_EQ(small.size(), 1u);
  EXPECT_EQ(small.begin()->second, 0u) << "a small database writes a full index";

  // The flush's listener reports ~250k keys: over a quarter of the cache.
  // RocksDB may call it just after Flush() returns.
  write(db.get(), 1000, 250'000);
  ASSERT_TRUE(test::waitUntil([&] { return format->partitioned(); }));
  write(db.get(), 250'000, 251'000);
  const auto files = indexPartitionsByFile(db.get());
  uint64_t partitionedFiles = 0;
  for (const auto& [file, partitions] : files) partitionedFiles += partitions > 0 ? 1 : 0;
  EXPECT_GE(partitionedFiles, 1u) << "the flush after the switch writes a partitioned index";
  EXPECT_LT(partitionedFiles, files.size()) << "files written before keep their full index";

  // Every key reads back from files of both formats, before and after a
  // reopen, and a range deletion works across them; absent keys are absent.
  rocksdbutil::check(
      db->DeleteRange(rocksdb::WriteOptions(), db->DefaultColumnFamily(), key(500), key(1500)),
      "DeleteRange", path);
  for (int round = 0; round < 2; ++round) {
    std::string value;
    for (int i = 0; i < 251'000; i += 7) {
      const rocksdb::Status s = db->Get(rocksdb::ReadOptions(), key(i), &value);
      if (i >= 500 && i < 1500) {
        ASSERT_TRUE(s.IsNotFound()) << key(i) << " round " << round;
      } else {
        ASSERT_TRUE(s.ok()) << key(i) << " round " << round << ": " << s.ToString();
        ASSERT_EQ(value, "v" + std::to_string(i));
      }
    }
    EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), key(300'000), &value).IsNotFound());
    db.reset();
    // A closed database no longer counts.
    EXPECT_FALSE(format->partitioned());
    db = open(*resources);
    // One opened on large files counts before its first flush.
    EXPECT_TRUE(format->partitioned()) << "round " << round;
  }
}

}  // namespace
}  // namespace rocksdb_backend_test
}  // namespace sluice
