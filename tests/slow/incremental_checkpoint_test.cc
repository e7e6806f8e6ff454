// Incremental RocksDB checkpoints (state.backend.incremental): SST files are
// stored once in <job>/shared and referenced by every checkpoint that holds
// them; a file is deleted only when no retained checkpoint refers to it, and
// what an aborted checkpoint stored goes with it. Restores (at the same and
// at another parallelism) give exactly the state of the checkpoint, also
// from the tiered backend into rocksdb and back (the same native files).
#include <set>

#include "checkpoint/checkpoint_metadata.h"
#include "harness/checkpoint_jobs.h"

namespace sluice::checkpointing {
namespace incremental_checkpoint_test {
namespace {

std::set<std::string> listFiles(const fs::path& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.insert(e.path().string());
  return names;
}

// The shared files each retained checkpoint of `jobDir` refers to, by
// checkpoint directory.
std::map<std::string, std::vector<std::string>> referencedFiles(const fs::path& jobDir) {
  std::map<std::string, std::vector<std::string>> refs;
  for (const auto& e : fs::directory_iterator(jobDir)) {
    if (e.path().filename().string().rfind("chk-", 0) != 0) continue;
    const checkpoint::CompletedCheckpoint cp =
        checkpoint::loadCheckpoint(e.path().string()).valueOrThrow();
    auto& files = refs[e.path().string()];
    checkpoint::forEachSharedFile(
        cp, [&](const NativeKeyedSnapshot::SstFile& f) { files.push_back(f.location); });
  }
  return refs;
}

// Enough records that the source never runs dry before the test stops it.
constexpr int64_t kCount = 1'000'000;

// The tiered backend gets a budget small enough that it evicts all the time.
Configuration incrementalConfig(const std::string& backend = "rocksdb") {
  Configuration config;
  config.setString("state.backend.type", backend);
  config.setString("state.backend.incremental", "true");
  config.setString("state.backend.tiered.memory", "64 kb");
  return config;
}

// Runs the running-sum job with incremental checkpoints taken by the test
// (a gated source lets `kChunk` more records per split through before each
// one) until `checkpoints` completed, recording every shared file after each;
// cancels it, retaining the last `retained` checkpoints. A snapshot fault in
// the 4th checkpoint aborts that one after other tasks stored their files.
struct IncrementalRun {
  std::string jobDir;
  std::set<std::string> sharedSeen;  // every shared file that existed at some point
  std::vector<Row> rows;
  int64_t failedCheckpoints = 0;
};

constexpr int64_t kChunk = 500;

IncrementalRun runIncremental(const TempDir& dir, int parallelism, int retained, int checkpoints,
                              int64_t count, const std::string& backend = "rocksdb") {
  StreamExecutionEnvironment env(incrementalConfig(backend));
  env.setParallelism(parallelism);
  env.enableCheckpointing(std::chrono::hours(1));  // the test triggers every checkpoint
  env.getCheckpointConfig()
      .setCheckpointStorage(dir.str())
      .setNumRetainedCheckpoints(retained)
      .setTolerableCheckpointFailureNumber(3)
      .setExternalizedCheckpointRetention(ExternalizedCheckpointRetention::kRetainOnCancellation);
  env.setRestartStrategy(RestartStrategies::noRestart());
  auto plan = std::make_shared<FaultPlan>(std::vector<Fault>{{1, 0, FaultKind::kSnapshot, 4}});
  auto gate = std::make_shared<SourceGate>();
  auto out = buildGatedRunningSum(env, count, gate, plan);
  JobClient client = env.executeAsync("incremental");
  IncrementalRun run;
  run.jobDir = (dir.path() / client.getJobId()).string();
  const fs::path shared = fs::path(run.jobDir) / "shared";
  for (int64_t step = 1; client.getCheckpointStats().completed < checkpoints; ++step) {
    if (step * kChunk >= count / parallelism) {
      ADD_FAILURE() << "the source ran dry after " << client.getCheckpointStats().completed
                    << " checkpoints";
      break;
    }
    const int64_t perSplit = step * kChunk;
    checkpointAtGate(client, *gate, perSplit, recordsThroughGate(count, parallelism, perSplit));
    for (const auto& f : listFiles(shared)) run.sharedSeen.insert(f);
    if (client.getJobStatus() != JobStatus::kRunning) {
      ADD_FAILURE() << "the job stopped: " << jobStatusName(client.getJobStatus());
      break;
    }
  }
  client.cancel();
  EXPECT_THROW(client.getJobExecutionResult(), JobExecutionException);
  EXPECT_EQ(plan->fired(), 1u);
  run.failedCheckpoints = client.getCheckpointStats().failed;
  run.rows = out->take();
  return run;
}

TEST(IncrementalCheckpointTest, CheckpointsReferTheSameStoredFilesInsteadOfCopyingThem) {
  TempDir dir("incremental-all");
  // Every checkpoint retained: each stored file must be referenced, and
  // later checkpoints must refer to files earlier ones stored.
  IncrementalRun run = runIncremental(dir, 2, 1000, 12, kCount);
  EXPECT_GE(run.failedCheckpoints, 1);
  const auto refs = referencedFiles(run.jobDir);
  ASSERT_GE(refs.size(), 12u);
  std::map<std::string, int> timesReferenced;
  for (const auto& [cp, files] : refs) {
    EXPECT_FALSE(files.empty()) << cp;
    for (const auto& f : files) ++timesReferenced[f];
  }
  std::set<std::string> referenced;
  int sharedByMoreThanOne = 0;
  for (const auto& [f, n] : timesReferenced) {
    referenced.insert(f);
    if (n > 1) ++sharedByMoreThanOne;
  }
  EXPECT_GT(sharedByMoreThanOne, 0) << "no checkpoint reused a file an earlier one stored";
  // Exactly the referenced files exist: nothing the aborted checkpoint
  // stored is left behind, nothing referenced is missing.
  EXPECT_EQ(listFiles(fs::path(run.jobDir) / "shared"), referenced);
}

TEST(IncrementalCheckpointTest, UnreferencedFilesAreDeletedAndOnlyThose) {
  TempDir dir("incremental-retain");
  IncrementalRun run = runIncremental(dir, 2, 2, 25, kCount);
  const auto refs = referencedFiles(run.jobDir);
  ASSERT_EQ(refs.size(), 2u);
  std::set<std::string> referenced;
  for (const auto& [cp, files] : refs) referenced.insert(files.begin(), files.end());
  const std::set<std::string> remaining = listFiles(fs::path(run.jobDir) / "shared");
  EXPECT_EQ(remaining, referenced);
  // Compactions replaced files over 25 checkpoints; those no longer
  // referenced went.
  std::set<std::string> deleted;
  for (const auto& f : run.sharedSeen) {
    if (remaining.count(f) == 0) deleted.insert(f);
  }
  EXPECT_FALSE(deleted.empty()) << "no shared file was ever deleted";
}

struct RescaleCase {
  int from;
  int to;
  // The backend before and after: rocksdb and tiered share the native format.
  const char* fromBackend = "rocksdb";
  const char* toBackend = "rocksdb";
};

class IncrementalRestoreTest : public ::testing::TestWithParam<RescaleCase> {};

// A retained incremental checkpoint restores the exact state, at the same
// and at other parallelisms (one old snapshot per new subtask, a part of
// one, or several merged).
TEST_P(IncrementalRestoreTest, ARetainedCheckpointRestoresTheExactState) {
  const RescaleCase c = GetParam();
  TempDir dir("incremental-restore");
  const int64_t count = 40000;
  IncrementalRun first = runIncremental(dir, c.from, 1, 8, count, c.fromBackend);
  const auto refs = referencedFiles(first.jobDir);
  ASSERT_EQ(refs.size(), 1u);
  const std::string checkpoint = refs.begin()->first;

  Configuration config = incrementalConfig(c.toBackend);
  config.setString("execution.savepoint.path", checkpoint);
  StreamExecutionEnvironment env(config);
  env.setParallelism(c.to);
  env.setRestartStrategy(RestartStrategies::noRestart());
  auto out = buildRunningSum(env, count, 0, std::make_shared<FaultPlan>(std::vector<Fault>{}));
  env.execute("incremental resumed");
  // The first run's collect sink is at-least-once: rows after the
  // checkpoint come again. Deduplicate by (key, count); the last row of
  // every key must carry its exact total.
  std::map<std::pair<int64_t, int64_t>, Row> unique;
  for (const Row& r : first.rows) unique[{std::get<0>(r), std::get<1>(r)}] = r;
  for (const Row& r : out->take()) unique[{std::get<0>(r), std::get<1>(r)}] = r;
  std::vector<Row> all;
  for (const auto& [k, r] : unique) all.push_back(r);
  expectExactlyOnce(all, count);
}

INSTANTIATE_TEST_SUITE_P(Parallelisms, IncrementalRestoreTest,
                         ::testing::Values(RescaleCase{2, 2}, RescaleCase{2, 3}, RescaleCase{3, 1},
                                           RescaleCase{2, 3, "tiered", "rocksdb"},
                                           RescaleCase{3, 2, "rocksdb", "tiered"}),
                         [](const auto& info) {
                           const std::string backends =
                               std::string(info.param.fromBackend) == "rocksdb" &&
                                       std::string(info.param.toBackend) == "rocksdb"
                                   ? ""
                                   : std::string("_") + info.param.fromBackend + "_to_" +
                                         info.param.toBackend;
                           return "p" + std::to_string(info.param.from) + "_to_p" +
                                  std::to_string(info.param.to) + backends;
                         });

TEST(IncrementalCheckpointTest, TheHashmapBackendCannotRestoreNativeStateAndSaysSo) {
  TempDir dir("incremental-hashmap");
  IncrementalRun first = runIncremental(dir, 1, 1, 5, kCount);
  const auto refs = referencedFiles(first.jobDir);
  ASSERT_EQ(refs.size(), 1u);
  Configuration config;
  config.setString("state.backend.type", "hashmap");
  config.setString("execution.savepoint.path", refs.begin()->first);
  StreamExecutionEnvironment env(config);
  env.setRestartStrategy(RestartStrategies::noRestart());
  buildRunningSum(env, 100, 0, std::make_shared<FaultPlan>(std::vector<Fault>{}));
  try {
    env.execute("hashmap from incremental");
    FAIL() << "the restore succeeded";
  } catch (const JobExecutionException& e) {
    EXPECT_NE(std::string(e.what()).find("only the rocksdb and tiered state backends can read"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace incremental_checkpoint_test
}  // namespace sluice::checkpointing
