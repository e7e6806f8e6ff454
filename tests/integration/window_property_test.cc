// Property test: random out-of-order input with a bounded delay, summed in
// tumbling, sliding and cumulating event-time windows by the engine at
// parallelism 1, 2 and 4, must equal a reference that sorts the input and
// groups it by window. A punctuated generator emits a watermark after every
// event, so windows fire all through the run, not only at the end of input;
// with the delay bound equal to the real disorder no element is ever late.
// The aligned windows run twice, on the sliced window operator
// (pipeline.window.slicing on) and on the general one (off), and so do the
// sessions, on the session window operator and the general one; the test
// checks the stream graph for the operator it expects.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/sluice.h>

#include "harness/fault_plan.h"
#include "harness/gated_source.h"
#include "harness/temp_dir.h"

namespace sluice {
namespace window_property_test {
namespace {

using Event = std::tuple<int64_t, int64_t, int64_t>;   // key, value, timestamp
using Result = std::tuple<int64_t, int64_t, int64_t>;  // key, window start, sum

// Element i: timestamp i * 7 + jitter, jitter in [0, kDelay), so a later
// element is never more than kDelay behind an earlier one.
constexpr int64_t kDelay = 50;

std::vector<Event> randomEvents(uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  std::vector<Event> events;
  events.reserve(n);
  for (int i = 0; i < n; ++i) {
    int64_t key = static_cast<int64_t>(rng() % 13);
    int64_t value = static_cast<int64_t>(rng() % 100) - 20;
    int64_t ts = i * 7 + static_cast<int64_t>(rng() % kDelay) - 1000;  // negatives too
    events.emplace_back(key, value, ts);
  }
  return events;
}

// Punctuated bounded out-of-orderness: a watermark after every event.
class PunctuatedBounded final : public WatermarkGenerator<Event> {
 public:
  void onEvent(const Event&, int64_t ts, WatermarkOutput& out) override {
    max_ = std::max(max_, ts);
    out.emitWatermark(Watermark{max_ - kDelay - 1});
  }
  void onPeriodicEmit(WatermarkOutput&) override {}

 private:
  int64_t max_ = kMinTimestamp + kDelay + 1;
};

class AddWindowStart final : public ProcessWindowFunction<Event, Result, int64_t, TimeWindow> {
 public:
  void process(const int64_t& key, Context& ctx, const std::vector<Event>& sums,
               Collector<Result>& out) override {
    out.collect(Result{key, ctx.window().getStart(), std::get<1>(sums.front())});
  }
};

// The reference: every window [start, start + size) with start aligned to
// `slide` that contains the element, summed per key.
std::vector<Result> reference(std::vector<Event> events, int64_t size, int64_t slide) {
  std::sort(events.begin(), events.end(),
            [](const Event& a, const Event& b) { return std::get<2>(a) < std::get<2>(b); });
  std::map<std::pair<int64_t, int64_t>, int64_t> sums;
  for (const auto& [key, value, ts] : events) {
    int64_t lastStart = ts - (((ts % slide) + slide) % slide);
    for (int64_t start = lastStart; start > ts - size; start -= slide) {
      sums[{key, start}] += value;
    }
  }
  std::vector<Result> out;
  for (const auto& [k, sum] : sums) out.emplace_back(k.first, k.second, sum);
  return out;
}

// Cumulating windows: every [start, start + k * step) with start aligned to
// maxSize that contains the element, summed per key.
std::vector<Result> referenceCumulating(std::vector<Event> events, int64_t maxSize, int64_t step) {
  std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> sums;  // key, start, end
  for (const auto& [key, value, ts] : events) {
    int64_t start = ts - (((ts % maxSize) + maxSize) % maxSize);
    for (int64_t end = start + maxSize; end > ts; end -= step) sums[{key, start, end}] += value;
  }
  std::vector<Result> out;
  for (const auto& [k, sum] : sums) out.emplace_back(std::get<0>(k), std::get<1>(k), sum);
  std::sort(out.begin(), out.end());
  return out;
}

// Sessions: per key, sorted by time, an element joins the running session
// when its timestamp is at most the session's end (windows [ts, ts + gap)
// that touch merge).
std::vector<Result> referenceSessions(std::vector<Event> events, int64_t gap) {
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return std::tie(std::get<0>(a), std::get<2>(a)) < std::tie(std::get<0>(b), std::get<2>(b));
  });
  std::vector<Result> out;
  int64_t key = 0, start = 0, end = 0, sum = 0;
  bool open = false;
  for (const auto& [k, value, ts] : events) {
    if (open && k == key && ts <= end) {
      end = std::max(end, ts + gap);
      sum += value;
      continue;
    }
    if (open) out.emplace_back(key, start, sum);
    key = k;
    start = ts;
    end = ts + gap;
    sum = value;
    open = true;
  }
  if (open) out.emplace_back(key, start, sum);
  std::sort(out.begin(), out.end());
  return out;
}

enum class Kind { kTumbling, kSliding, kCumulating, kSession };

// Tumbling (size), sliding (size, slide), cumulating (max size, step) or
// session (gap = size) windows.
std::vector<Result> runEngine(const std::vector<Event>& events, int parallelism, Kind kind,
                              int64_t size, int64_t slide, const std::string& backend = "hashmap",
                              bool slicing = true) {
  Configuration config;
  config.set(options::kPipelineWindowSlicing, slicing);
  StreamExecutionEnvironment env(config);
  env.setParallelism(parallelism);
  env.setStateBackend(backend);
  auto strategy = WatermarkStrategy<Event>::forGenerator([] {
                    return std::make_unique<PunctuatedBounded>();
                  }).withTimestampAssigner([](const Event& e) { return std::get<2>(e); });
  // A parallel source: each subtask reads a slice, so the window operator
  // takes the minimum watermark over several channels.
  auto data = std::make_shared<const std::vector<Event>>(events);
  auto keyed = env.fromSequence(0, static_cast<int64_t>(events.size()) - 1)
                   .map([data](const int64_t& i) { return (*data)[static_cast<size_t>(i)]; })
                   .assignTimestampsAndWatermarks(strategy)
                   .keyBy([](const Event& e) { return std::get<0>(e); });
  auto sum = [](const Event& a, const Event& b) {
    return Event{std::get<0>(a), std::get<1>(a) + std::get<1>(b), std::get<2>(a)};
  };
  using std::chrono::milliseconds;
  auto run = [&](auto windowed) {
    auto op = windowed.reduce(sum, AddWindowStart());
    const std::string& name = env.getStreamGraph().node(op.getId()).name;
    const bool fast = slicing && backend == "hashmap";
    EXPECT_EQ(name.rfind("SlicingWindow(", 0) == 0, fast && kind != Kind::kSession) << name;
    EXPECT_EQ(name.rfind("SessionWindow(", 0) == 0, fast && kind == Kind::kSession) << name;
    return op.executeAndCollect();
  };
  std::vector<Result> out;
  switch (kind) {
    case Kind::kSession:
      out = run(keyed.window(EventTimeSessionWindows::withGap(milliseconds(size))));
      break;
    case Kind::kTumbling:
      out = run(keyed.window(TumblingEventTimeWindows::of(milliseconds(size))));
      break;
    case Kind::kSliding:
      out = run(keyed.window(SlidingEventTimeWindows::of(milliseconds(size), milliseconds(slide))));
      break;
    case Kind::kCumulating:
      out = run(
          keyed.window(CumulativeEventTimeWindows::of(milliseconds(size), milliseconds(slide))));
      break;
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Case {
  int64_t size;
  int64_t slide;
};

class WindowPropertyTest : public ::testing::TestWithParam<int> {};

TEST_P(WindowPropertyTest, TumblingAndSlidingSumsMatchTheReference) {
  const int parallelism = GetParam();
  for (Case c : {Case{100, 100}, Case{250, 250}, Case{300, 100}, Case{250, 60}}) {
    const Kind kind = c.size == c.slide ? Kind::kTumbling : Kind::kSliding;
    for (uint64_t seed : {1u, 2u}) {
      auto events = randomEvents(seed * 1000 + static_cast<uint64_t>(c.size + c.slide), 3000);
      auto expected = reference(events, c.size, c.slide);
      ASSERT_FALSE(expected.empty());
      for (bool slicing : {true, false}) {
        EXPECT_EQ(runEngine(events, parallelism, kind, c.size, c.slide, "hashmap", slicing),
                  expected)
            << "size " << c.size << " slide " << c.slide << " seed " << seed << " parallelism "
            << parallelism << " slicing " << slicing;
      }
    }
  }
}

TEST_P(WindowPropertyTest, CumulatingSumsMatchTheReference) {
  const int parallelism = GetParam();
  for (Case c : {Case{300, 100}, Case{240, 60}}) {
    auto events = randomEvents(static_cast<uint64_t>(c.size * 31 + c.slide), 3000);
    auto expected = referenceCumulating(events, c.size, c.slide);
    ASSERT_FALSE(expected.empty());
    for (bool slicing : {true, false}) {
      EXPECT_EQ(
          runEngine(events, parallelism, Kind::kCumulating, c.size, c.slide, "hashmap", slicing),
          expected)
          << "max size " << c.size << " step " << c.slide << " parallelism " << parallelism
          << " slicing " << slicing;
    }
  }
}

TEST_P(WindowPropertyTest, SessionSumsMatchTheReference) {
  const int parallelism = GetParam();
  for (int64_t gap : {5, 20, 60}) {
    // Sparse keys so that sessions both merge and split.
    auto events = randomEvents(static_cast<uint64_t>(gap) * 7, 2000);
    auto expected = referenceSessions(events, gap);
    ASSERT_FALSE(expected.empty());
    for (bool slicing : {true, false}) {
      EXPECT_EQ(runEngine(events, parallelism, Kind::kSession, gap, 0, "hashmap", slicing),
                expected)
          << "gap " << gap << " parallelism " << parallelism << " slicing " << slicing;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Parallelism, WindowPropertyTest, ::testing::Values(1, 2, 4));

// The same windows with their contents in RocksDB: window state goes through
// the state interface, so the results must not change.
// A job on the sliced (sliding windows) or the session window operator
// fails after two checkpoints, restarts from the latest (its slices or
// sessions rescaled by key group into the new attempt) and replays the rest:
// every window comes out with the reference's sum (the collect sink is
// at-least-once: a window fired between the checkpoint and the failure may
// come twice, with the same sum).
void checkRecovery(Kind kind) {
  using std::chrono::milliseconds;
  for (int parallelism : {1, 3}) {
    SCOPED_TRACE("parallelism " + std::to_string(parallelism));
    test::TempDir dir("sliced-recovery");
    StreamExecutionEnvironment env;
    env.setParallelism(parallelism);
    env.enableCheckpointing(std::chrono::hours(1));  // the test triggers them
    env.getCheckpointConfig().setCheckpointStorage(dir.str());
    env.setRestartStrategy(RestartStrategies::fixedDelayRestart(3, milliseconds(0)));
    const int64_t count = 6000;
    const int64_t perSplit = count / parallelism;
    auto data = std::make_shared<const std::vector<Event>>(randomEvents(77, count));
    auto gate = std::make_shared<test::SourceGate>();
    // The first source subtask's map fails half-way through its split.
    auto plan = std::make_shared<test::FaultPlan>(
        std::vector<test::Fault>{{0, 0, test::FaultKind::kRecord, perSplit / 2}});
    auto strategy = WatermarkStrategy<Event>::forGenerator([] {
                      return std::make_unique<PunctuatedBounded>();
                    }).withTimestampAssigner([](const Event& e) { return std::get<2>(e); });
    auto buffer = std::make_shared<internal::CollectBuffer<Result>>();
    auto sum = [](const Event& a, const Event& b) {
      return Event{std::get<0>(a), std::get<1>(a) + std::get<1>(b), std::get<2>(a)};
    };
    auto keyed =
        env.fromSource(
               test::GatedGeneratorSource(
                   gate, [data](int64_t i) { return (*data)[static_cast<size_t>(i)]; }, count),
               "Generator")
            .assignTimestampsAndWatermarks(strategy)
            .map(test::FailingMap<Event>(plan, 0))
            .keyBy([](const Event& e) { return std::get<0>(e); });
    const bool sessions = kind == Kind::kSession;
    auto windows =
        sessions ? keyed.window(EventTimeSessionWindows::withGap(milliseconds(20)))
                       .reduce(sum, AddWindowStart())
                 : keyed.window(SlidingEventTimeWindows::of(milliseconds(300), milliseconds(100)))
                       .reduce(sum, AddWindowStart());
    ASSERT_EQ(env.getStreamGraph()
                  .node(windows.getId())
                  .name.rfind(sessions ? "SessionWindow(" : "SlicingWindow(", 0),
              0u);
    windows.sinkTo(CollectSink<Result>(buffer));
    JobClient client = env.executeAsync("sliced-recovery");
    for (int step = 1; step < 6; ++step) {
      const int64_t through = perSplit * step / 6;
      test::checkpointAtGate(client, *gate, through,
                             test::recordsThroughGate(count, parallelism, through));
    }
    gate->openFully();
    client.getJobExecutionResult();
    EXPECT_EQ(plan->fired(), 1u);
    auto stats = client.getCheckpointStats();
    EXPECT_EQ(stats.restarts, 1);
    EXPECT_GE(stats.completed, 2);
    std::vector<Result> rows = buffer->take();
    std::map<std::pair<int64_t, int64_t>, int64_t> unique;
    for (const auto& [key, start, total] : rows) {
      auto [it, added] = unique.try_emplace({key, start}, total);
      EXPECT_EQ(it->second, total)
          << "window " << start << " of key " << key << " fired with two sums";
    }
    std::vector<Result> deduplicated;
    for (const auto& [k, total] : unique) deduplicated.emplace_back(k.first, k.second, total);
    EXPECT_EQ(deduplicated, sessions ? referenceSessions(*data, 20) : reference(*data, 300, 100));
  }
}

TEST(SlicedWindowRecoveryTest, AFailedJobRestoresItsSlicesAndLosesNothing) {
  checkRecovery(Kind::kSliding);
}

TEST(SessionWindowRecoveryTest, AFailedJobRestoresItsSessionsAndLosesNothing) {
  checkRecovery(Kind::kSession);
}

// (The sliced window operator needs the hashmap backend: these run on the
// general one, which runEngine checks.)
TEST(WindowPropertyRocksDbTest, TumblingSlidingAndSessionsOnRocksDb) {
  auto events = randomEvents(42, 1500);
  EXPECT_EQ(runEngine(events, 2, Kind::kTumbling, 100, 100, "rocksdb"),
            reference(events, 100, 100));
  EXPECT_EQ(runEngine(events, 2, Kind::kSliding, 300, 100, "rocksdb"), reference(events, 300, 100));
  EXPECT_EQ(runEngine(events, 2, Kind::kSession, 20, 0, "rocksdb"), referenceSessions(events, 20));
}

}  // namespace
}  // namespace window_property_test
}  // namespace sluice
