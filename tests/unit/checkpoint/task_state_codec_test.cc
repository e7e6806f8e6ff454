// The acknowledgement a TaskManager sends the JobManager: a task's state as
// bytes. Round trips of every keyed-state kind, and damaged bytes (every
// truncation, random bit flips) give an error, never a crash or a huge
// allocation.
#include "checkpoint/task_state_codec.h"

#include <random>
#include <string>

#include <gtest/gtest.h>

namespace task_state_codec_test {
namespace {

using sluice::NativeKeyedSnapshot;
using sluice::checkpoint::decodeTaskStateSnapshot;
using sluice::checkpoint::encodeTaskStateSnapshot;
using sluice::checkpoint::OperatorSubtaskState;
using sluice::checkpoint::TaskStateSnapshot;

TaskStateSnapshot sample() {
  TaskStateSnapshot s;
  OperatorSubtaskState file;
  file.operatorState = std::string("op\0state", 8);
  file.timers = "timers";
  file.keyed.path = "/shared/checkpoints/job/chk-3/7-0.keyed";
  s.operators[7] = file;
  OperatorSubtaskState bytes;
  bytes.keyed.bytes = std::make_shared<const std::string>("inline keyed bytes");
  s.operators[9] = bytes;
  OperatorSubtaskState native;
  auto n = std::make_shared<NativeKeyedSnapshot>();
  n->directory = "/shared/checkpoints/job/chk-3/rocksdb-11-1";
  n->startKeyGroup = 64;
  n->endKeyGroup = 127;
  n->hasChecksums = true;
  n->sstFiles.push_back({"000012.sst", "uid-12", 4096, "/shared/checkpoints/job/shared/a.sst", 42});
  n->privateFiles = {"MANIFEST-000005", "CURRENT"};
  n->privateFileDigests = {{100, 1}, {16, 2}};
  native.keyed.native = n;
  native.keyed.path = n->directory;
  s.operators[11] = native;
  s.operators[12] = OperatorSubtaskState{};
  return s;
}

TEST(TaskStateCodecTest, RoundTripsEveryKindOfState) {
  const TaskStateSnapshot in = sample();
  auto out = decodeTaskStateSnapshot(encodeTaskStateSnapshot(in));
  ASSERT_TRUE(out.isOk()) << out.status().message();
  const TaskStateSnapshot& s = out.value();
  ASSERT_EQ(s.operators.size(), 4u);
  EXPECT_EQ(s.operators.at(7).operatorState, std::string("op\0state", 8));
  EXPECT_EQ(s.operators.at(7).timers, "timers");
  EXPECT_EQ(s.operators.at(7).keyed.path, "/shared/checkpoints/job/chk-3/7-0.keyed");
  ASSERT_TRUE(s.operators.at(9).keyed.bytes);
  EXPECT_EQ(*s.operators.at(9).keyed.bytes, "inline keyed bytes");
  const auto& n = s.operators.at(11).keyed.native;
  ASSERT_TRUE(n);
  EXPECT_EQ(n->directory, "/shared/checkpoints/job/chk-3/rocksdb-11-1");
  EXPECT_EQ(s.operators.at(11).keyed.path, n->directory);
  EXPECT_EQ(n->startKeyGroup, 64);
  EXPECT_EQ(n->endKeyGroup, 127);
  EXPECT_TRUE(n->hasChecksums);
  ASSERT_EQ(n->sstFiles.size(), 1u);
  EXPECT_EQ(n->sstFiles[0].fileName, "000012.sst");
  EXPECT_EQ(n->sstFiles[0].uniqueId, "uid-12");
  EXPECT_EQ(n->sstFiles[0].sizeBytes, 4096u);
  EXPECT_EQ(n->sstFiles[0].location, "/shared/checkpoints/job/shared/a.sst");
  EXPECT_EQ(n->sstFiles[0].checksum, 42u);
  EXPECT_EQ(n->privateFiles, (std::vector<std::string>{"MANIFEST-000005", "CURRENT"}));
  ASSERT_EQ(n->privateFileDigests.size(), 2u);
  EXPECT_EQ(n->privateFileDigests[1].sizeBytes, 16u);
  EXPECT_TRUE(s.operators.at(12).empty());
}

TEST(TaskStateCodecTest, EveryTruncationIsAnErrorNamingTheDamage) {
  const std::string bytes = encodeTaskStateSnapshot(sample());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = decodeTaskStateSnapshot(bytes.substr(0, n));
    ASSERT_FALSE(r.isOk()) << "a prefix of " << n << " bytes decoded";
    EXPECT_NE(r.status().message().find("task state snapshot of " + std::to_string(n) + " bytes"),
              std::string::npos)
        << r.status().message();
  }
  auto trailing = decodeTaskStateSnapshot(bytes + "x");
  EXPECT_FALSE(trailing.isOk());
}

TEST(TaskStateCodecTest, RandomDamageNeverCrashes) {
  const std::string bytes = encodeTaskStateSnapshot(sample());
  std::mt19937 rng(16);
  int errors = 0;
  for (int round = 0; round < 5000; ++round) {
    std::string damaged = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      damaged[rng() % damaged.size()] ^= static_cast<char>(1 << (rng() % 8));
    }
    if (!decodeTaskStateSnapshot(damaged).isOk()) ++errors;
  }
  // Most flips land in lengths, counts, tags or the magic and are caught;
  // flips inside strings decode to other strings, which _metadata's
  // checksums and the files' digests catch later.
  EXPECT_GT(errors, 1000);
  // A count that claims more entries than the bytes can hold allocates
  // nothing for them.
  std::string huge = bytes.substr(0, 8) + std::string("\xff\xff\xff\x7f", 4);
  EXPECT_FALSE(decodeTaskStateSnapshot(huge).isOk());
}

}  // namespace
}  // namespace task_state_codec_test
