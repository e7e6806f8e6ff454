// State time-to-live (ttl.h) on both backends, for every update type and
// visibility: expiry at lastAccess + ttl, refresh on write (and read),
// cleanup on access, per-element and per-entry timestamps, and the two
// background strategies: expired entries left out of full snapshots, and
// RocksDB's compaction filter.
//
// Every scenario moves a ManualClock by hand. The expected results are
// spelled out per step from the rules (ttl = 100 ms):
//   an entry written or (with OnReadAndWrite) read at t is visible up to
//   t + 99 and expired from t + 100; an expired entry a read meets is removed
//   and, with ReturnExpiredIfNotCleanedUp, returned by that read only.
// Storage is checked apart from the decorators with forEachKey(), and by
// restoring a snapshot into a fresh backend whose clock is set back, so that
// nothing stored would count as expired.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/core/clock.h>
#include <sluice/core/serializer.h>
#include <sluice/internal/keyed_state.h>
#include <sluice/state/keyed_state_backend.h>
#include <sluice/state/snapshot.h>
#include <sluice/state/state.h>

#include "harness/temp_dir.h"
#include "state/rocksdb_keyed_backend.h"
#include "state/tiered_keyed_backend.h"
#include "unit/state/state_test_util.h"

namespace sluice {
namespace ttl_test {
namespace {

namespace fs = std::filesystem;

using UpdateType = StateTtlConfig::UpdateType;
using Visibility = StateTtlConfig::StateVisibility;
using Ints = std::vector<int64_t>;
using Entries = std::vector<std::pair<std::string, int64_t>>;

constexpr int64_t kTtl = 100;

using test::TempDir;

Entries sorted(Entries entries) {
  std::sort(entries.begin(), entries.end());
  return entries;
}

// Shared by the fixtures: a clock, a scratch directory and backends on them.
class TtlTestBase {
 protected:
  std::unique_ptr<KeyedStateBackend> newBackend(StateBackendType type) {
    KeyedBackendParams params = paramsFor<std::string>(KeyGroupRange{0, 127});
    params.clock = &clock_;
    params.localDir = dir_.path();
    // Tiered: a few key groups' worth, so entries are evicted and reloaded
    // all the time.
    params.tieredMemoryBytes = 24 << 10;
    return createKeyedStateBackend(type, std::move(params));
  }

  void at(int64_t millis) { clock_.setCurrentTime(millis); }

  // The keys (deserialized) that have an entry in `state` in storage.
  static std::set<std::string> storedKeys(KeyedStateBackend& backend, const std::string& state) {
    std::set<std::string> keys;
    backend.forEachKey(state, [&](std::string_view bytes, int32_t) {
      keys.insert(decodeTestKey<std::string>(bytes));
    });
    return keys;
  }

  static std::shared_ptr<const std::string> snapshotBytes(KeyedStateBackend& backend) {
    std::unique_ptr<KeyedStateSnapshot> snapshot = backend.snapshot();
    std::ostringstream out;
    snapshot->writeTo(out);
    return std::make_shared<const std::string>(out.str());
  }

  TempDir dir_;
  ManualClock clock_{0};
};

std::string backendName(StateBackendType type) {
  switch (type) {
    case StateBackendType::kHashMap: return "HashMap";
    case StateBackendType::kRocksDb: return "RocksDb";
    case StateBackendType::kTiered: return "Tiered";
  }
  return "Unknown";
}

// ---------------------------------------------------------------------------
// Access semantics: backend x update type x visibility.

using SemanticsParam = std::tuple<StateBackendType, UpdateType, Visibility>;

class TtlSemanticsTest : public ::testing::TestWithParam<SemanticsParam>, protected TtlTestBase {
 protected:
  void SetUp() override { backend_ = newBackend(std::get<0>(GetParam())); }
  void TearDown() override { backend_->dispose(); }

  bool onRead() const { return std::get<1>(GetParam()) == UpdateType::kOnReadAndWrite; }
  bool returnExpired() const {
    return std::get<2>(GetParam()) == Visibility::kReturnExpiredIfNotCleanedUp;
  }
  StateTtlConfig config() const {
    return StateTtlConfig::newBuilder(std::chrono::milliseconds(kTtl))
        .setUpdateType(std::get<1>(GetParam()))
        .setStateVisibility(std::get<2>(GetParam()))
        .build();
  }
  // What a read of an expired entry that is still stored returns.
  template <class T>
  std::optional<T> expiredRead(T value) const {
    return returnExpired() ? std::optional<T>(std::move(value)) : std::nullopt;
  }
  template <class V>
  V expiredRead(V expiredToo, V unexpiredOnly) const {
    return returnExpired() ? expiredToo : unexpiredOnly;
  }

  void key(const std::string& k) { setKey(*backend_, k); }
  std::set<std::string> storedKeys(const std::string& state) {
    return TtlTestBase::storedKeys(*backend_, state);
  }

  std::unique_ptr<KeyedStateBackend> backend_;
};

TEST_P(TtlSemanticsTest, ValueExpiresAtLastAccessPlusTtl) {
  ValueStateDescriptor<int64_t> desc("value");
  desc.enableTimeToLive(config());
  InternalValueState<VoidNamespace, int64_t>& state =
      getOrCreateValueState<VoidNamespace>(*backend_, desc);

  key("a");
  EXPECT_EQ(state.value(), std::nullopt);
  at(1000);
  state.update(1);
  at(1099);
  EXPECT_EQ(state.value(), 1);  // OnReadAndWrite: now last accessed at 1099
  at(1100);
  if (onRead()) {
    EXPECT_EQ(state.value(), 1);  // -> 1100
    at(1199);
    EXPECT_EQ(state.value(), 1);  // -> 1199
    at(1299);
  }
  // Expired exactly now: returned at most once, and gone from storage.
  EXPECT_EQ(state.value(), expiredRead<int64_t>(1));
  EXPECT_EQ(state.value(), std::nullopt);
  EXPECT_EQ(storedKeys("value"), std::set<std::string>{});

  // A new value after expiry starts a new life.
  const int64_t t = clock_.currentTimeMillis();
  state.update(2);
  at(t + 99);
  EXPECT_EQ(state.value(), 2);
}

TEST_P(TtlSemanticsTest, ValueWriteRefreshesUnderBothUpdateTypes) {
  ValueStateDescriptor<int64_t> desc("value");
  desc.enableTimeToLive(config());
  auto& state = getOrCreateValueState<VoidNamespace>(*backend_, desc);

  key("a");
  at(1000);
  state.update(2);
  at(1060);
  state.update(3);
  at(1159);  // 1000 + 100 has passed, but the write at 1060 counts
  EXPECT_EQ(state.value(), 3);
  at(1160);
  if (onRead()) {
    EXPECT_EQ(state.value(), 3);  // read at 1159; now read at 1160
    at(1260);
  }
  EXPECT_EQ(state.value(), expiredRead<int64_t>(3));
  EXPECT_EQ(state.value(), std::nullopt);
}

TEST_P(TtlSemanticsTest, ValueTimestampsArePerKey) {
  ValueStateDescriptor<int64_t> desc("value");
  desc.enableTimeToLive(config());
  auto& state = getOrCreateValueState<VoidNamespace>(*backend_, desc);

  at(1000);
  key("early");
  state.update(5);
  at(1050);
  key("late");
  state.update(6);
  key("gone");
  state.update(7);
  state.clear();
  EXPECT_EQ(state.value(), std::nullopt);
  EXPECT_EQ(storedKeys("value"), (std::set<std::string>{"early", "late"}));

  at(1100);
  key("late");
  EXPECT_EQ(state.value(), 6);
  key("early");
  EXPECT_EQ(state.value(), expiredRead<int64_t>(5));
  EXPECT_EQ(state.value(), std::nullopt);
  EXPECT_EQ(storedKeys("value"), std::set<std::string>{"late"});
}

TEST_P(TtlSemanticsTest, ListElementsExpireOneByOne) {
  ListStateDescriptor<int64_t> desc("list");
  desc.enableTimeToLive(config());
  InternalListState<VoidNamespace, int64_t>& list =
      getOrCreateListState<VoidNamespace>(*backend_, desc);

  key("a");
  EXPECT_EQ(list.get(), Ints{});
  at(1000);
  list.add(1);
  at(1050);
  list.addAll({2, 3});
  list.addAll({});
  at(1060);
  EXPECT_EQ(list.get(), (Ints{1, 2, 3}));  // OnReadAndWrite: all -> 1060
  at(1100);
  if (onRead()) {
    EXPECT_EQ(list.get(), (Ints{1, 2, 3}));  // all -> 1100
    at(1150);
    list.add(4);
    at(1200);  // 1, 2, 3 expired now, 4 not
    EXPECT_EQ(list.get(), expiredRead(Ints{1, 2, 3, 4}, Ints{4}));
    EXPECT_EQ(list.get(), Ints{4});  // the expired ones were dropped; 4 -> 1200
    at(1299);
    EXPECT_EQ(list.get(), Ints{4});  // 4 -> 1299
    at(1399);
    EXPECT_EQ(list.get(), expiredRead(Ints{4}, Ints{}));
  } else {
    EXPECT_EQ(list.get(), expiredRead(Ints{1, 2, 3}, Ints{2, 3}));
    EXPECT_EQ(list.get(), (Ints{2, 3}));  // 1 was dropped from storage
    at(1150);
    EXPECT_EQ(list.get(), expiredRead(Ints{2, 3}, Ints{}));
  }
  EXPECT_EQ(list.get(), Ints{});
  EXPECT_EQ(storedKeys("list"), std::set<std::string>{});
}

TEST_P(TtlSemanticsTest, ListUpdateStampsEveryElement) {
  ListStateDescriptor<int64_t> desc("list");
  desc.enableTimeToLive(config());
  auto& list = getOrCreateListState<VoidNamespace>(*backend_, desc);

  key("a");
  at(1000);
  list.add(6);
  at(1040);
  list.update({7, 8});  // replaces 6, stamps 7 and 8 with 1040
  at(1070);
  list.add(9);
  at(1139);
  list.add(10);
  at(1140);  // 7, 8 expired; 9, 10 not
  EXPECT_EQ(list.get(), expiredRead(Ints{7, 8, 9, 10}, Ints{9, 10}));
  EXPECT_EQ(list.get(), (Ints{9, 10}));

  list.update({});
  EXPECT_EQ(list.get(), Ints{});
  EXPECT_EQ(storedKeys("list"), std::set<std::string>{});
}

TEST_P(TtlSemanticsTest, ListMergeKeepsEachElementsTimestamp) {
  ListStateDescriptor<int64_t> desc("merged");
  desc.enableTimeToLive(config());
  InternalListState<int64_t, int64_t>& list = getOrCreateListState<int64_t>(*backend_, desc);

  key("a");
  at(1000);
  list.setCurrentNamespace(1);
  list.add(10);
  at(1050);
  list.setCurrentNamespace(2);
  list.addAll({20, 21});
  at(1080);
  list.mergeNamespaces(3, {1, 2});  // neither restamps (1080) nor drops anything

  at(1100);
  list.setCurrentNamespace(1);
  EXPECT_EQ(list.get(), Ints{});
  list.setCurrentNamespace(2);
  EXPECT_EQ(list.get(), Ints{});
  list.setCurrentNamespace(3);
  EXPECT_EQ(list.get(), expiredRead(Ints{10, 20, 21}, Ints{20, 21}));
  at(1150);
  if (onRead()) {
    EXPECT_EQ(list.get(), (Ints{20, 21}));  // read at 1100
  } else {
    EXPECT_EQ(list.get(), expiredRead(Ints{20, 21}, Ints{}));
    EXPECT_EQ(list.get(), Ints{});
  }
}

TEST_P(TtlSemanticsTest, MapEntriesExpireOneByOne) {
  MapStateDescriptor<std::string, int64_t> desc("map");
  desc.enableTimeToLive(config());
  InternalMapState<VoidNamespace, std::string, int64_t>& map =
      getOrCreateMapState<VoidNamespace>(*backend_, desc);

  key("a");
  EXPECT_TRUE(map.isEmpty());
  EXPECT_FALSE(map.contains("x"));
  at(1000);
  map.put("x", 1);
  at(1050);
  map.put("y", 2);
  map.put("z", 3);
  at(1060);
  EXPECT_EQ(map.get("x"), 1);  // OnReadAndWrite: x -> 1060
  at(1100);
  if (onRead()) {
    EXPECT_EQ(sorted(map.entries()), (Entries{{"x", 1}, {"y", 2}, {"z", 3}}));  // all -> 1100
    at(1199);
    EXPECT_TRUE(map.contains("y"));  // y -> 1199
    at(1200);                        // x, z expired now, y not
    EXPECT_EQ(sorted(map.entries()),
              expiredRead(Entries{{"x", 1}, {"y", 2}, {"z", 3}}, Entries{{"y", 2}}));
    EXPECT_EQ(map.entries(), (Entries{{"y", 2}}));  // y -> 1200
    EXPECT_EQ(map.get("x"), std::nullopt);
    at(1300);
    EXPECT_EQ(map.isEmpty(), !returnExpired());
    EXPECT_EQ(map.contains("y"), returnExpired());  // returned once ...
  } else {
    EXPECT_EQ(map.get("x"), expiredRead<int64_t>(1));
    EXPECT_EQ(map.get("x"), std::nullopt);
    EXPECT_FALSE(map.contains("x"));
    EXPECT_EQ(sorted(map.entries()), (Entries{{"y", 2}, {"z", 3}}));
    at(1150);
    EXPECT_EQ(map.isEmpty(), !returnExpired());
    EXPECT_EQ(sorted(map.entries()), expiredRead(Entries{{"y", 2}, {"z", 3}}, Entries{}));
  }
  // ... and every expired entry is gone from storage once read.
  EXPECT_FALSE(map.contains("y"));
  EXPECT_EQ(map.entries(), Entries{});
  EXPECT_TRUE(map.isEmpty());
  EXPECT_EQ(storedKeys("map"), std::set<std::string>{});
}

TEST_P(TtlSemanticsTest, MapIteratorSkipsAndRemoves) {
  MapStateDescriptor<std::string, int64_t> desc("map");
  desc.enableTimeToLive(config());
  auto& map = getOrCreateMapState<VoidNamespace>(*backend_, desc);

  key("a");
  at(1000);
  for (int64_t i = 0; i < 5; ++i) map.put("k" + std::to_string(i), i);
  at(1050);
  for (int64_t i = 5; i < 10; ++i) map.put("k" + std::to_string(i), i);

  at(1100);  // k0..k4 expired
  Entries seen;
  auto it = map.iterator();
  EXPECT_THROW(it->remove(), SluiceException);
  while (it->hasNext()) {
    std::pair<std::string, int64_t> e = it->next();
    seen.push_back(e);
    // Even values: look ahead before removing, so the removal cannot go
    // through the wrapped iterator's current entry.
    if (e.second % 2 == 0) it->hasNext();
    // 2 is expired: already removed when returned; removing it is a no-op.
    if (e.second == 2 || e.second == 6 || e.second == 7) it->remove();
  }
  EXPECT_THROW(it->next(), SluiceException);
  it.reset();

  Entries fresh;
  for (int64_t i = 5; i < 10; ++i) fresh.emplace_back("k" + std::to_string(i), i);
  Entries all;
  for (int64_t i = 0; i < 10; ++i) all.emplace_back("k" + std::to_string(i), i);
  EXPECT_EQ(sorted(seen), expiredRead(all, fresh));

  // Storage, seen with the clock set back so nothing counts as expired: the
  // expired entries went as the iterator passed them, 6 and 7 by remove().
  at(1000);
  EXPECT_EQ(sorted(map.entries()), (Entries{{"k5", 5}, {"k8", 8}, {"k9", 9}}));
}

TEST_P(TtlSemanticsTest, ReducingStateCombinesOnlyWhatAReadWouldSee) {
  ReducingStateDescriptor<int64_t> desc("sum",
                                        [](const int64_t& a, const int64_t& b) { return a + b; });
  desc.enableTimeToLive(config());
  InternalReducingState<VoidNamespace, int64_t>& sum =
      getOrCreateReducingState<VoidNamespace>(*backend_, desc);

  key("a");
  EXPECT_EQ(sum.get(), std::nullopt);
  at(1000);
  sum.add(1);
  at(1050);
  sum.add(2);  // written at 1050
  at(1149);
  EXPECT_EQ(sum.get(), 3);  // OnReadAndWrite: -> 1149
  at(1150);
  if (onRead()) {
    EXPECT_EQ(sum.get(), 3);
    at(1250);
  }
  EXPECT_EQ(sum.get(), expiredRead<int64_t>(3));
  EXPECT_EQ(sum.get(), std::nullopt);

  // add() onto an expired value still stored: a visible (returned) value is
  // combined, an invisible one replaced.
  key("b");
  at(2000);
  sum.add(10);
  at(2100);
  sum.add(5);
  EXPECT_EQ(sum.get(), returnExpired() ? 15 : 5);
  at(2199);
  EXPECT_EQ(sum.get(), returnExpired() ? 15 : 5);  // the add at 2100 wrote it
}

class SumToText : public AggregateFunction<int64_t, int64_t, std::string> {
 public:
  int64_t createAccumulator() override { return 0; }
  int64_t add(const int64_t& value, int64_t acc) override { return acc + value; }
  std::string getResult(const int64_t& acc) override { return "sum=" + std::to_string(acc); }
  int64_t merge(int64_t a, int64_t b) override { return a + b; }
};

TEST_P(TtlSemanticsTest, AggregatingStateCombinesOnlyWhatAReadWouldSee) {
  AggregatingStateDescriptor<int64_t, int64_t, std::string> desc("agg", SumToText());
  desc.enableTimeToLive(config());
  InternalAggregatingState<VoidNamespace, int64_t, int64_t, std::string>& agg =
      getOrCreateAggregatingState<VoidNamespace>(*backend_, desc);

  key("a");
  EXPECT_EQ(agg.get(), std::nullopt);
  at(1000);
  agg.add(4);
  at(1050);
  agg.add(3);
  at(1149);
  EXPECT_EQ(agg.get(), "sum=7");  // OnReadAndWrite: -> 1149
  at(1150);
  if (onRead()) {
    EXPECT_EQ(agg.getInternal(), 7);  // -> 1150
    at(1250);
  }
  EXPECT_EQ(agg.get(), expiredRead<std::string>("sum=7"));
  EXPECT_EQ(agg.get(), std::nullopt);
  EXPECT_EQ(agg.getInternal(), std::nullopt);

  key("b");
  at(2000);
  agg.updateInternal(10);
  at(2100);
  agg.add(5);
  EXPECT_EQ(agg.get(), returnExpired() ? "sum=15" : "sum=5");
  at(2199);
  EXPECT_EQ(agg.getInternal(), returnExpired() ? 15 : 5);
  EXPECT_EQ(storedKeys("agg"), (std::set<std::string>{"b"}));
}

// A reference model of the rules, kept deliberately plain: a stamp per
// stored value, time only moving forward, and every access spelled out.
class TtlModel {
 public:
  TtlModel(bool onRead, bool returnExpired) : onRead_(onRead), returnExpired_(returnExpired) {}

  std::optional<int64_t> valueRead(const std::string& key, int64_t now) {
    auto it = values_.find(key);
    if (it == values_.end()) return std::nullopt;
    const Stamped s = it->second;
    if (dead(s, now)) {
      values_.erase(it);
      return returnExpired_ ? std::optional<int64_t>(s.value) : std::nullopt;
    }
    if (onRead_) it->second.ts = now;
    return s.value;
  }
  void valueUpdate(const std::string& key, int64_t v, int64_t now) { values_[key] = {v, now}; }
  void valueClear(const std::string& key) { values_.erase(key); }

  Ints listGet(const std::string& key, int64_t now) {
    Ints out;
    auto it = lists_.find(key);
    if (it == lists_.end()) return out;
    std::vector<Stamped> alive;
    for (const Stamped& s : it->second) {
      if (!dead(s, now)) alive.push_back({s.value, onRead_ ? now : s.ts});
      if (!dead(s, now) || returnExpired_) out.push_back(s.value);
    }
    if (alive.empty()) {
      lists_.erase(it);
    } else {
      it->second = alive;
    }
    return out;
  }
  void listAdd(const std::string& key, const Ints& vs, int64_t now) {
    for (int64_t v : vs) lists_[key].push_back({v, now});
  }
  void listUpdate(const std::string& key, const Ints& vs, int64_t now) {
    lists_.erase(key);
    listAdd(key, vs, now);
  }

  std::optional<int64_t> mapGet(const std::string& key, const std::string& uk, int64_t now) {
    auto it = maps_.find(key);
    if (it == maps_.end() || !it->second.contains(uk)) return std::nullopt;
    Stamped& s = it->second[uk];
    const Stamped copy = s;
    if (dead(copy, now)) {
      mapRemove(key, uk);
      return returnExpired_ ? std::optional<int64_t>(copy.value) : std::nullopt;
    }
    if (onRead_) s.ts = now;
    return copy.value;
  }
  void mapPut(const std::string& key, const std::string& uk, int64_t v, int64_t now) {
    maps_[key][uk] = {v, now};
  }
  void mapRemove(const std::string& key, const std::string& uk) {
    auto it = maps_.find(key);
    if (it == maps_.end()) return;
    it->second.erase(uk);
    if (it->second.empty()) maps_.erase(it);
  }
  Entries mapEntries(const std::string& key, int64_t now) {
    Entries out;
    auto it = maps_.find(key);
    if (it == maps_.end()) return out;
    std::map<std::string, Stamped> alive;
    for (const auto& [uk, s] : it->second) {
      if (!dead(s, now)) alive[uk] = {s.value, onRead_ ? now : s.ts};
      if (!dead(s, now) || returnExpired_) out.emplace_back(uk, s.value);
    }
    if (alive.empty()) {
      maps_.erase(it);
    } else {
      it->second = alive;
    }
    return out;
  }
  bool mapIsEmpty(const std::string& key, int64_t now) {
    auto it = maps_.find(key);
    if (it == maps_.end()) return true;
    if (returnExpired_) return false;
    std::erase_if(it->second, [&](const auto& e) { return dead(e.second, now); });
    if (!it->second.empty()) return false;
    maps_.erase(it);
    return true;
  }

  std::set<std::string> valueKeys() const { return keysOf(values_); }
  std::set<std::string> listKeys() const { return keysOf(lists_); }
  std::set<std::string> mapKeys() const { return keysOf(maps_); }

 private:
  struct Stamped {
    int64_t value = 0;
    int64_t ts = 0;
  };
  static bool dead(const Stamped& s, int64_t now) { return now - s.ts >= kTtl; }
  template <class M>
  static std::set<std::string> keysOf(const M& m) {
    std::set<std::string> out;
    for (const auto& [k, v] : m) out.insert(k);
    return out;
  }

  bool onRead_;
  bool returnExpired_;
  std::map<std::string, Stamped> values_;
  std::map<std::string, std::vector<Stamped>> lists_;
  std::map<std::string, std::map<std::string, Stamped>> maps_;
};

TEST_P(TtlSemanticsTest, RandomOperationsMatchTheModel) {
  ValueStateDescriptor<int64_t> valueDesc("value");
  ListStateDescriptor<int64_t> listDesc("list");
  MapStateDescriptor<std::string, int64_t> mapDesc("map");
  valueDesc.enableTimeToLive(config());
  listDesc.enableTimeToLive(config());
  mapDesc.enableTimeToLive(config());
  auto& value = getOrCreateValueState<VoidNamespace>(*backend_, valueDesc);
  auto& list = getOrCreateListState<VoidNamespace>(*backend_, listDesc);
  auto& map = getOrCreateMapState<VoidNamespace>(*backend_, mapDesc);
  TtlModel model(onRead(), returnExpired());

  std::mt19937 rng(12345);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  int64_t now = 1000;
  at(now);
  for (int step = 0; step < 2000; ++step) {
    SCOPED_TRACE("step " + std::to_string(step) + " at " + std::to_string(now));
    if (pick(3) == 0) {
      now += pick(4) == 0 ? kTtl : pick(40);  // sometimes exactly one ttl
      at(now);
    }
    const std::string k = "key" + std::to_string(pick(3));
    const std::string uk = "u" + std::to_string(pick(4));
    const int64_t v = pick(1000);
    key(k);
    switch (pick(14)) {
      case 0: EXPECT_EQ(value.value(), model.valueRead(k, now)); break;
      case 1:
        value.update(v);
        model.valueUpdate(k, v, now);
        break;
      case 2:
        value.clear();
        model.valueClear(k);
        break;
      case 3: EXPECT_EQ(list.get(), model.listGet(k, now)); break;
      case 4:
        list.add(v);
        model.listAdd(k, {v}, now);
        break;
      case 5:
        list.addAll({v, v + 1});
        model.listAdd(k, {v, v + 1}, now);
        break;
      case 6: {
        const Ints values(static_cast<size_t>(pick(3)), v);  // empty clears
        list.update(values);
        model.listUpdate(k, values, now);
        break;
      }
      case 7: EXPECT_EQ(map.get(uk), model.mapGet(k, uk, now)); break;
      case 8: EXPECT_EQ(map.contains(uk), model.mapGet(k, uk, now).has_value()); break;
      case 9:
      case 10:
        map.put(uk, v);
        model.mapPut(k, uk, v, now);
        break;
      case 11:
        map.remove(uk);
        model.mapRemove(k, uk);
        break;
      case 12: EXPECT_EQ(sorted(map.entries()), model.mapEntries(k, now)); break;
      case 13: EXPECT_EQ(map.isEmpty(), model.mapIsEmpty(k, now)); break;
    }
  }
  EXPECT_EQ(storedKeys("value"), model.valueKeys());
  EXPECT_EQ(storedKeys("list"), model.listKeys());
  EXPECT_EQ(storedKeys("map"), model.mapKeys());
}

std::string semanticsName(const ::testing::TestParamInfo<SemanticsParam>& info) {
  const auto& [backend, update, visibility] = info.param;
  return backendName(backend) +
         (update == UpdateType::kOnCreateAndWrite ? "_OnCreateAndWrite" : "_OnReadAndWrite") +
         (visibility == Visibility::kNeverReturnExpired ? "_NeverReturnExpired"
                                                        : "_ReturnExpiredIfNotCleanedUp");
}

INSTANTIATE_TEST_SUITE_P(
    AllModes, TtlSemanticsTest,
    ::testing::Combine(::testing::Values(StateBackendType::kHashMap, StateBackendType::kRocksDb,
                                         StateBackendType::kTiered),
                       ::testing::Values(UpdateType::kOnCreateAndWrite,
                                         UpdateType::kOnReadAndWrite),
                       ::testing::Values(Visibility::kNeverReturnExpired,
                                         Visibility::kReturnExpiredIfNotCleanedUp)),
    semanticsName);

// ---------------------------------------------------------------------------
// Background cleanup: full snapshots and RocksDB compaction.
//
// Both scenarios write the same entries: key "old" only at 1000, key "new"
// at 1000 and 1080; at 1100 everything written at 1000 has expired. What
// survives is then read from a backend restored from a snapshot with the
// clock set back to 1000, where no stored entry counts as expired.

class TtlCleanupBase : public ::testing::Test, protected TtlTestBase {
 protected:
  struct States {
    InternalValueState<VoidNamespace, int64_t>* value;
    InternalListState<VoidNamespace, int64_t>* list;
    InternalMapState<VoidNamespace, std::string, int64_t>* map;
  };

  // `configure` finishes the builder (kOnCreateAndWrite, kNeverReturnExpired).
  template <class F>
  void makeDescriptors(F configure) {
    StateTtlConfig::Builder builder = StateTtlConfig::newBuilder(std::chrono::milliseconds(kTtl));
    configure(builder);
    StateTtlConfig config = builder.build();
    valueDesc_.enableTimeToLive(config);
    listDesc_.enableTimeToLive(config);
    mapDesc_.enableTimeToLive(config);
  }

  States statesOf(KeyedStateBackend& backend) {
    return States{&getOrCreateValueState<VoidNamespace>(backend, valueDesc_),
                  &getOrCreateListState<VoidNamespace>(backend, listDesc_),
                  &getOrCreateMapState<VoidNamespace>(backend, mapDesc_)};
  }

  void writeEntries(KeyedStateBackend& backend) {
    States s = statesOf(backend);
    at(1000);
    setKey(backend, std::string("old"));
    s.value->update(1);
    s.list->addAll({1, 2});
    s.map->put("x", 1);
    setKey(backend, std::string("new"));
    s.value->update(2);
    s.list->add(3);
    s.map->put("x", 3);
    at(1080);
    s.value->update(4);
    s.list->add(4);
    s.map->put("y", 4);
    at(1100);
  }

  // What the restored `backend` holds for "old" and "new", read at 1000.
  struct Stored {
    std::optional<int64_t> oldValue, newValue;
    Ints oldList, newList;
    Entries oldMap, newMap;
    std::set<std::string> valueKeys, listKeys, mapKeys;
  };
  Stored readStored(KeyedStateBackend& backend) {
    at(1000);
    States s = statesOf(backend);
    Stored out;
    setKey(backend, std::string("old"));
    out.oldValue = s.value->value();
    out.oldList = s.list->get();
    out.oldMap = sorted(s.map->entries());
    setKey(backend, std::string("new"));
    out.newValue = s.value->value();
    out.newList = s.list->get();
    out.newMap = sorted(s.map->entries());
    out.valueKeys = storedKeys(backend, "value");
    out.listKeys = storedKeys(backend, "list");
    out.mapKeys = storedKeys(backend, "map");
    return out;
  }

  // Restores `bytes` into a fresh backend of `type` and reads it.
  Stored restoreAndRead(StateBackendType type, std::shared_ptr<const std::string> bytes) {
    CanonicalSnapshotReader reader = CanonicalSnapshotReader::fromBytes(std::move(bytes));
    std::unique_ptr<KeyedStateBackend> restored = newBackend(type);
    restored->restore({&reader});
    Stored out = readStored(*restored);
    restored->dispose();
    return out;
  }

  static void expectAllStored(const Stored& s) {
    EXPECT_EQ(s.oldValue, 1);
    EXPECT_EQ(s.newValue, 4);
    EXPECT_EQ(s.oldList, (Ints{1, 2}));
    EXPECT_EQ(s.newList, (Ints{3, 4}));
    EXPECT_EQ(s.oldMap, (Entries{{"x", 1}}));
    EXPECT_EQ(s.newMap, (Entries{{"x", 3}, {"y", 4}}));
    const std::set<std::string> both{"new", "old"};
    EXPECT_EQ(s.valueKeys, both);
    EXPECT_EQ(s.listKeys, both);
    EXPECT_EQ(s.mapKeys, both);
  }
  static void expectOnlyUnexpiredStored(const Stored& s) {
    EXPECT_EQ(s.oldValue, std::nullopt);
    EXPECT_EQ(s.newValue, 4);
    EXPECT_EQ(s.oldList, Ints{});
    EXPECT_EQ(s.newList, Ints{4});
    EXPECT_EQ(s.oldMap, Entries{});
    EXPECT_EQ(s.newMap, (Entries{{"y", 4}}));
    const std::set<std::string> onlyNew{"new"};
    EXPECT_EQ(s.valueKeys, onlyNew);
    EXPECT_EQ(s.listKeys, onlyNew);
    EXPECT_EQ(s.mapKeys, onlyNew);
  }

  ValueStateDescriptor<int64_t> valueDesc_{"value"};
  ListStateDescriptor<int64_t> listDesc_{"list"};
  MapStateDescriptor<std::string, int64_t> mapDesc_{"map"};
};

class TtlCleanupTest : public TtlCleanupBase,
                       public ::testing::WithParamInterface<StateBackendType> {};

TEST_P(TtlCleanupTest, FullSnapshotLeavesExpiredEntriesOut) {
  makeDescriptors(
      [](StateTtlConfig::Builder& b) { b.cleanupFullSnapshot().disableCleanupInBackground(); });
  std::unique_ptr<KeyedStateBackend> backend = newBackend(GetParam());
  writeEntries(*backend);
  std::shared_ptr<const std::string> bytes = snapshotBytes(*backend);
  // Leaving entries out of the snapshot does not remove them from the backend.
  EXPECT_EQ(storedKeys(*backend, "value"), (std::set<std::string>{"new", "old"}));
  backend->dispose();

  for (StateBackendType into :
       {StateBackendType::kHashMap, StateBackendType::kRocksDb, StateBackendType::kTiered}) {
    SCOPED_TRACE("restored into " + backendName(into));
    expectOnlyUnexpiredStored(restoreAndRead(into, bytes));
  }
}

TEST_P(TtlCleanupTest, SnapshotKeepsExpiredEntriesWithoutCleanupFullSnapshot) {
  makeDescriptors([](StateTtlConfig::Builder& b) { b.disableCleanupInBackground(); });
  std::unique_ptr<KeyedStateBackend> backend = newBackend(GetParam());
  writeEntries(*backend);
  std::shared_ptr<const std::string> bytes = snapshotBytes(*backend);
  backend->dispose();
  expectAllStored(restoreAndRead(GetParam(), bytes));
}

INSTANTIATE_TEST_SUITE_P(AllBackends, TtlCleanupTest,
                         ::testing::Values(StateBackendType::kHashMap, StateBackendType::kRocksDb,
                                           StateBackendType::kTiered),
                         [](const ::testing::TestParamInfo<StateBackendType>& info) {
                           return backendName(info.param);
                         });

class TtlRocksDbCompactionTest : public TtlCleanupBase {};

TEST_F(TtlRocksDbCompactionTest, CompactionFilterDropsExpiredEntriesUnread) {
  makeDescriptors([](StateTtlConfig::Builder& b) { b.cleanupInRocksdbCompactFilter(1); });
  std::unique_ptr<KeyedStateBackend> backend = newBackend(StateBackendType::kRocksDb);
  writeEntries(*backend);
  EXPECT_EQ(storedKeys(*backend, "value"), (std::set<std::string>{"new", "old"}));
  static_cast<RocksDbKeyedStateBackend&>(*backend).compactAll();
  // Nothing was read since 1000, yet the expired entries are gone ...
  EXPECT_EQ(storedKeys(*backend, "value"), std::set<std::string>{"new"});
  EXPECT_EQ(storedKeys(*backend, "list"), std::set<std::string>{"new"});
  EXPECT_EQ(storedKeys(*backend, "map"), std::set<std::string>{"new"});
  // ... from storage itself, and the list kept its unexpired element.
  std::shared_ptr<const std::string> bytes = snapshotBytes(*backend);
  backend->dispose();
  expectOnlyUnexpiredStored(restoreAndRead(StateBackendType::kRocksDb, bytes));
}

// The tiered backend's RocksDB runs the same filter, on what the cache has
// written back.
TEST_F(TtlRocksDbCompactionTest, CompactionFilterWorksBehindTheTieredCache) {
  makeDescriptors([](StateTtlConfig::Builder& b) { b.cleanupInRocksdbCompactFilter(1); });
  std::unique_ptr<KeyedStateBackend> backend = newBackend(StateBackendType::kTiered);
  writeEntries(*backend);
  auto& tiered = static_cast<TieredKeyedStateBackend&>(*backend);
  tiered.evictAll();
  tiered.rocksDb().compactAll();
  EXPECT_EQ(storedKeys(*backend, "value"), std::set<std::string>{"new"});
  EXPECT_EQ(storedKeys(*backend, "list"), std::set<std::string>{"new"});
  EXPECT_EQ(storedKeys(*backend, "map"), std::set<std::string>{"new"});
  std::shared_ptr<const std::string> bytes = snapshotBytes(*backend);
  backend->dispose();
  expectOnlyUnexpiredStored(restoreAndRead(StateBackendType::kTiered, bytes));
}

TEST_F(TtlRocksDbCompactionTest, CompactionKeepsExpiredEntriesWithoutTheFilter) {
  makeDescriptors([](StateTtlConfig::Builder& b) { b.disableCleanupInBackground(); });
  std::unique_ptr<KeyedStateBackend> backend = newBackend(StateBackendType::kRocksDb);
  writeEntries(*backend);
  static_cast<RocksDbKeyedStateBackend&>(*backend).compactAll();
  std::shared_ptr<const std::string> bytes = snapshotBytes(*backend);
  backend->dispose();
  expectAllStored(restoreAndRead(StateBackendType::kRocksDb, bytes));
}

}  // namespace
}  // namespace ttl_test
}  // namespace sluice
