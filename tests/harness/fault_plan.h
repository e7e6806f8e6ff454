// A seeded fault plan for exactly-once tests, and the identity map that
// carries it out: a job with FailingMaps fails where the plan says (while
// processing the n-th record, in the synchronous part of the n-th
// checkpoint, or in the n-th completion notice), once per fault and one
// fault per attempt, so each fault causes its own restart.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <sluice/sluice.h>

namespace sluice::test {

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

}  // namespace sluice::test
