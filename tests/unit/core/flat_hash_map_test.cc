#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

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

// The table hash and equality of string keys read whole words (overlapping
// at the ends) instead of bytes: every length around the word sizes, every
// byte position, and prefixes of each other must still be told apart, and
// equal strings must hash alike wherever their bytes live (in place or on
// the heap, at any alignment).
TEST(FlatHashMapTest, StringKeysOfEveryLengthAreToldApart) {
  const TableKeyHash<std::string> hash;
  const TableKeyEqual<std::string> equal;
  std::mt19937_64 rng(11);
  std::vector<std::string> keys;
  for (size_t n = 0; n <= 40; ++n) {
    std::string base(n, 'x');
    for (char& c : base) c = static_cast<char>('a' + rng() % 26);
    keys.push_back(base);
    for (size_t i = 0; i < n; ++i) {
      std::string changed = base;
      changed[i] = static_cast<char>(changed[i] == 'a' ? 'b' : 'a');
      keys.push_back(changed);
    }
  }
  std::set<std::string> distinct(keys.begin(), keys.end());
  for (const std::string& a : distinct) {
    // The same bytes at an odd address, in a longer buffer.
    const std::string padded = "#" + a + "#";
    const std::string_view view(padded.data() + 1, a.size());
    EXPECT_EQ(hash(a), hash(std::string(view))) << a;
    EXPECT_EQ(internal::tableBytesHash(view), hash(a)) << a;
    EXPECT_TRUE(internal::tableBytesEqual(view, a)) << a;
    for (const std::string& b : distinct) {
      EXPECT_EQ(equal(a, b), a == b) << a << " vs " << b;
    }
  }
  // No two distinct keys share a 64-bit hash (not guaranteed, but a
  // collision among ~800 keys would mean a broken mix).
  std::set<uint64_t> hashes;
  for (const std::string& k : distinct) hashes.insert(hash(k));
  EXPECT_EQ(hashes.size(), distinct.size());

  FlatHashMap<std::string, int64_t, TableKeyHash<std::string>> map;
  std::map<std::string, int64_t> reference;
  for (size_t i = 0; i < keys.size(); ++i) {
    map.tryEmplace(keys[i]).first->value += static_cast<int64_t>(i);
    reference[keys[i]] += static_cast<int64_t>(i);
  }
  EXPECT_EQ(map.size(), reference.size());
  for (const auto& [k, v] : reference) {
    auto* slot = map.find(k);
    ASSERT_NE(slot, nullptr) << k;
    EXPECT_EQ(slot->value, v);
  }
}

// Keys with a long common prefix spread over the table's slots like random
// keys: the map takes a key's slot from the top bits of its hash times the
// golden ratio, so those bits must vary with the last bytes too.
TEST(FlatHashMapTest, StringKeysWithCommonPrefixesHashApart) {
  FlatHashMap<std::string, int64_t, TableKeyHash<std::string>> map;
  for (int i = 0; i < 100000; ++i) map.tryEmplace("user-" + std::to_string(i)).first->value = i;
  EXPECT_EQ(map.size(), 100000u);
  std::set<uint64_t> buckets;
  const TableKeyHash<std::string> hash;
  for (int i = 0; i < 100000; ++i) {
    buckets.insert((hash("user-" + std::to_string(i)) * 0x9E3779B97F4A7C15ULL) >> 46);
  }
  // 100000 keys thrown into 2^18 buckets: about 82,600 distinct expected.
  EXPECT_GT(buckets.size(), 80000u);
  for (int i = 0; i < 100000; i += 13) EXPECT_EQ(map.find("user-" + std::to_string(i))->value, i);
}

}  // namespace
}  // namespace flat_hash_map_test
}  // namespace sluice
