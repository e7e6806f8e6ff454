// Shared pieces of the checkpoint suites: a seeded fault plan and the
// identity map that carries it out, temporary directories, and the jobs'
// reference results computed without the engine.
#pragma once

#include <unistd.h>

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
