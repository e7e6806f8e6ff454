// The sliced window operator against the general one, and its state:
//   - differential: random input (out of order, late, several keys) into
//     random tumbling, sliding and cumulating windows with random offsets,
//     allowed lateness and late side output; the sliced operator, straight
//     and restored (or rescaled) after every step, must emit after each step
//     what the general operator emits straight through: window results,
//     late elements, the window function's clear() calls (made visible
//     through a side output) and numLateRecordsDropped;
//   - the same for processing-time tumbling windows, on random elements,
//     watermarks and moves of a manual clock (often onto a window's end);
//   - a snapshot of the general operator with tumbling windows restores into
//     the sliced one (at the same and at another parallelism), which goes on
//     as the general operator would have;
//   - the snapshots neither operator can take over fail the restore with an
//     error that says what to do.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
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
namespace sliced_window_test {
namespace {

using std::chrono::milliseconds;
using namespace window_differential;

Ev sumReduce(const Ev& a, const Ev& b) { return {a.first, a.second + b.second}; }

struct Shape {
  window::AlignedWindows windows;
  int64_t lateness = 0;
  bool lateSide = false;
  bool passThrough = false;  // aggregate() without window function, else reduce + process
  std::string describe() const {
    return windows.describe() + " lateness " + std::to_string(lateness) +
           (lateSide ? " late-side" : " late-drop") + (passThrough ? " aggregate" : " process");
  }
};

template <class WS>
void configure(WS& ws, const Shape& shape) {
  if (shape.lateness > 0) ws.allowedLateness(milliseconds(shape.lateness));
  if (shape.lateSide) ws.sideOutputLateData(kLateTag);
}

// The operator of `shape`'s windows, from a job built with slicing on or off;
// checks that the expected operator was chosen.
template <class OUT>
std::shared_ptr<const OperatorFactory> windowOperator(const Shape& shape, bool slicing) {
  Configuration config;
  config.set(options::kPipelineWindowSlicing, slicing);
  StreamExecutionEnvironment env(config);
  auto keyed = env.fromElements(Ev{"unused", 0}).keyBy([](const Ev& e) { return e.first; });
  auto apply = [&](auto ws) {
    configure(ws, shape);
    if constexpr (std::is_same_v<OUT, Ev>) {
      return ws.aggregate(SumAggregate{}).getId();
    } else {
      return ws.reduce(&sumReduce, CountingProcess{}).getId();
    }
  };
  const window::AlignedWindows& w = shape.windows;
  int id = -1;
  switch (w.kind) {
    case window::AlignedKind::kTumbling:
      if (w.processingTime) {
        id = apply(keyed.window(
            TumblingProcessingTimeWindows::of(milliseconds(w.size), milliseconds(w.offset))));
      } else {
        id = apply(keyed.window(
            TumblingEventTimeWindows::of(milliseconds(w.size), milliseconds(w.offset))));
      }
      break;
    case window::AlignedKind::kSliding:
      if (w.processingTime) {
        id = apply(keyed.window(SlidingProcessingTimeWindows::of(
            milliseconds(w.size), milliseconds(w.slide), milliseconds(w.offset))));
      } else {
        id = apply(keyed.window(SlidingEventTimeWindows::of(
            milliseconds(w.size), milliseconds(w.slide), milliseconds(w.offset))));
      }
      break;
    case window::AlignedKind::kCumulating:
      id = apply(keyed.window(CumulativeEventTimeWindows::of(
          milliseconds(w.size), milliseconds(w.slide), milliseconds(w.offset))));
      break;
  }
  const StreamNode& node = env.getStreamGraph().node(id);
  EXPECT_EQ(node.name.rfind("SlicingWindow(", 0) == 0, slicing) << node.name;
  return node.factory;
}

std::vector<Step> randomSteps(std::mt19937_64& rng, int n) {
  std::vector<Step> steps;
  int64_t watermark = 0;
  for (int i = 0; i < n; ++i) {
    Step s;
    if (rng() % 10 < 3) {
      s.kind = Step::kWatermark;
      watermark += static_cast<int64_t>(rng() % 12);
      s.ts = watermark;
    } else {
      s.element = Ev{std::string(1, static_cast<char>('a' + rng() % 4)),
                     static_cast<int64_t>(1 + rng() % 100)};
      s.ts = watermark + static_cast<int64_t>(rng() % 60) - 25;
    }
    steps.push_back(s);
  }
  steps.push_back(Step{Step::kEnd, {}, 0});
  return steps;
}

// Processing time: elements (their timestamps do not matter), watermarks,
// and moves of the clock, by 0 to 11 ms, onto the last millisecond of the
// next window (windows end every `slide` ms, shifted by `offset`), so that
// elements arrive at a window's end after it fired, and (with `back`) back
// by up to 15 ms, into windows that fired.
std::vector<Step> randomProcessingTimeSteps(std::mt19937_64& rng, int n, int64_t slide,
                                            int64_t offset, bool back) {
  std::vector<Step> steps;
  int64_t clock = 0;
  for (int i = 0; i < n; ++i) {
    Step s;
    const uint64_t r = rng() % 10;
    if (r < 3) {
      s.kind = Step::kTime;
      const uint64_t move = rng() % 8;
      if (move < 4) {
        clock += static_cast<int64_t>(rng() % 12);
      } else if (move < 7 || !back) {
        const int64_t sinceEnd = clock - offset + 1;  // ms since some window's end
        const int64_t ends = sinceEnd >= 0 ? sinceEnd / slide : -((slide - 1 - sinceEnd) / slide);
        clock = (ends + 1) * slide + offset - 1;
      } else {
        clock = std::max<int64_t>(0, clock - static_cast<int64_t>(1 + rng() % 15));
      }
      s.ts = clock;
    } else if (r < 4) {
      s.kind = Step::kWatermark;
      s.ts = clock + static_cast<int64_t>(rng() % 30);
    } else {
      s.element = Ev{std::string(1, static_cast<char>('a' + rng() % 4)),
                     static_cast<int64_t>(1 + rng() % 100)};
      s.ts = static_cast<int64_t>(rng() % 100);
    }
    steps.push_back(s);
  }
  steps.push_back(Step{Step::kEnd, {}, 0});
  return steps;
}

Shape randomShape(std::mt19937_64& rng) {
  Shape s;
  const auto unit = static_cast<int64_t>(1 + rng() % 4);
  auto& w = s.windows;
  w.kind = static_cast<window::AlignedKind>(rng() % 3);
  switch (w.kind) {
    case window::AlignedKind::kTumbling:
      w.size = w.slide = unit * static_cast<int64_t>(2 + rng() % 6);
      break;
    case window::AlignedKind::kSliding:
      w.slide = unit * static_cast<int64_t>(1 + rng() % 3);
      w.size =
          w.slide * static_cast<int64_t>(1 + rng() % 4) + unit * static_cast<int64_t>(rng() % 2);
      break;
    case window::AlignedKind::kCumulating:
      w.slide = unit * static_cast<int64_t>(1 + rng() % 3);
      w.size = w.slide * static_cast<int64_t>(1 + rng() % 5);
      break;
  }
  const int64_t bound = w.kind == window::AlignedKind::kSliding ? w.slide : w.size;
  w.offset = static_cast<int64_t>(rng() % static_cast<uint64_t>(bound)) * (rng() % 2 ? 1 : -1);
  const int64_t latenesses[] = {0, 0, 4, 17};
  s.lateness = latenesses[rng() % 4];
  s.lateSide = rng() % 2 == 0;
  s.passThrough = rng() % 3 == 0;
  return s;
}

// The sliced operator straight, and restored and rescaled after every
// `restoreEvery` steps for each of those given, against the general one.
template <class OUT>
void compare(const Shape& shape, const std::vector<Step>& steps,
             std::initializer_list<int> restoreEvery = {1}) {
  window_differential::compare<OUT>(windowOperator<OUT>(shape, false),
                                    windowOperator<OUT>(shape, true), steps, restoreEvery);
}

TEST(SlicedWindowTest, BehavesAsTheGeneralOperatorOnRandomInput) {
  std::mt19937_64 rng(2026);
  for (int round = 0; round < 40; ++round) {
    const Shape shape = randomShape(rng);
    SCOPED_TRACE("round " + std::to_string(round) + ": " + shape.describe());
    const std::vector<Step> steps = randomSteps(rng, 60);
    if (shape.passThrough) {
      compare<Ev>(shape, steps, {1, 3});
    } else {
      compare<Out>(shape, steps, {1, 3});
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Tumbling and sliding processing-time windows, with elements arriving in
// the last millisecond of windows that fired and (every other round) a
// clock that goes back into windows that fired: they fire again with the
// new elements alone, as the general operator starts a purged window anew.
TEST(SlicedWindowTest, BehavesAsTheGeneralOperatorInProcessingTime) {
  std::mt19937_64 rng(1812);
  for (int round = 0; round < 48; ++round) {
    Shape shape;
    auto& w = shape.windows;
    w.processingTime = true;
    if (round % 2 == 0) {
      w.kind = window::AlignedKind::kTumbling;
      w.size = w.slide = static_cast<int64_t>(2 + rng() % 12);
    } else {
      w.kind = window::AlignedKind::kSliding;
      w.slide = static_cast<int64_t>(1 + rng() % 6);
      w.size = w.slide * static_cast<int64_t>(1 + rng() % 4) + static_cast<int64_t>(rng() % 3);
    }
    if (round % 3 == 1) {
      w.offset =
          static_cast<int64_t>(rng() % static_cast<uint64_t>(w.slide)) * (rng() % 2 ? 1 : -1);
    }
    shape.lateness = round % 3 == 0 ? 17 : 0;  // does not apply to processing time
    shape.passThrough = rng() % 3 == 0;
    SCOPED_TRACE("round " + std::to_string(round) + ": " + shape.describe());
    const std::vector<Step> steps =
        randomProcessingTimeSteps(rng, 80, w.slide, w.offset, /*back=*/round % 4 >= 2);
    // Restored after every step, the operator never snapshots windows that
    // fired and then got elements again; after every third it does.
    if (shape.passThrough) {
      compare<Ev>(shape, steps, {1, 3});
    } else {
      compare<Out>(shape, steps, {1, 3});
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// A key whose only state is a window to fire again (it fired, then an
// element came in its last millisecond) is restored with the time its
// windows fired through: an element after the restore joins the re-firing
// instead of firing the window a third time (restores after steps 2 and 5;
// the watermark steps do nothing in processing time).
TEST(SlicedWindowTest, ARestoredReFiringKeepsTheTimeItsWindowsFiredThrough) {
  auto element = [](const char* key, int64_t v) { return Step{Step::kElement, Ev{key, v}, 0}; };
  auto time = [](int64_t t) { return Step{Step::kTime, {}, t}; };
  const Step idle{Step::kWatermark, {}, 0};
  const Step end{Step::kEnd, {}, 0};
  for (bool passThrough : {false, true}) {
    Shape tumbling;
    tumbling.windows = {window::AlignedKind::kTumbling, 10, 10, 0, true};
    tumbling.passThrough = passThrough;
    Shape sliding;
    sliding.windows = {window::AlignedKind::kSliding, 10, 5, 0, true};
    sliding.passThrough = passThrough;
    // Tumbling: [0,10) fires a=1 at 9, a=2 and a=4 fire it again together.
    const std::vector<Step> atTheEnd = {element("a", 1), idle,     time(9), element("a", 2), idle,
                                        element("a", 4), time(12), end};
    // Sliding: the clock goes back from 14 to 6, into [0,10) and [5,15),
    // which both fired; a=2 and a=4 re-fire them together.
    const std::vector<Step> back = {element("a", 1), time(14), time(6), element("a", 2), idle,
                                    element("a", 4), time(20), end};
    for (const auto& [shape, steps] : {std::pair{tumbling, atTheEnd}, std::pair{sliding, back}}) {
      SCOPED_TRACE(shape.describe());
      if (passThrough) {
        compare<Ev>(shape, steps, {3});
      } else {
        compare<Out>(shape, steps, {3});
      }
    }
  }
}

// --- restoring the other operator's state ---------------------------------------

Shape tumbling(int64_t size, int64_t lateness) {
  Shape s;
  s.windows = {window::AlignedKind::kTumbling, size, size, 0};
  s.lateness = lateness;
  return s;
}

// Before: windows [0,10) fired (and waits for its lateness), [10,20) pending.
void feedBefore(Subtasks<Out>& op) {
  op.element({"a", 1}, 3);
  op.element({"b", 2}, 7);
  op.element({"a", 4}, 12);
  op.element({"c", 8}, 15);
  op.watermark(10);
}
// After: a late element re-fires [0,10) for a, the watermark fires
// [10,20), then everything ends.
void feedAfter(Subtasks<Out>& op, std::vector<std::string>& out) {
  op.watermark(10);  // the runtime sends the watermark again after a restore
  op.element({"a", 16}, 5);
  op.element({"b", 32}, 18);
  op.watermark(19);
  op.element({"d", 64}, 2);  // late: [0,10) is cleaned up at 9 + 10 = 19
  op.watermark(kMaxTimestamp);
  for (auto& l : op.take()) out.push_back(l);
}

// What feedAfter emits.
std::vector<std::string> fedAfter(Subtasks<Out>& op) {
  std::vector<std::string> out;
  feedAfter(op, out);
  return out;
}

// What feedAfter emits when the operator ran straight through (one subtask,
// no snapshot), the general one or the sliced one.
std::vector<std::string> straightThrough(const Shape& shape, bool slicing) {
  Subtasks<Out> straight(windowOperator<Out>(shape, slicing), 1, nullptr);
  feedBefore(straight);
  straight.take();
  std::vector<std::string> expected;
  feedAfter(straight, expected);
  return expected;
}

TEST(SlicedWindowTest, TakesOverTheGeneralOperatorsTumblingWindows) {
  const Shape shape = tumbling(10, 10);
  const std::vector<std::string> expected = straightThrough(shape, false);
  ASSERT_FALSE(expected.empty());

  Subtasks<Out> general(windowOperator<Out>(shape, false), 1, nullptr);
  feedBefore(general);
  general.take();
  expectRestoredAtOneAndTwo<Out>(windowOperator<Out>(shape, true), general.snapshot(), fedAfter,
                                 expected);
}

// Checkpoints one after another on one operator: the slices the first wrote
// into the backend are removed (all at once on hashmap) when it completes,
// and the second writes every slice again, including those of keys the
// first had written; restored at 1 and 2, it goes on as if uninterrupted.
TEST(SlicedWindowTest, EachOfSeveralCheckpointsHoldsEverySlice) {
  Shape sliding = tumbling(10, 10);
  sliding.windows = {window::AlignedKind::kSliding, 10, 5, 0};
  for (const Shape& shape : {tumbling(10, 10), sliding}) {
    SCOPED_TRACE(shape.describe());
    const std::vector<std::string> expected = straightThrough(shape, true);
    ASSERT_FALSE(expected.empty());

    Subtasks<Out> first(windowOperator<Out>(shape, true), 1, nullptr);
    Harness<Out>& h = *first.harnesses[0];
    first.element({"a", 1}, 3);
    first.element({"b", 2}, 7);
    (void)h.snapshot(1);
    h.notifyCheckpointComplete(1);
    first.element({"a", 4}, 12);
    first.element({"c", 8}, 15);
    first.watermark(10);
    (void)h.snapshot(2);  // before 2 completes, 3 is taken
    std::vector<testing::CapturedSnapshot> third{h.snapshot(3)};
    h.notifyCheckpointComplete(3);
    first.take();
    expectRestoredAtOneAndTwo<Out>(windowOperator<Out>(shape, true), third, fedAfter, expected);
  }
}

// On hashmap a snapshot takes a copy of the slices and serializes it when
// it is written, on the runtime's I/O thread, while the task goes on: it
// holds the slices of the moment it was taken however the operator changed
// them before the write (windows fired and cleaned up, slices added, keys
// added and gone), and even once the operator is gone.
TEST(SlicedWindowTest, ASnapshotWrittenLaterHoldsTheSlicesItWasTakenWith) {
  Shape sliding = tumbling(10, 10);
  sliding.windows = {window::AlignedKind::kSliding, 10, 5, 0};
  for (const Shape& shape : {tumbling(10, 10), sliding}) {
    SCOPED_TRACE(shape.describe());
    const std::vector<std::string> expected = straightThrough(shape, true);
    ASSERT_FALSE(expected.empty());

    Subtasks<Out> first(windowOperator<Out>(shape, true), 1, nullptr);
    feedBefore(first);
    first.take();
    OperatorStateSnapshot taken = first.harnesses[0]->snapshotState(1);
    first.element({"e", 5}, 14);
    first.element({"a", 7}, 16);
    std::vector<std::string> meanwhile;
    feedAfter(first, meanwhile);  // fires and cleans up every window
    ASSERT_FALSE(meanwhile.empty());
    // The operator is gone before the write (a copy that still pointed
    // into its table would read freed memory, which the sanitizer reports).
    first.harnesses.clear();
    const std::vector<testing::CapturedSnapshot> written{
        test::writeOnAnotherThread(std::move(taken))};
    expectRestoredAtOneAndTwo<Out>(windowOperator<Out>(shape, true), written, fedAfter, expected);
  }
}

TEST(SlicedWindowTest, RefusesTheGeneralOperatorsSlidingWindows) {
  Shape shape;
  shape.windows = {window::AlignedKind::kSliding, 10, 5, 0};
  Subtasks<Out> general(windowOperator<Out>(shape, false), 1, nullptr);
  general.element({"a", 1}, 3);
  const auto restores = testing::redistribute(general.snapshot(), 1);
  const std::string error =
      errorOf([&] { Subtasks<Out> sliced(windowOperator<Out>(shape, true), 1, &restores); });
  EXPECT_NE(error.find("window-contents"), std::string::npos) << error;
  EXPECT_NE(error.find("pipeline.window.slicing: false"), std::string::npos) << error;
}

// Processing-time windows: the general operator's timers are per key and
// window, in the processing-time domain; the restore fails and says what to do.
TEST(SlicedWindowTest, RefusesTheGeneralOperatorsProcessingTimeWindows) {
  Shape shape;
  shape.windows = {window::AlignedKind::kTumbling, 10, 10, 0, true};
  Subtasks<Out> general(windowOperator<Out>(shape, false), 1, nullptr);
  general.element({"a", 1}, 3);
  const auto restores = testing::redistribute(general.snapshot(), 1);
  const std::string error =
      errorOf([&] { Subtasks<Out> sliced(windowOperator<Out>(shape, true), 1, &restores); });
  EXPECT_NE(error.find("processing-time"), std::string::npos) << error;
  EXPECT_NE(error.find("pipeline.window.slicing: false"), std::string::npos) << error;
}

// Event-time slices do not restore into processing-time windows (nor the
// other way): the slices' watermark and firing are of another time.
TEST(SlicedWindowTest, RefusesSlicesOfTheOtherTimeDomain) {
  Shape processing = tumbling(10, 0);
  processing.windows.processingTime = true;
  Subtasks<Out> sliced(windowOperator<Out>(tumbling(10, 0), true), 1, nullptr);
  sliced.element({"a", 1}, 3);
  const auto restores = testing::redistribute(sliced.snapshot(), 1);
  const std::string error =
      errorOf([&] { Subtasks<Out> other(windowOperator<Out>(processing, true), 1, &restores); });
  EXPECT_NE(error.find("processing-time tumbling(size=10 ms, offset=0 ms)"), std::string::npos)
      << error;
}

TEST(SlicedWindowTest, TheGeneralOperatorRefusesSlices) {
  const Shape shape = tumbling(10, 0);
  Subtasks<Out> sliced(windowOperator<Out>(shape, true), 1, nullptr);
  sliced.element({"a", 1}, 3);
  const auto restores = testing::redistribute(sliced.snapshot(), 1);
  const std::string error =
      errorOf([&] { Subtasks<Out> general(windowOperator<Out>(shape, false), 1, &restores); });
  EXPECT_NE(error.find("window-slices"), std::string::npos) << error;
  EXPECT_NE(error.find("pipeline.window.slicing: true"), std::string::npos) << error;
}

// Nor a snapshot whose only sliced state is a processing-time window to
// fire again (the window fired, then an element came in its last
// millisecond): the general operator would never fire it.
TEST(SlicedWindowTest, TheGeneralOperatorRefusesWindowsToFireAgain) {
  Shape shape = tumbling(10, 0);
  shape.windows.processingTime = true;
  Subtasks<Out> sliced(windowOperator<Out>(shape, true), 1, nullptr);
  auto& h = *sliced.harnesses[0];
  h.context().setProcessingTime(3);
  sliced.element({"a", 1}, 0);
  h.context().setProcessingTime(9);
  EXPECT_EQ(sliced.take(), (std::vector<std::string>{"a:1:1 1 [0,10) ts=9"}));
  sliced.element({"a", 2}, 0);  // [0,10) again, no slice left
  const auto restores = testing::redistribute(sliced.snapshot(), 1);
  const std::string error =
      errorOf([&] { Subtasks<Out> general(windowOperator<Out>(shape, false), 1, &restores); });
  EXPECT_NE(error.find("window-slices-refire"), std::string::npos) << error;
  EXPECT_NE(error.find("pipeline.window.slicing: true"), std::string::npos) << error;
}

TEST(SlicedWindowTest, RefusesSlicesOfOtherWindows) {
  Subtasks<Out> sliced(windowOperator<Out>(tumbling(10, 0), true), 1, nullptr);
  sliced.element({"a", 1}, 3);
  const auto restores = testing::redistribute(sliced.snapshot(), 2);
  const std::string error = errorOf(
      [&] { Subtasks<Out> other(windowOperator<Out>(tumbling(20, 0), true), 2, &restores); });
  EXPECT_NE(error.find("tumbling(size=10 ms, offset=0 ms)"), std::string::npos) << error;
  EXPECT_NE(error.find("tumbling(size=20 ms, offset=0 ms)"), std::string::npos) << error;
}

// An empty snapshot of either operator restores into the other: nothing is lost.
TEST(SlicedWindowTest, EmptySnapshotsRestoreEitherWay) {
  const Shape shape = tumbling(10, 0);
  Subtasks<Out> sliced(windowOperator<Out>(shape, true), 1, nullptr);
  auto restores = testing::redistribute(sliced.snapshot(), 1);
  EXPECT_EQ(errorOf([&] { Subtasks<Out> g(windowOperator<Out>(shape, false), 1, &restores); }),
            "(no error)");
  Subtasks<Out> general(windowOperator<Out>(shape, false), 1, nullptr);
  restores = testing::redistribute(general.snapshot(), 1);
  EXPECT_EQ(errorOf([&] { Subtasks<Out> s(windowOperator<Out>(shape, true), 1, &restores); }),
            "(no error)");
}

// Keys without slices stay in the table while they may come back, and leave
// it once they outnumber the keys with slices.
TEST(SlicedWindowTest, KeysThatGoAwayLeaveTheTable) {
  StreamExecutionEnvironment env;
  auto op = env.fromElements(Ev{"unused", 0})
                .keyBy([](const Ev& e) { return e.first; })
                .window(TumblingEventTimeWindows::of(milliseconds(10)))
                .sum(1);
  using Op = internal::SlicingWindowOperator<std::string, Ev, Ev, Ev, Ev>;
  Harness<Ev> h(env.getStreamGraph().node(op.getId()).factory->createOperator());
  h.context().config().set(options::kStateBackendType, std::string("hashmap"));
  h.open();
  auto& sliced = dynamic_cast<Op&>(h.op());
  auto key = [](int i) { return "k" + std::to_string(i); };
  // 3000 keys in [0,10) and [10,20); the next window starts before the
  // first fires, so no key empties.
  for (int i = 0; i < 3000; ++i) h.processElement<Ev>(0, Ev{key(i), 1}, 5);
  for (int i = 0; i < 3000; ++i) h.processElement<Ev>(0, Ev{key(i), 1}, 15);
  h.processWatermark(0, 9);
  EXPECT_EQ(sliced.numKeys(), 3000u);
  EXPECT_EQ(sliced.tableSize(), 3000u);
  // 2000 of them come back in [20,30): the other 1000 empty at 19 but stay
  // (fewer than the live keys).
  for (int i = 0; i < 2000; ++i) h.processElement<Ev>(0, Ev{key(i), 1}, 25);
  h.processWatermark(0, 19);
  EXPECT_EQ(sliced.numKeys(), 2000u);
  EXPECT_EQ(sliced.tableSize(), 3000u);
  // 200 come back in [30,40): 1800 more empty, now more than the live ones:
  // every key without slices goes.
  for (int i = 0; i < 200; ++i) h.processElement<Ev>(0, Ev{key(i), 1}, 35);
  h.processWatermark(0, 29);
  EXPECT_EQ(sliced.numKeys(), 200u);
  EXPECT_EQ(sliced.tableSize(), 200u);
  h.processWatermark(0, 39);
  EXPECT_EQ(h.output().records.size(), 3000u + 3000u + 2000u + 200u);
  int64_t sum = 0;
  for (const auto& r : h.output().records) sum += r.value.second;
  EXPECT_EQ(sum, 3000 + 3000 + 2000 + 200);
}

// The choice of operator: the sliced one only where it applies.
TEST(SlicedWindowTest, ChoosesTheGeneralOperatorWhereSlicesDoNotApply) {
  auto nameOf = [](auto build, const std::string& backend = "hashmap") {
    StreamExecutionEnvironment env;
    env.setStateBackend(backend);
    auto keyed = env.fromElements(Ev{"unused", 0}).keyBy([](const Ev& e) { return e.first; });
    return env.getStreamGraph().node(build(keyed)).name;
  };
  const auto tumbling10 = TumblingEventTimeWindows::of(milliseconds(10));
  auto sliced = [](const std::string& name) { return name.rfind("SlicingWindow(", 0) == 0; };
  EXPECT_TRUE(sliced(nameOf([&](auto k) { return k.window(tumbling10).sum(1).getId(); })));
  EXPECT_TRUE(sliced(nameOf([&](auto k) {
    return k.window(tumbling10).trigger(EventTimeTrigger::create()).sum(1).getId();
  })));
  EXPECT_FALSE(sliced(nameOf(
      [&](auto k) { return k.window(tumbling10).trigger(CountTrigger::of(2)).sum(1).getId(); })));
  EXPECT_FALSE(sliced(nameOf(
      [&](auto k) { return k.window(tumbling10).evictor(CountEvictor::of(2)).sum(1).getId(); })));
  EXPECT_FALSE(sliced(
      nameOf([&](auto k) { return k.window(tumbling10).process(CountingProcess{}).getId(); })));
  // Processing-time tumbling and sliding windows with their default trigger;
  // not with another trigger.
  const auto processing10 = TumblingProcessingTimeWindows::of(milliseconds(10));
  EXPECT_TRUE(sliced(nameOf([&](auto k) { return k.window(processing10).sum(1).getId(); })));
  EXPECT_TRUE(sliced(nameOf([&](auto k) {
    return k.window(processing10).trigger(ProcessingTimeTrigger::create()).sum(1).getId();
  })));
  EXPECT_FALSE(sliced(nameOf([&](auto k) {
    return k.window(processing10).trigger(EventTimeTrigger::create()).sum(1).getId();
  })));
  EXPECT_FALSE(sliced(nameOf([&](auto k) {
    return k.window(tumbling10).trigger(ProcessingTimeTrigger::create()).sum(1).getId();
  })));
  EXPECT_TRUE(sliced(nameOf([&](auto k) {
    return k.window(SlidingProcessingTimeWindows::of(milliseconds(10), milliseconds(5)))
        .sum(1)
        .getId();
  })));
  EXPECT_FALSE(sliced(nameOf([&](auto k) {
    return k.window(EventTimeSessionWindows::withGap(milliseconds(10))).sum(1).getId();
  })));
  EXPECT_FALSE(
      sliced(nameOf([&](auto k) { return k.window(tumbling10).sum(1).getId(); }, "rocksdb")));
  EXPECT_TRUE(sliced(nameOf([&](auto k) {
    return k.window(SlidingEventTimeWindows::of(milliseconds(10), milliseconds(5)))
        .aggregate(SumAggregate{})
        .getId();
  })));
}

}  // namespace
}  // namespace sliced_window_test
}  // namespace sluice
