// The session window operator against the general one, and its state:
//   - differential: random input (several keys, out of order, late, merges
//     that extend and bridge sessions, sessions that touch) into event-time
//     sessions of a random gap, allowed lateness and late side output; the
//     session operator, straight and restored (or rescaled) after every
//     step, must emit after each step what the general operator emits
//     straight through: window results, late elements, the window
//     function's clear() calls (made visible through a side output) and
//     numLateRecordsDropped;
//   - a snapshot of the general operator's sessions, taken at a random step,
//     restores into the session operator (at the same and at another
//     parallelism), which goes on as the general operator would have;
//   - the snapshots one operator cannot take over from the other fail the
//     restore with an error that says what to do;
//   - which operator the API picks.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/sluice.h>
#include <sluice/testing.h>

#include "harness/operator_runner.h"
#include "unit/windows/window_differential.h"

namespace sluice {
namespace session_window_test {
namespace {

using std::chrono::milliseconds;
using namespace window_differential;

// Not commutative: the order in which merged sessions combine shows.
Ev concatReduce(const Ev& a, const Ev& b) { return {a.first, a.second * 7 + b.second}; }

struct Shape {
  int64_t gap = 10;
  int64_t lateness = 0;
  bool lateSide = false;
  bool passThrough = false;  // aggregate() without window function, else reduce + process
  std::string describe() const {
    return "gap " + std::to_string(gap) + " lateness " + std::to_string(lateness) +
           (lateSide ? " late-side" : " late-drop") + (passThrough ? " aggregate" : " process");
  }
};

// The operator of `shape`'s sessions, from a job built with slicing on or
// off; checks that the expected operator was chosen.
template <class OUT>
std::shared_ptr<const OperatorFactory> windowOperator(const Shape& shape, bool fast) {
  Configuration config;
  config.set(options::kPipelineWindowSlicing, fast);
  StreamExecutionEnvironment env(config);
  auto ws = env.fromElements(Ev{"unused", 0})
                .keyBy([](const Ev& e) { return e.first; })
                .window(EventTimeSessionWindows::withGap(milliseconds(shape.gap)));
  if (shape.lateness > 0) ws.allowedLateness(milliseconds(shape.lateness));
  if (shape.lateSide) ws.sideOutputLateData(kLateTag);
  int id;
  if constexpr (std::is_same_v<OUT, Ev>) {
    id = ws.aggregate(SumAggregate{}).getId();
  } else {
    id = ws.reduce(&concatReduce, CountingProcess{/*withWatermark=*/true}).getId();
  }
  const StreamNode& node = env.getStreamGraph().node(id);
  EXPECT_EQ(node.name.rfind("SessionWindow(", 0) == 0, fast) << node.name;
  return node.factory;
}

// Elements around the watermark (some behind it, some exactly a gap or a
// session's end apart), watermarks that move by 0 to 2 gaps.
std::vector<Step> randomSteps(std::mt19937_64& rng, int n, int64_t gap) {
  std::vector<Step> steps;
  int64_t watermark = 0;
  std::vector<int64_t> recent;  // timestamps, to place elements a gap apart
  for (int i = 0; i < n; ++i) {
    Step s;
    if (rng() % 10 < 3) {
      s.kind = Step::kWatermark;
      watermark += static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * gap + 1));
      s.ts = watermark;
    } else {
      s.element = Ev{std::string(1, static_cast<char>('a' + rng() % 3)),
                     static_cast<int64_t>(1 + rng() % 9)};
      if (!recent.empty() && rng() % 4 == 0) {
        const int64_t base = recent[rng() % recent.size()];
        s.ts = base + (rng() % 2 ? gap : -gap);  // touching sessions
      } else {
        s.ts = watermark + static_cast<int64_t>(rng() % static_cast<uint64_t>(4 * gap)) - gap;
      }
      recent.push_back(s.ts);
    }
    steps.push_back(s);
  }
  steps.push_back(Step{Step::kEnd, {}, 0});
  return steps;
}

Shape randomShape(std::mt19937_64& rng) {
  Shape s;
  s.gap = static_cast<int64_t>(1 + rng() % 12);
  const int64_t latenesses[] = {0, 0, 3, 15};
  s.lateness = latenesses[rng() % 4];
  s.lateSide = rng() % 2 == 0;
  s.passThrough = rng() % 3 == 0;
  return s;
}

// The session operator straight, and restored and rescaled after every
// step and after every third (state built over several steps, then
// snapshotted), against the general one.
template <class OUT>
void compare(const Shape& shape, const std::vector<Step>& steps) {
  window_differential::compare<OUT>(windowOperator<OUT>(shape, false),
                                    windowOperator<OUT>(shape, true), steps, {1, 3});
}

TEST(SessionWindowTest, BehavesAsTheGeneralOperatorOnRandomInput) {
  std::mt19937_64 rng(2027);
  int fired = 0;
  for (int round = 0; round < 48; ++round) {
    const Shape shape = randomShape(rng);
    SCOPED_TRACE("round " + std::to_string(round) + ": " + shape.describe());
    const std::vector<Step> steps = randomSteps(rng, 60, shape.gap);
    if (shape.passThrough) {
      compare<Ev>(shape, steps);
    } else {
      compare<Out>(shape, steps);
    }
    if (::testing::Test::HasFatalFailure()) return;
    ++fired;
  }
  EXPECT_EQ(fired, 48);
}

// --- restoring the other operator's state ---------------------------------------

// What `op` emits for steps [from, end), after each step; the watermark of
// the steps before `from` is sent again first, as the runtime does after a
// restore.
template <class OUT>
std::vector<std::vector<std::string>> feed(Subtasks<OUT>& op, const std::vector<Step>& steps,
                                           size_t from) {
  int64_t watermark = kMinTimestamp;
  for (size_t i = 0; i < from; ++i) {
    if (steps[i].kind == Step::kWatermark) watermark = steps[i].ts;
  }
  if (watermark != kMinTimestamp) op.watermark(watermark);
  std::vector<std::vector<std::string>> out;
  out.push_back(op.take());
  for (size_t i = from; i < steps.size(); ++i) {
    op.step(steps[i]);
    out.push_back(op.take());
  }
  return out;
}

TEST(SessionWindowTest, TakesOverTheGeneralOperatorsSessions) {
  std::mt19937_64 rng(77);
  for (int round = 0; round < 16; ++round) {
    Shape shape = randomShape(rng);
    shape.passThrough = false;
    SCOPED_TRACE("round " + std::to_string(round) + ": " + shape.describe());
    const std::vector<Step> steps = randomSteps(rng, 50, shape.gap);
    const size_t cut = 5 + rng() % 40;
    // The general operator straight through, from the cut on.
    Subtasks<Out> straight(windowOperator<Out>(shape, false), 1, nullptr);
    for (size_t i = 0; i < cut; ++i) straight.step(steps[i]);
    straight.take();
    const auto expected = feed(straight, steps, cut);
    Subtasks<Out> general(windowOperator<Out>(shape, false), 1, nullptr);
    for (size_t i = 0; i < cut; ++i) general.step(steps[i]);
    expectRestoredAtOneAndTwo<Out>(
        windowOperator<Out>(shape, true), general.snapshot(),
        [&](Subtasks<Out>& sessions) { return feed(sessions, steps, cut); }, expected);
    if (::testing::Test::HasFailure()) return;
  }
}

// On hashmap a snapshot takes a copy of the sessions and serializes it when
// it is written, while the task goes on: restored from a snapshot written
// after the operator ran on to the end (sessions merged, fired, cleaned
// up), the operator goes on from where the snapshot was taken.
TEST(SessionWindowTest, ASnapshotWrittenLaterHoldsTheSessionsItWasTakenWith) {
  std::mt19937_64 rng(91);
  for (int round = 0; round < 16; ++round) {
    Shape shape = randomShape(rng);
    shape.passThrough = false;
    SCOPED_TRACE("round " + std::to_string(round) + ": " + shape.describe());
    const std::vector<Step> steps = randomSteps(rng, 50, shape.gap);
    const size_t cut = 5 + rng() % 40;
    Subtasks<Out> straight(windowOperator<Out>(shape, true), 1, nullptr);
    for (size_t i = 0; i < cut; ++i) straight.step(steps[i]);
    straight.take();
    OperatorStateSnapshot taken = straight.harnesses[0]->snapshotState(1);
    const auto expected = feed(straight, steps, cut);  // runs on before the write
    straight.harnesses.clear();  // and is gone (the copy must not point into it)
    const std::vector<testing::CapturedSnapshot> written{
        test::writeOnAnotherThread(std::move(taken))};
    expectRestoredAtOneAndTwo<Out>(
        windowOperator<Out>(shape, true), written,
        [&](Subtasks<Out>& restored) { return feed(restored, steps, cut); }, expected);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(SessionWindowTest, TheGeneralOperatorRefusesSessions) {
  Shape shape;
  Subtasks<Out> sessions(windowOperator<Out>(shape, true), 1, nullptr);
  sessions.step(Step{Step::kElement, {"a", 1}, 3});
  const auto restores = testing::redistribute(sessions.snapshot(), 1);
  const std::string error =
      errorOf([&] { Subtasks<Out> general(windowOperator<Out>(shape, false), 1, &restores); });
  EXPECT_NE(error.find("window-sessions"), std::string::npos) << error;
  EXPECT_NE(error.find("pipeline.window.slicing: true"), std::string::npos) << error;
}

// The general operator's tumbling windows are not sessions.
TEST(SessionWindowTest, RefusesTheGeneralOperatorsTumblingWindows) {
  Configuration config;
  config.set(options::kPipelineWindowSlicing, false);
  StreamExecutionEnvironment env(config);
  const int id = env.fromElements(Ev{"unused", 0})
                     .keyBy([](const Ev& e) { return e.first; })
                     .window(TumblingEventTimeWindows::of(milliseconds(10)))
                     .reduce(&concatReduce, CountingProcess{/*withWatermark=*/true})
                     .getId();
  Subtasks<Out> general(env.getStreamGraph().node(id).factory, 1, nullptr);
  general.step(Step{Step::kElement, {"a", 1}, 3});
  const auto restores = testing::redistribute(general.snapshot(), 1);
  const std::string error =
      errorOf([&] { Subtasks<Out> sessions(windowOperator<Out>(Shape{}, true), 1, &restores); });
  EXPECT_NE(error.find("not session windows"), std::string::npos) << error;
  EXPECT_NE(error.find("pipeline.window.slicing: false"), std::string::npos) << error;
}

// Slices of the sliced operator are not sessions.
TEST(SessionWindowTest, RefusesSlices) {
  StreamExecutionEnvironment env;
  const int id = env.fromElements(Ev{"unused", 0})
                     .keyBy([](const Ev& e) { return e.first; })
                     .window(TumblingEventTimeWindows::of(milliseconds(10)))
                     .reduce(&concatReduce, CountingProcess{/*withWatermark=*/true})
                     .getId();
  ASSERT_EQ(env.getStreamGraph().node(id).name.rfind("SlicingWindow(", 0), 0u);
  Subtasks<Out> sliced(env.getStreamGraph().node(id).factory, 1, nullptr);
  sliced.step(Step{Step::kElement, {"a", 1}, 3});
  const auto restores = testing::redistribute(sliced.snapshot(), 1);
  const std::string error =
      errorOf([&] { Subtasks<Out> sessions(windowOperator<Out>(Shape{}, true), 1, &restores); });
  EXPECT_NE(error.find("window-slices"), std::string::npos) << error;
  EXPECT_NE(error.find("not sessions"), std::string::npos) << error;
}

// Keys whose sessions are all cleaned up leave the table, and the schedule
// does not grow with the number of elements of a growing session.
TEST(SessionWindowTest, KeysLeaveTheTableAndTheScheduleStaysSmall) {
  using Op = internal::SessionWindowOperator<std::string, Ev, Ev, Ev, Ev>;
  Shape shape;
  shape.passThrough = true;
  auto factory = windowOperator<Ev>(shape, true);
  Harness<Ev> h(factory->createOperator());
  h.context().config().set(options::kStateBackendType, std::string("hashmap"));
  h.open();
  auto* op = dynamic_cast<Op*>(&h.op());
  ASSERT_NE(op, nullptr);
  for (int64_t ts = 0; ts < 1000; ++ts) {
    h.processElement<Ev>(0, Ev{"k" + std::to_string(ts % 7), 1}, ts);
    if (ts % 50 == 0) h.processWatermark(0, ts - 20);
  }
  EXPECT_EQ(op->numKeys(), 7u);
  EXPECT_EQ(op->numSessions(), 7u);
  EXPECT_LE(op->queueSize(), 14u);
  h.processWatermark(0, 2000);
  EXPECT_EQ(op->numKeys(), 0u);
  EXPECT_EQ(op->numSessions(), 0u);
  // One session per key, every element a gap-extension: sum of all values.
  int64_t total = 0;
  for (const auto& r : h.output().records) total += r.value.second;
  EXPECT_EQ(total, 1000);
  EXPECT_EQ(h.output().records.size(), 7u);
}

TEST(SessionWindowTest, ChoosesTheGeneralOperatorWhereSessionsDoNotApply) {
  auto nameOf = [](auto build, bool slicing, const std::string& backend = "hashmap") {
    Configuration config;
    config.set(options::kPipelineWindowSlicing, slicing);
    config.set(options::kStateBackendType, backend);
    StreamExecutionEnvironment env(config);
    auto keyed = env.fromElements(Ev{"unused", 0}).keyBy([](const Ev& e) { return e.first; });
    const int id = build(keyed);
    return env.getStreamGraph().node(id).name;
  };
  auto staticGap = [](auto keyed) {
    return keyed.window(EventTimeSessionWindows::withGap(milliseconds(5)))
        .aggregate(SumAggregate{})
        .getId();
  };
  EXPECT_EQ(nameOf(staticGap, true), "SessionWindow(EventTimeSessionWindows, aggregate)");
  EXPECT_EQ(nameOf(staticGap, false).rfind("Window(", 0), 0u);
  EXPECT_EQ(nameOf(staticGap, true, "rocksdb").rfind("Window(", 0), 0u);
  EXPECT_EQ(nameOf(
                [](auto keyed) {
                  return keyed.window(EventTimeSessionWindows::withGap(milliseconds(5)))
                      .trigger(EventTimeTrigger::create())
                      .sum(1)
                      .getId();
                },
                true),
            "SessionWindow(EventTimeSessionWindows, reduce)");
  // Dynamic gaps, processing time, full contents, another trigger, an evictor.
  const std::string dynamic = nameOf(
      [](auto keyed) {
        return keyed
            .window(EventTimeSessionWindows::withDynamicGap([](const Ev& e) { return e.second; }))
            .aggregate(SumAggregate{})
            .getId();
      },
      true);
  EXPECT_EQ(dynamic.rfind("Window(", 0), 0u) << dynamic;
  const std::string processing = nameOf(
      [](auto keyed) {
        return keyed.window(ProcessingTimeSessionWindows::withGap(milliseconds(5)))
            .aggregate(SumAggregate{})
            .getId();
      },
      true);
  EXPECT_EQ(processing.rfind("Window(", 0), 0u) << processing;
  const std::string process = nameOf(
      [](auto keyed) {
        return keyed.window(EventTimeSessionWindows::withGap(milliseconds(5)))
            .process(CountingProcess{/*withWatermark=*/true})
            .getId();
      },
      true);
  EXPECT_EQ(process.rfind("Window(", 0), 0u) << process;
  const std::string counted = nameOf(
      [](auto keyed) {
        return keyed.window(EventTimeSessionWindows::withGap(milliseconds(5)))
            .trigger(CountTrigger::of(2))
            .aggregate(SumAggregate{})
            .getId();
      },
      true);
  EXPECT_EQ(counted.rfind("Window(", 0), 0u) << counted;
  const std::string evicting = nameOf(
      [](auto keyed) {
        return keyed.window(EventTimeSessionWindows::withGap(milliseconds(5)))
            .evictor(CountEvictor::of(2))
            .aggregate(SumAggregate{})
            .getId();
      },
      true);
  EXPECT_EQ(evicting.rfind("Window(", 0), 0u) << evicting;
}

}  // namespace
}  // namespace session_window_test
}  // namespace sluice
