// Timers of KeyedProcessFunction (event and processing time, deletion,
// de-duplication, order, key and state in onTimer, snapshot/restore by key
// group), the end-of-input maximum watermark on the mini-cluster, and the
// watermark generators of WatermarkStrategy. Processing time is always a
// manual clock; nothing waits on wall time.
#include <chrono>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sluice/internal/timer_service.h>
#include <sluice/sluice.h>
#include <sluice/testing.h>

namespace sluice {
namespace timers_test {
namespace {

using ::testing::ElementsAre;
using testing::HarnessOperatorContext;
using testing::OperatorHarness;
using ::testing::UnorderedElementsAre;

// (key, operation, time): the operation the function performs for the key.
using Cmd = std::tuple<std::string, std::string, int64_t>;

// Registers and deletes timers as told; onTimer reports key, domain, time,
// the watermark and the key's element count (keyed state).
class TimerFunction final : public KeyedProcessFunction<std::string, Cmd, std::string> {
 public:
  void processElement(const Cmd& cmd, Context& ctx, Collector<std::string>& out) override {
    const auto& [key, op, time] = cmd;
    ValueState<int64_t>& count = getRuntimeContext().getState(count_);
    count.update(count.value().value_or(0) + 1);
    TimerService& timers = ctx.timerService();
    if (op == "event") {
      timers.registerEventTimeTimer(time);
    } else if (op == "processing") {
      timers.registerProcessingTimeTimer(time);
    } else if (op == "delete-event") {
      timers.deleteEventTimeTimer(time);
    } else if (op == "delete-processing") {
      timers.deleteProcessingTimeTimer(time);
    } else if (op == "now") {
      out.collect(key + " now=" + std::to_string(timers.currentProcessingTime()) +
                  " wm=" + std::to_string(timers.currentWatermark()));
    }
  }
  void onTimer(int64_t timestamp, OnTimerContext& ctx, Collector<std::string>& out) override {
    const bool event = ctx.timeDomain() == TimeDomain::EVENT_TIME;
    EXPECT_EQ(ctx.timestamp(), event ? std::optional<int64_t>(timestamp) : std::nullopt);
    ValueState<int64_t>& count = getRuntimeContext().getState(count_);
    out.collect(ctx.getCurrentKey() + (event ? " event " : " processing ") +
                std::to_string(timestamp) + " count=" + std::to_string(count.value().value_or(0)));
    // A timer registered while firing, already due, fires in the same pass.
    if (ctx.getCurrentKey() == "chain" && event && timestamp < 103) {
      ctx.timerService().registerEventTimeTimer(timestamp + 1);
    }
  }

 private:
  ValueStateDescriptor<int64_t> count_{"count"};
};

std::shared_ptr<const OperatorFactory> timerOperatorFactory() {
  StreamExecutionEnvironment env;
  auto out = env.fromElements(Cmd{"x", "none", 0})
                 .keyBy([](const Cmd& c) { return std::get<0>(c); })
                 .process(TimerFunction{});
  return env.getStreamGraph().node(out.getId()).factory;
}

class KeyedTimersTest : public ::testing::Test {
 protected:
  KeyedTimersTest() : h_(timerOperatorFactory()->createOperator()) {}
  void SetUp() override {
    h_.context().manualClock().setCurrentTime(1000);
    h_.open();
  }
  void cmd(const std::string& key, const std::string& op, int64_t time, int64_t ts = 0) {
    h_.processElement<Cmd>(0, Cmd{key, op, time}, ts);
  }
  std::vector<std::string> take() {
    std::vector<std::string> v = h_.values();
    h_.output().records.clear();
    return v;
  }
  OperatorHarness<std::string> h_;
};

TEST_F(KeyedTimersTest, EventTimersFireInTimestampOrderWhenTheWatermarkPassesThem) {
  cmd("a", "event", 30);
  cmd("b", "event", 10);
  cmd("a", "event", 20);
  cmd("b", "event", 25);
  h_.processWatermark(0, 9);
  EXPECT_THAT(take(), ElementsAre());
  h_.processWatermark(0, 10);  // a timer at t fires once the watermark reaches t
  EXPECT_THAT(take(), ElementsAre("b event 10 count=2"));
  h_.processWatermark(0, 100);
  EXPECT_THAT(take(),
              ElementsAre("a event 20 count=2", "b event 25 count=2", "a event 30 count=2"));
  // Outputs of event-time timers carry the timer's timestamp.
  cmd("a", "event", 150);
  h_.processWatermark(0, 200);
  ASSERT_EQ(h_.output().records.size(), 1u);
  EXPECT_TRUE(h_.output().records[0].hasTimestamp);
  EXPECT_EQ(h_.output().records[0].timestamp, 150);
  // The watermark goes downstream after the timers it fired.
  ASSERT_FALSE(h_.output().watermarks.empty());
  EXPECT_EQ(h_.output().watermarks.back().timestamp, 200);
}

TEST_F(KeyedTimersTest, OneTimerPerKeyTimestampAndDomain) {
  cmd("a", "event", 10);
  cmd("a", "event", 10);
  cmd("a", "event", 10);
  cmd("b", "event", 10);         // another key: its own timer
  cmd("a", "processing", 1010);  // another domain: its own timer
  cmd("a", "processing", 1010);
  h_.processWatermark(0, 50);
  EXPECT_THAT(take(), UnorderedElementsAre("a event 10 count=5", "b event 10 count=1"));
  h_.context().setProcessingTime(2000);
  EXPECT_THAT(take(), ElementsAre("a processing 1010 count=5"));
  h_.processWatermark(0, 60);
  h_.context().setProcessingTime(3000);
  EXPECT_THAT(take(), ElementsAre());
}

TEST_F(KeyedTimersTest, DeletedTimersDoNotFire) {
  cmd("a", "event", 10);
  cmd("a", "event", 15);
  cmd("b", "event", 10);
  cmd("a", "delete-event", 10);
  cmd("a", "delete-event", 99);  // deleting a timer that does not exist is fine
  cmd("a", "processing", 1005);
  cmd("a", "processing", 1006);
  cmd("a", "delete-processing", 1005);
  h_.processWatermark(0, 20);
  EXPECT_THAT(take(), ElementsAre("b event 10 count=1", "a event 15 count=7"));
  h_.context().setProcessingTime(1010);
  EXPECT_THAT(take(), ElementsAre("a processing 1006 count=7"));
}

TEST_F(KeyedTimersTest, ProcessingTimersFollowTheManualClock) {
  cmd("a", "processing", 1050);
  cmd("b", "processing", 1020);
  cmd("c", "processing", 1020);
  cmd("a", "now", 0);
  EXPECT_THAT(take(), ElementsAre("a now=1000 wm=" + std::to_string(kMinTimestamp)));
  h_.context().setProcessingTime(1019);
  EXPECT_THAT(take(), ElementsAre());
  h_.context().setProcessingTime(1020);
  EXPECT_THAT(take(),
              UnorderedElementsAre("b processing 1020 count=1", "c processing 1020 count=1"));
  // A timer registered for a time already passed fires at the next tick.
  cmd("d", "processing", 900);
  h_.context().setProcessingTime(1030);
  EXPECT_THAT(take(), ElementsAre("d processing 900 count=1"));
  h_.context().setProcessingTime(5000);
  ASSERT_EQ(h_.output().records.size(), 1u);
  EXPECT_EQ(h_.values()[0], "a processing 1050 count=2");
  EXPECT_FALSE(h_.output().records[0].hasTimestamp);  // processing-time outputs: none
  // Watermarks do not fire processing-time timers, nor the clock event-time ones.
  cmd("a", "processing", 6000);
  cmd("a", "event", 6000);
  take();
  h_.processWatermark(0, 5999);
  h_.context().setProcessingTime(5999);
  EXPECT_THAT(take(), ElementsAre());
  h_.processWatermark(0, 6000);
  EXPECT_THAT(take(), ElementsAre("a event 6000 count=4"));
  h_.context().setProcessingTime(6000);
  EXPECT_THAT(take(), ElementsAre("a processing 6000 count=4"));
}

TEST_F(KeyedTimersTest, TimersRegisteredWhileFiringThatAreDueFireInTheSamePass) {
  cmd("chain", "event", 100);
  h_.processWatermark(0, 102);
  EXPECT_THAT(take(), ElementsAre("chain event 100 count=1", "chain event 101 count=1",
                                  "chain event 102 count=1"));
  h_.processWatermark(0, 110);
  EXPECT_THAT(take(), ElementsAre("chain event 103 count=1"));
}

TEST_F(KeyedTimersTest, TimersAreRestoredPerKeyGroupRange) {
  std::vector<std::string> keys;
  for (int i = 0; i < 20; ++i) keys.push_back("k" + std::to_string(i));
  for (const auto& k : keys) {
    cmd(k, "event", 10);
    cmd(k, "processing", 1100);
  }
  OperatorStateSnapshot raw = h_.snapshotState(1);
  ASSERT_FALSE(raw.timers.empty());
  testing::CapturedSnapshot captured;
  {
    std::ostringstream os;
    raw.keyedState->writeTo(os);
    captured.keyedState = std::make_shared<const std::string>(os.str());
  }
  std::vector<OperatorStateRestore> restores = testing::redistribute({captured}, 3);
  std::multiset<std::string> all;
  std::set<std::string> firedKeys;
  for (int i = 0; i < 3; ++i) {
    OperatorHarness<std::string> r(timerOperatorFactory()->createOperator(), i, 3);
    r.context().manualClock().setCurrentTime(1000);
    restores[i].timers = {raw.timers};
    r.open(&restores[i]);
    r.processWatermark(0, 10);
    r.context().setProcessingTime(1100);
    KeyGroupRange range = computeKeyGroupRangeForOperatorIndex(128, 3, i);
    for (const std::string& v : r.values()) {
      all.insert(v);
      std::string key = v.substr(0, v.find(' '));
      EXPECT_TRUE(range.contains(assignToKeyGroup(key, 128))) << v << " fired on subtask " << i;
      firedKeys.insert(key);
    }
    r.close();
  }
  EXPECT_EQ(all.size(), 40u);
  EXPECT_EQ(firedKeys.size(), 20u);
  for (const auto& k : keys) {
    EXPECT_EQ(all.count(k + " event 10 count=2"), 1u) << k;
    EXPECT_EQ(all.count(k + " processing 1100 count=2"), 1u) << k;
  }
}

TEST(InternalTimerServiceTest, SnapshotRestoreKeepsOnlyTheKeyGroupsOfTheRange) {
  HarnessOperatorContext ctx("timers", 0, 1, 128);
  std::vector<std::string> fired;
  internal::InternalTimerService<std::string, VoidNamespace> timers;
  auto record = [&](const char* what) {
    return [&fired, what](const internal::TimerData<std::string, VoidNamespace>& t) {
      fired.push_back(std::string(what) + " " + t.key + " " + std::to_string(t.timestamp));
    };
  };
  timers.init(ctx, 128, record("event"), record("processing"));
  for (int i = 0; i < 50; ++i) {
    std::string key = "key" + std::to_string(i);
    timers.registerEventTimeTimer(key, VoidNamespace{}, i);
    timers.registerEventTimeTimer(key, VoidNamespace{}, i);  // de-duplicated
    timers.registerProcessingTimeTimer(key, VoidNamespace{}, 2'000'000 + i);
  }
  EXPECT_EQ(timers.numEventTimeTimers(), 50u);
  EXPECT_EQ(timers.numProcessingTimeTimers(), 50u);
  const std::string snapshot = timers.snapshot();

  size_t restoredEvent = 0, restoredProcessing = 0;
  for (int sub = 0; sub < 4; ++sub) {
    KeyGroupRange range = computeKeyGroupRangeForOperatorIndex(128, 4, sub);
    HarnessOperatorContext c("timers", sub, 4, 128);
    internal::InternalTimerService<std::string, VoidNamespace> restored;
    restored.init(c, 128, record("event"), record("processing"));
    restored.restore(snapshot, range);
    restored.forEachTimer(TimeDomain::EVENT_TIME, [&](const auto& t) {
      EXPECT_TRUE(range.contains(assignToKeyGroup(t.key, 128))) << t.key;
    });
    restoredEvent += restored.numEventTimeTimers();
    restoredProcessing += restored.numProcessingTimeTimers();
    // Restored processing timers are armed on the new context.
    const size_t pending = restored.numProcessingTimeTimers();
    fired.clear();
    c.setProcessingTime(3'000'000);
    EXPECT_EQ(fired.size(), pending);
    EXPECT_EQ(restored.numProcessingTimeTimers(), 0u);
  }
  EXPECT_EQ(restoredEvent, 50u);
  EXPECT_EQ(restoredProcessing, 50u);

  // The original still fires everything, in timestamp order.
  fired.clear();
  timers.advanceWatermark(4);
  EXPECT_THAT(fired, ElementsAre("event key0 0", "event key1 1", "event key2 2", "event key3 3",
                                 "event key4 4"));
}

TEST(ProcessFunctionTimersTest, NonKeyedProcessFunctionsCannotRegisterTimers) {
  struct Registers final : ProcessFunction<int64_t, int64_t> {
    void processElement(const int64_t& v, Context& ctx, Collector<int64_t>& out) override {
      out.collect(ctx.timerService().currentWatermark());
      ctx.timerService().registerEventTimeTimer(v);
    }
  };
  StreamExecutionEnvironment env;
  auto out = env.fromElements(int64_t{1}).process(Registers{});
  OperatorHarness<int64_t> h(env.getStreamGraph().node(out.getId()).factory->createOperator());
  h.open();
  EXPECT_THROW(h.processElement<int64_t>(0, 5), SluiceException);
}

// --- mini-cluster ---------------------------------------------------------------

class OneTimerPerElement final
    : public KeyedProcessFunction<std::string, std::pair<std::string, int64_t>, std::string> {
 public:
  void processElement(const std::pair<std::string, int64_t>& e, Context& ctx,
                      Collector<std::string>&) override {
    ctx.timerService().registerEventTimeTimer(e.second + 1000);
  }
  void onTimer(int64_t ts, OnTimerContext& ctx, Collector<std::string>& out) override {
    out.collect(ctx.getCurrentKey() + "@" + std::to_string(ts));
  }
};

TEST(MiniClusterTimersTest, EventTimersFireAtTheEndOfInputThanksToTheMaxWatermark) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  // A manual clock that never moves: no periodic watermark is ever emitted,
  // only the maximum one at the end of input.
  env.setClock(std::make_shared<ManualClock>(0));
  using E = std::pair<std::string, int64_t>;
  auto strategy = WatermarkStrategy<E>::forBoundedOutOfOrderness(std::chrono::milliseconds(5))
                      .withTimestampAssigner([](const E& e, int64_t) { return e.second; });
  std::vector<std::string> out = env.fromElements(E{"a", 1}, E{"b", 2}, E{"a", 3}, E{"c", 4})
                                     .assignTimestampsAndWatermarks(strategy)
                                     .keyBy([](const E& e) { return e.first; })
                                     .process(OneTimerPerElement{})
                                     .executeAndCollect("timers at end of input");
  EXPECT_THAT(out, UnorderedElementsAre("a@1001", "b@1002", "a@1003", "c@1004"));
}

TEST(MiniClusterTimersTest, DroppedLateRecordsAreCounted) {
  using E = std::pair<std::string, int64_t>;
  // A punctuated generator: every event emits its own timestamp as watermark.
  struct Punctuated final : WatermarkGenerator<E> {
    void onEvent(const E&, int64_t ts, WatermarkOutput& out) override {
      out.emitWatermark(Watermark{ts});
    }
    void onPeriodicEmit(WatermarkOutput&) override {}
  };
  StreamExecutionEnvironment env;
  env.setParallelism(1);
  env.setClock(std::make_shared<ManualClock>(0));
  auto strategy = WatermarkStrategy<E>::forGenerator([] {
                    return std::make_unique<Punctuated>();
                  }).withTimestampAssigner([](const E& e) { return e.second; });
  auto buffer = std::make_shared<internal::CollectBuffer<E>>();
  env.fromElements(E{"a", 1}, E{"a", 12}, E{"a", 3}, E{"a", 5}, E{"a", 15})
      .assignTimestampsAndWatermarks(strategy)
      .keyBy([](const E& e) { return e.first; })
      .window(TumblingEventTimeWindows::of(std::chrono::milliseconds(10)))
      .sum(1)
      .sinkTo(CollectSink<E>(buffer), "collect");
  JobExecutionResult result = env.execute("late records");
  // 3 and 5 arrive after the watermark 12 closed [0, 10).
  EXPECT_EQ(result.getCounter("numLateRecordsDropped"), 2);
  EXPECT_THAT(buffer->take(), ElementsAre(E{"a", 1}, E{"a", 27}));
}

// --- watermark strategies ------------------------------------------------------------

// Records everything an operator emits, watermark status included.
template <class T>
class RecordingOutput final : public Output<T> {
 public:
  void collect(const StreamRecord<T>& r) override {
    events.push_back("record " + std::to_string(r.timestamp));
  }
  void emitWatermark(Watermark w) override {
    events.push_back("watermark " + std::to_string(w.timestamp));
  }
  void emitWatermarkStatus(WatermarkStatus s) override {
    events.push_back(s == WatermarkStatus::kIdle ? "idle" : "active");
  }
  std::vector<std::string> take() {
    std::vector<std::string> e = std::move(events);
    events.clear();
    return e;
  }
  std::vector<std::string> events;
};

class WatermarkStrategyTest : public ::testing::Test {
 protected:
  using E = std::pair<std::string, int64_t>;
  void start(const WatermarkStrategy<E>& strategy) {
    StreamExecutionEnvironment env;
    auto out = env.fromElements(E{"x", 0}).assignTimestampsAndWatermarks(strategy);
    op_ = env.getStreamGraph().node(out.getId()).factory->createOperator();
    ctx_.config().set(options::kPipelineAutoWatermarkInterval, std::chrono::milliseconds(100));
    ctx_.manualClock().setCurrentTime(0);
    op_->setup(ctx_, out_);
    op_->initializeState(nullptr);
    op_->open();
  }
  void TearDown() override {
    if (op_) op_->close();
  }
  void element(int64_t ts) {
    StreamRecord<E> r(E{"x", ts});
    static_cast<Input<E>*>(op_->inputPointer(0))->processElement(r);
  }
  static WatermarkStrategy<E> withTimestamps(WatermarkStrategy<E> s) {
    return s.withTimestampAssigner([](const E& e, int64_t) { return e.second; });
  }

  HarnessOperatorContext ctx_{"watermarks", 0, 1, 128};
  RecordingOutput<E> out_;
  std::unique_ptr<StreamOperatorBase> op_;
};

TEST_F(WatermarkStrategyTest, BoundedOutOfOrdernessEmitsMaxMinusDelayMinusOneAndNeverGoesBack) {
  start(withTimestamps(
      WatermarkStrategy<E>::forBoundedOutOfOrderness(std::chrono::milliseconds(20))));
  ctx_.setProcessingTime(100);  // nothing seen yet: no watermark
  EXPECT_THAT(out_.take(), ElementsAre());
  element(10);
  element(50);
  element(30);
  EXPECT_THAT(out_.take(), ElementsAre("record 10", "record 50", "record 30"));
  ctx_.setProcessingTime(200);
  EXPECT_THAT(out_.take(), ElementsAre("watermark 29"));  // 50 - 20 - 1
  element(5);                                             // late: does not move it
  ctx_.setProcessingTime(300);
  EXPECT_THAT(out_.take(), ElementsAre("record 5"));  // 29 again is not re-emitted
  element(100);
  ctx_.setProcessingTime(399);
  EXPECT_THAT(out_.take(), ElementsAre("record 100"));  // the interval has not passed
  ctx_.setProcessingTime(400);
  EXPECT_THAT(out_.take(), ElementsAre("watermark 79"));
  // The end of input passes the maximum watermark.
  op_->processWatermark(0, Watermark{kMaxTimestamp});
  EXPECT_THAT(out_.take(), ElementsAre("watermark " + std::to_string(kMaxTimestamp)));
}

TEST_F(WatermarkStrategyTest, MonotonousTimestampsEmitMaxMinusOne) {
  start(withTimestamps(WatermarkStrategy<E>::forMonotonousTimestamps()));
  element(7);
  ctx_.setProcessingTime(100);
  EXPECT_THAT(out_.take(), ElementsAre("record 7", "watermark 6"));
  // Watermarks from upstream are not forwarded (only the final maximum).
  op_->processWatermark(0, Watermark{1000});
  EXPECT_THAT(out_.take(), ElementsAre());
}

TEST_F(WatermarkStrategyTest, WithIdlenessMarksTheOutputIdleAndActiveAgain) {
  start(withTimestamps(WatermarkStrategy<E>::forBoundedOutOfOrderness(std::chrono::milliseconds(0))
                           .withIdleness(std::chrono::milliseconds(250))));
  element(10);
  ctx_.setProcessingTime(100);
  ctx_.setProcessingTime(200);
  EXPECT_THAT(out_.take(), ElementsAre("record 10", "watermark 9"));  // not idle within 250 ms
  for (int64_t t = 300; t <= 500; t += 100) ctx_.setProcessingTime(t);
  EXPECT_THAT(out_.take(), ElementsAre("idle"));  // idle once 250 ms passed without events
  ctx_.setProcessingTime(600);
  EXPECT_THAT(out_.take(), ElementsAre());  // marked once
  element(20);
  ctx_.setProcessingTime(700);
  // As in Flink, the output becomes active with the next watermark, not
  // with the record.
  EXPECT_THAT(out_.take(), ElementsAre("record 20", "active", "watermark 19"));
}

TEST_F(WatermarkStrategyTest, IngestionTimeStampsRecordsWithTheClock) {
  start(WatermarkStrategy<E>::forIngestionTime());
  ctx_.manualClock().setCurrentTime(40);
  element(999);  // its own timestamp is ignored
  ctx_.manualClock().setCurrentTime(70);
  element(1);
  ctx_.setProcessingTime(100);
  EXPECT_THAT(out_.take(), ElementsAre("record 40", "record 70", "watermark 69"));
}

// The operator passes the record on stamped in place, not copied; the
// caller's record (which a fan-out hands to its next output) must come back
// with the value and timestamp it had.
TEST_F(WatermarkStrategyTest, StampsRecordsInPlaceAndRestoresTheCallersTimestamp) {
  start(withTimestamps(WatermarkStrategy<E>::noWatermarks()));
  StreamRecord<E> r(E{"x", 30}, 7);
  static_cast<Input<E>*>(op_->inputPointer(0))->processElement(r);
  StreamRecord<E> unstamped(E{"y", 50});
  static_cast<Input<E>*>(op_->inputPointer(0))->processElement(unstamped);
  EXPECT_THAT(out_.take(), ElementsAre("record 30", "record 50"));
  EXPECT_EQ(r.value, (E{"x", 30}));
  EXPECT_TRUE(r.hasTimestamp);
  EXPECT_EQ(r.timestamp, 7);
  EXPECT_FALSE(unstamped.hasTimestamp);
  EXPECT_EQ(unstamped.value, (E{"y", 50}));
}

TEST_F(WatermarkStrategyTest, NoWatermarksEmitsNone) {
  start(withTimestamps(WatermarkStrategy<E>::noWatermarks()));
  element(10);
  ctx_.setProcessingTime(1000);
  EXPECT_THAT(out_.take(), ElementsAre("record 10"));
}

// --- a source that generates watermarks ------------------------------------

// Every element as "value@timestamp wm=<watermark the operator had seen>",
// and a timer of each element's own timestamp firing as "fired@timestamp".
class TraceTime final
    : public KeyedProcessFunction<int, std::pair<std::string, int64_t>, std::string> {
 public:
  void processElement(const std::pair<std::string, int64_t>& e, Context& ctx,
                      Collector<std::string>& out) override {
    out.collect(e.first + "@" + std::to_string(ctx.timestamp().value_or(-1)) +
                " wm=" + std::to_string(ctx.timerService().currentWatermark()));
    ctx.timerService().registerEventTimeTimer(e.second);
  }
  void onTimer(int64_t ts, OnTimerContext&, Collector<std::string>& out) override {
    out.collect("fired@" + std::to_string(ts));
  }
};

enum class Stamping { kInTheSource, kOperatorAfterIt };

// Events with strings, so that the source's move of a value is exercised:
// one key, parallelism 1, the source chained to the process function.
std::vector<std::string> traceJob(Stamping where,
                                  const WatermarkStrategy<std::pair<std::string, int64_t>>& s) {
  using E = std::pair<std::string, int64_t>;
  StreamExecutionEnvironment env;
  env.setParallelism(1);
  // Never moves: no periodic watermark, only what onEvent and the end of
  // input emit.
  env.setClock(std::make_shared<ManualClock>(0));
  static const std::vector<E> kEvents = {
      {"a-fairly-long-string-one", 10}, {"b", 30}, {"c", 20}, {"d-another-long-string-here", 40}};
  GeneratorSource source([](int64_t i) { return kEvents[static_cast<size_t>(i)]; },
                         static_cast<int64_t>(kEvents.size()));
  auto stream = where == Stamping::kInTheSource
                    ? env.fromSource(std::move(source), s, "Events")
                    : env.fromSource(std::move(source), "Events").assignTimestampsAndWatermarks(s);
  return stream.keyBy([](const E&) { return 0; }).process(TraceTime{}).executeAndCollect("trace");
}

struct Punctuated final : WatermarkGenerator<std::pair<std::string, int64_t>> {
  void onEvent(const std::pair<std::string, int64_t>&, int64_t ts, WatermarkOutput& out) override {
    out.emitWatermark(Watermark{ts});
  }
  void onPeriodicEmit(WatermarkOutput&) override {}
};

class SourceWatermarksTest : public ::testing::TestWithParam<Stamping> {};

// A punctuated watermark follows the event it was made for, in the source
// as in the operator (Flink's SourceOutputWithWatermarks): each element
// sees the watermark of the element before it, and a timer fires once the
// next watermark passes it.
TEST_P(SourceWatermarksTest, PunctuatedWatermarksFollowTheirEvent) {
  using E = std::pair<std::string, int64_t>;
  auto strategy = WatermarkStrategy<E>::forGenerator([] {
                    return std::make_unique<Punctuated>();
                  }).withTimestampAssigner([](const E& e) { return e.second; });
  const std::string kMin = std::to_string(kMinTimestamp);
  // c's watermark (20) is not emitted: it would go back. c's timer, already
  // due, fires with the next watermark (40), as in Flink.
  EXPECT_THAT(
      traceJob(GetParam(), strategy),
      ElementsAre("a-fairly-long-string-one@10 wm=" + kMin, "fired@10", "b@30 wm=10", "fired@30",
                  "c@20 wm=30", "d-another-long-string-here@40 wm=30", "fired@20", "fired@40"));
}

// A periodic generator's events move through the source intact; with a
// clock that never reaches the interval, only the end of input's maximum
// watermark fires the timers.
TEST_P(SourceWatermarksTest, PeriodicGeneratorsSeeEveryEventAndTheEndFiresTheTimers) {
  using E = std::pair<std::string, int64_t>;
  auto strategy = WatermarkStrategy<E>::forBoundedOutOfOrderness(std::chrono::milliseconds(5))
                      // A value moved away before the assigner saw it would read -1.
                      .withTimestampAssigner([](const E& e, int64_t) {
                        return e.first.empty() ? int64_t{-1} : e.second;
                      })
                      .withIdleness(std::chrono::seconds(1));
  const std::string kMin = std::to_string(kMinTimestamp);
  EXPECT_THAT(traceJob(GetParam(), strategy),
              ElementsAre("a-fairly-long-string-one@10 wm=" + kMin, "b@30 wm=" + kMin,
                          "c@20 wm=" + kMin, "d-another-long-string-here@40 wm=" + kMin, "fired@10",
                          "fired@20", "fired@30", "fired@40"));
}

INSTANTIATE_TEST_SUITE_P(Both, SourceWatermarksTest,
                         ::testing::Values(Stamping::kInTheSource, Stamping::kOperatorAfterIt),
                         [](const ::testing::TestParamInfo<Stamping>& info) {
                           return info.param == Stamping::kInTheSource ? "InTheSource"
                                                                       : "OperatorAfterIt";
                         });

// A subclass may emit in onEvent, so only the built-in classes say they
// never do.
TEST(SourceWatermarksShapeTest, OnlyBuiltInGeneratorsSayTheyEmitOnlyPeriodically) {
  struct Punctuating final : BoundedOutOfOrdernessWatermarks<int> {
    Punctuating() : BoundedOutOfOrdernessWatermarks<int>(std::chrono::milliseconds(1)) {}
  };
  EXPECT_TRUE(
      BoundedOutOfOrdernessWatermarks<int>(std::chrono::milliseconds(1)).emitsOnlyPeriodically());
  EXPECT_TRUE(AscendingTimestampsWatermarks<int>().emitsOnlyPeriodically());
  EXPECT_TRUE(NoWatermarksGenerator<int>().emitsOnlyPeriodically());
  EXPECT_FALSE(Punctuating().emitsOnlyPeriodically());
}

// fromSource(source, strategy, name) makes one operator, as Flink's does;
// assignTimestampsAndWatermarks adds its own.
TEST(SourceWatermarksShapeTest, AStrategyGivenToTheSourceAddsNoOperator) {
  using E = std::pair<std::string, int64_t>;
  auto strategy = WatermarkStrategy<E>::forMonotonousTimestamps();
  auto names = [](const StreamExecutionEnvironment& env) {
    std::vector<std::string> out;
    for (const StreamNode& n : env.getStreamGraph().nodes()) out.push_back(n.name);
    return out;
  };
  GeneratorSource source([](int64_t i) { return E{"x", i}; }, 3);
  auto sink = std::make_shared<internal::CollectBuffer<E>>();
  StreamExecutionEnvironment inSource;
  inSource.fromSource(source, strategy, "Events").sinkTo(CollectSink<E>(sink), "Sink");
  EXPECT_THAT(names(inSource), ElementsAre("Source: Events", "Sink"));
  StreamExecutionEnvironment after;
  after.fromSource(source, "Events")
      .assignTimestampsAndWatermarks(strategy)
      .sinkTo(CollectSink<E>(sink), "Sink");
  EXPECT_THAT(names(after), ElementsAre("Source: Events", "Timestamps/Watermarks", "Sink"));
}

}  // namespace
}  // namespace timers_test
}  // namespace sluice
