// Shared pieces of the checkpoint suites: a seeded fault plan and the
// identity map that carries it out, temporary directories, and the jobs'
// reference results computed without the engine.
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

namespace sluice::checkpointing {

namespace fs = std::filesystem;

class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() / ("sluice-ckpt-" + tag + "-" + std::to_string(::getpid()) +
                                         "-" + std::to_string(counter.fetch_add(1)));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

// Where a fault strikes.
enum class FaultKind {
  kRecord,    // while processing the n-th record (of the attempt)
  kSnapshot,  // in the synchronous part of the n-th checkpoint
  kNotify,    // in the n-th notifyCheckpointComplete: after the checkpoint
              // is complete, before every task has heard of it
};

struct Fault {
  int site = 0;  // which FailingMap
  int subtask = 0;
  FaultKind kind = FaultKind::kRecord;
  int64_t at = 1;  // n-th record / checkpoint / notice in the attempt
};

// Faults fire one after another, each once: fault i can fire only after
// faults 0..i-1 have, and only in a later attempt of the job than fault i-1
// (so each fault causes its own restart).
class FaultPlan {
 public:
  explicit FaultPlan(std::vector<Fault> faults) : faults_(std::move(faults)) {}

  void check(int site, int subtask, FaultKind kind, int64_t count, int attempt) {
    std::lock_guard lock(mu_);
    if (next_ >= faults_.size() || attempt <= lastAttempt_) return;
    const Fault& f = faults_[next_];
    if (f.site != site || f.subtask != subtask || f.kind != kind || count < f.at) return;
    ++next_;
    lastAttempt_ = attempt;
    throw std::runtime_error("injected fault " + std::to_string(next_) + " at site " +
                             std::to_string(site) + " subtask " + std::to_string(subtask));
  }
  size_t fired() const {
    std::lock_guard lock(mu_);
    return next_;
  }
  size_t size() const { return faults_.size(); }

 private:
  mutable std::mutex mu_;
  std::vector<Fault> faults_;
  size_t next_ = 0;
  int lastAttempt_ = -1;
};

// An identity map that fails where the plan says.
template <class T>
class FailingMap : public RichMapFunction<T, T>,
                   public CheckpointedFunction,
                   public CheckpointListener {
 public:
  FailingMap(std::shared_ptr<FaultPlan> plan, int site) : plan_(std::move(plan)), site_(site) {}
  void open() override {
    subtask_ = this->getRuntimeContext().getIndexOfThisSubtask();
    attempt_ = this->getRuntimeContext().getAttemptNumber();
  }
  T map(const T& value) override {
    plan_->check(site_, subtask_, FaultKind::kRecord, ++records_, attempt_);
    return value;
  }
  void snapshotState(const FunctionSnapshotContext&) override {
    plan_->check(site_, subtask_, FaultKind::kSnapshot, ++snapshots_, attempt_);
  }
  void initializeState(FunctionInitializationContext&) override {}
  void notifyCheckpointComplete(int64_t id) override {
    if (id == kFinalCheckpointId) return;
    plan_->check(site_, subtask_, FaultKind::kNotify, ++notices_, attempt_);
  }

 private:
  std::shared_ptr<FaultPlan> plan_;
  int site_;
  int subtask_ = 0;
  int attempt_ = 0;
  int64_t records_ = 0, snapshots_ = 0, notices_ = 0;
};

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

// generator -> failing map (site 0) -> keyBy -> running (count, sum) ->
// failing map (site 1) -> collect.
inline std::shared_ptr<internal::CollectBuffer<Row>> buildRunningSum(
    StreamExecutionEnvironment& env, int64_t count, double rate, std::shared_ptr<FaultPlan> plan) {
  auto buffer = std::make_shared<internal::CollectBuffer<Row>>();
  env.fromGenerator(input, count, rate)
      .uid("source")
      .map(FailingMap<Row>(plan, 0))
      .uid("fail-0")
      .keyBy([](const Row& r) { return std::get<0>(r); })
      .reduce([](const Row& a, const Row& b) {
        return Row{std::get<0>(a), std::get<1>(a) + std::get<1>(b),
                   std::get<2>(a) + std::get<2>(b)};
      })
      .uid("sum")
      .map(FailingMap<Row>(plan, 1))
      .uid("fail-1")
      .sinkTo(CollectSink<Row>(buffer), "Collect")
      .uid("collect");
  return buffer;
}

// Waits until `done()` or `timeout`; returns done().
template <class F>
bool waitFor(F done, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace sluice::checkpointing
