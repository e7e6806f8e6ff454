// Window join and coGroup through the public API, against a nested-loop
// reference computed here on random data: tumbling and sliding event-time
// windows, negative timestamps, keys on one side only, parallelism 1 and 2,
// both state backends, monotonous and bounded out-of-order input.
#include <algorithm>
#include <cstdint>
#include <map>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/sluice.h>

namespace sluice {
namespace window_join_test {
namespace {

struct Left {
  int64_t key = 0;
  int64_t ts = 0;
  int64_t id = 0;
};
SLUICE_STRUCT(Left, key, ts, id)

struct Right {
  std::string key;  // the decimal text of the key: another type than Left's
  int64_t ts = 0;
  int64_t id = 0;
};
SLUICE_STRUCT(Right, key, ts, id)

using Pair = std::tuple<int64_t, int64_t, int64_t>;  // key, left id, right id
// An output with the timestamp it carried.
template <class T>
using Stamped = std::pair<T, int64_t>;

template <class T>
class AttachTimestamp final : public ProcessFunction<T, Stamped<T>> {
 public:
  void processElement(const T& value, typename ProcessFunction<T, Stamped<T>>::Context& ctx,
                      Collector<Stamped<T>>& out) override {
    out.collect({value, ctx.timestamp().value_or(kMinTimestamp)});
  }
};

// `n` elements per side with timestamps from `start` upwards (sorted, with
// repeats), or up to `jitter` ms out of order when jitter > 0.
template <class E, class MakeKey>
std::vector<E> generate(uint32_t seed, int n, int64_t start, int64_t keys, int64_t keyOffset,
                        int64_t jitter, MakeKey makeKey) {
  std::mt19937_64 rng(seed);
  std::vector<E> out;
  int64_t base = start;
  for (int i = 0; i < n; ++i) {
    base += static_cast<int64_t>(rng() % 25);
    E e;
    e.key = makeKey(keyOffset + static_cast<int64_t>(rng() % keys));
    e.ts = base + (jitter > 0 ? static_cast<int64_t>(rng() % (jitter + 1)) : 0);
    e.id = i;
    out.push_back(e);
  }
  return out;
}

std::vector<Left> leftData(uint32_t seed, int n, int64_t jitter = 0, int64_t keyOffset = 0) {
  return generate<Left>(seed, n, -2000, 10, keyOffset, jitter, [](int64_t k) { return k; });
}
std::vector<Right> rightData(uint32_t seed, int n, int64_t jitter = 0, int64_t keyOffset = 0) {
  return generate<Right>(seed, n, -1900, 10, keyOffset, jitter,
                         [](int64_t k) { return std::to_string(k); });
}

// Bounded out-of-orderness emitted on every event instead of periodically,
// so windows fire (and are cleaned up) while the input still flows.
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

// Flink's window start: ts - ((ts - offset) mod size), for negative ts too.
int64_t windowStart(int64_t ts, int64_t slide) {
  int64_t r = ts % slide;
  if (r < 0) r += slide;
  return ts - r;
}
// The starts of every window [s, s + size) with s aligned to `slide` that holds ts.
std::set<int64_t> windowStarts(int64_t ts, int64_t size, int64_t slide) {
  std::set<int64_t> starts;
  for (int64_t s = windowStart(ts, slide); s > ts - size; s -= slide) starts.insert(s);
  return starts;
}

struct Config {
  int parallelism;
  std::string backend;
  bool punctuated;  // watermarks on every event rather than periodically
};
void PrintTo(const Config& c, std::ostream* os) {
  *os << "p" << c.parallelism << " " << c.backend << (c.punctuated ? " punctuated" : "");
}
std::string name(const ::testing::TestParamInfo<Config>& info) {
  return "p" + std::to_string(info.param.parallelism) + "_" + info.param.backend +
         (info.param.punctuated ? "_punctuated" : "");
}

class WindowJoinTest : public ::testing::TestWithParam<Config> {
 protected:
  StreamExecutionEnvironment env() const {
    StreamExecutionEnvironment e;
    e.setParallelism(GetParam().parallelism);
    e.setStateBackend(GetParam().backend);
    return e;
  }
};

// Every pair with equal keys in a common window, stamped with that window's
// maxTimestamp, once per common window.
std::vector<Stamped<Pair>> referenceJoin(const std::vector<Left>& left,
                                         const std::vector<Right>& right, int64_t size,
                                         int64_t slide) {
  std::vector<Stamped<Pair>> out;
  for (const Left& l : left) {
    for (const Right& r : right) {
      if (std::to_string(l.key) != r.key) continue;
      std::set<int64_t> a = windowStarts(l.ts, size, slide);
      for (int64_t s : windowStarts(r.ts, size, slide)) {
        if (a.count(s) != 0) out.push_back({Pair{l.key, l.id, r.id}, s + size - 1});
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

int64_t leftKey(const Left& l) { return l.key; }

TEST_P(WindowJoinTest, TumblingJoinMatchesNestedLoop) {
  auto left = leftData(11, 400);
  auto right = rightData(12, 400);
  auto e = env();
  auto a = e.fromCollection(left).assignTimestampsAndWatermarks(
      strategy<Left>(0, GetParam().punctuated));
  auto b = e.fromCollection(right).assignTimestampsAndWatermarks(
      strategy<Right>(0, GetParam().punctuated));
  auto joined = a.join(b)
                    .where([](const Left& l) { return l.key; })
                    .equalTo([](const Right& r) { return static_cast<int64_t>(std::stoll(r.key)); })
                    .window(TumblingEventTimeWindows::of(std::chrono::milliseconds(100)))
                    .apply([](const Left& l, const Right& r) {
                      return Pair{l.key, l.id, r.id};
                    });
  auto got = joined.process(AttachTimestamp<Pair>()).executeAndCollect();
  std::sort(got.begin(), got.end());
  auto want = referenceJoin(left, right, 100, 100);
  ASSERT_GT(want.size(), 100u);
  EXPECT_EQ(got, want);
}

// A FlatJoinFunction object that emits each pair twice, keyed by member
// pointer on the first side; sliding windows whose size is not a multiple
// of the slide.
class TwiceJoin final : public RichFlatJoinFunction<Left, Right, Pair> {
 public:
  void open() override { opened_ = true; }
  void join(const Left& l, const Right& r, Collector<Pair>& out) override {
    if (!opened_) throw SluiceException("join before open");
    out.collect(Pair{l.key, l.id, r.id});
    out.collect(Pair{l.key, l.id, r.id});
  }

 private:
  bool opened_ = false;
};

TEST_P(WindowJoinTest, SlidingFlatJoinMatchesNestedLoop) {
  auto left = leftData(21, 300);
  auto right = rightData(22, 300);
  auto e = env();
  auto a = e.fromCollection(left).assignTimestampsAndWatermarks(
      strategy<Left>(0, GetParam().punctuated));
  auto b = e.fromCollection(right).assignTimestampsAndWatermarks(
      strategy<Right>(0, GetParam().punctuated));
  auto joined = a.join(b)
                    .where(&Left::key)
                    .equalTo([](const Right& r) { return static_cast<int64_t>(std::stoll(r.key)); })
                    .window(SlidingEventTimeWindows::of(std::chrono::milliseconds(250),
                                                        std::chrono::milliseconds(100)))
                    .apply(TwiceJoin());
  auto got = joined.process(AttachTimestamp<Pair>()).executeAndCollect();
  std::sort(got.begin(), got.end());
  auto once = referenceJoin(left, right, 250, 100);
  std::vector<Stamped<Pair>> want;
  for (const auto& p : once) {
    want.push_back(p);
    want.push_back(p);
  }
  std::sort(want.begin(), want.end());
  ASSERT_GT(once.size(), 100u);
  EXPECT_EQ(got, want);
}

// Out-of-order input (bounded), a JoinFunction object and a plain function
// pointer as key selector.
class PairJoin final : public JoinFunction<Left, Right, Pair> {
 public:
  Pair join(const Left& l, const Right& r) override { return Pair{l.key, l.id, r.id}; }
};

TEST_P(WindowJoinTest, OutOfOrderSlidingJoinMatchesNestedLoop) {
  auto left = leftData(31, 300, 40);
  auto right = rightData(32, 300, 40);
  auto e = env();
  auto a = e.fromCollection(left).assignTimestampsAndWatermarks(
      strategy<Left>(40, GetParam().punctuated));
  auto b = e.fromCollection(right).assignTimestampsAndWatermarks(
      strategy<Right>(40, GetParam().punctuated));
  auto joined = a.join(b)
                    .where(&leftKey)
                    .equalTo([](const Right& r) { return static_cast<int64_t>(std::stoll(r.key)); })
                    .window(SlidingEventTimeWindows::of(std::chrono::milliseconds(200),
                                                        std::chrono::milliseconds(50)))
                    .apply(PairJoin());
  auto got = joined.process(AttachTimestamp<Pair>()).executeAndCollect();
  std::sort(got.begin(), got.end());
  auto want = referenceJoin(left, right, 200, 50);
  ASSERT_GT(want.size(), 100u);
  EXPECT_EQ(got, want);
}

// One coGroup call: key, window start, both sides' ids (sorted).
using Group = std::tuple<int64_t, int64_t, std::vector<int64_t>, std::vector<int64_t>>;

TEST_P(WindowJoinTest, CoGroupIncludesKeysOfOneSideOnly) {
  // Left keys 0..9, right keys 5..14: 0..4 only left, 10..14 only right.
  auto left = leftData(41, 400, 30, 0);
  auto right = rightData(42, 400, 30, 5);
  const int64_t size = 150;
  auto e = env();
  auto a = e.fromCollection(left).assignTimestampsAndWatermarks(
      strategy<Left>(30, GetParam().punctuated));
  auto b = e.fromCollection(right).assignTimestampsAndWatermarks(
      strategy<Right>(30, GetParam().punctuated));
  auto grouped =
      a.coGroup(b)
          .where([](const Left& l) { return l.key; })
          .equalTo([](const Right& r) { return static_cast<int64_t>(std::stoll(r.key)); })
          .window(TumblingEventTimeWindows::of(std::chrono::milliseconds(size)))
          .apply(
              [](const std::vector<Left>& ls, const std::vector<Right>& rs, Collector<Group>& out) {
                if (ls.empty() && rs.empty())
                  throw SluiceException("coGroup with both sides empty");
                int64_t key = ls.empty() ? std::stoll(rs.front().key) : ls.front().key;
                int64_t ts = ls.empty() ? rs.front().ts : ls.front().ts;
                Group g{key, ts, {}, {}};
                for (const Left& l : ls) std::get<2>(g).push_back(l.id);
                for (const Right& r : rs) std::get<3>(g).push_back(r.id);
                std::sort(std::get<2>(g).begin(), std::get<2>(g).end());
                std::sort(std::get<3>(g).begin(), std::get<3>(g).end());
                out.collect(g);
              });
  auto got = grouped.process(AttachTimestamp<Group>()).executeAndCollect();
  // The function saw some element's timestamp; replace it by its window start.
  for (auto& [g, ts] : got) std::get<1>(g) = windowStart(std::get<1>(g), size);
  std::sort(got.begin(), got.end());

  std::map<std::pair<int64_t, int64_t>, std::pair<std::vector<int64_t>, std::vector<int64_t>>>
      groups;
  for (const Left& l : left) groups[{l.key, windowStart(l.ts, size)}].first.push_back(l.id);
  for (const Right& r : right) {
    groups[{std::stoll(r.key), windowStart(r.ts, size)}].second.push_back(r.id);
  }
  std::vector<Stamped<Group>> want;
  int leftOnly = 0;
  int rightOnly = 0;
  for (auto& [kw, sides] : groups) {
    std::sort(sides.first.begin(), sides.first.end());
    std::sort(sides.second.begin(), sides.second.end());
    leftOnly += sides.second.empty() ? 1 : 0;
    rightOnly += sides.first.empty() ? 1 : 0;
    want.push_back({Group{kw.first, kw.second, sides.first, sides.second}, kw.second + size - 1});
  }
  std::sort(want.begin(), want.end());
  ASSERT_GT(leftOnly, 10);
  ASSERT_GT(rightOnly, 10);
  EXPECT_EQ(got, want);
}

// A CoGroupFunction object turning coGroup into a left outer join.
class LeftOuterJoin final : public CoGroupFunction<Left, Right, Pair> {
 public:
  void coGroup(const std::vector<Left>& ls, const std::vector<Right>& rs,
               Collector<Pair>& out) override {
    for (const Left& l : ls) {
      if (rs.empty()) out.collect(Pair{l.key, l.id, -1});
      for (const Right& r : rs) out.collect(Pair{l.key, l.id, r.id});
    }
  }
};

TEST_P(WindowJoinTest, CoGroupFunctionLeftOuterJoin) {
  auto left = leftData(51, 300, 0, 0);
  auto right = rightData(52, 300, 0, 5);
  const int64_t size = 100;
  auto e = env();
  auto a = e.fromCollection(left).assignTimestampsAndWatermarks(
      strategy<Left>(0, GetParam().punctuated));
  auto b = e.fromCollection(right).assignTimestampsAndWatermarks(
      strategy<Right>(0, GetParam().punctuated));
  auto got = a.coGroup(b)
                 .where([](const Left& l) { return l.key; })
                 .equalTo([](const Right& r) { return static_cast<int64_t>(std::stoll(r.key)); })
                 .window(TumblingEventTimeWindows::of(std::chrono::milliseconds(size)))
                 // Explicitly the defaults' effect: exercises the configuration path.
                 .trigger(EventTimeTrigger::create())
                 .evictor(CountEvictor::of(100000))
                 .allowedLateness(std::chrono::milliseconds(5))
                 .apply(LeftOuterJoin())
                 .executeAndCollect();
  std::sort(got.begin(), got.end());
  std::vector<Pair> want;
  for (const Left& l : left) {
    bool matched = false;
    for (const Right& r : right) {
      if (std::to_string(l.key) == r.key && windowStart(l.ts, size) == windowStart(r.ts, size)) {
        want.push_back(Pair{l.key, l.id, r.id});
        matched = true;
      }
    }
    if (!matched) want.push_back(Pair{l.key, l.id, -1});
  }
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(Configs, WindowJoinTest,
                         ::testing::Values(Config{1, "hashmap", false}, Config{2, "hashmap", false},
                                           Config{2, "rocksdb", false}, Config{1, "hashmap", true},
                                           Config{2, "hashmap", true}),
                         name);

TEST(WindowJoinApiTest, TaggedUnionRoundTrips) {
  using U = TaggedUnion<int64_t, std::string>;
  for (const U& u : {U::one(-7), U::two("seven"), U::two("")}) {
    std::vector<uint8_t> bytes;
    DataOutputView out(bytes);
    TypeSerializer<U>::serialize(u, out);
    U back = U::one(3);
    DataInputView in(bytes.data(), bytes.size());
    TypeSerializer<U>::deserialize(back, in);
    EXPECT_EQ(in.remaining(), 0u);
    EXPECT_EQ(back, u);
  }
  EXPECT_EQ(TypeSerializer<U>::schema(), "tagged_union<int64,string>");
  std::vector<uint8_t> bad = {3};
  DataInputView in(bad.data(), bad.size());
  U into;
  EXPECT_THROW(TypeSerializer<U>::deserialize(into, in), SerializationError);
}

TEST(WindowJoinApiTest, NegativeAllowedLatenessIsRejected) {
  StreamExecutionEnvironment e;
  auto a = e.fromElements(Left{});
  auto b = e.fromElements(Right{});
  auto w = a.join(b)
               .where([](const Left& l) { return l.key; })
               .equalTo([](const Right& r) { return static_cast<int64_t>(std::stoll(r.key)); })
               .window(TumblingEventTimeWindows::of(std::chrono::milliseconds(10)));
  EXPECT_THROW(w.allowedLateness(std::chrono::milliseconds(-1)), SluiceException);
}

}  // namespace
}  // namespace window_join_test
}  // namespace sluice
