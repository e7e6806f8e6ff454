// Checkpoints in running jobs: recovery after a failure, retention,
// unwritable directories, savepoints with rescaling and backend changes,
// unclaimed state.
#include <algorithm>
#include <set>

#include "harness/checkpoint_jobs.h"

namespace sluice::checkpointing {
namespace checkpoint_job_test {
namespace {

using std::chrono::milliseconds;
struct RecoveryCase {
  std::string backend;
  int parallelism;
  bool withDirectory;
};

class CheckpointRecoveryTest : public ::testing::TestWithParam<RecoveryCase> {};

TEST_P(CheckpointRecoveryTest, AFailedJobRestoresTheLatestCheckpointAndLosesNothing) {
  const RecoveryCase& c = GetParam();
  TempDir dir("recovery");
  StreamExecutionEnvironment env;
  env.setParallelism(c.parallelism).setStateBackend(c.backend);
  env.enableCheckpointing(std::chrono::hours(1));  // the test triggers them
  if (c.withDirectory) env.getCheckpointConfig().setCheckpointStorage(dir.str());
  env.setRestartStrategy(RestartStrategies::fixedDelayRestart(5, milliseconds(0)));
  const int64_t count = 6000;
  // The keyed operator's last subtask fails at its 1500th record of the
  // first attempt (about a quarter into the input), after the checkpoint
  // the test takes at the first sixth.
  auto plan = std::make_shared<FaultPlan>(
      std::vector<Fault>{{1, c.parallelism - 1, FaultKind::kRecord, 1500 / c.parallelism}});
  auto gate = std::make_shared<SourceGate>();
  auto out = buildGatedRunningSum(env, count, gate, plan);
  JobClient client = env.executeAsync("recovery");
  const int64_t perSplit = count / c.parallelism;
  for (int step = 1; step < 6; ++step) {
    const int64_t through = perSplit * step / 6;
    checkpointAtGate(client, *gate, through, recordsThroughGate(count, c.parallelism, through));
  }
  gate->openFully();
  JobExecutionResult result = client.getJobExecutionResult();
  EXPECT_EQ(plan->fired(), 1u);
  auto stats = client.getCheckpointStats();
  EXPECT_EQ(stats.restarts, 1);
  EXPECT_GE(stats.completed, 1);
  // The collect sink is at-least-once: the rows after the restored
  // checkpoint come twice. Deduplicate, then require every row.
  // Intermediate sums depend on how the source subtasks interleave, which a
  // replay changes, so rows are deduplicated by (key, count).
  std::vector<Row> rows = out->take();
  std::map<std::pair<int64_t, int64_t>, Row> unique;
  for (const Row& r : rows) unique[{std::get<0>(r), std::get<1>(r)}] = r;
  EXPECT_GT(rows.size(), unique.size()) << "the restart replayed nothing";
  std::vector<Row> deduplicated;
  for (const auto& [k, r] : unique) deduplicated.push_back(r);
  expectExactlyOnce(deduplicated, count);
  // A finished job's checkpoints are removed.
  if (c.withDirectory) {
    EXPECT_FALSE(fs::exists(dir.path() / client.getJobId()));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Backends, CheckpointRecoveryTest,
    ::testing::Values(RecoveryCase{"hashmap", 1, true}, RecoveryCase{"hashmap", 4, true},
                      RecoveryCase{"rocksdb", 1, true}, RecoveryCase{"rocksdb", 4, true},
                      RecoveryCase{"hashmap", 2, false}, RecoveryCase{"rocksdb", 2, false},
                      RecoveryCase{"tiered", 2, true}),
    [](const auto& info) {
      return info.param.backend + "_p" + std::to_string(info.param.parallelism) +
             (info.param.withDirectory ? "_files" : "_memory");
    });

TEST(CheckpointRecoveryErrors, WithoutRestartsTheJobFailsWithTheOriginalCause) {
  StreamExecutionEnvironment env;
  env.enableCheckpointing(milliseconds(20));
  env.setRestartStrategy(RestartStrategies::noRestart());
  auto plan = std::make_shared<FaultPlan>(std::vector<Fault>{{0, 0, FaultKind::kRecord, 100}});
  buildRunningSum(env, 1000, 0, plan);
  try {
    env.execute("no restart");
    FAIL() << "expected a failure";
  } catch (const JobExecutionException& e) {
    EXPECT_NE(std::string(e.what()).find("injected fault 1"), std::string::npos) << e.what();
  }
}

TEST(CheckpointRecoveryErrors, FixedDelayGivesUpAfterItsAttempts) {
  StreamExecutionEnvironment env;
  env.enableCheckpointing(milliseconds(20));
  env.setRestartStrategy(RestartStrategies::fixedDelayRestart(2, milliseconds(1)));
  auto plan = std::make_shared<FaultPlan>(std::vector<Fault>{{0, 0, FaultKind::kRecord, 10},
                                                             {0, 0, FaultKind::kRecord, 10},
                                                             {0, 0, FaultKind::kRecord, 10}});
  buildRunningSum(env, 1000, 0, plan);
  JobClient client = env.executeAsync("gives up");
  try {
    client.getJobExecutionResult();
    FAIL() << "expected a failure";
  } catch (const JobExecutionException& e) {
    EXPECT_NE(std::string(e.what()).find("injected fault 3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(plan->fired(), 3u);
  EXPECT_EQ(client.getCheckpointStats().restarts, 2);
}

TEST(CheckpointRecoveryErrors, WriteAsTextAppendsAfterARestart) {
  TempDir dir("text");
  for (int parallelism : {1, 2}) {
    const std::string path = (dir.path() / ("out-p" + std::to_string(parallelism))).string();
    StreamExecutionEnvironment env;
    env.setParallelism(parallelism);
    env.enableCheckpointing(milliseconds(20));
    env.setRestartStrategy(RestartStrategies::fixedDelayRestart(3, milliseconds(0)));
    auto plan = std::make_shared<FaultPlan>(std::vector<Fault>{{0, 0, FaultKind::kRecord, 1000}});
    env.fromGenerator([](int64_t i) { return i; }, 3000, 20000)
        .map(FailingMap<int64_t>(plan, 0))
        .writeAsText(path);
    env.execute("text restart");
    EXPECT_EQ(plan->fired(), 1u);
    // At-least-once: every number is there; the replayed ones twice.
    std::vector<std::string> lines =
        parallelism == 1 ? std::vector<std::string>() : readFinishedLines(path);
    if (parallelism == 1) {
      std::ifstream in(path);
      for (std::string l; std::getline(in, l);) lines.push_back(l);
    }
    std::map<std::string, int> seen = countLines(lines);
    for (int64_t i = 0; i < 3000; ++i) ASSERT_GE(seen[std::to_string(i)], 1) << i;
  }
}

// ---------------------------------------------------------------------------
// Retention

std::set<std::string> checkpointDirs(const fs::path& jobDir) {
  std::set<std::string> names;
  if (!fs::exists(jobDir)) return names;
  for (const auto& e : fs::directory_iterator(jobDir)) names.insert(e.path().filename().string());
  return names;
}

TEST(CheckpointRetentionTest, NumRetainedAndRetainOnCancellationKeepExactlyTheNewest) {
  TempDir dir("retain");
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  env.enableCheckpointing(milliseconds(15));
  env.getCheckpointConfig()
      .setCheckpointStorage(dir.str())
      .setNumRetainedCheckpoints(3)
      .setExternalizedCheckpointRetention(ExternalizedCheckpointRetention::kRetainOnCancellation);
  auto plan = std::make_shared<FaultPlan>(std::vector<Fault>{});
  buildRunningSum(env, kUnboundedCount, 5000, plan);
  JobClient client = env.executeAsync("retain");
  ASSERT_TRUE(waitUntil([&] { return client.getCheckpointStats().completed >= 6; }));
  client.cancel();
  EXPECT_THROW(client.getJobExecutionResult(), JobExecutionException);
  const auto stats = client.getCheckpointStats();
  const int64_t last = stats.latestCompletedId;
  std::set<std::string> want;
  for (int64_t id = last - 2; id <= last; ++id) want.insert("chk-" + std::to_string(id));
  EXPECT_EQ(checkpointDirs(dir.path() / client.getJobId()), want);
  for (const auto& name : want) {
    EXPECT_TRUE(fs::exists(dir.path() / client.getJobId() / name / "_metadata")) << name;
  }
  EXPECT_EQ(stats.latestCompletedPath,
            (dir.path() / client.getJobId() / ("chk-" + std::to_string(last))).string());
}

TEST(CheckpointRetentionTest, DeleteOnCancellationRemovesTheJobsCheckpoints) {
  TempDir dir("delete");
  StreamExecutionEnvironment env;
  env.enableCheckpointing(milliseconds(15));
  env.getCheckpointConfig().setCheckpointStorage(dir.str());
  buildRunningSum(env, kUnboundedCount, 5000, std::make_shared<FaultPlan>(std::vector<Fault>{}));
  JobClient client = env.executeAsync("delete");
  ASSERT_TRUE(waitUntil([&] { return client.getCheckpointStats().completed >= 2; }));
  ASSERT_TRUE(fs::exists(dir.path() / client.getJobId()));
  client.cancel();
  EXPECT_THROW(client.getJobExecutionResult(), JobExecutionException);
  EXPECT_FALSE(fs::exists(dir.path() / client.getJobId()));
}

TEST(CheckpointRetentionTest, AFailedJobKeepsItsLatestCheckpoint) {
  TempDir dir("failed");
  StreamExecutionEnvironment env;
  env.enableCheckpointing(milliseconds(15));
  env.getCheckpointConfig().setCheckpointStorage(dir.str());
  env.setRestartStrategy(RestartStrategies::noRestart());
  auto plan = std::make_shared<FaultPlan>(std::vector<Fault>{{1, 0, FaultKind::kNotify, 3}});
  buildRunningSum(env, kUnboundedCount, 5000, plan);
  JobClient client = env.executeAsync("failed");
  EXPECT_THROW(client.getJobExecutionResult(), JobExecutionException);
  auto names = checkpointDirs(dir.path() / client.getJobId());
  ASSERT_EQ(names.size(), 1u);
  // The checkpoint whose notice failed had completed: it is the one kept.
  EXPECT_EQ(*names.begin(), "chk-" + std::to_string(client.getCheckpointStats().latestCompletedId));
}

// ---------------------------------------------------------------------------
// Failed checkpoints

TEST(CheckpointFailureTest, UnwritableDirectoryFailsTheJobAfterTheTolerableLimit) {
  TempDir dir("unwritable");
  StreamExecutionEnvironment env;
  env.enableCheckpointing(milliseconds(15));
  env.getCheckpointConfig().setCheckpointStorage(dir.str()).setTolerableCheckpointFailureNumber(2);
  env.setRestartStrategy(RestartStrategies::noRestart());
  auto gate = std::make_shared<SourceGate>();
  auto out = buildGatedRunningSum(env, kUnboundedCount, gate,
                                  std::make_shared<FaultPlan>(std::vector<Fault>{}));
  JobClient client = env.executeAsync("unwritable");
  // The storage goes bad under the running job: its directory becomes a
  // file. (An unusable directory at submission fails the submission.)
  const fs::path jobDir = dir.path() / client.getJobId();
  fs::remove_all(jobDir);
  std::ofstream(jobDir) << "not a directory";
  gate->openFully();
  try {
    client.getJobExecutionResult();
    FAIL() << "expected a failure";
  } catch (const JobExecutionException& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("Exceeded checkpoint tolerable failure threshold"), std::string::npos)
        << what;
    EXPECT_NE(what.find("3 consecutive"), std::string::npos) << what;
    EXPECT_NE(what.find("Not a directory"), std::string::npos) << what;
    EXPECT_NE(what.find(jobDir.string()), std::string::npos) << what;
  }
  EXPECT_EQ(client.getCheckpointStats().failed, 3);
  EXPECT_EQ(client.getCheckpointStats().completed, 0);
  // The job ran on while its checkpoints failed.
  EXPECT_GT(out->size(), 0u);
}

TEST(CheckpointFailureTest, ACheckpointThatTakesTooLongTimesOutAndCounts) {
  StreamExecutionEnvironment env;
  env.enableCheckpointing(milliseconds(10));
  env.getCheckpointConfig()
      .setCheckpointTimeout(milliseconds(60))
      .setTolerableCheckpointFailureNumber(1);
  env.setRestartStrategy(RestartStrategies::noRestart());
  // Every record takes 150 ms downstream, so no barrier gets through in time.
  env.fromGenerator([](int64_t i) { return i; }, kUnboundedCount, 20)
      .rebalance()
      .map([](int64_t v) {
        std::this_thread::sleep_for(milliseconds(150));
        return v;
      })
      .sinkTo(CollectSink<int64_t>(std::make_shared<internal::CollectBuffer<int64_t>>()));
  JobClient client = env.executeAsync("timeout");
  try {
    client.getJobExecutionResult();
    FAIL() << "expected a failure";
  } catch (const JobExecutionException& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("2 consecutive"), std::string::npos) << what;
    EXPECT_NE(what.find("did not complete within 60 ms"), std::string::npos) << what;
  }
  EXPECT_GE(client.getCheckpointStats().failed, 2);
}

TEST(CheckpointTriggerTest, MinPauseSpacesCheckpointsOut) {
  TempDir dir("minpause");
  StreamExecutionEnvironment env;
  env.enableCheckpointing(milliseconds(10));
  env.getCheckpointConfig().setCheckpointStorage(dir.str()).setMinPauseBetweenCheckpoints(
      milliseconds(100));
  buildRunningSum(env, kUnboundedCount, 5000, std::make_shared<FaultPlan>(std::vector<Fault>{}));
  const auto start = std::chrono::steady_clock::now();
  JobClient client = env.executeAsync("min pause");
  ASSERT_TRUE(waitUntil([&] { return client.getCheckpointStats().completed >= 3; }));
  const auto stats = client.getCheckpointStats();
  const auto elapsed =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start).count();
  client.cancel();
  EXPECT_THROW(client.getJobExecutionResult(), JobExecutionException);
  // With a 10 ms interval alone there would be about elapsed / 10.
  EXPECT_LE(stats.completed, elapsed / 100 + 1) << "after " << elapsed << " ms";
}

// ---------------------------------------------------------------------------
// Savepoints

TEST(SavepointTest, StopResumeAcrossParallelismsAndBackendsEqualsAnUninterruptedRun) {
  TempDir dir("savepoints");
  const int64_t count = 24000;
  std::vector<Row> all;
  std::string savepoint;
  const std::vector<std::pair<int, std::string>> runs = {
      {1, "hashmap"}, {2, "rocksdb"}, {3, "tiered"}, {1, "rocksdb"}};
  for (size_t r = 0; r < runs.size(); ++r) {
    // The savepoint goes through the configuration, as with -D.
    Configuration config;
    if (!savepoint.empty()) config.setString("execution.savepoint.path", savepoint);
    StreamExecutionEnvironment env(config);
    env.setParallelism(runs[r].first).setStateBackend(runs[r].second);
    auto out =
        buildRunningSum(env, count, 40000, std::make_shared<FaultPlan>(std::vector<Fault>{}));
    JobClient client = env.executeAsync("savepoint run " + std::to_string(r));
    if (r + 1 < runs.size()) {
      const size_t before = all.size();
      ASSERT_TRUE(waitUntil([&] { return out->size() >= 1000; }));
      savepoint = client.stopWithSavepoint(false, dir.str());
      EXPECT_EQ(client.getJobExecutionResult().getJobName(), "savepoint run " + std::to_string(r));
      EXPECT_TRUE(fs::exists(fs::path(savepoint) / "_metadata")) << savepoint;
      auto rows = out->take();
      all.insert(all.end(), rows.begin(), rows.end());
      ASSERT_LT(all.size(), static_cast<size_t>(count)) << "run " << r << " was not stopped early";
      ASSERT_GT(all.size(), before);
    } else {
      client.getJobExecutionResult();
      auto rows = out->take();
      all.insert(all.end(), rows.begin(), rows.end());
    }
  }
  expectExactlyOnce(all, count);
}

TEST(SavepointTest, ASavepointIsRelocatable) {
  TempDir dir("relocate");
  const int64_t count = 20000;
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  auto out = buildRunningSum(env, count, 40000, std::make_shared<FaultPlan>(std::vector<Fault>{}));
  JobClient client = env.executeAsync("relocate 1");
  ASSERT_TRUE(waitUntil([&] { return out->size() >= 1000; }));
  const std::string savepoint = client.stopWithSavepoint(false, dir.str());
  client.getJobExecutionResult();
  const fs::path moved = dir.path() / "moved-savepoint";
  fs::rename(savepoint, moved);
  std::vector<Row> all = out->take();

  Configuration config;
  config.setString("execution.savepoint.path", (moved / "_metadata").string());
  StreamExecutionEnvironment resumed(config);
  resumed.setParallelism(2).setStateBackend("rocksdb");
  auto out2 = buildRunningSum(resumed, count, 0, std::make_shared<FaultPlan>(std::vector<Fault>{}));
  resumed.execute("relocate 2");
  auto rows = out2->take();
  all.insert(all.end(), rows.begin(), rows.end());
  expectExactlyOnce(all, count);
}

TEST(SavepointTest, TriggerSavepointLetsTheJobRunOn) {
  TempDir dir("trigger");
  StreamExecutionEnvironment env;
  auto out = buildRunningSum(env, 20000, 40000, std::make_shared<FaultPlan>(std::vector<Fault>{}));
  JobClient client = env.executeAsync("trigger");
  ASSERT_TRUE(waitUntil([&] { return out->size() >= 500; }));
  const std::string savepoint = client.triggerSavepoint(dir.str());
  EXPECT_TRUE(fs::exists(fs::path(savepoint) / "_metadata"));
  client.getJobExecutionResult();
  expectExactlyOnce(out->take(), 20000);
  // Savepoints outlive the job.
  EXPECT_TRUE(fs::exists(fs::path(savepoint) / "_metadata"));
}

TEST(SavepointTest, UnclaimedStateFailsTheRestoreUnlessIgnored) {
  TempDir dir("unclaimed");
  StreamExecutionEnvironment env;
  auto out = buildRunningSum(env, 20000, 40000, std::make_shared<FaultPlan>(std::vector<Fault>{}));
  JobClient client = env.executeAsync("unclaimed 1");
  ASSERT_TRUE(waitUntil([&] { return out->size() >= 500; }));
  const std::string savepoint = client.stopWithSavepoint(false, dir.str());
  client.getJobExecutionResult();

  // The new job has no operator with uid "sum".
  auto build = [&](StreamExecutionEnvironment& e) {
    e.fromGenerator(input, 100)
        .uid("source")
        .sinkTo(CollectSink<Row>(std::make_shared<internal::CollectBuffer<Row>>()));
  };
  Configuration config;
  config.setString("execution.savepoint.path", savepoint);
  StreamExecutionEnvironment strict(config);
  build(strict);
  try {
    strict.execute("unclaimed 2");
    FAIL() << "expected the restore to fail";
  } catch (const SluiceException& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("uid 'sum'"), std::string::npos) << what;
    EXPECT_NE(what.find("execution.savepoint.ignore-unclaimed-state"), std::string::npos) << what;
  }
  config.setString("execution.savepoint.ignore-unclaimed-state", "true");
  StreamExecutionEnvironment lenient(config);
  build(lenient);
  EXPECT_NO_THROW(lenient.execute("unclaimed 3"));
}

TEST(SavepointTest, AFailedStopWithSavepointLetsTheJobRunOn) {
  TempDir dir("failed-stop");
  std::ofstream(dir.path() / "a-file") << "not a directory";
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  auto out = buildRunningSum(env, 20000, 40000, std::make_shared<FaultPlan>(std::vector<Fault>{}));
  JobClient client = env.executeAsync("failed stop");
  ASSERT_TRUE(waitUntil([&] { return out->size() >= 500; }));
  try {
    client.stopWithSavepoint(false, (dir.path() / "a-file").string());
    FAIL() << "expected the savepoint to fail";
  } catch (const SluiceException& e) {
    EXPECT_NE(std::string(e.what()).find("Not a directory"), std::string::npos) << e.what();
  }
  client.getJobExecutionResult();
  expectExactlyOnce(out->take(), 20000);
}

TEST(SavepointTest, SavepointWithoutADirectoryNamesTheOption) {
  StreamExecutionEnvironment env;
  auto out = buildRunningSum(env, kUnboundedCount, 5000,
                             std::make_shared<FaultPlan>(std::vector<Fault>{}));
  JobClient client = env.executeAsync("no dir");
  try {
    client.triggerSavepoint();
    FAIL();
  } catch (const SluiceException& e) {
    EXPECT_NE(std::string(e.what()).find("state.savepoints.dir"), std::string::npos);
  }
  client.cancel();
  EXPECT_THROW(client.getJobExecutionResult(), JobExecutionException);
}

// `inTheSource`: the strategy given to fromSource, which then emits the
// drain's maximum watermark itself; else an assignTimestampsAndWatermarks
// operator after the source passes it on.
void drainFiresEveryWindow(bool inTheSource) {
  using P = std::pair<int64_t, int64_t>;
  TempDir dir("drain");
  StreamExecutionEnvironment env;
  auto buffer = std::make_shared<internal::CollectBuffer<P>>();
  auto seen = std::make_shared<std::atomic<int64_t>>(0);
  const auto strategy = WatermarkStrategy<P>::forMonotonousTimestamps().withTimestampAssigner(
      [](const P&, int64_t) { return int64_t{0}; });
  GeneratorSource source([](int64_t i) { return P{i % 3, 1}; }, kUnboundedCount, 5000);
  auto events = inTheSource ? env.fromSource(std::move(source), strategy, "Generator Source")
                            : env.fromSource(std::move(source), "Generator Source")
                                  .assignTimestampsAndWatermarks(strategy);
  events
      .map([seen](const P& p) {
        seen->fetch_add(1);
        return p;
      })
      .keyBy([](const auto& p) { return p.first; })
      .window(TumblingEventTimeWindows::of(milliseconds(1000)))
      .sum(1)
      .sinkTo(CollectSink<P>(buffer));
  JobClient client = env.executeAsync("drain");
  ASSERT_TRUE(waitUntil([&] { return seen->load() >= 500; }));
  EXPECT_EQ(buffer->size(), 0u);  // all in one window that has not fired
  client.stopWithSavepoint(true, dir.str());
  client.getJobExecutionResult();
  auto rows = buffer->take();
  ASSERT_EQ(rows.size(), 3u);
  int64_t total = 0;
  for (auto& [k, n] : rows) total += n;
  EXPECT_GT(total, 0);
}

TEST(SavepointTest, DrainFiresEveryWindowBeforeTheSavepoint) { drainFiresEveryWindow(false); }

TEST(SavepointTest, DrainFiresEveryWindowOfASourceThatMakesWatermarks) {
  drainFiresEveryWindow(true);
}

}  // namespace
}  // namespace checkpoint_job_test
}  // namespace sluice::checkpointing
