// Checkpoint metadata: write, read, relocate, and what damaged or
// unwritable metadata reports.
#include "checkpoint/checkpoint_metadata.h"

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/random_id.h"
#include "harness/temp_dir.h"

namespace sluice::checkpoint {
namespace checkpoint_metadata_test {
namespace {

namespace fs = std::filesystem;
using test::TempDir;
using ::testing::HasSubstr;

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

// The checkpoint at `path`, which must load.
CompletedCheckpoint load(const std::string& path) {
  Result<CompletedCheckpoint> cp = loadCheckpoint(path);
  EXPECT_TRUE(cp.isOk()) << cp.status().toString();
  return std::move(cp).valueOrThrow();
}

void write(const CompletedCheckpoint& cp) {
  Status st = writeCheckpointMetadata(cp);
  ASSERT_TRUE(st.isOk()) << st.toString();
}

TEST(CheckpointMetadataTest, RoundTripsEveryField) {
  TempDir tmp;
  const std::string dir = (tmp.path() / "chk-42").string();
  fs::create_directories(dir);
  CompletedCheckpoint cp = sample(dir);
  write(cp);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "_metadata"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "_metadata.inprogress"));

  for (const std::string& path : {dir, dir + "/_metadata"}) {
    CompletedCheckpoint back = load(path);
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
  write(sample(dir));
  const std::string moved = (tmp.path() / "elsewhere").string();
  fs::rename(dir, moved);
  CompletedCheckpoint back = load(moved);
  EXPECT_EQ(back.find("sum")->subtasks[0].keyed.path, moved + "/3-0.keyed");
}

TEST(CheckpointMetadataTest, KeyedFilesOutsideTheDirectoryAreRefused) {
  TempDir tmp;
  const std::string dir = (tmp.path() / "chk-1").string();
  fs::create_directories(dir);
  CompletedCheckpoint cp = sample(dir);
  cp.operators[1].subtasks[0].keyed.path = (tmp.path() / "other.keyed").string();
  Status st = writeCheckpointMetadata(cp);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("does not lie in the checkpoint directory"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "_metadata"));
}

TEST(CheckpointMetadataTest, MissingAndCorruptMetadataNameThePath) {
  TempDir tmp;
  const std::string missing = (tmp.path() / "nothing").string();
  Result<CompletedCheckpoint> none = loadCheckpoint(missing);
  ASSERT_FALSE(none.isOk());
  EXPECT_THAT(none.status().message(), HasSubstr(missing));
  EXPECT_EQ(none.status().code(), StatusCode::kIoError);

  const std::string dir = (tmp.path() / "chk-1").string();
  fs::create_directories(dir);
  write(sample(dir));
  // Truncate: the end marker goes missing.
  const auto file = fs::path(dir) / "_metadata";
  fs::resize_file(file, fs::file_size(file) - 4);
  Result<CompletedCheckpoint> truncated = loadCheckpoint(dir);
  ASSERT_FALSE(truncated.isOk());
  EXPECT_EQ(truncated.status().code(), StatusCode::kCorruption);
  EXPECT_THAT(truncated.status().message(), HasSubstr("corrupt checkpoint metadata"));
  EXPECT_THAT(truncated.status().message(), HasSubstr(file.string()));
  std::ofstream(file, std::ios::trunc) << "not a checkpoint at all";
  Result<CompletedCheckpoint> garbage = loadCheckpoint(dir);
  ASSERT_FALSE(garbage.isOk());
  EXPECT_THAT(garbage.status().message(), HasSubstr("bad magic"));
}

TEST(CheckpointMetadataTest, UnwritableDirectoryFailsWithTheCause) {
  TempDir tmp;
  std::ofstream(tmp.path() / "file") << "x";
  CompletedCheckpoint cp = sample((tmp.path() / "file" / "chk-1").string());
  cp.operators.resize(1);
  Status st = writeCheckpointMetadata(cp);
  ASSERT_FALSE(st.isOk());
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_THAT(st.message(), HasSubstr("Not a directory"));
}

TEST(CheckpointMetadataTest, JobIdsAreThirtyTwoHexDigitsAndDiffer) {
  const std::string a = randomHexId(), b = randomHexId();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace checkpoint_metadata_test
}  // namespace sluice::checkpoint
