#include "runtime/scheduler.h"

#include <algorithm>

#include <fmt/format.h>

#include <sluice/core/clock.h>
#include <sluice/core/config_options.h>

#include "checkpoint/checkpoint_integrity.h"
#include "checkpoint/state_assignment.h"
#include "core/logging.h"

namespace sluice::runtime {

using SteadyClock = std::chrono::steady_clock;

// One attempt to run the job: every task, as the deployment runs it, and the
// source coordinators. A restart builds a new attempt from the latest
// checkpoint.
struct Scheduler::Attempt {
  int number = 0;
  std::vector<std::vector<TaskControl*>> tasks;  // [vertex][subtask]
  std::vector<std::unique_ptr<SourceCoordinatorHolder>> coordinators;
  std::vector<int> coordinatorNodes;  // stream node of each coordinator
  std::vector<TaskControl*> flat;
  // Guarded by Scheduler::mu_.
  std::vector<TaskResult> results;  // flat order, as the tasks end
  bool failed = false;
  std::string firstError;
  std::set<TaskControl*> finished;
  bool finalPhase = false;    // every task finished; the final commit is under way
  std::vector<int> flatBase;  // index in flat of each vertex's subtask 0

  TaskControl& task(checkpoint::TaskId id) {
    return *tasks.at(static_cast<size_t>(id.vertex)).at(static_cast<size_t>(id.subtask));
  }
};

Scheduler::Scheduler(std::shared_ptr<const StreamGraph> graph, const JobGraph& jobGraph,
                     MiniClusterOptions options, checkpoint::CheckpointCoordinator& coordinator,
                     SerialExecutor& checkpointExecutor, std::string jobId,
                     std::unique_ptr<TaskDeployment> deployment)
    : graph_(std::move(graph)),
      jobGraph_(jobGraph),
      options_(std::move(options)),
      coordinator_(coordinator),
      checkpointExecutor_(checkpointExecutor),
      jobId_(std::move(jobId)),
      restartStrategy_(
          createRestartStrategy(options_.configuration, coordinator.config().periodic())),
      deployment_(std::move(deployment)) {
  if (!deployment_) {
    deployment_ =
        std::make_unique<LocalDeployment>(graph_, jobGraph_, options_, checkpointExecutor_);
  }
}

Scheduler::~Scheduler() = default;

void Scheduler::start(const checkpoint::CompletedCheckpoint* restore) { startAttempt(0, restore); }

// ---- attempts -------------------------------------------------------------------

void Scheduler::startAttempt(int number, const checkpoint::CompletedCheckpoint* cp) {
  const StreamGraph& sg = *graph_;
  const JobGraph& jg = jobGraph_;
  checkpoint::StateAssignment restores;
  if (cp != nullptr) {
    const checkpoint::CheckpointCoordinator::JobInfo& job = coordinator_.job();
    Result<checkpoint::StateAssignment> assigned =
        checkpoint::assignStates(*cp, sg, jg, job.uids, coordinator_.config().ignoreUnclaimedState);
    if (!assigned.isOk()) throw SluiceException(assigned.status().message());
    restores = std::move(assigned).value();
    log::info("Job {} attempt {} restores from {}", jobId_, number, cp->describe());
    coordinator_.recordRestore(*cp);
  }
  {
    // The previous attempt's tasks ended; the deployment may now free them.
    std::lock_guard lock(mu_);
    if (attempt_) {
      attempt_->tasks.clear();
      attempt_->flat.clear();
      attempt_->finished.clear();
    }
  }
  auto a = std::make_unique<Attempt>();
  a->number = number;
  const checkpoint::CheckpointCoordinatorConfig& cc = coordinator_.config();
  TaskDeployment::Attempt spec;
  spec.jobId = jobId_;
  spec.number = number;
  spec.checkpoint = cp;
  spec.restores = &restores;
  spec.checkpointGateway = &coordinator_;
  spec.mode = cc.mode;
  spec.incrementalSharedDirectory =
      cc.incremental ? coordinator_.storage().sharedDirectory() : std::string();
  spec.events = this;
  a->tasks = deployment_->deploy(spec);
  for (const auto& v : jg.vertices) {
    const StreamNode& head = sg.node(v.head());
    if (!head.factory->isSource()) continue;
    auto cs = restores.coordinatorStates.find(head.id);
    a->coordinators.push_back(std::make_unique<SourceCoordinatorHolder>(
        a->tasks[v.id], *head.factory,
        cs == restores.coordinatorStates.end() ? nullptr : &cs->second));
    a->coordinatorNodes.push_back(head.id);
    deployment_->setSourceCoordinator(v.id, a->coordinators.back().get());
  }
  std::vector<checkpoint::TaskId> ids;
  for (const auto& v : jg.vertices) {
    a->flatBase.push_back(static_cast<int>(a->flat.size()));
    for (int s = 0; s < v.parallelism; ++s) {
      a->flat.push_back(a->tasks[v.id][s]);
      ids.push_back({v.id, s});
    }
  }
  a->results.resize(a->flat.size());
  for (auto& c : a->coordinators) c->start();

  Attempt* raw = a.get();
  {
    std::lock_guard lock(mu_);
    attempt_ = std::move(a);
    const int64_t now = SystemClock::instance().currentTimeMillis();
    statuses_.assign(jg.vertices.size(), {});
    for (const auto& v : jg.vertices) {
      statuses_[v.id].resize(static_cast<size_t>(v.parallelism));
      for (int s = 0; s < v.parallelism; ++s) {
        SubtaskStatus& st = statuses_[v.id][s];
        st.state = "RUNNING";
        st.attempt = number;
        st.startTime = now;
        st.location = deployment_->location(v.id, s);
      }
    }
  }
  coordinator_.attemptStarted(this, std::move(ids));
  deployment_->start();
  if (cancelRequested_.load()) {
    std::lock_guard lock(mu_);
    for (TaskControl* t : raw->flat) t->cancel();
  }
}

SourceCoordinatorLink* Scheduler::sourceCoordinator(int vertex) {
  std::lock_guard lock(mu_);
  if (!attempt_) return nullptr;
  const int head = jobGraph_.vertices.at(static_cast<size_t>(vertex)).head();
  for (size_t i = 0; i < attempt_->coordinatorNodes.size(); ++i) {
    if (attempt_->coordinatorNodes[i] == head) return attempt_->coordinators[i].get();
  }
  return nullptr;
}

void Scheduler::taskEnded(int vertex, int subtask, TaskResult result) {
  std::string error;
  {
    std::lock_guard lock(mu_);
    if (!attempt_) return;
    const size_t i =
        static_cast<size_t>(attempt_->flatBase.at(static_cast<size_t>(vertex)) + subtask);
    if (result.failed) error = result.error;
    setStatusLocked(vertex, subtask,
                    result.failed      ? "FAILED"
                    : result.cancelled ? "CANCELED"
                                       : "FINISHED");
    if (result.failed) {
      FailureRecord f;
      f.timestamp = SystemClock::instance().currentTimeMillis();
      f.message = result.error;
      const JobVertex& v = jobGraph_.vertices.at(static_cast<size_t>(vertex));
      f.taskName = fmt::format("{} ({}/{})", v.name, subtask + 1, v.parallelism);
      f.location = deployment_->location(vertex, subtask);
      failures_.push_back(std::move(f));
      if (failures_.size() > kFailureHistory) failures_.pop_front();
    }
    attempt_->results.at(i) = std::move(result);
  }
  if (!error.empty()) failAttempt(error);
}

void Scheduler::failAttempt(const std::string& error) {
  {
    std::lock_guard lock(mu_);
    if (!attempt_ || attempt_->failed) return;
    attempt_->failed = true;
    attempt_->firstError = error;
    log::error("{}", error);
    // A failure no task reported (a lost TaskManager, a checkpoint failure
    // limit, a coordinator): a job-level entry.
    if (failures_.empty() || failures_.back().message != error) {
      FailureRecord f;
      f.timestamp = SystemClock::instance().currentTimeMillis();
      f.message = error;
      failures_.push_back(std::move(f));
      if (failures_.size() > kFailureHistory) failures_.pop_front();
    }
    for (TaskControl* t : attempt_->flat) t->cancel();
  }
  coordinator_.attemptFailed();
}

void Scheduler::joinAttempt() {
  deployment_->join();
  coordinator_.attemptEnded();
}

bool Scheduler::shouldRestart(Attempt& a) {
  std::unique_lock lock(mu_);
  // Without checkpoints, a failure after the final commit began cannot be
  // undone by a restart (it would write the output again).
  const bool restartable = !a.finalPhase || coordinator_.config().periodic();
  if (!a.failed || cancelRequested_.load() || stoppedWithSavepoint_) return false;
  if (!restartable) {
    log::error(
        "Job {} failed while committing its final output; not restarting, because a restart "
        "would write that output again",
        jobId_);
    return false;
  }
  auto delay = restartStrategy_->onFailure(SteadyClock::now());
  if (!delay) {
    log::error("Job {} failed and {} gives up: {}", jobId_, restartStrategy_->describe(),
               a.firstError);
    return false;
  }
  log::warn("Job {} failed ({}); restarting in {} ms ({})", jobId_, a.firstError, delay->count(),
            restartStrategy_->describe());
  noteRepeatedFailure(a.firstError);
  cv_.wait_for(lock, *delay, [&] { return cancelRequested_.load(); });
  if (cancelRequested_.load()) {
    cancelledWhileRestarting_ = true;
    return false;
  }
  return true;
}

namespace {
// The checkpoint to restore cannot be read now; it is not known damaged.
class RestorePointUnreadable : public SluiceException {
 public:
  using SluiceException::SluiceException;
};
}  // namespace

std::optional<checkpoint::CompletedCheckpoint> Scheduler::restorePoint() {
  std::vector<checkpoint::CompletedCheckpoint> candidates = coordinator_.restoreCandidates();
  if (candidates.empty()) return std::nullopt;  // none completed: from the start
  std::string damaged;
  for (auto& cp : candidates) {
    Status verified = checkpoint::verifyCheckpoint(cp);
    if (verified.isOk()) return std::move(cp);
    if (verified.code() != StatusCode::kCorruption) {
      // Not readable now (EIO, permissions, too many open files): this
      // restart fails and the restart strategy tries again; nothing is
      // forgotten.
      throw RestorePointUnreadable(verified.message());
    }
    // Beyond Flink, which would restore it and fail again forever: an older
    // retained checkpoint is as consistent, only older.
    log::warn(
        "Job {}: {} is damaged and is skipped; trying the next older retained checkpoint. "
        "{}",
        jobId_, cp.describe(), verified.message());
    coordinator_.forgetDamaged(cp);
    damaged += fmt::format("\n  {}", verified.message());
  }
  throw SluiceException(
      fmt::format("no usable checkpoint to restore from: every retained checkpoint is damaged "
                  "(state.checkpoints.num-retained keeps more):{}",
                  damaged));
}

void Scheduler::noteRepeatedFailure(const std::string& error) {
  if (error == lastFailure_) {
    ++sameFailureCount_;
  } else {
    lastFailure_ = error;
    sameFailureCount_ = 1;
  }
  if (sameFailureCount_ != kRepeatedFailureWarning || repeatWarned_) return;
  repeatWarned_ = true;
  log::error(
      "Job {} has failed {} times in a row with the same error, and {} keeps restarting it: {}. "
      "If the job cannot get past it, cancel the job, or bound the restarts: "
      "restart-strategy.type: fixed-delay with restart-strategy.fixed-delay.attempts, or "
      "restart-strategy.type: none (see docs/checkpoints.md, \"Restart strategies\").",
      jobId_, sameFailureCount_, restartStrategy_->describe(), error);
}

JobOutcome Scheduler::run() {
  std::string coordinatorError;
  for (;;) {
    joinAttempt();
    Attempt& a = *attempt_;
    for (auto& c : a.coordinators) {
      try {
        c->close();
      } catch (...) {
        if (coordinatorError.empty()) {
          coordinatorError = "source enumerator close() failed: " + describeCurrentException();
        }
      }
    }
    bool started = false;
    bool giveUp = false;
    while (!started && !giveUp) {
      if (!shouldRestart(a)) {
        giveUp = true;
        break;
      }
      ++restarts_;
      try {
        std::optional<checkpoint::CompletedCheckpoint> from = restorePoint();
        startAttempt(a.number + 1, from ? &*from : nullptr);
        started = true;
      } catch (const RestorePointUnreadable& e) {
        // Counts as another failure of this attempt for the strategy.
        std::lock_guard lock(mu_);
        a.firstError = std::string("restart failed: ") + e.what();
      } catch (...) {
        std::lock_guard lock(mu_);
        a.failed = true;
        a.firstError = "restart failed: " + describeCurrentException();
        giveUp = true;
      }
    }
    if (giveUp) break;
  }
  return outcome(*attempt_, coordinatorError);
}

JobOutcome Scheduler::outcome(Attempt& a, const std::string& coordinatorError) {
  JobOutcome out;
  std::map<std::string, std::unique_ptr<Accumulator>> accs;
  std::string accumulatorError;
  bool anyCancelled = false;
  try {
    for (auto& r : a.results) {
      anyCancelled |= r.cancelled;
      out.numRecordsDropped += r.numRecordsDropped;
      for (auto& [name, v] : r.counters) out.counters[name] += v;
      for (auto& [name, acc] : r.accumulators) {
        auto it = accs.find(name);
        if (it == accs.end()) {
          accs.emplace(name, acc->clone());
        } else if (it->second->getLocalValue().index() != acc->getLocalValue().index()) {
          accumulatorError = fmt::format(
              "accumulator '{}' is registered with different types in different operators", name);
        } else {
          it->second->merge(*acc);
        }
      }
    }
    for (auto& [name, acc] : accs) out.accumulators[name] = acc->getLocalValue();
  } catch (...) {
    accumulatorError = "merging accumulators failed: " + describeCurrentException();
  }
  if (accumulatorError.empty()) accumulatorError = coordinatorError;
  std::lock_guard lock(mu_);
  if (stoppedWithSavepoint_ && !a.failed) {
    out.state = JobStatus::kFinished;
  } else if (cancelledWhileRestarting_) {
    out.state = JobStatus::kCanceled;
  } else if (a.failed || !accumulatorError.empty()) {
    out.state = JobStatus::kFailed;
    out.error = a.failed ? a.firstError : accumulatorError;
  } else if (cancelRequested_.load() && anyCancelled) {
    // A cancel that came after every task had finished changes nothing.
    out.state = JobStatus::kCanceled;
  } else {
    out.state = JobStatus::kFinished;
  }
  return out;
}

void Scheduler::setStatusLocked(int vertex, int subtask, const char* state) {
  if (static_cast<size_t>(vertex) >= statuses_.size()) return;
  auto& row = statuses_[static_cast<size_t>(vertex)];
  if (static_cast<size_t>(subtask) >= row.size()) return;
  SubtaskStatus& st = row[static_cast<size_t>(subtask)];
  if (st.state == "FINISHED" || st.state == "FAILED") return;
  st.state = state;
  st.endTime = SystemClock::instance().currentTimeMillis();
}

std::vector<std::vector<SubtaskStatus>> Scheduler::subtaskStatuses() const {
  std::lock_guard lock(mu_);
  return statuses_;
}

std::vector<FailureRecord> Scheduler::failures() const {
  std::lock_guard lock(mu_);
  return {failures_.begin(), failures_.end()};
}

void Scheduler::cancel() {
  cancelRequested_.store(true);
  std::lock_guard lock(mu_);
  cv_.notify_all();
  if (attempt_) {
    for (TaskControl* t : attempt_->flat) t->cancel();
  }
}

// ---- TaskListener ------------------------------------------------------------------

void Scheduler::taskFinished(int vertex, int subtask) {
  bool all = false;
  {
    std::lock_guard lock(mu_);
    if (!attempt_) return;
    TaskControl* task = &attempt_->task({vertex, subtask});
    attempt_->finished.insert(task);
    setStatusLocked(vertex, subtask, "FINISHED");
    all = attempt_->finished.size() == attempt_->flat.size();
    if (all) attempt_->finalPhase = true;
  }
  // Marked finished first: a checkpoint triggered from now on asks the task
  // directly, and one pending now asks it here.
  coordinator_.taskFinished({vertex, subtask});
  if (all) coordinator_.allTasksFinished();
}

// ---- CheckpointTaskGateway ------------------------------------------------------------

Result<std::map<int, std::string>> Scheduler::triggerCheckpoint(
    const CheckpointBarrier& barrier, const checkpoint::CheckpointOptions& options) {
  std::lock_guard lock(mu_);
  Attempt& a = *attempt_;
  // Finished tasks get no barrier: they are asked directly. (Sources are
  // triggered through their coordinator, finished or not.)
  for (const auto& v : jobGraph_.vertices) {
    if (graph_->node(v.head()).factory->isSource()) continue;
    for (TaskControl* t : a.tasks[v.id]) {
      if (a.finished.count(t) != 0) t->triggerCheckpoint(barrier, options);
    }
  }
  std::map<int, std::string> states;
  for (size_t i = 0; i < a.coordinators.size(); ++i) {
    try {
      states[a.coordinatorNodes[i]] = a.coordinators[i]->snapshotAndTrigger(barrier, options);
    } catch (...) {
      return Status::userError(fmt::format("source '{}' could not snapshot its enumerator: {}",
                                           graph_->node(a.coordinatorNodes[i]).name,
                                           describeCurrentException()));
    }
  }
  return states;
}

void Scheduler::triggerFinishedTask(checkpoint::TaskId task, const CheckpointBarrier& barrier,
                                    const checkpoint::CheckpointOptions& options) {
  std::lock_guard lock(mu_);
  attempt_->task(task).triggerCheckpoint(barrier, options);
}

void Scheduler::notifyCheckpointComplete(int64_t id) {
  std::lock_guard lock(mu_);
  for (TaskControl* t : attempt_->flat) t->notifyCheckpointComplete(id);
}

void Scheduler::notifyCheckpointAborted(int64_t id, const checkpoint::CheckpointOptions& options) {
  std::lock_guard lock(mu_);
  for (TaskControl* t : attempt_->flat) t->notifyCheckpointAborted(id, options);
}

void Scheduler::failJob(const std::string& cause) { failAttempt(cause); }

void Scheduler::stopWithSavepointComplete() {
  std::lock_guard lock(mu_);
  stoppedWithSavepoint_ = true;
  for (TaskControl* t : attempt_->flat) t->cancel();
}

}  // namespace sluice::runtime
