// Seeded fault injection: jobs with exactly-once FileSink output fail
// several times at seeded places (a record, the synchronous snapshot, the
// completion notice) and must still produce exactly the failure-free output.
// AT_LEAST_ONCE under the same faults must lose nothing.
//
// Every seed picks the job (keyed running sum or windowed WordCount), the
// backend (hashmap, rocksdb with full or incremental checkpoints), the
// parallelism (1, 4) and 2-3 faults. The expected output is computed here,
// without the engine. The test, not a clock, decides where checkpoints fall:
// a gated source lets 1/kSteps of every split through at a time and the test
// takes one checkpoint per step, so a run does not depend on how fast the
// machine is.
//
// Each seed is its own test (and ctest entry), so `ctest -j` spreads them.
// SLUICE_FAULT_SEEDS=<n> runs n exactly-once seeds per job (n/4
// at-least-once) instead of the default 12 (24 exactly-once seeds a run);
// `make test-long` runs 200.
#include <cstdlib>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "harness/checkpoint_jobs.h"

namespace sluice::checkpointing {
namespace fault_injection_test {
namespace {

using std::chrono::milliseconds;

int seedCount() {
  if (const char* env = std::getenv("SLUICE_FAULT_SEEDS")) return std::max(1, std::atoi(env));
  return 12;
}

// Checkpoints per run: the gate opens in this many steps.
constexpr int kSteps = 12;

// ---- the jobs ----------------------------------------------------------------

constexpr int64_t kKeys = 23;
constexpr int64_t kSumRecords = 4000;
constexpr int64_t kWordRecords = 4000;
constexpr int64_t kWindowMs = 50;
const std::vector<std::string> kWords = {"to", "be", "or", "not", "that", "is", "the", "question"};

using Row = std::tuple<int64_t, int64_t, int64_t>;  // key, running count, running sum

struct JobSpec {
  bool wordCount = false;
  std::string backend;
  int parallelism = 1;
  bool exactlyOnce = true;
  bool incremental = false;  // state.backend.incremental (rocksdb only)
};

std::string describe(const JobSpec& s, uint32_t seed) {
  return fmt::format("seed {} ({}, {}{}, p{}, {})", seed, s.wordCount ? "wordcount" : "running sum",
                     s.backend, s.incremental ? " incremental" : "", s.parallelism,
                     s.exactlyOnce ? "exactly-once" : "at-least-once");
}

std::string wordOf(int64_t i) {
  return kWords[static_cast<size_t>((i * 7 + i / 13) % static_cast<int64_t>(kWords.size()))];
}

using Count = std::pair<std::string, int64_t>;

// "word,windowStart,count" for each window.
class CountPerWindow final
    : public ProcessWindowFunction<Count, std::string, std::string, TimeWindow> {
 public:
  void process(const std::string& word, Context& ctx, const std::vector<Count>& elements,
               Collector<std::string>& out) override {
    out.collect(fmt::format("{},{},{}", word, ctx.window().getStart(), elements.size()));
  }
};

// Builds the job; its output goes to FileSink under `out`.
void build(StreamExecutionEnvironment& env, const JobSpec& spec, const std::string& out,
           const std::shared_ptr<FaultPlan>& plan, const std::shared_ptr<SourceGate>& gate) {
  auto sink = FileSink<std::string>::forRowFormat(out, SimpleStringEncoder<std::string>())
                  .withBucketAssigner(BasePathBucketAssigner<std::string>())
                  .build();
  if (!spec.wordCount) {
    auto row = [](int64_t i) { return Row{i % kKeys, 1, i}; };
    env.fromSource(GatedGeneratorSource(gate, row, kSumRecords), "Generator Source")
        .uid("source")
        .map(FailingMap<Row>(plan, 0))
        .uid("fail-0")
        .keyBy([](const Row& r) { return std::get<0>(r); })
        .reduce(addRunning)
        .uid("sum")
        .map(FailingMap<Row>(plan, 1))
        .uid("fail-1")
        .map([](const Row& r) {
          return fmt::format("{},{},{}", std::get<0>(r), std::get<1>(r), std::get<2>(r));
        })
        .uid("format")
        .sinkTo(std::move(sink), "File Sink")
        .uid("sink");
    return;
  }
  auto word = [](int64_t i) { return Count{wordOf(i), i}; };
  env.fromSource(GatedGeneratorSource(gate, word, kWordRecords), "Generator Source")
      .uid("source")
      .assignTimestampsAndWatermarks(
          WatermarkStrategy<Count>::forMonotonousTimestamps().withTimestampAssigner(
              [](const Count& c, int64_t) { return c.second; }))
      .uid("timestamps")
      .map(FailingMap<Count>(plan, 0))
      .uid("fail-0")
      .map([](const Count& c) {
        return Count{c.first, 1};
      })
      .uid("ones")
      .keyBy([](const Count& c) { return c.first; })
      .window(TumblingEventTimeWindows::of(milliseconds(kWindowMs)))
      .process(CountPerWindow())
      .uid("window")
      .map(FailingMap<std::string>(plan, 1))
      .uid("fail-1")
      .sinkTo(std::move(sink), "File Sink")
      .uid("sink");
}

// The failure-free output, computed directly.
std::vector<std::string> expectedOutput(const JobSpec& spec) {
  std::vector<std::string> lines;
  if (!spec.wordCount) {
    std::map<int64_t, std::pair<int64_t, int64_t>> acc;
    for (int64_t i = 0; i < kSumRecords; ++i) {
      auto& [n, s] = acc[i % kKeys];
      ++n;
      s += i;
      lines.push_back(fmt::format("{},{}", i % kKeys, n));  // key,count; sums checked apart
    }
    return lines;
  }
  std::map<std::pair<std::string, int64_t>, int64_t> counts;
  for (int64_t i = 0; i < kWordRecords; ++i) ++counts[{wordOf(i), i - i % kWindowMs}];
  for (const auto& [k, n] : counts) lines.push_back(fmt::format("{},{},{}", k.first, k.second, n));
  return lines;
}

// Running-sum lines "k,c,s" -> "k,c" (intermediate sums depend on how the
// source subtasks interleave); the last count of each key must carry the
// key's total.
std::vector<std::string> normalizeSums(const std::vector<std::string>& lines, std::string& error) {
  std::map<int64_t, std::pair<int64_t, int64_t>> totals;
  for (int64_t i = 0; i < kSumRecords; ++i) {
    auto& [n, s] = totals[i % kKeys];
    ++n;
    s += i;
  }
  std::vector<std::string> out;
  for (const auto& l : lines) {
    int64_t k, c, s;
    char comma1, comma2;
    std::istringstream in(l);
    if (!(in >> k >> comma1 >> c >> comma2 >> s)) {
      error += "unparsable line '" + l + "'; ";
      continue;
    }
    if (c == totals[k].first && s != totals[k].second) {
      error += fmt::format("key {} ends with sum {}, expected {}; ", k, s, totals[k].second);
    }
    out.push_back(fmt::format("{},{}", k, c));
  }
  return out;
}

std::vector<Fault> planFaults(std::mt19937& rng, const JobSpec& spec) {
  std::vector<Fault> faults;
  const int n = 2 + static_cast<int>(rng() % 2);
  const int64_t perSubtask = (spec.wordCount ? kWordRecords : kSumRecords) / spec.parallelism;
  for (int i = 0; i < n; ++i) {
    Fault f;
    f.site = static_cast<int>(rng() % 2);
    // Site 1 of the WordCount sees one record per window and word only.
    if (spec.wordCount) f.site = 0;
    f.subtask = static_cast<int>(rng() % static_cast<uint32_t>(spec.parallelism));
    switch (rng() % 4) {
      case 0:
      case 1:
        f.kind = FaultKind::kRecord;
        f.at = 1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(perSubtask / 3));
        break;
      case 2:
        f.kind = FaultKind::kSnapshot;
        f.at = 1 + static_cast<int64_t>(rng() % 3);
        break;
      default:
        f.kind = FaultKind::kNotify;
        f.at = 1 + static_cast<int64_t>(rng() % 3);
        break;
    }
    faults.push_back(f);
  }
  return faults;
}

struct RunResult {
  std::vector<std::string> lines;
  size_t faultsFired = 0;
  int64_t restarts = 0;
};

RunResult run(const JobSpec& spec, uint32_t seed, const TempDir& dir) {
  std::mt19937 rng(seed);
  auto plan = std::make_shared<FaultPlan>(planFaults(rng, spec));
  auto gate = std::make_shared<SourceGate>();
  Configuration config;
  config.setString("state.backend.incremental", spec.incremental ? "true" : "false");
  StreamExecutionEnvironment env(config);
  env.setParallelism(spec.parallelism).setStateBackend(spec.backend);
  // The test triggers every checkpoint.
  env.enableCheckpointing(std::chrono::hours(1), spec.exactlyOnce
                                                     ? CheckpointingMode::kExactlyOnce
                                                     : CheckpointingMode::kAtLeastOnce);
  env.getCheckpointConfig().setCheckpointStorage(dir.str() + "/checkpoints");
  env.setRestartStrategy(RestartStrategies::fixedDelayRestart(10, milliseconds(0)));
  env.setAutoWatermarkInterval(milliseconds(5));
  const std::string out = dir.str() + "/out";
  build(env, spec, out, plan, gate);
  JobClient client = env.executeAsync(describe(spec, seed));
  const int64_t records = spec.wordCount ? kWordRecords : kSumRecords;
  const int64_t perSplit = records / spec.parallelism;
  for (int step = 1; step < kSteps; ++step) {
    const int64_t through = perSplit * step / kSteps;
    checkpointAtGate(client, *gate, through,
                     recordsThroughGate(records, spec.parallelism, through));
  }
  gate->openFully();
  client.getJobExecutionResult();
  RunResult r;
  r.lines = readFinishedLines(out);
  r.faultsFired = plan->fired();
  r.restarts = client.getCheckpointStats().restarts;
  return r;
}

JobSpec specFor(bool wordCount, uint32_t seed, bool exactlyOnce) {
  JobSpec s;
  s.wordCount = wordCount;
  s.backend = seed % 2 == 0 ? "hashmap" : "rocksdb";
  s.parallelism = (seed / 2) % 2 == 0 ? 1 : 4;
  s.incremental = s.backend == "rocksdb" && (seed / 4) % 2 == 0;
  s.exactlyOnce = exactlyOnce;
  return s;
}

// (job, seed): job false = running sum, true = windowed WordCount.
using SeedCase = std::tuple<bool, uint32_t>;

std::string caseName(const ::testing::TestParamInfo<SeedCase>& info) {
  return std::string(std::get<0>(info.param) ? "WindowedWordCount" : "RunningSum") + "_seed" +
         std::to_string(std::get<1>(info.param));
}

class FaultInjectionTest : public ::testing::TestWithParam<SeedCase> {};

TEST_P(FaultInjectionTest, ExactlyOnceOutputEqualsTheFailureFreeRun) {
  const auto [wordCount, seed] = GetParam();
  const JobSpec spec = specFor(wordCount, seed, true);
  SCOPED_TRACE(describe(spec, seed));
  TempDir dir("faults");
  RunResult r = run(spec, seed, dir);
  std::vector<std::string> got = r.lines;
  if (!wordCount) {
    std::string error;
    got = normalizeSums(r.lines, error);
    ASSERT_TRUE(error.empty()) << error;
  }
  std::sort(got.begin(), got.end());
  std::vector<std::string> want = expectedOutput(spec);
  std::sort(want.begin(), want.end());
  ASSERT_EQ(got.size(), want.size()) << "lost or duplicated output";
  ASSERT_EQ(got, want);
  EXPECT_EQ(static_cast<int64_t>(r.faultsFired), r.restarts);
  // The first fault of every plan strikes within the first attempt (a
  // record in its first third, or one of its first three checkpoints).
  EXPECT_GE(r.faultsFired, 1u);
}

INSTANTIATE_TEST_SUITE_P(Jobs, FaultInjectionTest,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Range(1u, static_cast<uint32_t>(seedCount() +
                                                                                       1))),
                         caseName);

// At-least-once: records after a barrier can be in the snapshot and are
// processed again after a restore, so state may count them twice (running
// counts go past a key's total, a window's count can be too high). Nothing
// may be missing: every running count 1..n_k of every key, and for every
// (word, window) a count at least the true one.
class AtLeastOnceFaultTest : public ::testing::TestWithParam<SeedCase> {};

TEST_P(AtLeastOnceFaultTest, LosesNothing) {
  const auto [wordCount, seed] = GetParam();
  const JobSpec spec = specFor(wordCount, seed, false);
  SCOPED_TRACE(describe(spec, seed));
  TempDir dir("alo");
  RunResult r = run(spec, seed, dir);
  // "<group>,<count>[,...]" -> the counts seen per group.
  std::map<std::string, std::vector<int64_t>> seen;
  for (const std::string& line : r.lines) {
    const size_t split = wordCount ? line.rfind(',') : line.find(',', line.find(',') + 1);
    const std::string countText = wordCount
                                      ? line.substr(split + 1)
                                      : line.substr(line.find(',') + 1, split - line.find(',') - 1);
    const std::string group = wordCount ? line.substr(0, split) : line.substr(0, line.find(','));
    seen[group].push_back(std::stoll(countText));
  }
  int64_t duplicates = 0;
  for (const std::string& line : expectedOutput(spec)) {
    const size_t split = line.rfind(',');
    const std::string group = line.substr(0, split);
    const int64_t count = std::stoll(line.substr(split + 1));
    const auto& counts = seen[group];
    if (wordCount) {
      ASSERT_FALSE(counts.empty()) << "lost window " << group;
      ASSERT_GE(*std::max_element(counts.begin(), counts.end()), count) << "lost in " << group;
      duplicates += *std::max_element(counts.begin(), counts.end()) - count +
                    static_cast<int64_t>(counts.size()) - 1;
    } else {
      ASSERT_NE(std::find(counts.begin(), counts.end(), count), counts.end())
          << "lost: key " << group << " count " << count;
    }
  }
  if (!wordCount) {
    std::map<std::string, int64_t> totals;  // expected lines per key
    for (const std::string& line : expectedOutput(spec)) ++totals[line.substr(0, line.find(','))];
    for (const auto& [group, counts] : seen) {
      duplicates += static_cast<int64_t>(counts.size()) - totals[group];
    }
  }
  EXPECT_GE(r.faultsFired, 1u);
  RecordProperty("duplicates", std::to_string(duplicates));
}

INSTANTIATE_TEST_SUITE_P(
    Jobs, AtLeastOnceFaultTest,
    ::testing::Combine(::testing::Bool(),
                       ::testing::Range(1u,
                                        static_cast<uint32_t>(std::max(1, seedCount() / 4) + 1))),
    caseName);

}  // namespace
}  // namespace fault_injection_test
}  // namespace sluice::checkpointing
