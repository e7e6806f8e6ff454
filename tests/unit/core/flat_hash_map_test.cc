#include <cstdint>
#include <map>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include <sluice/core/flat_hash_map.h>

namespace sluice {
namespace flat_hash_map_test {
namespace {

struct StringHash {
  uint64_t operator()(const std::string& s) const { return std::hash<std::string>{}(s); }
};
// Every key in one place: the table must still work by probing.
struct ConstantHash {
  uint64_t operator()(int64_t) const { return 7; }
};
struct IdentityHash {
  uint64_t operator()(int64_t k) const { return static_cast<uint64_t>(k); }
};

TEST(FlatHashMapTest, MatchesAStdMapThroughGrowth) {
  FlatHashMap<std::string, int64_t, StringHash> map;
  std::map<std::string, int64_t> reference;
  std::mt19937_64 rng(42);
  for (int i = 0; i < 50000; ++i) {
    std::string key = "k" + std::to_string(rng() % 20000);
    auto [slot, inserted] = map.tryEmplace(key);
    EXPECT_EQ(inserted, reference.count(key) == 0) << key;
    slot->value += 1;
    reference[key] += 1;
  }
  EXPECT_EQ(map.size(), reference.size());
  EXPECT_EQ(map.capacity() & (map.capacity() - 1), 0u) << "capacity is a power of two";
  EXPECT_LE(map.size(), map.capacity() - map.capacity() / 8);
  for (const auto& [k, v] : reference) {
    auto* slot = map.find(k);
    ASSERT_NE(slot, nullptr) << k;
    EXPECT_EQ(slot->value, v);
  }
  EXPECT_EQ(map.find(std::string("absent")), nullptr);
  size_t visited = 0;
  map.forEach([&](const std::string& k, int64_t v) {
    EXPECT_EQ(reference.at(k), v);
    ++visited;
  });
  EXPECT_EQ(visited, reference.size());
}

TEST(FlatHashMapTest, AllKeysCollidingStillWork) {
  FlatHashMap<int64_t, int64_t, ConstantHash> map;
  for (int64_t k = 0; k < 500; ++k) map.tryEmplace(k).first->value = k * 3;
  for (int64_t k = 0; k < 500; ++k) {
    auto [slot, inserted] = map.tryEmplace(k);
    EXPECT_FALSE(inserted);
    EXPECT_EQ(slot->value, k * 3);
  }
  EXPECT_EQ(map.size(), 500u);
}

TEST(FlatHashMapTest, SequentialIntegerKeysSpreadAndAreFound) {
  FlatHashMap<int64_t, int64_t, IdentityHash> map;
  for (int64_t k = -1000; k < 100000; ++k) map.tryEmplace(k).first->value = -k;
  EXPECT_EQ(map.size(), 101000u);
  for (int64_t k = -1000; k < 100000; k += 7) EXPECT_EQ(map.find(k)->value, -k);
}

TEST(FlatHashMapTest, EraseMatchesAStdMapUnderRandomInsertsAndErases) {
  FlatHashMap<std::string, int64_t, StringHash> map;
  std::map<std::string, int64_t> reference;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) {
    std::string key = "k" + std::to_string(rng() % 3000);
    if (rng() % 3 == 0) {
      EXPECT_EQ(map.erase(key), reference.erase(key) == 1) << key;
    } else {
      map.tryEmplace(key).first->value = i;
      reference[key] = i;
    }
  }
  EXPECT_EQ(map.size(), reference.size());
  for (int k = 0; k < 3000; ++k) {
    std::string key = "k" + std::to_string(k);
    auto* slot = map.find(key);
    auto it = reference.find(key);
    ASSERT_EQ(slot != nullptr, it != reference.end()) << key;
    if (slot != nullptr) {
      EXPECT_EQ(slot->value, it->second);
    }
  }
}

TEST(FlatHashMapTest, EraseInsideACollidingRunKeepsTheRestReachable) {
  // All keys hash alike, so they form one probe run that wraps around the
  // end of the slot array; erasing from its middle must shift the rest back.
  FlatHashMap<int64_t, int64_t, ConstantHash> map(16);
  for (int64_t k = 0; k < 12; ++k) map.tryEmplace(k).first->value = k;
  for (int64_t k = 0; k < 12; k += 3) EXPECT_TRUE(map.erase(k));
  EXPECT_FALSE(map.erase(int64_t{0})) << "already erased";
  EXPECT_FALSE(map.erase(int64_t{100})) << "never there";
  EXPECT_EQ(map.size(), 8u);
  for (int64_t k = 0; k < 12; ++k) {
    auto* slot = map.find(k);
    if (k % 3 == 0) {
      EXPECT_EQ(slot, nullptr) << k;
    } else {
      ASSERT_NE(slot, nullptr) << k;
      EXPECT_EQ(slot->value, k);
    }
  }
  // Erased slots are reused.
  for (int64_t k = 0; k < 12; k += 3) EXPECT_TRUE(map.tryEmplace(k).second);
  EXPECT_EQ(map.size(), 12u);
  EXPECT_EQ(map.capacity(), 16u);
}

TEST(FlatHashMapTest, EraseWithSpreadKeysThenEraseAll) {
  FlatHashMap<int64_t, int64_t, IdentityHash> map;
  for (int64_t k = 0; k < 5000; ++k) map.tryEmplace(k).first->value = k;
  for (int64_t k = 0; k < 5000; k += 2) EXPECT_TRUE(map.erase(k));
  for (int64_t k = 0; k < 5000; ++k) EXPECT_EQ(map.find(k) != nullptr, k % 2 == 1) << k;
  for (int64_t k = 1; k < 5000; k += 2) EXPECT_TRUE(map.erase(k));
  EXPECT_TRUE(map.empty());
  size_t visited = 0;
  map.forEach([&](int64_t, int64_t) { ++visited; });
  EXPECT_EQ(visited, 0u);
}

}  // namespace
}  // namespace flat_hash_map_test
}  // namespace sluice
