// Keyed connected streams (keyedA.connect(keyedB), connect(b).keyBy(k1, k2)):
// KeyedCoProcessFunction with keyed state shared by both inputs and timers
// that fire on the minimum of both watermarks, keyed co-map / co-flatMap
// with state, snapshot and restore of state and timers at another
// parallelism, and jobs at several parallelisms checked against results
// computed here without the engine.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sluice/sluice.h>
#include <sluice/testing.h>

namespace sluice {
namespace keyed_co_process_test {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAreArray;

struct Person {
  int64_t id = 0;
  std::string name;
};
SLUICE_STRUCT(Person, id, name)

struct Auction {
  int64_t id = 0;
  int64_t seller = 0;
};
SLUICE_STRUCT(Auction, id, seller)

using Match = std::tuple<std::string, int64_t>;  // seller's name, auction id

// The incremental join of Nexmark q3: whichever side comes first waits in
// keyed state for the other.
class SellerJoin final : public KeyedCoProcessFunction<int64_t, Person, Auction, Match> {
 public:
  void open() override {
    name_ = &getRuntimeContext().getState(ValueStateDescriptor<std::string>("name"));
    waiting_ = &getRuntimeContext().getListState(ListStateDescriptor<int64_t>("auctions"));
  }
  void processElement1(const Person& p, Context& ctx, Collector<Match>& out) override {
    EXPECT_EQ(ctx.getCurrentKey(), p.id);
    for (int64_t auction : waiting_->get()) out.collect(Match{p.name, auction});
    waiting_->clear();
    name_->update(p.name);
  }
  void processElement2(const Auction& a, Context& ctx, Collector<Match>& out) override {
    EXPECT_EQ(ctx.getCurrentKey(), a.seller);
    if (std::optional<std::string> name = name_->value()) {
      out.collect(Match{*name, a.id});
    } else {
      waiting_->add(a.id);
    }
  }

 private:
  ValueState<std::string>* name_ = nullptr;
  ListState<int64_t>* waiting_ = nullptr;
};

struct Input {
  std::vector<Person> persons;
  std::vector<Auction> auctions;
};

// 60 persons; 400 auctions of random sellers, some of whom never register.
Input randomInput(uint32_t seed) {
  std::mt19937 rnd(seed);
  Input in;
  for (int64_t id = 0; id < 60; ++id) in.persons.push_back({id, "person-" + std::to_string(id)});
  std::shuffle(in.persons.begin(), in.persons.end(), rnd);
  for (int64_t id = 0; id < 400; ++id) {
    in.auctions.push_back({1000 + id, static_cast<int64_t>(rnd() % 80)});
  }
  return in;
}

std::vector<Match> expectedMatches(const Input& in) {
  std::vector<Match> out;
  for (const Auction& a : in.auctions) {
    for (const Person& p : in.persons) {
      if (p.id == a.seller) out.emplace_back(p.name, a.id);
    }
  }
  return out;
}

class KeyedConnectJobTest : public ::testing::TestWithParam<int> {};

TEST_P(KeyedConnectJobTest, IncrementalJoinOfTwoKeyedStreamsFindsEveryPair) {
  const Input in = randomInput(7);
  StreamExecutionEnvironment env;
  env.setParallelism(GetParam());
  auto persons = env.fromCollection(in.persons).keyBy(&Person::id);
  auto auctions = env.fromCollection(in.auctions).keyBy(&Auction::seller);
  std::vector<Match> got = persons.connect(auctions).process(SellerJoin()).executeAndCollect();
  EXPECT_THAT(got, UnorderedElementsAreArray(expectedMatches(in)));
}

TEST_P(KeyedConnectJobTest, KeyByOnConnectedStreamsKeysBothInputs) {
  const Input in = randomInput(11);
  StreamExecutionEnvironment env;
  env.setParallelism(GetParam());
  std::vector<Match> got =
      env.fromCollection(in.persons)
          .connect(env.fromCollection(in.auctions))
          .keyBy([](const Person& p) { return p.id; }, [](const Auction& a) { return a.seller; })
          .process(SellerJoin())
          .executeAndCollect();
  EXPECT_THAT(got, UnorderedElementsAreArray(expectedMatches(in)));
}

// Flink's keyed CoFlatMap with state: a running total per key over both
// inputs (first input counts 1, second 10). The last total of each key is
// independent of how the inputs interleave.
class RunningTotal final
    : public RichCoFlatMapFunction<int64_t, int64_t, std::pair<int64_t, int64_t>> {
 public:
  void open() override {
    total_ = &getRuntimeContext().getState(ValueStateDescriptor<int64_t>("total"));
  }
  void flatMap1(const int64_t& key, Collector<std::pair<int64_t, int64_t>>& out) override {
    add(key, 1, out);
  }
  void flatMap2(const int64_t& key, Collector<std::pair<int64_t, int64_t>>& out) override {
    add(key, 10, out);
  }

 private:
  void add(int64_t key, int64_t n, Collector<std::pair<int64_t, int64_t>>& out) {
    const int64_t total = total_->value().value_or(0) + n;
    total_->update(total);
    out.collect({key, total});
  }
  ValueState<int64_t>* total_ = nullptr;
};

TEST_P(KeyedConnectJobTest, KeyedCoFlatMapKeepsStatePerKeyAcrossBothInputs) {
  std::vector<int64_t> first, second;
  std::map<int64_t, int64_t> expected;
  for (int64_t i = 0; i < 300; ++i) {
    first.push_back(i % 17);
    expected[i % 17] += 1;
    if (i % 3 == 0) {
      second.push_back(i % 23);
      expected[i % 23] += 10;
    }
  }
  StreamExecutionEnvironment env;
  env.setParallelism(GetParam());
  auto identity = [](const int64_t& v) { return v; };
  auto rows = env.fromCollection(first)
                  .connect(env.fromCollection(second))
                  .keyBy(identity, identity)
                  .flatMap(RunningTotal())
                  .executeAndCollect();
  std::map<int64_t, int64_t> last;
  for (const auto& [key, total] : rows) last[key] = std::max(last[key], total);
  EXPECT_EQ(last, expected);
  EXPECT_EQ(rows.size(), first.size() + second.size());
}

INSTANTIATE_TEST_SUITE_P(Parallelism, KeyedConnectJobTest, ::testing::Values(1, 3),
                         [](const auto& info) { return "p" + std::to_string(info.param); });

// --- the operator alone -------------------------------------------------------

// Input 1: (key, time) registers an event-time timer at `time` and counts
// the key's registrations; input 2: (key, time) deletes it. onTimer reports
// the key, time, count and watermark.
using Cmd = std::pair<int64_t, int64_t>;
class TimerFunction final : public KeyedCoProcessFunction<int64_t, Cmd, Cmd, std::string> {
 public:
  void open() override {
    count_ = &getRuntimeContext().getState(ValueStateDescriptor<int64_t>("count"));
  }
  void processElement1(const Cmd& c, Context& ctx, Collector<std::string>&) override {
    count_->update(count_->value().value_or(0) + 1);
    ctx.timerService().registerEventTimeTimer(c.second);
  }
  void processElement2(const Cmd& c, Context& ctx, Collector<std::string>&) override {
    ctx.timerService().deleteEventTimeTimer(c.second);
  }
  void onTimer(int64_t timestamp, OnTimerContext& ctx, Collector<std::string>& out) override {
    EXPECT_EQ(ctx.timeDomain(), TimeDomain::EVENT_TIME);
    EXPECT_EQ(ctx.timestamp(), std::optional<int64_t>(timestamp));
    out.collect("key " + std::to_string(ctx.getCurrentKey()) + " at " + std::to_string(timestamp) +
                " count " + std::to_string(count_->value().value_or(0)) + " wm " +
                std::to_string(ctx.timerService().currentWatermark()));
  }

 private:
  ValueState<int64_t>* count_ = nullptr;
};

struct CmdKey {
  int64_t operator()(const Cmd& c) const { return c.first; }
};
using TimerOp =
    internal::KeyedCoProcessOperator<int64_t, Cmd, Cmd, std::string, TimerFunction, CmdKey, CmdKey>;

TEST(KeyedCoProcessOperatorTest, TimersFireWhenBothWatermarksHavePassedThem) {
  testing::OperatorHarness<std::string> h(
      std::make_unique<TimerOp>(TimerFunction(), CmdKey(), CmdKey()));
  h.open();
  h.processElement(0, Cmd{1, 10});
  h.processElement(0, Cmd{1, 10});  // one timer per key and time
  h.processElement(0, Cmd{2, 20});
  h.processElement(0, Cmd{3, 15});
  h.processElement(1, Cmd{3, 15});  // deleted through the other input
  h.processWatermark(0, 100);
  EXPECT_TRUE(h.values().empty()) << "the second input's watermark still holds them back";
  h.processWatermark(1, 12);
  EXPECT_THAT(h.values(), ElementsAre("key 1 at 10 count 2 wm 12"));
  h.processWatermark(1, 30);
  EXPECT_THAT(h.values(), ElementsAre("key 1 at 10 count 2 wm 12", "key 2 at 20 count 1 wm 30"));
  // The timers fired before the watermark went downstream.
  ASSERT_EQ(h.output().watermarks.size(), 2u);
  EXPECT_EQ(h.output().watermarks.back().timestamp, 30);
  EXPECT_EQ(h.output().records.back().timestamp, 20);
}

TEST(KeyedCoProcessOperatorTest, StateAndTimersMoveWithTheirKeysOnRescaling) {
  // Two subtasks, each with the keys of its key groups, snapshot...
  const int maxParallelism = 128;
  std::vector<testing::CapturedSnapshot> snapshots;
  std::vector<int64_t> keys;
  for (int64_t k = 0; k < 40; ++k) keys.push_back(k);
  for (int subtask = 0; subtask < 2; ++subtask) {
    testing::OperatorHarness<std::string> h(
        std::make_unique<TimerOp>(TimerFunction(), CmdKey(), CmdKey()), subtask, 2, maxParallelism);
    h.open();
    const KeyGroupRange range = computeKeyGroupRangeForOperatorIndex(maxParallelism, 2, subtask);
    for (int64_t k : keys) {
      if (!range.contains(assignToKeyGroup(k, maxParallelism))) continue;
      h.processElement(0, Cmd{k, 100 + k});
      if (k % 2 == 0) h.processElement(0, Cmd{k, 100 + k});
    }
    snapshots.push_back(h.snapshot(1));
  }
  // ...and three new subtasks restore them: every key's timer fires exactly
  // once, in the subtask that owns it now, with the key's count.
  std::vector<OperatorStateRestore> restores = testing::redistribute(snapshots, 3);
  std::vector<std::string> fired;
  for (int subtask = 0; subtask < 3; ++subtask) {
    testing::OperatorHarness<std::string> h(
        std::make_unique<TimerOp>(TimerFunction(), CmdKey(), CmdKey()), subtask, 3, maxParallelism);
    h.open(&restores[static_cast<size_t>(subtask)]);
    h.processWatermark(0, 1000);
    h.processWatermark(1, 1000);
    for (const std::string& s : h.values()) fired.push_back(s);
  }
  std::vector<std::string> expected;
  for (int64_t k : keys) {
    expected.push_back("key " + std::to_string(k) + " at " + std::to_string(100 + k) + " count " +
                       std::to_string(k % 2 == 0 ? 2 : 1) + " wm 1000");
  }
  EXPECT_THAT(fired, UnorderedElementsAreArray(expected));
}

// A plain CoProcessFunction still runs on keyed inputs (no keyed state).
class Tag final : public CoProcessFunction<int64_t, int64_t, std::string> {
 public:
  void processElement1(const int64_t& v, Context&, Collector<std::string>& out) override {
    out.collect("a" + std::to_string(v));
  }
  void processElement2(const int64_t& v, Context&, Collector<std::string>& out) override {
    out.collect("b" + std::to_string(v));
  }
};

TEST(KeyedConnectTest, APlainCoProcessFunctionRunsOnKeyedInputs) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  auto identity = [](const int64_t& v) { return v; };
  auto a = env.fromCollection(std::vector<int64_t>{1, 2, 3}).keyBy(identity);
  auto b = env.fromCollection(std::vector<int64_t>{4, 5}).keyBy(identity);
  std::vector<std::string> got = a.connect(b).process(Tag()).executeAndCollect();
  std::sort(got.begin(), got.end());
  EXPECT_THAT(got, ElementsAre("a1", "a2", "a3", "b4", "b5"));
}

TEST(KeyedConnectTest, StreamsOfDifferentEnvironmentsCannotBeConnected) {
  StreamExecutionEnvironment env1, env2;
  auto identity = [](const int64_t& v) { return v; };
  auto a = env1.fromCollection(std::vector<int64_t>{1}).keyBy(identity);
  auto b = env2.fromCollection(std::vector<int64_t>{2}).keyBy(identity);
  EXPECT_THROW(a.connect(b), SluiceException);
}

}  // namespace
}  // namespace keyed_co_process_test
}  // namespace sluice
