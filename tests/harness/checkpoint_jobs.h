// Shared pieces of the checkpoint job tests (integration/, slow/): the
// keyed running-sum job and its reference result computed without the
// engine, and reading what a FileSink committed.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/sluice.h>

#include "harness/fault_plan.h"
#include "harness/gated_source.h"
#include "harness/temp_dir.h"
#include "harness/wait.h"

namespace sluice::checkpointing {

namespace fs = std::filesystem;

using test::TempDir;
using test::waitUntil;

using test::FailingMap;
using test::Fault;
using test::FaultKind;
using test::FaultPlan;

using test::checkpointAtGate;
using test::GatedGeneratorSource;
using test::recordsThroughGate;
using test::SourceGate;

// Lines of every visible (finished) file under `dir`, recursively; names
// starting with '.' are in-progress or pending files and are skipped.
inline std::vector<std::string> readFinishedLines(const fs::path& dir) {
  std::vector<std::string> lines;
  if (!fs::exists(dir)) return lines;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    if (e.path().filename().string().rfind('.', 0) == 0) continue;
    std::ifstream in(e.path());
    std::string line;
    while (std::getline(in, line)) lines.push_back(line);
  }
  return lines;
}

inline std::map<std::string, int> countLines(const std::vector<std::string>& lines) {
  std::map<std::string, int> m;
  for (const auto& l : lines) ++m[l];
  return m;
}

// ---- the keyed running-sum job of the checkpoint suites ----

using Row = std::tuple<int64_t, int64_t, int64_t>;  // key, running count, running sum

inline constexpr int64_t kKeys = 37;

// Values stay small: unbounded generators hand out indices near 2^62.
inline Row input(int64_t i) { return Row{i % kKeys, 1, i % 1000}; }

// Per key: the number of records and their sum, computed without the engine.
inline std::map<int64_t, std::pair<int64_t, int64_t>> expectedTotals(int64_t count) {
  std::map<int64_t, std::pair<int64_t, int64_t>> m;
  for (int64_t i = 0; i < count; ++i) {
    auto& [n, s] = m[i % kKeys];
    ++n;
    s += i % 1000;
  }
  return m;
}

// Running counts are order-independent: key k must show counts 1..n_k
// exactly once each (exactly-once output), and its last row must carry the
// total sum (exactly-once state).
inline void expectExactlyOnce(const std::vector<Row>& rows, int64_t count) {
  auto expected = expectedTotals(count);
  std::map<int64_t, std::vector<int64_t>> counts;
  std::map<int64_t, int64_t> sumAtLast;
  for (const auto& [k, c, s] : rows) {
    counts[k].push_back(c);
    if (c == expected[k].first) sumAtLast[k] = s;
  }
  ASSERT_EQ(counts.size(), expected.size());
  for (auto& [k, cs] : counts) {
    std::sort(cs.begin(), cs.end());
    std::vector<int64_t> want(static_cast<size_t>(expected[k].first));
    for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<int64_t>(i) + 1;
    ASSERT_EQ(cs, want) << "key " << k;
    EXPECT_EQ(sumAtLast[k], expected[k].second) << "key " << k;
  }
}

// A key's running (count, sum) after `b`: the reduce of the running-sum jobs.
inline Row addRunning(const Row& a, const Row& b) {
  return Row{std::get<0>(a), std::get<1>(a) + std::get<1>(b), std::get<2>(a) + std::get<2>(b)};
}

// source -> failing map (site 0) -> keyBy -> running (count, sum) ->
// failing map (site 1) -> collect.
inline std::shared_ptr<internal::CollectBuffer<Row>> buildRunningSumFrom(
    SingleOutputStreamOperator<Row> source, std::shared_ptr<FaultPlan> plan) {
  auto buffer = std::make_shared<internal::CollectBuffer<Row>>();
  source.uid("source")
      .map(FailingMap<Row>(plan, 0))
      .uid("fail-0")
      .keyBy([](const Row& r) { return std::get<0>(r); })
      .reduce(addRunning)
      .uid("sum")
      .map(FailingMap<Row>(plan, 1))
      .uid("fail-1")
      .sinkTo(CollectSink<Row>(buffer), "Collect")
      .uid("collect");
  return buffer;
}

// The running sum over input(0..count-1) from a generator source.
inline std::shared_ptr<internal::CollectBuffer<Row>> buildRunningSum(
    StreamExecutionEnvironment& env, int64_t count, double rate, std::shared_ptr<FaultPlan> plan) {
  return buildRunningSumFrom(env.fromGenerator(input, count, rate), std::move(plan));
}

// The same from a gated source (harness/gated_source.h): the test says when
// records flow and takes the checkpoints itself.
inline std::shared_ptr<internal::CollectBuffer<Row>> buildGatedRunningSum(
    StreamExecutionEnvironment& env, int64_t count, std::shared_ptr<SourceGate> gate,
    std::shared_ptr<FaultPlan> plan) {
  return buildRunningSumFrom(
      env.fromSource(GatedGeneratorSource(std::move(gate), input, count), "Generator Source"),
      std::move(plan));
}

}  // namespace sluice::checkpointing
