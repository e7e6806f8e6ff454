// Tests for OperatorStateBackend (sluice/state/operator_state.h): list, union
// list and broadcast state, snapshot -> restore round trips, repartitioning
// at another parallelism against a reference computed here, schema checks and
// corrupt snapshots.
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sluice/core/serializer.h>
#include <sluice/state/operator_state.h>

namespace sluice {
namespace operator_state_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

const ListStateDescriptor<int64_t> kList("offsets");
const ListStateDescriptor<std::string> kUnion("names");
const MapStateDescriptor<std::string, int64_t> kRules("rules");

// A snapshot of one subtask with `list` in list state "offsets" and `all` in
// union list state "names".
std::string snapshotOf(const std::vector<int64_t>& list, const std::vector<std::string>& all) {
  OperatorStateBackend b("op");
  b.getListState(kList).update(list);
  b.getUnionListState(kUnion).update(all);
  return b.snapshot();
}

std::vector<int64_t> listAfterRestore(const std::string& snapshot) {
  OperatorStateBackend b("op");
  b.restore(snapshot);
  return b.getListState(kList).get();
}

std::vector<std::string> unionAfterRestore(const std::string& snapshot) {
  OperatorStateBackend b("op");
  b.restore(snapshot);
  return b.getUnionListState(kUnion).get();
}

std::map<std::string, int64_t> asMap(const std::vector<std::pair<std::string, int64_t>>& v) {
  return std::map<std::string, int64_t>(v.begin(), v.end());
}

// --- round trips ---------------------------------------------------------------------

TEST(OperatorStateTest, ListUnionAndBroadcastRoundTrip) {
  OperatorStateBackend a("op");
  ListState<int64_t>& list = a.getListState(kList);
  list.add(3);
  list.addAll({1, 4, 1, 5});
  ListState<std::string>& names = a.getUnionListState(kUnion);
  names.update({"x", "", "zz"});
  BroadcastState<std::string, int64_t>& rules = a.getBroadcastState(kRules);
  rules.put("r1", 10);
  rules.put("r2", -20);
  rules.put("r1", 11);  // overwrites
  // The same name returns the same object.
  EXPECT_EQ(&a.getListState(kList), &list);
  EXPECT_EQ(&a.getBroadcastState(kRules), &rules);

  const std::string snap = a.snapshot();
  OperatorStateBackend b("op");
  b.restore(snap);
  EXPECT_TRUE(b.hasRestoredState());
  EXPECT_THAT(b.getListState(kList).get(), ElementsAre(3, 1, 4, 1, 5));
  EXPECT_THAT(b.getUnionListState(kUnion).get(), ElementsAre("x", "", "zz"));
  auto& restoredRules = b.getBroadcastState(kRules);
  EXPECT_EQ(asMap(restoredRules.entries()),
            (std::map<std::string, int64_t>{{"r1", 11}, {"r2", -20}}));
  // The format is canonical: the restored backend snapshots to the same bytes.
  EXPECT_EQ(b.snapshot(), snap);
  EXPECT_THAT(b.getRegisteredStateNames(), UnorderedElementsAre("offsets", "names"));
  EXPECT_THAT(b.getRegisteredBroadcastStateNames(), ElementsAre("rules"));
}

TEST(OperatorStateTest, EmptyStatesAndEmptyBackend) {
  OperatorStateBackend empty("op");
  EXPECT_EQ(empty.snapshot(), "");
  OperatorStateBackend fromEmpty("op");
  fromEmpty.restore("");
  EXPECT_FALSE(fromEmpty.hasRestoredState());
  EXPECT_TRUE(fromEmpty.getListState(kList).get().empty());

  // Registered but empty states are still part of the snapshot.
  OperatorStateBackend a("op");
  a.getListState(kList);
  a.getBroadcastState(kRules);
  const std::string snap = a.snapshot();
  EXPECT_NE(snap, "");
  OperatorStateBackend b("op");
  b.restore(snap);
  EXPECT_TRUE(b.hasRestoredState());
  EXPECT_TRUE(b.getListState(kList).get().empty());
  EXPECT_TRUE(b.getBroadcastState(kRules).isEmpty());
}

TEST(OperatorStateTest, UnregisteredRestoredStateSurvivesIntoTheNextSnapshot) {
  OperatorStateBackend a("op");
  a.getListState(kList).update({7, 8});
  a.getUnionListState(kUnion).update({"u"});
  a.getBroadcastState(kRules).put("k", 1);
  OperatorStateBackend b("op");
  b.restore(a.snapshot());
  // This version of the operator only uses the list, and changes it.
  b.getListState(kList).add(9);
  EXPECT_TRUE(b.getRegisteredBroadcastStateNames().empty());

  OperatorStateBackend c("op");
  c.restore(b.snapshot());
  EXPECT_THAT(c.getListState(kList).get(), ElementsAre(7, 8, 9));
  EXPECT_THAT(c.getUnionListState(kUnion).get(), ElementsAre("u"));
  EXPECT_EQ(asMap(c.getBroadcastState(kRules).entries()),
            (std::map<std::string, int64_t>{{"k", 1}}));
}

TEST(OperatorStateTest, StructuredElementTypes) {
  using Elem = std::pair<std::string, std::vector<int32_t>>;
  const ListStateDescriptor<Elem> desc("pairs");
  const MapStateDescriptor<int32_t, std::vector<std::string>> mapDesc("byId");
  OperatorStateBackend a("op");
  a.getListState(desc).update({{"a", {1, 2}}, {"", {}}, {"c", {3}}});
  a.getBroadcastState(mapDesc).put(-5, {"x", "y"});
  a.getBroadcastState(mapDesc).put(7, {});
  OperatorStateBackend b("op");
  b.restore(a.snapshot());
  EXPECT_EQ(b.getListState(desc).get(), (std::vector<Elem>{{"a", {1, 2}}, {"", {}}, {"c", {3}}}));
  auto& m = b.getBroadcastState(mapDesc);
  EXPECT_EQ(m.get(-5), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(m.get(7), std::vector<std::string>{});
  EXPECT_EQ(m.size(), 2u);
}

// --- broadcast state API ----------------------------------------------------------------

TEST(OperatorStateTest, BroadcastStateOperations) {
  OperatorStateBackend backend("op");
  BroadcastState<std::string, int64_t>& s = backend.getBroadcastState(kRules);
  EXPECT_TRUE(s.isEmpty());
  EXPECT_EQ(s.get("a"), std::nullopt);
  EXPECT_EQ(s.find("a"), nullptr);
  s.put("a", 1);
  s.putAll(std::map<std::string, int64_t>{{"b", 2}, {"c", 3}});
  s.putAll(std::vector<std::pair<std::string, int64_t>>{{"a", 10}});
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(s.get("a"), 10);
  ASSERT_NE(s.find("b"), nullptr);
  EXPECT_EQ(*s.find("b"), 2);
  EXPECT_TRUE(s.contains("c"));
  s.remove("c");
  s.remove("never there");
  EXPECT_FALSE(s.contains("c"));

  // Immutable iteration through the read-only view, without copies.
  const ReadOnlyBroadcastState<std::string, int64_t>& ro = s;
  std::map<std::string, int64_t> seen;
  for (const auto& [k, v] : ro.immutableEntries()) seen[k] = v;
  EXPECT_EQ(seen, (std::map<std::string, int64_t>{{"a", 10}, {"b", 2}}));
  EXPECT_EQ(asMap(ro.entries()), seen);

  // Removing through the iterator.
  s.put("d", 4);
  std::set<std::string> visited;
  for (auto it = s.iterator(); it->hasNext();) {
    auto [k, v] = it->next();
    visited.insert(k);
    if (v % 2 == 0) it->remove();
  }
  EXPECT_EQ(visited, (std::set<std::string>{"a", "b", "d"}));
  EXPECT_EQ(asMap(s.entries()), (std::map<std::string, int64_t>{}));
  s.put("e", 5);
  auto it = s.iterator();
  EXPECT_THROW(it->remove(), SluiceException);  // no next() yet
  s.clear();
  EXPECT_TRUE(s.isEmpty());
}

// --- repartitioning -----------------------------------------------------------------------

TEST(OperatorStateTest, RepartitionOneToThree) {
  OperatorStateBackend old("op");
  old.getListState(kList).update({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  old.getUnionListState(kUnion).update({"a", "b"});
  old.getBroadcastState(kRules).put("r", 42);

  const std::vector<std::string> parts = OperatorStateBackend::repartition({old.snapshot()}, 3);
  ASSERT_EQ(parts.size(), 3u);
  // 10 elements over 3: the first 10 % 3 = 1 chunk is one larger.
  EXPECT_THAT(listAfterRestore(parts[0]), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(listAfterRestore(parts[1]), ElementsAre(4, 5, 6));
  EXPECT_THAT(listAfterRestore(parts[2]), ElementsAre(7, 8, 9));
  for (const std::string& p : parts) {
    EXPECT_THAT(unionAfterRestore(p), ElementsAre("a", "b"));
    OperatorStateBackend b("op");
    b.restore(p);
    EXPECT_EQ(asMap(b.getBroadcastState(kRules).entries()),
              (std::map<std::string, int64_t>{{"r", 42}}));
  }
}

TEST(OperatorStateTest, RepartitionThreeToTwo) {
  const std::vector<std::string> old = {
      snapshotOf({0, 1, 2, 3}, {"s0"}),
      snapshotOf({}, {}),
      snapshotOf({10, 11, 12}, {"s2a", "s2b"}),
  };
  const std::vector<std::string> parts = OperatorStateBackend::repartition(old, 2);
  ASSERT_EQ(parts.size(), 2u);
  // Concatenated in subtask order: 0 1 2 3 10 11 12 -> 4 + 3.
  EXPECT_THAT(listAfterRestore(parts[0]), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(listAfterRestore(parts[1]), ElementsAre(10, 11, 12));
  for (const std::string& p : parts) {
    EXPECT_THAT(unionAfterRestore(p), ElementsAre("s0", "s2a", "s2b"));
  }
}

TEST(OperatorStateTest, RepartitionThreeToTwoUneven) {
  const std::vector<std::string> old = {
      snapshotOf({1}, {}),
      snapshotOf({2, 3, 4, 5}, {}),
      snapshotOf({6, 7}, {}),
  };
  const std::vector<std::string> parts = OperatorStateBackend::repartition(old, 2);
  // 1 2 3 4 5 6 7 -> 4 + 3, regardless of where the elements were.
  EXPECT_THAT(listAfterRestore(parts[0]), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(listAfterRestore(parts[1]), ElementsAre(5, 6, 7));
}

TEST(OperatorStateTest, RepartitionKeepsListsAtUnchangedParallelism) {
  const std::vector<std::string> old = {snapshotOf({1}, {"a"}), snapshotOf({2, 3, 4}, {"b"})};
  const std::vector<std::string> parts = OperatorStateBackend::repartition(old, 2);
  EXPECT_THAT(listAfterRestore(parts[0]), ElementsAre(1));
  EXPECT_THAT(listAfterRestore(parts[1]), ElementsAre(2, 3, 4));
  EXPECT_THAT(unionAfterRestore(parts[0]), ElementsAre("a", "b"));
  EXPECT_THAT(unionAfterRestore(parts[1]), ElementsAre("a", "b"));
}

TEST(OperatorStateTest, RepartitionBroadcastGivesEveryNewSubtaskACopy) {
  std::vector<std::string> old;
  for (int i = 0; i < 2; ++i) {
    OperatorStateBackend b("op");
    b.getBroadcastState(kRules).putAll(std::map<std::string, int64_t>{{"x", 1}, {"y", 2}});
    old.push_back(b.snapshot());
  }
  for (int n : {1, 2, 5}) {
    const std::vector<std::string> parts = OperatorStateBackend::repartition(old, n);
    ASSERT_EQ(parts.size(), static_cast<size_t>(n));
    for (const std::string& p : parts) {
      OperatorStateBackend b("op");
      b.restore(p);
      EXPECT_EQ(asMap(b.getBroadcastState(kRules).entries()),
                (std::map<std::string, int64_t>{{"x", 1}, {"y", 2}}));
    }
  }
}

TEST(OperatorStateTest, RepartitionOfNothing) {
  EXPECT_EQ(OperatorStateBackend::repartition({"", ""}, 3), (std::vector<std::string>{"", "", ""}));
  EXPECT_EQ(OperatorStateBackend::repartition({}, 2), (std::vector<std::string>{"", ""}));
  EXPECT_THROW(OperatorStateBackend::repartition({""}, 0), SluiceException);
}

// Every (old, new) parallelism up to 5 with uneven lists, against the
// reference: the new lists, in order, concatenate to the old lists in order;
// chunk sizes are floor(total / n), the first total % n one larger.
TEST(OperatorStateTest, RepartitionSplitMatchesReferenceForAllParallelisms) {
  for (int oldP = 1; oldP <= 5; ++oldP) {
    std::vector<std::string> old;
    std::vector<int64_t> all;
    std::vector<std::vector<int64_t>> oldLists;
    int64_t next = 0;
    for (int i = 0; i < oldP; ++i) {
      std::vector<int64_t> list;
      for (int j = 0; j < (i * 7 + oldP * 3) % 6; ++j) list.push_back(next++);
      all.insert(all.end(), list.begin(), list.end());
      oldLists.push_back(list);
      old.push_back(snapshotOf(list, {"n" + std::to_string(i)}));
    }
    for (int newP = 1; newP <= 5; ++newP) {
      SCOPED_TRACE(std::to_string(oldP) + " -> " + std::to_string(newP));
      const std::vector<std::string> parts = OperatorStateBackend::repartition(old, newP);
      ASSERT_EQ(parts.size(), static_cast<size_t>(newP));
      size_t begin = 0;
      for (int j = 0; j < newP; ++j) {
        std::vector<int64_t> expected;
        if (newP == oldP) {
          expected = oldLists[j];
        } else {
          const size_t size = all.size() / newP + (static_cast<size_t>(j) < all.size() % newP);
          expected.assign(all.begin() + begin, all.begin() + begin + size);
          begin += size;
        }
        EXPECT_EQ(listAfterRestore(parts[j]), expected) << "new subtask " << j;
        std::vector<std::string> expectedUnion;
        for (int i = 0; i < oldP; ++i) expectedUnion.push_back("n" + std::to_string(i));
        EXPECT_EQ(unionAfterRestore(parts[j]), expectedUnion);
      }
    }
  }
}

TEST(OperatorStateTest, RepartitionRejectsSubtasksThatDisagree) {
  OperatorStateBackend a("op");
  a.getListState(kList).add(1);
  OperatorStateBackend b("op");
  b.getListState(ListStateDescriptor<std::string>("offsets")).add("1");
  try {
    OperatorStateBackend::repartition({a.snapshot(), b.snapshot()}, 1);
    FAIL() << "expected an exception";
  } catch (const SluiceException& e) {
    EXPECT_THAT(e.what(), HasSubstr("'offsets'"));
    EXPECT_THAT(e.what(), HasSubstr(TypeSerializer<int64_t>::schema()));
    EXPECT_THAT(e.what(), HasSubstr(TypeSerializer<std::string>::schema()));
  }
}

// --- schema and kind checks -----------------------------------------------------------------

TEST(OperatorStateTest, IncompatibleSchemaOnRestoreThrowsStateMigrationException) {
  OperatorStateBackend a("my-op");
  a.getListState(kList).add(1);
  a.getBroadcastState(kRules).put("k", 1);
  const std::string snap = a.snapshot();

  {
    OperatorStateBackend b("my-op");
    b.restore(snap);
    try {
      b.getListState(ListStateDescriptor<std::string>("offsets"));
      FAIL() << "expected StateMigrationException";
    } catch (const StateMigrationException& e) {
      EXPECT_THAT(e.what(), HasSubstr("'offsets'"));
      EXPECT_THAT(e.what(), HasSubstr("my-op"));
      EXPECT_THAT(e.what(),
                  HasSubstr("list state 'offsets' of " + TypeSerializer<int64_t>::schema()));
      EXPECT_THAT(e.what(),
                  HasSubstr("list state 'offsets' of " + TypeSerializer<std::string>::schema()));
    }
  }
  {
    OperatorStateBackend b("my-op");
    b.restore(snap);
    try {
      b.getBroadcastState(MapStateDescriptor<std::string, std::string>("rules"));
      FAIL() << "expected StateMigrationException";
    } catch (const StateMigrationException& e) {
      const std::string written =
          TypeSerializer<std::string>::schema() + " -> " + TypeSerializer<int64_t>::schema();
      const std::string asked =
          TypeSerializer<std::string>::schema() + " -> " + TypeSerializer<std::string>::schema();
      EXPECT_THAT(e.what(), HasSubstr("broadcast state 'rules' of " + written));
      EXPECT_THAT(e.what(), HasSubstr("broadcast state 'rules' of " + asked));
    }
  }
  {
    // The same type under another redistribution mode is incompatible too.
    OperatorStateBackend b("my-op");
    b.restore(snap);
    EXPECT_THROW(b.getUnionListState(kList), StateMigrationException);
    // A failed registration leaves the restored state as it was.
    EXPECT_THAT(b.getListState(kList).get(), ElementsAre(1));
  }
}

TEST(OperatorStateTest, OneNameOneState) {
  OperatorStateBackend b("op");
  b.getListState(kList);
  EXPECT_THROW(b.getUnionListState(kList), SluiceException);
  EXPECT_THROW(b.getListState(ListStateDescriptor<std::string>("offsets")), SluiceException);
  EXPECT_THROW(b.getBroadcastState(MapStateDescriptor<std::string, int64_t>("offsets")),
               SluiceException);
  // A different C++ type with the same schema is still another type.
  b.getListState(ListStateDescriptor<int32_t>("ints"));
  EXPECT_THROW(b.getListState(ListStateDescriptor<uint32_t>("ints")), SluiceException);
}

TEST(OperatorStateTest, MisuseIsRejected) {
  OperatorStateBackend a("op");
  a.getListState(kList).add(1);
  const std::string snap = a.snapshot();

  OperatorStateBackend registeredFirst("op");
  registeredFirst.getListState(kList);
  EXPECT_THROW(registeredFirst.restore(snap), SluiceException);

  OperatorStateBackend twice("op");
  twice.restore(snap);
  EXPECT_THROW(twice.restore(snap), SluiceException);

  ListStateDescriptor<int64_t> withTtl("ttl");
  withTtl.enableTimeToLive(StateTtlConfig::newBuilder(std::chrono::milliseconds(10)).build());
  OperatorStateBackend b("op");
  EXPECT_THROW(b.getListState(withTtl), SluiceException);
}

// --- corrupt input -------------------------------------------------------------------------

TEST(OperatorStateTest, CorruptSnapshotsThrowSerializationError) {
  OperatorStateBackend a("op");
  a.getListState(kList).update({1, 2, 3});
  a.getBroadcastState(kRules).put("k", 5);
  const std::string snap = a.snapshot();

  // Every truncation fails cleanly, in restore() and in repartition().
  for (size_t n = 1; n < snap.size(); ++n) {
    OperatorStateBackend b("op");
    EXPECT_THROW(b.restore(snap.substr(0, n)), SerializationError) << "truncated to " << n;
    EXPECT_THROW(OperatorStateBackend::repartition({snap.substr(0, n)}, 2), SerializationError)
        << "truncated to " << n;
  }
  std::string badMagic = snap;
  badMagic[0] = 'X';
  OperatorStateBackend b("op");
  try {
    b.restore(badMagic);
    FAIL() << "expected SerializationError";
  } catch (const SerializationError& e) {
    EXPECT_THAT(e.what(), HasSubstr("bad magic"));
  }
  std::string trailing = snap + "x";
  OperatorStateBackend c("op");
  EXPECT_THROW(c.restore(trailing), SerializationError);
}

TEST(OperatorStateTest, ADamagedStateNameIsEscapedInTheError) {
  OperatorStateBackend a("op");
  a.getListState(kList).update({1, 2, 3});
  std::string snap = a.snapshot();
  // "offsets" -> "\x01ff\xffets", and the mode byte after it invalid.
  const size_t at = snap.find("offsets");
  ASSERT_NE(at, std::string::npos);
  snap[at] = '\x01';
  snap[at + 3] = '\xff';
  snap[at + 7] = 9;
  OperatorStateBackend b("op");
  try {
    b.restore(snap);
    FAIL() << "expected SerializationError";
  } catch (const SerializationError& e) {
    EXPECT_THAT(e.what(), HasSubstr("state '\\x01ff\\xffets' has unknown mode 9"));
    EXPECT_EQ(std::string(e.what()).find('\x01'), std::string::npos) << "no raw bytes";
  }
}

TEST(OperatorStateTest, ElementThatDoesNotDecodeFailsOnRegistration) {
  // A corrupted length inside one element: the snapshot's framing is fine,
  // the element is not, which shows when the state is registered.
  OperatorStateBackend a("op");
  a.getListState(ListStateDescriptor<std::string>("s")).add("hello");
  std::string snap = a.snapshot();
  // The element is the last 6 bytes: varuint 5, "hello". Make the string's
  // own length prefix claim more bytes than the element holds.
  const size_t pos = snap.find("hello");
  ASSERT_NE(pos, std::string::npos);
  snap[pos - 1] = 9;  // inner string length 9 > 5 bytes
  OperatorStateBackend b("op");
  b.restore(snap);  // the framing is intact
  try {
    b.getListState(ListStateDescriptor<std::string>("s"));
    FAIL() << "expected SerializationError";
  } catch (const SerializationError& e) {
    EXPECT_THAT(e.what(), HasSubstr("list state 's'"));
  }
}

}  // namespace
}  // namespace operator_state_test
}  // namespace sluice
