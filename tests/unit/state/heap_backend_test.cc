// HashMapKeyedStateBackend: the three storage primitives, namespaces, many
// keys over many key groups, snapshot and restore (also across a rescale),
// copy-on-write snapshots written on another thread, entries an operator
// hands to a snapshot, schema checks on restore, and restored state that is
// never registered.
//
// Expected contents are always computed independently of the backend, in
// std::map / std::vector models driven by the same operations.
#include <algorithm>
#include <cstdint>
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

#include <sluice/core/clock.h>
#include <sluice/core/key_hash.h>
#include <sluice/core/serializer.h>
#include <sluice/internal/keyed_state.h>
#include <sluice/internal/keyed_state_handler.h>
#include <sluice/state/keyed_state_backend.h>
#include <sluice/state/snapshot.h>

#include "state/heap_state.h"
#include "unit/state/state_test_util.h"

namespace sluice {

// A window-like namespace, as the window operators use.
struct TestWindow {
  int64_t start = 0;
  int64_t end = 0;
  bool operator==(const TestWindow&) const = default;
};
SLUICE_STRUCT(TestWindow, start, end)

namespace heap_backend_test {
namespace {

using ::testing::HasSubstr;

constexpr KeyGroupRange kAllGroups{0, 127};

std::unique_ptr<HashMapKeyedStateBackend> newBackend(KeyGroupRange range = kAllGroups,
                                                     const Clock* clock = nullptr) {
  KeyedBackendParams params = paramsFor<int64_t>(range);
  if (clock != nullptr) params.clock = clock;
  return std::make_unique<HashMapKeyedStateBackend>(std::move(params));
}

std::shared_ptr<const std::string> snapshotBytes(KeyedStateBackend& backend) {
  std::unique_ptr<KeyedStateSnapshot> snapshot = backend.snapshot();
  std::ostringstream out;
  snapshot->writeTo(out);
  return std::make_shared<const std::string>(out.str());
}

void restoreFrom(KeyedStateBackend& backend, const std::shared_ptr<const std::string>& bytes) {
  CanonicalSnapshotReader reader = CanonicalSnapshotReader::fromBytes(bytes, "test-snapshot");
  backend.restore({&reader});
}

template <class K>
std::set<K> keysOf(KeyedStateBackend& backend, const std::string& state) {
  std::set<K> keys;
  backend.forEachKey(state, [&](std::string_view bytes, int32_t keyGroup) {
    K key = decodeTestKey<K>(bytes);
    EXPECT_EQ(keyGroup, assignToKeyGroup(key, backend.params().maxParallelism));
    EXPECT_TRUE(keys.insert(key).second) << "forEachKey listed a key twice";
  });
  return keys;
}

// The states the tests below use, on one backend.
struct States {
  explicit States(KeyedStateBackend& b)
      : count(getOrCreateValueState<VoidNamespace>(b, ValueStateDescriptor<int64_t>("count"))),
        names(getOrCreateListState<VoidNamespace>(b, ListStateDescriptor<std::string>("names"))),
        tags(getOrCreateMapState<VoidNamespace>(b,
                                                MapStateDescriptor<std::string, int64_t>("tags"))),
        perWindow(
            getOrCreateValueState<TestWindow>(b, ValueStateDescriptor<int64_t>("perWindow"))) {}
  InternalValueState<VoidNamespace, int64_t>& count;
  InternalListState<VoidNamespace, std::string>& names;
  InternalMapState<VoidNamespace, std::string, int64_t>& tags;
  InternalValueState<TestWindow, int64_t>& perWindow;
};

// What States holds for each key, kept by the test.
struct Model {
  std::map<int64_t, int64_t> count;
  std::map<int64_t, std::vector<std::string>> names;
  std::map<int64_t, std::map<std::string, int64_t>> tags;
  std::map<std::pair<int64_t, int64_t>, int64_t> perWindow;  // (key, window start)
};

// Fills States and the model for keys [0, n) with a deterministic mix.
void fill(KeyedStateBackend& backend, States& s, Model& m, int64_t n, int64_t salt) {
  for (int64_t k = 0; k < n; ++k) {
    setKey(backend, k);
    s.count.update(k * 10 + salt);
    m.count[k] = k * 10 + salt;
    if (k % 3 == 0) {
      std::string name = "n" + std::to_string(k) + "-" + std::to_string(salt);
      s.names.add(name);
      s.names.add(name + "b");
      m.names[k].push_back(name);
      m.names[k].push_back(name + "b");
    }
    if (k % 4 == 1) {
      for (int64_t t = 0; t < k % 5 + 1; ++t) {
        std::string tag = "t" + std::to_string(t);
        s.tags.put(tag, k + t + salt);
        m.tags[k][tag] = k + t + salt;
      }
    }
    if (k % 5 == 2) {
      for (int64_t w = 0; w < 2; ++w) {
        s.perWindow.setCurrentNamespace(TestWindow{w * 100, w * 100 + 100});
        s.perWindow.update(k * 1000 + w + salt);
        m.perWindow[{k, w * 100}] = k * 1000 + w + salt;
      }
    }
  }
}

// Checks that the backend holds exactly the model's contents, for keys in
// [0, n) whose key group the backend owns.
void expectContents(KeyedStateBackend& backend, States& s, const Model& m, int64_t n) {
  const KeyGroupRange range = backend.keyGroupRange();
  std::set<int64_t> expectedCountKeys, expectedNameKeys, expectedTagKeys, expectedWindowKeys;
  for (int64_t k = 0; k < n; ++k) {
    if (!range.contains(assignToKeyGroup(k, backend.params().maxParallelism))) continue;
    setKey(backend, k);
    auto c = m.count.find(k);
    EXPECT_EQ(s.count.value(), c == m.count.end() ? std::nullopt : std::optional(c->second))
        << "key " << k;
    if (c != m.count.end()) expectedCountKeys.insert(k);
    auto nm = m.names.find(k);
    EXPECT_EQ(s.names.get(), nm == m.names.end() ? std::vector<std::string>{} : nm->second)
        << "key " << k;
    if (nm != m.names.end()) expectedNameKeys.insert(k);
    auto t = m.tags.find(k);
    std::map<std::string, int64_t> tags;
    for (auto& [tk, tv] : s.tags.entries()) tags.emplace(tk, tv);
    EXPECT_EQ(tags, (t == m.tags.end() ? std::map<std::string, int64_t>{} : t->second))
        << "key " << k;
    if (t != m.tags.end()) expectedTagKeys.insert(k);
    for (int64_t w = 0; w < 2; ++w) {
      s.perWindow.setCurrentNamespace(TestWindow{w * 100, w * 100 + 100});
      auto pw = m.perWindow.find({k, w * 100});
      EXPECT_EQ(s.perWindow.value(),
                pw == m.perWindow.end() ? std::nullopt : std::optional(pw->second))
          << "key " << k << " window " << w;
      if (pw != m.perWindow.end()) expectedWindowKeys.insert(k);
    }
  }
  EXPECT_EQ(keysOf<int64_t>(backend, "count"), expectedCountKeys);
  EXPECT_EQ(keysOf<int64_t>(backend, "names"), expectedNameKeys);
  EXPECT_EQ(keysOf<int64_t>(backend, "tags"), expectedTagKeys);
  EXPECT_EQ(keysOf<int64_t>(backend, "perWindow"), expectedWindowKeys);
}

// ---------------------------------------------------------------------------
// Primitives

TEST(HeapBackendTest, ValueStateGetUpdateClearArePerKey) {
  auto backend = newBackend();
  auto& state = getOrCreateValueState<VoidNamespace>(*backend, ValueStateDescriptor<int64_t>("v"));
  setKey(*backend, int64_t{1});
  EXPECT_EQ(state.value(), std::nullopt);
  state.update(5);
  EXPECT_EQ(state.value(), 5);
  state.update(7);
  EXPECT_EQ(state.value(), 7);
  setKey(*backend, int64_t{2});
  EXPECT_EQ(state.value(), std::nullopt) << "another key sees nothing";
  state.update(9);
  setKey(*backend, int64_t{1});
  EXPECT_EQ(state.value(), 7);
  state.clear();
  EXPECT_EQ(state.value(), std::nullopt);
  state.clear();  // clearing an absent entry is a no-op
  setKey(*backend, int64_t{2});
  EXPECT_EQ(state.value(), 9);
  EXPECT_EQ(keysOf<int64_t>(*backend, "v"), std::set<int64_t>{2});
}

TEST(HeapBackendTest, ValueStateOfStringsWithStringKeys) {
  HashMapKeyedStateBackend backend(paramsFor<std::string>(kAllGroups));
  auto& state =
      getOrCreateValueState<VoidNamespace>(backend, ValueStateDescriptor<std::string>("s"));
  const std::string longKey(100, 'x');  // longer than 8 bytes and than SSO
  setKey(backend, longKey);
  state.update("long");
  setKey(backend, std::string("a"));
  state.update("short");
  setKey(backend, longKey);
  EXPECT_EQ(state.value(), "long");
  setKey(backend, std::string("a"));
  EXPECT_EQ(state.value(), "short");
  EXPECT_EQ(keysOf<std::string>(backend, "s"), (std::set<std::string>{"a", longKey}));
}

TEST(HeapBackendTest, ListStateAddAddAllUpdateGetClear) {
  auto backend = newBackend();
  auto& list = getOrCreateListState<VoidNamespace>(*backend, ListStateDescriptor<int64_t>("l"));
  setKey(*backend, int64_t{3});
  EXPECT_TRUE(list.get().empty());
  list.add(1);
  list.add(2);
  EXPECT_EQ(list.get(), (std::vector<int64_t>{1, 2}));
  list.addAll({3, 4});
  EXPECT_EQ(list.get(), (std::vector<int64_t>{1, 2, 3, 4}));
  list.addAll({});
  EXPECT_EQ(list.get(), (std::vector<int64_t>{1, 2, 3, 4}));
  list.update({9, 8});
  EXPECT_EQ(list.get(), (std::vector<int64_t>{9, 8}));
  setKey(*backend, int64_t{4});
  EXPECT_TRUE(list.get().empty());
  list.addAll({5});
  setKey(*backend, int64_t{3});
  list.update({});
  EXPECT_TRUE(list.get().empty()) << "update with an empty list clears";
  EXPECT_EQ(keysOf<int64_t>(*backend, "l"), std::set<int64_t>{4});
  setKey(*backend, int64_t{4});
  list.clear();
  EXPECT_TRUE(list.get().empty());
  EXPECT_TRUE(keysOf<int64_t>(*backend, "l").empty());
}

TEST(HeapBackendTest, MapStatePutGetRemoveContainsIsEmptyIterate) {
  auto backend = newBackend();
  auto& map =
      getOrCreateMapState<VoidNamespace>(*backend, MapStateDescriptor<std::string, int64_t>("m"));
  setKey(*backend, int64_t{1});
  EXPECT_TRUE(map.isEmpty());
  EXPECT_FALSE(map.contains("a"));
  EXPECT_EQ(map.get("a"), std::nullopt);
  map.put("a", 1);
  map.put("b", 2);
  map.put("a", 3);
  EXPECT_FALSE(map.isEmpty());
  EXPECT_TRUE(map.contains("a"));
  EXPECT_EQ(map.get("a"), 3);
  EXPECT_EQ(map.get("b"), 2);
  std::map<std::string, int64_t> seen;
  for (auto it = map.iterator(); it->hasNext();) {
    auto [k, v] = it->next();
    EXPECT_TRUE(seen.emplace(k, v).second);
  }
  EXPECT_EQ(seen, (std::map<std::string, int64_t>{{"a", 3}, {"b", 2}}));
  setKey(*backend, int64_t{2});
  EXPECT_TRUE(map.isEmpty()) << "another key has its own map";
  map.put("z", 26);
  setKey(*backend, int64_t{1});
  map.remove("a");
  map.remove("absent");
  EXPECT_FALSE(map.contains("a"));
  EXPECT_EQ(map.get("b"), 2);
  map.remove("b");
  EXPECT_TRUE(map.isEmpty());
  EXPECT_EQ(keysOf<int64_t>(*backend, "m"), std::set<int64_t>{2})
      << "a key whose map became empty has no entry";
  setKey(*backend, int64_t{2});
  map.clear();
  EXPECT_TRUE(map.isEmpty());
  EXPECT_EQ(map.get("z"), std::nullopt);
}

TEST(HeapBackendTest, MapIteratorRemovesWhileIterating) {
  auto backend = newBackend();
  auto& map =
      getOrCreateMapState<VoidNamespace>(*backend, MapStateDescriptor<int64_t, int64_t>("m"));
  setKey(*backend, int64_t{7});
  std::map<int64_t, int64_t> expected;
  for (int64_t i = 0; i < 100; ++i) {
    map.put(i, i * i);
    if (i % 3 != 0) expected[i] = i * i;
  }
  int visited = 0;
  for (auto it = map.iterator(); it->hasNext();) {
    auto [k, v] = it->next();
    EXPECT_EQ(v, k * k);
    ++visited;
    if (k % 3 == 0) it->remove();
  }
  EXPECT_EQ(visited, 100);
  std::map<int64_t, int64_t> after;
  for (auto& [k, v] : map.entries()) after.emplace(k, v);
  EXPECT_EQ(after, expected);

  // Removing every entry through the iterator removes the key's entry.
  for (auto it = map.iterator(); it->hasNext();) {
    it->next();
    it->remove();
  }
  EXPECT_TRUE(map.isEmpty());
  EXPECT_TRUE(keysOf<int64_t>(*backend, "m").empty());
}

TEST(HeapBackendTest, MapIteratorMisuseThrows) {
  auto backend = newBackend();
  auto& map =
      getOrCreateMapState<VoidNamespace>(*backend, MapStateDescriptor<int64_t, int64_t>("m"));
  setKey(*backend, int64_t{7});
  map.put(1, 1);
  auto it = map.iterator();
  EXPECT_THROW(it->remove(), SluiceException) << "remove() before next()";
  it->next();
  it->remove();
  EXPECT_THROW(it->remove(), SluiceException) << "remove() twice";
  EXPECT_FALSE(it->hasNext());
  EXPECT_THROW(it->next(), SluiceException);
}

TEST(HeapBackendTest, NamespacesSeparateEntriesOfOneKey) {
  auto backend = newBackend();
  auto& value = getOrCreateValueState<TestWindow>(*backend, ValueStateDescriptor<int64_t>("v"));
  auto& list = getOrCreateListState<TestWindow>(*backend, ListStateDescriptor<int64_t>("l"));
  auto& map =
      getOrCreateMapState<TestWindow>(*backend, MapStateDescriptor<std::string, int64_t>("m"));
  const TestWindow w1{0, 10}, w2{10, 20}, w3{20, 30};
  setKey(*backend, int64_t{42});
  value.setCurrentNamespace(w1);
  value.update(1);
  value.setCurrentNamespace(w2);
  EXPECT_EQ(value.value(), std::nullopt);
  value.update(2);
  value.setCurrentNamespace(w1);
  EXPECT_EQ(value.value(), 1);
  setKey(*backend, int64_t{43});
  EXPECT_EQ(value.value(), std::nullopt) << "the namespace stays, the key changed";
  setKey(*backend, int64_t{42});
  EXPECT_EQ(value.value(), 1);
  value.clear();
  value.setCurrentNamespace(w2);
  EXPECT_EQ(value.value(), 2);

  list.setCurrentNamespace(w1);
  list.addAll({1, 2});
  list.setCurrentNamespace(w2);
  list.add(3);
  list.setCurrentNamespace(w3);
  list.add(4);
  list.mergeNamespaces(w3, {w1, w2});
  list.setCurrentNamespace(w3);
  EXPECT_EQ(list.get(), (std::vector<int64_t>{4, 1, 2, 3}));
  list.setCurrentNamespace(w1);
  EXPECT_TRUE(list.get().empty());
  list.setCurrentNamespace(w2);
  EXPECT_TRUE(list.get().empty());

  map.setCurrentNamespace(w1);
  map.put("a", 1);
  map.setCurrentNamespace(w2);
  EXPECT_FALSE(map.contains("a"));
  map.put("a", 2);
  EXPECT_EQ(map.get("a"), 2);
  map.setCurrentNamespace(w1);
  EXPECT_EQ(map.get("a"), 1);
  EXPECT_EQ(keysOf<int64_t>(*backend, "m"), std::set<int64_t>{42})
      << "forEachKey lists a key once however many namespaces it has";
}

TEST(HeapBackendTest, ManyKeysAcrossAllKeyGroups) {
  auto backend = newBackend();
  States s(*backend);
  Model m;
  fill(*backend, s, m, 10000, 0);
  std::set<int32_t> groups;
  for (int64_t k = 0; k < 10000; ++k) groups.insert(assignToKeyGroup(k, 128));
  ASSERT_EQ(groups.size(), 128u) << "the keys cover every key group";
  expectContents(*backend, s, m, 10000);
  // Change some keys and check again.
  for (int64_t k = 0; k < 10000; k += 7) {
    setKey(*backend, k);
    s.count.clear();
    m.count.erase(k);
  }
  expectContents(*backend, s, m, 10000);
}

TEST(HeapBackendTest, StateObjectsAreSharedByNameAndTypeChecked) {
  auto backend = newBackend();
  auto& a = getOrCreateValueState<VoidNamespace>(*backend, ValueStateDescriptor<int64_t>("x"));
  auto& b = getOrCreateValueState<VoidNamespace>(*backend, ValueStateDescriptor<int64_t>("x"));
  EXPECT_EQ(&a, &b);
  EXPECT_THROW(
      getOrCreateValueState<VoidNamespace>(*backend, ValueStateDescriptor<std::string>("x")),
      SluiceException);
  // Another kind of state under an existing name is refused too.
  EXPECT_THROW(getOrCreateListState<VoidNamespace>(*backend, ListStateDescriptor<int64_t>("x")),
               SluiceException);
  EXPECT_EQ(backend->stateNames(), std::vector<std::string>{"x"});
}

TEST(HeapBackendTest, KeyOutsideTheRangeOrNoKeyThrows) {
  auto backend = newBackend(KeyGroupRange{0, 63});
  auto& state = getOrCreateValueState<VoidNamespace>(*backend, ValueStateDescriptor<int64_t>("v"));
  EXPECT_THROW(state.value(), SluiceException) << "no current key yet";
  int64_t outside = 0;
  while (assignToKeyGroup(outside, 128) <= 63) ++outside;
  EXPECT_THROW(setKey(*backend, outside), SluiceException);
}

TEST(HeapBackendTest, ForEachKeyLetsTheCallbackClearItsKey) {
  auto backend = newBackend();
  auto& state = getOrCreateValueState<VoidNamespace>(*backend, ValueStateDescriptor<int64_t>("v"));
  for (int64_t k = 0; k < 500; ++k) {
    setKey(*backend, k);
    state.update(k);
  }
  int calls = 0;
  backend->forEachKey("v", [&](std::string_view bytes, int32_t keyGroup) {
    const int64_t k = decodeTestKey<int64_t>(bytes);
    backend->setCurrentKey(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), keyGroup);
    EXPECT_EQ(state.value(), k);
    if (k % 2 == 0) state.clear();
    ++calls;
  });
  EXPECT_EQ(calls, 500);
  std::set<int64_t> odd;
  for (int64_t k = 1; k < 500; k += 2) odd.insert(k);
  EXPECT_EQ(keysOf<int64_t>(*backend, "v"), odd);
  EXPECT_TRUE(keysOf<int64_t>(*backend, "unknown").empty());
}

TEST(HeapBackendTest, KeyBytesStoresShortKeysInlineAndLongOnesOnTheHeap) {
  for (size_t n : {0, 1, 8, 15, 16, 17, 100}) {
    std::string text;
    for (size_t i = 0; i < n; ++i) text.push_back(static_cast<char>('a' + i % 26));
    heap::KeyBytes k(text);
    EXPECT_EQ(k.size(), n);
    EXPECT_EQ(k.view(), text);
    EXPECT_EQ(k.isInline(), n <= heap::KeyBytes::kMaxInline) << n;
    EXPECT_TRUE(k == std::string_view(text));
    std::string other = text + "x";
    EXPECT_FALSE(k == std::string_view(other));
    if (n > 0) {
      other = text;
      other[n - 1] = '#';
      EXPECT_FALSE(k == std::string_view(other)) << n;
    }
    heap::KeyBytes copy(k);
    EXPECT_EQ(copy.view(), text);
    heap::KeyBytes moved(std::move(copy));
    EXPECT_EQ(moved.view(), text);
    heap::KeyBytes assigned;
    assigned = moved;
    EXPECT_TRUE(assigned == moved);
    assigned = heap::KeyBytes(std::string_view("z"));
    EXPECT_EQ(assigned.view(), "z");
    EXPECT_EQ(heap::BytesHash{}(moved), heap::BytesHash{}(std::string_view(text)));
  }
}

// eraseAll() against a model: stretches of neighbours, scattered entries and
// runs that wrap around the end of a nearly full table (64 slots, and 1024,
// where runs at the load limit are dozens of slots long); every other key
// must still be found with its value, and no removed one.
TEST(HeapBackendTest, ObjectTableEraseAllKeepsEveryOtherEntryReachable) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 400; ++round) {
    const size_t capacity = round % 4 < 2 ? 64 : 1024;
    heap::ObjectTable table(internal::stateTypeOf<std::string>(), capacity);
    std::map<std::string, std::string> model;
    // From under half full up to the 7/8 load limit.
    const size_t fill = capacity / 2 - 2 + rng() % (capacity * 3 / 8);
    while (model.size() < fill) {
      const std::string key = "k" + std::to_string(rng() % 1000000);
      if (model.count(key) != 0) continue;
      auto [slot, inserted] = table.tryEmplace(key);
      ASSERT_TRUE(inserted);
      const std::string value = "value of " + key + std::string(rng() % 40, '#');
      *static_cast<std::string*>(table.objectOf(slot)) = value;
      model[key] = value;
    }
    ASSERT_EQ(table.capacity(), capacity);
    // Which occupied slots go: a stretch from a random start (through the
    // table's end when it starts late), or every slot with probability 1/3.
    std::vector<size_t> victims;
    const bool stretch = round % 2 == 0;
    const size_t start = rng() % capacity;
    const size_t length = 1 + rng() % (capacity / 3);
    for (size_t i = 0; i < capacity; ++i) {
      if (table.slotAt(i) == nullptr) continue;
      const bool chosen = stretch ? ((i - start) & (capacity - 1)) < length : rng() % 3 == 0;
      if (chosen) victims.push_back(i);
    }
    for (size_t i : victims)
      model.erase(std::string(heap::ObjectTable::keyOf(table.slotAt(i)).view()));
    std::set<std::string> removed;
    for (size_t i : victims)
      removed.insert(std::string(heap::ObjectTable::keyOf(table.slotAt(i)).view()));
    table.eraseAll(victims);

    ASSERT_EQ(table.size(), model.size()) << "round " << round;
    for (const auto& [key, value] : model) {
      char* slot = table.find(key);
      ASSERT_NE(slot, nullptr) << "round " << round << ": " << key << " no longer found";
      EXPECT_EQ(*static_cast<const std::string*>(table.objectOf(slot)), value);
    }
    for (const std::string& key : removed) EXPECT_EQ(table.find(key), nullptr) << key;
    size_t occupied = 0;
    for (size_t i = 0; i < capacity; ++i) occupied += table.slotAt(i) != nullptr ? 1 : 0;
    EXPECT_EQ(occupied, model.size());
    // The table stays usable: the removed keys go back in.
    for (const std::string& key : removed) {
      auto [slot, inserted] = table.tryEmplace(key);
      EXPECT_TRUE(inserted);
      (void)slot;
    }
    EXPECT_EQ(table.size(), model.size() + removed.size());
  }
}

// ---------------------------------------------------------------------------
// Snapshots

// clearState() empties one state at once: its tables while a snapshot still
// has to read them (that snapshot keeps them) and in place otherwise; the
// other states and later writes are unaffected.
TEST(HeapBackendTest, ClearStateEmptiesOneStateAndSparesASnapshotTakenBefore) {
  auto backend = newBackend();
  Model m;
  States s(*backend);
  fill(*backend, s, m, 3000, 5);
  std::unique_ptr<KeyedStateSnapshot> before = backend->snapshot();  // not written yet

  EXPECT_TRUE(backend->clearState("count"));  // tables the snapshot still reads
  Model cleared = m;
  cleared.count.clear();
  expectContents(*backend, s, cleared, 3000);
  EXPECT_TRUE(keysOf<int64_t>(*backend, "count").empty());

  std::ostringstream out;
  before->writeTo(out);
  before.reset();
  auto restored = newBackend();
  restoreFrom(*restored, std::make_shared<const std::string>(out.str()));
  States r(*restored);
  expectContents(*restored, r, m, 3000);

  EXPECT_TRUE(backend->clearState("names"));  // no snapshot: emptied in place
  cleared.names.clear();
  for (int64_t k = 0; k < 3000; k += 7) {
    setKey(*backend, k);
    s.count.update(-k);
    cleared.count[k] = -k;
  }
  expectContents(*backend, s, cleared, 3000);
  auto after = newBackend();
  restoreFrom(*after, snapshotBytes(*backend));
  States a(*after);
  expectContents(*after, a, cleared, 3000);
  EXPECT_TRUE(backend->clearState("no-such-state"));
}

// Entries an operator keeps outside the backend, handed to the next
// snapshot (the sliced window operator's slices): they are written as the
// state's entries after its own, restore like them (also split across a
// rescale), and belong to that one snapshot only. Entries for a state that
// is not registered, or in the wrong number of key groups, are refused.
TEST(HeapBackendTest, EntriesHandedToTheNextSnapshotAreWrittenAsTheStates) {
  auto backend = newBackend();
  ASSERT_TRUE(backend->acceptsSnapshotEntries());
  States s(*backend);
  std::map<int64_t, int64_t> expected;
  for (int64_t k = 0; k < 1000; k += 3) {  // the state's own entries
    setKey(*backend, k);
    s.count.update(k * 10);
    expected[k] = k * 10;
  }
  auto handed = std::make_shared<std::vector<std::vector<uint8_t>>>(128);
  for (int64_t k = 1; k < 1000; k += 3) {  // the operator's, by key group
    DataOutputView out((*handed)[static_cast<size_t>(assignToKeyGroup(k, 128))]);
    const std::vector<uint8_t> key = testKeyBytes(k);
    out.writeString({reinterpret_cast<const char*>(key.data()), key.size()});
    std::vector<uint8_t> value;
    DataOutputView v(value);
    TypeSerializer<int64_t>::serialize(-k, v);
    out.writeString({reinterpret_cast<const char*>(value.data()), value.size()});
    expected[k] = -k;
  }
  backend->addToNextSnapshot("count", handed);
  const auto bytes = snapshotBytes(*backend);

  auto lower = newBackend(KeyGroupRange{0, 63});
  auto upper = newBackend(KeyGroupRange{64, 127});
  restoreFrom(*lower, bytes);
  restoreFrom(*upper, bytes);
  States l(*lower), u(*upper);
  std::map<int64_t, int64_t> restored;
  for (int64_t k = 0; k < 1000; ++k) {
    const bool low = assignToKeyGroup(k, 128) < 64;
    KeyedStateBackend& b = low ? *lower : *upper;
    setKey(b, k);
    if (std::optional<int64_t> v = (low ? l : u).count.value()) restored[k] = *v;
  }
  EXPECT_EQ(restored, expected);

  // The next snapshot has the state's own entries only.
  auto again = newBackend();
  restoreFrom(*again, snapshotBytes(*backend));
  States a(*again);
  EXPECT_EQ(keysOf<int64_t>(*again, "count").size(), 334u);
  setKey(*again, 1);
  EXPECT_FALSE(a.count.value().has_value());

  try {
    backend->addToNextSnapshot("no-such-state", handed);
    ADD_FAILURE() << "entries for an unregistered state were taken";
  } catch (const SluiceException& e) {
    EXPECT_THAT(e.what(), HasSubstr("'no-such-state'"));
    EXPECT_THAT(e.what(), HasSubstr("no such state is registered"));
  }
  try {
    backend->addToNextSnapshot("count", std::make_shared<std::vector<std::vector<uint8_t>>>(3));
    ADD_FAILURE() << "entries in 3 key groups were taken by a backend of 128";
  } catch (const SluiceException& e) {
    EXPECT_THAT(e.what(), HasSubstr("must come in 128 key groups"));
  }
}

// SnapshotEntries, what the table operators hand a snapshot with: a copy
// of the operator's table, made into entries only when the snapshot is
// written, on the thread that writes it, once; the table may change
// meanwhile. A key outside the subtask's key groups fails the write, naming
// its group and the range; so does a source with the wrong number of
// groups, naming the state.
TEST(HeapBackendTest, SnapshotEntriesAreMadeWhereTheSnapshotIsWrittenFromTheirCopy) {
  auto backend = newBackend(KeyGroupRange{0, 63});
  States s(*backend);
  internal::SnapshotEntries<int64_t> entries;
  ASSERT_TRUE(entries.prepare(*backend, KeyGroupAssigner(128)));
  std::vector<int64_t> lower;  // keys of the backend's groups
  for (int64_t k = 0; lower.size() < 200; ++k) {
    if (assignToKeyGroup(k, 128) < 64) lower.push_back(k);
  }
  std::vector<std::pair<int64_t, int64_t>> table;  // the operator's table
  std::map<int64_t, int64_t> expected;
  for (int64_t k : lower) {
    table.emplace_back(k, k * 2);
    expected[k] = k * 2;
  }
  int fills = 0;
  std::thread::id fillThread;
  using Table = std::vector<std::pair<int64_t, int64_t>>;
  entries.handTo<int64_t>(*backend, "count", table, [&](Table& frozen, auto&& add) {
    ++fills;
    fillThread = std::this_thread::get_id();
    for (const auto& [k, v] : frozen) add(k, v);
  });
  for (auto& [k, v] : table) v = -1;  // the table goes on changing
  std::unique_ptr<KeyedStateSnapshot> snapshot = backend->snapshot();
  EXPECT_EQ(fills, 0) << "the entries were made before the snapshot was written";
  auto bytes = std::make_shared<std::string>();
  std::thread writer([&] {
    std::ostringstream out;
    snapshot->writeTo(out);
    *bytes = out.str();
  });
  writer.join();
  EXPECT_EQ(fills, 1);
  EXPECT_NE(fillThread, std::this_thread::get_id());

  auto restored = newBackend(KeyGroupRange{0, 63});
  restoreFrom(*restored, bytes);
  States r(*restored);
  std::map<int64_t, int64_t> got;
  for (int64_t k : lower) {
    setKey(*restored, k);
    if (std::optional<int64_t> v = r.count.value()) got[k] = *v;
  }
  EXPECT_EQ(got, expected);
  EXPECT_EQ(fills, 1);

  // The next snapshot has the state's own entries only.
  auto again = newBackend(KeyGroupRange{0, 63});
  restoreFrom(*again, snapshotBytes(*backend));
  EXPECT_TRUE(keysOf<int64_t>(*again, "count").empty());
  EXPECT_EQ(fills, 1);

  int64_t foreign = 0;
  while (assignToKeyGroup(foreign, 128) < 64) ++foreign;
  entries.handTo<int64_t>(*backend, "count", Table{{foreign, 1}}, [](Table& frozen, auto&& add) {
    for (const auto& [k, v] : frozen) add(k, v);
  });
  try {
    snapshotBytes(*backend);
    ADD_FAILURE() << "a key of key group " << assignToKeyGroup(foreign, 128) << " was written";
  } catch (const SluiceException& e) {
    EXPECT_THAT(e.what(), HasSubstr("key group " + std::to_string(assignToKeyGroup(foreign, 128))));
    EXPECT_THAT(e.what(), HasSubstr("range [0, 63]"));
    EXPECT_THAT(e.what(), HasSubstr("(subtask 0), state 'count'"));
  }

  struct ThreeGroups final : SnapshotEntrySource {
    std::shared_ptr<const std::vector<std::vector<uint8_t>>> entries() override {
      return std::make_shared<std::vector<std::vector<uint8_t>>>(3);
    }
  };
  backend->addToNextSnapshot("count", std::make_shared<ThreeGroups>());
  try {
    snapshotBytes(*backend);
    ADD_FAILURE() << "entries in 3 key groups were written by a backend of 64";
  } catch (const SluiceException& e) {
    EXPECT_THAT(e.what(), HasSubstr("state 'count'"));
    EXPECT_THAT(e.what(), HasSubstr("must come in 64 key groups, got 3"));
  }
}

TEST(HeapBackendTest, SnapshotRestoresIntoAFreshBackendWithIdenticalContents) {
  auto source = newBackend();
  Model m;
  {
    States s(*source);
    fill(*source, s, m, 3000, 5);
  }
  auto bytes = snapshotBytes(*source);
  auto target = newBackend();
  restoreFrom(*target, bytes);
  EXPECT_EQ(target->stateNames(),
            (std::vector<std::string>{"count", "names", "perWindow", "tags"}));
  States t(*target);
  expectContents(*target, t, m, 3000);

  // The restored backend's own snapshot is byte-identical in content: restore
  // it once more and compare.
  auto again = newBackend();
  restoreFrom(*again, snapshotBytes(*target));
  States a(*again);
  expectContents(*again, a, m, 3000);
}

TEST(HeapBackendTest, SnapshotWrittenOnAnotherThreadAfterChangesHasTheOldContents) {
  auto backend = newBackend();
  States s(*backend);
  Model before;
  fill(*backend, s, before, 2000, 1);
  std::unique_ptr<KeyedStateSnapshot> snapshot = backend->snapshot();

  // Change every state after the synchronous part: updates, clears, new keys,
  // list appends and map removals through the iterator.
  Model after = before;
  for (int64_t k = 0; k < 2500; ++k) {
    setKey(*backend, k);
    if (k % 2 == 0) {
      s.count.clear();
      after.count.erase(k);
    } else {
      s.count.update(-k);
      after.count[k] = -k;
    }
    s.names.add("late");
    after.names[k].push_back("late");
    for (auto it = s.tags.iterator(); it->hasNext();) {
      it->next();
      it->remove();
    }
    after.tags.erase(k);
    s.perWindow.setCurrentNamespace(TestWindow{0, 100});
    s.perWindow.update(7);
    after.perWindow[{k, 0}] = 7;
  }
  expectContents(*backend, s, after, 2500);

  std::ostringstream out;
  KeyedSnapshotInfo info;
  std::thread writer([&] { info = snapshot->writeTo(out); });
  // The task goes on modifying while the snapshot is written.
  for (int64_t k = 0; k < 2500; ++k) {
    setKey(*backend, k);
    s.count.update(k + 1);
    after.count[k] = k + 1;
  }
  writer.join();
  EXPECT_EQ(info.sizeBytes, out.str().size());
  EXPECT_EQ(info.keyGroupOffsets.size(), 128u);

  auto restored = newBackend();
  restoreFrom(*restored, std::make_shared<const std::string>(out.str()));
  States r(*restored);
  expectContents(*restored, r, before, 2500);
  // And the live backend kept every change.
  expectContents(*backend, s, after, 2500);
  EXPECT_THROW(snapshot->writeTo(out), SluiceException) << "a snapshot is written once";
}

TEST(HeapBackendTest, SnapshotRestoresIntoTwoAndThreeSubtasksByKeyGroup) {
  auto source = newBackend();
  Model m;
  {
    States s(*source);
    fill(*source, s, m, 4000, 3);
  }
  auto bytes = snapshotBytes(*source);
  for (int parallelism : {2, 3}) {
    std::set<int64_t> allCountKeys;
    for (int i = 0; i < parallelism; ++i) {
      const KeyGroupRange range = computeKeyGroupRangeForOperatorIndex(128, parallelism, i);
      auto sub = newBackend(range);
      restoreFrom(*sub, bytes);
      States s(*sub);
      // Exactly the keys of its key groups, with their contents.
      expectContents(*sub, s, m, 4000);
      std::set<int64_t> expected;
      for (auto& [k, v] : m.count) {
        if (range.contains(assignToKeyGroup(k, 128))) expected.insert(k);
      }
      std::set<int64_t> held = keysOf<int64_t>(*sub, "count");
      EXPECT_EQ(held, expected) << "parallelism " << parallelism << " subtask " << i;
      for (int64_t k : held) EXPECT_TRUE(allCountKeys.insert(k).second) << "key in two subtasks";
      // Its own snapshot covers only its range and restores the same way.
      auto subBytes = snapshotBytes(*sub);
      CanonicalSnapshotReader reader = CanonicalSnapshotReader::fromBytes(subBytes);
      EXPECT_EQ(reader.keyGroupRange(), range);
    }
    EXPECT_EQ(allCountKeys.size(), m.count.size()) << "parallelism " << parallelism;
  }
}

TEST(HeapBackendTest, SubtaskSnapshotsMergeBackIntoOneBackend) {
  auto source = newBackend();
  Model m;
  {
    States s(*source);
    fill(*source, s, m, 1000, 9);
  }
  auto bytes = snapshotBytes(*source);
  std::vector<std::shared_ptr<const std::string>> parts;
  for (int i = 0; i < 3; ++i) {
    auto sub = newBackend(computeKeyGroupRangeForOperatorIndex(128, 3, i));
    restoreFrom(*sub, bytes);
    parts.push_back(snapshotBytes(*sub));  // states unregistered: carried as bytes
  }
  std::vector<CanonicalSnapshotReader> readers;
  for (auto& p : parts) readers.push_back(CanonicalSnapshotReader::fromBytes(p));
  auto merged = newBackend();
  merged->restore({&readers[0], &readers[1], &readers[2]});
  States s(*merged);
  expectContents(*merged, s, m, 1000);
}

TEST(HeapBackendTest, RestoredStateThatIsNeverRegisteredSurvivesTheNextSnapshot) {
  auto source = newBackend();
  Model m;
  {
    States s(*source);
    fill(*source, s, m, 500, 2);
  }
  auto first = newBackend();
  restoreFrom(*first, snapshotBytes(*source));
  // Only "count" is used by the new job; the rest stay restored bytes.
  auto& count =
      getOrCreateValueState<VoidNamespace>(*first, ValueStateDescriptor<int64_t>("count"));
  setKey(*first, int64_t{1});
  count.update(111);
  m.count[1] = 111;
  EXPECT_EQ(first->stateNames(), (std::vector<std::string>{"count", "names", "perWindow", "tags"}));
  // forEachKey also sees keys of a restored, unregistered state.
  std::set<int64_t> nameKeys;
  for (auto& [k, v] : m.names) nameKeys.insert(k);
  EXPECT_EQ(keysOf<int64_t>(*first, "names"), nameKeys);

  auto second = newBackend();
  restoreFrom(*second, snapshotBytes(*first));
  States s(*second);
  expectContents(*second, s, m, 500);
}

TEST(HeapBackendTest, IncompatibleSchemaOnRestoreNamesTheStateAndBothSchemas) {
  auto source = newBackend();
  auto& v = getOrCreateValueState<VoidNamespace>(*source, ValueStateDescriptor<int64_t>("count"));
  setKey(*source, int64_t{1});
  v.update(1);
  auto bytes = snapshotBytes(*source);

  auto target = newBackend();
  restoreFrom(*target, bytes);
  try {
    getOrCreateValueState<VoidNamespace>(*target, ValueStateDescriptor<std::string>("count"));
    FAIL() << "expected StateMigrationException";
  } catch (const StateMigrationException& e) {
    EXPECT_THAT(e.what(), HasSubstr("'count'"));
    EXPECT_THAT(e.what(), HasSubstr("value=int64"));
    EXPECT_THAT(e.what(), HasSubstr("value=string"));
    EXPECT_THAT(e.what(), HasSubstr("fingerprint 0x"));
  }
  // Another kind under the same name is refused as well.
  auto target2 = newBackend();
  restoreFrom(*target2, bytes);
  EXPECT_THROW(getOrCreateListState<VoidNamespace>(*target2, ListStateDescriptor<int64_t>("count")),
               StateMigrationException);
  // And another namespace.
  auto target3 = newBackend();
  restoreFrom(*target3, bytes);
  try {
    getOrCreateValueState<TestWindow>(*target3, ValueStateDescriptor<int64_t>("count"));
    FAIL() << "expected StateMigrationException";
  } catch (const StateMigrationException& e) {
    EXPECT_THAT(e.what(), HasSubstr("namespace=void"));
    EXPECT_THAT(e.what(), HasSubstr("namespace=struct TestWindow{start:int64,end:int64}"));
  }
}

TEST(HeapBackendTest, RestoreChecksKeySchemaAndMaxParallelism) {
  auto source = newBackend();
  getOrCreateValueState<VoidNamespace>(*source, ValueStateDescriptor<int64_t>("v"));
  auto bytes = snapshotBytes(*source);

  HashMapKeyedStateBackend stringKeys(paramsFor<std::string>(kAllGroups));
  try {
    restoreFrom(stringKeys, bytes);
    FAIL() << "expected StateMigrationException";
  } catch (const StateMigrationException& e) {
    EXPECT_THAT(e.what(), HasSubstr("'int64'"));
    EXPECT_THAT(e.what(), HasSubstr("'string'"));
  }
  HashMapKeyedStateBackend otherMax(paramsFor<int64_t>(KeyGroupRange{0, 255}, 256));
  try {
    restoreFrom(otherMax, bytes);
    FAIL() << "expected StateMigrationException";
  } catch (const StateMigrationException& e) {
    EXPECT_THAT(e.what(), HasSubstr("128"));
    EXPECT_THAT(e.what(), HasSubstr("256"));
  }
}

TEST(HeapBackendTest, RestoreAfterRegistrationIsRefused) {
  auto source = newBackend();
  auto bytes = snapshotBytes(*source);
  auto target = newBackend();
  getOrCreateValueState<VoidNamespace>(*target, ValueStateDescriptor<int64_t>("v"));
  EXPECT_THROW(restoreFrom(*target, bytes), SluiceException);
}

// Builds a snapshot with one value state "v" of int64 whose single entry has
// the given value bytes.
std::shared_ptr<const std::string> handWrittenSnapshot(int64_t key, std::string_view value) {
  StateMetaInfo meta;
  meta.name = "v";
  meta.kind = StateKind::kValue;
  meta.namespaceSchema = TypeSerializer<VoidNamespace>::schema();
  meta.valueSchema = TypeSerializer<int64_t>::schema();
  std::ostringstream out;
  CanonicalSnapshotWriter writer(out, "int64", 128, kAllGroups, {meta});
  const std::vector<uint8_t> k = testKeyBytes(key);
  writer.beginKeyGroup(assignToKeyGroup(key, 128));
  writer.writeEntry(0, std::string_view(reinterpret_cast<const char*>(k.data()), k.size()), value);
  writer.finish();
  return std::make_shared<const std::string>(out.str());
}

TEST(HeapBackendTest, HandWrittenCanonicalEntryRestoresAndBadValueBytesThrow) {
  const std::vector<uint8_t> v = testKeyBytes(int64_t{77});
  auto good = handWrittenSnapshot(5, std::string_view(reinterpret_cast<const char*>(v.data()), 8));
  auto target = newBackend();
  restoreFrom(*target, good);
  auto& state = getOrCreateValueState<VoidNamespace>(*target, ValueStateDescriptor<int64_t>("v"));
  setKey(*target, int64_t{5});
  EXPECT_EQ(state.value(), 77);

  auto bad = handWrittenSnapshot(5, "abc");  // 3 bytes for an int64
  auto target2 = newBackend();
  restoreFrom(*target2, bad);
  try {
    getOrCreateValueState<VoidNamespace>(*target2, ValueStateDescriptor<int64_t>("v"));
    FAIL() << "expected SerializationError";
  } catch (const SerializationError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'v'"));
  }
}

TEST(HeapBackendTest, CorruptSnapshotBytesThrowSerializationErrorOnRestore) {
  auto source = newBackend();
  {
    States s(*source);
    Model m;
    fill(*source, s, m, 100, 0);
  }
  std::ostringstream out;
  const KeyedSnapshotInfo info = source->snapshot()->writeTo(out);
  const std::string bytes = out.str();
  std::string truncated = bytes.substr(0, bytes.size() - 30);
  auto target = newBackend();
  EXPECT_THROW(restoreFrom(*target, std::make_shared<const std::string>(truncated)),
               SerializationError);
  // A block whose state index is out of range.
  std::string corrupt = bytes;
  bool corrupted = false;
  // The first non-empty block starts with a u16 state index.
  for (size_t i = 0; i + 1 < info.keyGroupOffsets.size() && !corrupted; ++i) {
    if (info.keyGroupOffsets[i + 1] - info.keyGroupOffsets[i] > 2) {
      corrupt[info.keyGroupOffsets[i]] = 0x33;
      corrupt[info.keyGroupOffsets[i] + 1] = 0x01;
      corrupted = true;
    }
  }
  ASSERT_TRUE(corrupted);
  auto target2 = newBackend();
  EXPECT_THROW(restoreFrom(*target2, std::make_shared<const std::string>(corrupt)),
               SerializationError);
}

TEST(HeapBackendTest, ExpiredEntriesAreLeftOutOfSnapshotsWithFullSnapshotCleanup) {
  ManualClock clock(1000);
  auto backend = newBackend(kAllGroups, &clock);
  ValueStateDescriptor<int64_t> valueDesc("tv");
  valueDesc.enableTimeToLive(
      StateTtlConfig::newBuilder(std::chrono::milliseconds(100)).cleanupFullSnapshot().build());
  ListStateDescriptor<int64_t> listDesc("tl");
  listDesc.enableTimeToLive(
      StateTtlConfig::newBuilder(std::chrono::milliseconds(100)).cleanupFullSnapshot().build());
  MapStateDescriptor<int64_t, int64_t> mapDesc("tm");
  mapDesc.enableTimeToLive(
      StateTtlConfig::newBuilder(std::chrono::milliseconds(100)).cleanupFullSnapshot().build());
  auto& value = getOrCreateValueState<VoidNamespace>(*backend, valueDesc);
  auto& list = getOrCreateListState<VoidNamespace>(*backend, listDesc);
  auto& map = getOrCreateMapState<VoidNamespace>(*backend, mapDesc);
  // Keys 0 and 1 last written at 850 (expired at 1000), 2 and 3 at 950;
  // the first list element and map entry 1 of every key at 850.
  clock.setCurrentTime(850);
  for (int64_t k = 0; k < 4; ++k) {
    setKey(*backend, k);
    list.add(k);
    map.put(1, k);
    if (k < 2) {
      value.update(k);
      list.add(k + 10);
      map.put(2, k);
    }
  }
  clock.setCurrentTime(950);
  for (int64_t k = 2; k < 4; ++k) {
    setKey(*backend, k);
    value.update(k);
    list.add(k + 10);
    map.put(2, k);
  }
  clock.setCurrentTime(1000);
  auto bytes = snapshotBytes(*backend);

  // Restored where the clock reads 1049: what was kept was written at 950
  // and expires at 1050, so the timestamps survived the snapshot.
  ManualClock later(1049);
  auto restored = newBackend(kAllGroups, &later);
  restoreFrom(*restored, bytes);
  auto& rv = getOrCreateValueState<VoidNamespace>(*restored, valueDesc);
  auto& rl = getOrCreateListState<VoidNamespace>(*restored, listDesc);
  auto& rm = getOrCreateMapState<VoidNamespace>(*restored, mapDesc);
  EXPECT_EQ(keysOf<int64_t>(*restored, "tv"), (std::set<int64_t>{2, 3}));
  EXPECT_EQ(keysOf<int64_t>(*restored, "tl"), (std::set<int64_t>{2, 3}));
  EXPECT_EQ(keysOf<int64_t>(*restored, "tm"), (std::set<int64_t>{2, 3}));
  for (int64_t k = 2; k < 4; ++k) {
    setKey(*restored, k);
    EXPECT_EQ(rv.value(), k);
    EXPECT_EQ(rl.get(), (std::vector<int64_t>{k + 10})) << "only the unexpired element";
    EXPECT_FALSE(rm.contains(1));
    EXPECT_EQ(rm.get(2), k);
  }
  later.setCurrentTime(1050);
  for (int64_t k = 2; k < 4; ++k) {
    setKey(*restored, k);
    EXPECT_EQ(rv.value(), std::nullopt) << "written at 950, expired at 1050";
    EXPECT_EQ(rl.get(), std::vector<int64_t>{});
    EXPECT_FALSE(rm.contains(2));
  }

  // Without the cleanup flag everything is kept.
  ValueStateDescriptor<int64_t> keepDesc("keep");
  keepDesc.enableTimeToLive(StateTtlConfig::newBuilder(std::chrono::milliseconds(100)).build());
  ManualClock zero(0);
  auto other = newBackend(kAllGroups, &zero);
  auto& keep = getOrCreateValueState<VoidNamespace>(*other, keepDesc);
  setKey(*other, int64_t{0});
  keep.update(1);
  zero.setCurrentTime(1000);
  auto restoredKeep = newBackend();
  restoreFrom(*restoredKeep, snapshotBytes(*other));
  EXPECT_EQ(keysOf<int64_t>(*restoredKeep, "keep"), std::set<int64_t>{0});
}

// ---------------------------------------------------------------------------
// Backend selection

TEST(HeapBackendTest, ParseStateBackendTypeAcceptsBothNamesInAnyCase) {
  EXPECT_EQ(parseStateBackendType("hashmap"), StateBackendType::kHashMap);
  EXPECT_EQ(parseStateBackendType("HashMap"), StateBackendType::kHashMap);
  EXPECT_EQ(parseStateBackendType("ROCKSDB"), StateBackendType::kRocksDb);
  EXPECT_STREQ(stateBackendTypeName(StateBackendType::kHashMap), "hashmap");
  EXPECT_STREQ(stateBackendTypeName(StateBackendType::kRocksDb), "rocksdb");
  try {
    parseStateBackendType("memory");
    FAIL() << "expected an exception";
  } catch (const SluiceException& e) {
    EXPECT_THAT(e.what(), HasSubstr("state.backend.type"));
    EXPECT_THAT(e.what(), HasSubstr("'memory'"));
    EXPECT_THAT(e.what(), HasSubstr("hashmap"));
    EXPECT_THAT(e.what(), HasSubstr("rocksdb"));
  }
}

TEST(HeapBackendTest, CreateKeyedStateBackendMakesAHashMapBackend) {
  auto backend = createKeyedStateBackend(StateBackendType::kHashMap,
                                         paramsFor<int64_t>(KeyGroupRange{0, 127}));
  EXPECT_STREQ(backend->name(), "hashmap");
  EXPECT_NE(dynamic_cast<HashMapKeyedStateBackend*>(backend.get()), nullptr);
}

TEST(HeapBackendTest, BackendParamsAreValidated) {
  KeyedBackendParams noKeyLength = paramsFor<int64_t>(kAllGroups);
  noKeyLength.keyLength = nullptr;
  EXPECT_THROW(HashMapKeyedStateBackend{noKeyLength}, SluiceException);
  EXPECT_THROW(HashMapKeyedStateBackend{paramsFor<int64_t>(KeyGroupRange{0, 128})},
               SluiceException);
  EXPECT_THROW(HashMapKeyedStateBackend{paramsFor<int64_t>(KeyGroupRange{-1, 5})}, SluiceException);
  EXPECT_THROW(HashMapKeyedStateBackend{paramsFor<int64_t>(KeyGroupRange{0, 5}, 0)},
               SluiceException);
}

}  // namespace
}  // namespace heap_backend_test
}  // namespace sluice
