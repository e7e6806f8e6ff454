// The keyed-state contract, run against every backend: each primitive's
// semantics, namespaces, many keys across key groups, snapshots restored into
// a fresh backend of every type, rescaling by key group, and the error for an
// incompatible serializer. The tiered backend runs twice: with a budget its
// whole state fits in, and with one so small that nearly every access evicts.
// Backend-specific behaviour (copy-on-write, RocksDB files, compaction, the
// tiered cache's accounting) is tested in heap_backend_test.cc,
// rocksdb_backend_test.cc and tiered_backend_test.cc.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/internal/keyed_state.h>

#include "unit/state/state_test_util.h"

namespace sluice {
namespace keyed_state_suite_test {
namespace {

struct Window {
  int64_t start = 0;
  int64_t end = 0;
  bool operator==(const Window&) const = default;
};
SLUICE_STRUCT(Window, start, end)

// A backend type and, for tiered, its memory budget.
struct BackendConfig {
  const char* name;
  StateBackendType type;
  int64_t tieredMemoryBytes = 64ll << 20;
};

const BackendConfig kHashMap{"hashmap", StateBackendType::kHashMap};
const BackendConfig kRocksDb{"rocksdb", StateBackendType::kRocksDb};
const BackendConfig kTiered{"tiered", StateBackendType::kTiered};
// A few dozen key groups' tables: eviction on nearly every access.
const BackendConfig kTieredTiny{"tiered_tiny", StateBackendType::kTiered, 32 << 10};
const BackendConfig kAllConfigs[] = {kHashMap, kRocksDb, kTiered, kTieredTiny};

// A directory for RocksDB backends, removed at the end of each test.
class BackendFactory {
 public:
  BackendFactory() {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::temp_directory_path() /
           ("sluice-suite-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(dir_);
  }
  ~BackendFactory() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  template <class K>
  std::unique_ptr<KeyedStateBackend> make(const BackendConfig& config,
                                          KeyGroupRange range = KeyGroupRange{0, 127}) {
    KeyedBackendParams params = paramsFor<K>(range);
    params.localDir = dir_.string();
    params.managedMemoryBytes = 16 << 20;
    params.tieredMemoryBytes = config.tieredMemoryBytes;
    return createKeyedStateBackend(config.type, std::move(params));
  }

 private:
  std::filesystem::path dir_;
};

std::string snapshotBytes(KeyedStateBackend& backend) {
  std::ostringstream out;
  backend.snapshot()->writeTo(out);
  return out.str();
}

CanonicalSnapshotReader readerOf(const std::string& bytes) {
  return CanonicalSnapshotReader::fromBytes(std::make_shared<const std::string>(bytes));
}

class KeyedStateSuite : public ::testing::TestWithParam<BackendConfig> {
 protected:
  std::unique_ptr<KeyedStateBackend> make(KeyGroupRange range = KeyGroupRange{0, 127}) {
    return factory_.make<int64_t>(GetParam(), range);
  }
  BackendFactory factory_;
};

TEST_P(KeyedStateSuite, ValueStateGetUpdateClearPerKey) {
  auto backend = make();
  auto& state =
      getOrCreateValueState<VoidNamespace>(*backend, ValueStateDescriptor<std::string>("v"));
  setKey<int64_t>(*backend, 1);
  EXPECT_EQ(state.value(), std::nullopt);
  state.update("one");
  setKey<int64_t>(*backend, 2);
  EXPECT_EQ(state.value(), std::nullopt);
  state.update("two");
  state.update("two again");
  setKey<int64_t>(*backend, 1);
  EXPECT_EQ(state.value(), "one");
  state.clear();
  EXPECT_EQ(state.value(), std::nullopt);
  setKey<int64_t>(*backend, 2);
  EXPECT_EQ(state.value(), "two again");
}

TEST_P(KeyedStateSuite, ListStateAddAddAllUpdateGetClear) {
  auto backend = make();
  auto& list = getOrCreateListState<VoidNamespace>(*backend, ListStateDescriptor<int64_t>("l"));
  setKey<int64_t>(*backend, 7);
  EXPECT_TRUE(list.get().empty());
  list.add(1);
  list.addAll({2, 3});
  list.add(4);
  EXPECT_EQ(list.get(), (std::vector<int64_t>{1, 2, 3, 4}));
  list.update({9, 8});
  EXPECT_EQ(list.get(), (std::vector<int64_t>{9, 8}));
  list.addAll({});
  EXPECT_EQ(list.get(), (std::vector<int64_t>{9, 8}));
  list.update({});
  EXPECT_TRUE(list.get().empty());
  list.add(5);
  setKey<int64_t>(*backend, 8);
  EXPECT_TRUE(list.get().empty());
  setKey<int64_t>(*backend, 7);
  list.clear();
  EXPECT_TRUE(list.get().empty());
}

TEST_P(KeyedStateSuite, MapStatePutGetRemoveContainsIterate) {
  auto backend = make();
  auto& map =
      getOrCreateMapState<VoidNamespace>(*backend, MapStateDescriptor<std::string, int64_t>("m"));
  setKey<int64_t>(*backend, 1);
  EXPECT_TRUE(map.isEmpty());
  map.put("a", 1);
  map.put("b", 2);
  map.putAll(std::map<std::string, int64_t>{{"c", 3}, {"a", 10}});
  EXPECT_FALSE(map.isEmpty());
  EXPECT_EQ(map.get("a"), 10);
  EXPECT_EQ(map.get("zz"), std::nullopt);
  EXPECT_TRUE(map.contains("b"));
  map.remove("b");
  EXPECT_FALSE(map.contains("b"));
  auto entries = map.entries();
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::pair<std::string, int64_t>>{{"a", 10}, {"c", 3}}));
  auto keys = map.keys();
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "c"}));
  setKey<int64_t>(*backend, 2);
  EXPECT_TRUE(map.isEmpty());
  map.put("a", -1);
  setKey<int64_t>(*backend, 1);
  map.clear();
  EXPECT_TRUE(map.isEmpty());
  setKey<int64_t>(*backend, 2);
  EXPECT_EQ(map.get("a"), -1);
}

TEST_P(KeyedStateSuite, MapIteratorRemovesWhileIterating) {
  auto backend = make();
  auto& map =
      getOrCreateMapState<VoidNamespace>(*backend, MapStateDescriptor<int64_t, int64_t>("m"));
  setKey<int64_t>(*backend, 3);
  for (int64_t i = 0; i < 100; ++i) map.put(i, i * i);
  std::set<int64_t> seen;
  for (auto it = map.iterator(); it->hasNext();) {
    auto [k, v] = it->next();
    EXPECT_EQ(v, k * k);
    seen.insert(k);
    if (k % 3 != 0) it->remove();
  }
  EXPECT_EQ(seen.size(), 100u);
  std::vector<int64_t> left = map.keys();
  std::sort(left.begin(), left.end());
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 100; i += 3) expected.push_back(i);
  EXPECT_EQ(left, expected);
}

TEST_P(KeyedStateSuite, ReducingStateReducesAddsAndMergesNamespaces) {
  auto backend = make();
  auto& sum = getOrCreateReducingState<Window>(
      *backend, ReducingStateDescriptor<int64_t>(
                    "sum", [](const int64_t& a, const int64_t& b) { return a + b; }));
  setKey<int64_t>(*backend, 1);
  sum.setCurrentNamespace({0, 10});
  EXPECT_EQ(sum.get(), std::nullopt);
  sum.add(3);
  sum.add(4);
  EXPECT_EQ(sum.get(), 7);
  sum.setCurrentNamespace({10, 20});
  sum.add(100);
  sum.setCurrentNamespace({20, 30});
  sum.add(1000);
  sum.mergeNamespaces({0, 30}, {{0, 10}, {10, 20}, {20, 30}});
  sum.setCurrentNamespace({0, 30});
  EXPECT_EQ(sum.get(), 1107);
  for (Window w : {Window{0, 10}, Window{10, 20}, Window{20, 30}}) {
    sum.setCurrentNamespace(w);
    EXPECT_EQ(sum.get(), std::nullopt) << w.start;
  }
}

class MeanOf final : public AggregateFunction<int64_t, std::pair<int64_t, int64_t>, double> {
 public:
  std::pair<int64_t, int64_t> createAccumulator() override { return {0, 0}; }
  std::pair<int64_t, int64_t> add(const int64_t& v, std::pair<int64_t, int64_t> a) override {
    return {a.first + v, a.second + 1};
  }
  double getResult(const std::pair<int64_t, int64_t>& a) override {
    return static_cast<double>(a.first) / static_cast<double>(a.second);
  }
  std::pair<int64_t, int64_t> merge(std::pair<int64_t, int64_t> a,
                                    std::pair<int64_t, int64_t> b) override {
    return {a.first + b.first, a.second + b.second};
  }
};

TEST_P(KeyedStateSuite, AggregatingStateAccumulatesAndMergesNamespaces) {
  auto backend = make();
  auto& mean = getOrCreateAggregatingState<Window>(
      *backend,
      AggregatingStateDescriptor<int64_t, std::pair<int64_t, int64_t>, double>("mean", MeanOf()));
  setKey<int64_t>(*backend, 5);
  mean.setCurrentNamespace({0, 1});
  EXPECT_EQ(mean.get(), std::nullopt);
  mean.add(1);
  mean.add(2);
  EXPECT_DOUBLE_EQ(*mean.get(), 1.5);
  EXPECT_EQ(mean.getInternal(), (std::pair<int64_t, int64_t>{3, 2}));
  mean.setCurrentNamespace({1, 2});
  mean.add(9);
  mean.mergeNamespaces({0, 2}, {{0, 1}, {1, 2}});
  mean.setCurrentNamespace({0, 2});
  EXPECT_DOUBLE_EQ(*mean.get(), 4.0);
  mean.updateInternal({10, 5});
  EXPECT_DOUBLE_EQ(*mean.get(), 2.0);
}

TEST_P(KeyedStateSuite, NamespacesKeepSeparateEntriesPerKey) {
  auto backend = make();
  auto& value = getOrCreateValueState<Window>(*backend, ValueStateDescriptor<int64_t>("v"));
  auto& list = getOrCreateListState<Window>(*backend, ListStateDescriptor<std::string>("l"));
  auto& map = getOrCreateMapState<Window>(*backend, MapStateDescriptor<int64_t, int64_t>("m"));
  for (int64_t key = 0; key < 3; ++key) {
    setKey(*backend, key);
    for (int64_t w = 0; w < 3; ++w) {
      Window win{w * 10, w * 10 + 10};
      value.setCurrentNamespace(win);
      list.setCurrentNamespace(win);
      map.setCurrentNamespace(win);
      value.update(key * 100 + w);
      list.add(std::to_string(key) + "/" + std::to_string(w));
      map.put(w, key);
    }
  }
  for (int64_t key = 0; key < 3; ++key) {
    setKey(*backend, key);
    for (int64_t w = 0; w < 3; ++w) {
      Window win{w * 10, w * 10 + 10};
      value.setCurrentNamespace(win);
      list.setCurrentNamespace(win);
      map.setCurrentNamespace(win);
      EXPECT_EQ(value.value(), key * 100 + w);
      EXPECT_EQ(list.get(),
                (std::vector<std::string>{std::to_string(key) + "/" + std::to_string(w)}));
      EXPECT_EQ(map.entries(), (std::vector<std::pair<int64_t, int64_t>>{{w, key}}));
    }
  }
  // Merging list namespaces appends and clears the sources.
  setKey<int64_t>(*backend, 1);
  list.mergeNamespaces({0, 30}, {{0, 10}, {10, 20}});
  list.setCurrentNamespace({0, 30});
  auto merged = list.get();
  std::sort(merged.begin(), merged.end());
  EXPECT_EQ(merged, (std::vector<std::string>{"1/0", "1/1"}));
  list.setCurrentNamespace({0, 10});
  EXPECT_TRUE(list.get().empty());
}

// Random operations on many keys in every key group, checked against a model.
TEST_P(KeyedStateSuite, ManyKeysAcrossKeyGroupsMatchAModel) {
  auto backend = make();
  auto& value = getOrCreateValueState<VoidNamespace>(*backend, ValueStateDescriptor<int64_t>("v"));
  auto& list = getOrCreateListState<VoidNamespace>(*backend, ListStateDescriptor<int64_t>("l"));
  auto& map =
      getOrCreateMapState<VoidNamespace>(*backend, MapStateDescriptor<int64_t, int64_t>("m"));
  std::map<int64_t, int64_t> values;
  std::map<int64_t, std::vector<int64_t>> lists;
  std::map<int64_t, std::map<int64_t, int64_t>> maps;
  std::mt19937_64 rng(42);
  constexpr int64_t kKeys = 2000;
  for (int i = 0; i < 30000; ++i) {
    const int64_t key = static_cast<int64_t>(rng() % kKeys);
    const int64_t x = static_cast<int64_t>(rng() % 1000);
    setKey(*backend, key);
    switch (rng() % 6) {
      case 0:
        value.update(x);
        values[key] = x;
        break;
      case 1:
        value.clear();
        values.erase(key);
        break;
      case 2:
        list.add(x);
        lists[key].push_back(x);
        break;
      case 3:
        list.clear();
        lists.erase(key);
        break;
      case 4:
        map.put(x % 10, x);
        maps[key][x % 10] = x;
        break;
      case 5:
        map.remove(x % 10);
        maps[key].erase(x % 10);
        if (maps[key].empty()) maps.erase(key);
        break;
    }
  }
  std::set<int32_t> groups;
  for (int64_t key = 0; key < kKeys; ++key) {
    setKey(*backend, key);
    groups.insert(backend->currentKeyGroup());
    auto v = values.find(key);
    EXPECT_EQ(value.value(), v == values.end() ? std::nullopt : std::optional<int64_t>(v->second));
    auto l = lists.find(key);
    EXPECT_EQ(list.get(), l == lists.end() ? std::vector<int64_t>{} : l->second);
    std::map<int64_t, int64_t> got;
    for (const auto& [k, x] : map.entries()) got[k] = x;
    auto m = maps.find(key);
    EXPECT_EQ(got, (m == maps.end() ? std::map<int64_t, int64_t>{} : m->second));
  }
  EXPECT_EQ(groups.size(), 128u);
  // forEachKey lists exactly the keys with a value.
  std::set<int64_t> withValue;
  backend->forEachKey("v", [&](std::string_view k, int32_t group) {
    const int64_t key = decodeTestKey<int64_t>(k);
    EXPECT_EQ(group, assignToKeyGroup(key, 128));
    withValue.insert(key);
  });
  std::set<int64_t> expectedKeys;
  for (const auto& [k, x] : values) expectedKeys.insert(k);
  EXPECT_EQ(withValue, expectedKeys);
}

// The model test again, with a checkpoint after every step: the backend is
// snapshotted and restored into a fresh one, of the other type every second
// step, and each step's result must match the model.
TEST_P(KeyedStateSuite, ModelSurvivesACheckpointAndRestoreAfterEveryStep) {
  std::unique_ptr<KeyedStateBackend> backend = make();
  std::map<int64_t, int64_t> values;
  std::map<int64_t, std::vector<int64_t>> lists;
  std::map<int64_t, std::map<int64_t, int64_t>> maps;
  std::mt19937_64 rng(7);
  constexpr int64_t kKeys = 40;
  auto check = [&](int64_t key) {
    auto& value =
        getOrCreateValueState<VoidNamespace>(*backend, ValueStateDescriptor<int64_t>("v"));
    auto& list = getOrCreateListState<VoidNamespace>(*backend, ListStateDescriptor<int64_t>("l"));
    auto& map =
        getOrCreateMapState<VoidNamespace>(*backend, MapStateDescriptor<int64_t, int64_t>("m"));
    setKey(*backend, key);
    auto v = values.find(key);
    EXPECT_EQ(value.value(), v == values.end() ? std::nullopt : std::optional<int64_t>(v->second))
        << "key " << key;
    auto l = lists.find(key);
    EXPECT_EQ(list.get(), l == lists.end() ? std::vector<int64_t>{} : l->second) << "key " << key;
    std::map<int64_t, int64_t> got;
    for (const auto& [k, x] : map.entries()) got[k] = x;
    auto m = maps.find(key);
    EXPECT_EQ(got, (m == maps.end() ? std::map<int64_t, int64_t>{} : m->second)) << "key " << key;
  };
  for (int step = 0; step < 160; ++step) {
    auto& value =
        getOrCreateValueState<VoidNamespace>(*backend, ValueStateDescriptor<int64_t>("v"));
    auto& list = getOrCreateListState<VoidNamespace>(*backend, ListStateDescriptor<int64_t>("l"));
    auto& map =
        getOrCreateMapState<VoidNamespace>(*backend, MapStateDescriptor<int64_t, int64_t>("m"));
    const int64_t key = static_cast<int64_t>(rng() % kKeys);
    const int64_t x = static_cast<int64_t>(rng() % 1000);
    setKey(*backend, key);
    switch (rng() % 6) {
      case 0:
        value.update(x);
        values[key] = x;
        break;
      case 1:
        value.clear();
        values.erase(key);
        break;
      case 2:
        list.add(x);
        lists[key].push_back(x);
        break;
      case 3:
        list.clear();
        lists.erase(key);
        break;
      case 4:
        map.put(x % 5, x);
        maps[key][x % 5] = x;
        break;
      case 5:
        map.remove(x % 5);
        maps[key].erase(x % 5);
        if (maps[key].empty()) maps.erase(key);
        break;
    }
    const std::string bytes = snapshotBytes(*backend);
    backend->dispose();
    // Every second step into another backend: hashmap cycles through the
    // others, the others go to hashmap (opening RocksDB is what this test
    // spends its time on).
    const BackendConfig& next = step % 2 == 0                      ? GetParam()
                                : GetParam().type != kHashMap.type ? kHashMap
                                                                   : kAllConfigs[1 + step / 2 % 3];
    backend = factory_.make<int64_t>(next);
    CanonicalSnapshotReader reader = readerOf(bytes);
    backend->restore({&reader});
    check(key);
    if (step % 40 == 39) {
      for (int64_t k = 0; k < kKeys; ++k) check(k);
    }
  }
}

// Fills every primitive for keys 0..n-1 and returns the expected contents,
// one line per (state, key), for comparing backends.
std::set<std::string> fill(KeyedStateBackend& backend, int64_t n) {
  auto& value =
      getOrCreateValueState<VoidNamespace>(backend, ValueStateDescriptor<std::string>("value"));
  auto& list = getOrCreateListState<Window>(backend, ListStateDescriptor<int64_t>("list"));
  auto& map =
      getOrCreateMapState<VoidNamespace>(backend, MapStateDescriptor<int64_t, std::string>("map"));
  std::set<std::string> expected;
  for (int64_t key = 0; key < n; ++key) {
    setKey(backend, key);
    value.update("v" + std::to_string(key));
    list.setCurrentNamespace({key, key + 1});
    list.addAll({key, key * 2});
    map.put(key % 4, "m" + std::to_string(key));
    map.put(100, "hundred");
    expected.insert("value " + std::to_string(key) + " v" + std::to_string(key));
    expected.insert("list " + std::to_string(key) + " " + std::to_string(key) + "," +
                    std::to_string(key * 2));
    expected.insert("map " + std::to_string(key) + " " + std::to_string(key % 4) + "=m" +
                    std::to_string(key) + ";100=hundred");
  }
  return expected;
}

// Reads back what fill() wrote, for the keys in `backend`'s range.
std::set<std::string> readBack(KeyedStateBackend& backend, int64_t n) {
  auto& value =
      getOrCreateValueState<VoidNamespace>(backend, ValueStateDescriptor<std::string>("value"));
  auto& list = getOrCreateListState<Window>(backend, ListStateDescriptor<int64_t>("list"));
  auto& map =
      getOrCreateMapState<VoidNamespace>(backend, MapStateDescriptor<int64_t, std::string>("map"));
  std::set<std::string> got;
  for (int64_t key = 0; key < n; ++key) {
    if (!backend.keyGroupRange().contains(assignToKeyGroup(key, 128))) continue;
    setKey(backend, key);
    if (auto v = value.value()) got.insert("value " + std::to_string(key) + " " + *v);
    list.setCurrentNamespace({key, key + 1});
    auto l = list.get();
    if (!l.empty()) {
      std::string line = "list " + std::to_string(key) + " ";
      for (size_t i = 0; i < l.size(); ++i) line += (i ? "," : "") + std::to_string(l[i]);
      got.insert(line);
    }
    std::map<int64_t, std::string> m;
    for (const auto& [k, v] : map.entries()) m[k] = v;
    if (!m.empty()) {
      std::string line = "map " + std::to_string(key) + " ";
      bool first = true;
      for (const auto& [k, v] : m) {
        line += (first ? "" : ";") + std::to_string(k) + "=" + v;
        first = false;
      }
      got.insert(line);
    }
  }
  return got;
}

// Snapshot from the parameter's backend, restore into each backend type.
TEST_P(KeyedStateSuite, SnapshotRestoresIntoAFreshBackendOfEveryType) {
  auto source = make();
  const std::set<std::string> expected = fill(*source, 500);
  const std::string bytes = snapshotBytes(*source);
  for (const BackendConfig& target : kAllConfigs) {
    SCOPED_TRACE(std::string("restored into ") + target.name);
    auto restored = factory_.make<int64_t>(target);
    CanonicalSnapshotReader reader = readerOf(bytes);
    restored->restore({&reader});
    EXPECT_EQ(readBack(*restored, 500), expected);
    // And the restored backend's own snapshot carries the same contents on.
    const std::string again = snapshotBytes(*restored);
    auto third = make();
    CanonicalSnapshotReader reader2 = readerOf(again);
    third->restore({&reader2});
    EXPECT_EQ(readBack(*third, 500), expected);
  }
}

// A snapshot of key groups [0, 128) restored as 2 and as 3 subtasks: each
// subtask holds exactly the keys of its key groups, and together all.
TEST_P(KeyedStateSuite, SnapshotOfAllKeyGroupsRestoresAsTwoAndThreeSubtasks) {
  auto source = make();
  const std::set<std::string> expected = fill(*source, 600);
  const std::string bytes = snapshotBytes(*source);
  for (int parallelism : {2, 3}) {
    std::set<std::string> together;
    for (int subtask = 0; subtask < parallelism; ++subtask) {
      const KeyGroupRange range = computeKeyGroupRangeForOperatorIndex(128, parallelism, subtask);
      auto part = make(range);
      CanonicalSnapshotReader reader = readerOf(bytes);
      part->restore({&reader});
      std::set<int64_t> keys;
      part->forEachKey("value", [&](std::string_view k, int32_t group) {
        EXPECT_TRUE(range.contains(group));
        keys.insert(decodeTestKey<int64_t>(k));
      });
      std::set<int64_t> expectedKeys;
      for (int64_t key = 0; key < 600; ++key) {
        if (computeOperatorIndexForKeyGroup(128, parallelism, assignToKeyGroup(key, 128)) ==
            subtask) {
          expectedKeys.insert(key);
        }
      }
      EXPECT_EQ(keys, expectedKeys) << "subtask " << subtask << " of " << parallelism;
      for (const std::string& line : readBack(*part, 600)) together.insert(line);
    }
    EXPECT_EQ(together, expected) << "parallelism " << parallelism;
  }
}

TEST_P(KeyedStateSuite, IncompatibleSerializerOnRestoreNamesTheStateAndBothSchemas) {
  auto source = make();
  auto& v = getOrCreateValueState<VoidNamespace>(*source, ValueStateDescriptor<int64_t>("counter"));
  setKey<int64_t>(*source, 1);
  v.update(5);
  const std::string bytes = snapshotBytes(*source);
  auto restored = make();
  CanonicalSnapshotReader reader = readerOf(bytes);
  restored->restore({&reader});
  try {
    getOrCreateValueState<VoidNamespace>(*restored, ValueStateDescriptor<std::string>("counter"));
    FAIL() << "expected a StateMigrationException";
  } catch (const StateMigrationException& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("counter"), std::string::npos) << what;
    EXPECT_NE(what.find("int64"), std::string::npos) << what;
    EXPECT_NE(what.find("string"), std::string::npos) << what;
  }
  // The compatible descriptor still reads the value.
  auto ok = make();
  CanonicalSnapshotReader reader2 = readerOf(bytes);
  ok->restore({&reader2});
  auto& again = getOrCreateValueState<VoidNamespace>(*ok, ValueStateDescriptor<int64_t>("counter"));
  setKey<int64_t>(*ok, 1);
  EXPECT_EQ(again.value(), 5);
}

TEST_P(KeyedStateSuite, SnapshotWithAnotherKeyTypeIsRefused) {
  auto source = factory_.make<std::string>(GetParam());
  auto& v = getOrCreateValueState<VoidNamespace>(*source, ValueStateDescriptor<int64_t>("x"));
  setKey<std::string>(*source, "k");
  v.update(1);
  const std::string bytes = snapshotBytes(*source);
  auto restored = make();  // int64 keys
  CanonicalSnapshotReader reader = readerOf(bytes);
  try {
    restored->restore({&reader});
    FAIL() << "expected the key schemas to be refused";
  } catch (const SluiceException& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("string"), std::string::npos) << what;
    EXPECT_NE(what.find("int64"), std::string::npos) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, KeyedStateSuite, ::testing::ValuesIn(kAllConfigs),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace keyed_state_suite_test
}  // namespace sluice
