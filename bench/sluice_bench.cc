// sluice-bench: end-to-end throughput of ordinary Sluice jobs, built only on
// the public API (<sluice/sluice.h>), so a number here is what a user's job
// gets. See bench/README.md for the workloads and their targets.
//
// Every run is checked against an independently computed result (a closed
// form, or a hand-written single-threaded reference), so a broken or elided
// pipeline fails loudly instead of looking fast. Only env.execute() is timed;
// building inputs and the job graph happens before the clock starts.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include <sluice/sluice.h>

#include "cluster_bench.h"
#include "compare.h"
#include "nexmark/queries.h"

namespace {

using Clock = std::chrono::steady_clock;
using WordCount = std::pair<std::string, int64_t>;
using KeyValue = std::pair<int64_t, int64_t>;

constexpr int64_t kNumKeys = 10000;         // keyed-sum key space
constexpr size_t kVocabulary = 10000;       // wordcount vocabulary
constexpr double kZipfExponent = 1.0;       // wordcount word frequencies
constexpr uint64_t kCorpusSeed = 20240917;  // wordcount corpus, fixed for comparability

// ---------------------------------------------------------------------------
// Measurement

struct Usage {
  Clock::time_point wall;
  double cpuSeconds;
};

double cpuSecondsNow() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec * 1e-6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

double peakRssMiB() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // Linux: KiB
}

Usage usageNow() { return {Clock::now(), cpuSecondsNow()}; }

struct Sample {
  double wallSeconds = 0;
  double cpuSeconds = 0;
};

// Runs `body` once and measures it; `body` throws on a wrong result.
template <class F>
Sample measure(F&& body) {
  Usage before = usageNow();
  body();
  Usage after = usageNow();
  return {std::chrono::duration<double>(after.wall - before.wall).count(),
          after.cpuSeconds - before.cpuSeconds};
}

struct Row {
  Row() = default;
  Row(std::string w, int p, int64_t n) : workload(std::move(w)), parallelism(p), records(n) {}

  std::string workload;
  int parallelism = 1;
  int64_t records = 0;
  Sample best;
  double peakRssMiB = 0;
  std::optional<double> ratioToBaseline;  // records per CPU-second of this row over the baseline's
  std::string target;                     // e.g. ">=50M/s"
  std::optional<bool> targetMet;
  std::string extraJson;  // more fields for the JSON row: `"key": value, ...` (state-ltm)

  double recordsPerSecond() const { return records / best.wallSeconds; }
  double recordsPerCpuSecond() const { return records / best.cpuSeconds; }
};

// Best (shortest wall time) of `repeat` runs; `run` measures itself (so that
// setting up a run is not timed) and returns its Sample.
template <class F>
Sample bestOf(int repeat, F&& run) {
  Sample best;
  for (int i = 0; i < repeat; ++i) {
    Sample s = run();
    if (i == 0 || s.wallSeconds < best.wallSeconds) best = s;
  }
  return best;
}

void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("result check failed: " + what);
}

// ---------------------------------------------------------------------------
// Checkpointing (--checkpoint-interval): keyed-sum and window-tumbling run
// with exactly-once checkpoints every `intervalMs` into `dir`, and report
// how many completed, how long they took and how large they were.

struct CheckpointSetting {
  int64_t intervalMs = 0;
  std::string dir;
  bool incremental = false;  // state.backend.incremental (rocksdb)
};
CheckpointSetting gCheckpoint;

std::string withCheckpointSuffix(std::string name) {
  if (gCheckpoint.intervalMs > 0) name += "+ckpt" + std::to_string(gCheckpoint.intervalMs) + "ms";
  if (gCheckpoint.intervalMs > 0 && gCheckpoint.incremental) name += "+incr";
  return name;
}

// The environment's configuration for --checkpoint-mode.
sluice::Configuration checkpointConfiguration() {
  sluice::Configuration config;
  config.setString("state.backend.incremental", gCheckpoint.incremental ? "true" : "false");
  return config;
}

void applyCheckpointing(sluice::StreamExecutionEnvironment& env) {
  if (gCheckpoint.intervalMs <= 0) return;
  env.enableCheckpointing(std::chrono::milliseconds(gCheckpoint.intervalMs));
  env.getCheckpointConfig().setCheckpointStorage(gCheckpoint.dir);
}

// Runs the job built in `env` and measures it; with checkpointing, records
// the checkpoint figures of this run in `row.extraJson`.
Sample runMeasured(sluice::StreamExecutionEnvironment& env, const std::string& name, Row& row) {
  sluice::JobClient::CheckpointStats stats;
  Sample s = measure([&] {
    sluice::JobClient client = env.executeAsync(name);
    client.getJobExecutionResult();
    stats = client.getCheckpointStats();
  });
  if (gCheckpoint.intervalMs > 0) {
    char buf[320];
    const double n = static_cast<double>(std::max<int64_t>(stats.completed, 1));
    std::snprintf(buf, sizeof buf,
                  "\"checkpoint_interval_ms\": %" PRId64 ", \"checkpoints_completed\": %" PRId64
                  ", \"checkpoints_failed\": %" PRId64
                  ", \"checkpoint_avg_ms\": %.1f, \"checkpoint_max_ms\": %" PRId64
                  ", \"checkpoint_avg_bytes\": %.0f, \"checkpoint_max_bytes\": %" PRId64,
                  gCheckpoint.intervalMs, stats.completed, stats.failed,
                  static_cast<double>(stats.totalDurationMs) / n, stats.maxDurationMs,
                  static_cast<double>(stats.totalSizeBytes) / n, stats.maxSizeBytes);
    row.extraJson = buf;
    std::fprintf(stderr,
                 "%s: %" PRId64 " checkpoints, avg %.1f ms (max %" PRId64
                 " ms), avg %.1f KiB (max %.1f KiB)\n",
                 row.workload.c_str(), stats.completed,
                 static_cast<double>(stats.totalDurationMs) / n, stats.maxDurationMs,
                 static_cast<double>(stats.totalSizeBytes) / n / 1024.0,
                 static_cast<double>(stats.maxSizeBytes) / 1024.0);
  }
  return s;
}

// ---------------------------------------------------------------------------
// Sinks: they discard records but fold them into a cheap summary that the
// benchmark checks, so no stage of the pipeline can be optimised away. Each
// writer folds locally (no shared writes per record) and publishes at close.

// Every benchmark sink is a FoldingSink: each writer folds its records into
// a Fold of its own (Fold::add, no shared writes per record) and merges it
// into the shared Fold::Totals at close (Fold::publish).
template <class T, class Fold>
class FoldingSink final : public sluice::Sink<T> {
 public:
  using Totals = typename Fold::Totals;
  explicit FoldingSink(std::shared_ptr<Totals> totals) : totals_(std::move(totals)) {}
  std::unique_ptr<sluice::SinkWriter<T>> createWriter(sluice::WriterInitContext&) const override {
    return std::make_unique<Writer>(totals_);
  }

 private:
  class Writer final : public sluice::SinkWriter<T> {
   public:
    explicit Writer(std::shared_ptr<Totals> totals) : totals_(std::move(totals)) {}
    void write(const T& value, const sluice::SinkWriterContext&) override { fold_.add(value); }
    void close() override {
      fold_.publish(*totals_);
      fold_ = Fold{};
    }

   private:
    std::shared_ptr<Totals> totals_;
    Fold fold_;
  };
  std::shared_ptr<Totals> totals_;
};

// Count and wrapping sum of int64 records, or of the values of key/value
// records.
struct CountSum {
  std::atomic<int64_t> count{0};
  std::atomic<uint64_t> sum{0};
};

template <class T>
struct CountSumFold {
  using Totals = CountSum;
  int64_t count = 0;
  uint64_t sum = 0;
  void add(const T& v) {
    ++count;
    if constexpr (std::is_same_v<T, KeyValue>) {
      sum += static_cast<uint64_t>(v.second);
    } else {
      sum += static_cast<uint64_t>(v);
    }
  }
  void publish(CountSum& t) const {
    t.count += count;
    t.sum += sum;
  }
};
using CountingSink = FoldingSink<int64_t, CountSumFold<int64_t>>;
using KeyValueChecksumSink = FoldingSink<KeyValue, CountSumFold<KeyValue>>;

// keyed-sum: the largest running sum seen per key (= the key's final count,
// since sums only grow), plus record count and the sum of all emitted values.
struct KeyedTotals {
  std::mutex mu;
  std::vector<int64_t> maxPerKey = std::vector<int64_t>(kNumKeys, 0);
  int64_t count = 0;
  int64_t keysOutOfRange = 0;
  uint64_t valueSum = 0;
};

struct KeyedMaxFold {
  using Totals = KeyedTotals;
  std::vector<int64_t> max = std::vector<int64_t>(kNumKeys, 0);
  int64_t count = 0;
  uint64_t valueSum = 0;
  int64_t outOfRange = 0;
  void add(const KeyValue& kv) {
    ++count;
    valueSum += static_cast<uint64_t>(kv.second);
    if (kv.first < 0 || kv.first >= kNumKeys) {
      ++outOfRange;
      return;
    }
    int64_t& m = max[static_cast<size_t>(kv.first)];
    if (kv.second > m) m = kv.second;
  }
  void publish(KeyedTotals& t) const {
    std::lock_guard lock(t.mu);
    t.count += count;
    t.keysOutOfRange += outOfRange;
    t.valueSum += valueSum;
    for (size_t k = 0; k < max.size(); ++k) t.maxPerKey[k] = std::max(t.maxPerKey[k], max[k]);
  }
};
using KeyedMaxSink = FoldingSink<KeyValue, KeyedMaxFold>;

// wordcount, timed runs: record count and the sum of emitted running counts.
// A word counted c times emits 1..c, so the sum is sum_w c_w (c_w + 1) / 2,
// which the reference counts predict exactly.
struct WordTotals {
  std::atomic<int64_t> count{0};
  std::atomic<uint64_t> valueSum{0};
};

struct WordChecksumFold {
  using Totals = WordTotals;
  int64_t count = 0;
  uint64_t valueSum = 0;
  void add(const WordCount& wc) {
    ++count;
    valueSum += static_cast<uint64_t>(wc.second);
  }
  void publish(WordTotals& t) const {
    t.count += count;
    t.valueSum += valueSum;
  }
};
using WordChecksumSink = FoldingSink<WordCount, WordChecksumFold>;

// wordcount, verification run (untimed): the final count of every word.
struct WordFinal {
  std::mutex mu;
  std::unordered_map<std::string, int64_t> counts;
};

struct WordFinalFold {
  using Totals = WordFinal;
  std::unordered_map<std::string, int64_t> local;
  void add(const WordCount& wc) {
    int64_t& m = local[wc.first];
    m = std::max(m, wc.second);
  }
  void publish(WordFinal& t) const {
    std::lock_guard lock(t.mu);
    for (const auto& [w, c] : local) {
      int64_t& m = t.counts[w];
      m = std::max(m, c);
    }
  }
};
using WordFinalSink = FoldingSink<WordCount, WordFinalFold>;

// ---------------------------------------------------------------------------
// (a) chained: generator -> map -> filter -> sink, one chain.

Row runChained(int64_t n, int parallelism, int repeat) {
  // i is dropped iff 2i+1 = 0 (mod 3) iff i = 1 (mod 3): m = (n+1)/3 of them.
  // Sum of all 2i+1 over [0, n) is n^2; of the dropped (i = 3j+1) it is 3m^2.
  const uint64_t un = static_cast<uint64_t>(n);
  const uint64_t m = (un + 1) / 3;
  const int64_t expectedCount = n - static_cast<int64_t>(m);
  const uint64_t expectedSum = un * un - 3 * m * m;  // mod 2^64, as the sink sums

  Row row("chained", parallelism, n);
  row.best = bestOf(repeat, [&] {
    auto totals = std::make_shared<CountSum>();
    sluice::StreamExecutionEnvironment env;
    env.setParallelism(parallelism);
    env.fromGenerator([](int64_t i) { return i; }, n)
        .map([](const int64_t& x) { return x * 2 + 1; })
        .filter([](const int64_t& x) { return x % 3 != 0; })
        .sinkTo(CountingSink(totals), "Discard");
    Sample s = measure([&] { env.execute("bench-chained"); });
    check(totals->count == expectedCount, "chained: " + std::to_string(totals->count.load()) +
                                              " records, expected " +
                                              std::to_string(expectedCount));
    check(totals->sum == expectedSum, "chained: checksum of emitted values differs");
    return s;
  });
  row.target = ">=50M rec/s";
  row.targetMet =
      parallelism != 1 ? std::nullopt : std::optional<bool>(row.recordsPerSecond() >= 50e6);
  return row;
}

// ---------------------------------------------------------------------------
// (b) keyed-sum: generator of (i % 10000, 1) -> keyBy -> sum(1) -> sink.

// `backend`: "hashmap", "rocksdb" or "tiered" for state.backend.type; empty keeps the
// configured default (and the plain workload name).
Row runKeyedSum(int64_t n, int parallelism, int repeat, const std::string& backend = {}) {
  // Key k occurs floor(n / K) times, once more if k < n mod K; its running
  // sums are 1..c_k.
  std::vector<int64_t> expected(kNumKeys);
  uint64_t expectedValueSum = 0;
  for (int64_t k = 0; k < kNumKeys; ++k) {
    int64_t c = n / kNumKeys + (k < n % kNumKeys ? 1 : 0);
    expected[static_cast<size_t>(k)] = c;
    expectedValueSum += static_cast<uint64_t>(c) * static_cast<uint64_t>(c + 1) / 2;
  }

  Row row(withCheckpointSuffix(backend.empty() ? "keyed-sum" : "keyed-sum/" + backend), parallelism,
          n);
  row.best = bestOf(repeat, [&] {
    auto totals = std::make_shared<KeyedTotals>();
    sluice::StreamExecutionEnvironment env(checkpointConfiguration());
    env.setParallelism(parallelism);
    if (!backend.empty()) env.setStateBackend(backend);
    applyCheckpointing(env);
    auto pairs = [](int64_t i) { return KeyValue{i % kNumKeys, 1}; };
    env.fromGenerator(pairs, n)
        .keyBy([](const KeyValue& kv) { return kv.first; })
        .sum(1)
        .sinkTo(KeyedMaxSink(totals), "Discard");
    Sample s = runMeasured(env, "bench-keyed-sum", row);
    check(totals->keysOutOfRange == 0, "keyed-sum: the sink saw keys outside [0, 10000)");
    check(totals->count == n, "keyed-sum: " + std::to_string(totals->count) +
                                  " records reached the sink, expected " + std::to_string(n));
    int64_t finalSum = 0;
    for (int64_t c : totals->maxPerKey) finalSum += c;
    check(finalSum == n, "keyed-sum: final per-key counts add up to " + std::to_string(finalSum) +
                             ", expected " + std::to_string(n));
    check(totals->maxPerKey == expected, "keyed-sum: a key's final count is wrong");
    check(totals->valueSum == expectedValueSum,
          "keyed-sum: checksum of emitted running sums differs");
    return s;
  });
  if (backend.empty() || backend == "hashmap") {
    row.target = ">=10M rec/s";
    row.targetMet = row.recordsPerSecond() >= 10e6;
  }
  return row;
}

// ---------------------------------------------------------------------------
// (b2) windows: the keyed event-time window micro-benchmarks of issue 4.
// Element i: key i % 10000, value i % 1000, event time i / 1000 ms (1M
// events per event-time second); ascending timestamps, periodic watermarks.

using WindowEvent = std::tuple<int64_t, int64_t, int64_t>;  // key, value, timestamp

struct WindowTotals {
  std::atomic<int64_t> rows{0};
  std::atomic<int64_t> sumOfField1{0};
  std::atomic<int64_t> sumOfField2{0};
};

struct WindowTotalsFold {
  using Totals = WindowTotals;
  int64_t rows = 0, f1 = 0, f2 = 0;
  void add(const WindowEvent& e) {
    ++rows;
    f1 += std::get<1>(e);
    f2 += std::get<2>(e);
  }
  void publish(WindowTotals& t) const {
    t.rows += rows;
    t.sumOfField1 += f1;
    t.sumOfField2 += f2;
  }
};
using WindowTotalsSink = FoldingSink<WindowEvent, WindowTotalsFold>;

// The strategy goes to the source, as Flink recommends (its source then
// stamps the records itself). Until round twenty-six of issue 18 it was an
// assignTimestampsAndWatermarks operator after fromGenerator; docs/
// benchmarks.md has both forms' figures.
auto windowSource(sluice::StreamExecutionEnvironment& env, int64_t n) {
  auto strategy =
      sluice::WatermarkStrategy<WindowEvent>::forMonotonousTimestamps().withTimestampAssigner(
          [](const WindowEvent& e) { return std::get<2>(e); });
  return env
      .fromSource(sluice::GeneratorSource(
                      [](int64_t i) {
                        return WindowEvent{i % kNumKeys, i % 1000, i / 1000};
                      },
                      n),
                  strategy, "Generator Source")
      .keyBy([](const WindowEvent& e) { return std::get<0>(e); });
}

// Keyed tumbling 1 s event-time window sum of field 1.
Row runWindowTumbling(int64_t n, int parallelism, int repeat, const std::string& backend) {
  // Expected: one row per (key, second) that has elements; the sums add up.
  int64_t expectedRows = 0, expectedSum = 0;
  for (int64_t sec = 0; sec * 1'000'000 < n; ++sec) {
    int64_t inSecond = std::min<int64_t>(n - sec * 1'000'000, 1'000'000);
    expectedRows += std::min<int64_t>(inSecond, kNumKeys);
  }
  for (int64_t i = 0; i < n; ++i) expectedSum += i % 1000;
  Row row(withCheckpointSuffix(backend.empty() ? "window-tumbling" : "window-tumbling/" + backend),
          parallelism, n);
  row.best = bestOf(repeat, [&] {
    auto totals = std::make_shared<WindowTotals>();
    sluice::StreamExecutionEnvironment env(checkpointConfiguration());
    env.setParallelism(parallelism);
    if (!backend.empty()) env.setStateBackend(backend);
    applyCheckpointing(env);
    windowSource(env, n)
        .window(sluice::TumblingEventTimeWindows::of(std::chrono::seconds(1)))
        .sum(1)
        .sinkTo(WindowTotalsSink(totals), "Totals");
    Sample s = runMeasured(env, "bench-window-tumbling", row);
    check(totals->rows == expectedRows, "window-tumbling: " + std::to_string(totals->rows.load()) +
                                            " windows fired, expected " +
                                            std::to_string(expectedRows));
    check(totals->sumOfField1 == expectedSum, "window-tumbling: the window sums do not add up");
    return s;
  });
  // Issue 18's target for the sliced window operator (the hashmap backend
  // runs it; rocksdb keeps the general one).
  if (backend.empty() || backend == "hashmap") {
    row.target = ">=40M ev/s per core";
    row.targetMet = row.recordsPerCpuSecond() >= 40e6;
  }
  return row;
}

// Keyed sliding 10 s / 2 s windows: count and max of field 1 per key.
class CountAndMax final : public sluice::AggregateFunction<WindowEvent, WindowEvent, WindowEvent> {
 public:
  WindowEvent createAccumulator() override { return {0, 0, -1}; }  // key, count, max
  WindowEvent add(const WindowEvent& e, WindowEvent acc) override {
    return {std::get<0>(e), std::get<1>(acc) + 1, std::max(std::get<2>(acc), std::get<1>(e))};
  }
  WindowEvent getResult(const WindowEvent& acc) override { return acc; }
  WindowEvent merge(WindowEvent a, WindowEvent b) override {
    return {std::get<0>(a), std::get<1>(a) + std::get<1>(b),
            std::max(std::get<2>(a), std::get<2>(b))};
  }
};

Row runWindowSliding(int64_t n, int parallelism, int repeat, const std::string& backend) {
  // Every element is in exactly 5 windows; the expected maxima are summed
  // per (key, window) from the same formula, untimed.
  std::map<std::pair<int64_t, int64_t>, int64_t> maxima;
  if (n <= 20'000'000) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t ts = i / 1000, last = ts - ts % 2000;
      for (int64_t start = last; start > ts - 10'000; start -= 2000) {
        int64_t& m = maxima.try_emplace({i % kNumKeys, start}, -1).first->second;
        m = std::max(m, i % 1000);
      }
    }
  }
  int64_t expectedMaxSum = 0;
  for (const auto& [k, m] : maxima) expectedMaxSum += m;
  Row row(backend.empty() ? "window-sliding" : "window-sliding/" + backend, parallelism, n);
  row.best = bestOf(repeat, [&] {
    auto totals = std::make_shared<WindowTotals>();
    sluice::StreamExecutionEnvironment env;
    env.setParallelism(parallelism);
    if (!backend.empty()) env.setStateBackend(backend);
    windowSource(env, n)
        .window(
            sluice::SlidingEventTimeWindows::of(std::chrono::seconds(10), std::chrono::seconds(2)))
        .aggregate(CountAndMax())
        .sinkTo(WindowTotalsSink(totals), "Totals");
    Sample s = measure([&] { env.execute("bench-window-sliding"); });
    check(totals->sumOfField1 == 5 * n, "window-sliding: window counts add up to " +
                                            std::to_string(totals->sumOfField1.load()) +
                                            ", expected " + std::to_string(5 * n));
    if (!maxima.empty()) {
      check(totals->rows == static_cast<int64_t>(maxima.size()),
            "window-sliding: wrong number of windows fired");
      check(totals->sumOfField2 == expectedMaxSum, "window-sliding: window maxima differ");
    }
    return s;
  });
  if (backend.empty() || backend == "hashmap") {
    row.target = ">=20M ev/s per core";
    row.targetMet = row.recordsPerCpuSecond() >= 20e6;
  }
  return row;
}

// ---------------------------------------------------------------------------
// (c) wordcount and its hand-written baseline.

// Words of a line, split on single spaces (empty tokens skipped). Shared by
// the Sluice job and the baseline so both count the same words.
template <class F>
void forEachWord(std::string_view line, F&& f) {
  size_t start = 0;
  while (start <= line.size()) {
    size_t end = line.find(' ', start);
    if (end == std::string_view::npos) end = line.size();
    if (end > start) f(line.substr(start, end - start));
    start = end + 1;
  }
}

struct Corpus {
  // Shared with each job (fromCollection of a shared_ptr), so that a job
  // neither copies the corpus when it is built nor frees a copy when it
  // ends, just as the baseline reads it in place.
  std::shared_ptr<std::vector<std::string>> lines = std::make_shared<std::vector<std::string>>();
  int64_t words = 0;
  double megabytes = 0;
};

// About `words` Zipf(s = 1.0)-distributed words over a fixed random vocabulary
// of kVocabulary distinct lower-case words (length 2..12), 4..16 per line.
Corpus buildCorpus(int64_t words) {
  std::mt19937_64 rng(kCorpusSeed);
  auto uniform01 = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };

  std::vector<std::string> vocab;
  std::unordered_map<std::string, int> seen;
  while (vocab.size() < kVocabulary) {
    size_t len = 2 + rng() % 11;
    std::string w(len, 'a');
    for (char& c : w) c = static_cast<char>('a' + rng() % 26);
    if (seen.emplace(w, 0).second) vocab.push_back(std::move(w));
  }
  std::vector<double> cdf(kVocabulary);
  double total = 0;
  for (size_t r = 0; r < kVocabulary; ++r) {
    total += 1.0 / std::pow(static_cast<double>(r + 1), kZipfExponent);
    cdf[r] = total;
  }
  for (double& c : cdf) c /= total;

  Corpus corpus;
  std::string line;
  while (corpus.words < words) {
    int64_t perLine = std::min<int64_t>(4 + static_cast<int64_t>(rng() % 13), words - corpus.words);
    line.clear();
    for (int64_t i = 0; i < perLine; ++i) {
      size_t r =
          static_cast<size_t>(std::lower_bound(cdf.begin(), cdf.end(), uniform01()) - cdf.begin());
      if (r >= kVocabulary) r = kVocabulary - 1;
      if (i > 0) line += ' ';
      line += vocab[r];
    }
    corpus.words += perLine;
    corpus.megabytes += static_cast<double>(line.size() + 1) / (1 << 20);
    corpus.lines->push_back(line);
  }
  return corpus;
}

std::unordered_map<std::string, int64_t> baselineCount(const std::vector<std::string>& lines) {
  std::unordered_map<std::string, int64_t> counts;
  std::string word;
  for (const std::string& line : lines) {
    forEachWord(line, [&](std::string_view w) {
      word.assign(w);
      ++counts[word];
    });
  }
  return counts;
}

void tokenize(const std::string& line, sluice::Collector<WordCount>& out) {
  forEachWord(line, [&](std::string_view w) { out.collect(WordCount{std::string(w), 1}); });
}

void buildWordCountJob(sluice::StreamExecutionEnvironment& env, const Corpus& corpus,
                       std::shared_ptr<const sluice::Sink<WordCount>> sink) {
  env.fromCollection(std::shared_ptr<const std::vector<std::string>>(corpus.lines))
      .flatMap(tokenize)
      .name("Tokenizer")
      .keyBy([](const WordCount& wc) { return wc.first; })
      .sum(1)
      .name("Counter")
      .sinkTo(std::move(sink), "Discard");
}

struct WordCountRows {
  Row baseline;
  std::vector<Row> engine;
};

// `backends`: state.backend.type values to run the engine rows with; {""}
// keeps the configured default (and the plain workload name).
WordCountRows runWordCount(int64_t words, const std::vector<int>& parallelisms, int repeat,
                           bool withEngine, bool verifyFinalCounts,
                           const std::vector<std::string>& backends = {""}) {
  Corpus corpus = buildCorpus(words);
  std::fprintf(stderr,
               "wordcount corpus: %zu lines, %" PRId64
               " words, %.1f MiB, vocabulary %zu, zipf s=%.1f\n",
               corpus.lines->size(), corpus.words, corpus.megabytes, kVocabulary, kZipfExponent);

  // The reference counts, and the checksum the timed engine runs must match.
  const auto reference = baselineCount(*corpus.lines);
  uint64_t expectedValueSum = 0;
  for (const auto& [w, c] : reference) expectedValueSum += static_cast<uint64_t>(c) * (c + 1) / 2;

  WordCountRows out;
  out.baseline = Row("wordcount-baseline", 1, corpus.words);
  out.baseline.best = bestOf(repeat, [&] {
    std::unordered_map<std::string, int64_t> counts;
    Sample s = measure([&] { counts = baselineCount(*corpus.lines); });
    check(counts == reference, "wordcount-baseline: counts differ between runs");
    return s;
  });
  out.baseline.peakRssMiB = peakRssMiB();

  // Every backend at every parallelism, backends outermost.
  for (size_t run = 0; run < backends.size() * parallelisms.size(); ++run) {
    const std::string& backend = backends[run / parallelisms.size()];
    const int p = parallelisms[run % parallelisms.size()];
    if (!withEngine) break;
    // Untimed: the engine's final count for every word equals the baseline's.
    if (verifyFinalCounts) {
      auto finals = std::make_shared<WordFinal>();
      sluice::StreamExecutionEnvironment env;
      env.setParallelism(p);
      if (!backend.empty()) env.setStateBackend(backend);
      buildWordCountJob(env, corpus, std::make_shared<WordFinalSink>(finals));
      env.execute("bench-wordcount-verify");
      check(finals->counts == reference, "wordcount (p=" + std::to_string(p) +
                                             "): final counts differ from the baseline's (" +
                                             std::to_string(finals->counts.size()) + " vs " +
                                             std::to_string(reference.size()) + " words)");
    }
    Row row(backend.empty() ? "wordcount" : "wordcount/" + backend, p, corpus.words);
    row.best = bestOf(repeat, [&] {
      auto totals = std::make_shared<WordTotals>();
      sluice::StreamExecutionEnvironment env;
      env.setParallelism(p);
      if (!backend.empty()) env.setStateBackend(backend);
      buildWordCountJob(env, corpus, std::make_shared<WordChecksumSink>(totals));
      Sample s = measure([&] { env.execute("bench-wordcount"); });
      check(totals->count == corpus.words, "wordcount: " + std::to_string(totals->count.load()) +
                                               " records reached the sink, expected " +
                                               std::to_string(corpus.words));
      check(totals->valueSum == expectedValueSum, "wordcount: checksum of emitted counts differs");
      return s;
    });
    row.ratioToBaseline = row.recordsPerCpuSecond() / out.baseline.recordsPerCpuSecond();
    if (backend.empty() || backend == "hashmap") {
      row.target = ">=15M words/cpu-s";
      row.targetMet = row.recordsPerCpuSecond() >= 15e6;
    }
    row.peakRssMiB = peakRssMiB();
    out.engine.push_back(row);
  }
  return out;
}

// ---------------------------------------------------------------------------
// (d) state-ltm: keyed state several times larger than the memory its
// backend may use. A generator of N records over K distinct int64 keys ->
// keyBy -> a KeyedProcessFunction keeping a V-byte ValueState<std::string>
// and a ValueState<int64_t> counter per key -> sink. Record i has key
// (i * kLtmStride) mod K, so every K consecutive records touch each key once,
// in scattered order: the first pass inserts, the second (and any later one)
// reads, modifies and rewrites state that is mostly out of memory. Default N
// = 2 * K: tenths 1-5 insert, 6-10 update. The backend, K, V and the memory
// budgets are options (LtmSettings); the defaults are rocksdb, 2M keys, 200
// bytes, 64 MiB managed memory.

constexpr int64_t kLtmStride = 1'000'003;  // prime: coprime to K unless K is its multiple
constexpr int kLtmTenths = 10;

struct LtmSettings {
  std::string backend = "rocksdb";  // state.backend.type
  int64_t keys = 2'000'000;
  size_t payloadBytes = 200;            // at least 16: [key | count | filler]
  std::string managedMemory = "64 mb";  // taskmanager.memory.managed.size: RocksDB's
  std::string tieredMemory = "256 mb";  // state.backend.tiered.memory
  // A run in parts: with checkpointDir, the job's checkpoints are retained
  // there (incremental for rocksdb and tiered); stopAfterSeconds > 0 takes
  // one after that long and cancels the job; resumeFrom restores such a
  // checkpoint and goes on from its record.
  std::string checkpointDir;
  std::string checkpointInterval;  // execution.checkpointing.interval; empty: none
  double stopAfterSeconds = 0;
  std::string resumeFrom;
};

std::string si(double v);  // Output, below

// A /proc/self/status field in MiB (VmRSS, VmHWM), 0 when unreadable.
double procStatusMiB(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(status, line)) {
    if (line.rfind(prefix, 0) == 0) {
      return std::strtod(line.c_str() + prefix.size(), nullptr) / 1024.0;
    }
  }
  return 0;
}

// Bytes of the regular files under `dir`; files that vanish while it walks
// (RocksDB compacts concurrently) are skipped.
uint64_t directoryBytes(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  uint64_t total = 0;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code fileEc;
    if (!it->is_regular_file(fileEc) || fileEc) continue;
    const uintmax_t size = it->file_size(fileEc);
    if (!fileEc) total += size;
  }
  return total;
}

// Samples the size of a directory tree and the process RSS every 100 ms on a
// background thread, keeping the maxima.
class ResourceSampler {
 public:
  explicit ResourceSampler(std::filesystem::path dir)
      : dir_(std::move(dir)), thread_([this] { run(); }) {}
  ~ResourceSampler() { stop(); }
  ResourceSampler(const ResourceSampler&) = delete;
  ResourceSampler& operator=(const ResourceSampler&) = delete;

  void stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  uint64_t maxDirBytes() const { return maxDirBytes_; }
  double maxRssMiB() const { return maxRssMiB_; }

 private:
  void run() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      const uint64_t bytes = directoryBytes(dir_);
      maxDirBytes_ = std::max(maxDirBytes_, bytes);
      maxRssMiB_ = std::max(maxRssMiB_, procStatusMiB("VmRSS"));
      lock.lock();
      cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stop_; });
    }
  }

  std::filesystem::path dir_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  // Written by the sampler thread only; read after stop() joined it.
  uint64_t maxDirBytes_ = 0;
  double maxRssMiB_ = 0;
  std::thread thread_;  // last: starts after the fields above exist
};

// Written on the keyed operator's task thread; read after the job ends.
struct LtmProgress {
  int64_t records = 0;  // expected total
  int64_t keys = 0;
  int64_t payloadBytes = 0;
  int64_t seen = 0;
  int64_t seenAtRestore = 0;                    // > 0 when the part resumed from a checkpoint
  std::map<int64_t, int64_t> seenAtCheckpoint;  // by checkpoint id, for this part's
  std::array<Clock::time_point, kLtmTenths + 1> at{};  // [0] first record, [k] after k tenths
  int64_t badPayloads = 0;
  int64_t distinctKeys = 0;
  double rssAtLastRecordMiB = 0;
  std::filesystem::path localDir;  // state.backend.rocksdb.localdir
  uint64_t dirBytesAtLastRecord = 0;
};

void writeLtmHeader(std::string& payload, int64_t key, int64_t count) {
  std::memcpy(payload.data(), &key, sizeof key);
  std::memcpy(payload.data() + sizeof key, &count, sizeof count);
}

// Keeps its progress (records seen, distinct keys, bad reads, and the times
// of the tenths so far) in operator state, so a run in parts checks and
// times the whole run: a part that resumes from a checkpoint counts on from
// it, with its clock set back by the time the earlier parts took to get there.
class LtmFunction final : public sluice::KeyedProcessFunction<int64_t, int64_t, KeyValue>,
                          public sluice::CheckpointedFunction {
 public:
  LtmFunction(std::shared_ptr<LtmProgress> progress, size_t payloadBytes)
      : progress_(std::move(progress)), payloadBytes_(payloadBytes) {}

  // The state: [records, keys, payload bytes, seen, distinct keys, bad
  // payloads, ns from the first record to the snapshot, then ns from the
  // first record to the end of each tenth done].
  void initializeState(sluice::FunctionInitializationContext& context) override {
    state_ = &context.getOperatorStateStore().getListState(
        sluice::ListStateDescriptor<int64_t>("ltm-progress"));
    if (!context.isRestored()) return;
    const std::vector<int64_t> v = state_->get();
    LtmProgress& p = *progress_;
    if (v.size() < 7) {
      throw std::runtime_error("state-ltm: the checkpoint holds " + std::to_string(v.size()) +
                               " progress fields, expected at least 7");
    }
    if (v[0] != p.records || v[1] != p.keys || v[2] != p.payloadBytes) {
      throw std::runtime_error(
          "state-ltm: the checkpoint is of a run of " + std::to_string(v[0]) + " records over " +
          std::to_string(v[1]) + " keys with " + std::to_string(v[2]) +
          " B payloads; resume it with those --records, --ltm-keys and --ltm-value-bytes");
    }
    p.seen = p.seenAtRestore = v[3];
    p.distinctKeys = v[4];
    p.badPayloads = v[5];
    p.at[0] = Clock::now() - std::chrono::nanoseconds(v[6]);
    for (size_t k = 1; k <= kLtmTenths && 6 + k < v.size(); ++k) {
      p.at[k] = p.at[0] + std::chrono::nanoseconds(v[6 + k]);
    }
  }

  void snapshotState(const sluice::FunctionSnapshotContext& context) override {
    LtmProgress& p = *progress_;
    const auto sinceFirst = [&](Clock::time_point t) {
      return static_cast<int64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(t - p.at[0]).count());
    };
    std::vector<int64_t> v{p.records,
                           p.keys,
                           p.payloadBytes,
                           p.seen,
                           p.distinctKeys,
                           p.badPayloads,
                           p.seen > 0 ? sinceFirst(Clock::now()) : 0};
    for (int k = 1; k <= kLtmTenths; ++k) {
      if (p.seen < (p.records * k + kLtmTenths - 1) / kLtmTenths) break;
      v.push_back(sinceFirst(p.at[k]));
    }
    state_->update(v);
    p.seenAtCheckpoint[context.getCheckpointId()] = p.seen;
  }

  void open() override {
    payload_ = &getRuntimeContext().getState(sluice::ValueStateDescriptor<std::string>("payload"));
    count_ = &getRuntimeContext().getState(sluice::ValueStateDescriptor<int64_t>("count"));
  }

  void processElement(const int64_t& key, Context&, sluice::Collector<KeyValue>& out) override {
    LtmProgress& p = *progress_;
    if (p.seen == 0) p.at[0] = Clock::now();

    const int64_t previous = count_->value().value_or(0);
    const int64_t count = previous + 1;
    count_->update(count);

    // The payload holds [key | count | filler]; a stored one must hold this
    // key and the previous count, so every read is checked.
    std::optional<std::string> payload = payload_->value();
    if (!payload) {
      if (previous != 0) ++p.badPayloads;
      ++p.distinctKeys;
      // Incompressible filler (RocksDB compresses its files), fixed per key.
      payload.emplace(payloadBytes_, '\0');
      uint64_t x = static_cast<uint64_t>(key);
      for (size_t i = 16; i < payloadBytes_; i += 8) {
        x += 0x9E3779B97F4A7C15ULL;  // splitmix64
        uint64_t z = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        z ^= z >> 31;
        std::memcpy(payload->data() + i, &z, std::min<size_t>(8, payloadBytes_ - i));
      }
    } else {
      int64_t storedKey = 0;
      int64_t storedCount = 0;
      if (payload->size() == payloadBytes_) {
        std::memcpy(&storedKey, payload->data(), sizeof storedKey);
        std::memcpy(&storedCount, payload->data() + sizeof storedKey, sizeof storedCount);
      }
      if (payload->size() != payloadBytes_ || storedKey != key || storedCount != previous) {
        ++p.badPayloads;
        payload->resize(payloadBytes_);
      }
    }
    writeLtmHeader(*payload, key, count);
    payload_->update(*payload);
    out.collect(KeyValue{key, count});

    ++p.seen;
    // Tenth k ends after ceil(k * N / 10) records.
    for (int k = 1; k <= kLtmTenths; ++k) {
      if (p.seen != (p.records * k + kLtmTenths - 1) / kLtmTenths) continue;
      p.at[k] = Clock::now();
      // Progress, for long runs: this tenth's rate so far.
      const int64_t begin = (p.records * (k - 1) + kLtmTenths - 1) / kLtmTenths;
      const double s = std::chrono::duration<double>(p.at[k] - p.at[k - 1]).count();
      std::fprintf(stderr, "state-ltm: tenth %d/%d done, %.0f records/s\n", k, kLtmTenths,
                   s > 0 ? static_cast<double>(p.seen - begin) / s : 0.0);
    }
    if (p.seen == p.records) {
      p.rssAtLastRecordMiB = procStatusMiB("VmRSS");
      p.dirBytesAtLastRecord = directoryBytes(p.localDir);
    }
  }

 private:
  std::shared_ptr<LtmProgress> progress_;
  size_t payloadBytes_;
  sluice::ValueState<std::string>* payload_ = nullptr;
  sluice::ValueState<int64_t>* count_ = nullptr;
  sluice::ListState<int64_t>* state_ = nullptr;
};

int64_t ltmMemoryBytes(const std::string& text, const char* option) {
  auto size = sluice::MemorySize::parse(text);
  if (!size.isOk() || size.value().bytes == 0) {
    throw std::runtime_error(std::string("state-ltm: ") + option + " '" + text +
                             "' is not a positive memory size (e.g. \"256 mb\")");
  }
  return static_cast<int64_t>(size.value().bytes);
}

// Runs once (not best of --repeat): a run takes minutes and its point is the
// shape over time, not the best time.
Row runStateLtm(int64_t n, const LtmSettings& settings) {
  namespace fs = std::filesystem;
  const int64_t keys = settings.keys;
  const size_t payloadBytes = settings.payloadBytes;
  if (keys < 1 || keys % kLtmStride == 0) {
    throw std::runtime_error("state-ltm: --ltm-keys must be positive and not a multiple of " +
                             std::to_string(kLtmStride));
  }
  if (payloadBytes < 16) throw std::runtime_error("state-ltm: --ltm-value-bytes must be >= 16");
  const int64_t managedBytes = ltmMemoryBytes(settings.managedMemory, "--ltm-managed-memory");
  const bool tiered = settings.backend == "tiered";
  const int64_t tieredBytes =
      tiered ? ltmMemoryBytes(settings.tieredMemory, "--ltm-tiered-memory") : 0;
  // What the backend may hold in memory: RocksDB's managed memory (not used
  // by hashmap), plus the tiered cache.
  const int64_t budgetBytes = (settings.backend == "hashmap" ? 0 : managedBytes) + tieredBytes;
  if ((settings.stopAfterSeconds > 0 || !settings.checkpointInterval.empty()) &&
      settings.checkpointDir.empty()) {
    throw std::runtime_error(
        "state-ltm: --ltm-stop-after and --ltm-checkpoint-interval need --ltm-checkpoint-dir");
  }
  // The sum of the counts emitted by records [0, m): key k occurs m / K
  // times, once more for the first m mod K positions, and its c-th record
  // emits c.
  const auto countSum = [keys](int64_t m) {
    const uint64_t full = static_cast<uint64_t>(m / keys);
    const uint64_t rem = static_cast<uint64_t>(m % keys);
    return rem * (full + 1) * (full + 2) / 2 +
           (static_cast<uint64_t>(keys) - rem) * full * (full + 1) / 2;
  };
  const int64_t expectedKeys = std::min<int64_t>(n, keys);

  char pattern[] = "/tmp/sluice-bench-ltm-XXXXXX";
  if (mkdtemp(pattern) == nullptr) throw std::runtime_error("state-ltm: mkdtemp failed");
  const fs::path dir = pattern;
  struct RemoveDir {
    fs::path dir;
    ~RemoveDir() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } removeDir{dir};

  sluice::Configuration conf;
  conf.setString("state.backend.type", settings.backend);
  conf.setString("taskmanager.memory.managed.size", settings.managedMemory);
  conf.setString("state.backend.rocksdb.localdir", dir.string());
  // A failure ends the run: a restart would count the failed attempt's
  // records and sink totals too.
  conf.setString("restart-strategy.type", "none");
  if (tiered) conf.setString("state.backend.tiered.memory", settings.tieredMemory);
  if (!settings.checkpointDir.empty()) {
    conf.setString("state.checkpoints.dir", settings.checkpointDir);
    conf.setString("state.backend.incremental", "true");
    conf.setString("execution.checkpointing.externalized-checkpoint-retention",
                   "RETAIN_ON_CANCELLATION");
    if (!settings.checkpointInterval.empty()) {
      conf.setString("execution.checkpointing.interval", settings.checkpointInterval);
    }
  }
  if (!settings.resumeFrom.empty()) conf.setString("execution.savepoint.path", settings.resumeFrom);
  sluice::StreamExecutionEnvironment env(conf);
  env.setParallelism(1);
  auto progress = std::make_shared<LtmProgress>();
  progress->records = n;
  progress->keys = keys;
  progress->payloadBytes = static_cast<int64_t>(payloadBytes);
  progress->localDir = dir;
  auto totals = std::make_shared<CountSum>();
  env.fromGenerator(
         [keys](int64_t i) {
           return static_cast<int64_t>((static_cast<unsigned __int128>(i) * kLtmStride) %
                                       static_cast<uint64_t>(keys));
         },
         n)
      .keyBy([](const int64_t& k) { return k; })
      .process(LtmFunction(progress, payloadBytes))
      .name("LargeState")
      .sinkTo(KeyValueChecksumSink(totals), "Discard");

  // Best effort: reset VmHWM so the peak is this run's, not an earlier
  // workload's (Linux >= 4.0).
  { std::ofstream("/proc/self/clear_refs") << "5"; }
  const double rssBeforeMiB = procStatusMiB("VmRSS");
  ResourceSampler sampler(dir);
  Row row("state-ltm", 1, n);
  std::string checkpointPath;  // where a stopped part's last checkpoint is
  int64_t checkpointId = -1;
  row.best = measure([&] {
    if (settings.stopAfterSeconds <= 0) {
      env.execute("bench-state-ltm");
      return;
    }
    sluice::JobClient job = env.executeAsync("bench-state-ltm");
    const Clock::time_point stopAt =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(settings.stopAfterSeconds));
    while (Clock::now() < stopAt && job.getJobStatus() == sluice::JobStatus::kRunning) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (job.getJobStatus() != sluice::JobStatus::kRunning) {
      job.getJobExecutionResult();  // finished first (or throws why it failed)
      return;
    }
    std::fprintf(stderr, "state-ltm: taking a checkpoint to stop at\n");
    try {
      job.triggerCheckpoint();
    } catch (const std::exception& e) {
      // The job ended meanwhile, or the checkpoint failed: a periodic one,
      // if any, is where a later part goes on from.
      std::fprintf(stderr, "state-ltm: the checkpoint to stop at failed: %s\n", e.what());
    }
    job.cancel();
    try {
      job.getJobExecutionResult();
      return;  // it finished before the cancel: the whole run is done
    } catch (const sluice::JobExecutionException& e) {
      if (e.getStatus() != sluice::JobStatus::kCanceled) throw;
    }
    // The latest one: a periodic checkpoint may have completed after ours.
    const sluice::JobClient::CheckpointStats stats = job.getCheckpointStats();
    if (stats.latestCompletedId < 0) {
      throw std::runtime_error("state-ltm: stopped without a checkpoint to resume from");
    }
    checkpointId = stats.latestCompletedId;
    checkpointPath = stats.latestCompletedPath;
  });
  sampler.stop();
  const double peakMiB = procStatusMiB("VmHWM");
  const double rssAfterMiB = procStatusMiB("VmRSS");

  const LtmProgress& p = *progress;
  const bool stopped = !checkpointPath.empty();
  check(p.badPayloads == 0, "state-ltm: " + std::to_string(p.badPayloads) +
                                " reads returned a wrong or missing payload");
  if (stopped) {
    // Cancelled: records after the checkpoint are seen again when a later
    // part resumes it, and those in flight may not have reached the sink.
    check(p.distinctKeys == std::min<int64_t>(p.seen, keys),
          "state-ltm: " + std::to_string(p.distinctKeys) + " distinct keys after " +
              std::to_string(p.seen) + " records");
    std::printf("state-ltm: stopped after %.0f s at a checkpoint of record %" PRId64 " of %" PRId64
                " (this part began at record %" PRId64 "); resume with --ltm-resume %s\n",
                settings.stopAfterSeconds, p.seenAtCheckpoint.at(checkpointId), n, p.seenAtRestore,
                checkpointPath.c_str());
  } else {
    check(p.seen == n, "state-ltm: the function saw " + std::to_string(p.seen) +
                           " records, expected " + std::to_string(n));
    check(p.distinctKeys == expectedKeys, "state-ltm: " + std::to_string(p.distinctKeys) +
                                              " distinct keys, expected " +
                                              std::to_string(expectedKeys));
    // The sink saw this part's records: those from the checkpoint on.
    const int64_t partRecords = n - p.seenAtRestore;
    check(totals->count == partRecords, "state-ltm: " + std::to_string(totals->count.load()) +
                                            " records reached the sink, expected " +
                                            std::to_string(partRecords));
    check(totals->sum == countSum(n) - countSum(p.seenAtRestore),
          "state-ltm: checksum of emitted counts differs");
    if (p.seenAtRestore > 0) {
      std::printf("state-ltm: this part resumed at record %" PRId64 " from %s\n", p.seenAtRestore,
                  settings.resumeFrom.c_str());
    }
  }

  // The row's rates are this part's: its records (up to its checkpoint,
  // when it stopped) over its time.
  row.records = (stopped ? p.seenAtCheckpoint.at(checkpointId) : n) - p.seenAtRestore;

  // Logical state: per key [kg | key] (10 B) twice, a 200 B payload (plus its
  // length prefix) and an 8 B count.
  const double logicalBytes =
      static_cast<double>(expectedKeys) *
      static_cast<double>(2 * 10 + payloadBytes + (payloadBytes < 128 ? 1 : 2) + 8);
  std::vector<double> tenthRates;
  for (int k = 1; k <= kLtmTenths; ++k) {
    const int64_t begin = (n * (k - 1) + kLtmTenths - 1) / kLtmTenths;
    const int64_t end = (n * k + kLtmTenths - 1) / kLtmTenths;
    const double s = std::chrono::duration<double>(p.at[k] - p.at[k - 1]).count();
    tenthRates.push_back(s > 0 ? static_cast<double>(end - begin) / s : 0);
  }
  const double lastHalfMin =
      *std::min_element(tenthRates.begin() + kLtmTenths / 2, tenthRates.end());
  const double lastHalfMax =
      *std::max_element(tenthRates.begin() + kLtmTenths / 2, tenthRates.end());

  std::printf("state-ltm: %s, parallelism 1, managed memory %.0f MiB", settings.backend.c_str(),
              static_cast<double>(managedBytes) / (1 << 20));
  if (tiered) std::printf(", tiered memory %.0f MiB", static_cast<double>(tieredBytes) / (1 << 20));
  std::printf(", %" PRId64 " records over %" PRId64 " keys (%zu B payload + counter per key)\n", n,
              expectedKeys, payloadBytes);
  if (budgetBytes > 0) {
    std::printf("  logical state   %8.1f MiB = %.1fx the backend's memory budget (%.0f MiB)\n",
                logicalBytes / (1 << 20), logicalBytes / static_cast<double>(budgetBytes),
                static_cast<double>(budgetBytes) / (1 << 20));
  } else {
    std::printf("  logical state   %8.1f MiB (hashmap: no budget)\n", logicalBytes / (1 << 20));
  }
  std::printf(
      "  rocksdb on disk %8.1f MiB max (sampled every 100 ms), %.1f MiB at the last record\n",
      static_cast<double>(sampler.maxDirBytes()) / (1 << 20),
      static_cast<double>(p.dirBytesAtLastRecord) / (1 << 20));
  std::printf(
      "  RSS             %8.1f MiB peak (VmHWM), %.1f MiB at the last record, %.1f MiB after the "
      "job, %.1f MiB before it\n",
      peakMiB, p.rssAtLastRecordMiB, rssAfterMiB, rssBeforeMiB);
  if (budgetBytes > 0) {
    std::printf(
        "  peak RSS - RSS before the job = %.1f MiB against a budget of %.0f MiB (%+.1f MiB)\n",
        peakMiB - rssBeforeMiB, static_cast<double>(budgetBytes) / (1 << 20),
        peakMiB - rssBeforeMiB - static_cast<double>(budgetBytes) / (1 << 20));
  }
  std::printf("  records/s per tenth of the run (pass 1 inserts: the first %.1f tenths):\n   ",
              std::min(10.0, 10.0 * static_cast<double>(keys) / static_cast<double>(n)));
  for (double r : tenthRates) std::printf(" %s", si(r).c_str());
  std::printf("\n  last five tenths: min %s, max %s (%.2fx)\n", si(lastHalfMin).c_str(),
              si(lastHalfMax).c_str(), lastHalfMax > 0 ? lastHalfMin / lastHalfMax : 0.0);
  std::fflush(stdout);

  std::ostringstream extra;
  extra << "\"state_backend\": \"" << settings.backend
        << "\", \"managed_memory_mib\": " << static_cast<double>(managedBytes) / (1 << 20)
        << ", \"tiered_memory_mib\": " << static_cast<double>(tieredBytes) / (1 << 20)
        << ", \"rss_before_job_mib\": " << rssBeforeMiB << ", \"keys\": " << expectedKeys
        << ", \"payload_bytes\": " << payloadBytes
        << ", \"logical_state_mib\": " << logicalBytes / (1 << 20) << ", \"state_to_budget\": "
        << (budgetBytes > 0 ? logicalBytes / static_cast<double>(budgetBytes) : 0.0)
        << ", \"rocksdb_dir_max_mib\": " << static_cast<double>(sampler.maxDirBytes()) / (1 << 20)
        << ", \"rocksdb_dir_at_last_record_mib\": "
        << static_cast<double>(p.dirBytesAtLastRecord) / (1 << 20)
        << ", \"vm_hwm_mib\": " << peakMiB
        << ", \"rss_at_last_record_mib\": " << p.rssAtLastRecordMiB
        << ", \"rss_after_job_mib\": " << rssAfterMiB << ", \"records_per_second_by_tenth\": [";
  for (size_t i = 0; i < tenthRates.size(); ++i) {
    extra << (i ? ", " : "") << static_cast<int64_t>(tenthRates[i]);
  }
  extra << "], \"resumed_at_record\": " << p.seenAtRestore;
  if (stopped) {
    extra << ", \"stopped_at_checkpoint_of_record\": " << p.seenAtCheckpoint.at(checkpointId)
          << ", \"checkpoint\": \"" << checkpointPath << "\"";
  }
  row.extraJson = extra.str();
  row.peakRssMiB = peakMiB;
  return row;
}

// ---------------------------------------------------------------------------
// (e) Nexmark queries and the Yahoo Streaming Benchmark (bench/nexmark), each
// next to its hand-written single-threaded baseline, measured in the same
// invocation. Every run's output checksum (row count and the sum of the rows'
// hashes) must equal the baseline's; q12, whose processing-time windows
// differ between runs, is checked on its per-bidder totals.

struct NexmarkSetting {
  int64_t eventTimeRate = 10'000;  // events per second of event time
};

std::string nexmarkTarget(sluice::nexmark::Query q, double* perCore) {
  using sluice::nexmark::Query;
  switch (q) {
    case Query::kQ0:
    case Query::kQ1:
    case Query::kQ2: *perCore = 3e6; return ">=0.5x base, >=3M ev/cpu-s";
    case Query::kQ5: *perCore = 440e3; return ">=0.5x base, >=440k ev/cpu-s";
    case Query::kQ7: *perCore = 250e3; return ">=0.5x base, >=250k ev/cpu-s";
    case Query::kQ8: *perCore = 2.9e6; return ">=0.5x base, >=2.9M ev/cpu-s";
    case Query::kQ11: *perCore = 800e3; return ">=0.5x base, >=800k ev/cpu-s";
    default: *perCore = 0; return ">=0.5x base";
  }
}

// The baseline row first, then one engine row per parallelism (and
// checkpoint interval).
std::vector<Row> runNexmark(sluice::nexmark::Query q, int64_t events,
                            const std::vector<int>& parallelisms,
                            const std::vector<int64_t>& checkpointIntervals, int repeat,
                            const std::string& backend, const NexmarkSetting& setting) {
  namespace nx = sluice::nexmark;
  nx::GeneratorConfig gen;
  gen.eventsPerSecond = setting.eventTimeRate;
  const std::string name = nx::queryName(q);
  std::vector<Row> rows;

  std::optional<nx::Checksum> expected;
  Row base(name + "-baseline", 1, events);
  base.best = bestOf(repeat, [&] {
    nx::Checksum c;
    Sample s = measure([&] { c = nx::runBaseline(q, gen, events); });
    if (!expected) expected = c;
    check(c == *expected, name + "-baseline: checksum differs between runs");
    return s;
  });
  base.peakRssMiB = peakRssMiB();
  std::fprintf(stderr, "%s: baseline %s\n", name.c_str(), expected->toString().c_str());
  rows.push_back(base);

  double perCore = 0;
  const std::string target = nexmarkTarget(q, &perCore);
  for (int p : parallelisms) {
    for (int64_t interval : checkpointIntervals) {
      gCheckpoint.intervalMs = interval;
      Row row(withCheckpointSuffix(backend.empty() ? name : name + "/" + backend), p, events);
      row.best = bestOf(repeat, [&] {
        sluice::StreamExecutionEnvironment env;
        env.setParallelism(p);
        if (!backend.empty()) env.setStateBackend(backend);
        applyCheckpointing(env);
        nx::JobOptions options;
        options.generator = gen;
        options.events = events;
        options.parallelism = p;
        auto out = std::make_shared<nx::ResultCollector>();
        nx::buildQuery(env, q, options, out);
        Sample s = runMeasured(env, "bench-" + name, row);
        const nx::Checksum got = out->result();
        check(got == *expected, name + " (p=" + std::to_string(p) + "): " + got.toString() +
                                    ", baseline " + expected->toString());
        return s;
      });
      // Per CPU-second, as issue 18's target (>= 0.5x) has it: the
      // baseline is one thread, the engine's p threads all count.
      row.ratioToBaseline = row.recordsPerCpuSecond() / base.recordsPerCpuSecond();
      if ((backend.empty() || backend == "hashmap") && interval == 0) {
        row.target = target;
        row.targetMet =
            *row.ratioToBaseline >= 0.5 && (perCore == 0 || row.recordsPerCpuSecond() >= perCore);
      }
      row.peakRssMiB = peakRssMiB();
      rows.push_back(row);
    }
    gCheckpoint.intervalMs = 0;
  }
  return rows;
}

// Latency mode (--latency-rate): the query runs once with its source limited
// to `rate` events/s of wall time and an event-time rate equal to it, so event
// time is the wall clock shifted to the source's start; every row's latency is
// its arrival at the sink minus the creation of the event whose time it
// carries (see LatencyOrigin in nexmark/checksum.h). The output is still
// checked against the baseline.
struct LatencySetting {
  int64_t rate = 0;                  // events/s; 0: latency mode off
  int64_t bufferTimeoutMs = -2;      // -2: the configured execution.buffer-timeout
  int64_t watermarkIntervalMs = -1;  // -1: the configured pipeline.auto-watermark-interval
};

Row runNexmarkLatency(sluice::nexmark::Query q, int64_t events, int parallelism,
                      const std::string& backend, const LatencySetting& setting) {
  namespace nx = sluice::nexmark;
  nx::GeneratorConfig gen;
  gen.eventsPerSecond = setting.rate;
  const std::string name = nx::queryName(q);
  const nx::Checksum expected = nx::runBaseline(q, gen, events);

  Row row(withCheckpointSuffix((backend.empty() ? name : name + "/" + backend) + "@" +
                               si(static_cast<double>(setting.rate)) + "/s"),
          parallelism, events);
  sluice::StreamExecutionEnvironment env;
  env.setParallelism(parallelism);
  if (!backend.empty()) env.setStateBackend(backend);
  if (setting.bufferTimeoutMs >= -1) env.setBufferTimeout(setting.bufferTimeoutMs);
  if (setting.watermarkIntervalMs >= 0) {
    env.setAutoWatermarkInterval(std::chrono::milliseconds(setting.watermarkIntervalMs));
  }
  applyCheckpointing(env);
  nx::JobOptions options;
  options.generator = gen;
  options.events = events;
  options.parallelism = parallelism;
  options.wallRatePerSecond = static_cast<double>(setting.rate);
  options.sourceStartMicros = std::make_shared<std::atomic<int64_t>>(0);
  auto out = std::make_shared<nx::ResultCollector>();
  out->enableLatency({gen.baseTime, options.sourceStartMicros});
  nx::buildQuery(env, q, options, out);
  row.best = runMeasured(env, "bench-latency-" + name, row);
  const nx::Checksum got = out->result();
  check(got == expected,
        name + " (latency run): " + got.toString() + ", baseline " + expected.toString());
  const nx::LatencyHistogram& h = out->latencies();
  const double p50 = static_cast<double>(h.quantile(0.5)) / 1000.0;
  const double p99 = static_cast<double>(h.quantile(0.99)) / 1000.0;
  const double p999 = static_cast<double>(h.quantile(0.999)) / 1000.0;
  std::printf("%s: %" PRId64 " rows, latency p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms\n",
              row.workload.c_str(), h.count(), p50, p99, p999);
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "\"latency_rate\": %" PRId64 ", \"latency_rows\": %" PRId64
                ", \"latency_p50_ms\": %.3f, \"latency_p99_ms\": %.3f, "
                "\"latency_p999_ms\": %.3f",
                setting.rate, h.count(), p50, p99, p999);
  row.extraJson = row.extraJson.empty() ? buf : row.extraJson + ", " + buf;
  if (nx::isStateless(q)) {
    // The same loop by hand at the same rate: what this machine and this way
    // of measuring allow without the engine.
    const nx::BaselineLatency base = nx::runBaselineLatency(q, gen, events);
    check(base.checksum == expected, name + " (latency baseline): " + base.checksum.toString() +
                                         ", baseline " + expected.toString());
    const nx::LatencyHistogram& b = base.latencies;
    const double b50 = static_cast<double>(b.quantile(0.5)) / 1000.0;
    const double b99 = static_cast<double>(b.quantile(0.99)) / 1000.0;
    const double b999 = static_cast<double>(b.quantile(0.999)) / 1000.0;
    std::printf("%s: hand-written loop at the same rate: p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms\n",
                row.workload.c_str(), b50, b99, b999);
    std::snprintf(buf, sizeof buf,
                  "\"baseline_latency_p50_ms\": %.3f, \"baseline_latency_p99_ms\": %.3f, "
                  "\"baseline_latency_p999_ms\": %.3f",
                  b50, b99, b999);
    row.extraJson += ", ";
    row.extraJson += buf;
  }
  row.target = "p99<=2ms, p99.9<=5ms";
  row.targetMet = p99 <= 2.0 && p999 <= 5.0;
  row.peakRssMiB = peakRssMiB();
  return row;
}

// ---------------------------------------------------------------------------
// Output

std::string si(double v) {
  char buf[32];
  if (v >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.2fG", v / 1e9);
  } else if (v >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  } else if (v >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.2fk", v / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  }
  return buf;
}

void printTable(const std::vector<Row>& rows) {
  std::printf("%-28s %2s %9s %8s %9s %8s %10s %8s %8s  %s\n", "workload", "p", "records", "wall_s",
              "rec/s", "cpu_s", "rec/cpu-s", "rss_MiB", "vs_base", "target");
  for (const Row& r : rows) {
    char ratio[16] = "-";
    if (r.ratioToBaseline) std::snprintf(ratio, sizeof ratio, "%.2fx", *r.ratioToBaseline);
    std::string target = r.target.empty() ? "-" : r.target;
    if (r.targetMet) target += *r.targetMet ? " ok" : " MISS";
    std::printf("%-28s %2d %9s %8.3f %9s %8.3f %10s %8.1f %8s  %s\n", r.workload.c_str(),
                r.parallelism, si(static_cast<double>(r.records)).c_str(), r.best.wallSeconds,
                si(r.recordsPerSecond()).c_str(), r.best.cpuSeconds,
                si(r.recordsPerCpuSecond()).c_str(), r.peakRssMiB, ratio, target.c_str());
  }
  std::fflush(stdout);
}

void writeJson(const std::string& path, const std::vector<Row>& rows, int repeat) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write '" + path + "'");
  f << "{\n  \"repeat\": " << repeat << ",\n  \"results\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "    {\"workload\": \"%s\", \"parallelism\": %d, \"records\": %" PRId64
                  ", \"wall_seconds\": %.6f, \"records_per_second\": %.1f, \"cpu_seconds\": %.6f, "
                  "\"records_per_cpu_second\": %.1f, \"peak_rss_mib\": %.1f",
                  r.workload.c_str(), r.parallelism, r.records, r.best.wallSeconds,
                  r.recordsPerSecond(), r.best.cpuSeconds, r.recordsPerCpuSecond(), r.peakRssMiB);
    f << buf;
    if (r.ratioToBaseline) f << ", \"ratio_to_baseline\": " << *r.ratioToBaseline;
    if (!r.target.empty()) f << ", \"target\": \"" << r.target << "\"";
    if (r.targetMet) f << ", \"target_met\": " << (*r.targetMet ? "true" : "false");
    if (!r.extraJson.empty()) f << ", " << r.extraJson;
    f << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  f << "  ]\n}\n";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sluice-bench: throughput of ordinary Sluice jobs (see bench/README.md)"};
  std::vector<std::string> workloads;
  int64_t records = 0;
  std::vector<int> parallelisms;
  std::string jsonPath;
  int repeat = 3;
  bool verify = true;
  std::vector<std::string> backends;
  // The default set; state-ltm (tens of seconds, ~1 GB on disk) runs only
  // when named.
  const std::vector<std::string> all = {"chained",         "keyed-sum",
                                        "wordcount",       "wordcount-baseline",
                                        "window-tumbling", "window-sliding"};
  std::vector<std::string> known = all;
  known.push_back("state-ltm");
  // Nexmark queries and YSB: named one by one, or all with "nexmark".
  std::vector<std::string> nexmarkNames;
  for (sluice::nexmark::Query q : sluice::nexmark::allQueries()) {
    nexmarkNames.push_back(sluice::nexmark::queryName(q));
  }
  known.insert(known.end(), nexmarkNames.begin(), nexmarkNames.end());
  known.push_back("nexmark");
  app.add_option("--workload", workloads,
                 "chained, keyed-sum, wordcount, wordcount-baseline, window-tumbling, "
                 "window-sliding, state-ltm, nexmark-q0 ... nexmark-q12, ysb, nexmark (= all "
                 "Nexmark queries and ysb) (repeatable; default all but state-ltm and nexmark)")
      ->check(CLI::IsMember(known));
  app.add_option(
         "--records", records,
         "records per run (wordcount: words); default chained 50M, keyed-sum 20M, wordcount 5M, "
         "window-tumbling 20M, window-sliding 5M")
      ->check(CLI::PositiveNumber);
  app.add_option(
         "--parallelism", parallelisms,
         "parallelism (repeatable); default 1 for chained, 1 and 2 for keyed-sum and wordcount")
      ->check(CLI::Range(1, 256));
  app.add_option("--state-backend", backends,
                 "keyed-sum and wordcount: run with this state.backend.type (hashmap, rocksdb, "
                 "tiered; repeatable; rows are named workload/backend); default: the configured "
                 "one")
      ->check(CLI::IsMember({"hashmap", "rocksdb", "tiered"}));
  int64_t events = 0;
  NexmarkSetting nexmarkSetting;
  app.add_option("--events", events,
                 "Nexmark and ysb: events per run (default: --records if given, else 2M)")
      ->check(CLI::PositiveNumber);
  app.add_option("--event-time-rate", nexmarkSetting.eventTimeRate,
                 "Nexmark and ysb: generated events per second of event time (default 10000)")
      ->check(CLI::PositiveNumber);
  LatencySetting latency;
  app.add_option("--latency-rate", latency.rate,
                 "Nexmark and ysb: latency mode: run each once at this many events/s (wall) and "
                 "report p50 / p99 / p99.9 latency from event creation to the sink; events "
                 "default to 10 s worth")
      ->check(CLI::PositiveNumber);
  app.add_option("--buffer-timeout", latency.bufferTimeoutMs,
                 "latency mode: execution.buffer-timeout in ms (0 = flush every record); "
                 "default: the configured one");
  app.add_option("--watermark-interval", latency.watermarkIntervalMs,
                 "latency mode: pipeline.auto-watermark-interval in ms; default: the configured "
                 "one");
  std::vector<int64_t> checkpointIntervals;
  std::string checkpointDir;
  app.add_option("--checkpoint-interval", checkpointIntervals,
                 "keyed-sum, window-tumbling, Nexmark and ysb: run with exactly-once checkpoints "
                 "every N ms "
                 "(repeatable; 0 = none; rows get a +ckpt<N>ms suffix); default 0")
      ->check(CLI::NonNegativeNumber);
  std::vector<std::string> checkpointModes;
  app.add_option("--checkpoint-mode", checkpointModes,
                 "keyed-sum and window-tumbling with --checkpoint-interval: full, or incremental "
                 "(state.backend.incremental: rocksdb stores only new SST files); repeatable, rows "
                 "get a +incr suffix; default full")
      ->check(CLI::IsMember({"full", "incremental"}));
  app.add_option("--checkpoint-dir", checkpointDir,
                 "state.checkpoints.dir for --checkpoint-interval; default a fresh directory "
                 "under the system temp dir, removed at the end");
  LtmSettings ltm;
  app.add_option("--ltm-backend", ltm.backend, "state-ltm: state.backend.type (default rocksdb)")
      ->check(CLI::IsMember({"hashmap", "rocksdb", "tiered"}));
  app.add_option("--ltm-keys", ltm.keys,
                 "state-ltm: distinct keys K (default 2000000); records default to 2 K")
      ->check(CLI::PositiveNumber);
  app.add_option("--ltm-value-bytes", ltm.payloadBytes,
                 "state-ltm: bytes of each key's string value (default 200, at least 16)")
      ->check(CLI::Range(16, 1 << 24));
  app.add_option("--ltm-managed-memory", ltm.managedMemory,
                 "state-ltm: taskmanager.memory.managed.size, RocksDB's memory (default 64 mb)");
  app.add_option(
      "--ltm-tiered-memory", ltm.tieredMemory,
      "state-ltm with --ltm-backend tiered: state.backend.tiered.memory (default 256 mb)");
  app.add_option("--ltm-checkpoint-dir", ltm.checkpointDir,
                 "state-ltm: keep the job's checkpoints in this directory (incremental, retained "
                 "on cancellation), for --ltm-stop-after");
  app.add_option("--ltm-checkpoint-interval", ltm.checkpointInterval,
                 "state-ltm: also checkpoint periodically (e.g. \"15 min\"): the latest one "
                 "stays in --ltm-checkpoint-dir even when the process is killed");
  app.add_option("--ltm-stop-after", ltm.stopAfterSeconds,
                 "state-ltm: after this many seconds take a checkpoint and stop, printing the "
                 "--ltm-resume argument that goes on from it (a run in parts)")
      ->check(CLI::PositiveNumber);
  app.add_option("--ltm-resume", ltm.resumeFrom,
                 "state-ltm: resume the run of a checkpoint that --ltm-stop-after took (same "
                 "--records, --ltm-keys and --ltm-value-bytes)");
  app.add_option("--json", jsonPath, "also write the results as JSON to this file");
  app.add_option("--repeat", repeat, "runs per row; the fastest is reported")
      ->check(CLI::Range(1, 1000));
  app.add_flag(
      "!--no-verify", verify,
      "wordcount: skip the untimed run that compares every word's final count with the "
      "baseline (timed runs are still checked by record count and checksum); for profiling");
  bool cluster = false;
  app.add_flag("--cluster", cluster,
               "keyed-sum and wordcount on a JobManager plus 2 TaskManagers against embedded "
               "parallelism 2, processes started here; honours --workload, --records, --repeat "
               "(median); see bench/README.md");
  std::string compareWith;
  int rounds = 10;
  app.add_option("--compare", compareWith,
                 "run this other sluice-bench build (A) and this one (B) alternately, ABBA, "
                 "--rounds times each with the other arguments, and print the median of the "
                 "paired B/A ratios of records per CPU-second per row");
  std::string compareWorkload;
  app.add_option("--compare-workload", compareWorkload,
                 "run this workload (A) and the --workload ones (B) alternately, ABBA, --rounds "
                 "times each with the other arguments, and print the median of the paired B/A "
                 "ratios of records per CPU-second per B row (A's row of the same parallelism, "
                 "else its row at parallelism 1)");
  app.add_option("--rounds", rounds, "--compare, --compare-workload: rounds (default 10)")
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  if (!compareWith.empty() && !compareWorkload.empty()) {
    std::fprintf(stderr, "--compare and --compare-workload cannot be combined\n");
    return 2;
  }
  if (!compareWorkload.empty() && workloads.empty()) {
    std::fprintf(stderr, "--compare-workload needs the --workload(s) to compare it with\n");
    return 2;
  }
  if (!compareWith.empty() || !compareWorkload.empty()) {
    // The children get every argument but these (and write their own JSON);
    // with --compare-workload, the --workload ones go to side B only.
    std::vector<std::string> rest;
    std::vector<std::string> workloadArgs;
    auto takesValue = [](const std::string& a) {
      return a == "--compare" || a == "--rounds" || a == "--json" || a == "--compare-workload";
    };
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (!compareWorkload.empty() && a == "--workload" && i + 1 < argc) {
        workloadArgs.push_back(a);
        workloadArgs.push_back(argv[++i]);
      } else if (!compareWorkload.empty() && a.rfind("--workload=", 0) == 0) {
        workloadArgs.push_back(a);
      } else if (takesValue(a)) {
        ++i;
      } else if (a.rfind("--compare=", 0) != 0 && a.rfind("--rounds=", 0) != 0 &&
                 a.rfind("--json=", 0) != 0 && a.rfind("--compare-workload=", 0) != 0) {
        rest.push_back(a);
      }
    }
    if (!compareWorkload.empty()) {
      return sluice::bench::runCompareWorkloads(compareWorkload, rounds, rest, workloadArgs);
    }
    return sluice::bench::runCompare(compareWith, rounds, rest);
  }
  if (cluster) return sluice::bench::runClusterBench({workloads, records, repeat});

  if (workloads.empty()) workloads = all;
  auto wanted = [&](const std::string& w) {
    return std::find(workloads.begin(), workloads.end(), w) != workloads.end();
  };
  auto pars = [&](std::vector<int> dflt) { return parallelisms.empty() ? dflt : parallelisms; };
  auto count = [&](int64_t dflt) { return records > 0 ? records : dflt; };

  std::vector<Row> rows;
  try {
    if (wanted("chained")) {
      for (int p : pars({1})) {
        rows.push_back(runChained(count(50'000'000), p, repeat));
        rows.back().peakRssMiB = peakRssMiB();
      }
    }
    const std::vector<std::string> keyedBackends =
        backends.empty() ? std::vector<std::string>{""} : backends;
    if (checkpointIntervals.empty()) checkpointIntervals = {0};
    if (checkpointModes.empty()) checkpointModes = {"full"};
    // Runs `run` once per checkpoint setting (interval, then mode), next to
    // each other, so ratios come from one run of the machine.
    auto forEachCheckpointSetting = [&](const std::function<Row()>& run) {
      for (int64_t interval : checkpointIntervals) {
        for (const std::string& mode :
             interval > 0 ? checkpointModes : std::vector<std::string>{"full"}) {
          gCheckpoint.intervalMs = interval;
          gCheckpoint.incremental = mode == "incremental";
          rows.push_back(run());
          rows.back().peakRssMiB = peakRssMiB();
        }
      }
      gCheckpoint = CheckpointSetting{0, gCheckpoint.dir, false};
    };
    std::filesystem::path ownDir;
    if (checkpointDir.empty()) {
      ownDir = std::filesystem::temp_directory_path() /
               ("sluice-bench-checkpoints-" + std::to_string(::getpid()));
      checkpointDir = ownDir.string();
    }
    gCheckpoint.dir = checkpointDir;
    struct RemoveDir {
      std::filesystem::path dir;
      ~RemoveDir() {
        std::error_code ec;
        if (!dir.empty()) std::filesystem::remove_all(dir, ec);
      }
    } removeOwnDir{ownDir};
    if (wanted("keyed-sum")) {
      for (const std::string& backend : keyedBackends) {
        for (int p : pars({1, 2})) {
          forEachCheckpointSetting(
              [&] { return runKeyedSum(count(20'000'000), p, repeat, backend); });
        }
      }
    }
    if (wanted("wordcount") || wanted("wordcount-baseline")) {
      WordCountRows wc = runWordCount(count(5'000'000), pars({1, 2}), repeat, wanted("wordcount"),
                                      verify, keyedBackends);
      rows.push_back(wc.baseline);
      for (Row& r : wc.engine) rows.push_back(r);
    }
    for (const std::string& backend : keyedBackends) {
      if (wanted("window-tumbling")) {
        for (int p : pars({1, 2})) {
          forEachCheckpointSetting(
              [&] { return runWindowTumbling(count(20'000'000), p, repeat, backend); });
        }
      }
      if (wanted("window-sliding")) {
        for (int p : pars({1, 2})) {
          rows.push_back(runWindowSliding(count(5'000'000), p, repeat, backend));
          rows.back().peakRssMiB = peakRssMiB();
        }
      }
    }
    if (wanted("state-ltm")) rows.push_back(runStateLtm(count(2 * ltm.keys), ltm));
    const int64_t nexmarkEvents = events > 0 ? events : count(2'000'000);
    for (const std::string& name : nexmarkNames) {
      if (!wanted(name) && !wanted("nexmark")) continue;
      if (latency.rate > 0) {
        // q12's rows carry processing time: they have no per-row latency.
        if (name == "nexmark-q12") {
          std::fprintf(stderr, "%s: no latency mode (its rows have no creation time)\n",
                       name.c_str());
          continue;
        }
        const int64_t n = events > 0 ? events : latency.rate * 10;
        for (const std::string& backend : keyedBackends) {
          for (int p : pars({1})) {
            for (int64_t interval : checkpointIntervals) {
              gCheckpoint.intervalMs = interval;
              rows.push_back(
                  runNexmarkLatency(*sluice::nexmark::parseQuery(name), n, p, backend, latency));
            }
            gCheckpoint.intervalMs = 0;
          }
        }
        continue;
      }
      for (const std::string& backend : keyedBackends) {
        for (Row& r : runNexmark(*sluice::nexmark::parseQuery(name), nexmarkEvents, pars({1, 2}),
                                 checkpointIntervals, repeat, backend, nexmarkSetting)) {
          rows.push_back(r);
        }
      }
    }
  } catch (const std::exception& e) {
    printTable(rows);
    std::fprintf(stderr, "sluice-bench: %s\n", e.what());
    return 1;
  }
  printTable(rows);
  if (!jsonPath.empty()) writeJson(jsonPath, rows, repeat);
  return 0;
}
