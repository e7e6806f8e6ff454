// The type-independent parts of the sliced window operator, each against an
// independent reference:
//   - window::Slicing against the assigners of windows.h: for random window
//     shapes and timestamps (near the int64 limits too), the windows made of
//     the slice of a timestamp are exactly the windows the assigner puts it
//     in, and every slice of a window lies inside it;
//   - window::TwoStacks against a plain list, with a merge that is
//     associative but not commutative (string concatenation), so that the
//     order of merges is checked too;
//   - window::SliceScheduler: the order of firings and cleanups, each key
//     once per window, slices dropped after their last window.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/sluice.h>
#include <sluice/window/slice_scheduler.h>
#include <sluice/window/slicing.h>
#include <sluice/window/two_stacks.h>

namespace sluice {
namespace slicing_test {
namespace {

using std::chrono::milliseconds;
using window::AlignedKind;
using window::AlignedWindows;
using window::Slicing;
using window::WindowId;

struct NoClock final : WindowAssignerContext {
  int64_t getCurrentProcessingTime() const override { return 0; }
};

std::unique_ptr<WindowAssigner<int, TimeWindow>> assignerFor(const AlignedWindows& w) {
  switch (w.kind) {
    case AlignedKind::kTumbling:
      return TumblingEventTimeWindows::of(milliseconds(w.size), milliseconds(w.offset))
          .create<int>();
    case AlignedKind::kSliding:
      return SlidingEventTimeWindows::of(milliseconds(w.size), milliseconds(w.slide),
                                         milliseconds(w.offset))
          .create<int>();
    case AlignedKind::kCumulating:
      return CumulativeEventTimeWindows::of(milliseconds(w.size), milliseconds(w.slide),
                                            milliseconds(w.offset))
          .create<int>();
  }
  return nullptr;
}

// The windows of the slice of `ts`, as TimeWindows.
std::set<TimeWindow> slicedWindows(const Slicing& slicing, int64_t ts) {
  std::set<TimeWindow> out;
  const int64_t j = slicing.sliceOf(ts);
  const WindowId last = slicing.lastWindowOf(j);
  for (WindowId w = slicing.firstWindowOf(j); w <= last; w += slicing.windowStep()) {
    if (slicing.isWindow(w)) out.insert(slicing.window(w));
  }
  return out;
}

AlignedWindows randomWindows(std::mt19937_64& rng) {
  AlignedWindows w;
  w.kind = static_cast<AlignedKind>(rng() % 3);
  const int64_t unit = 1 + static_cast<int64_t>(rng() % 7);
  switch (w.kind) {
    case AlignedKind::kTumbling:
      w.size = w.slide = unit * (1 + static_cast<int64_t>(rng() % 5));
      break;
    case AlignedKind::kSliding:
      w.slide = unit * (1 + static_cast<int64_t>(rng() % 4));
      w.size = unit * (1 + static_cast<int64_t>(rng() % 12));
      break;
    case AlignedKind::kCumulating:
      w.slide = unit;
      w.size = unit * (1 + static_cast<int64_t>(rng() % 6));
      break;
  }
  const int64_t bound = w.kind == AlignedKind::kSliding ? w.slide : w.size;
  w.offset = static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * bound - 1)) - (bound - 1);
  return w;
}

TEST(SlicingTest, SliceWindowsAreTheAssignersWindows) {
  std::mt19937_64 rng(18);
  NoClock clock;
  for (int shape = 0; shape < 300; ++shape) {
    const AlignedWindows w = randomWindows(rng);
    SCOPED_TRACE(w.describe());
    const Slicing slicing(w);
    auto assigner = assignerFor(w);
    std::vector<int64_t> timestamps;
    for (int64_t d = 1; d <= 40; ++d) {
      timestamps.push_back(kMinTimestamp + d);
      timestamps.push_back(kMaxTimestamp - d + 1);
      timestamps.push_back(d - 20);
    }
    for (int i = 0; i < 20; ++i) timestamps.push_back(static_cast<int64_t>(rng()));
    for (int64_t ts : timestamps) {
      if (ts == kMinTimestamp) continue;
      SCOPED_TRACE("timestamp " + std::to_string(ts));
      std::vector<TimeWindow> assigned;
      assigner->assignWindows(0, ts, clock, assigned);
      const std::set<TimeWindow> expected(assigned.begin(), assigned.end());
      ASSERT_EQ(expected.size(), assigned.size()) << "the assigner repeats a window";
      ASSERT_EQ(slicedWindows(slicing, ts), expected);

      const int64_t j = slicing.sliceOf(ts);
      ASSERT_LE(slicing.firstTimestamp(j), ts);
      ASSERT_GE(slicing.lastTimestamp(j), ts);
      const WindowId last = slicing.lastWindowOf(j);
      for (WindowId id = slicing.firstWindowOf(j); id <= last; id += slicing.windowStep()) {
        if (!slicing.isWindow(id)) continue;
        const TimeWindow window = slicing.window(id);
        EXPECT_EQ(slicing.maxTimestamp(id), window.maxTimestamp());
        WindowId back = 0;
        ASSERT_TRUE(slicing.idOf(window, back)) << window.toString();
        EXPECT_TRUE(back == id) << window.toString();
        // Every slice of the window lies in it (as far as int64 reaches).
        for (WindowId s = slicing.firstSliceOf(id); s <= id; ++s) {
          // Slices wholly outside the int64 range hold no timestamps.
          if (s < slicing.sliceOf(kMinTimestamp) || s > slicing.sliceOf(kMaxTimestamp)) {
            continue;
          }
          const auto slice = static_cast<int64_t>(s);
          EXPECT_GE(slicing.lastTimestamp(slice), window.getStart());
          if (window.getEnd() != kMaxTimestamp) {
            EXPECT_LE(slicing.lastTimestamp(slice), window.maxTimestamp());
          }
        }
      }
    }
  }
}

TEST(SlicingTest, SliceLengthIsTheGcdOfSizeAndSlide) {
  EXPECT_EQ(Slicing({AlignedKind::kSliding, 10'000, 2'000, 0}).sliceLength(), 2'000);
  EXPECT_EQ(Slicing({AlignedKind::kSliding, 10, 4, 0}).sliceLength(), 2);
  EXPECT_EQ(Slicing({AlignedKind::kSliding, 10, 3, 0}).sliceLength(), 1);
  EXPECT_EQ(Slicing({AlignedKind::kTumbling, 1000, 1000, 0}).sliceLength(), 1000);
  EXPECT_EQ(Slicing({AlignedKind::kCumulating, 60, 15, 0}).sliceLength(), 15);
}

TEST(SlicingTest, RefusesWindowsNoAssignerMakes) {
  EXPECT_THROW(Slicing({AlignedKind::kCumulating, 10, 3, 0}), SluiceException);
  EXPECT_THROW(Slicing({AlignedKind::kTumbling, 10, 5, 0}), SluiceException);
  EXPECT_THROW(Slicing({AlignedKind::kSliding, 10, 0, 0}), SluiceException);
  EXPECT_THROW(Slicing({AlignedKind::kSliding, 10, 5, 5}), SluiceException);
  EXPECT_THROW(CumulativeEventTimeWindows::of(milliseconds(10), milliseconds(3)), SluiceException);
}

// --- TwoStacks --------------------------------------------------------------------

TEST(TwoStacksTest, MatchesAListUnderRandomPushEvictQuery) {
  std::mt19937_64 rng(7);
  auto concat = [](std::string& a, const std::string& b) { a += b; };
  for (int round = 0; round < 50; ++round) {
    window::TwoStacks<std::string> stacks;
    std::deque<std::pair<int64_t, std::string>> reference;
    int64_t next = static_cast<int64_t>(rng() % 5) - 2;
    for (int op = 0; op < 400; ++op) {
      const uint64_t r = rng() % 10;
      if (r < 5) {
        next += 1 + static_cast<int64_t>(rng() % 3);
        std::string v(1, static_cast<char>('a' + rng() % 26));
        v += std::to_string(next);
        stacks.push(next, v, concat);
        reference.emplace_back(next, v);
      } else if (r < 8) {
        const int64_t from =
            reference.empty() ? next : reference.front().first + static_cast<int64_t>(rng() % 6);
        stacks.evictBefore(from, concat);
        while (!reference.empty() && reference.front().first < from) reference.pop_front();
      } else if (r < 9 && rng() % 4 == 0) {
        stacks.evictBefore(next + 1, concat);  // everything: a clear
        reference.clear();
      }
      std::optional<std::string> expected;
      for (const auto& [id, v] : reference) expected = expected ? *expected + v : v;
      ASSERT_EQ(stacks.query(concat), expected) << "round " << round << " op " << op;
      ASSERT_EQ(stacks.size(), reference.size());
    }
  }
}

TEST(TwoStacksTest, MergesAConstantNumberOfTimesPerWindow) {
  // A sliding window of 5 items over 1000 pushes: a naive merge of every
  // window costs 4 merges per window; the stacks need at most 3 on average.
  int64_t merges = 0;
  auto add = [&merges](int64_t& a, const int64_t& b) {
    ++merges;
    a += b;
  };
  window::TwoStacks<int64_t> stacks;
  for (int64_t i = 0; i < 1000; ++i) {
    stacks.push(i, i, add);
    stacks.evictBefore(i - 4, add);
    const int64_t lo = std::max<int64_t>(0, i - 4);
    ASSERT_EQ(stacks.query(add), (lo + i) * (i - lo + 1) / 2);
  }
  EXPECT_LE(merges, 3 * 1000);
}

// --- SliceScheduler ---------------------------------------------------------------

struct Recorder final : window::SliceScheduler::Listener {
  const Slicing* slicing = nullptr;
  std::vector<std::string> events;
  void fireWindow(WindowId w, uint32_t key) override {
    events.push_back("fire " + slicing->window(w).toString() + " key " + std::to_string(key));
  }
  void cleanupWindow(WindowId w, uint32_t key) override {
    events.push_back("clean " + slicing->window(w).toString() + " key " + std::to_string(key));
  }
  void dropSlice(int64_t slice, uint32_t key) override {
    events.push_back("drop " + std::to_string(slice) + " key " + std::to_string(key));
  }
};

TEST(SliceSchedulerTest, FiresEachKeyOncePerWindowThenCleansUpInTimeOrder) {
  // Sliding 4 / 2 (slices of 2), allowed lateness 3.
  const Slicing slicing({AlignedKind::kSliding, 4, 2, 0});
  window::SliceScheduler scheduler;
  scheduler.init(slicing, window::WindowCleanup(true, 3), true);
  scheduler.keysOf(slicing.sliceOf(1), kMinTimestamp).push_back(0);  // slice [0,2)
  scheduler.keysOf(slicing.sliceOf(3), kMinTimestamp).push_back(0);  // slice [2,4)
  scheduler.keysOf(slicing.sliceOf(3), kMinTimestamp).push_back(1);
  Recorder r;
  r.slicing = &slicing;
  scheduler.advance(3, r);  // [-2,2) fires at 1, [0,4) at 3; [-2,2) is cleaned up at 4
  EXPECT_EQ(r.events, (std::vector<std::string>{
                          "fire TimeWindow{start=-2, end=2} key 0",
                          "fire TimeWindow{start=0, end=4} key 0",
                          "fire TimeWindow{start=0, end=4} key 1",
                      }));
  r.events.clear();
  scheduler.advance(6, r);  // clean [-2,2) at 4, fire [2,6) at 5, clean [0,4) at 6
  EXPECT_EQ(r.events, (std::vector<std::string>{
                          "clean TimeWindow{start=-2, end=2} key 0",
                          "fire TimeWindow{start=2, end=6} key 0",
                          "fire TimeWindow{start=2, end=6} key 1",
                          "clean TimeWindow{start=0, end=4} key 0",
                          "clean TimeWindow{start=0, end=4} key 1",
                          "drop 0 key 0",
                      }));
  r.events.clear();
  scheduler.advance(kMaxTimestamp, r);
  EXPECT_EQ(r.events, (std::vector<std::string>{
                          "clean TimeWindow{start=2, end=6} key 0",
                          "clean TimeWindow{start=2, end=6} key 1",
                          "drop 1 key 0",
                          "drop 1 key 1",
                      }));
  EXPECT_EQ(scheduler.numSlices(), 0u);
  EXPECT_EQ(scheduler.numWindowsToFire(), 0u);
  EXPECT_EQ(scheduler.numWindowsToCleanUp(), 0u);
}

TEST(SliceSchedulerTest, SkipsLateWindowsAndNeverCleansUpAtTheEndOfTime) {
  const Slicing slicing({AlignedKind::kTumbling, 10, 10, 0});
  window::SliceScheduler scheduler;
  scheduler.init(slicing, window::WindowCleanup(true, 5), false);
  // A slice whose window is late when it is added schedules nothing.
  scheduler.keysOf(slicing.sliceOf(5), 20).push_back(0);
  EXPECT_EQ(scheduler.numWindowsToFire(), 0u);
  EXPECT_EQ(scheduler.numWindowsToCleanUp(), 0u);
  // The last window before the maximum timestamp fires, but its cleanup
  // time (maxTimestamp + 5) saturates at the end of time: never cleaned up.
  scheduler.keysOf(slicing.sliceOf(kMaxTimestamp - 1), 20).push_back(1);
  Recorder r;
  r.slicing = &slicing;
  scheduler.advance(kMaxTimestamp, r);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].substr(0, 5), "fire ");
  EXPECT_EQ(scheduler.numSlices(), 2u);
}

}  // namespace
}  // namespace slicing_test
}  // namespace sluice
