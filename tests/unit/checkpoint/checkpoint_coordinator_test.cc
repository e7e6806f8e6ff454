// The checkpoint coordinator on its own, with a fake clock and a fake
// gateway instead of a running job: periodic triggers, min pause, max
// concurrent, timeouts, declines, tolerable failures, savepoints, the final
// checkpoint, completion notices and retention. Nothing here waits on time
// except one test that waits a moment for something that must not happen.
#include "checkpoint/checkpoint_coordinator.h"

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sluice/sluice.h>

#include "checkpoint/checkpoint_metadata.h"
#include "checkpoint/state_assignment.h"
#include "harness/temp_dir.h"

namespace sluice::checkpoint {
namespace checkpoint_coordinator_test {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Ms = std::chrono::milliseconds;
using Time = CheckpointCoordinator::SteadyTime;

// What the coordinator asked of the (absent) tasks.
class FakeGateway final : public CheckpointTaskGateway {
 public:
  Result<std::map<int, std::string>> triggerCheckpoint(const CheckpointBarrier& barrier,
                                                       const CheckpointOptions& options) override {
    {
      std::lock_guard lock(mu);
      triggered.push_back(barrier.id);
      directories.push_back(options.targetDirectory);
    }
    if (onTrigger) onTrigger(barrier.id);
    std::lock_guard lock(mu);
    passedOn.push_back(barrier.id);
    passedOnChanged.notify_all();
    if (!enumeratorError.empty()) return Status::userError(enumeratorError);
    return std::map<int, std::string>{{0, "enumerator@" + std::to_string(barrier.id)}};
  }
  void triggerFinishedTask(TaskId task, const CheckpointBarrier& barrier,
                           const CheckpointOptions&) override {
    std::lock_guard lock(mu);
    finishedTriggers.emplace_back(task, barrier.id);
  }
  void notifyCheckpointComplete(int64_t id) override {
    std::lock_guard lock(mu);
    completed.push_back(id);
  }
  void notifyCheckpointAborted(int64_t id, const CheckpointOptions&) override {
    std::lock_guard lock(mu);
    aborted.push_back(id);
  }
  void failJob(const std::string& cause) override {
    std::lock_guard lock(mu);
    failures.push_back(cause);
  }
  void stopWithSavepointComplete() override { ++stops; }

  std::mutex mu;
  std::condition_variable passedOnChanged;
  std::vector<int64_t> triggered;
  // In the order the triggers returned, i.e. reached the tasks. A hook runs
  // between the two.
  std::vector<int64_t> passedOn;
  std::function<void(int64_t)> onTrigger;
  std::vector<std::string> directories;
  std::vector<std::pair<TaskId, int64_t>> finishedTriggers;
  std::vector<int64_t> completed;
  std::vector<int64_t> aborted;
  std::vector<std::string> failures;
  std::string enumeratorError;
  int stops = 0;
};

// A source -> keyed sum job at parallelism 2: vertices 0 (source) and 1.
struct Job {
  Job() {
    StreamExecutionEnvironment env;
    env.setParallelism(2);
    env.fromSequence(1, 10)
        .uid("source")
        .keyBy([](int64_t v) { return v % 3; })
        .reduce([](int64_t a, int64_t b) { return a + b; })
        .uid("sum")
        .print();
    auto g = std::make_shared<StreamGraph>(env.getStreamGraph());
    g->jobName = "coordinator test";
    g->defaultParallelism = 2;
    g->resolve();
    graph = g;
    jobGraph = createJobGraph(*graph);
    for (const auto& v : jobGraph.vertices) {
      for (int s = 0; s < v.parallelism; ++s) tasks.push_back({v.id, s});
    }
  }
  std::shared_ptr<const StreamGraph> graph;
  JobGraph jobGraph;
  std::vector<TaskId> tasks;
};

class CoordinatorTest : public ::testing::Test {
 protected:
  void start(CheckpointCoordinatorConfig config) {
    CheckpointCoordinator::JobInfo info{"0123456789abcdef0123456789abcdef", job.graph,
                                        &job.jobGraph, operatorUids(*job.graph)};
    coordinator =
        std::make_unique<CheckpointCoordinator>(config, info, clock, [this] { return now; });
    coordinator->attemptStarted(&gateway, job.tasks);
  }
  static CheckpointCoordinatorConfig periodic(int64_t intervalMs) {
    CheckpointCoordinatorConfig c;
    c.interval = Ms(intervalMs);
    return c;
  }
  // Every task acknowledges checkpoint `id` with a little operator state.
  void ackAll(int64_t id) {
    for (TaskId t : job.tasks) {
      TaskStateSnapshot s;
      s.operators[job.jobGraph.vertices[t.vertex].head()].operatorState =
          "state of " + std::to_string(t.vertex) + "/" + std::to_string(t.subtask);
      coordinator->acknowledgeCheckpoint(id, t, std::move(s));
    }
  }
  void advance(int64_t ms) {
    now += Ms(ms);
    coordinator->runDue(now);
  }

  Job job;
  FakeGateway gateway;
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(5000);
  Time now = Time{} + std::chrono::hours(1);
  std::unique_ptr<CheckpointCoordinator> coordinator;
};

TEST_F(CoordinatorTest, TriggersEveryIntervalAndCompletesOnceEveryTaskAcknowledged) {
  start(periodic(100));
  advance(0);  // schedules the first one an interval from now
  advance(99);
  EXPECT_TRUE(gateway.triggered.empty());
  advance(1);
  ASSERT_THAT(gateway.triggered, ElementsAre(1));
  EXPECT_EQ(gateway.directories[0], "") << "no state.checkpoints.dir: in memory";
  // Three of four tasks acknowledged: still pending.
  TaskStateSnapshot empty;
  for (size_t i = 0; i + 1 < job.tasks.size(); ++i) {
    coordinator->acknowledgeCheckpoint(1, job.tasks[i], TaskStateSnapshot{});
  }
  coordinator->acknowledgeCheckpoint(1, job.tasks[0], TaskStateSnapshot{});  // repeated: ignored
  EXPECT_EQ(coordinator->numberOfPending(), 1u);
  EXPECT_TRUE(gateway.completed.empty());
  coordinator->acknowledgeCheckpoint(1, job.tasks.back(), TaskStateSnapshot{});
  EXPECT_THAT(gateway.completed, ElementsAre(1));
  const CheckpointStats stats = coordinator->stats();
  EXPECT_EQ(stats.completed, 1);
  EXPECT_EQ(stats.latestCompletedId, 1);
  auto latest = coordinator->latestCompleted();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->id, 1);
  EXPECT_EQ(latest->timestamp, 5000) << "barriers are stamped with the job's clock";
  const OperatorCheckpointState* source = latest->find("source");
  ASSERT_NE(source, nullptr);
  EXPECT_TRUE(source->hasCoordinatorState);
  EXPECT_EQ(source->coordinatorState, "enumerator@1");
  EXPECT_EQ(latest->find("sum"), nullptr) << "no task reported state for it";
  advance(100);
  EXPECT_THAT(gateway.triggered, ElementsAre(1, 2));
}

TEST_F(CoordinatorTest, MinPauseCountsFromTheEndOfTheLastCheckpoint) {
  CheckpointCoordinatorConfig c = periodic(100);
  c.minPause = Ms(250);
  start(c);
  advance(0);
  advance(100);  // the interval is due, the pause since the start is not
  EXPECT_TRUE(gateway.triggered.empty());
  advance(150);  // +250
  ASSERT_THAT(gateway.triggered, ElementsAre(1));
  advance(50);
  ackAll(1);     // ends at +300
  advance(100);  // +400: the interval is due again
  advance(149);  // +549
  EXPECT_THAT(gateway.triggered, ElementsAre(1));
  advance(1);  // +550 = end + 250
  EXPECT_THAT(gateway.triggered, ElementsAre(1, 2));
}

TEST_F(CoordinatorTest, AtMostMaxConcurrentArePending) {
  CheckpointCoordinatorConfig c = periodic(10);
  c.maxConcurrent = 2;
  start(c);
  advance(0);
  for (int i = 0; i < 10; ++i) advance(10);
  EXPECT_THAT(gateway.triggered, ElementsAre(1, 2));
  EXPECT_EQ(coordinator->numberOfPending(), 2u);
  ackAll(1);
  advance(10);
  EXPECT_THAT(gateway.triggered, ElementsAre(1, 2, 3));
}

TEST_F(CoordinatorTest, TimeoutsAbortAndExceedingTheTolerableFailuresFailsTheJob) {
  CheckpointCoordinatorConfig c = periodic(100);
  c.timeout = Ms(1000);
  c.tolerableFailures = 1;
  start(c);
  advance(0);
  advance(100);
  ASSERT_THAT(gateway.triggered, ElementsAre(1));
  advance(999);
  EXPECT_TRUE(gateway.aborted.empty());
  advance(1);
  EXPECT_THAT(gateway.aborted, ElementsAre(1));
  EXPECT_EQ(coordinator->stats().failed, 1);
  EXPECT_TRUE(gateway.failures.empty()) << "one failure is tolerated";
  // A late acknowledgement of the aborted checkpoint changes nothing.
  ackAll(1);
  EXPECT_TRUE(gateway.completed.empty());
  advance(100);
  ASSERT_THAT(gateway.triggered, ElementsAre(1, 2));
  advance(1000);
  EXPECT_THAT(gateway.aborted, ElementsAre(1, 2));
  ASSERT_EQ(gateway.failures.size(), 1u);
  EXPECT_THAT(gateway.failures[0], HasSubstr("2 consecutive checkpoint(s) failed"));
  EXPECT_THAT(gateway.failures[0],
              HasSubstr("execution.checkpointing.tolerable-failed-checkpoints = 1"));
  EXPECT_THAT(gateway.failures[0], HasSubstr("execution.checkpointing.timeout"));
  // A failing attempt gets no more checkpoints.
  advance(10000);
  EXPECT_THAT(gateway.triggered, ElementsAre(1, 2));
}

TEST_F(CoordinatorTest, DeclinesCountOnlyWhenTheyAreFailuresAndACompletionResetsTheCount) {
  CheckpointCoordinatorConfig c = periodic(10);
  c.tolerableFailures = 1;
  start(c);
  advance(0);
  advance(10);
  coordinator->declineCheckpoint(1, job.tasks[1], "overtaken by a newer barrier", false);
  EXPECT_THAT(gateway.aborted, ElementsAre(1));
  EXPECT_EQ(coordinator->stats().failed, 0);
  advance(10);
  coordinator->declineCheckpoint(2, job.tasks[1], "could not snapshot", true);
  EXPECT_EQ(coordinator->stats().failed, 1);
  advance(10);
  ackAll(3);
  advance(10);
  coordinator->declineCheckpoint(4, job.tasks[0], "could not snapshot", true);
  EXPECT_TRUE(gateway.failures.empty()) << "the completed checkpoint 3 reset the count";
  advance(10);
  coordinator->declineCheckpoint(5, job.tasks[0], "could not write", true);
  ASSERT_EQ(gateway.failures.size(), 1u);
  EXPECT_THAT(gateway.failures[0], HasSubstr("could not write"));
  // A decline of something no longer pending is ignored.
  coordinator->declineCheckpoint(5, job.tasks[1], "again", true);
  EXPECT_EQ(coordinator->stats().failed, 3);
}

TEST_F(CoordinatorTest, AnEnumeratorThatCannotSnapshotAbortsTheCheckpoint) {
  start(periodic(10));
  gateway.enumeratorError = "source 'S' could not snapshot its enumerator: boom";
  advance(0);
  advance(10);
  EXPECT_THAT(gateway.aborted, ElementsAre(1));
  EXPECT_EQ(coordinator->numberOfPending(), 0u);
  ASSERT_EQ(gateway.failures.size(), 1u);
  EXPECT_THAT(gateway.failures[0], HasSubstr("boom"));
}

TEST_F(CoordinatorTest, SavepointsReportTheirOutcomeAndNeverFailTheJob) {
  test::TempDir dir("coordinator-savepoints");
  CheckpointCoordinatorConfig c;  // no periodic checkpoints
  start(c);
  CheckpointOptions o;
  o.type = CheckpointType::kSavepoint;
  std::future<CheckpointResult> first = coordinator->triggerCheckpoint(o, dir.str());
  ASSERT_THAT(gateway.triggered, ElementsAre(1));
  const std::string location = gateway.directories[0];
  EXPECT_THAT(location, HasSubstr(dir.str() + "/savepoint-012345-1"));
  EXPECT_TRUE(fs::is_directory(location));
  coordinator->declineCheckpoint(1, job.tasks[2], "disk full", true);
  try {
    first.get();
    FAIL() << "the savepoint was declined";
  } catch (const SluiceException& e) {
    EXPECT_THAT(e.what(), HasSubstr("Savepoint 1 failed: disk full"));
  }
  EXPECT_FALSE(fs::exists(location)) << "an aborted savepoint leaves nothing behind";
  EXPECT_TRUE(gateway.failures.empty());

  std::future<CheckpointResult> second = coordinator->triggerCheckpoint(o, dir.str());
  ackAll(2);
  const CheckpointResult r = second.get();
  EXPECT_EQ(r.id, 2);
  EXPECT_TRUE(fs::exists(fs::path(r.directory) / kMetadataFileName));
  Result<CompletedCheckpoint> stored = loadCheckpoint(r.directory);
  ASSERT_TRUE(stored.isOk()) << stored.status().toString();
  EXPECT_TRUE(stored.value().isSavepoint());
  EXPECT_EQ(stored.value().find("source")->subtasks[1].operatorState, "state of 0/1");
  EXPECT_EQ(coordinator->numberOfRetained(), 0u) << "savepoints are not retained checkpoints";
}

// A savepoint creates its directory before its trigger goes out; a periodic
// checkpoint triggered meanwhile takes the next id. Were its trigger to
// overtake the savepoint's, the sources would inject the newer barrier first
// and every task would give the savepoint up: it would hang until its
// timeout and block the periodic checkpoints behind it.
TEST_F(CoordinatorTest, TriggersReachTheTasksOneAtATimeInIdOrder) {
  test::TempDir dir("coordinator-trigger-order");
  start(CheckpointCoordinatorConfig{});
  std::thread periodic;
  gateway.onTrigger = [&](int64_t id) {
    if (id != 1) return;
    // While the savepoint's trigger is on its way, another one starts. It
    // must not pass the savepoint's on before this returns; a wait that
    // ends early only makes the test weaker, never fail.
    periodic = std::thread([&] { (void)coordinator->triggerCheckpoint(CheckpointOptions{}, ""); });
    std::unique_lock lock(gateway.mu);
    gateway.passedOnChanged.wait_for(lock, Ms(300), [&] { return !gateway.passedOn.empty(); });
  };
  CheckpointOptions o;
  o.type = CheckpointType::kSavepoint;
  std::future<CheckpointResult> savepoint = coordinator->triggerCheckpoint(o, dir.str());
  periodic.join();
  EXPECT_THAT(gateway.passedOn, ElementsAre(1, 2));
  ackAll(1);
  EXPECT_EQ(savepoint.get().id, 1);
  ackAll(2);
  EXPECT_THAT(gateway.completed, ElementsAre(1, 2));
}

// The periodic schedule comes due while a savepoint's trigger is on its way
// (its directory may be slow to create), with room for a second checkpoint:
// the timer does not wait for the trigger, and the periodic checkpoint
// follows it a moment later.
TEST_F(CoordinatorTest, APeriodicCheckpointDueWhileASavepointIsTriggeredDoesNotBlockTheTimer) {
  test::TempDir dir("coordinator-periodic-behind-savepoint");
  CheckpointCoordinatorConfig c = periodic(100);
  c.maxConcurrent = 2;
  start(c);
  advance(0);
  const Time due = now + Ms(100);
  std::atomic<bool> timerReturned{false};
  bool returnedWhileTriggering = false;
  std::thread timer;
  gateway.onTrigger = [&](int64_t id) {
    if (id != 1) return;
    timer = std::thread([&] {
      coordinator->runDue(due);
      timerReturned = true;
    });
    for (int i = 0; i < 5000 && !timerReturned; ++i) std::this_thread::sleep_for(Ms(1));
    returnedWhileTriggering = timerReturned;
  };
  CheckpointOptions o;
  o.type = CheckpointType::kSavepoint;
  std::future<CheckpointResult> savepoint = coordinator->triggerCheckpoint(o, dir.str());
  timer.join();
  EXPECT_TRUE(returnedWhileTriggering) << "the timer waited for the savepoint's trigger";
  EXPECT_THAT(gateway.triggered, ElementsAre(1));
  now = due;
  advance(5);
  EXPECT_THAT(gateway.triggered, ElementsAre(1, 2));
  ackAll(1);
  EXPECT_EQ(savepoint.get().id, 1);
  ackAll(2);
  EXPECT_THAT(gateway.completed, ElementsAre(1, 2));
}

TEST_F(CoordinatorTest, StopWithSavepointEndsTheJobOnlyWhenItCompletes) {
  test::TempDir dir("coordinator-stop");
  start(CheckpointCoordinatorConfig{});
  CheckpointOptions o;
  o.type = CheckpointType::kSavepoint;
  o.terminate = true;
  auto f = coordinator->triggerCheckpoint(o, dir.str());
  EXPECT_EQ(gateway.stops, 0);
  ackAll(1);
  f.get();
  EXPECT_EQ(gateway.stops, 1);
}

TEST_F(CoordinatorTest, RefusesToTriggerWithoutARunningAttempt) {
  start(periodic(10));
  coordinator->attemptFailed();
  auto f = coordinator->triggerCheckpoint(CheckpointOptions{}, "");
  EXPECT_THROW(
      {
        try {
          f.get();
        } catch (const SluiceException& e) {
          EXPECT_THAT(e.what(), HasSubstr("the job is not running"));
          throw;
        }
      },
      SluiceException);
  advance(1000);
  EXPECT_TRUE(gateway.triggered.empty());
}

TEST_F(CoordinatorTest, TheFinalCheckpointFollowsTheLastTaskAndCommitsOnCompletion) {
  CheckpointCoordinatorConfig c = periodic(100000);
  c.tolerableFailures = 1;
  start(c);
  advance(0);
  // A task finishing while nothing is pending is asked nothing.
  coordinator->taskFinished(job.tasks[0]);
  EXPECT_TRUE(gateway.finishedTriggers.empty());
  auto manual = coordinator->triggerCheckpoint(CheckpointOptions{}, "");
  coordinator->taskFinished(job.tasks[1]);
  ASSERT_EQ(gateway.finishedTriggers.size(), 1u) << "pending checkpoint 1 asks it directly";
  EXPECT_EQ(gateway.finishedTriggers[0].first, job.tasks[1]);
  EXPECT_EQ(gateway.finishedTriggers[0].second, 1);
  ackAll(1);
  EXPECT_EQ(manual.get().id, 1);
  coordinator->allTasksFinished();
  // A finished job takes no more manual or periodic checkpoints...
  EXPECT_THROW(coordinator->triggerCheckpoint(CheckpointOptions{}, "").get(), SluiceException);
  advance(0);  // ...but the final one
  ASSERT_THAT(gateway.triggered, ElementsAre(1, 2));
  coordinator->declineCheckpoint(2, job.tasks[3], "could not write", true);
  advance(0);  // a failed final checkpoint is retried, an interval later
  ASSERT_THAT(gateway.triggered, ElementsAre(1, 2));
  advance(99999);
  ASSERT_THAT(gateway.triggered, ElementsAre(1, 2));
  advance(1);
  ASSERT_THAT(gateway.triggered, ElementsAre(1, 2, 3));
  ackAll(3);
  EXPECT_THAT(gateway.completed, ElementsAre(1, 3, kFinalCheckpointId));
  EXPECT_TRUE(gateway.failures.empty());
}

TEST_F(CoordinatorTest, AFinalCheckpointThatKeepsFailingFailsTheJob) {
  start(periodic(100000));  // no failure tolerated
  advance(0);
  coordinator->allTasksFinished();
  advance(0);
  ASSERT_THAT(gateway.triggered, ElementsAre(1));
  coordinator->declineCheckpoint(1, job.tasks[0], "could not write", true);
  ASSERT_EQ(gateway.failures.size(), 1u);
  EXPECT_THAT(gateway.failures[0], HasSubstr("the final checkpoint failed 1 time(s)"));
  advance(0);
  EXPECT_THAT(gateway.triggered, ElementsAre(1)) << "no retry once the job fails";
}

TEST_F(CoordinatorTest, AFinalCheckpointFailingForeverAtMaximalToleranceIsRetriedOncePerInterval) {
  // state.checkpoints.dir is a regular file: every checkpoint directory
  // fails to be created, on the triggering thread, at once.
  test::TempDir dir;
  const std::string notADirectory = (dir.path() / "file").string();
  { std::ofstream(notADirectory) << "x"; }
  CheckpointCoordinatorConfig c = periodic(1000);
  c.minPause = Ms(1500);
  c.tolerableFailures = std::numeric_limits<int32_t>::max();
  c.checkpointsBase = notADirectory;
  start(c);
  EXPECT_THAT(coordinator->initializeStorage().message(),
              AllOf(HasSubstr("state.checkpoints.dir"), HasSubstr(notADirectory)));
  coordinator->allTasksFinished();
  advance(0);
  ASSERT_THAT(gateway.triggered, ElementsAre()) << "it fails before reaching the tasks";
  EXPECT_EQ(coordinator->stats().failed, 1);
  // No retry on the same stack, none at once: the next one a min pause
  // (the larger of it and the interval) later, never recursing.
  for (int i = 0; i < 50; ++i) advance(0);
  EXPECT_EQ(coordinator->stats().failed, 1);
  for (int i = 0; i < 2000; ++i) advance(1500);
  EXPECT_EQ(coordinator->stats().failed, 2001);
  EXPECT_TRUE(gateway.failures.empty()) << "2^31-1 failures are tolerated";
}

TEST_F(CoordinatorTest, IdsGoOnFromTheRestoredCheckpointSoARestartPrefersNewerOnes) {
  start(periodic(1000));
  CompletedCheckpoint restored;
  restored.id = 7;
  restored.type = CheckpointType::kSavepoint;
  restored.directory = "/savepoints/savepoint-012345-7";
  coordinator->setRestoredCheckpoint(restored);
  advance(0);
  advance(1000);
  ASSERT_THAT(gateway.triggered, ElementsAre(8));
  ackAll(8);
  std::vector<CompletedCheckpoint> candidates = coordinator->restoreCandidates();
  ASSERT_EQ(candidates.size(), 2u);
  EXPECT_EQ(candidates[0].id, 8);
  EXPECT_EQ(candidates[1].id, 7) << "the savepoint stays a fallback";
  // A damaged one is forgotten by id and directory.
  coordinator->forgetDamaged(candidates[0]);
  candidates = coordinator->restoreCandidates();
  ASSERT_EQ(candidates.size(), 1u);
  EXPECT_EQ(candidates[0].directory, restored.directory);
}

TEST_F(CoordinatorTest, WithoutCheckpointsTheFinalCommitComesAtOnce) {
  start(CheckpointCoordinatorConfig{});
  coordinator->allTasksFinished();
  EXPECT_THAT(gateway.completed, ElementsAre(kFinalCheckpointId));
  EXPECT_TRUE(gateway.triggered.empty());
}

TEST_F(CoordinatorTest, RetainsTheNewestCheckpointsAndShutdownAppliesRetention) {
  test::TempDir dir("coordinator-retention");
  CheckpointCoordinatorConfig c = periodic(10);
  c.numRetained = 2;
  c.checkpointsBase = dir.str();
  start(c);
  const fs::path jobDir = fs::path(dir.str()) / "0123456789abcdef0123456789abcdef";
  advance(0);
  for (int64_t id = 1; id <= 3; ++id) {
    advance(10);
    ASSERT_EQ(gateway.directories.back(), (jobDir / ("chk-" + std::to_string(id))).string());
    ackAll(id);
  }
  EXPECT_FALSE(fs::exists(jobDir / "chk-1")) << "subsumed";
  EXPECT_TRUE(fs::exists(jobDir / "chk-2" / kMetadataFileName));
  EXPECT_TRUE(fs::exists(jobDir / "chk-3" / kMetadataFileName));
  EXPECT_EQ(coordinator->numberOfRetained(), 2u);
  EXPECT_EQ(coordinator->stats().latestCompletedDirectory, (jobDir / "chk-3").string());
  coordinator->attemptEnded();
  coordinator->shutdown(JobStatus::kFailed);
  EXPECT_TRUE(fs::exists(jobDir / "chk-3")) << "a failed job's checkpoints stay";
  coordinator->shutdown(JobStatus::kFinished);
  EXPECT_FALSE(fs::exists(jobDir)) << "a finished job's checkpoints go";
}

// A task still writing into a checkpoint when it was aborted can leave a
// directory behind after the abort removed it (the directory's files are
// what made it again); one pending when the job ends has no metadata
// either. A job that ends with its checkpoints kept keeps only those with
// metadata, and the shared files.
TEST_F(CoordinatorTest, ShutdownRemovesTheDirectoriesOfCheckpointsThatNeverCompleted) {
  test::TempDir dir("coordinator-unfinished");
  CheckpointCoordinatorConfig c = periodic(10);
  c.checkpointsBase = dir.str();
  c.retainOnCancellation = true;
  c.tolerableFailures = 10;
  start(c);
  const fs::path jobDir = fs::path(dir.str()) / "0123456789abcdef0123456789abcdef";
  advance(0);
  advance(10);
  ackAll(1);
  ASSERT_TRUE(fs::exists(jobDir / "chk-1" / kMetadataFileName));
  advance(10);  // checkpoint 2, aborted by one task while another still writes
  coordinator->declineCheckpoint(2, job.tasks[1], "could not snapshot", true);
  EXPECT_FALSE(fs::exists(jobDir / "chk-2")) << "the abort removes its directory";
  fs::create_directories(jobDir / "chk-2" / "1-0");
  std::ofstream(jobDir / "chk-2" / "1-0" / "MANIFEST-000005") << "late";
  advance(10);  // checkpoint 3, pending when the job ends
  ASSERT_TRUE(fs::exists(jobDir / "chk-3"));
  fs::create_directories(jobDir / "shared");
  std::ofstream(jobDir / "shared" / "000012.sst") << "shared";
  coordinator->attemptEnded();
  coordinator->shutdown(JobStatus::kCanceled);
  EXPECT_TRUE(fs::exists(jobDir / "chk-1" / kMetadataFileName)) << "retained on cancellation";
  EXPECT_FALSE(fs::exists(jobDir / "chk-2")) << "left by a late writer";
  EXPECT_FALSE(fs::exists(jobDir / "chk-3")) << "pending when the job ended";
  EXPECT_TRUE(fs::exists(jobDir / "shared" / "000012.sst"));
}

TEST_F(CoordinatorTest, TheEndOfAnAttemptAbortsWhatIsPendingWithoutCountingIt) {
  start(periodic(10));
  advance(0);
  advance(10);
  coordinator->attemptEnded();
  EXPECT_THAT(gateway.aborted, ElementsAre(1));
  EXPECT_EQ(coordinator->stats().failed, 0);
  EXPECT_EQ(coordinator->numberOfPending(), 0u);
  ackAll(1);  // late: ignored
  EXPECT_TRUE(gateway.completed.empty());
  // The next attempt checkpoints again, an interval after it started.
  coordinator->attemptStarted(&gateway, job.tasks);
  advance(0);
  advance(10);
  EXPECT_THAT(gateway.triggered, ElementsAre(1, 2));
}

}  // namespace
}  // namespace checkpoint_coordinator_test
}  // namespace sluice::checkpoint
