#include <cstdint>
#include <map>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include <sluice/core/flat_hash_map.h>

namespace sluice {
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

}  // namespace
}  // namespace sluice
