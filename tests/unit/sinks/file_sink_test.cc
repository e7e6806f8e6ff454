// FileSink driven through the sink operator with the operator harness, on a
// temporary directory: visibility only after the checkpoint completed,
// crash and restore (exactly once, in-flight files removed, older snapshots),
// rescaling, rolling by size and processing time (manual clock), date-time
// buckets, the three encoders, end of input, and the errors users see.
//
// Expected outputs are computed here from the elements written and the rules
// in <sluice/file_sink.h>: a reference model of the rolling policy, an
// independent date formatter (std::chrono calendar), and reference JSON
// and CSV quoting.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sluice/datastream.h>
#include <sluice/environment.h>
#include <sluice/file_sink.h>
#include <sluice/internal/operators.h>
#include <sluice/testing.h>

#include "harness/operator_runner.h"
#include "harness/temp_dir.h"

namespace sluice {

struct Reading {
  std::string sensor;
  int64_t count = 0;
  double value = 0;
  std::vector<int64_t> tags;
  std::optional<std::string> note;
  bool ok = false;
};
SLUICE_STRUCT(Reading, sensor, count, value, tags, note, ok)

namespace file_sink_test {
namespace {

namespace fs = std::filesystem;
using testing::CapturedSnapshot;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::OperatorHarness;
using testing::redistribute;

// --- helpers ------------------------------------------------------------------------------

using test::TempDir;

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A finished part file: "<prefix>-<uuid>-<subtask>-<counter><suffix>".
struct Part {
  std::string bucket;  // relative directory, "" for the base path
  std::string name;
  std::string uuid;
  int subtask = 0;
  int64_t counter = 0;
  std::string content;
};

// Every regular file below `base`, split into finished parts and hidden
// files (relative paths). Fails the test on a file that is neither.
struct Listing {
  std::vector<Part> parts;  // sorted by (bucket, uuid, subtask, counter)
  std::vector<std::string> hidden;
};

bool isHex(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}
bool isDigits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

// Parses "<prefix>-<uuid>-<subtask>-<counter><suffix>" with a version-4 uuid.
bool parsePartName(std::string_view name, const std::string& prefix, const std::string& suffix,
                   Part& p) {
  if (!name.starts_with(prefix + "-") || !name.ends_with(suffix)) return false;
  name.remove_prefix(prefix.size() + 1);
  name.remove_suffix(suffix.size());
  if (name.size() < 37 || name[36] != '-') return false;
  const std::string_view uuid = name.substr(0, 36);
  const std::string_view groups[] = {uuid.substr(0, 8), uuid.substr(9, 4), uuid.substr(14, 4),
                                     uuid.substr(19, 4), uuid.substr(24, 12)};
  for (const auto& g : groups) {
    if (!isHex(g)) return false;
  }
  if (uuid[8] != '-' || uuid[13] != '-' || uuid[18] != '-' || uuid[23] != '-') return false;
  if (uuid[14] != '4' || std::string_view("89ab").find(uuid[19]) == std::string_view::npos) {
    return false;
  }
  const std::string_view rest = name.substr(37);
  const size_t dash = rest.find('-');
  if (dash == std::string_view::npos) return false;
  const std::string_view subtask = rest.substr(0, dash), counter = rest.substr(dash + 1);
  if (!isDigits(subtask) || !isDigits(counter)) return false;
  p.uuid = std::string(uuid);
  p.subtask = std::stoi(std::string(subtask));
  p.counter = std::stoll(std::string(counter));
  return true;
}

Listing list(const std::string& base, const std::string& prefix = "part",
             const std::string& suffix = "") {
  Listing out;
  if (!fs::exists(base)) return out;
  for (const auto& e : fs::recursive_directory_iterator(base)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    const std::string rel = fs::relative(e.path(), base).string();
    if (name.front() == '.') {
      out.hidden.push_back(rel);
      continue;
    }
    Part p;
    if (!parsePartName(name, prefix, suffix, p)) {
      ADD_FAILURE() << "unexpected file " << rel;
      continue;
    }
    p.bucket = fs::relative(e.path().parent_path(), base).string();
    if (p.bucket == ".") p.bucket.clear();
    p.name = name;
    p.content = readFile(e.path());
    out.parts.push_back(std::move(p));
  }
  std::sort(out.parts.begin(), out.parts.end(), [](const Part& a, const Part& b) {
    return std::tie(a.bucket, a.uuid, a.subtask, a.counter) <
           std::tie(b.bucket, b.uuid, b.subtask, b.counter);
  });
  std::sort(out.hidden.begin(), out.hidden.end());
  return out;
}

// The lines of every finished part, sorted.
std::vector<std::string> visibleLines(const std::string& base) {
  std::vector<std::string> lines;
  for (const Part& p : list(base).parts) {
    std::istringstream in(p.content);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::vector<std::string> sortedLines(std::vector<std::string> lines) {
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::vector<std::string> numbered(const std::string& stem, int from, int to) {  // [from, to)
  std::vector<std::string> out;
  for (int i = from; i < to; ++i) out.push_back(stem + std::to_string(i));
  return out;
}

template <class T>
std::unique_ptr<StreamOperatorBase> sinkOperator(const FileSink<T>& sink) {
  return std::make_unique<internal::SinkOperator<T>>(std::make_shared<const FileSink<T>>(sink));
}

// Strings into the base path, rolled only at checkpoints.
FileSink<std::string> lineSink(const std::string& base) {
  return FileSink<std::string>::forRowFormat(base, SimpleStringEncoder<std::string>())
      .withBucketAssigner(BasePathBucketAssigner<std::string>())
      .withRollingPolicy(OnCheckpointRollingPolicy::build())
      .build();
}

void writeAll(OperatorHarness<std::string>& h, const std::vector<std::string>& values) {
  for (const std::string& v : values) h.processElement(0, v);
}

// The subtask indices of the hidden in-progress files below `base` (this
// sink's prefix "part"), sorted; fails the test on another hidden name.
std::vector<int> hiddenSubtasks(const std::string& base) {
  std::vector<int> out;
  for (const std::string& rel : list(base).hidden) {
    std::string name = fs::path(rel).filename().string();
    Part p;
    if (!name.starts_with(".") || !name.ends_with(".inprogress") ||
        !parsePartName(std::string_view(name).substr(1), "part", ".inprogress", p)) {
      ADD_FAILURE() << "unexpected hidden file " << rel;
      continue;
    }
    out.push_back(p.subtask);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Changes the process's working directory for one scope.
class WorkingDirectory {
 public:
  explicit WorkingDirectory(const fs::path& dir) : saved_(fs::current_path()) {
    fs::current_path(dir);
  }
  ~WorkingDirectory() {
    std::error_code ec;
    fs::current_path(saved_, ec);
  }
  WorkingDirectory(const WorkingDirectory&) = delete;
  WorkingDirectory& operator=(const WorkingDirectory&) = delete;

 private:
  fs::path saved_;
};

// --- exactly once ---------------------------------------------------------------------------

TEST(FileSinkTest, NothingIsVisibleBeforeTheCheckpointCompletes) {
  TempDir dir;
  OperatorHarness<std::string> h(sinkOperator(lineSink(dir.str())));
  h.open();
  writeAll(h, numbered("a", 0, 5));
  Listing before = list(dir.str());
  EXPECT_THAT(before.parts, IsEmpty());
  ASSERT_EQ(before.hidden.size(), 1u);
  EXPECT_THAT(before.hidden[0], ::testing::MatchesRegex(R"(\.part-.*-0-0\.inprogress)"));

  h.snapshot(1);
  writeAll(h, numbered("b", 0, 3));
  Listing pending = list(dir.str());
  EXPECT_THAT(pending.parts, IsEmpty()) << "pre-committed (pending) files stay hidden";
  EXPECT_EQ(pending.hidden.size(), 2u) << "pending part of 1 and in-progress part after it";

  h.notifyCheckpointComplete(1);
  Listing after = list(dir.str());
  ASSERT_EQ(after.parts.size(), 1u);
  EXPECT_EQ(after.parts[0].subtask, 0);
  EXPECT_EQ(after.parts[0].counter, 0);
  std::string expected;
  for (const std::string& s : numbered("a", 0, 5)) expected += s + "\n";
  EXPECT_EQ(after.parts[0].content, expected);
  EXPECT_EQ(after.hidden.size(), 1u) << "the b elements are still in progress";

  h.snapshot(2);
  h.notifyCheckpointComplete(2);
  std::vector<std::string> all = numbered("a", 0, 5);
  for (const std::string& s : numbered("b", 0, 3)) all.push_back(s);
  EXPECT_EQ(visibleLines(dir.str()), sortedLines(all));
  EXPECT_THAT(list(dir.str()).hidden, IsEmpty());
}

TEST(FileSinkTest, CrashAfterSnapshotThenRestoreCommitsOnceAndRemovesInFlightFiles) {
  TempDir dir;
  // Small parts, so that the in-flight transaction has several files.
  auto sink = FileSink<std::string>::forRowFormat(dir.str(), SimpleStringEncoder<std::string>())
                  .withBucketAssigner(BasePathBucketAssigner<std::string>())
                  .withRollingPolicy(DefaultRollingPolicy::builder().withMaxPartSize(10).build())
                  .build();
  const std::vector<std::string> beforeBarrier = numbered("x", 0, 6);
  const std::vector<std::string> afterBarrier = numbered("y", 0, 6);
  CapturedSnapshot snap;
  {
    OperatorHarness<std::string> h(sinkOperator(sink));
    h.open();
    writeAll(h, beforeBarrier);
    snap = h.snapshot(4);
    writeAll(h, afterBarrier);
    ASSERT_GE(list(dir.str()).hidden.size(), 3u);
    h.crash();  // dies: no notify, no close
  }
  EXPECT_THAT(list(dir.str()).parts, IsEmpty());

  OperatorHarness<std::string> restored(sinkOperator(sink));
  auto restores = redistribute({snap}, 1);
  restored.open(&restores[0]);
  EXPECT_EQ(visibleLines(dir.str()), sortedLines(beforeBarrier))
      << "checkpoint 4 committed, nothing after it";
  EXPECT_THAT(list(dir.str()).hidden, IsEmpty()) << "the in-flight transaction's files are gone";

  // The source replays from checkpoint 4.
  writeAll(restored, afterBarrier);
  restored.snapshot(5);
  restored.notifyCheckpointComplete(5);
  std::vector<std::string> all = beforeBarrier;
  all.insert(all.end(), afterBarrier.begin(), afterBarrier.end());
  EXPECT_EQ(visibleLines(dir.str()), sortedLines(all)) << "every element exactly once";

  // A second restore from the same checkpoint commits nothing twice.
  restored.crash();
  OperatorHarness<std::string> again(sinkOperator(sink));
  again.open(&restores[0]);
  again.close();
  EXPECT_EQ(visibleLines(dir.str()), sortedLines(all));
}

TEST(FileSinkTest, CloseAfterAFailureRemovesTheOpenTransactionsFiles) {
  TempDir dir;
  OperatorHarness<std::string> h(sinkOperator(lineSink(dir.str())));
  h.open();
  writeAll(h, {"p"});
  h.snapshot(1);  // pending
  writeAll(h, {"q"});
  h.close();
  Listing l = list(dir.str());
  EXPECT_THAT(l.parts, IsEmpty());
  EXPECT_EQ(l.hidden.size(), 1u) << "only the pending part of checkpoint 1 remains";
}

TEST(FileSinkTest, RestoreFromAnOlderSnapshotNeverCommitsALaterOne) {
  TempDir dir;
  auto sink = lineSink(dir.str());
  CapturedSnapshot first;
  {
    OperatorHarness<std::string> h(sinkOperator(sink));
    h.open();
    writeAll(h, {"one", "two"});
    first = h.snapshot(1);
    writeAll(h, {"three"});
    h.snapshot(2);  // never completes
    writeAll(h, {"four"});
    h.crash();
  }
  OperatorHarness<std::string> restored(sinkOperator(sink));
  auto restores = redistribute({first}, 1);
  restored.open(&restores[0]);
  restored.snapshot(3);
  restored.notifyCheckpointComplete(3);
  EXPECT_THAT(visibleLines(dir.str()), ElementsAre("one", "two"));
  EXPECT_THAT(list(dir.str()).hidden, IsEmpty()) << "pending of 2 and in-flight removed";
}

TEST(FileSinkTest, CommitIsIdempotent) {
  TempDir dir;
  auto sink = lineSink(dir.str());
  CapturedSnapshot snap;
  {
    OperatorHarness<std::string> h(sinkOperator(sink));
    h.open();
    writeAll(h, {"once"});
    snap = h.snapshot(1);
    h.notifyCheckpointComplete(1);
    h.notifyCheckpointComplete(1);  // again: nothing pending any more
    h.crash();
  }
  ASSERT_EQ(list(dir.str()).parts.size(), 1u);
  // The restore commits the same transaction again: visible, source gone.
  OperatorHarness<std::string> restored(sinkOperator(sink));
  auto restores = redistribute({snap}, 1);
  restored.open(&restores[0]);
  restored.close();
  Listing l = list(dir.str());
  ASSERT_EQ(l.parts.size(), 1u);
  EXPECT_EQ(l.parts[0].content, "once\n");
}

TEST(FileSinkTest, CommitOfAPendingFileDeletedBehindTheSinksBackFailsLoudly) {
  TempDir dir;
  auto sink = lineSink(dir.str());
  OperatorHarness<std::string> h(sinkOperator(sink));
  h.open();
  writeAll(h, {"lost"});
  h.snapshot(1);
  Listing l = list(dir.str());
  ASSERT_EQ(l.hidden.size(), 1u);
  fs::remove(dir / l.hidden[0]);
  try {
    h.notifyCheckpointComplete(1);
    FAIL() << "expected SluiceException";
  } catch (const SluiceException& e) {
    EXPECT_THAT(e.what(), HasSubstr("'" + (dir / l.hidden[0]) + "'")) << "the full path";
    EXPECT_THAT(e.what(), HasSubstr("neither exists"));
  }
}

// Subtask i of `oldParallelism` writes "s<i>-a<k>" before barrier 1, "s<i>-b<k>"
// before barrier 2 (completed, notification lost) and "s<i>-c<k>" after it;
// all crash; `newParallelism` subtasks restore from checkpoint 2.
void rescale(int oldParallelism, int newParallelism) {
  TempDir dir;
  auto sink = lineSink(dir.str());
  std::vector<std::string> expected;
  std::vector<CapturedSnapshot> snaps;
  {
    std::vector<std::unique_ptr<OperatorHarness<std::string>>> hs;
    for (int i = 0; i < oldParallelism; ++i) {
      hs.push_back(
          std::make_unique<OperatorHarness<std::string>>(sinkOperator(sink), i, oldParallelism));
      hs[i]->open();
    }
    auto phase = [&](const std::string& stem, bool counts) {
      for (int i = 0; i < oldParallelism; ++i) {
        auto values = numbered("s" + std::to_string(i) + "-" + stem, 0, 3 + i);
        writeAll(*hs[i], values);
        if (counts) expected.insert(expected.end(), values.begin(), values.end());
      }
    };
    phase("a", true);
    for (auto& h : hs) h->snapshot(1);
    for (auto& h : hs) h->notifyCheckpointComplete(1);
    phase("b", true);
    for (auto& h : hs) snaps.push_back(h->snapshot(2));
    phase("c", false);
    for (auto& h : hs) h->crash();
  }
  auto restores = redistribute(snaps, newParallelism);
  for (int i = 0; i < newParallelism; ++i) {
    OperatorHarness<std::string> h(sinkOperator(sink), i, newParallelism);
    h.open(&restores[i]);
    h.close();
  }
  EXPECT_EQ(visibleLines(dir.str()), sortedLines(expected));
  EXPECT_THAT(list(dir.str()).hidden, IsEmpty());
}

TEST(FileSinkTest, RescaleTwoToOneCommitsEveryPendingTransactionOnce) { rescale(2, 1); }
TEST(FileSinkTest, RescaleOneToTwoCommitsEveryPendingTransactionOnce) { rescale(1, 2); }
TEST(FileSinkTest, RescaleThreeToTwo) { rescale(3, 2); }

// One subtask leaves checkpoints 1, 2 and 3 pending (no notification
// arrives); three subtasks restore from 3 and split the pending
// transactions, so subtasks commit files named with another subtask's index.
// Each subtask's clean-up at the start must leave those files alone.
TEST(FileSinkTest, RescaleSplitsPendingTransactionsAndNoSubtaskDeletesAnothersFiles) {
  TempDir dir;
  auto sink = lineSink(dir.str());
  std::vector<std::string> expected;
  CapturedSnapshot snap;
  {
    OperatorHarness<std::string> h(sinkOperator(sink));
    h.open();
    for (int cp = 1; cp <= 3; ++cp) {
      const auto values = numbered("c" + std::to_string(cp) + "-", 0, 3);
      writeAll(h, values);
      expected.insert(expected.end(), values.begin(), values.end());
      snap = h.snapshot(cp);
    }
    writeAll(h, {"replayed"});
    h.crash();
  }
  ASSERT_EQ(list(dir.str()).hidden.size(), 4u);
  auto restores = redistribute({snap}, 3);
  std::vector<std::unique_ptr<OperatorHarness<std::string>>> hs;
  for (int i = 0; i < 3; ++i) {
    hs.push_back(std::make_unique<OperatorHarness<std::string>>(sinkOperator(sink), i, 3));
    hs.back()->open(&restores[i]);
  }
  EXPECT_EQ(visibleLines(dir.str()), sortedLines(expected));
  EXPECT_THAT(list(dir.str()).hidden, IsEmpty());
}

// --- abandoned in-progress files --------------------------------------------------------------

// Every restart attempt fails before its first checkpoint completes (the
// checkpoint it took never completes). Each restore deletes what the earlier
// attempts left; the output is exactly once.
TEST(FileSinkCleanupTest, RestartsThatFailBeforeTheirFirstCheckpointLeaveNoHiddenFiles) {
  TempDir dir;
  auto sink = lineSink(dir.str());
  const std::vector<std::string> committed = numbered("a", 0, 3);
  CapturedSnapshot snap;
  {
    OperatorHarness<std::string> h(sinkOperator(sink));
    h.open();
    writeAll(h, committed);
    snap = h.snapshot(1);
    writeAll(h, {"replayed"});
    h.crash();
  }
  auto restores = redistribute({snap}, 1);
  for (int attempt = 0; attempt < 5; ++attempt) {
    OperatorHarness<std::string> h(sinkOperator(sink));
    h.open(&restores[0]);
    EXPECT_THAT(list(dir.str()).hidden, IsEmpty())
        << "attempt " << attempt << ": what earlier attempts left is gone";
    writeAll(h, numbered("r" + std::to_string(attempt) + "-", 0, 2));
    h.snapshot(2 + attempt);  // never completes
    writeAll(h, {"more"});
    EXPECT_EQ(list(dir.str()).hidden.size(), 2u) << "a pending and an in-progress file";
    h.crash();
  }
  OperatorHarness<std::string> h(sinkOperator(sink));
  h.open(&restores[0]);
  EXPECT_THAT(list(dir.str()).hidden, IsEmpty());
  writeAll(h, {"b"});
  h.snapshot(10);
  h.notifyCheckpointComplete(10);
  std::vector<std::string> all = committed;
  all.push_back("b");
  EXPECT_EQ(visibleLines(dir.str()), sortedLines(all));
  EXPECT_THAT(list(dir.str()).hidden, IsEmpty());
}

// Parallelism 2: an attempt fails before its first checkpoint; in the next
// one subtask 1 starts (and writes) before subtask 0. Each deletes only the
// abandoned file with its own index, never the other's live file.
TEST(FileSinkCleanupTest, EachSubtaskDeletesOnlyTheAbandonedFilesItOwns) {
  TempDir dir;
  auto sink = lineSink(dir.str());
  std::vector<std::string> expected;
  std::vector<CapturedSnapshot> snaps;
  {
    std::vector<std::unique_ptr<OperatorHarness<std::string>>> hs;
    for (int i = 0; i < 2; ++i) {
      hs.push_back(std::make_unique<OperatorHarness<std::string>>(sinkOperator(sink), i, 2));
      hs[i]->open();
      const auto values = numbered("s" + std::to_string(i) + "-a", 0, 2);
      writeAll(*hs[i], values);
      expected.insert(expected.end(), values.begin(), values.end());
    }
    for (auto& h : hs) snaps.push_back(h->snapshot(1));
    for (auto& h : hs) h->crash();
  }
  auto restores = redistribute(snaps, 2);
  {
    std::vector<std::unique_ptr<OperatorHarness<std::string>>> hs;
    for (int i = 0; i < 2; ++i) {
      hs.push_back(std::make_unique<OperatorHarness<std::string>>(sinkOperator(sink), i, 2));
      hs[i]->open(&restores[i]);
      writeAll(*hs[i], {"lost"});
    }
    for (auto& h : hs) h->crash();
  }
  ASSERT_THAT(hiddenSubtasks(dir.str()), ElementsAre(0, 1));

  OperatorHarness<std::string> h1(sinkOperator(sink), 1, 2);
  h1.open(&restores[1]);
  EXPECT_THAT(hiddenSubtasks(dir.str()), ElementsAre(0)) << "subtask 0's file is not 1's to delete";
  writeAll(h1, numbered("s1-b", 0, 2));
  const std::vector<std::string> live = list(dir.str()).hidden;
  ASSERT_EQ(live.size(), 2u);

  OperatorHarness<std::string> h0(sinkOperator(sink), 0, 2);
  h0.open(&restores[0]);
  const Listing l = list(dir.str());
  ASSERT_EQ(l.hidden.size(), 1u);
  EXPECT_THAT(live, ::testing::Contains(l.hidden[0])) << "subtask 1's live file survives";
  EXPECT_THAT(hiddenSubtasks(dir.str()), ElementsAre(1));

  writeAll(h0, numbered("s0-b", 0, 2));
  for (OperatorHarness<std::string>* h : {&h0, &h1}) h->snapshot(2);
  for (OperatorHarness<std::string>* h : {&h0, &h1}) h->notifyCheckpointComplete(2);
  for (const std::string& s : numbered("s0-b", 0, 2)) expected.push_back(s);
  for (const std::string& s : numbered("s1-b", 0, 2)) expected.push_back(s);
  EXPECT_EQ(visibleLines(dir.str()), sortedLines(expected));
  EXPECT_THAT(list(dir.str()).hidden, IsEmpty());
}

// Three subtasks checkpoint (the notification is lost); a restart at
// parallelism 3 fails before its first checkpoint; the job then restores at
// parallelism 2, subtask 1 first. Subtask 1 deletes index 1, subtask 0
// indices 0 and 2 (2 % 2 == 0); every pending file is committed once.
TEST(FileSinkCleanupTest, ScalingDownDeletesWhatSubtasksThatNoLongerExistLeft) {
  TempDir dir;
  auto sink = lineSink(dir.str());
  std::vector<std::string> expected;
  std::vector<CapturedSnapshot> snaps;
  auto attempt = [&](const std::vector<OperatorStateRestore>* restores, bool checkpoint) {
    std::vector<std::unique_ptr<OperatorHarness<std::string>>> hs;
    for (int i = 0; i < 3; ++i) {
      hs.push_back(std::make_unique<OperatorHarness<std::string>>(sinkOperator(sink), i, 3));
      hs[i]->open(restores == nullptr ? nullptr : &(*restores)[i]);
      const auto values = numbered("s" + std::to_string(i) + (checkpoint ? "-a" : "-lost"), 0, 2);
      writeAll(*hs[i], values);
      if (checkpoint) expected.insert(expected.end(), values.begin(), values.end());
    }
    if (checkpoint) {
      for (auto& h : hs) snaps.push_back(h->snapshot(1));
    }
    for (auto& h : hs) h->crash();
  };
  attempt(nullptr, true);
  const auto atThree = redistribute(snaps, 3);
  attempt(&atThree, false);
  ASSERT_THAT(hiddenSubtasks(dir.str()), ElementsAre(0, 1, 2));

  const auto atTwo = redistribute(snaps, 2);
  OperatorHarness<std::string> h1(sinkOperator(sink), 1, 2);
  h1.open(&atTwo[1]);
  EXPECT_THAT(hiddenSubtasks(dir.str()), ElementsAre(0, 2));
  OperatorHarness<std::string> h0(sinkOperator(sink), 0, 2);
  h0.open(&atTwo[0]);
  EXPECT_THAT(list(dir.str()).hidden, IsEmpty());
  EXPECT_EQ(visibleLines(dir.str()), sortedLines(expected));
}

// A fresh start deletes abandoned in-progress files of its prefix and index
// in every bucket, and nothing else: not finished files, not other prefixes,
// not names it did not write, not other subtasks' files.
TEST(FileSinkCleanupTest, FreshStartDeletesOnlyItsOwnAbandonedInProgressFiles) {
  TempDir dir;
  const std::string uuid = "0123abcd-4567-4abc-8def-0123456789ab";
  fs::create_directories(dir / "b/c");
  const std::vector<std::string> kept = {
      "part-" + uuid + "-0-0",                  // finished
      ".other-" + uuid + "-0-0.inprogress",     // another prefix
      ".part-not-a-uuid-0-0.inprogress",        // not a name the sink writes
      ".part-" + uuid + "-0-x.inprogress",      // nor this
      ".part-" + uuid + "-0-1.pending",         // nor this
      "b/c/.part-" + uuid + "-1-0.inprogress",  // subtask 1's
  };
  const std::vector<std::string> ownedBy0 = {".part-" + uuid + "-0-7.inprogress",
                                             "b/.part-" + uuid + "-0-0.inprogress",
                                             "b/c/.part-" + uuid + "-2-0.inprogress"};
  for (const std::string& f : kept) dir.write(f, "x");
  for (const std::string& f : ownedBy0) dir.write(f, "x");

  auto sink = lineSink(dir.str());
  OperatorHarness<std::string> h(sinkOperator(sink), 0, 2);
  h.open();
  for (const std::string& f : kept) EXPECT_TRUE(fs::exists(dir / f)) << f;
  for (const std::string& f : ownedBy0) EXPECT_FALSE(fs::exists(dir / f)) << f;

  OperatorHarness<std::string> h1(sinkOperator(sink), 1, 2);
  h1.open();
  EXPECT_FALSE(fs::exists(dir / kept.back()));
}

// A relative base path is resolved when the sink is built: the restore runs
// with the process in another working directory and commits the files where
// they were written.
TEST(FileSinkTest, RelativeBasePathIsResolvedWhenBuiltSoARestoreElsewhereCommits) {
  TempDir a;
  TempDir b;
  std::optional<FileSink<std::string>> sink;
  CapturedSnapshot snap;
  {
    WorkingDirectory cwd(a.path());
    sink.emplace(lineSink("out/x/"));
    EXPECT_EQ(sink->basePath(), (fs::current_path() / "out/x").string());
    OperatorHarness<std::string> h(sinkOperator(*sink));
    h.open();
    writeAll(h, {"one", "two"});
    snap = h.snapshot(1);
    writeAll(h, {"three"});
    h.crash();
  }
  {
    WorkingDirectory cwd(b.path());
    OperatorHarness<std::string> h(sinkOperator(*sink));
    auto restores = redistribute({snap}, 1);
    h.open(&restores[0]);
    writeAll(h, {"three"});
    h.snapshot(2);
    h.notifyCheckpointComplete(2);
    h.close();
  }
  EXPECT_THAT(visibleLines(a / "out/x"), ElementsAre("one", "three", "two"));
  EXPECT_THAT(list(a / "out/x").hidden, IsEmpty());
  EXPECT_FALSE(fs::exists(b / "out"));
}

TEST(FileSinkTest, EndOfInputCommitsEverything) {
  TempDir dir;
  OperatorHarness<std::string> h(sinkOperator(lineSink(dir.str())));
  h.open();
  writeAll(h, numbered("e", 0, 4));
  h.snapshot(1);  // never notified
  writeAll(h, numbered("f", 0, 2));
  h.finish();
  h.close();
  std::vector<std::string> all = numbered("e", 0, 4);
  for (const std::string& s : numbered("f", 0, 2)) all.push_back(s);
  EXPECT_EQ(visibleLines(dir.str()), sortedLines(all));
  EXPECT_THAT(list(dir.str()).hidden, IsEmpty());
}

TEST(FileSinkTest, PartNamesFollowTheOutputFileConfigAndSubtask) {
  TempDir dir;
  auto sink = FileSink<std::string>::forRowFormat(dir.str(), SimpleStringEncoder<std::string>())
                  .withBucketAssigner(BasePathBucketAssigner<std::string>())
                  .withOutputFileConfig("orders", ".txt")
                  .build();
  OperatorHarness<std::string> h(sinkOperator(sink), 3, 4);
  h.open();
  writeAll(h, {"z"});
  h.finish();
  Listing l = list(dir.str(), "orders", ".txt");
  ASSERT_EQ(l.parts.size(), 1u);
  EXPECT_EQ(l.parts[0].subtask, 3);
  EXPECT_EQ(l.parts[0].counter, 0);
  EXPECT_EQ(l.parts[0].content, "z\n");
}

TEST(FileSinkTest, BoundedJobWithoutCheckpointsCommitsEverythingAtTheEnd) {
  TempDir dir;
  StreamExecutionEnvironment env;
  env.setParallelism(3);
  env.fromSequence(1, 1000).sinkTo(
      FileSink<int64_t>::forRowFormat(dir.str(), SimpleStringEncoder<int64_t>())
          .withBucketAssigner(BasePathBucketAssigner<int64_t>())
          .withRollingPolicy(DefaultRollingPolicy::builder().withMaxPartSize(512).build())
          .build(),
      "Files");
  env.execute("file sink job");
  std::vector<std::string> expected;
  for (int64_t i = 1; i <= 1000; ++i) expected.push_back(std::to_string(i));
  EXPECT_EQ(visibleLines(dir.str()), sortedLines(expected));
  Listing l = list(dir.str());
  EXPECT_THAT(l.hidden, IsEmpty());
  for (const Part& p : l.parts) {
    EXPECT_LT(p.subtask, 3);
    // 512 bytes, plus at most one element (up to 5 bytes) written past it.
    EXPECT_LE(p.content.size(), 512u + 5u) << p.name;
  }
}

// --- rolling --------------------------------------------------------------------------------

// The documented rolling rule as a reference model: before each element,
// the open part rolls when it holds >= maxPartSize bytes, is older than the
// rollover interval or was inactive for the inactivity interval; a tick
// (bucket check) rolls on the time rules only; a checkpoint rolls always.
struct Step {
  enum Kind { kWrite, kTick, kCheckpoint } kind = kWrite;
  int64_t time = 0;
  std::string value;  // kWrite
};
Step write(int64_t time, std::string value) { return Step{Step::kWrite, time, std::move(value)}; }
Step tick(int64_t time) { return Step{Step::kTick, time, ""}; }
Step checkpoint() { return Step{Step::kCheckpoint, 0, ""}; }

std::vector<std::string> modelParts(const std::vector<Step>& steps, int64_t maxSize,
                                    int64_t rollover, int64_t inactivity) {
  std::vector<std::string> parts;
  bool open = false;
  int64_t created = 0, last = 0;
  auto timeUp = [&](int64_t now) { return now - created >= rollover || now - last >= inactivity; };
  for (const Step& s : steps) {
    if (s.kind == Step::kCheckpoint) {
      open = false;
    } else if (s.kind == Step::kTick) {
      if (open && timeUp(s.time)) open = false;
    } else {
      if (open && (static_cast<int64_t>(parts.back().size()) >= maxSize || timeUp(s.time))) {
        open = false;
      }
      if (!open) {
        parts.emplace_back();
        open = true;
        created = s.time;
      }
      parts.back() += s.value + "\n";
      last = s.time;
    }
  }
  return parts;
}

// Runs `steps` through a sink with the given policy (bucket check every
// 100 ms; ticks move the clock and fire due timers, writes move it
// without), ends the input and returns the finished parts' contents in
// counter order.
std::vector<std::string> runParts(const std::vector<Step>& steps,
                                  const DefaultRollingPolicy& policy) {
  TempDir dir;
  auto sink = FileSink<std::string>::forRowFormat(dir.str(), SimpleStringEncoder<std::string>())
                  .withBucketAssigner(BasePathBucketAssigner<std::string>())
                  .withRollingPolicy(policy)
                  .withBucketCheckInterval(std::chrono::milliseconds(100))
                  .build();
  OperatorHarness<std::string> h(sinkOperator(sink));
  h.context().manualClock().setCurrentTime(0);
  h.open();
  int64_t checkpoint = 0;
  for (const Step& s : steps) {
    switch (s.kind) {
      case Step::kWrite:
        h.context().manualClock().setCurrentTime(s.time);
        h.processElement(0, s.value);
        break;
      case Step::kTick: h.context().setProcessingTime(s.time); break;
      case Step::kCheckpoint:
        h.snapshot(++checkpoint);
        h.notifyCheckpointComplete(checkpoint);
        break;
    }
  }
  h.finish();
  h.close();
  std::vector<std::string> out;
  for (const Part& p : list(dir.str()).parts) out.push_back(p.content);
  return out;
}

TEST(FileSinkRollingTest, RollsBySize) {
  std::vector<Step> steps;
  // Elements of 2..7 bytes with their newline, against a 10 byte limit.
  for (int i = 0; i < 30; ++i) {
    steps.push_back(write(0, std::string(1 + i % 6, static_cast<char>('a' + i % 26))));
  }
  steps.push_back(checkpoint());
  for (int i = 0; i < 5; ++i) steps.push_back(write(0, "after" + std::to_string(i)));
  const auto policy = DefaultRollingPolicy::builder().withMaxPartSize(10).build();
  const auto expected = modelParts(steps, 10, policy.getRolloverInterval().count(),
                                   policy.getInactivityInterval().count());
  ASSERT_GT(expected.size(), 5u);
  EXPECT_EQ(runParts(steps, policy), expected);
}

TEST(FileSinkRollingTest, RollsByRolloverAndInactivityOnWriteAndOnTimer) {
  const int64_t rollover = 1000, inactivity = 400;
  const std::vector<Step> steps = {
      write(0, "a"),    tick(300),        write(300, "b"),
      tick(700),  // inactive for 400: rolled by the bucket check
      write(700, "c"),  write(1000, "d"), write(1300, "e"),
      write(1600, "f"), write(1700, "g"),  // 1000 after "c" opened the part: rolled on write
      write(2150, "h"),                    // inactive for 450, seen on write (no bucket check)
      write(2200, "i"),
      tick(2300),  // neither limit reached
      write(2400, "j"), checkpoint(),     write(2450, "k"),
  };
  const auto policy = DefaultRollingPolicy::builder()
                          .withRolloverInterval(std::chrono::milliseconds(rollover))
                          .withInactivityInterval(std::chrono::milliseconds(inactivity))
                          .build();
  const auto expected = modelParts(steps, policy.getMaxPartSize(), rollover, inactivity);
  EXPECT_EQ(expected.size(), 5u);  // the scenario exercises each rule
  EXPECT_EQ(runParts(steps, policy), expected);
}

TEST(FileSinkRollingTest, DefaultsAreFlinks) {
  const DefaultRollingPolicy p;
  EXPECT_EQ(p.getMaxPartSize(), 128 * 1024 * 1024);
  EXPECT_EQ(p.getRolloverInterval(), std::chrono::seconds(60));
  EXPECT_EQ(p.getInactivityInterval(), std::chrono::seconds(60));
}

TEST(FileSinkRollingTest, InvalidPolicyOptionsThrowWhenSet) {
  EXPECT_THROW(DefaultRollingPolicy::builder().withMaxPartSize(0), SluiceException);
  EXPECT_THROW(DefaultRollingPolicy::builder().withRolloverInterval(std::chrono::milliseconds(0)),
               SluiceException);
  EXPECT_THROW(
      DefaultRollingPolicy::builder().withInactivityInterval(std::chrono::milliseconds(-5)),
      SluiceException);
}

// --- buckets --------------------------------------------------------------------------------

// "yyyy-MM-dd--HH" of `millis` + offset, from the std::chrono calendar.
std::string civilHour(int64_t millis, std::chrono::minutes offset, const char* format) {
  using namespace std::chrono;
  const sys_time<milliseconds> t{milliseconds(millis) + offset};
  const auto day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss<milliseconds> hms{t - day};
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()));
  return buf;
}

TEST(FileSinkBucketTest, DefaultAssignerIsHourlyDateTimeInUtc) {
  TempDir dir;
  auto sink = FileSink<std::string>::forRowFormat(dir.str(), SimpleStringEncoder<std::string>())
                  .withRollingPolicy(OnCheckpointRollingPolicy::build())
                  .build();
  // 2024-02-29 23:59:59.999 UTC and 1 ms later: a new hour, day and month.
  using namespace std::chrono;
  const int64_t t0 =
      duration_cast<milliseconds>(sys_days{year{2024} / 2 / 29}.time_since_epoch()).count() +
      (23 * 3600 + 59 * 60 + 59) * 1000 + 999;
  OperatorHarness<std::string> h(sinkOperator(sink));
  h.context().manualClock().setCurrentTime(t0);
  h.open();
  h.processElement(0, std::string("late"));
  h.context().manualClock().setCurrentTime(t0 + 1);
  h.processElement(0, std::string("early"));
  h.finish();
  Listing l = list(dir.str());
  ASSERT_EQ(l.parts.size(), 2u);
  const char* hourly = "%04d-%02u-%02u--%02d";
  EXPECT_EQ(l.parts[0].bucket, civilHour(t0, minutes(0), hourly));
  EXPECT_EQ(l.parts[0].content, "late\n");
  EXPECT_EQ(l.parts[1].bucket, civilHour(t0 + 1, minutes(0), hourly));
  EXPECT_EQ(l.parts[1].content, "early\n");
  EXPECT_EQ(l.parts[0].bucket, "2024-02-29--23");  // the helper itself, checked once
}

TEST(FileSinkBucketTest, PatternWithNestedDirectoriesLiteralsAndOffset) {
  TempDir dir;
  const auto offset = std::chrono::minutes(5 * 60 + 30);
  auto sink = FileSink<std::string>::forRowFormat(dir.str(), SimpleStringEncoder<std::string>())
                  .withBucketAssigner(
                      DateTimeBucketAssigner<std::string>("'y='yyyy/'m='MM/dd'T'HHmmss''", offset))
                  .build();
  OperatorHarness<std::string> h(sinkOperator(sink));
  const int64_t times[] = {1'700'000'000'000, 1'700'000'000'999 + 86'400'000LL * 40};
  h.open();
  for (int64_t t : times) {
    h.context().manualClock().setCurrentTime(t);
    h.processElement(0, std::to_string(t));
  }
  h.finish();
  Listing l = list(dir.str());
  ASSERT_EQ(l.parts.size(), 2u);
  std::set<std::string> buckets, expected;
  for (const Part& p : l.parts) buckets.insert(p.bucket);
  for (int64_t t : times) expected.insert(civilHour(t, offset, "y=%04d/m=%02u/%02uT%02d%02d%02d'"));
  EXPECT_EQ(buckets, expected);
}

TEST(FileSinkBucketTest, LambdaAssignerSeesElementAndContext) {
  TempDir dir;
  auto sink =
      FileSink<std::pair<std::string, int64_t>>::forRowFormat(
          dir.str(), SimpleStringEncoder<std::pair<std::string, int64_t>>())
          .withBucketAssigner([](const std::pair<std::string, int64_t>& e, const BucketContext& c) {
            return e.first + "/" + (c.timestamp() ? "ts" : "nots");
          })
          .build();
  OperatorHarness<std::pair<std::string, int64_t>> h(sinkOperator(sink));
  h.open();
  h.processElement(0, std::pair<std::string, int64_t>("eu", 1), 5);
  h.processElement(0, std::pair<std::string, int64_t>("us", 2));
  h.processElement(0, std::pair<std::string, int64_t>("eu", 3), 6);
  h.finish();
  Listing l = list(dir.str());
  ASSERT_EQ(l.parts.size(), 2u);
  EXPECT_EQ(l.parts[0].bucket, "eu/ts");
  EXPECT_EQ(l.parts[0].content, toString(std::pair<std::string, int64_t>("eu", 1)) + "\n" +
                                    toString(std::pair<std::string, int64_t>("eu", 3)) + "\n");
  EXPECT_EQ(l.parts[1].bucket, "us/nots");
}

TEST(FileSinkBucketTest, BucketIdsThatLeaveTheBasePathFailTheElement) {
  TempDir dir;
  for (const std::string bad : {"../escape", "/abs", "a/./b"}) {
    auto sink = FileSink<std::string>::forRowFormat(dir.str(), SimpleStringEncoder<std::string>())
                    .withBucketAssigner([](const std::string& s) { return s; })
                    .build();
    OperatorHarness<std::string> h(sinkOperator(sink));
    h.open();
    try {
      h.processElement(0, bad);
      ADD_FAILURE() << "no exception for " << bad;
    } catch (const SluiceException& e) {
      EXPECT_THAT(e.what(), HasSubstr("'" + bad + "'"));
      EXPECT_THAT(e.what(), HasSubstr("bucket id"));
    }
  }
}

TEST(FileSinkBucketTest, UnsupportedPatternsThrowWhenBuilt) {
  try {
    DateTimeBucketAssigner<int64_t>("yyyy-MM-dd QQ");
    FAIL() << "expected SluiceException";
  } catch (const SluiceException& e) {
    EXPECT_THAT(e.what(), HasSubstr("'QQ'"));
    EXPECT_THAT(e.what(), HasSubstr("position 11"));
    EXPECT_THAT(e.what(), HasSubstr("yyyy-MM-dd QQ"));
  }
  EXPECT_THROW(DateTimeBucketAssigner<int64_t>("yyyy-M-dd"), SluiceException);      // one M
  EXPECT_THROW(DateTimeBucketAssigner<int64_t>("yyyy-MM-dd 'T"), SluiceException);  // quote
  EXPECT_THROW(DateTimeBucketAssigner<int64_t>(""), SluiceException);
  EXPECT_THROW(DateTimeBucketAssigner<int64_t>("yyyy", std::chrono::hours(19)), SluiceException);
  try {
    DateTimeBucketAssigner<int64_t>("yyyy-MM-dd 'T");
  } catch (const SluiceException& e) {
    EXPECT_THAT(e.what(), HasSubstr("unterminated quote"));
  }
}

// --- encoders -------------------------------------------------------------------------------

// Reference JSON string escaping (RFC 8259), independent of the encoder's.
std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20) {
      const char* shortForm = c == '\n'   ? "\\n"
                              : c == '\t' ? "\\t"
                              : c == '\r' ? "\\r"
                              : c == '\b' ? "\\b"
                              : c == '\f' ? "\\f"
                                          : nullptr;
      if (shortForm != nullptr) {
        out += shortForm;
      } else {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      }
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string expectedJson(const Reading& r) {
  std::string tags = "[";
  for (size_t i = 0; i < r.tags.size(); ++i) {
    tags += (i ? "," : "") + std::to_string(r.tags[i]);
  }
  tags += "]";
  return "{\"sensor\":" + jsonString(r.sensor) + ",\"count\":" + std::to_string(r.count) +
         ",\"value\":" + toString(r.value) + ",\"tags\":" + tags +
         ",\"note\":" + (r.note ? jsonString(*r.note) : "null") +
         ",\"ok\":" + (r.ok ? "true" : "false") + "}";
}

template <class T>
std::string encodeAllThroughSink(const std::string& base, const FileSink<T>& sink,
                                 const std::vector<T>& values) {
  OperatorHarness<T> h(sinkOperator(sink));
  h.open();
  for (const T& v : values) h.processElement(0, v);
  h.finish();
  h.close();
  Listing l = list(base);
  EXPECT_EQ(l.parts.size(), 1u);
  return l.parts.empty() ? "" : l.parts[0].content;
}

TEST(FileSinkEncoderTest, JsonLines) {
  TempDir dir;
  const std::vector<Reading> readings = {
      {"plain", 1, 2.5, {1, 2}, std::nullopt, true},
      {"quote\" back\\ nl\n tab\t ctl\x01 del\x7f",
       -9'007'199'254'740'993LL,
       1e-7,
       {},
       "n\u00e9e \u20ac",
       false},
      {"", 0, -0.0, {-1}, std::string(), true},
  };
  auto sink = FileSink<Reading>::forRowFormat(dir.str(), JsonLinesEncoder<Reading>())
                  .withBucketAssigner(BasePathBucketAssigner<Reading>())
                  .build();
  std::string expected;
  for (const Reading& r : readings) expected += expectedJson(r) + "\n";
  EXPECT_EQ(encodeAllThroughSink(dir.str(), sink, readings), expected);
}

TEST(FileSinkEncoderTest, JsonOfTuplesMapsAndNonFiniteNumbers) {
  using Row = std::tuple<int64_t, std::string, std::map<std::string, double>, std::vector<double>>;
  const double inf = std::numeric_limits<double>::infinity();
  const Row row{7, "x", {{"a\"b", 1.0}, {"c", 0.5}}, {std::nan(""), inf, -inf}};
  std::string out;
  JsonLinesEncoder<Row>().encode(row, out);
  EXPECT_EQ(out, "[7," + jsonString("x") + ",{" + jsonString("a\"b") + ":" + toString(1.0) + "," +
                     jsonString("c") + ":" + toString(0.5) +
                     "},[\"NaN\",\"Infinity\",\"-Infinity\"]]\n");
}

TEST(FileSinkEncoderTest, JsonRejectsInvalidUtf8) {
  for (const std::string& bad : {std::string("ab\xff"), std::string("\xc3"),
                                 std::string("\xed\xa0\x80"), std::string("\xc0\xaf")}) {
    std::string out;
    try {
      JsonLinesEncoder<std::string>().encode(bad, out);
      ADD_FAILURE() << "accepted invalid UTF-8";
    } catch (const SluiceException& e) {
      EXPECT_THAT(e.what(), HasSubstr("not valid UTF-8"));
    }
  }
  std::string ok;
  JsonLinesEncoder<std::string>().encode("\xf0\x9f\x98\x80", ok);  // U+1F600
  EXPECT_EQ(ok, "\"\xf0\x9f\x98\x80\"\n");
}

// Reference RFC 4180 quoting.
std::string csvField(const std::string& s, const std::string& delimiter) {
  if (s.find(delimiter) == std::string::npos && s.find_first_of("\"\r\n") == std::string::npos) {
    return s;
  }
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

TEST(FileSinkEncoderTest, CsvQuotesWhatNeedsQuoting) {
  TempDir dir;
  using Row = std::tuple<std::string, int64_t, double>;
  const std::vector<Row> rows = {
      {"plain", 1, 0.5}, {"with,comma", -2, 1e20}, {"say \"hi\"", 3, 2.0}, {"two\nlines", 4, 0.0}};
  auto sink = FileSink<Row>::forRowFormat(dir.str(), CsvEncoder<Row>())
                  .withBucketAssigner(BasePathBucketAssigner<Row>())
                  .build();
  std::string expected;
  for (const Row& r : rows) {
    expected += csvField(std::get<0>(r), ",") + "," + toString(std::get<1>(r)) + "," +
                toString(std::get<2>(r)) + "\n";
  }
  EXPECT_EQ(encodeAllThroughSink(dir.str(), sink, rows), expected);
}

TEST(FileSinkEncoderTest, CsvOfStructsWithOtherDelimiters) {
  const Reading r{"a;b", 5, 1.5, {1, 2}, std::nullopt, true};
  std::string out;
  CsvEncoder<Reading>(";", "\r\n").encode(r, out);
  EXPECT_EQ(out, csvField("a;b", ";") + ";5;" + toString(1.5) + ";" +
                     csvField(toString(r.tags), ";") + ";" + toString(r.note) + ";true\r\n");
  EXPECT_THROW(CsvEncoder<Reading>(",", ","), SluiceException);
  EXPECT_THROW(CsvEncoder<Reading>("", "\n"), SluiceException);
}

TEST(FileSinkEncoderTest, TextAndLambdaEncoders) {
  TempDir dir;
  using P = std::pair<std::string, int64_t>;
  const std::vector<P> values = {{"a", 1}, {"b", -2}};
  auto text = FileSink<P>::forRowFormat(dir / "text", SimpleStringEncoder<P>())
                  .withBucketAssigner(BasePathBucketAssigner<P>())
                  .build();
  EXPECT_EQ(encodeAllThroughSink(dir / "text", text, values),
            toString(values[0]) + "\n" + toString(values[1]) + "\n");
  auto custom = FileSink<P>::forRowFormat(dir / "custom",
                                          [](const P& p, std::string& out) {
                                            out += p.first;
                                            out += '=';
                                            out += std::to_string(p.second);
                                            out += '\n';
                                          })
                    .withBucketAssigner(BasePathBucketAssigner<P>())
                    .build();
  EXPECT_EQ(encodeAllThroughSink(dir / "custom", custom, values), "a=1\nb=-2\n");
}

// --- errors -------------------------------------------------------------------------------

TEST(FileSinkErrorTest, UnwritableBasePathNamesThePathAndTheReason) {
  TempDir dir;
  const std::string file = dir / "a-file";
  std::ofstream(file) << "x";
  const std::string base = file + "/out";
  auto sink = lineSink(base);  // building does not touch the file system
  OperatorHarness<std::string> h(sinkOperator(sink));
  try {
    h.open();
    FAIL() << "expected SluiceException";
  } catch (const SluiceException& e) {
    EXPECT_THAT(e.what(), HasSubstr("FileSink"));
    EXPECT_THAT(e.what(), HasSubstr("'" + base + "'"));
    EXPECT_THAT(e.what(), HasSubstr(std::strerror(ENOTDIR)));
  }
}

TEST(FileSinkErrorTest, InvalidBuilderOptionsThrowWhenSet) {
  using S = FileSink<std::string>;
  EXPECT_THROW(S::forRowFormat("", SimpleStringEncoder<std::string>()), SluiceException);
  auto b = S::forRowFormat("/tmp/x", SimpleStringEncoder<std::string>());
  EXPECT_THROW(b.withOutputFileConfig("", ".txt"), SluiceException);
  EXPECT_THROW(b.withOutputFileConfig(".hidden", ""), SluiceException);
  EXPECT_THROW(b.withOutputFileConfig("a/b", ""), SluiceException);
  EXPECT_THROW(b.withOutputFileConfig("part", "x/y"), SluiceException);
  EXPECT_THROW(b.withBucketCheckInterval(std::chrono::milliseconds(0)), SluiceException);
  EXPECT_THROW(b.withRollingPolicy(std::shared_ptr<const RollingPolicy>()), SluiceException);
}

// --- every run configuration ------------------------------------------------------------

class FileSinkRunConfigTest : public ::testing::TestWithParam<test::RunSetup> {};

// Records spread over the subtasks by hash; after every step the runner's
// configuration checkpoints (and restores, or rescales 1<->2; or after every
// third step only). After the end
// of input and the final checkpoint, the finished files hold every record
// exactly once and nothing is left hidden.
TEST_P(FileSinkRunConfigTest, EveryRecordIsCommittedExactlyOnce) {
  TempDir dir;
  const FileSink<std::string> sink = lineSink(dir.str());
  test::OperatorRunner<std::string> r([&] { return sinkOperator(sink); }, GetParam(), {});
  r.open();
  std::multiset<std::string> written;
  for (int step = 0; step < 8; ++step) {
    for (const std::string& v : numbered("s" + std::to_string(step) + "-", 0, 6)) {
      r.element(0, v, std::nullopt, r.keyGroupOf(v));
      written.insert(v);
    }
    EXPECT_TRUE(r.endStep().empty());
  }
  r.finish();
  r.completeCheckpoint();
  r.close();
  const Listing out = list(dir.str());
  std::multiset<std::string> committed;
  for (const Part& p : out.parts) {
    std::istringstream in(p.content);
    for (std::string line; std::getline(in, line);) committed.insert(line);
  }
  EXPECT_EQ(committed, written);
  EXPECT_THAT(out.hidden, IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(Configs, FileSinkRunConfigTest, ::testing::ValuesIn(test::kAllRunSetups),
                         test::runSetupParamName);

}  // namespace
}  // namespace file_sink_test
}  // namespace sluice
