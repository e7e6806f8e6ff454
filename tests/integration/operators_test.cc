// The DataStream operators on the mini-cluster, each against a reference
// computed in the test: stateless chains, keyed reduce and field
// aggregations with Flink's semantics, union, connect, process functions with
// side outputs, rich functions, accumulators, the built-in sources and
// chaining control.
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sluice/sluice.h>

#include "integration/integration_util.h"

// A SLUICE_STRUCT record for the named and member-pointer aggregations. `seq`
// identifies the input element, so minBy/maxBy show which element they kept.
struct Trade {
  std::string symbol;
  int64_t qty = 0;
  double price = 0;
  int64_t seq = 0;
  bool operator==(const Trade&) const = default;
};
SLUICE_STRUCT(Trade, symbol, qty, price, seq)

inline void PrintTo(const Trade& t, std::ostream* os) {
  *os << "Trade{" << t.symbol << "," << t.qty << "," << t.price << ",#" << t.seq << "}";
}

namespace sluice::integration {
namespace operators_test {
namespace {

using ::testing::UnorderedElementsAreArray;

// --- stateless chains -------------------------------------------------------------

TEST(OperatorsTest, MapFilterFlatMapChainMatchesReference) {
  constexpr int64_t n = 20000;
  std::vector<std::string> expected;
  for (int64_t x = 1; x <= n; ++x) {
    const int64_t y = x * 3 + 1;
    if (y % 2 != 0) continue;
    expected.push_back("v" + std::to_string(y));
    if (y % 4 == 0) expected.push_back("w" + std::to_string(y / 4));
  }

  StreamExecutionEnvironment env;
  env.setParallelism(3);
  auto got = env.fromSequence(1, n)
                 .map([](const int64_t& x) { return x * 3 + 1; })
                 .filter([](const int64_t& y) { return y % 2 == 0; })
                 .flatMap([](const int64_t& y, Collector<std::string>& out) {
                   out.collect("v" + std::to_string(y));
                   if (y % 4 == 0) out.collect("w" + std::to_string(y / 4));
                 })
                 .executeAndCollect();
  EXPECT_EQ(sorted(got), sorted(expected));
}

// --- keyed reduce -----------------------------------------------------------------

using KV = std::pair<int64_t, int64_t>;

// Per key, in order of emission. Each key lives in one subtask, whose output
// keeps its order, so the per-key sequence is deterministic.
template <class T, class KeyF>
auto byKey(const std::vector<T>& records, KeyF key) {
  std::map<std::decay_t<decltype(key(records.front()))>, std::vector<T>> out;
  for (const T& r : records) out[key(r)].push_back(r);
  return out;
}

TEST(OperatorsTest, KeyedReduceEmitsRunningResultPerKey) {
  Rng rng(7);
  std::vector<KV> input;
  for (int i = 0; i < 5000; ++i) input.emplace_back(rng.below(37), rng.below(1000) - 500);

  // Reference: acc = first element of the key; then acc = f(acc, next).
  auto reduceF = [](const KV& a, const KV& b) {
    return KV(a.first, a.second * 3 % 1000003 + b.second);
  };
  std::map<int64_t, std::vector<KV>> expected;
  std::map<int64_t, KV> acc;
  for (const KV& kv : input) {
    auto it = acc.find(kv.first);
    if (it == acc.end()) {
      it = acc.emplace(kv.first, kv).first;
    } else {
      it->second = reduceF(it->second, kv);
    }
    expected[kv.first].push_back(it->second);
  }

  StreamExecutionEnvironment env;
  env.setParallelism(3);
  auto got = env.fromCollection(input)
                 .keyBy([](const KV& kv) { return kv.first; })
                 .reduce(reduceF)
                 .executeAndCollect();
  EXPECT_EQ(byKey(got, [](const KV& kv) { return kv.first; }), expected);
}

// A shared collection is read in place: two jobs read the same elements,
// nothing is copied (the caller's vector is the one the jobs held), and it
// outlives them unchanged.
TEST(OperatorsTest, SharedCollectionIsReadByEachJobWithoutACopy) {
  auto lines = std::make_shared<const std::vector<std::string>>(
      std::vector<std::string>{"to be", "or not", "to be"});
  const std::string* first = lines->data();
  for (int run = 0; run < 2; ++run) {
    StreamExecutionEnvironment env;
    env.setParallelism(2);
    auto got = env.fromCollection(lines)
                   .map([](const std::string& s) { return s + "!"; })
                   .executeAndCollect();
    std::multiset<std::string> expected{"to be!", "or not!", "to be!"};
    EXPECT_EQ(std::multiset<std::string>(got.begin(), got.end()), expected) << "run " << run;
  }
  EXPECT_EQ(lines.use_count(), 1) << "the jobs released the collection";
  EXPECT_EQ(lines->data(), first);
  EXPECT_EQ(*lines, (std::vector<std::string>{"to be", "or not", "to be"}));
  StreamExecutionEnvironment env;
  EXPECT_THROW(env.fromCollection(std::shared_ptr<const std::vector<int>>()), SluiceException);
}

class SumReduce final : public ReduceFunction<KV> {
 public:
  KV reduce(const KV& a, const KV& b) override { return {a.first, a.second + b.second}; }
};

TEST(OperatorsTest, KeyedReduceWithReduceFunctionObject) {
  std::vector<KV> input;
  for (int64_t i = 0; i < 3000; ++i) input.emplace_back(i % 10, i);
  std::map<int64_t, std::vector<KV>> expected;
  std::map<int64_t, int64_t> sum;
  for (const KV& kv : input) expected[kv.first].emplace_back(kv.first, sum[kv.first] += kv.second);

  StreamExecutionEnvironment env;
  env.setParallelism(2);
  auto got = env.fromCollection(input)
                 .keyBy([](const KV& kv) { return kv.first; })
                 .reduce(SumReduce())
                 .executeAndCollect();
  EXPECT_EQ(byKey(got, [](const KV& kv) { return kv.first; }), expected);
}

// --- field aggregations ---------------------------------------------------------

enum class Agg { kSum, kMin, kMax, kMinBy, kMaxBy };
const char* aggName(Agg a) {
  switch (a) {
    case Agg::kSum: return "sum";
    case Agg::kMin: return "min";
    case Agg::kMax: return "max";
    case Agg::kMinBy: return "minBy";
    case Agg::kMaxBy: return "maxBy";
  }
  return "?";
}
constexpr Agg kAllAggs[] = {Agg::kSum, Agg::kMin, Agg::kMax, Agg::kMinBy, Agg::kMaxBy};

// Flink's semantics, written out independently of the engine:
//   sum/min/max: the key's first element, with the field summed / min / max;
//   minBy/maxBy: the whole element holding the extreme; on ties the first.
template <class T, class KeyF, class FieldF>
std::map<std::string, std::vector<T>> referenceAggregation(Agg agg, const std::vector<T>& input,
                                                           KeyF key, FieldF field) {
  std::map<std::string, std::vector<T>> out;
  std::map<std::string, T> acc;
  for (const T& in : input) {
    const std::string k = key(in);
    auto it = acc.find(k);
    if (it == acc.end()) {
      it = acc.emplace(k, in).first;
    } else {
      T& a = it->second;
      auto& af = field(a);
      const auto& inf = field(const_cast<T&>(in));
      switch (agg) {
        case Agg::kSum: af = af + inf; break;
        case Agg::kMin:
          if (inf < af) af = inf;
          break;
        case Agg::kMax:
          if (inf > af) af = inf;
          break;
        case Agg::kMinBy:
          if (inf < af) a = in;
          break;
        case Agg::kMaxBy:
          if (inf > af) a = in;
          break;
      }
    }
    out[k].push_back(it->second);
  }
  return out;
}

using Row = std::tuple<std::string, int64_t, double>;

std::vector<Row> makeRows() {
  // Field 1 has many ties; field 2 is unique per element (index / 4, exact in
  // binary), so minBy/maxBy on field 1 show which of the tied elements won,
  // and sums of field 2 are exact.
  Rng rng(11);
  std::vector<Row> rows;
  for (int i = 0; i < 3000; ++i) {
    const std::string key(1, static_cast<char>('a' + rng.below(5)));
    const double f2 = (rng.below(2) ? 1 : -1) * (static_cast<double>(i) / 4);
    rows.emplace_back(key, rng.below(12) - 6, f2);
  }
  return rows;
}

TEST(AggregationTest, TuplePositionsFollowFlinkSemantics) {
  const std::vector<Row> rows = makeRows();
  StreamExecutionEnvironment env;
  env.setParallelism(3);
  auto keyed = env.fromCollection(rows).keyBy<0>();
  struct Case {
    Agg agg;
    int position;
    std::shared_ptr<internal::CollectBuffer<Row>> out;
  };
  std::vector<Case> cases;
  for (Agg agg : kAllAggs) {
    for (int position : {1, 2}) {
      SingleOutputStreamOperator<Row> s = [&] {
        switch (agg) {
          case Agg::kSum: return keyed.sum(position);
          case Agg::kMin: return keyed.min(position);
          case Agg::kMax: return keyed.max(position);
          case Agg::kMinBy: return keyed.minBy(position);
          case Agg::kMaxBy: return keyed.maxBy(position);
        }
        return keyed.sum(position);
      }();
      cases.push_back({agg, position, collectInto<Row>(s)});
    }
  }
  env.execute("tuple aggregations");

  auto key = [](const Row& r) { return std::get<0>(r); };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(aggName(c.agg)) + "(" + std::to_string(c.position) + ")");
    const auto expected =
        c.position == 1 ? referenceAggregation(c.agg, rows, key,
                                               [](Row& r) -> int64_t& { return std::get<1>(r); })
                        : referenceAggregation(c.agg, rows, key,
                                               [](Row& r) -> double& { return std::get<2>(r); });
    EXPECT_EQ(byKey(c.out->take(), key), expected);
  }
}

TEST(AggregationTest, StructByFieldNameAndMemberPointer) {
  // qty and price both tie often; seq tells the tied elements apart.
  Rng rng(13);
  std::vector<Trade> trades;
  for (int i = 0; i < 3000; ++i) {
    Trade t;
    t.symbol = std::string("SYM") + static_cast<char>('A' + rng.below(4));
    t.qty = rng.below(9);
    t.price = static_cast<double>(rng.below(16)) * 0.5;
    t.seq = i;
    trades.push_back(t);
  }

  StreamExecutionEnvironment env;
  env.setParallelism(2);
  auto keyed = env.fromCollection(trades).keyBy(&Trade::symbol);
  struct Case {
    Agg agg;
    std::string field;
    bool byName;
    std::shared_ptr<internal::CollectBuffer<Trade>> out;
  };
  std::vector<Case> cases;
  for (Agg agg : kAllAggs) {
    for (const std::string field : {"qty", "price"}) {
      for (bool byName : {true, false}) {
        SingleOutputStreamOperator<Trade> s = [&] {
          if (byName) {
            switch (agg) {
              case Agg::kSum: return keyed.sum(field);
              case Agg::kMin: return keyed.min(field);
              case Agg::kMax: return keyed.max(field);
              case Agg::kMinBy: return keyed.minBy(field);
              case Agg::kMaxBy: return keyed.maxBy(field);
            }
          }
          if (field == "qty") {
            switch (agg) {
              case Agg::kSum: return keyed.sum(&Trade::qty);
              case Agg::kMin: return keyed.min(&Trade::qty);
              case Agg::kMax: return keyed.max(&Trade::qty);
              case Agg::kMinBy: return keyed.minBy(&Trade::qty);
              case Agg::kMaxBy: return keyed.maxBy(&Trade::qty);
            }
          }
          switch (agg) {
            case Agg::kSum: return keyed.sum(&Trade::price);
            case Agg::kMin: return keyed.min(&Trade::price);
            case Agg::kMax: return keyed.max(&Trade::price);
            case Agg::kMinBy: return keyed.minBy(&Trade::price);
            case Agg::kMaxBy: return keyed.maxBy(&Trade::price);
          }
          return keyed.sum(field);
        }();
        cases.push_back({agg, field, byName, collectInto<Trade>(s)});
      }
    }
  }
  env.execute("struct aggregations");

  auto key = [](const Trade& t) { return t.symbol; };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(aggName(c.agg)) + "(" +
                 (c.byName ? "\"" + c.field + "\"" : "&Trade::" + c.field) + ")");
    const auto expected =
        c.field == "qty"
            ? referenceAggregation(c.agg, trades, key, [](Trade& t) -> int64_t& { return t.qty; })
            : referenceAggregation(c.agg, trades, key, [](Trade& t) -> double& { return t.price; });
    EXPECT_EQ(byKey(c.out->take(), key), expected);
  }
}

TEST(AggregationTest, BadFieldsAreRejectedWhenTheJobIsBuilt) {
  StreamExecutionEnvironment env;
  auto rows = env.fromCollection(makeRows()).keyBy<0>();
  EXPECT_THROW(rows.sum(3), SluiceException);  // no such position
  EXPECT_THROW(rows.sum(0), SluiceException);  // a string is not a number
  auto trades = env.fromCollection(std::vector<Trade>{Trade{}}).keyBy(&Trade::symbol);
  EXPECT_THROW(trades.max("volume"), SluiceException);  // no such field
}

// --- union and connect -----------------------------------------------------------

TEST(OperatorsTest, UnionOfThreeStreams) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  auto a = env.fromSequence(0, 999);
  auto b = env.fromSequence(1000, 2999).map([](const int64_t& v) { return v; });
  auto c = env.fromElements<int64_t>(-1, -2, -3, 5);  // 5 duplicates a's element
  auto got = a.union_(b, c).map([](const int64_t& v) { return v * 10; }).executeAndCollect();
  std::vector<int64_t> expected;
  for (int64_t v = 0; v < 3000; ++v) expected.push_back(v * 10);
  for (int64_t v : {-1, -2, -3, 5}) expected.push_back(v * 10);
  EXPECT_EQ(sorted(got), sorted(expected));
}

// Flink: a stream unioned with itself carries each element twice.
TEST(OperatorsTest, UnionWithItselfDuplicates) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  auto a = env.fromSequence(1, 1000).map([](const int64_t& v) { return v; });
  auto got = a.union_(a).map([](const int64_t& v) { return v; }).executeAndCollect();
  std::vector<int64_t> expected;
  for (int64_t v = 1; v <= 1000; ++v) expected.insert(expected.end(), {v, v});
  EXPECT_EQ(sorted(got), expected);
}

class NumberOrWord final : public CoMapFunction<int64_t, std::string, std::string> {
 public:
  std::string map1(const int64_t& v) override { return "n" + std::to_string(v); }
  std::string map2(const std::string& s) override { return "s" + s; }
};

class Expand final : public CoFlatMapFunction<int64_t, std::string, std::string> {
 public:
  void flatMap1(const int64_t& v, Collector<std::string>& out) override {
    for (int64_t i = 0; i < v % 3; ++i)
      out.collect("n" + std::to_string(v) + "#" + std::to_string(i));
  }
  void flatMap2(const std::string& s, Collector<std::string>& out) override {
    for (char ch : s) out.collect(std::string("c") + ch);
  }
};

class TagInput final : public CoProcessFunction<int64_t, std::string, std::pair<int, std::string>> {
 public:
  void processElement1(const int64_t& v, Context&,
                       Collector<std::pair<int, std::string>>& out) override {
    out.collect({1, std::to_string(v)});
  }
  void processElement2(const std::string& s, Context&,
                       Collector<std::pair<int, std::string>>& out) override {
    out.collect({2, s});
  }
};

const std::vector<std::string> kWords = {"alpha", "beta", "gamma", "", "delta"};

TEST(ConnectTest, CoMapFunction) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  auto numbers = env.fromSequence(1, 500);
  auto words = env.fromCollection(kWords);
  auto got = numbers.connect(words).map(NumberOrWord()).executeAndCollect();
  std::vector<std::string> expected;
  for (int64_t v = 1; v <= 500; ++v) expected.push_back("n" + std::to_string(v));
  for (const auto& w : kWords) expected.push_back("s" + w);
  EXPECT_EQ(sorted(got), sorted(expected));
}

TEST(ConnectTest, CoFlatMapFunction) {
  StreamExecutionEnvironment env;
  env.setParallelism(3);
  auto got = env.fromSequence(1, 500)
                 .connect(env.fromCollection(kWords))
                 .flatMap(Expand())
                 .executeAndCollect();
  std::vector<std::string> expected;
  for (int64_t v = 1; v <= 500; ++v) {
    for (int64_t i = 0; i < v % 3; ++i)
      expected.push_back("n" + std::to_string(v) + "#" + std::to_string(i));
  }
  for (const auto& w : kWords) {
    for (char ch : w) expected.push_back(std::string("c") + ch);
  }
  EXPECT_EQ(sorted(got), sorted(expected));
}

TEST(ConnectTest, CoProcessFunction) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  auto got = env.fromSequence(1, 300)
                 .connect(env.fromCollection(kWords))
                 .process(TagInput())
                 .executeAndCollect();
  std::vector<std::pair<int, std::string>> expected;
  for (int64_t v = 1; v <= 300; ++v) expected.emplace_back(1, std::to_string(v));
  for (const auto& w : kWords) expected.emplace_back(2, w);
  EXPECT_EQ(sorted(got), sorted(expected));
}

// One input ends at once (empty); the other still flows to the end.
TEST(ConnectTest, EmptySecondInput) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  auto got = env.fromSequence(1, 500)
                 .connect(env.fromCollection(std::vector<std::string>{}))
                 .map(NumberOrWord())
                 .executeAndCollect();
  std::vector<std::string> expected;
  for (int64_t v = 1; v <= 500; ++v) expected.push_back("n" + std::to_string(v));
  EXPECT_EQ(sorted(got), sorted(expected));
}

// --- process functions and side outputs ----------------------------------------------

class SplitOddEven final : public ProcessFunction<int64_t, int64_t> {
 public:
  SplitOddEven(OutputTag<std::string> odd, OutputTag<int64_t> fives)
      : odd_(std::move(odd)), fives_(std::move(fives)) {}
  void processElement(const int64_t& v, Context& ctx, Collector<int64_t>& out) override {
    if (v % 2 == 0) {
      out.collect(v);
    } else {
      ctx.output(odd_, std::string("odd:") + std::to_string(v));
    }
    if (v % 5 == 0) ctx.output(fives_, v);
  }

 private:
  OutputTag<std::string> odd_;
  OutputTag<int64_t> fives_;
};

TEST(ProcessFunctionTest, SideOutputsAreCompleteAndDisjoint) {
  constexpr int64_t n = 10000;
  const OutputTag<std::string> odd("odd");
  const OutputTag<int64_t> fives("fives");
  StreamExecutionEnvironment env;
  env.setParallelism(3);
  auto main = env.fromSequence(1, n).process(SplitOddEven(odd, fives));
  auto mainOut = collectInto<int64_t>(main, "main");
  auto oddOut = collectInto<std::string>(main.getSideOutput(odd), "odd");
  auto fivesOut = collectInto<int64_t>(main.getSideOutput(fives), "fives");
  JobExecutionResult result = env.execute("side outputs");

  std::vector<int64_t> evens, multiplesOf5;
  std::vector<std::string> odds;
  for (int64_t v = 1; v <= n; ++v) {
    if (v % 2 == 0)
      evens.push_back(v);
    else
      odds.push_back("odd:" + std::to_string(v));
    if (v % 5 == 0) multiplesOf5.push_back(v);
  }
  EXPECT_EQ(sorted(mainOut->take()), evens);
  EXPECT_EQ(sorted(oddOut->take()), sorted(odds));
  EXPECT_EQ(sorted(fivesOut->take()), multiplesOf5);
  EXPECT_EQ(result.getNumRecordsDropped(), 0);
}

TEST(ProcessFunctionTest, UnconsumedSideOutputCountsAsDropped) {
  constexpr int64_t n = 10000;
  const OutputTag<std::string> odd("odd");
  const OutputTag<int64_t> fives("fives");  // nobody reads it
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  auto main = env.fromSequence(1, n).process(SplitOddEven(odd, fives));
  auto mainOut = collectInto<int64_t>(main, "main");
  auto oddOut = collectInto<std::string>(main.getSideOutput(odd), "odd");
  JobExecutionResult result = env.execute("dropped side output");
  EXPECT_EQ(result.getNumRecordsDropped(), n / 5);
  EXPECT_EQ(static_cast<int64_t>(mainOut->take().size()), n / 2);
  EXPECT_EQ(static_cast<int64_t>(oddOut->take().size()), n / 2);
}

using KeyedOut = std::tuple<int64_t, int64_t, int64_t>;  // (current key, v, v % 7)

class EmitCurrentKey final : public KeyedProcessFunction<int64_t, int64_t, KeyedOut> {
 public:
  void processElement(const int64_t& v, Context& ctx, Collector<KeyedOut>& out) override {
    out.collect({ctx.getCurrentKey(), v, v % 7});
  }
};

TEST(ProcessFunctionTest, KeyedProcessFunctionSeesCurrentKey) {
  constexpr int64_t n = 5000;
  StreamExecutionEnvironment env;
  env.setParallelism(3);
  auto got = env.fromSequence(0, n - 1)
                 .keyBy([](const int64_t& v) { return v % 7; })
                 .process(EmitCurrentKey())
                 .executeAndCollect();
  std::vector<KeyedOut> expected;
  for (int64_t v = 0; v < n; ++v) expected.emplace_back(v % 7, v, v % 7);
  EXPECT_EQ(sorted(got), sorted(expected));
}

// --- rich functions and accumulators -----------------------------------------------

using Probe = std::tuple<int, int, int, std::string, std::string>;

class ProbeMap final : public RichMapFunction<int64_t, Probe> {
 public:
  void open() override {
    RuntimeContext& rc = getRuntimeContext();
    rc.addAccumulator("opens", &opens_);
    rc.addAccumulator("closes", &closes_);
    rc.addAccumulator("subtaskBits", &subtaskBits_);
    opens_.add(1);
    subtaskBits_.add(int64_t{1} << rc.getIndexOfThisSubtask());
  }
  void close() override { closes_.add(1); }
  Probe map(const int64_t&) override {
    const RuntimeContext& rc = getRuntimeContext();
    return {rc.getIndexOfThisSubtask(), rc.getNumberOfParallelSubtasks(),
            rc.getMaxNumberOfParallelSubtasks(), rc.getOperatorName(), rc.getJobName()};
  }

 private:
  LongCounter opens_, closes_, subtaskBits_;
};

TEST(RichFunctionTest, OpenAndCloseOncePerSubtaskWithRuntimeContext) {
  constexpr int64_t n = 3000;
  StreamExecutionEnvironment env;
  env.setParallelism(3);
  auto probes = env.fromSequence(1, n).map(ProbeMap()).name("MyMapper");
  auto out = collectInto<Probe>(probes);
  JobExecutionResult result = env.execute("rich job");

  EXPECT_EQ(result.getAccumulatorResult<int64_t>("opens"), 3);
  EXPECT_EQ(result.getAccumulatorResult<int64_t>("closes"), 3);
  EXPECT_EQ(result.getAccumulatorResult<int64_t>("subtaskBits"), 0b111);  // each index once
  auto got = out->take();
  ASSERT_EQ(static_cast<int64_t>(got.size()), n);
  for (const auto& [subtask, parallelism, maxParallelism, name, job] : got) {
    EXPECT_TRUE(subtask >= 0 && subtask < 3) << subtask;
    EXPECT_EQ(parallelism, 3);
    EXPECT_EQ(maxParallelism, 128);
    EXPECT_EQ(name, "MyMapper");
    EXPECT_EQ(job, "rich job");
  }
}

class Accumulate final : public RichMapFunction<int64_t, int64_t> {
 public:
  void open() override {
    getRuntimeContext().addAccumulator("sum", &sum_);
    getRuntimeContext().addAccumulator("half", &half_);
    getRuntimeContext().addAccumulator("count", &count_);
  }
  int64_t map(const int64_t& v) override {
    sum_.add(v);
    half_.add(static_cast<double>(v) * 0.5);
    count_.add(1);
    return v;
  }

 private:
  LongCounter sum_;
  DoubleCounter half_;
  IntCounter count_;
};

TEST(RichFunctionTest, AccumulatorsMergeAcrossSubtasks) {
  constexpr int64_t n = 100000;
  StreamExecutionEnvironment env;
  env.setParallelism(4);
  env.fromSequence(1, n).map(Accumulate()).sinkTo(DiscardSink<int64_t>());
  JobExecutionResult result = env.execute("accumulators");
  EXPECT_EQ(result.getAccumulatorResult<int64_t>("sum"), n * (n + 1) / 2);
  EXPECT_EQ(result.getAccumulatorResult<double>("half"),
            static_cast<double>(n * (n + 1) / 2) * 0.5);
  EXPECT_EQ(result.getAccumulatorResult<int64_t>("count"), n);
  EXPECT_EQ(result.getAllAccumulatorResults().size(), 3u);
  EXPECT_THROW(result.getAccumulatorResult<double>("sum"), SluiceException);
  EXPECT_THROW(result.getAccumulatorResult<int64_t>("missing"), SluiceException);
}

class LongNamedX final : public RichMapFunction<int64_t, int64_t> {
 public:
  void open() override { getRuntimeContext().addAccumulator("x", &x_); }
  int64_t map(const int64_t& v) override {
    x_.add(v);
    return v;
  }

 private:
  LongCounter x_;
};

class DoubleNamedX final : public RichMapFunction<int64_t, int64_t> {
 public:
  void open() override { getRuntimeContext().addAccumulator("x", &x_); }
  int64_t map(const int64_t& v) override {
    x_.add(0.5);
    return v;
  }

 private:
  DoubleCounter x_;
};

// The same accumulator name in two operators merges across them; with two
// different types it cannot, and the job fails saying so.
TEST(RichFunctionTest, AccumulatorNameSharedByTwoOperators) {
  {
    StreamExecutionEnvironment env;
    env.setParallelism(2);
    env.fromSequence(1, 100)
        .map(LongNamedX())
        .map(LongNamedX())
        .disableChaining()
        .sinkTo(DiscardSink<int64_t>());
    EXPECT_EQ(env.execute().getAccumulatorResult<int64_t>("x"), 2 * 5050);
  }
  {
    StreamExecutionEnvironment env;
    env.fromSequence(1, 100).map(LongNamedX()).map(DoubleNamedX()).sinkTo(DiscardSink<int64_t>());
    try {
      env.execute("mixed");
      ADD_FAILURE() << "accumulator 'x' as LongCounter and DoubleCounter was accepted";
    } catch (const JobExecutionException& e) {
      EXPECT_EQ(e.getStatus(), JobStatus::kFailed);
      EXPECT_THAT(e.what(), ::testing::HasSubstr("accumulator 'x'"));
    }
  }
}

// --- sources ----------------------------------------------------------------------

class TagSubtaskOf final : public RichMapFunction<int64_t, std::pair<int64_t, int>> {
 public:
  std::pair<int64_t, int> map(const int64_t& v) override {
    return {v, getRuntimeContext().getIndexOfThisSubtask()};
  }
};

TEST(SourcesTest, FromElementsKeepsOrder) {
  StreamExecutionEnvironment env;
  auto got = env.fromElements<int64_t>(5, 3, 9, 1, 3)
                 .map([](const int64_t& v) { return v * 2; })
                 .executeAndCollect();
  EXPECT_EQ(got, (std::vector<int64_t>{10, 6, 18, 2, 6}));
}

TEST(SourcesTest, FromSequenceInParallelEmitsEachNumberOnce) {
  constexpr int64_t from = -1000, to = 250000;
  StreamExecutionEnvironment env;
  env.setParallelism(3);
  auto got = env.fromSequence(from, to).map(TagSubtaskOf()).executeAndCollect();
  ASSERT_EQ(static_cast<int64_t>(got.size()), to - from + 1);
  std::vector<int64_t> values;
  std::set<int> subtasks;
  values.reserve(got.size());
  for (const auto& [v, s] : got) {
    values.push_back(v);
    subtasks.insert(s);
  }
  std::sort(values.begin(), values.end());
  for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i) {
    ASSERT_EQ(values[static_cast<size_t>(i)], from + i);
  }
  // Which reader gets which range depends on timing (a reader that finishes
  // early may take another's range), but only subtasks 0..2 exist.
  for (int s : subtasks) EXPECT_TRUE(s >= 0 && s < 3) << s;
}

TEST(SourcesTest, FromGeneratorBoundedCount) {
  constexpr int64_t count = 5000;
  StreamExecutionEnvironment env;
  env.setParallelism(3);
  auto got = env.fromGenerator([](int64_t i) { return "g" + std::to_string(i * i); }, count)
                 .executeAndCollect();
  std::vector<std::string> expected;
  for (int64_t i = 0; i < count; ++i) expected.push_back("g" + std::to_string(i * i));
  EXPECT_EQ(sorted(got), sorted(expected));
}

TEST(SourcesTest, EmptyAndTinySources) {
  {
    StreamExecutionEnvironment env;
    env.setParallelism(3);
    EXPECT_TRUE(env.fromCollection(std::vector<int64_t>{}).executeAndCollect().empty());
  }
  {
    StreamExecutionEnvironment env;
    env.setParallelism(3);
    EXPECT_TRUE(env.fromGenerator([](int64_t i) { return i; }, 0).executeAndCollect().empty());
  }
  {
    StreamExecutionEnvironment env;
    env.setParallelism(4);  // one number, four readers
    EXPECT_EQ(env.fromSequence(5, 5).executeAndCollect(), std::vector<int64_t>{5});
  }
  {
    StreamExecutionEnvironment env;
    env.setParallelism(4);
    auto got = env.fromSequence(INT64_MAX - 2, INT64_MAX).executeAndCollect();
    EXPECT_EQ(sorted(got), (std::vector<int64_t>{INT64_MAX - 2, INT64_MAX - 1, INT64_MAX}));
  }
}

// --- chaining control ---------------------------------------------------------------

TEST(ChainingTest, LongChainWithChainingControlsComputesTheSameResult) {
  constexpr int64_t n = 20000;
  auto f1 = [](const int64_t& x) { return x + 1; };
  auto f2 = [](const int64_t& x) { return x * 2; };
  auto f3 = [](const int64_t& x) { return x - 3; };
  auto f4 = [](const int64_t& x) { return x ^ 5; };
  auto p5 = [](const int64_t& x) { return x % 3 != 0; };
  auto f6 = [](const int64_t& x) { return x * 7; };
  auto f7 = [](const int64_t& x) { return x + 11; };
  std::vector<int64_t> expected;
  for (int64_t x = 1; x <= n; ++x) {
    const int64_t y = f4(f3(f2(f1(x))));
    if (p5(y)) expected.push_back(f7(f6(y)));
  }

  StreamExecutionEnvironment env;
  env.setParallelism(2);
  auto out = env.fromSequence(1, n)
                 .map(f1)
                 .name("m1")
                 .map(f2)
                 .name("m2")
                 .disableChaining()
                 .map(f3)
                 .name("m3")
                 .map(f4)
                 .name("m4")
                 .startNewChain()
                 .filter(p5)
                 .name("f5")
                 .map(f6)
                 .name("m6")
                 .setParallelism(3)
                 .map(f7)
                 .name("m7")
                 .setParallelism(3);
  auto buffer = collectInto<int64_t>(out, "Collect");

  JobGraph jg = env.getJobGraph("chains");
  std::vector<std::string> names;
  for (const auto& v : jg.vertices) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{"Source: Sequence Source -> m1", "m2", "m3",
                                             "m4 -> f5", "m6 -> m7", "Collect"}));

  env.execute("chains");
  EXPECT_EQ(sorted(buffer->take()), sorted(expected));
}

}  // namespace
}  // namespace operators_test
}  // namespace sluice::integration
