// The public test kit (<sluice/testing.h>) as a user meets it: harnesses of
// the operators the DataStream API builds, driven element by element, with
// timers, side outputs, snapshots restored into fresh harnesses at another
// parallelism, and both state backends.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sluice/sluice.h>
#include <sluice/testing.h>

namespace kit_test {

struct Event {
  std::string user;
  int64_t amount = 0;
  bool operator==(const Event&) const = default;
};
SLUICE_STRUCT(Event, user, amount)

namespace testing_kit_test {
namespace {

using sluice::testing::harnessFor;
using sluice::testing::HarnessOptions;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using Total = std::pair<std::string, int64_t>;

// Sums each user's amounts and emits the sum 10 ms of event time after the
// user's first event.
class DelayedTotal : public sluice::KeyedProcessFunction<std::string, Event, Total> {
 public:
  void processElement(const Event& e, Context& ctx, sluice::Collector<Total>&) override {
    auto& sum = getRuntimeContext().getState(sluice::ValueStateDescriptor<int64_t>("sum"));
    if (!sum.value()) ctx.timerService().registerEventTimeTimer(*ctx.timestamp() + 10);
    sum.update(sum.value().value_or(0) + e.amount);
  }
  void onTimer(int64_t, OnTimerContext& ctx, sluice::Collector<Total>& out) override {
    auto& sum = getRuntimeContext().getState(sluice::ValueStateDescriptor<int64_t>("sum"));
    out.collect(Total{ctx.getCurrentKey(), *sum.value()});
    sum.clear();
  }
};

auto delayedTotals(HarnessOptions options = {}) {
  return harnessFor<Event>(
      [](auto events) { return events.keyBy(&Event::user).process(DelayedTotal()); }, options);
}

TEST(TestingKit, KeyedProcessFunctionStateAndEventTimeTimers) {
  for (const char* backend : {"hashmap", "rocksdb"}) {
    SCOPED_TRACE(backend);
    HarnessOptions options;
    options.stateBackend = backend;
    auto h = delayedTotals(options);
    h->open();
    h->processElement(Event{"alice", 3}, 100);
    h->processElement(Event{"bob", 5}, 104);
    h->processElement(Event{"alice", 4}, 105);
    h->processWatermark(109);
    EXPECT_TRUE(h->values().empty()) << "no timer is due before 110";
    h->processWatermark(110);
    EXPECT_THAT(h->values(), ElementsAre(Total{"alice", 7}));
    EXPECT_EQ(h->output().records.back().timestamp, 110) << "a timer's output has its time";
    h->processWatermark(200);
    EXPECT_THAT(h->values(), ElementsAre(Total{"alice", 7}, Total{"bob", 5}));
    EXPECT_EQ(h->output().watermarks.back().timestamp, 200) << "watermarks are forwarded";
    h->close();
  }
}

TEST(TestingKit, SnapshotRestoresIntoFreshHarnessesAtAnotherParallelism) {
  auto h = delayedTotals();
  h->open();
  std::map<std::string, int64_t> expected;
  for (int i = 0; i < 40; ++i) {
    const std::string user = "user" + std::to_string(i);
    h->processElement(Event{user, i}, 1000 + i);
    expected[user] = i;
  }
  const std::vector<sluice::testing::CapturedSnapshot> snapshot{h->snapshot(1)};
  h->close();

  // Two new subtasks: each gets the state and the timers of its key groups.
  const auto restores = sluice::testing::redistribute(snapshot, 2);
  std::map<std::string, int64_t> fired;
  for (int sub = 0; sub < 2; ++sub) {
    HarnessOptions options;
    options.subtask = sub;
    options.parallelism = 2;
    auto restored = delayedTotals(options);
    restored->open(&restores[sub]);
    restored->processWatermark(sluice::kMaxTimestamp);
    EXPECT_FALSE(restored->values().empty()) << "subtask " << sub << " owns some users";
    for (const Total& t : restored->values()) {
      EXPECT_TRUE(fired.emplace(t.first, t.second).second) << t.first << " fired twice";
    }
    restored->close();
  }
  EXPECT_EQ(fired, expected);
}

TEST(TestingKit, WindowWithLateDataSideOutput) {
  const sluice::OutputTag<Event> late("late");
  auto h = harnessFor<Event>([&](auto events) {
    return events.keyBy(&Event::user)
        .window(sluice::TumblingEventTimeWindows::of(std::chrono::milliseconds(10)))
        .sideOutputLateData(late)
        .sum(&Event::amount);
  });
  auto& lateEvents = h->sideOutput(late);
  h->open();
  h->processElement(Event{"a", 1}, 1);
  h->processElement(Event{"a", 2}, 9);
  h->processElement(Event{"b", 7}, 5);
  h->processElement(Event{"a", 4}, 12);
  h->processWatermark(9);
  EXPECT_THAT(h->values(), UnorderedElementsAre(Event{"a", 3}, Event{"b", 7}));
  h->processElement(Event{"a", 100}, 3);  // its window [0, 10) is gone
  EXPECT_THAT(lateEvents.values(), ElementsAre(Event{"a", 100}));
  h->processWatermark(19);
  EXPECT_THAT(h->values(), UnorderedElementsAre(Event{"a", 3}, Event{"b", 7}, Event{"a", 4}));
  h->close();
}

class Labeler : public sluice::CoMapFunction<Event, int64_t, std::string> {
 public:
  std::string map1(const Event& e) override { return e.user; }
  std::string map2(const int64_t& v) override { return "#" + std::to_string(v); }
};

TEST(TestingKit, TwoInputOperatorTakesBothInputsAndTheMinimumWatermark) {
  auto h = sluice::testing::twoInputHarnessFor<Event, int64_t>(
      [](auto events, auto numbers) { return events.connect(numbers).map(Labeler()); });
  h->open();
  h->processElement(Event{"x", 0});
  h->processElement2(int64_t{7});
  EXPECT_THAT(h->values(), ElementsAre("x", "#7"));
  h->processWatermark(0, 50);
  EXPECT_TRUE(h->output().watermarks.empty()) << "the second input has no watermark yet";
  h->processWatermark(1, 30);
  ASSERT_FALSE(h->output().watermarks.empty());
  EXPECT_EQ(h->output().watermarks.back().timestamp, 30);
  h->close();
}

TEST(TestingKit, ProcessingTimeTimersFireWhenTheManualClockMoves) {
  class Ping : public sluice::KeyedProcessFunction<std::string, Event, std::string> {
   public:
    void processElement(const Event& e, Context& ctx, sluice::Collector<std::string>&) override {
      ctx.timerService().registerProcessingTimeTimer(ctx.timerService().currentProcessingTime() +
                                                     e.amount);
    }
    void onTimer(int64_t ts, OnTimerContext& ctx, sluice::Collector<std::string>& out) override {
      out.collect(ctx.getCurrentKey() + "@" + std::to_string(ts));
    }
  };
  auto h = harnessFor<Event>([](auto e) { return e.keyBy(&Event::user).process(Ping()); });
  h->context().setProcessingTime(1000);
  h->open();
  h->processElement(Event{"p", 50});
  h->processElement(Event{"q", 20});
  h->context().setProcessingTime(1020);
  EXPECT_THAT(h->values(), ElementsAre("q@1020"));
  h->context().setProcessingTime(2000);
  EXPECT_THAT(h->values(), ElementsAre("q@1020", "p@1050"));
  h->close();
}

TEST(TestingKit, APipelineWithoutAnOperatorIsRefused) {
  try {
    harnessFor<Event>([](auto events) { return events; });
    FAIL() << "expected an exception";
  } catch (const sluice::SluiceException& e) {
    EXPECT_THAT(e.what(), HasSubstr("must append an operator"));
  }
  try {
    harnessFor<Event>([](auto events) {
      return events.map([](const Event& e) { return e.amount; }).filter([](int64_t v) {
        return v > 0;
      });
    });
    FAIL() << "expected an exception";
  } catch (const sluice::SluiceException& e) {
    EXPECT_THAT(e.what(), HasSubstr("exactly one operator"));
    EXPECT_THAT(e.what(), HasSubstr("Filter"));
    EXPECT_THAT(e.what(), HasSubstr("Map"));
  }
}

}  // namespace
}  // namespace testing_kit_test
}  // namespace kit_test
