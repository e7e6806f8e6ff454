// The stateful operators besides windows, each under every run
// configuration of tests/harness/operator_runner.h (straight, snapshot and
// restore after every step and after every third, rescale 1<->2 likewise,
// rocksdb, tiered with a tiny budget): a keyed running reduce (on hashmap
// its table of running values, handed to each snapshot serialized), a
// keyed process function with event-time timers, a keyed co-process
// function, an interval join, a keyed broadcast process function and state
// with a time-to-live. The expected output of each step is worked out by
// hand from the function's definition and written down; it must hold in
// every configuration. (Windows have their own scenario suite; the FileSink's
// restores are in tests/unit/sinks and its fault injection in tests/slow.)
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/sluice.h>
#include <sluice/testing.h>

#include "harness/operator_runner.h"

namespace sluice {
namespace run_configs_test {
namespace {

using test::OperatorRunner;
using KV = std::pair<std::string, int64_t>;

template <class OUT>
std::vector<std::string> rendered(const std::vector<StreamRecord<OUT>>& records,
                                  std::string (*render)(const OUT&)) {
  std::vector<std::string> out;
  for (const auto& r : records) out.push_back(render(r.value));
  // Several subtasks emit in an order of their own: compare per step as sets.
  std::sort(out.begin(), out.end());
  return out;
}

std::string renderKV(const KV& kv) { return kv.first + "=" + std::to_string(kv.second); }

class RunConfigTest : public ::testing::TestWithParam<test::RunSetup> {};

// ---- keyed state and event-time timers ----------------------------------------

// Sums a key's values; the first element after a firing sets an event-time
// timer 10 ms after its timestamp, which emits the sum so far and starts over.
class SumUntilTimer final : public KeyedProcessFunction<std::string, KV, KV> {
 public:
  void open() override {
    sum_ = &getRuntimeContext().getState(ValueStateDescriptor<int64_t>("sum"));
  }
  void processElement(const KV& e, Context& ctx, Collector<KV>&) override {
    const std::optional<int64_t> sum = sum_->value();
    if (!sum) ctx.timerService().registerEventTimeTimer(*ctx.timestamp() + 10);
    sum_->update(sum.value_or(0) + e.second);
  }
  void onTimer(int64_t, OnTimerContext& ctx, Collector<KV>& out) override {
    out.collect(KV{ctx.getCurrentKey(), sum_->value().value_or(-1)});
    sum_->clear();
  }

 private:
  ValueState<int64_t>* sum_ = nullptr;
};

TEST_P(RunConfigTest, KeyedProcessFunctionStateAndTimers) {
  StreamExecutionEnvironment env;
  auto op = env.fromCollection(std::vector<KV>{})
                .keyBy([](const KV& e) { return e.first; })
                .process(SumUntilTimer());
  OperatorRunner<KV> r(env.getStreamGraph().node(op.getId()).factory, GetParam());
  r.open();
  auto element = [&](const std::string& k, int64_t v, int64_t ts) {
    r.element(0, KV{k, v}, ts, r.keyGroupOf(k));
    return rendered(r.endStep(), renderKV);
  };
  auto watermark = [&](int64_t t) {
    r.watermark(0, t);
    return rendered(r.endStep(), renderKV);
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(element("a", 1, 0), V{});  // timer a@10
  EXPECT_EQ(element("b", 2, 1), V{});  // timer b@11
  EXPECT_EQ(element("c", 4, 2), V{});  // timer c@12
  EXPECT_EQ(element("a", 3, 5), V{});  // a = 4
  EXPECT_EQ(watermark(9), V{});
  EXPECT_EQ(watermark(10), (V{"a=4"}));
  EXPECT_EQ(element("b", 5, 8), V{});   // b = 7, its timer stays at 11
  EXPECT_EQ(element("a", 6, 20), V{});  // timer a@30
  EXPECT_EQ(watermark(12), (V{"b=7", "c=4"}));
  EXPECT_EQ(element("c", 1, 25), V{});  // timer c@35
  r.endOfInput();
  EXPECT_EQ(rendered(r.endStep(), renderKV), (V{"a=6", "c=1"}));
  r.close();
}

// ---- keyed running reduce --------------------------------------------------------

// keyBy(...).reduce(...): every element emits its key's running sum; the sums
// of string and integer keys (two table types) survive every restore and
// rescale.
TEST_P(RunConfigTest, KeyedRunningReduceKeepsEachKeysSum) {
  StreamExecutionEnvironment env;
  auto op = env.fromCollection(std::vector<KV>{})
                .keyBy([](const KV& e) { return e.first; })
                .reduce([](const KV& acc, const KV& e) {
                  return KV{acc.first, acc.second + e.second};
                });
  OperatorRunner<KV> r(env.getStreamGraph().node(op.getId()).factory, GetParam());
  r.open();
  auto element = [&](const std::string& k, int64_t v) {
    r.element(0, KV{k, v}, 0, r.keyGroupOf(k));
    return rendered(r.endStep(), renderKV);
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(element("a", 1), V{"a=1"});
  EXPECT_EQ(element("b", 10), V{"b=10"});
  EXPECT_EQ(element("a", 2), V{"a=3"});
  EXPECT_EQ(element("c", 100), V{"c=100"});
  EXPECT_EQ(element("b", 20), V{"b=30"});
  EXPECT_EQ(element("a", 4), V{"a=7"});
  EXPECT_EQ(element("c", -50), V{"c=50"});
  EXPECT_EQ(element("d", 5), V{"d=5"});
  EXPECT_EQ(element("b", 1), V{"b=31"});
  EXPECT_EQ(element("d", 5), V{"d=10"});
  r.endOfInput();
  EXPECT_EQ(rendered(r.endStep(), renderKV), V{});
  r.close();

  using IV = std::pair<int64_t, int64_t>;
  StreamExecutionEnvironment ints;
  auto sum = ints.fromCollection(std::vector<IV>{})
                 .keyBy([](const IV& e) { return e.first; })
                 .reduce([](const IV& acc, const IV& e) {
                   return IV{acc.first, acc.second + e.second};
                 });
  OperatorRunner<IV> n(ints.getStreamGraph().node(sum.getId()).factory, GetParam());
  n.open();
  std::map<int64_t, int64_t> model;
  for (int64_t i = 0; i < 60; ++i) {
    const int64_t key = (i * 7) % 13;
    n.element(0, IV{key, i}, 0, n.keyGroupOf(key));
    model[key] += i;
    const std::vector<StreamRecord<IV>> out = n.endStep();
    ASSERT_EQ(out.size(), 1u) << "element " << i;
    EXPECT_EQ(out[0].value, (IV{key, model[key]})) << "element " << i;
  }
  n.close();
}

// On hashmap the running values live in the operator's table; a snapshot
// copies it and serializes the copy when it is written, on the runtime's
// I/O thread, while the task goes on changing the sums and adding keys.
// Restored from it, every key's sum is the one of the moment it was taken.
TEST(KeyedReduceSnapshotTest, ASnapshotWrittenLaterHoldsTheSumsItWasTakenWith) {
  using IV = std::pair<int64_t, int64_t>;
  StreamExecutionEnvironment env;
  auto sum = env.fromCollection(std::vector<IV>{})
                 .keyBy([](const IV& e) { return e.first; })
                 .reduce([](const IV& acc, const IV& e) {
                   return IV{acc.first, acc.second + e.second};
                 });
  const auto factory = env.getStreamGraph().node(sum.getId()).factory;
  auto open = [&](const OperatorStateRestore* restore) {
    auto h = std::make_unique<testing::OperatorHarness<IV>>(factory->createOperator());
    h->context().config().set(options::kStateBackendType, std::string("hashmap"));
    h->open(restore);
    return h;
  };
  auto running = open(nullptr);
  std::map<int64_t, int64_t> model;
  for (int64_t i = 0; i < 300; ++i) {
    running->processElement<IV>(0, IV{i % 37, i});
    model[i % 37] += i;
  }
  OperatorStateSnapshot taken = running->snapshotState(1);
  for (int64_t i = 0; i < 300; ++i) running->processElement<IV>(0, IV{i % 53, 1000});
  running.reset();  // gone before the write: the copy must not point into its table

  const auto restores = testing::redistribute({test::writeOnAnotherThread(std::move(taken))}, 1);
  auto restored = open(&restores[0]);
  for (int64_t key = 0; key < 53; ++key) {
    restored->processElement<IV>(0, IV{key, 0});
    const int64_t expected = model.count(key) ? model[key] : 0;
    ASSERT_EQ(restored->values().back(), (IV{key, expected})) << "key " << key;
  }
}

// ---- two keyed inputs ----------------------------------------------------------

// The first input sets a key's threshold; the second emits values above it (a value
// before any threshold is kept and emitted when the threshold comes, if it
// is above).
class Threshold final : public KeyedCoProcessFunction<std::string, KV, KV, KV> {
 public:
  void open() override {
    threshold_ = &getRuntimeContext().getState(ValueStateDescriptor<int64_t>("threshold"));
    waiting_ = &getRuntimeContext().getListState(ListStateDescriptor<int64_t>("waiting"));
  }
  void processElement1(const KV& t, Context&, Collector<KV>& out) override {
    threshold_->update(t.second);
    for (int64_t v : waiting_->get()) {
      if (v > t.second) out.collect(KV{t.first, v});
    }
    waiting_->clear();
  }
  void processElement2(const KV& e, Context&, Collector<KV>& out) override {
    const std::optional<int64_t> t = threshold_->value();
    if (!t) {
      waiting_->add(e.second);
    } else if (e.second > *t) {
      out.collect(e);
    }
  }

 private:
  ValueState<int64_t>* threshold_ = nullptr;
  ListState<int64_t>* waiting_ = nullptr;
};

TEST_P(RunConfigTest, KeyedCoProcessFunctionKeepsStateOfBothInputs) {
  StreamExecutionEnvironment env;
  auto key = [](const KV& e) { return e.first; };
  auto op = env.fromCollection(std::vector<KV>{})
                .keyBy(key)
                .connect(env.fromCollection(std::vector<KV>{}).keyBy(key))
                .process(Threshold());
  OperatorRunner<KV> r(env.getStreamGraph().node(op.getId()).factory, GetParam(), {.inputs = 2});
  r.open();
  auto send = [&](int input, const std::string& k, int64_t v) {
    r.element(input, KV{k, v}, std::nullopt, r.keyGroupOf(k));
    return rendered(r.endStep(), renderKV);
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(send(1, "x", 5), V{});  // waits
  EXPECT_EQ(send(1, "y", 1), V{});  // waits
  EXPECT_EQ(send(1, "x", 9), V{});  // waits
  EXPECT_EQ(send(0, "x", 6), (V{"x=9"}));
  EXPECT_EQ(send(1, "x", 7), (V{"x=7"}));
  EXPECT_EQ(send(1, "x", 6), V{});
  EXPECT_EQ(send(0, "y", 0), (V{"y=1"}));
  EXPECT_EQ(send(1, "y", 0), V{});
  EXPECT_EQ(send(1, "z", 3), V{});
  r.endOfInput();
  EXPECT_EQ(rendered(r.endStep(), renderKV), V{});
  r.close();
}

// ---- interval join ---------------------------------------------------------------

using Joined = std::tuple<std::string, int64_t, int64_t>;
std::string renderJoined(const Joined& j) {
  return std::get<0>(j) + ":" + std::to_string(std::get<1>(j)) + "+" +
         std::to_string(std::get<2>(j));
}

class PairUp final : public ProcessJoinFunction<KV, KV, Joined> {
 public:
  void processElement(const KV& l, const KV& r, Context&, Collector<Joined>& out) override {
    out.collect(Joined{l.first, l.second, r.second});
  }
};

TEST_P(RunConfigTest, IntervalJoinBuffersBothSidesUntilTheWatermarkPasses) {
  StreamExecutionEnvironment env;
  auto key = [](const KV& e) { return e.first; };
  auto op = env.fromCollection(std::vector<KV>{})
                .keyBy(key)
                .intervalJoin(env.fromCollection(std::vector<KV>{}).keyBy(key))
                .between(std::chrono::milliseconds(-5), std::chrono::milliseconds(5))
                .process(PairUp());
  OperatorRunner<Joined> r(env.getStreamGraph().node(op.getId()).factory, GetParam(),
                           {.inputs = 2});
  r.open();
  // The value is the element's timestamp, so the pairs can be checked by eye:
  // a pair joins when |left - right| <= 5.
  auto send = [&](int input, const std::string& k, int64_t ts) {
    r.element(input, KV{k, ts}, ts, r.keyGroupOf(k));
    return rendered(r.endStep(), renderJoined);
  };
  auto watermark = [&](int64_t t) {
    r.watermark(0, t);
    r.watermark(1, t);
    return rendered(r.endStep(), renderJoined);
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(send(0, "a", 10), V{});
  EXPECT_EQ(send(0, "b", 10), V{});
  EXPECT_EQ(send(1, "a", 14), (V{"a:10+14"}));
  EXPECT_EQ(send(1, "a", 16), V{});
  EXPECT_EQ(send(0, "a", 12), (V{"a:12+14", "a:12+16"}));
  EXPECT_EQ(send(1, "b", 4), V{});  // 4 is outside [10 - 5, 10 + 5]
  EXPECT_EQ(send(1, "b", 6), (V{"b:10+6"}));
  // A left element is kept until the watermark passes ts + 5 (no partner
  // can come after), a right one until ts + 5 as well.
  EXPECT_EQ(watermark(15), V{});
  EXPECT_EQ(send(0, "a", 17), (V{"a:17+14", "a:17+16"}));
  EXPECT_EQ(send(0, "a", 11), V{});  // behind the watermark: late, dropped
  r.endOfInput();
  EXPECT_EQ(rendered(r.endStep(), renderJoined), V{});
  r.close();
}

// ---- broadcast state -----------------------------------------------------------

const MapStateDescriptor<std::string, int64_t> kFactors("factors");

// Broadcast input: (name, factor) rules. Keyed input: (key, v) emits
// v * factor of the rule named like the key's first letter, and counts the
// key's elements in keyed state.
class ApplyFactor final : public KeyedBroadcastProcessFunction<std::string, KV, KV, KV> {
 public:
  void processElement(const KV& e, ReadOnlyContext& ctx, Collector<KV>& out) override {
    auto& seen = getRuntimeContext().getState(ValueStateDescriptor<int64_t>("seen"));
    const int64_t n = seen.value().value_or(0) + 1;
    seen.update(n);
    const auto& rules = ctx.getBroadcastState(kFactors);
    const std::string rule = e.first.substr(0, 1);
    const int64_t factor = rules.contains(rule) ? rules.get(rule).value_or(0) : 0;
    out.collect(KV{e.first + "#" + std::to_string(n), e.second * factor});
  }
  void processBroadcastElement(const KV& rule, Context& ctx, Collector<KV>&) override {
    ctx.getBroadcastState(kFactors).put(rule.first, rule.second);
  }
};

TEST_P(RunConfigTest, BroadcastStateReachesEverySubtaskAndSurvivesRestores) {
  StreamExecutionEnvironment env;
  auto op = env.fromCollection(std::vector<KV>{})
                .keyBy([](const KV& e) { return e.first; })
                .connect(env.fromCollection(std::vector<KV>{}).broadcast(kFactors))
                .process(ApplyFactor());
  OperatorRunner<KV> r(env.getStreamGraph().node(op.getId()).factory, GetParam(), {.inputs = 2});
  r.open();
  auto rule = [&](const std::string& name, int64_t factor) {
    r.broadcastElement(1, KV{name, factor}, std::nullopt);
    return rendered(r.endStep(), renderKV);
  };
  auto event = [&](const std::string& k, int64_t v) {
    r.element(0, KV{k, v}, std::nullopt, r.keyGroupOf(k));
    return rendered(r.endStep(), renderKV);
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(rule("p", 10), V{});
  EXPECT_EQ(event("pear", 2), (V{"pear#1=20"}));
  EXPECT_EQ(event("plum", 3), (V{"plum#1=30"}));
  EXPECT_EQ(event("fig", 3), (V{"fig#1=0"}));
  EXPECT_EQ(rule("f", 7), V{});
  EXPECT_EQ(event("fig", 2), (V{"fig#2=14"}));
  EXPECT_EQ(event("pear", 1), (V{"pear#2=10"}));
  EXPECT_EQ(rule("p", 100), V{});
  EXPECT_EQ(event("plum", 1), (V{"plum#2=100"}));
  EXPECT_EQ(event("peach", 1), (V{"peach#1=100"}));
  r.endOfInput();
  EXPECT_EQ(rendered(r.endStep(), renderKV), V{});
  r.close();
}

// ---- state time-to-live --------------------------------------------------------

// Emits the key's previous value (or -1 when there is none or it expired)
// and stores the new one, with a 100 ms processing-time TTL.
class PreviousValue final : public KeyedProcessFunction<std::string, KV, KV> {
 public:
  void open() override {
    ValueStateDescriptor<int64_t> d("last");
    d.enableTimeToLive(StateTtlConfig::newBuilder(std::chrono::milliseconds(100)).build());
    last_ = &getRuntimeContext().getState(d);
  }
  void processElement(const KV& e, Context&, Collector<KV>& out) override {
    out.collect(KV{e.first, last_->value().value_or(-1)});
    last_->update(e.second);
  }

 private:
  ValueState<int64_t>* last_ = nullptr;
};

TEST_P(RunConfigTest, StateExpiresAfterItsTimeToLiveAcrossRestores) {
  StreamExecutionEnvironment env;
  auto op = env.fromCollection(std::vector<KV>{})
                .keyBy([](const KV& e) { return e.first; })
                .process(PreviousValue());
  OperatorRunner<KV> r(env.getStreamGraph().node(op.getId()).factory, GetParam(), {.clock = 1000});
  r.open();
  auto at = [&](int64_t now, const std::string& k, int64_t v) {
    r.processingTime(now);
    r.element(0, KV{k, v}, std::nullopt, r.keyGroupOf(k));
    return rendered(r.endStep(), renderKV);
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(at(1000, "a", 1), (V{"a=-1"}));  // a written at 1000, expires at 1100
  EXPECT_EQ(at(1050, "b", 2), (V{"b=-1"}));  // b written at 1050
  EXPECT_EQ(at(1099, "a", 3), (V{"a=1"}));   // a rewritten at 1099
  EXPECT_EQ(at(1150, "b", 4), (V{"b=-1"}));  // b expired at 1150
  EXPECT_EQ(at(1198, "a", 5), (V{"a=3"}));   // a alive until 1199
  EXPECT_EQ(at(1298, "a", 6), (V{"a=-1"}));  // expired at 1298
  EXPECT_EQ(at(1300, "b", 7), (V{"b=-1"}));
  EXPECT_EQ(at(1399, "b", 8), (V{"b=7"}));
  r.close();
}

INSTANTIATE_TEST_SUITE_P(Configs, RunConfigTest, ::testing::ValuesIn(test::kAllRunSetups),
                         test::runSetupParamName);

}  // namespace
}  // namespace run_configs_test
}  // namespace sluice
