// Operator state through the operator hooks, driven by hand with the
// operator harness: a CheckpointedFunction in an operator wired with
// internal::FunctionStateHandler is snapshotted, its state repartitioned to
// another parallelism and restored into fresh instances (even split and
// union, 1 -> 3 and 3 -> 2); the broadcast operators built by the DataStream
// API (partitioning of their inputs, read-only and read-write broadcast
// state, broadcast state restored to every new subtask, applyToKeyedState
// over every key with both keyed backends).
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sluice/broadcast.h>
#include <sluice/checkpointed_function.h>
#include <sluice/core/config_options.h>
#include <sluice/sluice.h>
#include <sluice/testing.h>

namespace sluice {
namespace operator_state_hooks_test {
namespace {

using testing::CapturedSnapshot;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::OperatorHarness;
using testing::redistribute;
using ::testing::UnorderedElementsAreArray;

// --- a CheckpointedFunction in a one-input operator ------------------------------------

// Buffers every element >= 0; on -1 emits the buffer. Keeps the buffer in a
// list state (even split) or a union list state.
class BufferingFunction final : public RichFlatMapFunction<int64_t, int64_t>,
                                public CheckpointedFunction {
 public:
  explicit BufferingFunction(bool unionMode) : unionMode_(unionMode) {}

  void flatMap(const int64_t& value, Collector<int64_t>& out) override {
    if (value >= 0) {
      buffer_.push_back(value);
      return;
    }
    for (int64_t v : buffer_) out.collect(v);
  }
  void initializeState(FunctionInitializationContext& ctx) override {
    ++initializeCalls;
    const ListStateDescriptor<int64_t> desc("buffer");
    state_ = unionMode_ ? &ctx.getOperatorStateStore().getUnionListState(desc)
                        : &ctx.getOperatorStateStore().getListState(desc);
    restored = ctx.isRestored();
    if (restored) buffer_ = state_->get();
    keyedStoreAvailable = ctx.getKeyedStateStore().isKeyed();
  }
  void snapshotState(const FunctionSnapshotContext& ctx) override {
    lastCheckpointId = ctx.getCheckpointId();
    lastCheckpointTimestamp = ctx.getCheckpointTimestamp();
    state_->update(buffer_);
  }

  int initializeCalls = 0;
  bool restored = false;
  bool keyedStoreAvailable = true;
  int64_t lastCheckpointId = -1;
  int64_t lastCheckpointTimestamp = -1;

 private:
  bool unionMode_;
  std::vector<int64_t> buffer_;
  ListState<int64_t>* state_ = nullptr;
};

// A flatMap operator wired to FunctionStateHandler the way every operator
// with a user function is.
template <class F>
class CheckpointedFlatMapOperator final : public internal::OneInputOperator<int64_t, int64_t> {
 public:
  explicit CheckpointedFlatMapOperator(F f) : f_(std::move(f)) {}
  void initializeState(const OperatorStateRestore* restore) override {
    functionState_.initialize(this->context(), restore, f_);
  }
  OperatorStateSnapshot snapshotState(int64_t checkpointId) override {
    OperatorStateSnapshot s;
    s.operatorState = functionState_.snapshot(f_, checkpointId);
    return s;
  }
  void open() override {
    collector_.setOutput(&this->output());
    internal::openFunction(f_, this->streamingContext());
  }
  void close() override { internal::closeFunction(f_); }
  void processElement(const StreamRecord<int64_t>& r) override {
    collector_.setTimestampFrom(r.hasTimestamp, r.timestamp);
    f_.flatMap(r.value, collector_);
  }
  F& function() { return f_; }

 private:
  F f_;
  internal::FunctionStateHandler functionState_;
  internal::TimestampedCollector<int64_t> collector_;
};

std::shared_ptr<const OperatorFactory> bufferingFactory(bool unionMode) {
  BufferingFunction prototype(unionMode);
  return internal::makeOperatorFactory<int64_t>([prototype] {
    return std::make_unique<CheckpointedFlatMapOperator<BufferingFunction>>(prototype);
  });
}

BufferingFunction& functionOf(OperatorHarness<int64_t>& h) {
  return dynamic_cast<CheckpointedFlatMapOperator<BufferingFunction>&>(h.op()).function();
}

// Runs `inputs.size()` subtasks, subtask i buffering inputs[i]; snapshots
// them all, restores `newParallelism` fresh subtasks from the repartitioned
// state and returns what each new subtask had buffered.
std::vector<std::vector<int64_t>> rescale(bool unionMode,
                                          const std::vector<std::vector<int64_t>>& inputs,
                                          int newParallelism) {
  auto factory = bufferingFactory(unionMode);
  const int oldParallelism = static_cast<int>(inputs.size());
  std::vector<CapturedSnapshot> snapshots;
  for (int i = 0; i < oldParallelism; ++i) {
    OperatorHarness<int64_t> h(factory->createOperator(), i, oldParallelism);
    h.open();
    EXPECT_FALSE(functionOf(h).restored);
    for (int64_t v : inputs[i]) h.processElement(0, v);
    snapshots.push_back(h.snapshot(7));
    EXPECT_EQ(functionOf(h).lastCheckpointId, 7);
    h.close();
  }
  std::vector<OperatorStateRestore> restores = redistribute(snapshots, newParallelism);
  std::vector<std::vector<int64_t>> result;
  for (int i = 0; i < newParallelism; ++i) {
    OperatorHarness<int64_t> h(factory->createOperator(), i, newParallelism);
    h.open(&restores[i]);
    EXPECT_TRUE(functionOf(h).restored) << "new subtask " << i;
    h.processElement<int64_t>(0, -1);
    result.push_back(h.values());
    h.close();
  }
  return result;
}

TEST(CheckpointedFunctionTest, EvenSplitOneToThree) {
  EXPECT_THAT(rescale(false, {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}, 3),
              ElementsAre(ElementsAre(0, 1, 2, 3), ElementsAre(4, 5, 6), ElementsAre(7, 8, 9)));
}

TEST(CheckpointedFunctionTest, EvenSplitThreeToTwo) {
  EXPECT_THAT(rescale(false, {{0, 1, 2}, {}, {10, 11, 12, 13}}, 2),
              ElementsAre(ElementsAre(0, 1, 2, 10), ElementsAre(11, 12, 13)));
}

TEST(CheckpointedFunctionTest, EvenSplitKeepsEachListAtTheSameParallelism) {
  EXPECT_THAT(rescale(false, {{5}, {6, 7, 8}}, 2),
              ElementsAre(ElementsAre(5), ElementsAre(6, 7, 8)));
}

TEST(CheckpointedFunctionTest, UnionOneToThree) {
  EXPECT_THAT(rescale(true, {{4, 5, 6}}, 3),
              ElementsAre(ElementsAre(4, 5, 6), ElementsAre(4, 5, 6), ElementsAre(4, 5, 6)));
}

TEST(CheckpointedFunctionTest, UnionThreeToTwo) {
  EXPECT_THAT(rescale(true, {{1}, {}, {2, 3}}, 2),
              ElementsAre(ElementsAre(1, 2, 3), ElementsAre(1, 2, 3)));
}

TEST(CheckpointedFunctionTest, RestoredEvenWithAnEmptyShare) {
  // One element over three subtasks: two get nothing, but are still restored.
  EXPECT_THAT(rescale(false, {{42}}, 3),
              ElementsAre(ElementsAre(42), ElementsAre(), ElementsAre()));
}

TEST(CheckpointedFunctionTest, HooksRunOnceWithTheCheckpointContext) {
  OperatorHarness<int64_t> h(bufferingFactory(false)->createOperator());
  h.context().manualClock().setCurrentTime(123456);
  h.open();
  BufferingFunction& f = functionOf(h);
  EXPECT_EQ(f.initializeCalls, 1);
  EXPECT_FALSE(f.restored);
  EXPECT_FALSE(f.keyedStoreAvailable);  // not a keyed stream
  h.processElement<int64_t>(0, 3);
  h.snapshotState(11);
  EXPECT_EQ(f.lastCheckpointId, 11);
  EXPECT_EQ(f.lastCheckpointTimestamp, 123456);
  h.context().manualClock().advance(5);
  CapturedSnapshot s = h.snapshot(12);
  EXPECT_EQ(f.lastCheckpointId, 12);
  EXPECT_EQ(f.lastCheckpointTimestamp, 123461);
  EXPECT_EQ(f.initializeCalls, 1);
  // The state holds the buffer as of the snapshot.
  OperatorStateBackend check("check");
  check.restore(s.operatorState);
  EXPECT_THAT(check.getListState(ListStateDescriptor<int64_t>("buffer")).get(), ElementsAre(3));
}

// A function that is not a CheckpointedFunction: the handler still keeps
// restored operator state (of an earlier version) alive in its snapshots.
TEST(CheckpointedFunctionTest, PlainFunctionCarriesRestoredStateForward) {
  struct Plain {
    void flatMap(const int64_t& v, Collector<int64_t>& out) { out.collect(v + 1); }
  };
  auto factory = internal::makeOperatorFactory<int64_t>(
      [] { return std::make_unique<CheckpointedFlatMapOperator<Plain>>(Plain{}); });
  OperatorHarness<int64_t> fresh(factory->createOperator());
  fresh.open();
  EXPECT_EQ(fresh.snapshot(1).operatorState, "");

  OperatorStateBackend earlier("op");
  earlier.getListState(ListStateDescriptor<int64_t>("old")).update({1, 2});
  OperatorStateRestore restore;
  restore.operatorState = earlier.snapshot();
  OperatorHarness<int64_t> h(factory->createOperator());
  h.open(&restore);
  h.processElement<int64_t>(0, 5);
  EXPECT_THAT(h.values(), ElementsAre(6));
  EXPECT_EQ(h.snapshot(2).operatorState, restore.operatorState);
}

// --- broadcast operators built by the DataStream API ----------------------------------------

using Rule = std::pair<std::string, int64_t>;  // id, threshold
const MapStateDescriptor<std::string, int64_t> kRules("rules");

// Emits "<value>>=<rule>" for every rule whose threshold the value reaches.
// Also counts the elements it saw in a union list state.
class Thresholds final : public BroadcastProcessFunction<int64_t, Rule, std::string>,
                         public CheckpointedFunction {
 public:
  void processElement(const int64_t& v, ReadOnlyContext& ctx,
                      Collector<std::string>& out) override {
    ++seen_;
    for (const auto& [id, threshold] : ctx.getBroadcastState(kRules).immutableEntries()) {
      if (v >= threshold) out.collect(std::to_string(v) + ">=" + id);
    }
    if (v == -1) ctx.getBroadcastState(MapStateDescriptor<std::string, int64_t>("undeclared"));
  }
  void processBroadcastElement(const Rule& rule, Context& ctx, Collector<std::string>&) override {
    if (rule.second < 0) {
      ctx.getBroadcastState(kRules).remove(rule.first);
    } else {
      ctx.getBroadcastState(kRules).put(rule.first, rule.second);
    }
  }
  void initializeState(FunctionInitializationContext& ctx) override {
    seenState_ =
        &ctx.getOperatorStateStore().getUnionListState(ListStateDescriptor<int64_t>("seen"));
    for (int64_t s : seenState_->get()) seenBefore += s;
  }
  void snapshotState(const FunctionSnapshotContext&) override { seenState_->update({seen_}); }

  int64_t seenBefore = 0;

 private:
  int64_t seen_ = 0;
  ListState<int64_t>* seenState_ = nullptr;
};

const StreamEdge& inEdge(const StreamGraph& g, int node, int input) {
  for (int e : g.node(node).inEdges) {
    if (g.edge(e).inputIndex == input) return g.edge(e);
  }
  throw SluiceException("no edge into input " + std::to_string(input));
}

TEST(BroadcastOperatorTest, NonKeyedReadsAndWritesBroadcastStateAndRestoresItEverywhere) {
  StreamExecutionEnvironment env;
  BroadcastStream<Rule> rules = env.fromElements(Rule("a", 1)).broadcast(kRules);
  EXPECT_THAT(rules.getBroadcastStateDescriptorNames(), ElementsAre("rules"));
  auto out = env.fromSequence(1, 2).connect(rules).process(Thresholds());
  const StreamGraph& g = out.environmentState()->graph;
  EXPECT_EQ(inEdge(g, out.getId(), 1).partition, PartitionKind::kBroadcast);
  EXPECT_EQ(inEdge(g, out.getId(), 0).partition, PartitionKind::kDefault);
  auto factory = g.node(out.getId()).factory;

  OperatorHarness<std::string> h(factory->createOperator());
  h.open();
  h.processElement<int64_t>(0, 5);  // no rules yet
  h.processElement(1, Rule("low", 3));
  h.processElement(1, Rule("high", 10));
  h.processElement<int64_t>(0, 5, 77);
  h.processElement(1, Rule("high", 4));  // replaces
  h.processElement(1, Rule("low", -1));  // removes
  h.processElement<int64_t>(0, 5);
  EXPECT_THAT(h.values(), ElementsAre("5>=low", "5>=high"));
  ASSERT_EQ(h.output().records.size(), 2u);
  EXPECT_EQ(h.output().records[0].timestamp, 77);  // the element's timestamp

  // An undeclared descriptor is an error naming the declared ones.
  try {
    h.processElement<int64_t>(0, -1);
    FAIL() << "expected an exception";
  } catch (const SluiceException& e) {
    EXPECT_THAT(e.what(), HasSubstr("'undeclared' does not exist"));
    EXPECT_THAT(e.what(), HasSubstr("'rules'"));
  }

  CapturedSnapshot snap = h.snapshot(1);
  h.close();
  std::vector<OperatorStateRestore> restores = redistribute({snap}, 3);
  for (int i = 0; i < 3; ++i) {
    OperatorHarness<std::string> r(factory->createOperator(), i, 3);
    r.open(&restores[i]);
    r.processElement<int64_t>(0, 4);
    EXPECT_THAT(r.values(), ElementsAre("4>=high")) << "new subtask " << i;
    // 4 elements were seen before the snapshot; union state gives each the total.
    auto& op = dynamic_cast<
        internal::CoBroadcastWithNonKeyedOperator<int64_t, Rule, std::string, Thresholds>&>(r.op());
    EXPECT_EQ(op.function().seenBefore, 4);
    r.close();
  }
}

TEST(BroadcastOperatorTest, RestoreWithAnotherBroadcastStateTypeFails) {
  StreamExecutionEnvironment env;
  auto out = env.fromSequence(1, 2)
                 .connect(env.fromElements(Rule("a", 1)).broadcast(kRules))
                 .process(Thresholds());
  OperatorStateBackend other("op");
  other.getBroadcastState(MapStateDescriptor<std::string, std::string>("rules")).put("a", "b");
  OperatorStateRestore restore;
  restore.operatorState = other.snapshot();
  OperatorHarness<std::string> h(
      out.environmentState()->graph.node(out.getId()).factory->createOperator());
  // The declared states are registered at startup, so the mismatch shows there.
  EXPECT_THROW(h.open(&restore), StateMigrationException);
}

TEST(BroadcastOperatorTest, BroadcastDeclarationsAreChecked) {
  StreamExecutionEnvironment env;
  auto s = env.fromElements(Rule("a", 1));
  EXPECT_THROW(s.broadcast(kRules, MapStateDescriptor<std::string, std::string>("rules")),
               SluiceException);
  MapStateDescriptor<std::string, int64_t> withTtl("ttl");
  withTtl.enableTimeToLive(StateTtlConfig::newBuilder(std::chrono::milliseconds(5)).build());
  EXPECT_THROW(s.broadcast(withTtl), SluiceException);
}

// --- keyed ---------------------------------------------------------------------------------

using Event = std::pair<int64_t, int64_t>;  // key, value
const ValueStateDescriptor<int64_t> kCount("count");
const MapStateDescriptor<std::string, int64_t> kFlags("flags");

// Sums event values per key in keyed state. Broadcast commands: "report"
// emits "key=count" for every key, "reset" clears every key's count, "sum"
// emits the sum over all keys, "peek" uses keyed state outside
// applyToKeyedState (an error); anything else becomes a flag in broadcast
// state, and events emit "key:flag" for every flag.
class CountPerKey final
    : public KeyedBroadcastProcessFunction<int64_t, Event, std::string, std::string> {
 public:
  void processElement(const Event& e, ReadOnlyContext& ctx, Collector<std::string>& out) override {
    EXPECT_EQ(ctx.getCurrentKey(), e.first);
    ValueState<int64_t>& count = getRuntimeContext().getState(kCount);
    count.update(count.value().value_or(0) + e.second);
    for (const auto& [flag, unused] : ctx.getBroadcastState(kFlags).immutableEntries()) {
      out.collect(std::to_string(e.first) + ":" + flag);
    }
  }
  void processBroadcastElement(const std::string& cmd, Context& ctx,
                               Collector<std::string>& out) override {
    if (cmd == "report") {
      ctx.applyToKeyedState(kCount, [&](const int64_t& key, ValueState<int64_t>& state) {
        // getRuntimeContext() state refers to the visited key too.
        EXPECT_EQ(getRuntimeContext().getState(kCount).value(), state.value());
        out.collect(std::to_string(key) + "=" + std::to_string(state.value().value_or(-1)));
      });
    } else if (cmd == "reset") {
      ctx.applyToKeyedState(kCount,
                            [](const int64_t&, ValueState<int64_t>& state) { state.clear(); });
    } else if (cmd == "sum") {
      // Flink's KeyedStateFunction form: an object with process(key, state).
      struct Summer {
        int64_t total = 0;
        void process(const int64_t&, ValueState<int64_t>& state) { total += *state.value(); }
      } summer;
      ctx.applyToKeyedState(kCount, summer);
      out.collect("sum " + std::to_string(summer.total));
    } else if (cmd == "peek") {
      getRuntimeContext().getState(kCount).value();
    } else {
      ctx.getBroadcastState(kFlags).put(cmd, 1);
    }
  }
};

class KeyedBroadcastOperatorTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sluice-opstate-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + GetParam() + "-" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void configure(OperatorHarness<std::string>& h) {
    h.context().config().set(options::kStateBackendType, GetParam());
    h.context().config().set(options::kStateBackendRocksDbLocalDir, dir_.string());
  }

  std::filesystem::path dir_;
};

std::map<int64_t, int64_t> parseReport(const std::vector<std::string>& lines) {
  std::map<int64_t, int64_t> out;
  for (const std::string& l : lines) {
    const size_t eq = l.find('=');
    if (eq == std::string::npos) continue;
    EXPECT_TRUE(out.emplace(std::stoll(l.substr(0, eq)), std::stoll(l.substr(eq + 1))).second)
        << "key reported twice: " << l;
  }
  return out;
}

TEST_P(KeyedBroadcastOperatorTest, ApplyToKeyedStateVisitsEveryKeyAndSurvivesRescaling) {
  StreamExecutionEnvironment env;
  auto out = env.fromElements(Event(1, 1))
                 .keyBy([](const Event& e) { return e.first; })
                 .connect(env.fromElements(std::string("x")).broadcast(kFlags))
                 .process(CountPerKey());
  const StreamGraph& g = out.environmentState()->graph;
  EXPECT_EQ(inEdge(g, out.getId(), 0).partition, PartitionKind::kHash);
  EXPECT_EQ(inEdge(g, out.getId(), 1).partition, PartitionKind::kBroadcast);
  auto factory = g.node(out.getId()).factory;

  OperatorHarness<std::string> h(factory->createOperator());
  configure(h);
  h.open();
  std::map<int64_t, int64_t> expected;
  for (int64_t i = 0; i < 200; ++i) {
    const int64_t key = (i * 37) % 23 - 5;  // 23 keys, some negative
    h.processElement(0, Event(key, i));
    expected[key] += i;
  }
  h.processElement(1, std::string("report"));
  EXPECT_EQ(parseReport(h.values()), expected);
  h.output().records.clear();
  h.processElement(1, std::string("sum"));
  EXPECT_THAT(h.values(), ElementsAre("sum " + std::to_string(199 * 200 / 2)));

  // Outside applyToKeyedState there is no current key.
  EXPECT_THROW(h.processElement(1, std::string("peek")), SluiceException);
  // The keyed side still works afterwards, with broadcast state read-only.
  h.processElement(1, std::string("flagged"));
  h.output().records.clear();
  h.processElement(0, Event(3, 1000));
  expected[3] += 1000;
  EXPECT_THAT(h.values(), ElementsAre("3:flagged"));

  CapturedSnapshot snap = h.snapshot(1);
  h.close();

  // Restored at parallelism 2: each subtask reports the keys of its key
  // groups; together exactly the keys seen, each once, with its count; the
  // broadcast flag is restored in both.
  std::vector<OperatorStateRestore> restores = redistribute({snap}, 2);
  std::map<int64_t, int64_t> reported;
  for (int i = 0; i < 2; ++i) {
    OperatorHarness<std::string> r(factory->createOperator(), i, 2);
    configure(r);
    r.open(&restores[i]);
    r.processElement(1, std::string("report"));
    std::map<int64_t, int64_t> part = parseReport(r.values());
    EXPECT_FALSE(part.empty()) << "subtask " << i;
    for (const auto& [k, c] : part) {
      EXPECT_TRUE(reported.emplace(k, c).second) << "key " << k << " in two subtasks";
      EXPECT_EQ(assignKeyToParallelOperator(k, 128, 2), i) << "key " << k;
    }
    // Reset clears every key of this subtask.
    r.processElement(1, std::string("reset"));
    r.output().records.clear();
    r.processElement(1, std::string("report"));
    EXPECT_THAT(r.values(), ElementsAre());
    // The broadcast flag came back: an event of one of this subtask's keys shows it.
    const int64_t someKey = part.begin()->first;
    r.processElement(0, Event(someKey, 1));
    EXPECT_THAT(r.values(), ElementsAre(std::to_string(someKey) + ":flagged"));
    r.close();
  }
  EXPECT_EQ(reported, expected);
}

INSTANTIATE_TEST_SUITE_P(Backends, KeyedBroadcastOperatorTest,
                         ::testing::Values("hashmap", "rocksdb"));

}  // namespace
}  // namespace operator_state_hooks_test
}  // namespace sluice
