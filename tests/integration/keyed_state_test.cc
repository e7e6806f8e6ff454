// Keyed state in running jobs, on both backends: every primitive obtained
// from the runtime context in a KeyedProcessFunction holds exactly the
// values of its key; keyed reduce keeps its running value in the backend;
// RocksDB's working directories are removed when the job ends; misuse and
// bad settings fail with errors that say what was wrong.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/sluice.h>

#include "integration/integration_util.h"

namespace sluice::integration {
namespace keyed_state_test {
namespace {

constexpr int64_t kRecords = 20000;
constexpr int64_t kKeys = 40;

struct KeyReport {
  int64_t key = 0;
  int64_t count = 0;
  int64_t sum = 0;
  double average = 0;
  std::vector<int64_t> values;          // the list state, sorted
  std::map<int64_t, int64_t> residues;  // map state: value % 7 -> occurrences
};
SLUICE_STRUCT(KeyReport, key, count, sum, average, values, residues)

class Average final : public AggregateFunction<int64_t, std::pair<int64_t, int64_t>, double> {
 public:
  std::pair<int64_t, int64_t> createAccumulator() override { return {0, 0}; }
  std::pair<int64_t, int64_t> add(const int64_t& v, std::pair<int64_t, int64_t> acc) override {
    return {acc.first + v, acc.second + 1};
  }
  double getResult(const std::pair<int64_t, int64_t>& acc) override {
    return static_cast<double>(acc.first) / static_cast<double>(acc.second);
  }
  std::pair<int64_t, int64_t> merge(std::pair<int64_t, int64_t> a,
                                    std::pair<int64_t, int64_t> b) override {
    return {a.first + b.first, a.second + b.second};
  }
};

// Keeps every primitive per key and reports the key's state once it has seen
// all of the key's records.
class AllPrimitives final : public KeyedProcessFunction<int64_t, int64_t, KeyReport> {
 public:
  void open() override {
    auto& rc = getRuntimeContext();
    count_ = &rc.getState(ValueStateDescriptor<int64_t>("count"));
    values_ = &rc.getListState(ListStateDescriptor<int64_t>("values"));
    residues_ = &rc.getMapState(MapStateDescriptor<int64_t, int64_t>("residues"));
    sum_ = &rc.getReducingState(ReducingStateDescriptor<int64_t>(
        "sum", [](const int64_t& a, const int64_t& b) { return a + b; }));
    average_ = &rc.getAggregatingState(
        AggregatingStateDescriptor<int64_t, std::pair<int64_t, int64_t>, double>("average",
                                                                                 Average()));
  }
  void processElement(const int64_t& v, Context& ctx, Collector<KeyReport>& out) override {
    const int64_t n = count_->value().value_or(0) + 1;
    count_->update(n);
    values_->add(v);
    residues_->put(v % 7, residues_->get(v % 7).value_or(0) + 1);
    sum_->add(v);
    average_->add(v);
    if (n < kRecords / kKeys) return;
    KeyReport r;
    r.key = ctx.getCurrentKey();
    r.count = n;
    r.sum = *sum_->get();
    r.average = *average_->get();
    r.values = values_->get();
    std::sort(r.values.begin(), r.values.end());
    for (const auto& [k, c] : residues_->entries()) r.residues[k] = c;
    out.collect(r);
  }

 private:
  ValueState<int64_t>* count_ = nullptr;
  ListState<int64_t>* values_ = nullptr;
  MapState<int64_t, int64_t>* residues_ = nullptr;
  ReducingState<int64_t>* sum_ = nullptr;
  AggregatingState<int64_t, double>* average_ = nullptr;
};

class KeyedStateJobTest : public ::testing::TestWithParam<std::string> {};

TEST_P(KeyedStateJobTest, EveryPrimitiveHoldsExactlyItsKeysValues) {
  TempDir dir("keyed-state");
  Configuration config;
  config.setString("state.backend.rocksdb.localdir", dir.path().string());
  // Tiered: small enough that entries are evicted and reloaded all the time.
  config.setString("state.backend.tiered.memory", "64 kb");
  StreamExecutionEnvironment env(config);
  env.setParallelism(2).setStateBackend(GetParam());
  auto reports = collectInto(env.fromSequence(0, kRecords - 1)
                                 .keyBy([](const int64_t& v) { return v % kKeys; })
                                 .process(AllPrimitives()));
  env.execute("all primitives");

  // Expected, computed directly from the input.
  std::map<int64_t, KeyReport> expected;
  for (int64_t v = 0; v < kRecords; ++v) {
    KeyReport& r = expected[v % kKeys];
    r.key = v % kKeys;
    r.count++;
    r.sum += v;
    r.values.push_back(v);
    r.residues[v % 7]++;
  }
  std::vector<KeyReport> got = reports->take();
  ASSERT_EQ(got.size(), static_cast<size_t>(kKeys));
  for (const KeyReport& r : got) {
    SCOPED_TRACE("key " + std::to_string(r.key));
    const KeyReport& e = expected.at(r.key);
    EXPECT_EQ(r.count, e.count);
    EXPECT_EQ(r.sum, e.sum);
    EXPECT_DOUBLE_EQ(r.average, static_cast<double>(e.sum) / static_cast<double>(e.count));
    EXPECT_EQ(r.values, e.values);
    EXPECT_EQ(r.residues, e.residues);
  }
  // RocksDB removes every subtask's working directory when the task ends.
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST_P(KeyedStateJobTest, KeyedReduceKeepsItsRunningValueInTheBackend) {
  TempDir dir("keyed-reduce");
  Configuration config;
  config.setString("state.backend.type", GetParam());
  config.setString("state.backend.rocksdb.localdir", dir.path().string());
  config.setString("state.backend.tiered.memory", "64 kb");
  StreamExecutionEnvironment env(config);
  env.setParallelism(2);
  auto sums =
      collectInto(env.fromSequence(1, 5000)
                      .map([](const int64_t& v) {
                        return std::pair<std::string, int64_t>("k" + std::to_string(v % 13), v);
                      })
                      .keyBy([](const std::pair<std::string, int64_t>& p) { return p.first; })
                      .sum(1));
  env.execute("keyed reduce");
  std::map<std::string, int64_t> expected;
  for (int64_t v = 1; v <= 5000; ++v) expected["k" + std::to_string(v % 13)] += v;
  // The running sums of a key grow strictly, so each key's largest emitted
  // sum is its final value.
  std::map<std::string, int64_t> finals;
  for (const auto& [k, s] : sums->take()) finals[k] = std::max(finals[k], s);
  EXPECT_EQ(finals, expected);
}

INSTANTIATE_TEST_SUITE_P(Backends, KeyedStateJobTest,
                         ::testing::Values("hashmap", "rocksdb", "tiered"),
                         [](const auto& info) { return info.param; });

class StatefulMap final : public RichMapFunction<int64_t, int64_t> {
 public:
  void open() override { getRuntimeContext().getState(ValueStateDescriptor<int64_t>("x")); }
  int64_t map(const int64_t& v) override { return v; }
};

TEST(KeyedStateErrors, KeyedStateOnANonKeyedStreamFailsTheJobWithFlinksMessage) {
  StreamExecutionEnvironment env;
  env.fromSequence(1, 10).map(StatefulMap()).name("Stateful Map").sinkTo(DiscardSink<int64_t>());
  try {
    env.execute("not keyed");
    FAIL() << "expected the job to fail";
  } catch (const JobExecutionException& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("Keyed state can only be used on a 'keyed stream'"), std::string::npos)
        << what;
    EXPECT_NE(what.find("Stateful Map"), std::string::npos) << what;
  }
}

TEST(KeyedStateErrors, UnknownBackendTypeNamesTheKeyAndTheAcceptedValues) {
  StreamExecutionEnvironment env;
  try {
    env.setStateBackend("memory");
    FAIL() << "expected an error";
  } catch (const SluiceException& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("state.backend.type"), std::string::npos) << what;
    EXPECT_NE(what.find("memory"), std::string::npos) << what;
    EXPECT_NE(what.find("rocksdb"), std::string::npos) << what;
  }
  // From the configuration, the environment rejects it when it is created.
  Configuration config;
  config.setString("state.backend.type", "filesystem");
  try {
    StreamExecutionEnvironment env2(config);
    FAIL() << "expected an error";
  } catch (const SluiceException& e) {
    EXPECT_NE(std::string(e.what()).find("'filesystem' for state.backend.type"), std::string::npos)
        << e.what();
  }
}

TEST(KeyedStateErrors, OneStateNameWithTwoTypesFailsNamingBoth) {
  class TwoTypes final : public KeyedProcessFunction<int64_t, int64_t, int64_t> {
   public:
    void open() override {
      getRuntimeContext().getState(ValueStateDescriptor<int64_t>("s"));
      getRuntimeContext().getListState(ListStateDescriptor<std::string>("s"));
    }
    void processElement(const int64_t&, Context&, Collector<int64_t>&) override {}
  };
  StreamExecutionEnvironment env;
  env.fromSequence(1, 3).keyBy([](const int64_t& v) { return v; }).process(TwoTypes());
  try {
    env.execute("two types");
    FAIL() << "expected the job to fail";
  } catch (const JobExecutionException& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("ValueState<int64>"), std::string::npos) << what;
    EXPECT_NE(what.find("ListState<string>"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace keyed_state_test
}  // namespace sluice::integration
