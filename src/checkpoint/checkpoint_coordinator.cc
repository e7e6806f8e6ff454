#include "checkpoint/checkpoint_coordinator.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include <sluice/core/assert.h>

#include "checkpoint/checkpoint_metadata.h"
#include "core/logging.h"

namespace sluice::checkpoint {
namespace {

namespace fs = std::filesystem;

const char* kindOf(const CheckpointOptions& options) {
  return options.type == CheckpointType::kSavepoint ? "Savepoint" : "Checkpoint";
}

std::future<CheckpointResult> failedFuture(const std::string& why) {
  std::promise<CheckpointResult> p;
  p.set_exception(std::make_exception_ptr(SluiceException(why)));
  return p.get_future();
}

void removeFiles(const std::vector<std::string>& files) {
  std::error_code ec;
  for (const auto& f : files) fs::remove(f, ec);
}

// The state files a task wrote for a checkpoint that was aborted before it
// acknowledged. The abort removed the checkpoint's directory, but a task
// still writing into it then can leave its files (and so the directory)
// behind; the directory goes once it is empty.
void removeLateStateFiles(const TaskStateSnapshot& snapshot) {
  for (const auto& [node, st] : snapshot.operators) {
    if (st.keyed.path.empty()) continue;
    const fs::path path(st.keyed.path);
    std::error_code ec;
    fs::remove_all(path, ec);
    fs::remove(path.parent_path(), ec);  // only if empty
  }
}

}  // namespace

// A use of the gateway outside mu_: attemptEnded() waits until none is left,
// so the gateway (and the tasks behind it) stay alive meanwhile. Created
// under mu_, destroyed without it.
class CheckpointCoordinator::GatewayLease {
 public:
  explicit GatewayLease(CheckpointCoordinator& c) : c_(c), gateway_(c.gateway_) {
    ++c_.gatewayCalls_;
  }
  ~GatewayLease() {
    std::lock_guard lock(c_.mu_);
    if (--c_.gatewayCalls_ == 0) c_.cv_.notify_all();
  }
  GatewayLease(const GatewayLease&) = delete;
  GatewayLease& operator=(const GatewayLease&) = delete;
  CheckpointTaskGateway& operator*() const { return *gateway_; }
  CheckpointTaskGateway* operator->() const { return gateway_; }

 private:
  CheckpointCoordinator& c_;
  CheckpointTaskGateway* gateway_;
};

CheckpointCoordinator::CheckpointCoordinator(CheckpointCoordinatorConfig config, JobInfo job,
                                             std::shared_ptr<const Clock> clock,
                                             SteadyNow steadyNow)
    : config_(std::move(config)),
      job_(std::move(job)),
      clock_(std::move(clock)),
      steadyNow_(steadyNow ? std::move(steadyNow)
                           : SteadyNow([] { return std::chrono::steady_clock::now(); })),
      storage_(job_.jobId, config_.checkpointsBase),
      failures_(config_.tolerableFailures),
      lastCheckpointEnd_(steadyNow_()) {}

CheckpointCoordinator::~CheckpointCoordinator() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
  if (timer_.joinable()) timer_.join();
}

void CheckpointCoordinator::run(Deferred& deferred) {
  for (auto& f : deferred) f();
  deferred.clear();
}

void CheckpointCoordinator::wakeTimer() { cv_.notify_all(); }

// ---- timer --------------------------------------------------------------------

void CheckpointCoordinator::startTimer() {
  std::lock_guard lock(mu_);
  if (timerRunning_) return;
  timerRunning_ = true;
  timer_ = std::thread([this] {
    log::setThreadName("checkpoint-coordinator");
    std::unique_lock lock(mu_);
    while (!stopped_) {
      lock.unlock();
      const SteadyTime next = runDue(steadyNow_());
      lock.lock();
      if (stopped_) break;
      // Wall time, not steadyNow_: the timer thread serves real jobs only.
      const auto wait = std::min(next, steadyNow_() + std::chrono::milliseconds(50));
      cv_.wait_until(lock, wait);
    }
  });
}

CheckpointCoordinator::SteadyTime CheckpointCoordinator::runDue(SteadyTime now) {
  Deferred deferred;
  bool triggerPeriodic = false;
  bool triggerFinal = false;
  SteadyTime next = SteadyTime::max();
  {
    std::lock_guard lock(mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      auto following = std::next(it);
      if (now - it->second.started() >= config_.timeout) {
        abortLocked(
            it,
            fmt::format("it did not complete within {} ms (execution.checkpointing.timeout)",
                        config_.timeout.count()),
            true, deferred);
      } else {
        next = std::min(next, it->second.started() + config_.timeout);
      }
      it = following;
    }
    const bool running = gateway_ != nullptr && !attemptFailed_ && !stopped_;
    if (running && finalDue_) {
      if (now >= finalDueAt_) {
        finalDue_ = false;
        triggerFinal = true;
      } else {
        next = std::min(next, finalDueAt_);
      }
    } else if (running && config_.periodic() && !finalPhase_) {
      if (nextTrigger_ == SteadyTime::max()) nextTrigger_ = now + config_.interval;
      const SteadyTime due = std::max(nextTrigger_, lastCheckpointEnd_ + config_.minPause);
      const bool room = static_cast<int>(pending_.size()) + completing_ < config_.maxConcurrent;
      if (room && now >= due) {
        nextTrigger_ = now + config_.interval;
        triggerPeriodic = true;
      } else if (room) {
        next = std::min(next, due);
      }
    }
  }
  run(deferred);
  if (triggerFinal) {
    // A checkpoint nobody waits for: its outcome shows in the stats.
    (void)trigger(CheckpointOptions{}, "", TriggerKind::kFinal);
    return now;  // something may be due again right away (e.g. min-pause 0)
  }
  if (triggerPeriodic) {
    if (!trigger(CheckpointOptions{}, "", TriggerKind::kPeriodic).valid()) {
      // Skipped: still due, looked at again shortly (a trigger passing its
      // barrier on is done within milliseconds; a completion wakes the timer).
      std::lock_guard lock(mu_);
      nextTrigger_ = now;
      return now + std::chrono::milliseconds(5);
    }
    return now;
  }
  return next;
}

// ---- the scheduler's side -------------------------------------------------------

void CheckpointCoordinator::recordRestore(const CompletedCheckpoint& checkpoint) {
  std::lock_guard lock(mu_);
  ++stats_.restored;
  stats_.lastRestoreTimestamp = clock_->currentTimeMillis();
  stats_.lastRestoredId = checkpoint.id;
  stats_.lastRestoredIsSavepoint = checkpoint.isSavepoint();
  stats_.lastRestoredPath = checkpoint.directory;
}

void CheckpointCoordinator::setHistorySize(int size) {
  std::lock_guard lock(mu_);
  stats_.historySize = size;
}

void CheckpointCoordinator::setRestoredCheckpoint(CompletedCheckpoint checkpoint) {
  std::lock_guard lock(mu_);
  // Ids go on from the restored one, as Flink's CheckpointIDCounter does:
  // the checkpoints of this run are newer than it, and a restart restores
  // them, not the savepoint.
  nextId_ = std::max(nextId_, checkpoint.id + 1);
  restored_ = checkpoint;
  latest_ = std::move(checkpoint);
}

std::optional<CompletedCheckpoint> CheckpointCoordinator::latestCompleted() const {
  std::lock_guard lock(mu_);
  return latest_;
}

std::vector<CompletedCheckpoint> CheckpointCoordinator::restoreCandidates() const {
  std::lock_guard lock(mu_);
  std::vector<CompletedCheckpoint> out;
  auto add = [&](const CompletedCheckpoint& c) {
    for (const auto& o : out) {
      if (o.id == c.id && o.directory == c.directory) return;
    }
    out.push_back(c);
  };
  if (latest_) add(*latest_);
  for (auto it = retained_.rbegin(); it != retained_.rend(); ++it) add(*it);
  if (restored_) add(*restored_);
  return out;
}

void CheckpointCoordinator::forgetDamaged(const CompletedCheckpoint& damaged) {
  std::lock_guard lock(mu_);
  auto same = [&](const CompletedCheckpoint& c) {
    return c.id == damaged.id && c.directory == damaged.directory;
  };
  // Not released from the registry: its shared files stay.
  std::erase_if(retained_, same);
  if (restored_ && same(*restored_)) restored_.reset();
  if (latest_ && same(*latest_)) {
    latest_.reset();
    if (!retained_.empty()) {
      latest_ = retained_.back();
    } else if (restored_) {
      latest_ = restored_;
    }
  }
}

Status CheckpointCoordinator::initializeStorage() const {
  if (!config_.periodic() || storage_.jobDirectory().empty()) return Status::ok();
  Status st = createDirectories(storage_.jobDirectory());
  if (!st.isOk()) {
    return Status::ioError(fmt::format("cannot use state.checkpoints.dir '{}': {}",
                                       config_.checkpointsBase, st.message()));
  }
  return Status::ok();
}

void CheckpointCoordinator::attemptStarted(CheckpointTaskGateway* gateway,
                                           std::vector<TaskId> tasks) {
  {
    std::lock_guard lock(mu_);
    gateway_ = gateway;
    tasks_ = std::move(tasks);
    attemptFailed_ = false;
    finalPhase_ = false;
    finalDue_ = false;
    nextTrigger_ = SteadyTime::max();
  }
  wakeTimer();
}

void CheckpointCoordinator::attemptFailed() {
  std::lock_guard lock(mu_);
  attemptFailed_ = true;
}

void CheckpointCoordinator::attemptEnded() {
  Deferred deferred;
  {
    std::unique_lock lock(mu_);
    attemptFailed_ = true;  // no more triggers for this attempt
    while (!pending_.empty()) {
      abortLocked(pending_.begin(), "the job attempt ended", false, deferred);
    }
  }
  run(deferred);  // may use the gateway (notifyCheckpointAborted)
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return gatewayCalls_ == 0; });
    gateway_ = nullptr;
    tasks_.clear();
  }
  // A completion in flight retires before the next attempt picks its
  // restore point.
  std::lock_guard completion(completionMu_);
}

void CheckpointCoordinator::taskFinished(TaskId task) {
  Deferred deferred;
  {
    std::lock_guard lock(mu_);
    if (gateway_ == nullptr) return;
    for (auto& [id, p] : pending_) {
      if (!p.isAwaiting(task)) continue;
      auto lease = std::make_shared<GatewayLease>(*this);
      deferred.push_back([lease, task, barrier = p.barrier(), options = p.options()] {
        (*lease)->triggerFinishedTask(task, barrier, options);
      });
    }
  }
  run(deferred);
}

void CheckpointCoordinator::allTasksFinished() {
  Deferred deferred;
  {
    std::lock_guard lock(mu_);
    finalPhase_ = true;
    if (gateway_ == nullptr) return;
    if (config_.periodic()) {
      // A final checkpoint first (Flink's FLIP-147): if anything fails
      // after it, the restart restores it and commits, instead of writing
      // the output again.
      finalDue_ = true;
      finalDueAt_ = SteadyTime::min();
    } else {
      auto lease = std::make_shared<GatewayLease>(*this);
      deferred.push_back([lease] { (*lease)->notifyCheckpointComplete(kFinalCheckpointId); });
    }
  }
  wakeTimer();
  run(deferred);
}

void CheckpointCoordinator::shutdown(JobStatus status) {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  wakeTimer();
  if (timer_.joinable()) timer_.join();
  std::lock_guard completion(completionMu_);
  if (storage_.jobDirectory().empty()) return;
  const bool discard = status == JobStatus::kFinished ||
                       (status == JobStatus::kCanceled && !config_.retainOnCancellation);
  if (discard) {
    discardDirectory(storage_.jobDirectory());
    return;
  }
  // The checkpoints that stay are those with metadata. A directory without
  // is what a task left of a checkpoint that never completed: one aborted
  // while the task was still writing into it (the abort removed the
  // directory, the task's files made it again, and a write that then failed
  // removed only its own files), or one pending when the job ended. The
  // tasks are gone: nothing writes into them any more.
  std::error_code ec;
  std::vector<std::string> unfinished;
  for (fs::directory_iterator it(storage_.jobDirectory(), ec), end; !ec && it != end;
       it.increment(ec)) {
    const fs::path& dir = it->path();
    if (dir.filename().string().rfind("chk-", 0) != 0 || !it->is_directory(ec)) continue;
    if (!fs::exists(dir / kMetadataFileName, ec)) unfinished.push_back(dir.string());
  }
  for (const auto& dir : unfinished) discardDirectory(dir);
}

// ---- triggers ---------------------------------------------------------------------

std::future<CheckpointResult> CheckpointCoordinator::triggerCheckpoint(
    CheckpointOptions options, const std::string& savepointBase) {
  return trigger(std::move(options), savepointBase, TriggerKind::kRequested);
}

std::future<CheckpointResult> CheckpointCoordinator::trigger(CheckpointOptions options,
                                                             const std::string& savepointBase,
                                                             TriggerKind kind) {
  const bool final = kind == TriggerKind::kFinal;
  // Held until the gateway has passed the trigger on. Without it, a
  // savepoint (whose directory is created first) could reach the sources
  // after the periodic checkpoint that took the next id: they would inject
  // the newer barrier first, every task would give the older one up as
  // superseded, and the savepoint would wait for its timeout.
  // The periodic schedule does not wait for it (a savepoint may take a
  // while to create its directory): it tries again shortly, and decides
  // again under mu_ whether max-concurrent and min-pause allow it.
  std::unique_lock triggering(triggerMu_, std::defer_lock);
  if (kind != TriggerKind::kPeriodic) {
    triggering.lock();
  } else if (!triggering.try_lock()) {
    return {};
  }
  int64_t id = 0;
  std::set<TaskId> tasks;
  {
    std::lock_guard lock(mu_);
    if (gateway_ == nullptr || stopped_ || attemptFailed_) {
      return failedFuture("the job is not running");
    }
    if (finalPhase_ && !final) return failedFuture("the job has finished");
    if (kind == TriggerKind::kPeriodic) {
      const bool room = static_cast<int>(pending_.size()) + completing_ < config_.maxConcurrent;
      if (!room || steadyNow_() < lastCheckpointEnd_ + config_.minPause) return {};
    }
    id = nextId_++;
    tasks.insert(tasks_.begin(), tasks_.end());
  }
  const int64_t timestamp = clock_->currentTimeMillis();
  Result<std::string> location =
      storage_.initializeLocation(id, options.type == CheckpointType::kSavepoint, savepointBase);
  if (location.isOk()) options.targetDirectory = location.value();

  Deferred deferred;
  std::unique_lock lock(mu_);
  auto [it, inserted] = pending_.emplace(
      std::piecewise_construct, std::forward_as_tuple(id),
      std::forward_as_tuple(id, timestamp, options, steadyNow_(), std::move(tasks), final));
  SLUICE_ASSERT(inserted, "checkpoint ids are unique");
  {
    CheckpointRecord record;
    record.id = id;
    record.isSavepoint = it->second.isSavepoint();
    record.triggerTimestamp = timestamp;
    for (const TaskId& t : it->second.awaited()) {
      ++record.numSubtasks;
      ++record.vertices[t.vertex].numSubtasks;
    }
    stats_.addRecord(std::move(record));
  }
  std::future<CheckpointResult> result = it->second.result();
  if (!location.isOk()) {
    abortLocked(it, location.status().message(), true, deferred);
    lock.unlock();
    run(deferred);
    return result;
  }
  if (gateway_ == nullptr || attemptFailed_ || stopped_) {
    abortLocked(it, "the job is not running", false, deferred);
    lock.unlock();
    run(deferred);
    return result;
  }
  auto lease = std::make_unique<GatewayLease>(*this);
  const CheckpointBarrier barrier = it->second.barrier();
  lock.unlock();

  Result<std::map<int, std::string>> states = (*lease)->triggerCheckpoint(barrier, options);
  triggering.unlock();

  std::optional<PendingCheckpoint> done;
  lock.lock();
  it = pending_.find(id);
  if (it != pending_.end()) {
    if (!states.isOk()) {
      abortLocked(it, states.status().message(), true, deferred);
    } else {
      it->second.acknowledgeCoordinators(std::move(states).value());
      if (it->second.isFullyAcknowledged()) {
        done.emplace(std::move(it->second));
        pending_.erase(it);
        ++completing_;
      }
    }
  }
  lock.unlock();
  run(deferred);
  lease.reset();
  if (done) complete(std::move(*done));
  return result;
}

// ---- acknowledgements ---------------------------------------------------------------

void CheckpointCoordinator::acknowledgeCheckpoint(int64_t id, TaskId task,
                                                  TaskStateSnapshot snapshot) {
  std::optional<PendingCheckpoint> done;
  {
    std::unique_lock lock(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) {
      // Aborted meanwhile: what the task stored for it goes.
      std::vector<std::string> files = registry_.unregisteredFiles(snapshot);
      lock.unlock();
      removeFiles(files);
      removeLateStateFiles(snapshot);
      return;
    }
    if (it->second.acknowledgeTask(task, std::move(snapshot)) !=
        PendingCheckpoint::Ack::kAccepted) {
      return;  // a repeated acknowledgement
    }
    if (CheckpointRecord* r = stats_.find(id)) {
      const int64_t now = clock_->currentTimeMillis();
      ++r->numAcknowledged;
      r->latestAckTimestamp = now;
      CheckpointRecord::Vertex& v = r->vertices[task.vertex];
      ++v.numAcknowledged;
      v.latestAckTimestamp = now;
    }
    if (!it->second.isFullyAcknowledged()) return;
    done.emplace(std::move(it->second));
    pending_.erase(it);
    ++completing_;
  }
  complete(std::move(*done));
}

void CheckpointCoordinator::declineCheckpoint(int64_t id, TaskId task, const std::string& reason,
                                              bool countsAsFailure) {
  (void)task;
  Deferred deferred;
  {
    std::lock_guard lock(mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    abortLocked(it, reason, countsAsFailure, deferred);
  }
  run(deferred);
}

// ---- abort and completion -------------------------------------------------------------

void CheckpointCoordinator::failAttemptLocked(const std::string& cause, Deferred& deferred) {
  attemptFailed_ = true;
  if (gateway_ == nullptr) return;
  auto lease = std::make_shared<GatewayLease>(*this);
  deferred.push_back([lease, cause] { (*lease)->failJob(cause); });
}

void CheckpointCoordinator::abortLocked(std::map<int64_t, PendingCheckpoint>::iterator it,
                                        const std::string& reason, bool countsAsFailure,
                                        Deferred& deferred) {
  PendingCheckpoint p = std::move(it->second);
  pending_.erase(it);
  log::warn("{} {} of job {} aborted: {}", kindOf(p.options()), p.id(), job_.jobId, reason);
  std::vector<std::string> files;
  for (const auto& [task, snapshot] : p.acknowledged()) {
    for (auto& f : registry_.unregisteredFiles(snapshot)) files.push_back(std::move(f));
  }
  const std::string directory = p.directory();
  deferred.push_back([files = std::move(files), directory] {
    removeFiles(files);
    if (!directory.empty()) discardDirectory(directory);
  });
  if (CheckpointRecord* r = stats_.find(p.id())) {
    if (r->status == CheckpointRecord::Status::kInProgress) --stats_.inProgress;
    r->status = CheckpointRecord::Status::kFailed;
    r->failureMessage = reason;
    r->failureTimestamp = clock_->currentTimeMillis();
    r->durationMs = r->failureTimestamp - r->triggerTimestamp;
  }
  p.fail(fmt::format("{} {} failed: {}", kindOf(p.options()), p.id(), reason));
  if (gateway_ != nullptr) {
    auto lease = std::make_shared<GatewayLease>(*this);
    deferred.push_back([lease, id = p.id(), options = p.options()] {
      (*lease)->notifyCheckpointAborted(id, options);
    });
  }
  lastCheckpointEnd_ = steadyNow_();
  wakeTimer();
  const bool running = gateway_ != nullptr && !attemptFailed_ && !stopped_;
  if (p.isFinal() && running) {
    ++stats_.failed;
    if (auto cause = failures_.checkpointFailed(reason, true)) {
      failAttemptLocked(*cause, deferred);
    } else {
      // The timer triggers it again, an interval later: never at once, so a
      // failure that repeats neither spins nor recurses.
      finalDue_ = true;
      finalDueAt_ = lastCheckpointEnd_ + std::max(config_.interval, config_.minPause);
    }
    return;
  }
  if (!countsAsFailure) return;
  ++stats_.failed;
  if (p.isSavepoint()) return;  // savepoints never fail the job
  auto cause = failures_.checkpointFailed(reason, false);
  if (cause && running) failAttemptLocked(*cause, deferred);
}

void CheckpointCoordinator::abortCompleting(PendingCheckpoint pending,
                                            CompletedCheckpoint* finalized,
                                            const std::string& reason) {
  Deferred deferred;
  {
    std::lock_guard lock(mu_);
    if (finalized != nullptr) {
      // The acknowledged state moved into `finalized`.
      std::vector<std::string> files = registry_.unregisteredFiles(*finalized);
      deferred.push_back([files = std::move(files)] { removeFiles(files); });
    }
    --completing_;
    const int64_t id = pending.id();
    auto it = pending_.emplace(id, std::move(pending)).first;
    abortLocked(it, reason, true, deferred);
  }
  run(deferred);
}

void CheckpointCoordinator::complete(PendingCheckpoint p) {
  std::lock_guard completion(completionMu_);
  // A task refers to the stored files of the last checkpoint it heard
  // completed. With concurrent checkpoints, that one may have been subsumed
  // (and a file deleted) since; such a checkpoint cannot complete.
  std::vector<std::string> unregistered;
  int64_t newSharedBytes = 0;
  {
    std::lock_guard lock(mu_);
    for (const auto& [task, snapshot] : p.acknowledged()) {
      forEachSharedFile(snapshot, [&](const NativeKeyedSnapshot::SstFile& f) {
        if (registry_.isRegistered(f.location)) return;
        unregistered.push_back(f.location);
        newSharedBytes += static_cast<int64_t>(f.sizeBytes);
      });
    }
  }
  for (const auto& f : unregistered) {
    std::error_code ec;
    if (!fs::exists(f, ec)) {
      abortCompleting(std::move(p), nullptr,
                      fmt::format("the shared state file '{}' it refers to was deleted when an "
                                  "older checkpoint was subsumed",
                                  f));
      return;
    }
  }
  CompletedCheckpoint cp = p.finalize(job_.jobId, *job_.graph, *job_.jobGraph, job_.uids);
  if (!cp.directory.empty()) {
    Status written = writeCheckpointMetadata(cp);
    if (!written.isOk()) {
      abortCompleting(std::move(p), &cp, written.message());
      return;
    }
  }
  const int64_t size = checkpointSize(cp, newSharedBytes);
  const int64_t durationMs =
      std::chrono::duration_cast<std::chrono::milliseconds>(steadyNow_() - p.started()).count();
  log::info("Completed {} for job {} ({} operators with state)", cp.describe(), job_.jobId,
            cp.operators.size());

  std::vector<std::string> subsumedDirectories;
  std::vector<std::string> releasedFiles;
  std::unique_ptr<GatewayLease> lease;
  {
    std::lock_guard lock(mu_);
    stats_.recordCompleted(cp, durationMs, size);
    failures_.checkpointCompleted();
    lastCheckpointEnd_ = steadyNow_();
    if (!latest_ || latest_->id < cp.id) latest_ = cp;
    if (!cp.isSavepoint()) {
      registry_.registerCheckpoint(cp);
      retained_.push_back(std::move(cp));
      while (static_cast<int>(retained_.size()) > config_.numRetained) {
        for (auto& f : registry_.releaseCheckpoint(retained_.front())) {
          releasedFiles.push_back(std::move(f));
        }
        if (!retained_.front().directory.empty()) {
          subsumedDirectories.push_back(retained_.front().directory);
        }
        retained_.pop_front();
      }
    }
    if (gateway_ != nullptr) lease = std::make_unique<GatewayLease>(*this);
  }
  wakeTimer();
  removeFiles(releasedFiles);
  for (const auto& d : subsumedDirectories) discardDirectory(d);
  if (lease) {
    (*lease)->notifyCheckpointComplete(p.id());
    if (p.isFinal()) (*lease)->notifyCheckpointComplete(kFinalCheckpointId);
    if (p.options().terminate) (*lease)->stopWithSavepointComplete();
  }
  {
    // Only now, with the tasks told, may the next periodic checkpoint start.
    std::lock_guard lock(mu_);
    --completing_;
  }
  wakeTimer();
  p.succeed(CheckpointResult{p.id(), p.directory()});
  lease.reset();
}

// ---- queries ---------------------------------------------------------------------------

CheckpointStats CheckpointCoordinator::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

size_t CheckpointCoordinator::numberOfPending() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

size_t CheckpointCoordinator::numberOfRetained() const {
  std::lock_guard lock(mu_);
  return retained_.size();
}

}  // namespace sluice::checkpoint
