// Where records go: every partitioning of the DataStream API, observed by a
// rich map function that tags each record with the subtask that received it.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sluice/sluice.h>

#include "integration/integration_util.h"

namespace sluice::integration {
namespace partitioner_test {
namespace {

using ::testing::HasSubstr;

// value -> (value, index of the subtask that saw it)
template <class T>
class TagSubtask final : public RichMapFunction<T, std::pair<T, int>> {
 public:
  std::pair<T, int> map(const T& value) override {
    return {value, this->getRuntimeContext().getIndexOfThisSubtask()};
  }
};

// (value, producer) -> (value, producer, consumer)
class TagConsumer final
    : public RichMapFunction<std::pair<int64_t, int>, std::tuple<int64_t, int, int>> {
 public:
  std::tuple<int64_t, int, int> map(const std::pair<int64_t, int>& v) override {
    return {v.first, v.second, getRuntimeContext().getIndexOfThisSubtask()};
  }
};

// Records the max parallelism the keyed map runs with next to the subtask.
template <class T>
class TagSubtaskAndMax final : public RichMapFunction<T, std::tuple<T, int, int>> {
 public:
  std::tuple<T, int, int> map(const T& value) override {
    const RuntimeContext& rc = this->getRuntimeContext();
    return {value, rc.getIndexOfThisSubtask(), rc.getMaxNumberOfParallelSubtasks()};
  }
};

std::vector<int64_t> range(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i);
  return v;
}

// --- hash partitioning (keyBy) --------------------------------------------------

std::vector<int64_t> int64Keys() {
  std::vector<int64_t> keys;
  for (int64_t i = -200; i < 800; ++i) keys.push_back(i);
  keys.push_back(INT64_MIN);
  keys.push_back(INT64_MAX);
  keys.push_back(int64_t{1} << 40);
  return keys;
}

std::vector<std::string> stringKeys() {
  std::vector<std::string> keys;
  for (int i = 0; i < 600; ++i) keys.push_back("key-" + std::to_string(i));
  keys.push_back("");
  keys.push_back("Grüße");  // non-ASCII UTF-8
  return keys;
}

// Each key three times, so "lands in exactly one subtask" is observable.
template <class K>
std::vector<K> thrice(const std::vector<K>& keys) {
  std::vector<K> out;
  for (int r = 0; r < 3; ++r) out.insert(out.end(), keys.begin(), keys.end());
  return out;
}

template <class K>
void expectKeyGroupAssignment(const std::vector<std::pair<K, int>>& got, const std::vector<K>& keys,
                              int parallelism, int maxParallelism) {
  ASSERT_EQ(got.size(), keys.size() * 3);
  std::map<K, std::set<int>> subtasksOfKey;
  std::map<K, int> times;
  for (const auto& [key, subtask] : got) {
    subtasksOfKey[key].insert(subtask);
    ++times[key];
  }
  ASSERT_EQ(subtasksOfKey.size(), keys.size());
  for (const K& key : keys) {
    const int expected = computeOperatorIndexForKeyGroup(maxParallelism, parallelism,
                                                         assignToKeyGroup(key, maxParallelism));
    EXPECT_EQ(times[key], 3) << ::testing::PrintToString(key);
    EXPECT_EQ(subtasksOfKey[key], std::set<int>{expected})
        << "key " << ::testing::PrintToString(key) << " p=" << parallelism
        << " maxParallelism=" << maxParallelism;
  }
}

class HashPartitionTest : public ::testing::TestWithParam<int> {};

TEST_P(HashPartitionTest, Int64KeysGoToTheirKeyGroupsSubtask) {
  const int p = GetParam();
  StreamExecutionEnvironment env;
  env.setParallelism(p);
  const auto keys = int64Keys();
  auto got = env.fromCollection(thrice(keys))
                 .keyBy([](const int64_t& k) { return k; })
                 .map(TagSubtask<int64_t>())
                 .executeAndCollect();
  expectKeyGroupAssignment(got, keys, p, 128);
}

TEST_P(HashPartitionTest, StringKeysGoToTheirKeyGroupsSubtask) {
  const int p = GetParam();
  StreamExecutionEnvironment env;
  env.setParallelism(p);
  const auto keys = stringKeys();
  auto got = env.fromCollection(thrice(keys))
                 .keyBy([](const std::string& k) { return k; })
                 .map(TagSubtask<std::string>())
                 .executeAndCollect();
  expectKeyGroupAssignment(got, keys, p, 128);
}

// The environment's max parallelism defines the key groups.
TEST_P(HashPartitionTest, EnvironmentMaxParallelismChangesTheAssignment) {
  const int p = GetParam();
  constexpr int kMax = 7;
  const auto keys = int64Keys();
  // The test only means something if some key moves.
  int moved = 0;
  for (int64_t k : keys) {
    moved += assignKeyToParallelOperator(k, kMax, p) != assignKeyToParallelOperator(k, 128, p);
  }
  ASSERT_GT(moved, 0);

  StreamExecutionEnvironment env;
  env.setParallelism(p);
  env.setMaxParallelism(kMax);
  auto got = env.fromCollection(thrice(keys))
                 .keyBy([](const int64_t& k) { return k; })
                 .map(TagSubtask<int64_t>())
                 .executeAndCollect();
  expectKeyGroupAssignment(got, keys, p, kMax);
}

// An operator's own max parallelism defines the key groups of its input.
TEST_P(HashPartitionTest, OperatorMaxParallelismChangesTheAssignment) {
  const int p = GetParam();
  constexpr int kMax = 12;
  const auto keys = stringKeys();
  int moved = 0;
  for (const auto& k : keys) {
    moved += assignKeyToParallelOperator(k, kMax, p) != assignKeyToParallelOperator(k, 128, p);
  }
  ASSERT_GT(moved, 0);

  StreamExecutionEnvironment env;
  env.setParallelism(p);
  auto got = env.fromCollection(thrice(keys))
                 .keyBy([](const std::string& k) { return k; })
                 .map(TagSubtaskAndMax<std::string>())
                 .setMaxParallelism(kMax)
                 .executeAndCollect();
  std::vector<std::pair<std::string, int>> tagged;
  for (const auto& [k, subtask, maxP] : got) {
    EXPECT_EQ(maxP, kMax);
    tagged.emplace_back(k, subtask);
  }
  expectKeyGroupAssignment(tagged, keys, p, kMax);
}

// Composite keys hash like Flink tuples.
TEST_P(HashPartitionTest, PairKeysGoToTheirKeyGroupsSubtask) {
  const int p = GetParam();
  using Key = std::pair<int64_t, std::string>;
  std::vector<Key> keys;
  for (int64_t i = 0; i < 300; ++i) keys.emplace_back(i % 17, "k" + std::to_string(i));
  StreamExecutionEnvironment env;
  env.setParallelism(p);
  auto got = env.fromCollection(thrice(keys))
                 .keyBy([](const Key& k) { return k; })
                 .map(TagSubtask<Key>())
                 .executeAndCollect();
  expectKeyGroupAssignment(got, keys, p, 128);
}

INSTANTIATE_TEST_SUITE_P(Parallelism, HashPartitionTest, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return "p" + std::to_string(info.param); });

// --- rebalance, broadcast, global, shuffle ------------------------------------

TEST(PartitionerTest, RebalanceIsRoundRobinFromTheSingleSource) {
  constexpr int64_t n = 4000;
  StreamExecutionEnvironment env;
  env.setParallelism(4);
  auto got = env.fromCollection(range(n))  // non-parallel: one producer, in order
                 .rebalance()
                 .map(TagSubtask<int64_t>())
                 .executeAndCollect();
  ASSERT_EQ(got.size(), static_cast<size_t>(n));
  std::vector<int> subtaskOf(n, -1);
  for (const auto& [v, s] : got) {
    ASSERT_TRUE(v >= 0 && v < n) << v;
    EXPECT_EQ(subtaskOf[v], -1) << "element " << v << " arrived twice";
    subtaskOf[v] = s;
  }
  std::map<int, int64_t> perSubtask;
  for (int s : subtaskOf) ++perSubtask[s];
  EXPECT_EQ(perSubtask, (std::map<int, int64_t>{{0, n / 4}, {1, n / 4}, {2, n / 4}, {3, n / 4}}));
  const int start = subtaskOf[0];
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(subtaskOf[i], (i + start) % 4) << "element " << i;
  }
}

TEST(PartitionerTest, BroadcastReachesEverySubtaskOnce) {
  constexpr int64_t n = 2000;
  StreamExecutionEnvironment env;
  env.setParallelism(4);
  auto got =
      env.fromCollection(range(n)).broadcast().map(TagSubtask<int64_t>()).executeAndCollect();
  std::vector<std::pair<int64_t, int>> expected;
  for (int64_t v = 0; v < n; ++v) {
    for (int s = 0; s < 4; ++s) expected.emplace_back(v, s);
  }
  EXPECT_EQ(sorted(got), expected);
}

TEST(PartitionerTest, GlobalSendsEverythingToSubtaskZero) {
  constexpr int64_t n = 3000;
  StreamExecutionEnvironment env;
  env.setParallelism(4);
  auto got = env.fromSequence(0, n - 1)  // four producers
                 .global()
                 .map(TagSubtask<int64_t>())
                 .executeAndCollect();
  std::vector<std::pair<int64_t, int>> expected;
  for (int64_t v = 0; v < n; ++v) expected.emplace_back(v, 0);
  EXPECT_EQ(sorted(got), expected);
}

TEST(PartitionerTest, ShuffleDeliversEachElementOnceAndUsesEverySubtask) {
  constexpr int64_t n = 20000;
  StreamExecutionEnvironment env;
  env.setParallelism(4);
  auto got = env.fromCollection(range(n)).shuffle().map(TagSubtask<int64_t>()).executeAndCollect();
  ASSERT_EQ(got.size(), static_cast<size_t>(n));
  std::vector<int64_t> values;
  std::map<int, int64_t> perSubtask;
  for (const auto& [v, s] : got) {
    values.push_back(v);
    ++perSubtask[s];
  }
  EXPECT_EQ(sorted(values), range(n));
  ASSERT_EQ(perSubtask.size(), 4u);
  for (const auto& [s, count] : perSubtask) {
    EXPECT_TRUE(s >= 0 && s < 4) << s;
    // Uniformly random: far from empty (expected n/4 each).
    EXPECT_GT(count, n / 8) << "subtask " << s;
  }
}

// --- rescale ----------------------------------------------------------------------

TEST(PartitionerTest, RescaleTwoToFourIsPointwise) {
  constexpr int64_t n = 10000;
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  // The producers: a map at parallelism 2 fed round robin, so both emit (a
  // parallel source may hand all its ranges to whichever reader asks first).
  auto got = env.fromCollection(range(n))
                 .rebalance()
                 .map(TagSubtask<int64_t>())  // the producer subtask
                 .rescale()
                 .map(TagConsumer())
                 .setParallelism(4)
                 .executeAndCollect();
  ASSERT_EQ(got.size(), static_cast<size_t>(n));
  std::vector<int64_t> values;
  std::map<int, std::set<int>> consumersOfProducer;
  std::map<int, int64_t> perConsumer;
  for (const auto& [v, producer, consumer] : got) {
    values.push_back(v);
    consumersOfProducer[producer].insert(consumer);
    ++perConsumer[consumer];
    if (producer == 0) {
      EXPECT_TRUE(consumer == 0 || consumer == 1) << "value " << v << " consumer " << consumer;
    } else {
      EXPECT_EQ(producer, 1);
      EXPECT_TRUE(consumer == 2 || consumer == 3) << "value " << v << " consumer " << consumer;
    }
  }
  EXPECT_EQ(sorted(values), range(n));
  // Both producers got a share of the sequence and spread it over both of
  // their consumers.
  EXPECT_EQ(consumersOfProducer, (std::map<int, std::set<int>>{{0, {0, 1}}, {1, {2, 3}}}));
}

// --- forward ----------------------------------------------------------------------

TEST(PartitionerTest, ForwardBetweenDifferentParallelismsFailsAtExecute) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  auto mapped = env.fromSequence(0, 99).forward().map([](const int64_t& v) { return v + 1; });
  mapped.setParallelism(4);
  mapped.sinkTo(DiscardSink<int64_t>());
  try {
    env.execute("forward mismatch");
    FAIL() << "execute() accepted a forward edge from parallelism 2 to 4";
  } catch (const SluiceException& e) {
    EXPECT_THAT(e.what(), HasSubstr("Forward partitioning does not allow change of parallelism"));
  }
}

TEST(PartitionerTest, ForwardWithEqualParallelismKeepsSubtask) {
  constexpr int64_t n = 5000;
  StreamExecutionEnvironment env;
  env.setParallelism(3);
  auto got = env.fromSequence(0, n - 1)
                 .map(TagSubtask<int64_t>())
                 .disableChaining()
                 .forward()
                 .map(TagConsumer())
                 .disableChaining()
                 .executeAndCollect();
  std::vector<int64_t> values;
  for (const auto& [v, producer, consumer] : got) {
    values.push_back(v);
    EXPECT_EQ(producer, consumer) << v;
  }
  EXPECT_EQ(sorted(values), range(n));
}

// --- records and buffers -----------------------------------------------------------

// Records larger than a network segment (32 KiB) span segments; sizes around
// the segment size hit every split of the 4-byte length frame.
TEST(NetworkTest, RecordsLargerThanASegmentArriveIntact) {
  std::vector<size_t> sizes = {0, 1, 2, 3, 100, 65536, 100000, 300000};
  for (size_t s = 32750; s <= 32775; ++s) sizes.push_back(s);
  std::vector<std::string> records;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::string r(sizes[i], '\0');
    for (size_t j = 0; j < r.size(); ++j) r[j] = static_cast<char>('a' + (i * 7 + j * 13) % 26);
    records.push_back(std::move(r));
  }
  // Twice over, so records also start at odd offsets inside a segment.
  std::vector<std::string> input = records;
  input.insert(input.end(), records.begin(), records.end());

  StreamExecutionEnvironment env;
  env.setParallelism(2);
  auto got = env.fromCollection(input)
                 .rebalance()
                 .map([](const std::string& s) { return s; })
                 .executeAndCollect();
  EXPECT_EQ(sorted(got), sorted(input));
}

class BufferTimeoutTest : public ::testing::TestWithParam<int64_t> {};

// Whatever the buffer timeout (0: flush every record, -1: only full buffers),
// a bounded job delivers everything.
TEST_P(BufferTimeoutTest, BoundedJobDeliversEverything) {
  constexpr int64_t n = 20000;
  StreamExecutionEnvironment env;
  env.setParallelism(3);
  env.setBufferTimeout(GetParam());
  auto got = env.fromSequence(1, n)
                 .keyBy([](const int64_t& v) { return v % 11; })
                 .map([](const int64_t& v) { return v * 3; })
                 .rebalance()
                 .map([](const int64_t& v) { return v - 1; })
                 .executeAndCollect();
  std::vector<int64_t> expected;
  for (int64_t v = 1; v <= n; ++v) expected.push_back(v * 3 - 1);
  EXPECT_EQ(sorted(got), expected);
}

INSTANTIATE_TEST_SUITE_P(Timeouts, BufferTimeoutTest, ::testing::Values(0, 1, 100, -1),
                         [](const auto& info) {
                           return info.param < 0 ? std::string("never")
                                                 : "ms" + std::to_string(info.param);
                         });

// --- custom -----------------------------------------------------------------------

class ModuloPartitioner final : public Partitioner<int64_t> {
 public:
  int partition(const int64_t& key, int numPartitions) override {
    return static_cast<int>(key % numPartitions);
  }
};

TEST(PartitionerTest, PartitionCustomUsesThePartitioner) {
  constexpr int64_t n = 4003;
  StreamExecutionEnvironment env;
  env.setParallelism(4);
  auto got = env.fromCollection(range(n))
                 .partitionCustom(ModuloPartitioner(), [](const int64_t& v) { return v; })
                 .map(TagSubtask<int64_t>())
                 .executeAndCollect();
  std::vector<std::pair<int64_t, int>> expected;
  for (int64_t v = 0; v < n; ++v) expected.emplace_back(v, static_cast<int>(v % 4));
  EXPECT_EQ(sorted(got), expected);
}

}  // namespace
}  // namespace partitioner_test
}  // namespace sluice::integration
