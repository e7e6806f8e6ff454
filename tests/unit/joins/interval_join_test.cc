// Interval join: through the public API against a nested-loop reference on
// random data (inclusive, exclusive, negative and zero-width bounds;
// parallelism 1 and 2; both state backends), and the operator alone in the
// harness for what a job cannot make deterministic: late elements dropped
// and counted or sent to a side output, cleanup timers, and snapshots
// restored into fresh instances at another parallelism.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/sluice.h>
#include <sluice/testing.h>

namespace sluice {
namespace interval_join_test {
namespace {

struct Left {
  int64_t key = 0;
  int64_t ts = 0;
  int64_t id = 0;
};
SLUICE_STRUCT(Left, key, ts, id)

struct Right {
  int64_t key = 0;
  int64_t ts = 0;
  int64_t id = 0;
};
SLUICE_STRUCT(Right, key, ts, id)

// key, left id, right id, output timestamp
using Out = std::tuple<int64_t, int64_t, int64_t, int64_t>;

// Checks the context against the elements and emits the pair with the
// timestamp it will carry.
class PairJoin final : public ProcessJoinFunction<Left, Right, Out> {
 public:
  void processElement(const Left& l, const Right& r, Context& ctx, Collector<Out>& out) override {
    if (ctx.getLeftTimestamp() != l.ts || ctx.getRightTimestamp() != r.ts ||
        ctx.getTimestamp() != std::max(l.ts, r.ts) || ctx.timestamp() != ctx.getTimestamp()) {
      throw SluiceException("wrong timestamps in the ProcessJoinFunction context");
    }
    if (l.key != r.key) throw SluiceException("joined elements of different keys");
    out.collect(Out{l.key, l.id, r.id, ctx.getTimestamp()});
  }
};

// Replaces the last field by the timestamp the record carries, so the test
// checks what the operator stamped, not what the function computed.
class CheckTimestamp final : public ProcessFunction<Out, Out> {
 public:
  void processElement(const Out& v, Context& ctx, Collector<Out>& out) override {
    Out copy = v;
    std::get<3>(copy) = ctx.timestamp().value_or(kMinTimestamp);
    out.collect(copy);
  }
};

// Timestamps from `start` upwards with repeats, each up to `jitter` ms out of
// order.
template <class E>
std::vector<E> generate(uint32_t seed, int n, int64_t start, int64_t jitter = 0) {
  std::mt19937_64 rng(seed);
  std::vector<E> out;
  int64_t base = start;
  for (int i = 0; i < n; ++i) {
    base += static_cast<int64_t>(rng() % 12);
    int64_t key = static_cast<int64_t>(rng() % 8);
    int64_t ts = base + (jitter > 0 ? static_cast<int64_t>(rng() % (jitter + 1)) : 0);
    out.push_back(E{key, ts, i});
  }
  return out;
}

// Bounded out-of-orderness emitted on every event instead of periodically,
// so buffers are cleaned up while the input still flows.
template <class E>
class PunctuatedWatermarks final : public WatermarkGenerator<E> {
 public:
  explicit PunctuatedWatermarks(int64_t bound) : bound_(bound) {}
  void onEvent(const E&, int64_t ts, WatermarkOutput& out) override {
    max_ = std::max(max_, ts);
    out.emitWatermark(Watermark{max_ - bound_ - 1});
  }
  void onPeriodicEmit(WatermarkOutput&) override {}

 private:
  int64_t bound_;
  int64_t max_ = kMinTimestamp / 2;
};

template <class E>
WatermarkStrategy<E> strategy(int64_t jitter, bool punctuated) {
  auto base =
      punctuated ? WatermarkStrategy<E>::forGenerator([jitter] {
        return std::unique_ptr<WatermarkGenerator<E>>(new PunctuatedWatermarks<E>(jitter));
      })
      : jitter > 0
          ? WatermarkStrategy<E>::forBoundedOutOfOrderness(std::chrono::milliseconds(jitter))
          : WatermarkStrategy<E>::forMonotonousTimestamps();
  return base.withTimestampAssigner([](const E& e, int64_t) { return e.ts; });
}

struct Bounds {
  int64_t lower;
  int64_t upper;
  bool lowerExclusive;
  bool upperExclusive;
};

std::vector<Out> reference(const std::vector<Left>& left, const std::vector<Right>& right,
                           const Bounds& b) {
  std::vector<Out> out;
  for (const Left& l : left) {
    for (const Right& r : right) {
      if (l.key != r.key) continue;
      int64_t lo = l.ts + b.lower + (b.lowerExclusive ? 1 : 0);
      int64_t hi = l.ts + b.upper - (b.upperExclusive ? 1 : 0);
      if (r.ts >= lo && r.ts <= hi) out.push_back(Out{l.key, l.id, r.id, std::max(l.ts, r.ts)});
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Config {
  int parallelism;
  std::string backend;
  Bounds bounds;
  std::string label;
  int64_t jitter;   // out-of-orderness of the input, 0: monotonous
  bool punctuated;  // watermarks on every event rather than periodically
};

void PrintTo(const Config& c, std::ostream* os) {
  *os << c.label << " p" << c.parallelism << " " << c.backend << " jitter " << c.jitter
      << (c.punctuated ? " punctuated" : "");
}

class IntervalJoinTest : public ::testing::TestWithParam<Config> {};

TEST_P(IntervalJoinTest, MatchesNestedLoop) {
  const Config& c = GetParam();
  auto left = generate<Left>(100 + static_cast<uint32_t>(c.parallelism), 400, -1500, c.jitter);
  auto right = generate<Right>(200 + static_cast<uint32_t>(c.parallelism), 400, -1480, c.jitter);
  StreamExecutionEnvironment env;
  env.setParallelism(c.parallelism);
  env.setStateBackend(c.backend);
  auto a = env.fromCollection(left)
               .assignTimestampsAndWatermarks(strategy<Left>(c.jitter, c.punctuated))
               .keyBy([](const Left& e) { return e.key; });
  auto b = env.fromCollection(right)
               .assignTimestampsAndWatermarks(strategy<Right>(c.jitter, c.punctuated))
               .keyBy([](const Right& e) { return e.key; });
  auto joined = a.intervalJoin(b).between(std::chrono::milliseconds(c.bounds.lower),
                                          std::chrono::milliseconds(c.bounds.upper));
  if (c.bounds.lowerExclusive) joined.lowerBoundExclusive();
  if (c.bounds.upperExclusive) joined.upperBoundExclusive();
  auto got = joined.process(PairJoin()).process(CheckTimestamp()).executeAndCollect();
  std::sort(got.begin(), got.end());
  auto want = reference(left, right, c.bounds);
  ASSERT_GE(want.size(), 5u);  // the zero-width interval joins few pairs
  EXPECT_EQ(got, want);
}

std::vector<Config> configs() {
  std::vector<Bounds> bounds = {{-50, 30, false, false}, {-50, 30, true, true},
                                {10, 40, true, false},   {-40, -10, false, true},
                                {0, 0, false, false},    {-25, 25, true, false}};
  std::vector<std::string> labels = {
      "inclusive",  "exclusive", "positive_lower_exclusive", "negative_upper_exclusive",
      "zero_width", "symmetric"};
  std::vector<Config> out;
  for (size_t i = 0; i < bounds.size(); ++i) {
    out.push_back({1, "hashmap", bounds[i], labels[i], 0, false});
    out.push_back({1, "hashmap", bounds[i], labels[i] + "_punctuated", 0, true});
    out.push_back({2, "hashmap", bounds[i], labels[i] + "_out_of_order_punctuated", 15, true});
  }
  out.push_back({2, "rocksdb", bounds[0], labels[0] + "_out_of_order", 15, false});
  out.push_back({2, "rocksdb", bounds[1], labels[1] + "_punctuated", 0, true});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Configs, IntervalJoinTest, ::testing::ValuesIn(configs()),
                         [](const ::testing::TestParamInfo<Config>& info) {
                           return info.param.label + "_p" + std::to_string(info.param.parallelism) +
                                  "_" + info.param.backend;
                         });

TEST(IntervalJoinApiTest, BetweenRejectsLowerAboveUpper) {
  StreamExecutionEnvironment env;
  auto a = env.fromElements(Left{}).keyBy([](const Left& e) { return e.key; });
  auto b = env.fromElements(Right{}).keyBy([](const Right& e) { return e.key; });
  EXPECT_THROW(
      a.intervalJoin(b).between(std::chrono::milliseconds(5), std::chrono::milliseconds(4)),
      SluiceException);
  EXPECT_NO_THROW(
      a.intervalJoin(b).between(std::chrono::seconds(-1), std::chrono::milliseconds(-1000)));
}

TEST(IntervalJoinApiTest, ElementsWithoutTimestampsFailTheJob) {
  StreamExecutionEnvironment env;
  auto a = env.fromElements(Left{1, 1, 1}).keyBy([](const Left& e) { return e.key; });
  auto b = env.fromElements(Right{1, 1, 1}).keyBy([](const Right& e) { return e.key; });
  auto joined = a.intervalJoin(b)
                    .between(std::chrono::milliseconds(-1), std::chrono::milliseconds(1))
                    .process(PairJoin());
  try {
    joined.executeAndCollect();
    FAIL() << "expected the job to fail";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("no timestamp"), std::string::npos) << e.what();
  }
}

// --- the operator alone -------------------------------------------------------

struct LeftKey {
  int64_t operator()(const Left& e) const { return e.key; }
};
struct RightKey {
  int64_t operator()(const Right& e) const { return e.key; }
};
using Op = internal::IntervalJoinOperator<int64_t, Left, Right, Out, PairJoin, LeftKey, RightKey>;

std::unique_ptr<Op> makeOp(int64_t lower, int64_t upper, std::string leftLate = "",
                           std::string rightLate = "") {
  internal::IntervalJoinSpec spec;
  spec.lowerBound = lower;
  spec.upperBound = upper;
  spec.leftLateTag = std::move(leftLate);
  spec.rightLateTag = std::move(rightLate);
  return std::make_unique<Op>(PairJoin(), LeftKey(), RightKey(), spec);
}

void watermark(testing::OperatorHarness<Out>& h, int64_t ts) {
  h.processWatermark(0, ts);
  h.processWatermark(1, ts);
}

TEST(IntervalJoinOperatorTest, LateElementsAreDroppedAndCounted) {
  testing::OperatorHarness<Out> h(makeOp(-100, 100));
  h.open();
  h.processElement(0, Left{1, 100, 0}, 100);
  watermark(h, 200);
  // Both would join the left element at 100; both are behind the watermark.
  h.processElement(1, Right{1, 150, 0}, 150);
  h.processElement(0, Left{1, 199, 1}, 199);
  EXPECT_EQ(h.context().counter("numLateRecordsDropped"), 2);
  EXPECT_EQ(h.context().droppedRecords(), 2);
  // At the watermark is not late, but finds nothing: the left element at 100
  // was cleaned up when the watermark reached 100 + 100 (as in Flink).
  h.processElement(1, Right{1, 200, 1}, 200);
  EXPECT_TRUE(h.values().empty());
  h.processElement(0, Left{1, 250, 2}, 250);
  ASSERT_EQ(h.values().size(), 1u);
  EXPECT_EQ(h.values()[0], (Out{1, 2, 1, 250}));
  EXPECT_EQ(h.output().records[0].timestamp, 250);
  EXPECT_EQ(h.context().counter("numLateRecordsDropped"), 2);
  h.close();
}

TEST(IntervalJoinOperatorTest, LateElementsGoToTheSideOutputs) {
  testing::OperatorHarness<Out> h(makeOp(-10, 10, "late-left", "late-right"));
  testing::CollectingOutput<Left> lateLeft;
  testing::CollectingOutput<Right> lateRight;
  h.context().addSideOutput("late-left", &lateLeft);
  h.context().addSideOutput("late-right", &lateRight);
  h.open();
  watermark(h, 50);
  h.processElement(0, Left{3, 49, 7}, 49);
  h.processElement(1, Right{3, 10, 8}, 10);
  h.processElement(1, Right{3, 50, 9}, 50);
  ASSERT_EQ(lateLeft.records.size(), 1u);
  EXPECT_EQ(lateLeft.records[0].value.id, 7);
  EXPECT_EQ(lateLeft.records[0].timestamp, 49);
  ASSERT_EQ(lateRight.records.size(), 1u);
  EXPECT_EQ(lateRight.records[0].value.id, 8);
  EXPECT_EQ(h.context().counter("numLateRecordsDropped"), 0);
  EXPECT_TRUE(h.values().empty());
  h.close();
}

TEST(IntervalJoinOperatorTest, CleanupTimersFollowTheBounds) {
  testing::OperatorHarness<Out> h(makeOp(-20, 30));
  auto& op = static_cast<Op&>(h.op());
  h.open();
  h.processElement(0, Left{1, 100, 0}, 100);   // kept until 100 + 30
  h.processElement(1, Right{1, 100, 0}, 100);  // kept until 100 + 20
  EXPECT_EQ(op.timerService().numEventTimeTimers(), 2u);
  watermark(h, 119);
  EXPECT_EQ(op.timerService().numEventTimeTimers(), 2u);
  watermark(h, 120);
  EXPECT_EQ(op.timerService().numEventTimeTimers(), 1u);
  // The left element at 100 still joins a right element at 130.
  h.processElement(1, Right{1, 130, 1}, 130);
  watermark(h, 130);
  EXPECT_EQ(op.timerService().numEventTimeTimers(), 1u);  // the right element at 130's
  h.processElement(1, Right{1, 131, 2}, 131);             // nothing left to join
  std::vector<Out> got = h.values();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<Out>{{1, 0, 0, 100}, {1, 0, 1, 130}}));
  // The watermark goes downstream after the timers fired.
  EXPECT_EQ(h.output().watermarks.back().timestamp, 130);
  h.close();
}

// Part of the input, a snapshot, then the rest on fresh instances at
// parallelism 1 and 2 (each key to the subtask owning its key group): the
// union of all outputs is the nested-loop join.
class IntervalJoinRestoreTest : public ::testing::TestWithParam<std::string> {};

TEST_P(IntervalJoinRestoreTest, RestoresAtAnotherParallelism) {
  const Bounds bounds{-30, 20, false, false};
  auto left = generate<Left>(7, 300, 0);
  auto right = generate<Right>(8, 300, 5);
  // Interleave both sides in timestamp order; the watermark trails by 1.
  struct Step {
    bool isLeft;
    size_t index;
    int64_t ts;
  };
  std::vector<Step> steps;
  for (size_t i = 0; i < left.size(); ++i) steps.push_back({true, i, left[i].ts});
  for (size_t i = 0; i < right.size(); ++i) steps.push_back({false, i, right[i].ts});
  std::stable_sort(steps.begin(), steps.end(),
                   [](const Step& x, const Step& y) { return x.ts < y.ts; });
  auto feed = [&](testing::OperatorHarness<Out>& h, const Step& s) {
    if (s.isLeft) {
      h.processElement(0, left[s.index], left[s.index].ts);
    } else {
      h.processElement(1, right[s.index], right[s.index].ts);
    }
    watermark(h, s.ts - 1);
  };
  auto configure = [&](testing::OperatorHarness<Out>& h) {
    h.context().config().set(options::kStateBackendType, GetParam());
  };

  std::vector<Out> got;
  const size_t half = steps.size() / 2;
  std::vector<testing::CapturedSnapshot> snapshots;
  std::string timers;  // the harness's CapturedSnapshot leaves timers out
  size_t timersAtSnapshot = 0;
  {
    testing::OperatorHarness<Out> h(makeOp(bounds.lower, bounds.upper));
    configure(h);
    h.open();
    for (size_t i = 0; i < half; ++i) feed(h, steps[i]);
    OperatorStateSnapshot s = h.snapshotState(1);
    std::ostringstream keyed;
    s.keyedState->writeTo(keyed);
    testing::CapturedSnapshot captured;
    captured.operatorState = s.operatorState;
    captured.keyedState = std::make_shared<const std::string>(keyed.str());
    snapshots.push_back(captured);
    timers = s.timers;
    timersAtSnapshot = static_cast<Op&>(h.op()).timerService().numEventTimeTimers();
    for (const Out& o : h.values()) got.push_back(o);
    h.close();
  }
  ASSERT_GT(timersAtSnapshot, 10u);
  ASSERT_GT(got.size(), 10u);
  for (int parallelism : {1, 2}) {
    std::vector<Out> all = got;
    auto restores = testing::redistribute(snapshots, parallelism);
    for (auto& r : restores) r.timers.push_back(timers);
    std::vector<std::unique_ptr<testing::OperatorHarness<Out>>> subtasks;
    for (int i = 0; i < parallelism; ++i) {
      subtasks.push_back(std::make_unique<testing::OperatorHarness<Out>>(
          makeOp(bounds.lower, bounds.upper), i, parallelism));
      configure(*subtasks.back());
      subtasks.back()->open(&restores[static_cast<size_t>(i)]);
    }
    size_t restoredTimers = 0;
    for (auto& h : subtasks) {
      restoredTimers += static_cast<Op&>(h->op()).timerService().numEventTimeTimers();
    }
    EXPECT_EQ(restoredTimers, timersAtSnapshot);
    for (size_t i = half; i < steps.size(); ++i) {
      const Step& s = steps[i];
      int64_t key = s.isLeft ? left[s.index].key : right[s.index].key;
      int owner = computeOperatorIndexForKeyGroup(128, parallelism, assignToKeyGroup(key, 128));
      for (int j = 0; j < parallelism; ++j) {
        if (j == owner) {
          feed(*subtasks[static_cast<size_t>(j)], s);
        } else {
          watermark(*subtasks[static_cast<size_t>(j)], s.ts - 1);
        }
      }
    }
    for (auto& h : subtasks) {
      watermark(*h, kMaxTimestamp);
      auto& op = static_cast<Op&>(h->op());
      EXPECT_EQ(op.timerService().numEventTimeTimers(), 0u);
      for (const Out& o : h->values()) all.push_back(o);
      h->close();
    }
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, reference(left, right, bounds)) << "parallelism " << parallelism;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, IntervalJoinRestoreTest,
                         ::testing::Values("hashmap", "rocksdb"));

}  // namespace
}  // namespace interval_join_test
}  // namespace sluice
