// Checkpoint metadata (write, read, relocate, corruption) and the restart
// strategies.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include <sluice/core/config_options.h>

#include "runtime/checkpoint.h"

namespace sluice::runtime {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("sluice-cpmeta-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

CompletedCheckpoint sample(const std::string& dir) {
  CompletedCheckpoint cp;
  cp.id = 42;
  cp.type = CheckpointType::kSavepoint;
  cp.timestamp = 1'700'000'000'123;
  cp.jobId = "0123456789abcdef0123456789abcdef";
  cp.directory = dir;
  OperatorCheckpointState src;
  src.uid = "source";
  src.name = "Source: Generator";
  src.parallelism = 2;
  src.maxParallelism = 128;
  src.hasCoordinatorState = true;
  src.coordinatorState = std::string("\x01\x00\x02", 3);
  src.subtasks.resize(2);
  src.subtasks[0].operatorState = "splits-0";
  src.subtasks[1].operatorState = "splits-1";
  OperatorCheckpointState keyed;
  keyed.uid = "sum";
  keyed.name = "Keyed Reduce";
  keyed.parallelism = 1;
  keyed.maxParallelism = 64;
  keyed.subtasks.resize(1);
  keyed.subtasks[0].timers = "timers";
  keyed.subtasks[0].keyed.path = dir + "/3-0.keyed";
  OperatorCheckpointState inMemory;
  inMemory.uid = "mem";
  inMemory.name = "Window";
  inMemory.subtasks.resize(1);
  inMemory.subtasks[0].keyed.bytes = std::make_shared<const std::string>("keyed bytes");
  cp.operators = {src, keyed, inMemory};
  return cp;
}

TEST(CheckpointMetadataTest, RoundTripsEveryField) {
  TempDir tmp;
  const std::string dir = (tmp.path() / "chk-42").string();
  fs::create_directories(dir);
  CompletedCheckpoint cp = sample(dir);
  writeCheckpointMetadata(cp);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "_metadata"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "_metadata.inprogress"));

  for (const std::string& path : {dir, dir + "/_metadata"}) {
    CompletedCheckpoint back = loadCheckpoint(path);
    EXPECT_EQ(back.id, 42);
    EXPECT_EQ(back.type, CheckpointType::kSavepoint);
    EXPECT_EQ(back.timestamp, cp.timestamp);
    EXPECT_EQ(back.jobId, cp.jobId);
    EXPECT_EQ(back.directory, dir);
    ASSERT_EQ(back.operators.size(), 3u);
    const OperatorCheckpointState* src = back.find("source");
    ASSERT_NE(src, nullptr);
    EXPECT_EQ(src->name, "Source: Generator");
    EXPECT_EQ(src->parallelism, 2);
    EXPECT_TRUE(src->hasCoordinatorState);
    EXPECT_EQ(src->coordinatorState, std::string("\x01\x00\x02", 3));
    ASSERT_EQ(src->subtasks.size(), 2u);
    EXPECT_EQ(src->subtasks[1].operatorState, "splits-1");
    EXPECT_FALSE(src->subtasks[1].hasKeyed());
    const OperatorCheckpointState* keyed = back.find("sum");
    ASSERT_NE(keyed, nullptr);
    EXPECT_EQ(keyed->maxParallelism, 64);
    EXPECT_EQ(keyed->subtasks[0].timers, "timers");
    EXPECT_EQ(keyed->subtasks[0].keyed.path, dir + "/3-0.keyed");
    const OperatorCheckpointState* mem = back.find("mem");
    ASSERT_NE(mem, nullptr);
    ASSERT_NE(mem->subtasks[0].keyed.bytes, nullptr);
    EXPECT_EQ(*mem->subtasks[0].keyed.bytes, "keyed bytes");
    EXPECT_EQ(back.find("nope"), nullptr);
  }
}

TEST(CheckpointMetadataTest, AMovedCheckpointReferencesItsFilesAtTheNewPlace) {
  TempDir tmp;
  const std::string dir = (tmp.path() / "chk-42").string();
  fs::create_directories(dir);
  writeCheckpointMetadata(sample(dir));
  const std::string moved = (tmp.path() / "elsewhere").string();
  fs::rename(dir, moved);
  CompletedCheckpoint back = loadCheckpoint(moved);
  EXPECT_EQ(back.find("sum")->subtasks[0].keyed.path, moved + "/3-0.keyed");
}

TEST(CheckpointMetadataTest, KeyedFilesOutsideTheDirectoryAreRefused) {
  TempDir tmp;
  const std::string dir = (tmp.path() / "chk-1").string();
  fs::create_directories(dir);
  CompletedCheckpoint cp = sample(dir);
  cp.operators[1].subtasks[0].keyed.path = (tmp.path() / "other.keyed").string();
  try {
    writeCheckpointMetadata(cp);
    FAIL() << "expected an error";
  } catch (const SluiceException& e) {
    EXPECT_NE(std::string(e.what()).find("does not lie in the checkpoint directory"),
              std::string::npos)
        << e.what();
  }
}

TEST(CheckpointMetadataTest, MissingAndCorruptMetadataNameThePath) {
  TempDir tmp;
  const std::string missing = (tmp.path() / "nothing").string();
  try {
    loadCheckpoint(missing);
    FAIL();
  } catch (const SluiceException& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  const std::string dir = (tmp.path() / "chk-1").string();
  fs::create_directories(dir);
  writeCheckpointMetadata(sample(dir));
  // Truncate: the end marker goes missing.
  const auto file = fs::path(dir) / "_metadata";
  fs::resize_file(file, fs::file_size(file) - 4);
  try {
    loadCheckpoint(dir);
    FAIL();
  } catch (const SluiceException& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt checkpoint metadata"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
  }
  std::ofstream(file, std::ios::trunc) << "not a checkpoint at all";
  EXPECT_THROW(loadCheckpoint(dir), SluiceException);
}

TEST(CheckpointMetadataTest, UnwritableDirectoryFailsWithTheCause) {
  TempDir tmp;
  std::ofstream(tmp.path() / "file") << "x";
  CompletedCheckpoint cp = sample((tmp.path() / "file" / "chk-1").string());
  cp.operators.resize(1);
  try {
    writeCheckpointMetadata(cp);
    FAIL();
  } catch (const SluiceException& e) {
    EXPECT_NE(std::string(e.what()).find("Not a directory"), std::string::npos) << e.what();
  }
}

TEST(CheckpointMetadataTest, JobIdsAreThirtyTwoHexDigitsAndDiffer) {
  const std::string a = generateJobId(), b = generateJobId();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
}

// ---------------------------------------------------------------------------

using std::chrono::milliseconds;
using TP = std::chrono::steady_clock::time_point;

TEST(RestartStrategyTest, DefaultIsNoneWithoutCheckpointingAndEndlessFixedDelayWith) {
  Configuration config;
  auto none = createRestartStrategy(config, false);
  EXPECT_FALSE(none->onFailure(TP{}).has_value());
  auto fixed = createRestartStrategy(config, true);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(fixed->onFailure(TP{}), milliseconds(1000));
  EXPECT_NE(fixed->describe().find("2147483647"), std::string::npos);
}

TEST(RestartStrategyTest, FixedDelayAllowsExactlyItsAttempts) {
  Configuration config;
  config.setString("restart-strategy.type", "fixed-delay");
  config.setString("restart-strategy.fixed-delay.attempts", "3");
  config.setString("restart-strategy.fixed-delay.delay", "25 ms");
  auto s = createRestartStrategy(config, false);
  EXPECT_EQ(s->onFailure(TP{}), milliseconds(25));
  EXPECT_EQ(s->onFailure(TP{}), milliseconds(25));
  EXPECT_EQ(s->onFailure(TP{}), milliseconds(25));
  EXPECT_FALSE(s->onFailure(TP{}).has_value());
}

TEST(RestartStrategyTest, FailureRateCountsFailuresInTheInterval) {
  Configuration config;
  config.setString("restart-strategy.type", "failure-rate");
  config.setString("restart-strategy.failure-rate.max-failures-per-interval", "2");
  config.setString("restart-strategy.failure-rate.failure-rate-interval", "10 s");
  config.setString("restart-strategy.failure-rate.delay", "0 ms");
  auto s = createRestartStrategy(config, true);
  TP t0{};
  EXPECT_TRUE(s->onFailure(t0).has_value());
  EXPECT_TRUE(s->onFailure(t0 + std::chrono::seconds(1)).has_value());
  // A third failure within 10 s of the first two: give up.
  EXPECT_FALSE(s->onFailure(t0 + std::chrono::seconds(2)).has_value());
  auto s2 = createRestartStrategy(config, true);
  EXPECT_TRUE(s2->onFailure(t0).has_value());
  EXPECT_TRUE(s2->onFailure(t0 + std::chrono::seconds(5)).has_value());
  // The first one left the window.
  EXPECT_TRUE(s2->onFailure(t0 + std::chrono::seconds(12)).has_value());
}

TEST(RestartStrategyTest, ExponentialDelayGrowsCapsAndResets) {
  Configuration config;
  config.setString("restart-strategy.type", "exponential-delay");
  config.setString("restart-strategy.exponential-delay.initial-backoff", "100 ms");
  config.setString("restart-strategy.exponential-delay.max-backoff", "1 s");
  config.setString("restart-strategy.exponential-delay.backoff-multiplier", "2.0");
  config.setString("restart-strategy.exponential-delay.reset-backoff-threshold", "1 min");
  config.setString("restart-strategy.exponential-delay.jitter-factor", "0");
  auto s = createRestartStrategy(config, false);
  TP t{};
  std::vector<int64_t> waits;
  for (int i = 0; i < 6; ++i) waits.push_back(s->onFailure(t += std::chrono::seconds(1))->count());
  EXPECT_EQ(waits, (std::vector<int64_t>{100, 200, 400, 800, 1000, 1000}));
  // Quiet for longer than the threshold: back to the initial backoff.
  EXPECT_EQ(s->onFailure(t + std::chrono::minutes(2)), milliseconds(100));
}

TEST(RestartStrategyTest, JitterStaysWithinItsFactor) {
  Configuration config;
  config.setString("restart-strategy.type", "exponential-delay");
  config.setString("restart-strategy.exponential-delay.initial-backoff", "1000 ms");
  config.setString("restart-strategy.exponential-delay.backoff-multiplier", "1.0");
  config.setString("restart-strategy.exponential-delay.jitter-factor", "0.1");
  auto s = createRestartStrategy(config, false);
  for (int i = 0; i < 50; ++i) {
    auto w = s->onFailure(TP{} + std::chrono::seconds(i))->count();
    EXPECT_GE(w, 900);
    EXPECT_LE(w, 1100);
  }
}

TEST(RestartStrategyTest, BadSettingsNameTheKey) {
  Configuration config;
  config.setString("restart-strategy.type", "sometimes");
  try {
    createRestartStrategy(config, false);
    FAIL();
  } catch (const SluiceException& e) {
    EXPECT_NE(std::string(e.what()).find("restart-strategy.type"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("sometimes"), std::string::npos);
  }
  Configuration c2;
  c2.setString("restart-strategy.type", "fixed-delay");
  c2.setString("restart-strategy.fixed-delay.attempts", "-1");
  try {
    createRestartStrategy(c2, false);
    FAIL();
  } catch (const SluiceException& e) {
    EXPECT_NE(std::string(e.what()).find("restart-strategy.fixed-delay.attempts"),
              std::string::npos);
  }
  Configuration c3;
  c3.setString("restart-strategy.type", "exponential-delay");
  c3.setString("restart-strategy.exponential-delay.backoff-multiplier", "0.5");
  EXPECT_THROW(createRestartStrategy(c3, false), SluiceException);
}

}  // namespace
}  // namespace sluice::runtime
