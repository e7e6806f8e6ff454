#include "runtime/mini_cluster.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <filesystem>
#include <future>
#include <optional>
#include <set>

#include <fmt/format.h>

#include <sluice/core/config_options.h>
#include <sluice/core/key_hash.h>
#include <sluice/state/operator_state.h>

#include "core/logging.h"
#include "runtime/checkpoint.h"
#include "runtime/task.h"

namespace sluice::runtime {

const char* jobStateName(JobState state) {
  switch (state) {
    case JobState::kCreated: return "CREATED";
    case JobState::kRunning: return "RUNNING";
    case JobState::kFinished: return "FINISHED";
    case JobState::kCanceled: return "CANCELED";
    case JobState::kFailed: return "FAILED";
  }
  return "UNKNOWN";
}

namespace {

using SteadyClock = std::chrono::steady_clock;

// The coordinator of one source vertex: owns the enumerator and serializes
// every call into it.
class SourceCoordinatorHolder final : public SourceCoordinatorLink,
                                      public SplitEnumeratorContextBase {
 public:
  SourceCoordinatorHolder(std::vector<Task*> tasks, const OperatorFactory& factory,
                          const std::string* restored)
      : tasks_(std::move(tasks)) {
    coordinator_ = factory.createCoordinator(*this, restored);
  }

  void start() {
    std::lock_guard lock(mu_);
    coordinator_->start();
  }
  void close() {
    std::lock_guard lock(mu_);
    coordinator_->close();
  }

  // Snapshots the enumerator and triggers every reader under one lock, so a
  // split assigned after the snapshot reaches its reader after the barrier
  // (Flink closes the coordinator's event valve for the same reason).
  std::string snapshotAndTrigger(const CheckpointBarrier& barrier,
                                 const CheckpointOptions& options) {
    std::lock_guard lock(mu_);
    std::string state = coordinator_->snapshotState(barrier.id);
    for (Task* t : tasks_) t->triggerCheckpoint(barrier, options);
    return state;
  }

  void addReader(int subtask) override {
    std::lock_guard lock(mu_);
    coordinator_->addReader(subtask);
  }
  void requestSplit(int subtask) override {
    std::lock_guard lock(mu_);
    coordinator_->handleSplitRequest(subtask);
  }

  int currentParallelism() const override { return static_cast<int>(tasks_.size()); }
  void assignSplit(int subtask, std::vector<uint8_t> split) override {
    tasks_.at(subtask)->postSplit(std::move(split));
  }
  void signalNoMoreSplits(int subtask) override { tasks_.at(subtask)->postNoMoreSplits(); }

 private:
  std::vector<Task*> tasks_;
  std::recursive_mutex mu_;  // the enumerator may call back into us
  std::unique_ptr<SourceCoordinatorBase> coordinator_;
};

// One background thread that runs the asynchronous part of snapshots.
class AsyncExecutor {
 public:
  AsyncExecutor() : thread_([this] { loop(); }) {}
  ~AsyncExecutor() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void submit(std::function<void()> work) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(work));
    }
    cv_.notify_all();
  }

 private:
  void loop() {
    log::setThreadName("checkpoint-io");
    for (;;) {
      std::function<void()> work;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      work();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

// Bytes a checkpoint added: state inline in the metadata plus keyed files;
// of an incremental checkpoint, only the shared files no earlier retained
// checkpoint holds (`registered`), as Flink's "checkpointed data size".
int64_t checkpointSize(const CompletedCheckpoint& cp,
                       const std::map<std::string, int>& registered) {
  int64_t size = 0;
  std::error_code ec;
  if (!cp.directory.empty()) {
    auto m =
        std::filesystem::file_size(std::filesystem::path(cp.directory) / kMetadataFileName, ec);
    if (!ec) size += static_cast<int64_t>(m);
  }
  for (const auto& op : cp.operators) {
    if (cp.directory.empty()) size += static_cast<int64_t>(op.coordinatorState.size());
    for (const auto& st : op.subtasks) {
      if (cp.directory.empty()) {
        size += static_cast<int64_t>(st.operatorState.size() + st.timers.size());
      }
      if (st.keyed.bytes) size += static_cast<int64_t>(st.keyed.bytes->size());
      if (st.keyed.native) {
        for (const auto& f : st.keyed.native->sstFiles) {
          if (registered.count(f.location) == 0) size += static_cast<int64_t>(f.sizeBytes);
        }
        for (const auto& f : st.keyed.native->privateFiles) {
          auto s = std::filesystem::file_size(std::filesystem::path(st.keyed.path) / f, ec);
          if (!ec) size += static_cast<int64_t>(s);
        }
      } else if (!st.keyed.path.empty()) {
        auto f = std::filesystem::file_size(st.keyed.path, ec);
        if (!ec) size += static_cast<int64_t>(f);
      }
    }
  }
  return size;
}

// One attempt to run the job: every task, its thread and the source
// coordinators. A restart builds a new attempt from the latest checkpoint.
struct Attempt {
  int number = 0;
  std::unique_ptr<TaskServices> services;
  std::vector<std::vector<std::unique_ptr<Task>>> tasks;  // [vertex][subtask]
  std::vector<std::unique_ptr<SourceCoordinatorHolder>> coordinators;
  std::vector<int> coordinatorNodes;  // stream node of each coordinator
  std::vector<std::thread> threads;
  std::vector<TaskResult> results;
  std::vector<Task*> flat;
  // Guarded by JobRun::Impl::mu.
  bool failed = false;
  std::string firstError;
  int finishedTasks = 0;
  std::set<Task*> finished;
  bool finalPhase = false;  // every task finished; the final commit is under way
};

class JobRun::Impl final : public CheckpointResponder {
 public:
  // Pending checkpoint (guarded by mu).
  struct Pending {
    int64_t id = 0;
    CheckpointOptions options;
    int64_t timestamp = 0;
    SteadyClock::time_point started;
    std::string directory;
    std::set<std::pair<int, int>> awaiting;  // (vertex, subtask)
    std::map<std::pair<int, int>, TaskStateSnapshot> acks;
    std::map<int, std::string> coordinatorStates;       // stream node -> enumerator state
    std::shared_ptr<std::promise<std::string>> result;  // savepoints
    // The checkpoint taken once every task finished; its completion lets
    // sinks commit their last transaction (notifyCheckpointComplete with
    // kFinalCheckpointId).
    bool final = false;
  };

  JobRun* run = nullptr;
  MiniClusterOptions options;
  std::string jobId;

  // Checkpoint configuration.
  bool checkpointing = false;
  std::chrono::milliseconds interval{0};
  CheckpointingMode mode = CheckpointingMode::kExactlyOnce;
  std::chrono::milliseconds timeout{600000};
  std::chrono::milliseconds minPause{0};
  int maxConcurrent = 1;
  int tolerableFailures = 0;
  bool retainOnCancellation = false;
  int numRetained = 1;
  std::string checkpointsDir;  // <state.checkpoints.dir>/<job id>; empty: in memory
  std::string savepointsDir;
  bool ignoreUnclaimedState = false;
  std::unique_ptr<RestartStrategy> restartStrategy;
  std::vector<std::string> uids;  // per stream node

  mutable std::mutex mu;
  std::condition_variable cv;
  std::unique_ptr<Attempt> attempt;  // the running one
  std::map<int64_t, Pending> pending;
  std::deque<CompletedCheckpoint> completed;  // checkpoints, oldest first
  std::optional<CompletedCheckpoint> latest;  // newest checkpoint or savepoint
  int64_t nextCheckpointId = 1;
  int consecutiveFailures = 0;
  SteadyClock::time_point lastCheckpointEnd = SteadyClock::now();
  SteadyClock::time_point nextTrigger = SteadyClock::time_point::max();
  CheckpointStats stats;
  bool stopped = false;  // the job reached a terminal state
  bool stoppedWithSavepoint = false;
  bool cancelledWhileRestarting = false;
  std::atomic<bool> cancelRequested{false};
  std::chrono::steady_clock::time_point started;
  std::thread checkpointThread;
  std::unique_ptr<AsyncExecutor> io;

  // ---- CheckpointResponder (task threads, the I/O thread) ----

  std::string checkpointDirectory(int64_t id) override {
    std::lock_guard lock(mu);
    auto it = pending.find(id);
    return it == pending.end() ? std::string() : it->second.directory;
  }

  std::string sharedStateDirectory() override {
    return checkpointsDir.empty() ? std::string() : checkpointsDir + "/shared";
  }

  void submitAsync(std::function<void()> work) override { io->submit(std::move(work)); }

  void acknowledge(int64_t id, int vertex, int subtask, TaskStateSnapshot snapshot) override {
    std::unique_lock lock(mu);
    auto it = pending.find(id);
    if (it == pending.end()) {
      // Aborted meanwhile: what the task stored for it goes.
      discardUnregisteredSharedFiles(snapshot);
      discardLateStateFiles(snapshot);
      return;
    }
    if (it->second.awaiting.erase({vertex, subtask}) == 0) return;  // a repeated ack
    Pending& p = it->second;
    p.acks[{vertex, subtask}] = std::move(snapshot);
    if (!p.awaiting.empty()) return;
    Pending done = std::move(p);
    pending.erase(it);
    complete(lock, std::move(done));
  }

  void decline(int64_t id, int vertex, int subtask, const std::string& reason,
               bool countsAsFailure) override {
    std::lock_guard lock(mu);
    auto it = pending.find(id);
    if (it == pending.end()) return;
    (void)vertex;
    (void)subtask;
    abortPending(it, reason, countsAsFailure);
  }

  void taskFinished(int vertex, int subtask) override {
    std::lock_guard lock(mu);
    if (!attempt) return;
    ++attempt->finishedTasks;
    Task* task = attempt->tasks.at(vertex).at(subtask).get();
    attempt->finished.insert(task);
    // A finished task snapshots its final state when asked directly; the
    // barriers of pending checkpoints may never reach it now.
    for (auto& [id, p] : pending) {
      if (p.awaiting.count({vertex, subtask}) != 0) {
        task->triggerCheckpoint(CheckpointBarrier{id, p.timestamp, p.options.type}, p.options);
      }
    }
    if (attempt->finishedTasks == static_cast<int>(attempt->flat.size())) {
      attempt->finalPhase = true;
      if (checkpointing) {
        // A final checkpoint first (Flink's FLIP-147): if anything fails
        // after it, the restart restores it and commits, instead of
        // writing the output again.
        triggerFinal();
      } else {
        for (Task* t : attempt->flat) t->notifyCheckpointComplete(kFinalCheckpointId);
      }
    }
  }

  // ---- checkpoint coordination (under mu) ----

  // Shared files of incremental checkpoints. A file stored for a pending
  // checkpoint belongs to it alone (each upload gets a fresh name) until it
  // completes; then every retained checkpoint that refers to it holds a
  // reference, and the file goes with the last one.
  std::map<std::string, int> sharedFileRefs;

  void registerSharedFiles(const CompletedCheckpoint& cp) {
    forEachSharedFile(cp,
                      [&](const NativeKeyedSnapshot::SstFile& f) { ++sharedFileRefs[f.location]; });
  }

  void releaseSharedFiles(const CompletedCheckpoint& cp) {
    forEachSharedFile(cp, [&](const NativeKeyedSnapshot::SstFile& f) {
      auto it = sharedFileRefs.find(f.location);
      if (it == sharedFileRefs.end() || --it->second > 0) return;
      sharedFileRefs.erase(it);
      std::error_code ec;
      std::filesystem::remove(f.location, ec);
    });
  }

  // Removes the shared files of a snapshot that no completed checkpoint
  // refers to: the copies made for a checkpoint that will not complete.
  template <class Snapshot>
  void discardUnregisteredSharedFiles(const Snapshot& snapshot) {
    forEachSharedFile(snapshot, [&](const NativeKeyedSnapshot::SstFile& f) {
      if (sharedFileRefs.count(f.location) != 0) return;
      std::error_code ec;
      std::filesystem::remove(f.location, ec);
    });
  }

  // Removes the state files a task wrote for a checkpoint that was aborted
  // before it acknowledged. The abort removed the checkpoint's directory,
  // but a task still writing into it then can leave its files (and so the
  // directory) behind; the directory goes once it is empty.
  static void discardLateStateFiles(const TaskStateSnapshot& snapshot) {
    for (const auto& [node, st] : snapshot.operators) {
      if (st.keyed.path.empty()) continue;
      const std::filesystem::path path(st.keyed.path);
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
      std::filesystem::remove(path.parent_path(), ec);  // only if empty
    }
  }

  void abortPending(std::map<int64_t, Pending>::iterator it, const std::string& reason,
                    bool countsAsFailure) {
    Pending p = std::move(it->second);
    pending.erase(it);
    const char* what = p.options.type == CheckpointType::kSavepoint ? "Savepoint" : "Checkpoint";
    log::warn("{} {} of job {} aborted: {}", what, p.id, jobId, reason);
    for (const auto& [task, snapshot] : p.acks) discardUnregisteredSharedFiles(snapshot);
    if (!p.directory.empty()) discardCheckpointDirectory(p.directory);
    if (p.result) {
      p.result->set_exception(std::make_exception_ptr(
          SluiceException(fmt::format("{} {} failed: {}", what, p.id, reason))));
    }
    if (p.options.terminate && attempt) {
      for (Task* t : attempt->flat) t->resumeAfterFailedStop();
    }
    lastCheckpointEnd = SteadyClock::now();
    if (p.final && attempt && !attempt->failed && !stopped) {
      ++stats.failed;
      ++consecutiveFailures;
      if (consecutiveFailures > tolerableFailures) {
        failAttempt(fmt::format(
            "Exceeded checkpoint tolerable failure threshold: the final checkpoint failed {} "
            "time(s) (execution.checkpointing.tolerable-failed-checkpoints = {}); the last time "
            "because {}",
            consecutiveFailures, tolerableFailures, reason));
      } else {
        triggerFinal();
      }
      return;
    }
    if (!countsAsFailure) return;
    ++stats.failed;
    if (p.options.type == CheckpointType::kSavepoint) return;  // savepoints never fail the job
    ++consecutiveFailures;
    if (consecutiveFailures > tolerableFailures && attempt && !attempt->failed) {
      failAttempt(fmt::format(
          "Exceeded checkpoint tolerable failure threshold: {} consecutive checkpoint(s) failed "
          "(execution.checkpointing.tolerable-failed-checkpoints = {}); the last one failed "
          "because {}",
          consecutiveFailures, tolerableFailures, reason));
    }
  }

  void failAttempt(const std::string& error) {
    attempt->failed = true;
    attempt->firstError = error;
    log::error("{}", error);
    for (Task* t : attempt->flat) t->cancel();
  }

  void complete(std::unique_lock<std::mutex>& lock, Pending p) {
    // A task refers to the stored files of the last checkpoint it heard
    // completed. With concurrent checkpoints, that one may have been
    // subsumed (and a file deleted) since; such a checkpoint cannot
    // complete.
    std::string missing;
    for (const auto& [task, snapshot] : p.acks) {
      forEachSharedFile(snapshot, [&](const NativeKeyedSnapshot::SstFile& f) {
        std::error_code ec;
        if (missing.empty() && sharedFileRefs.count(f.location) == 0 &&
            !std::filesystem::exists(f.location, ec)) {
          missing = f.location;
        }
      });
    }
    if (!missing.empty()) {
      const int64_t id = p.id;
      auto it = pending.emplace(id, std::move(p)).first;
      abortPending(it,
                   fmt::format("the shared state file '{}' it refers to was deleted when an older "
                               "checkpoint was subsumed",
                               missing),
                   true);
      return;
    }
    CompletedCheckpoint cp;
    cp.id = p.id;
    cp.type = p.options.type;
    cp.timestamp = p.timestamp;
    cp.jobId = jobId;
    cp.directory = p.directory;
    const StreamGraph& sg = *run->graph_;
    const JobGraph& jg = run->jobGraph_;
    for (const StreamNode& node : sg.nodes()) {
      const JobVertex& v = jg.vertices.at(jg.vertexOfNode.at(node.id));
      OperatorCheckpointState op;
      op.uid = uids.at(node.id);
      op.name = node.name;
      op.parallelism = v.parallelism;
      op.maxParallelism = v.maxParallelism;
      auto cs = p.coordinatorStates.find(node.id);
      if (cs != p.coordinatorStates.end()) {
        op.hasCoordinatorState = true;
        op.coordinatorState = cs->second;
      }
      bool any = op.hasCoordinatorState;
      op.subtasks.resize(v.parallelism);
      for (int s = 0; s < v.parallelism; ++s) {
        auto& ack = p.acks[{v.id, s}];
        auto st = ack.operators.find(node.id);
        if (st == ack.operators.end()) continue;
        op.subtasks[s] = std::move(st->second);
        any |= op.subtasks[s].hasKeyed() || !op.subtasks[s].timers.empty() ||
               !op.subtasks[s].operatorState.empty();
      }
      if (any) cp.operators.push_back(std::move(op));
    }
    if (!cp.directory.empty()) {
      try {
        writeCheckpointMetadata(cp);
      } catch (...) {
        const int64_t id = p.id;
        discardUnregisteredSharedFiles(cp);                 // the acks' state moved into `cp`
        auto it = pending.emplace(id, std::move(p)).first;  // so abortPending can abort it
        abortPending(it, describeCurrentException(), true);
        return;
      }
    }
    const bool savepoint = cp.type == CheckpointType::kSavepoint;
    log::info("Completed {} for job {} ({} operators with state)", cp.describe(), jobId,
              cp.operators.size());
    ++stats.completed;
    const int64_t durationMs =
        std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - p.started)
            .count();
    stats.totalDurationMs += durationMs;
    stats.maxDurationMs = std::max(stats.maxDurationMs, durationMs);
    const int64_t size = checkpointSize(cp, sharedFileRefs);
    stats.totalSizeBytes += size;
    stats.maxSizeBytes = std::max(stats.maxSizeBytes, size);
    stats.latestCompletedId = cp.id;
    stats.latestCompletedDirectory = cp.directory;
    consecutiveFailures = 0;
    lastCheckpointEnd = SteadyClock::now();
    latest = cp;
    if (!savepoint) {
      registerSharedFiles(cp);
      completed.push_back(std::move(cp));
      while (static_cast<int>(completed.size()) > numRetained) {
        releaseSharedFiles(completed.front());
        if (!completed.front().directory.empty()) {
          discardCheckpointDirectory(completed.front().directory);
        }
        completed.pop_front();
      }
    }
    if (attempt) {
      for (Task* t : attempt->flat) t->notifyCheckpointComplete(p.id);
      if (p.final) {
        for (Task* t : attempt->flat) t->notifyCheckpointComplete(kFinalCheckpointId);
      }
      if (p.options.terminate) {
        stoppedWithSavepoint = true;
        for (Task* t : attempt->flat) t->cancel();
      }
    }
    if (p.result) p.result->set_value(p.directory);
    (void)lock;
  }

  // Starts checkpoint or savepoint `options.type`; returns its result for
  // savepoints. Under mu.
  void triggerFinal() { trigger(CheckpointOptions{}, "", true); }

  std::shared_ptr<std::promise<std::string>> trigger(const CheckpointOptions& options,
                                                     const std::string& savepointBase,
                                                     bool final = false) {
    auto result = std::make_shared<std::promise<std::string>>();
    auto refuse = [&](const std::string& why) {
      result->set_exception(std::make_exception_ptr(SluiceException(why)));
      return result;
    };
    if (!attempt || stopped || attempt->failed) return refuse("the job is not running");
    if (attempt->finalPhase && !final) return refuse("the job has finished");
    Pending p;
    p.id = nextCheckpointId++;
    p.options = options;
    p.final = final;
    p.timestamp = clockMillis();
    p.started = SteadyClock::now();
    if (options.type == CheckpointType::kSavepoint) {
      p.directory = fmt::format("{}/savepoint-{}-{:x}", savepointBase, jobId.substr(0, 6), p.id);
      p.result = result;
    } else if (!checkpointsDir.empty()) {
      p.directory = fmt::format("{}/chk-{}", checkpointsDir, p.id);
    }
    for (Task* t : attempt->flat) p.awaiting.insert({t->vertexId(), t->subtask()});
    const int64_t id = p.id;
    auto [it, inserted] = pending.emplace(id, std::move(p));
    (void)inserted;
    if (!it->second.directory.empty()) {
      try {
        createDirectories(it->second.directory);
      } catch (...) {
        it->second.directory.clear();
        abortPending(it, describeCurrentException(), true);
        return result;
      }
    }
    CheckpointBarrier barrier{id, it->second.timestamp, options.type};
    const StreamGraph& sg = *run->graph_;
    // Finished tasks get no barrier: they are asked directly. (Sources are
    // triggered through their coordinator, finished or not.)
    for (Task* t : attempt->finished) {
      if (!sg.node(run->jobGraph_.vertices.at(t->vertexId()).head()).factory->isSource()) {
        t->triggerCheckpoint(barrier, options);
      }
    }
    for (size_t i = 0; i < attempt->coordinators.size(); ++i) {
      try {
        std::string state = attempt->coordinators[i]->snapshotAndTrigger(barrier, options);
        it->second.coordinatorStates[attempt->coordinatorNodes[i]] = std::move(state);
      } catch (...) {
        abortPending(
            it,
            fmt::format("source '{}' could not snapshot its enumerator: {}",
                        sg.node(attempt->coordinatorNodes[i]).name, describeCurrentException()),
            true);
        return result;
      }
    }
    return result;
  }

  int64_t clockMillis() const {
    return options.clock ? options.clock->currentTimeMillis()
                         : SystemClock::instance().currentTimeMillis();
  }

  // The periodic trigger and the timeout check.
  void checkpointLoop() {
    log::setThreadName("checkpoint-coordinator");
    std::unique_lock lock(mu);
    while (!stopped) {
      auto now = SteadyClock::now();
      for (auto it = pending.begin(); it != pending.end();) {
        auto next = std::next(it);
        if (now - it->second.started >= timeout) {
          abortPending(
              it,
              fmt::format("it did not complete within {} ms (execution.checkpointing.timeout)",
                          timeout.count()),
              true);
        }
        it = next;
      }
      auto wake = now + std::chrono::milliseconds(50);
      if (checkpointing && attempt && !attempt->failed && !attempt->finalPhase) {
        auto due = std::max(nextTrigger, lastCheckpointEnd + minPause);
        if (nextTrigger == SteadyClock::time_point::max()) {
          nextTrigger = now + interval;
          due = nextTrigger;
        }
        if (now >= due && static_cast<int>(pending.size()) < maxConcurrent) {
          nextTrigger = now + interval;
          CheckpointOptions o;
          trigger(o, "");
          continue;
        }
        if (static_cast<int>(pending.size()) < maxConcurrent) wake = std::min(wake, due);
      }
      cv.wait_until(lock, wake);
    }
  }

  // ---- attempts ----

  // The restore of every operator of every task from `cp`. Throws when the
  // checkpoint holds state the job cannot take.
  std::map<std::pair<int, int>, std::map<int, OperatorStateRestore>> planRestore(
      const CompletedCheckpoint& cp, std::map<int, const std::string*>& coordinatorStates) {
    const StreamGraph& sg = *run->graph_;
    const JobGraph& jg = run->jobGraph_;
    std::map<std::pair<int, int>, std::map<int, OperatorStateRestore>> out;
    std::set<std::string> claimed;
    for (const StreamNode& node : sg.nodes()) {
      const OperatorCheckpointState* op = cp.find(uids[node.id]);
      if (op == nullptr) continue;
      claimed.insert(op->uid);
      const JobVertex& v = jg.vertices.at(jg.vertexOfNode.at(node.id));
      bool keyed = false;
      for (const auto& st : op->subtasks) keyed |= st.hasKeyed();
      if (keyed && op->maxParallelism != v.maxParallelism) {
        throw SluiceException(fmt::format(
            "cannot restore operator '{}' (uid '{}') from {}: its max parallelism changed from {} "
            "to {}; keyed state is split into max-parallelism key groups, so it must stay the same",
            node.name, op->uid, cp.describe(), op->maxParallelism, v.maxParallelism));
      }
      if (op->hasCoordinatorState) coordinatorStates[node.id] = &op->coordinatorState;
      std::vector<std::string> opStates;
      for (const auto& st : op->subtasks) opStates.push_back(st.operatorState);
      std::vector<std::string> parts = OperatorStateBackend::repartition(opStates, v.parallelism);
      for (int s = 0; s < v.parallelism; ++s) {
        OperatorStateRestore r;
        r.operatorState = std::move(parts.at(s));
        const KeyGroupRange range =
            computeKeyGroupRangeForOperatorIndex(v.maxParallelism, v.parallelism, s);
        for (size_t old = 0; old < op->subtasks.size(); ++old) {
          const auto& st = op->subtasks[old];
          if (!st.timers.empty()) r.timers.push_back(st.timers);
          if (!st.hasKeyed()) continue;
          const KeyGroupRange oldRange = computeKeyGroupRangeForOperatorIndex(
              op->maxParallelism, static_cast<int>(op->subtasks.size()), static_cast<int>(old));
          if (oldRange.endKeyGroup < range.startKeyGroup ||
              oldRange.startKeyGroup > range.endKeyGroup) {
            continue;
          }
          r.keyedState.push_back(st.keyed);
        }
        out[{v.id, s}][node.id] = std::move(r);
      }
    }
    if (!ignoreUnclaimedState) {
      for (const auto& op : cp.operators) {
        if (claimed.count(op.uid) != 0) continue;
        throw SluiceException(fmt::format(
            "{} holds state of operator '{}' (uid '{}') that this job does not have; give the "
            "operator that should take it the same uid, or set "
            "execution.savepoint.ignore-unclaimed-state: true to drop that state",
            cp.describe(), op.name, op.uid));
      }
    }
    return out;
  }

  // Builds and starts attempt `number`, restoring `cp` when given. Throws
  // when the restore is impossible or a source enumerator cannot start.
  void startAttempt(int number, const CompletedCheckpoint* cp) {
    const StreamGraph& sg = *run->graph_;
    const JobGraph& jg = run->jobGraph_;
    std::map<int, const std::string*> coordinatorStates;
    std::map<std::pair<int, int>, std::map<int, OperatorStateRestore>> restores;
    if (cp != nullptr) {
      restores = planRestore(*cp, coordinatorStates);
      log::info("Job {} attempt {} restores from {}", jobId, number, cp->describe());
    }
    ExecutionGraph eg = createExecutionGraph(jg);
    auto a = std::make_unique<Attempt>();
    a->number = number;
    int slots = 1;
    for (const auto& v : jg.vertices) slots = std::max(slots, v.parallelism);
    std::shared_ptr<const Clock> clock = options.clock;
    if (!clock) clock = std::shared_ptr<const Clock>(&SystemClock::instance(), [](const Clock*) {});
    a->services = std::make_unique<TaskServices>(options.configuration, std::move(clock), slots);
    a->tasks.resize(jg.vertices.size());
    for (const auto& v : jg.vertices) {
      for (int s = 0; s < v.parallelism; ++s) {
        auto task = std::make_unique<Task>(sg, jg, v.id, s, number);
        task->setServices(a->services.get());
        task->setCheckpointing(this, mode);
        auto r = restores.find({v.id, s});
        if (r != restores.end()) task->setRestore(std::move(r->second));
        a->tasks[v.id].push_back(std::move(task));
      }
    }
    // Gate channels: for each consumer subtask, the channels of its input
    // edges in edge order.
    std::vector<std::vector<int>> gateChannel(jg.edges.size());  // per edge, per channel
    for (const auto& v : jg.vertices) {
      for (int s = 0; s < v.parallelism; ++s) {
        std::vector<InputChannelInfo> infos;
        for (int je : v.inputs) {
          auto& chans = eg.channels[je];
          gateChannel[je].resize(chans.size(), -1);
          for (size_t k = 0; k < chans.size(); ++k) {
            if (chans[k].consumerSubtask != s) continue;
            gateChannel[je][k] = static_cast<int>(infos.size());
            const StreamEdge& e = sg.edge(jg.edges[je].streamEdge);
            infos.push_back({e.id, e.inputIndex});
          }
        }
        a->tasks[v.id][s]->createGate(std::move(infos));
      }
    }
    for (const auto& v : jg.vertices) {
      for (int je : v.outputs) {
        const auto& chans = eg.channels[je];
        const JobEdge& edge = jg.edges[je];
        for (int s = 0; s < v.parallelism; ++s) {
          std::vector<RecordWriter::Target> targets;
          for (size_t k = 0; k < chans.size(); ++k) {
            if (chans[k].producerSubtask != s) continue;
            Task& consumer = *a->tasks[edge.target][chans[k].consumerSubtask];
            targets.push_back({&consumer.gate(), gateChannel[je][k]});
          }
          a->tasks[v.id][s]->addWriter(je, std::move(targets), options.segmentSize,
                                       options.buffersPerChannel, options.floatingBuffers);
        }
      }
    }
    for (const auto& v : jg.vertices) {
      const StreamNode& head = sg.node(v.head());
      if (!head.factory->isSource()) continue;
      std::vector<Task*> ts;
      for (auto& t : a->tasks[v.id]) ts.push_back(t.get());
      auto cs = coordinatorStates.find(head.id);
      a->coordinators.push_back(std::make_unique<SourceCoordinatorHolder>(
          ts, *head.factory, cs == coordinatorStates.end() ? nullptr : cs->second));
      a->coordinatorNodes.push_back(head.id);
      for (auto& t : a->tasks[v.id]) t->setSourceCoordinator(a->coordinators.back().get());
    }
    for (auto& per : a->tasks)
      for (auto& t : per) a->flat.push_back(t.get());
    a->results.resize(a->flat.size());
    for (auto& c : a->coordinators) c->start();

    Attempt* raw = a.get();
    {
      std::lock_guard lock(mu);
      attempt = std::move(a);
      nextTrigger = SteadyClock::time_point::max();
    }
    cv.notify_all();
    for (size_t i = 0; i < raw->flat.size(); ++i) {
      raw->threads.emplace_back([this, raw, i] {
        raw->results[i] = raw->flat[i]->run();
        if (raw->results[i].failed) {
          std::lock_guard lock(mu);
          if (!raw->failed) failAttempt(raw->results[i].error);
        }
      });
    }
    if (cancelRequested.load()) {
      for (Task* t : raw->flat) t->cancel();
    }
  }

  // Waits for the running attempt's threads; then no task runs.
  void joinAttempt() {
    Attempt* a;
    {
      std::lock_guard lock(mu);
      a = attempt.get();
    }
    for (auto& t : a->threads) t.join();
    std::lock_guard lock(mu);
    for (auto it = pending.begin(); it != pending.end();) {
      auto next = std::next(it);
      abortPending(it, "the job attempt ended", false);
      it = next;
    }
  }
};

std::shared_ptr<JobRun> JobRun::start(std::shared_ptr<const StreamGraph> graph,
                                      MiniClusterOptions options) {
  namespace o = options;
  std::shared_ptr<JobRun> run(new JobRun());
  run->graph_ = std::move(graph);
  run->jobGraph_ = createJobGraph(*run->graph_);
  run->impl_ = std::make_unique<Impl>();
  Impl& im = *run->impl_;
  im.run = run.get();
  im.options = options;
  im.jobId = generateJobId();
  const Configuration& config = options.configuration;
  const JobGraph& jg = run->jobGraph_;
  const StreamGraph& sg = *run->graph_;

  // Checkpoint settings.
  im.interval = config.get(o::kExecutionCheckpointingInterval);
  im.checkpointing = im.interval.count() > 0;
  const std::string modeName = upper(config.get(o::kExecutionCheckpointingMode));
  if (modeName == "EXACTLY_ONCE") {
    im.mode = CheckpointingMode::kExactlyOnce;
  } else if (modeName == "AT_LEAST_ONCE") {
    im.mode = CheckpointingMode::kAtLeastOnce;
  } else {
    throw SluiceException(fmt::format(
        "execution.checkpointing.mode: unknown mode '{}'; use EXACTLY_ONCE or AT_LEAST_ONCE",
        config.get(o::kExecutionCheckpointingMode)));
  }
  im.timeout = config.get(o::kExecutionCheckpointingTimeout);
  if (im.timeout.count() <= 0) {
    throw SluiceException("execution.checkpointing.timeout must be positive");
  }
  im.minPause = config.get(o::kExecutionCheckpointingMinPause);
  if (im.minPause.count() < 0) {
    throw SluiceException("execution.checkpointing.min-pause must not be negative");
  }
  im.maxConcurrent = config.get(o::kExecutionCheckpointingMaxConcurrentCheckpoints);
  if (im.maxConcurrent < 1) {
    throw SluiceException(
        fmt::format("execution.checkpointing.max-concurrent-checkpoints must be at least 1, got {}",
                    im.maxConcurrent));
  }
  im.tolerableFailures = config.get(o::kExecutionCheckpointingTolerableFailedCheckpoints);
  if (im.tolerableFailures < 0) {
    throw SluiceException(
        "execution.checkpointing.tolerable-failed-checkpoints must not be negative");
  }
  const std::string retention =
      upper(config.get(o::kExecutionCheckpointingExternalizedCheckpointRetention));
  if (retention == "RETAIN_ON_CANCELLATION") {
    im.retainOnCancellation = true;
  } else if (retention != "DELETE_ON_CANCELLATION" && retention != "NO_EXTERNALIZED_CHECKPOINTS") {
    throw SluiceException(fmt::format(
        "execution.checkpointing.externalized-checkpoint-retention: unknown value '{}'; use "
        "DELETE_ON_CANCELLATION or RETAIN_ON_CANCELLATION",
        config.get(o::kExecutionCheckpointingExternalizedCheckpointRetention)));
  }
  im.numRetained = config.get(o::kStateCheckpointsNumRetained);
  if (im.numRetained < 1) {
    throw SluiceException(
        fmt::format("state.checkpoints.num-retained must be at least 1, got {}", im.numRetained));
  }
  std::string dir = config.get(o::kStateCheckpointsDir);
  if (dir.rfind("file://", 0) == 0) dir = dir.substr(7);
  if (!dir.empty()) {
    // Normal form, so that the shared files of this job are recognised as
    // such in restored checkpoints (their paths are normalised).
    im.checkpointsDir = (std::filesystem::path(dir) / im.jobId).lexically_normal().string();
  }
  im.savepointsDir = config.get(o::kStateSavepointsDir);
  if (im.savepointsDir.rfind("file://", 0) == 0) im.savepointsDir = im.savepointsDir.substr(7);
  im.ignoreUnclaimedState = config.get(o::kExecutionSavepointIgnoreUnclaimedState);
  im.restartStrategy = createRestartStrategy(config, im.checkpointing);
  if (im.checkpointing && config.get(o::kStateBackendIncremental) && im.checkpointsDir.empty()) {
    log::warn(
        "state.backend.incremental is set, but state.checkpoints.dir is not: checkpoints kept in "
        "memory are always full");
  }

  std::vector<std::string> unnamed;
  for (const StreamNode& node : sg.nodes()) {
    if (node.uid.empty()) {
      im.uids.push_back(fmt::format("auto-{}", node.id));
      unnamed.push_back(fmt::format("'{}'", node.name));
    } else {
      im.uids.push_back(node.uid);
    }
  }

  std::optional<CompletedCheckpoint> initial;
  std::string savepointPath = config.get(o::kExecutionSavepointPath);
  if (savepointPath.rfind("file://", 0) == 0) savepointPath = savepointPath.substr(7);
  if (!savepointPath.empty()) initial = loadCheckpoint(savepointPath);
  if ((im.checkpointing || initial) && !unnamed.empty()) {
    std::string list;
    for (const auto& u : unnamed) list += (list.empty() ? "" : ", ") + u;
    log::warn(
        "Operators without a uid get one from their position in the job ({}); state restores "
        "only into the same job shape. Set .uid(\"...\") on stateful operators.",
        list);
  }

  log::info("Starting job '{}' ({}) with {} vertices; checkpointing {}", jg.jobName, im.jobId,
            jg.vertices.size(),
            im.checkpointing ? fmt::format("every {} ms", im.interval.count()) : "off");
  im.started = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(run->mu_);
    run->outcome_.state = JobState::kRunning;
  }
  im.io = std::make_unique<AsyncExecutor>();
  if (initial) im.latest = *initial;
  im.startAttempt(0, initial ? &*initial : nullptr);
  im.checkpointThread = std::thread([&im] { im.checkpointLoop(); });
  run->monitor_ = std::thread([run = run.get()] { run->monitor(); });
  return run;
}

void JobRun::monitor() {
  Impl& im = *impl_;
  std::string coordinatorError;
  for (;;) {
    im.joinAttempt();
    Attempt& a = *im.attempt;
    for (auto& c : a.coordinators) {
      try {
        c->close();
      } catch (...) {
        if (coordinatorError.empty()) {
          coordinatorError = "source enumerator close() failed: " + describeCurrentException();
        }
      }
    }
    bool restart = false;
    {
      std::unique_lock lock(im.mu);
      // Without checkpoints, a failure after the final commit began cannot
      // be undone by a restart (it would write the output again).
      const bool restartable = !a.finalPhase || im.checkpointing;
      if (a.failed && !im.cancelRequested.load() && restartable && !im.stoppedWithSavepoint) {
        const std::string cause = a.firstError;
        auto delay = im.restartStrategy->onFailure(SteadyClock::now());
        if (delay) {
          log::warn("Job {} failed ({}); restarting in {} ms ({})", im.jobId, cause, delay->count(),
                    im.restartStrategy->describe());
          im.cv.wait_for(lock, *delay, [&] { return im.cancelRequested.load(); });
          restart = !im.cancelRequested.load();
          if (!restart) im.cancelledWhileRestarting = true;
        } else {
          log::error("Job {} failed and {} gives up: {}", im.jobId, im.restartStrategy->describe(),
                     cause);
        }
      } else if (a.failed && !restartable) {
        log::error(
            "Job {} failed while committing its final output; not restarting, because "
            "a restart would write that output again",
            im.jobId);
      }
    }
    if (!restart) break;
    std::optional<CompletedCheckpoint> from;
    {
      std::lock_guard lock(im.mu);
      from = im.latest;
      ++im.stats.restarts;
    }
    try {
      im.startAttempt(a.number + 1, from ? &*from : nullptr);
    } catch (...) {
      std::lock_guard lock(im.mu);
      a.failed = true;
      a.firstError = "restart failed: " + describeCurrentException();
      break;
    }
  }
  Attempt& a = *im.attempt;
  {
    std::lock_guard lock(im.mu);
    im.stopped = true;
  }
  im.cv.notify_all();
  im.checkpointThread.join();

  JobOutcome out;
  out.netRuntimeMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now() - im.started)
                         .count();
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
  if (im.stoppedWithSavepoint && !a.failed) {
    out.state = JobState::kFinished;
  } else if (im.cancelledWhileRestarting) {
    out.state = JobState::kCanceled;
  } else if (a.failed || !accumulatorError.empty()) {
    out.state = JobState::kFailed;
    out.error = a.failed ? a.firstError : accumulatorError;
  } else if (im.cancelRequested.load() && anyCancelled) {
    // A cancel that came after every task had finished changes nothing.
    out.state = JobState::kCanceled;
  } else {
    out.state = JobState::kFinished;
  }
  // Checkpoint retention (Flink's CheckpointProperties): a finished job's
  // checkpoints go; a cancelled job's go unless RETAIN_ON_CANCELLATION; a
  // failed job's stay. Savepoints always stay.
  if (!im.checkpointsDir.empty()) {
    const bool discard = out.state == JobState::kFinished ||
                         (out.state == JobState::kCanceled && !im.retainOnCancellation);
    if (discard) discardCheckpointDirectory(im.checkpointsDir);
  }
  im.io.reset();  // runs what is queued, then stops
  log::info("Job '{}' switched to {} after {} ms", jobGraph_.jobName, jobStateName(out.state),
            out.netRuntimeMs);
  {
    std::lock_guard lock(mu_);
    outcome_ = std::move(out);
  }
  done_.notify_all();
}

JobState JobRun::state() const {
  std::lock_guard lock(mu_);
  return outcome_.state;
}

const std::string& JobRun::jobId() const { return impl_->jobId; }

void JobRun::cancel() {
  impl_->cancelRequested.store(true);
  std::lock_guard lock(impl_->mu);
  impl_->cv.notify_all();
  if (impl_->attempt) {
    for (Task* t : impl_->attempt->flat) t->cancel();
  }
}

std::string JobRun::triggerSavepoint(const std::string& directory, bool terminate, bool drain) {
  Impl& im = *impl_;
  std::string base = directory.empty() ? im.savepointsDir : directory;
  if (base.rfind("file://", 0) == 0) base = base.substr(7);
  if (base.empty()) {
    throw SluiceException(
        "no savepoint directory: pass one, or set state.savepoints.dir in the configuration");
  }
  std::shared_ptr<std::promise<std::string>> result;
  {
    std::lock_guard lock(im.mu);
    CheckpointOptions o;
    o.type = CheckpointType::kSavepoint;
    o.terminate = terminate;
    o.drain = drain;
    result = im.trigger(o, base);
  }
  return result->get_future().get();
}

CheckpointStats JobRun::checkpointStats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

JobOutcome JobRun::wait() {
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] {
    return outcome_.state != JobState::kRunning && outcome_.state != JobState::kCreated;
  });
  return outcome_;
}

JobRun::~JobRun() {
  if (monitor_.joinable()) {
    {
      std::lock_guard lock(mu_);
      if (outcome_.state == JobState::kRunning) cancel();
    }
    monitor_.join();
  }
}

}  // namespace sluice::runtime
