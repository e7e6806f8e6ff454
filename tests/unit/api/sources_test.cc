// Drives the built-in sources' enumerators and readers directly, with small
// fake contexts, the way the runtime does: split requests go to the
// enumerator, its assignments come back to the reader as serialized splits
// delivered before the reader's next poll (the task's mailbox).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/core/config.h>
#include <sluice/environment.h>
#include <sluice/sources.h>
#include <sluice/testing.h>

#include "harness/temp_dir.h"

namespace sources_test {
namespace {

using namespace sluice;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

using sluice::testing::HarnessRuntimeContext;

class FakeReaderContext final : public SourceReaderContext {
 public:
  FakeReaderContext(int subtask, int parallelism)
      : subtask_(subtask), parallelism_(parallelism), runtime_("test", subtask, parallelism, 128) {}

  int getIndexOfSubtask() const override { return subtask_; }
  int currentParallelism() const override { return parallelism_; }
  void sendSplitRequest() override {
    ++splitRequests;
    if (onSplitRequest) onSplitRequest();
  }
  void signalAvailable() override {
    {
      std::lock_guard lock(mu_);
      ++signals_;
    }
    cv_.notify_all();
  }
  void requestWakeupAt(Clock::time_point when) override { wakeups.push_back(when); }
  RuntimeContext& runtimeContext() override { return runtime_; }

  // Waits until signalAvailable() was called more often than `seen` times, or
  // the deadline passes; returns the new count.
  int waitForSignal(int seen, Clock::time_point deadline) {
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, deadline, [&] { return signals_ > seen; });
    return signals_;
  }
  int signals() {
    std::lock_guard lock(mu_);
    return signals_;
  }

  int splitRequests = 0;
  std::vector<Clock::time_point> wakeups;
  std::function<void()> onSplitRequest;

 private:
  int subtask_;
  int parallelism_;
  HarnessRuntimeContext runtime_;
  std::mutex mu_;
  std::condition_variable cv_;
  int signals_ = 0;
};

template <class T>
class VectorOutput final : public ReaderOutput<T> {
 public:
  void collect(const T& value) override { values.push_back(value); }
  void collect(const T& value, int64_t) override { values.push_back(value); }
  std::vector<T> values;
};

template <class SplitT>
SplitT roundTrip(const SplitT& split) {
  std::vector<uint8_t> bytes;
  DataOutputView out(bytes);
  TypeSerializer<SplitT>::serialize(split, out);
  DataInputView in(bytes.data(), bytes.size());
  SplitT back{};
  TypeSerializer<SplitT>::deserialize(back, in);
  EXPECT_EQ(in.remaining(), 0u);
  return back;
}

// One enumerator and `parallelism` readers, wired like the runtime wires them.
template <class T, class SplitT>
class Harness final : private SplitEnumeratorContext<SplitT> {
 public:
  struct NoMore {};
  using Mail = std::variant<SplitT, NoMore>;

  Harness(const Source<T, SplitT>& source, int parallelism)
      : outputs(parallelism), parallelism_(parallelism), mail_(parallelism) {
    enumerator_ = source.createEnumerator(*this);
    enumerator_->start();
    for (int i = 0; i < parallelism; ++i) {
      contexts.push_back(std::make_unique<FakeReaderContext>(i, parallelism));
      contexts.back()->onSplitRequest = [this, i] { enumerator_->handleSplitRequest(i); };
      readers.push_back(source.createReader(*contexts.back()));
    }
    for (int i = 0; i < parallelism; ++i) {
      enumerator_->addReader(i);
      readers[i]->start();
    }
  }

  // Delivers pending mail to reader i, then polls it once.
  InputStatus poll(int i) {
    deliver(i);
    const size_t before = outputs[i].values.size();
    const InputStatus s = readers[i]->pollNext(outputs[i]);
    EXPECT_LE(outputs[i].values.size() - before, static_cast<size_t>(kMaxRecordsPerPoll));
    return s;
  }

  void deliver(int i) {
    while (!mail_[i].empty()) {
      Mail m = std::move(mail_[i].front());
      mail_[i].pop_front();
      if (auto* s = std::get_if<SplitT>(&m)) {
        readers[i]->addSplits({*s});
      } else {
        readers[i]->notifyNoMoreSplits();
      }
    }
  }

  // Polls every reader round-robin until all ended. Fails the test when that
  // takes more than `maxPolls` polls or a reader waits with no mail pending.
  void runToEnd(int maxPolls = 100000) {
    std::vector<bool> ended(parallelism_, false);
    int open = parallelism_;
    for (int n = 0; open > 0; ++n) {
      ASSERT_LT(n, maxPolls) << "readers did not end";
      for (int i = 0; i < parallelism_; ++i) {
        if (ended[i]) continue;
        const InputStatus s = poll(i);
        if (s == InputStatus::kEndOfInput) {
          ended[i] = true;
          --open;
        } else if (s == InputStatus::kNothingAvailable) {
          ASSERT_FALSE(mail_[i].empty()) << "reader " << i << " waits but has no mail";
        }
      }
    }
  }

  std::vector<T> all() const {
    std::vector<T> out;
    for (const auto& o : outputs) out.insert(out.end(), o.values.begin(), o.values.end());
    return out;
  }

  std::vector<std::unique_ptr<FakeReaderContext>> contexts;
  std::vector<std::unique_ptr<SourceReader<T, SplitT>>> readers;
  std::vector<VectorOutput<T>> outputs;
  std::vector<std::pair<int, SplitT>> assigned;

 private:
  int currentParallelism() const override { return parallelism_; }
  void assignSplit(const SplitT& split, int subtask) override {
    assigned.emplace_back(subtask, split);
    mail_.at(subtask).push_back(roundTrip(split));
  }
  void signalNoMoreSplits(int subtask) override { mail_.at(subtask).push_back(NoMore{}); }

  int parallelism_;
  std::vector<std::deque<Mail>> mail_;
  std::unique_ptr<SplitEnumerator<SplitT>> enumerator_;
};

// A reader of `source` that gets `splits` (as restored from a checkpoint) and
// nothing else; runs to its end.
template <class T, class SplitT>
std::vector<T> readRestored(const Source<T, SplitT>& source, std::vector<SplitT> splits,
                            int* requestsBeforeEnd = nullptr) {
  FakeReaderContext ctx(0, 1);
  bool noMore = false;
  ctx.onSplitRequest = [&] { noMore = true; };  // the enumerator has nothing left
  auto reader = source.createReader(ctx);
  std::vector<SplitT> restored;
  for (const auto& s : splits) restored.push_back(roundTrip(s));
  reader->addSplits(std::move(restored));
  reader->start();
  VectorOutput<T> out;
  for (int n = 0; n < 100000; ++n) {
    if (noMore) {
      if (requestsBeforeEnd != nullptr) *requestsBeforeEnd = ctx.splitRequests;
      reader->notifyNoMoreSplits();
      noMore = false;
    }
    const InputStatus s = reader->pollNext(out);
    if (s == InputStatus::kEndOfInput) break;
    EXPECT_TRUE(s != InputStatus::kNothingAvailable || noMore);
  }
  reader->close();
  return out.values;
}

// ---------------------------------------------------------------------------
// CollectionSource

TEST(CollectionSourceTest, EmitsAllElementsInOrderInBoundedBatches) {
  std::vector<int> data(1300);
  for (int i = 0; i < 1300; ++i) data[i] = i * 3;
  CollectionSource<int> source(std::make_shared<const std::vector<int>>(data));
  EXPECT_EQ(source.getBoundedness(), Boundedness::kBounded);
  Harness<int, CollectionSplit> h(source, 1);
  h.runToEnd();
  EXPECT_EQ(h.outputs[0].values, data);
  ASSERT_EQ(h.assigned.size(), 1u);
  EXPECT_EQ(h.assigned[0].second.from, 0);
  EXPECT_EQ(h.assigned[0].second.to, 1300);
}

TEST(CollectionSourceTest, SnapshotAdvancesFromAndRestoreResumes) {
  std::vector<std::string> data;
  for (int i = 0; i < 1000; ++i) data.push_back("e" + std::to_string(i));
  CollectionSource<std::string> source(std::make_shared<const std::vector<std::string>>(data));
  Harness<std::string, CollectionSplit> h(source, 1);
  EXPECT_EQ(h.poll(0), InputStatus::kMoreAvailable);
  const size_t emitted = h.outputs[0].values.size();
  ASSERT_GT(emitted, 0u);
  ASSERT_LT(emitted, data.size());
  auto snap = h.readers[0]->snapshotState(1);
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].from, static_cast<int64_t>(emitted));
  EXPECT_EQ(snap[0].to, 1000);

  auto rest = readRestored(source, snap);
  std::vector<std::string> combined = h.outputs[0].values;
  combined.insert(combined.end(), rest.begin(), rest.end());
  EXPECT_EQ(combined, data);
}

TEST(CollectionSourceTest, ExtraSubtasksEndWithoutData) {
  CollectionSource<int> source(std::make_shared<const std::vector<int>>(std::vector<int>{1, 2, 3}));
  Harness<int, CollectionSplit> h(source, 3);
  h.runToEnd();
  std::vector<int> all = h.all();
  EXPECT_EQ(all, (std::vector<int>{1, 2, 3}));
}

TEST(CollectionSourceTest, EmptyCollectionEnds) {
  CollectionSource<int> source(std::make_shared<const std::vector<int>>());
  Harness<int, CollectionSplit> h(source, 1);
  h.runToEnd();
  EXPECT_TRUE(h.all().empty());
}

// ---------------------------------------------------------------------------
// NumberSequenceSource

TEST(NumberSequenceSourceTest, ThreeSubtasksCoverTheRangeExactlyOnce) {
  NumberSequenceSource source(-5, 2000);
  Harness<int64_t, NumberSequenceSplit> h(source, 3);
  h.runToEnd();
  std::vector<int64_t> all = h.all();
  std::sort(all.begin(), all.end());
  std::vector<int64_t> want;
  for (int64_t v = -5; v <= 2000; ++v) want.push_back(v);
  EXPECT_EQ(all, want);
  // One split per subtask, contiguous, sizes within one of each other.
  ASSERT_EQ(h.assigned.size(), 3u);
  std::vector<NumberSequenceSplit> splits;
  for (auto& [subtask, s] : h.assigned) splits.push_back(s);
  std::sort(splits.begin(), splits.end(),
            [](const auto& a, const auto& b) { return a.from < b.from; });
  EXPECT_EQ(splits.front().from, -5);
  EXPECT_EQ(splits.back().to, 2000);
  for (size_t i = 0; i + 1 < splits.size(); ++i) EXPECT_EQ(splits[i].to + 1, splits[i + 1].from);
  for (const auto& s : splits) {
    EXPECT_EQ(s.next, s.from);
    const int64_t size = s.to - s.from + 1;
    EXPECT_TRUE(size == 668 || size == 669) << size;
  }
  // Each subtask read within its own order.
  for (const auto& o : h.outputs) EXPECT_TRUE(std::is_sorted(o.values.begin(), o.values.end()));
}

TEST(NumberSequenceSourceTest, FewerNumbersThanSubtasks) {
  NumberSequenceSource source(7, 8);
  Harness<int64_t, NumberSequenceSplit> h(source, 4);
  h.runToEnd();
  std::vector<int64_t> all = h.all();
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<int64_t>{7, 8}));
  EXPECT_EQ(h.assigned.size(), 2u);
}

TEST(NumberSequenceSourceTest, SingleNumberAndInvalidRange) {
  NumberSequenceSource one(42, 42);
  Harness<int64_t, NumberSequenceSplit> h(one, 2);
  h.runToEnd();
  EXPECT_EQ(h.all(), (std::vector<int64_t>{42}));
  try {
    NumberSequenceSource bad(5, 4);
    FAIL() << "expected an exception";
  } catch (const SluiceException& e) {
    EXPECT_STREQ(e.what(), "fromSequence: 'from' (5) must be <= 'to' (4)");
  }
}

TEST(NumberSequenceSourceTest, SplitNumberRangeHandlesTheFullInt64Range) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto splits = internal::splitNumberRange(kMin, kMax, 3);
  ASSERT_EQ(splits.size(), 3u);
  EXPECT_EQ(splits[0].from, kMin);
  EXPECT_EQ(splits[2].to, kMax);
  for (size_t i = 0; i + 1 < splits.size(); ++i) EXPECT_EQ(splits[i].to + 1, splits[i + 1].from);
  // 2^64 = 3 * 6148914691236517205 + 1: the first split takes the extra one.
  EXPECT_EQ(static_cast<uint64_t>(splits[0].to) - static_cast<uint64_t>(splits[0].from) + 1,
            6148914691236517206u);
  EXPECT_EQ(static_cast<uint64_t>(splits[1].to) - static_cast<uint64_t>(splits[1].from) + 1,
            6148914691236517205u);
}

TEST(NumberSequenceSourceTest, ReadsUpToInt64MaxWithoutOverflow) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  NumberSequenceSource source(kMax - 2, kMax);
  Harness<int64_t, NumberSequenceSplit> h(source, 1);
  h.runToEnd();
  EXPECT_EQ(h.all(), (std::vector<int64_t>{kMax - 2, kMax - 1, kMax}));
}

TEST(NumberSequenceSourceTest, SnapshotPositionsResumeInAFreshReader) {
  NumberSequenceSource source(1, 3000);
  // Two subtasks; subtask 0 reads one batch and is then "restored".
  Harness<int64_t, NumberSequenceSplit> h(source, 2);
  EXPECT_EQ(h.poll(0), InputStatus::kMoreAvailable);
  const auto firstBatch = h.outputs[0].values;
  ASSERT_EQ(firstBatch.size(), static_cast<size_t>(kMaxRecordsPerPoll));
  auto snap = h.readers[0]->snapshotState(7);
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].from, 1);
  EXPECT_EQ(snap[0].to, 1500);
  EXPECT_EQ(snap[0].next, 1 + kMaxRecordsPerPoll);

  int requests = -1;
  auto rest = readRestored(source, snap, &requests);
  EXPECT_EQ(requests, 1) << "a reader with restored splits asks only after finishing them";
  std::vector<int64_t> combined = firstBatch;
  combined.insert(combined.end(), rest.begin(), rest.end());
  std::vector<int64_t> want;
  for (int64_t v = 1; v <= 1500; ++v) want.push_back(v);
  EXPECT_EQ(combined, want);
}

TEST(NumberSequenceSourceTest, FinishedSplitsAreNotInTheSnapshot) {
  NumberSequenceSource source(1, 10);
  Harness<int64_t, NumberSequenceSplit> h(source, 1);
  EXPECT_EQ(h.poll(0), InputStatus::kNothingAvailable);  // all read, waiting for the next split
  EXPECT_EQ(h.outputs[0].values.size(), 10u);
  EXPECT_TRUE(h.readers[0]->snapshotState(1).empty());
}

// ---------------------------------------------------------------------------
// GeneratorSource

TEST(GeneratorSourceTest, GeneratesEveryIndexOnceOverSubtasks) {
  GeneratorSource source([](int64_t i) { return "v" + std::to_string(i * 2); }, 1111);
  static_assert(std::is_same_v<decltype(source)::OutputType, std::string>);
  EXPECT_EQ(source.getBoundedness(), Boundedness::kBounded);
  Harness<std::string, NumberSequenceSplit> h(source, 3);
  h.runToEnd();
  std::vector<std::string> all = h.all();
  std::vector<std::string> want;
  for (int64_t i = 0; i < 1111; ++i) want.push_back("v" + std::to_string(i * 2));
  std::sort(all.begin(), all.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(all, want);
}

TEST(GeneratorSourceTest, ZeroCountEndsAndUnboundedIsUnbounded) {
  GeneratorSource<int64_t, int64_t (*)(int64_t)> none(
      +[](int64_t i) { return i; }, 0);
  Harness<int64_t, NumberSequenceSplit> h(none, 2);
  h.runToEnd();
  EXPECT_TRUE(h.all().empty());

  GeneratorSource endless([](int64_t i) { return i; }, kUnboundedCount);
  EXPECT_EQ(endless.getBoundedness(), Boundedness::kContinuousUnbounded);
  EXPECT_EQ(decltype(endless)::kUnbounded, kUnboundedCount);
  Harness<int64_t, NumberSequenceSplit> e(endless, 2);
  for (int n = 0; n < 10; ++n) {
    EXPECT_NE(e.poll(0), InputStatus::kEndOfInput);
    EXPECT_NE(e.poll(1), InputStatus::kEndOfInput);
  }
  // Subtask 1 starts at the middle of [0, INT64_MAX - 1].
  ASSERT_FALSE(e.outputs[1].values.empty());
  EXPECT_EQ(e.outputs[1].values.front(), (kUnboundedCount - 1) / 2 + 1);
}

TEST(GeneratorSourceTest, InvalidArgumentsThrow) {
  auto f = [](int64_t i) { return i; };
  EXPECT_THROW(GeneratorSource(f, -1), SluiceException);
  EXPECT_THROW(GeneratorSource(f, 10, -1.0), SluiceException);
}

TEST(GeneratorSourceTest, RateLimitReturnsNothingAvailableWithAWakeup) {
  auto now = Clock::time_point() + std::chrono::hours(1);
  GeneratorSource source([](int64_t i) { return i; }, 1000, 10.0);  // 10/s in total
  source.setClockForTesting([&] { return now; });
  // Two subtasks: 5 records per second each, one every 200 ms.
  Harness<int64_t, NumberSequenceSplit> h(source, 2);
  const auto t0 = now;
  auto& ctx = *h.contexts[0];
  auto& out = h.outputs[0].values;

  EXPECT_EQ(h.poll(0), InputStatus::kMoreAvailable);  // the first record is due at once
  EXPECT_EQ(out.size(), 1u);
  EXPECT_EQ(h.poll(0), InputStatus::kNothingAvailable);
  ASSERT_EQ(ctx.wakeups.size(), 1u);
  EXPECT_EQ(ctx.wakeups.back(), t0 + std::chrono::milliseconds(200));
  EXPECT_EQ(out.size(), 1u);

  now += std::chrono::milliseconds(199);
  EXPECT_EQ(h.poll(0), InputStatus::kNothingAvailable);
  EXPECT_EQ(out.size(), 1u);
  now += std::chrono::milliseconds(1);
  EXPECT_NE(h.poll(0), InputStatus::kNothingAvailable);
  EXPECT_EQ(out.size(), 2u);
  EXPECT_EQ(h.poll(0), InputStatus::kNothingAvailable);
  EXPECT_EQ(ctx.wakeups.back(), t0 + std::chrono::milliseconds(400));

  // One second later: exactly the 5 records that fell due.
  now += std::chrono::seconds(1);
  while (h.poll(0) == InputStatus::kMoreAvailable) {
  }
  EXPECT_EQ(out.size(), 7u);
  EXPECT_EQ(ctx.wakeups.back(), t0 + std::chrono::milliseconds(1400));

  // After a long stall at most one second's worth (+ the one due now) comes at once.
  now += std::chrono::seconds(60);
  while (h.poll(0) == InputStatus::kMoreAvailable) {
  }
  EXPECT_EQ(out.size(), 13u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], static_cast<int64_t>(i));
}

TEST(GeneratorSourceTest, UnlimitedRateNeverWaits) {
  GeneratorSource source([](int64_t i) { return i; }, 5000);
  Harness<int64_t, NumberSequenceSplit> h(source, 1);
  h.runToEnd();
  EXPECT_EQ(h.all().size(), 5000u);
  EXPECT_TRUE(h.contexts[0]->wakeups.empty());
}

TEST(GeneratorSourceTest, SnapshotHoldsTheNextIndex) {
  GeneratorSource source([](int64_t i) { return i * 10; }, 2000);
  Harness<int64_t, NumberSequenceSplit> h(source, 1);
  h.poll(0);
  h.poll(0);
  auto snap = h.readers[0]->snapshotState(1);
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].next, static_cast<int64_t>(h.outputs[0].values.size()));
  auto rest = readRestored(source, snap);
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.front(), snap[0].next * 10);
  EXPECT_EQ(h.outputs[0].values.size() + rest.size(), 2000u);
}

// ---------------------------------------------------------------------------
// TextLineFileSource

using test::TempDir;

// Reference: lines split on '\n', a trailing '\r' dropped, no empty last line.
std::vector<std::string> referenceLines(const std::string& content) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < content.size()) {
    size_t nl = content.find('\n', start);
    size_t end = nl == std::string::npos ? content.size() : nl;
    std::string line = content.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(line);
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

// Byte offset where line i (0-based) starts.
std::vector<int64_t> lineStarts(const std::string& content) {
  std::vector<int64_t> out{0};
  for (size_t i = 0; i < content.size(); ++i) {
    if (content[i] == '\n') out.push_back(static_cast<int64_t>(i + 1));
  }
  return out;
}

std::string mixedContent(int lines) {
  std::string c;
  for (int i = 0; i < lines; ++i) {
    switch (i % 5) {
      case 0: c += "line " + std::to_string(i) + "\n"; break;
      case 1: c += "crlf " + std::to_string(i) + "\r\n"; break;
      case 2: c += "\n"; break;  // empty line
      case 3: c += std::string(static_cast<size_t>(i % 97), 'x') + "\n"; break;
      case 4: c += "tab\tand \r inner cr\r\n"; break;
    }
  }
  return c;
}

TEST(TextLineFileSourceTest, LinesWithCrlfEmptyLinesLongLineAndNoFinalNewline) {
  TempDir dir;
  const std::string longLine(100000, 'L');
  const std::string content =
      "first\r\n\nsecond\n" + longLine + "\r\n\r\n" + mixedContent(50) + "last line";
  const std::string path = dir.write("input.txt", content);
  const auto want = referenceLines(content);
  ASSERT_EQ(want.back(), "last line");
  // Buffer sizes below, at and above the line lengths, and the default.
  for (size_t bufferSize : {size_t{1}, size_t{2}, size_t{7}, size_t{64}, size_t{4096},
                            TextLineFileSource::kDefaultReadBufferSize}) {
    TextLineFileSource source(path, bufferSize);
    Harness<std::string, FileSplit> h(source, 1);
    h.runToEnd();
    EXPECT_EQ(h.outputs[0].values, want) << "buffer size " << bufferSize;
  }
}

TEST(TextLineFileSourceTest, EmptyFileAndSingleNewline) {
  TempDir dir;
  {
    TextLineFileSource source(dir.write("empty.txt", ""));
    Harness<std::string, FileSplit> h(source, 1);
    h.runToEnd();
    EXPECT_TRUE(h.all().empty());
  }
  {
    TextLineFileSource source(dir.write("nl.txt", "\n"));
    Harness<std::string, FileSplit> h(source, 1);
    h.runToEnd();
    EXPECT_EQ(h.all(), (std::vector<std::string>{""}));
  }
  {
    TextLineFileSource source(dir.write("cr.txt", "a\r"));
    Harness<std::string, FileSplit> h(source, 1);
    h.runToEnd();
    EXPECT_EQ(h.all(), (std::vector<std::string>{"a"}));
  }
}

TEST(TextLineFileSourceTest, SnapshotOffsetsResumeInFreshReaders) {
  TempDir dir;
  const std::string content = mixedContent(2600) + "tail without newline";
  const std::string path = dir.write("big.txt", content);
  const auto want = referenceLines(content);
  const auto starts = lineStarts(content);
  TextLineFileSource source(path, 100);

  // Read one batch, snapshot, continue in a fresh reader, and again.
  Harness<std::string, FileSplit> h(source, 1);
  EXPECT_EQ(h.poll(0), InputStatus::kMoreAvailable);
  std::vector<std::string> got = h.outputs[0].values;
  ASSERT_EQ(got.size(), static_cast<size_t>(kMaxRecordsPerPoll));
  auto snap = h.readers[0]->snapshotState(1);
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].path, path);
  EXPECT_EQ(snap[0].offset, starts[got.size()]);

  while (true) {
    FakeReaderContext ctx(0, 1);
    auto reader = source.createReader(ctx);
    reader->addSplits(snap);
    reader->start();
    EXPECT_EQ(ctx.splitRequests, 0);
    VectorOutput<std::string> out;
    const InputStatus s = reader->pollNext(out);
    got.insert(got.end(), out.values.begin(), out.values.end());
    snap = reader->snapshotState(2);
    reader->close();
    if (snap.empty()) {
      // Finished: the reader asked for the next split.
      EXPECT_EQ(ctx.splitRequests, 1);
      EXPECT_NE(s, InputStatus::kEndOfInput);
      break;
    }
    ASSERT_EQ(s, InputStatus::kMoreAvailable);
    ASSERT_LT(got.size(), want.size());
    EXPECT_EQ(snap[0].offset, starts[got.size()]);
  }
  EXPECT_EQ(got, want);
}

TEST(TextLineFileSourceTest, DirectoryReadsVisibleRegularFilesSortedByName) {
  TempDir dir;
  dir.write("b.txt", "b1\nb2\n");
  dir.write("a.txt", "a1\na2");
  dir.write("c.txt", "");
  dir.write(".hidden", "hidden\n");
  dir.write("_inprogress", "tmp\n");
  fs::create_directory(fs::path(dir.path()) / "sub");
  dir.write("sub/nested.txt", "nested\n");

  TextLineFileSource source(dir.path());
  Harness<std::string, FileSplit> h(source, 1);
  h.runToEnd();
  EXPECT_EQ(h.all(), (std::vector<std::string>{"a1", "a2", "b1", "b2"}));
  ASSERT_EQ(h.assigned.size(), 3u);
  EXPECT_EQ(h.assigned[0].second.path, dir.str() + "/a.txt");
  EXPECT_EQ(h.assigned[2].second.path, dir.str() + "/c.txt");

  // Two subtasks split the files between them.
  Harness<std::string, FileSplit> h2(source, 2);
  h2.runToEnd();
  auto all = h2.all();
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<std::string>{"a1", "a2", "b1", "b2"}));
}

TEST(TextLineFileSourceTest, MissingPathFailsWhenTheEnumeratorStarts) {
  TempDir dir;
  const std::string missing = dir.str() + "/nope.txt";
  TextLineFileSource source(missing);  // building the job does not touch the file
  try {
    Harness<std::string, FileSplit> h(source, 1);
    FAIL() << "expected an exception";
  } catch (const SluiceException& e) {
    EXPECT_EQ(std::string(e.what()),
              "readTextFile: cannot open '" + missing + "': No such file or directory");
  }
}

TEST(TextLineFileSourceTest, FileRemovedAfterDiscoveryFailsTheReader) {
  TempDir dir;
  const std::string path = dir.write("gone.txt", "x\n");
  TextLineFileSource source(path);
  Harness<std::string, FileSplit> h(source, 1);
  fs::remove(path);
  try {
    h.runToEnd();
    FAIL() << "expected an exception";
  } catch (const SluiceException& e) {
    EXPECT_EQ(std::string(e.what()),
              "readTextFile: cannot open '" + path + "': No such file or directory");
  }
}

// What `run` threw (its SluiceException's message, "no exception" if none).
// Bounded for a broken build that opens the FIFO and blocks: after 20 s the
// FIFO gets a writer, which lets the blocked open return, and the test fails
// instead of hanging.
std::string messageWithoutHanging(const std::string& fifo, const std::function<void()>& run) {
  auto result = std::async(std::launch::async, [&]() -> std::string {
    try {
      run();
      return "no exception";
    } catch (const SluiceException& e) {
      return e.what();
    }
  });
  if (result.wait_for(std::chrono::seconds(20)) == std::future_status::timeout) {
    ADD_FAILURE() << "readTextFile blocked on the FIFO " << fifo;
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) ::close(fd);
  }
  return result.get();
}

TEST(TextLineFileSourceTest, FifoIsRefusedBeforeItIsOpened) {
  TempDir dir;
  const std::string fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  TextLineFileSource source(fifo);
  EXPECT_EQ(messageWithoutHanging(fifo, [&] { Harness<std::string, FileSplit> h(source, 1); }),
            "readTextFile: '" + fifo + "' is not a regular file or directory (it is a FIFO)");
}

TEST(TextLineFileSourceTest, CharacterDeviceIsRefused) {
  TextLineFileSource source("/dev/null");
  try {
    Harness<std::string, FileSplit> h(source, 1);
    FAIL() << "expected an exception";
  } catch (const SluiceException& e) {
    EXPECT_EQ(std::string(e.what()),
              "readTextFile: '/dev/null' is not a regular file or directory (it is a character "
              "device)");
  }
}

TEST(TextLineFileSourceTest, DirectoryHoldingAFifoIsRefusedNamingTheEntry) {
  TempDir dir;
  dir.write("a.txt", "a\n");
  fs::create_directory(fs::path(dir.path()) / "sub");  // still skipped
  ASSERT_EQ(::mkfifo((dir / "z-pipe").c_str(), 0600), 0) << std::strerror(errno);
  ASSERT_EQ(::mkfifo((dir / "m-pipe").c_str(), 0600), 0) << std::strerror(errno);
  ASSERT_EQ(::mkfifo((dir / ".hidden-pipe").c_str(), 0600), 0);  // skipped by name
  TextLineFileSource source(dir.str());
  EXPECT_EQ(
      messageWithoutHanging(dir / "m-pipe", [&] { Harness<std::string, FileSplit> h(source, 1); }),
      "readTextFile: '" + dir.str() + "/m-pipe' is not a regular file or directory (it is a FIFO)");

  // Without the FIFOs the directory reads as before.
  fs::remove(dir / "z-pipe");
  fs::remove(dir / "m-pipe");
  Harness<std::string, FileSplit> h(source, 1);
  h.runToEnd();
  EXPECT_EQ(h.all(), (std::vector<std::string>{"a"}));
}

TEST(TextLineFileSourceTest, SplitThatBecameAFifoFailsTheReaderWithoutBlocking) {
  TempDir dir;
  const std::string path = dir.write("data.txt", "x\n");
  TextLineFileSource source(path);
  Harness<std::string, FileSplit> h(source, 1);  // discovered as a regular file
  fs::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  EXPECT_EQ(messageWithoutHanging(path, [&] { h.runToEnd(); }),
            "readTextFile: '" + path + "' is not a regular file or directory (it is a FIFO)");
}

// ---------------------------------------------------------------------------
// SocketTextSource

class Listener {
 public:
  explicit Listener(int backlog = 4) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(fd_, backlog) != 0) {
      throw std::runtime_error("cannot listen");
    }
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~Listener() { closeListener(); }
  void closeListener() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int port() const { return port_; }
  // Blocks until the source connects.
  int accept() { return ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

void writeAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    done += static_cast<size_t>(n);
  }
}

// Polls until the reader ends, waiting for the fetcher's signals in between
// (bounded by a deadline). Returns false on timeout.
bool pollUntilEnd(SourceReader<std::string, SocketSplit>& reader, FakeReaderContext& ctx,
                  VectorOutput<std::string>& out,
                  Clock::duration timeout = std::chrono::seconds(20)) {
  const auto deadline = Clock::now() + timeout;
  int seen = ctx.signals();
  while (Clock::now() < deadline) {
    switch (reader.pollNext(out)) {
      case InputStatus::kEndOfInput: return true;
      case InputStatus::kMoreAvailable: break;
      case InputStatus::kNothingAvailable: seen = ctx.waitForSignal(seen, deadline); break;
    }
  }
  return false;
}

TEST(SocketTextSourceTest, ReadsLinesUntilCloseIncludingThePartialTail) {
  Listener listener;
  SocketTextSource source("127.0.0.1", listener.port());
  EXPECT_EQ(source.getBoundedness(), Boundedness::kContinuousUnbounded);
  FakeReaderContext ctx(0, 1);
  auto reader = source.createReader(ctx);
  reader->start();
  const int conn = listener.accept();
  ASSERT_GE(conn, 0);
  writeAll(conn, "hello\nworld\r\n\nsplit ");
  writeAll(conn, "across writes\npartial tail");
  ::close(conn);
  VectorOutput<std::string> out;
  ASSERT_TRUE(pollUntilEnd(*reader, ctx, out));
  EXPECT_EQ(out.values, (std::vector<std::string>{"hello", "world", "", "split across writes",
                                                  "partial tail"}));
  EXPECT_TRUE(reader->snapshotState(1).empty());  // at-most-once: nothing to restore
  reader->close();
}

TEST(SocketTextSourceTest, CustomDelimiterKeepsCarriageReturns) {
  Listener listener;
  SocketTextSource source("localhost", listener.port(), ';');
  FakeReaderContext ctx(0, 1);
  auto reader = source.createReader(ctx);
  reader->start();
  const int conn = listener.accept();
  ASSERT_GE(conn, 0);
  writeAll(conn, "a;b\r;c\nd;");
  ::close(conn);
  VectorOutput<std::string> out;
  ASSERT_TRUE(pollUntilEnd(*reader, ctx, out));
  EXPECT_EQ(out.values, (std::vector<std::string>{"a", "b\r", "c\nd"}));
  reader->close();
}

TEST(SocketTextSourceTest, FullQueueBackpressuresAndEveryLineArrivesInOrder) {
  Listener listener;
  SocketTextSource source("127.0.0.1", listener.port());
  FakeReaderContext ctx(0, 1);
  auto reader = source.createReader(ctx);
  reader->start();
  const int conn = listener.accept();
  ASSERT_GE(conn, 0);
  const int kLines = 20000;  // far more than the queue holds
  std::thread writer([&] {
    std::string data;
    for (int i = 0; i < kLines; ++i) data += "line-" + std::to_string(i) + "\n";
    writeAll(conn, data);
    ::close(conn);
  });
  VectorOutput<std::string> out;
  const bool ended = pollUntilEnd(*reader, ctx, out);
  writer.join();
  ASSERT_TRUE(ended);
  ASSERT_EQ(out.values.size(), static_cast<size_t>(kLines));
  for (int i = 0; i < kLines; ++i) ASSERT_EQ(out.values[i], "line-" + std::to_string(i));
  reader->close();
}

TEST(SocketTextSourceTest, ConnectionRefusedFailsNamingHostAndPort) {
  int port;
  {
    Listener l;  // find a free port, then free it again
    port = l.port();
  }
  SocketTextSource source("127.0.0.1", port);
  FakeReaderContext ctx(0, 1);
  auto reader = source.createReader(ctx);
  reader->start();
  VectorOutput<std::string> out;
  try {
    pollUntilEnd(*reader, ctx, out);
    FAIL() << "expected an exception";
  } catch (const SluiceException& e) {
    EXPECT_EQ(std::string(e.what()), "socketTextStream: cannot connect to 127.0.0.1:" +
                                         std::to_string(port) + ": Connection refused");
  }
  reader->close();
}

TEST(SocketTextSourceTest, CloseStopsAFetcherBlockedInRecvOrOnAFullQueue) {
  Listener listener;
  SocketTextSource source("127.0.0.1", listener.port());
  {
    FakeReaderContext ctx(0, 1);
    auto reader = source.createReader(ctx);
    reader->start();
    const int conn = listener.accept();  // connected, nothing sent: recv blocks
    ASSERT_GE(conn, 0);
    reader->close();  // must return
    ::close(conn);
  }
  {
    FakeReaderContext ctx(0, 1);
    auto reader = source.createReader(ctx);
    reader->start();
    const int conn = listener.accept();
    ASSERT_GE(conn, 0);
    std::string data;
    for (size_t i = 0; i < SocketTextSource::kQueueCapacity + 10; ++i) data += "x\n";
    writeAll(conn, data);
    // Once the first lines are queued the fetcher is filling the queue, and
    // it then waits for space that never comes (nothing polls).
    ASSERT_GT(ctx.waitForSignal(0, Clock::now() + std::chrono::seconds(20)), 0);
    reader.reset();  // the destructor closes too
    ::close(conn);
  }
}

TEST(SocketTextSourceTest, ReconnectsAfterCloseWhenRetriesAreLeft) {
  Listener listener;
  SocketTextSource source("127.0.0.1", listener.port(), '\n', 1);
  FakeReaderContext ctx(0, 1);
  auto reader = source.createReader(ctx);
  reader->start();
  std::thread server([&] {
    int c1 = listener.accept();
    writeAll(c1, "first\npart");
    ::close(c1);
    int c2 = listener.accept();
    writeAll(c2, "ial\nsecond\n");
    ::close(c2);
  });
  VectorOutput<std::string> out;
  const bool ended = pollUntilEnd(*reader, ctx, out);
  server.join();
  ASSERT_TRUE(ended);
  // The partial line is carried over the reconnect, as in Flink.
  EXPECT_EQ(out.values, (std::vector<std::string>{"first", "partial", "second"}));
  reader->close();
}

// Sends `data` until done or the peer is gone (the source may fail and close
// mid-way); returns the bytes sent.
size_t sendUntilClosed(int fd, const char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::send(fd, data + done, size - done, MSG_NOSIGNAL);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

// Accepts one connection, sends each part, then keeps the connection open
// until release() (so a failure cannot come from the peer closing) or
// closes it at once when `closeAfter`.
class LineServer {
 public:
  LineServer(Listener& listener, std::vector<std::string> parts, bool closeAfter)
      : thread_([this, &listener, parts = std::move(parts), closeAfter] {
          const int conn = listener.accept();
          if (conn < 0) return;
          for (const auto& part : parts) sendUntilClosed(conn, part.data(), part.size());
          if (!closeAfter) {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] { return released_; });
          }
          ::close(conn);
        }) {}
  ~LineServer() {
    release();
    thread_.join();
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  std::thread thread_;
};

SocketTextSourceOptions lineLimit(size_t bytes, OversizedLinePolicy policy) {
  SocketTextSourceOptions o;
  o.maxLineLength = bytes;
  o.oversizedLines = policy;
  return o;
}

// The message pollUntilEnd's SluiceException carries ("ended" / "timeout").
std::string failureOf(SourceReader<std::string, SocketSplit>& reader, FakeReaderContext& ctx,
                      VectorOutput<std::string>& out) {
  try {
    return pollUntilEnd(reader, ctx, out) ? "ended" : "timeout";
  } catch (const SluiceException& e) {
    return e.what();
  }
}

TEST(SocketTextSourceTest, OversizedLineFailsAtOnceWithoutItsDelimiterOrARetry) {
  Listener listener;
  // A line of exactly the limit (its '\r' is not counted), then one longer
  // line whose delimiter never comes; the peer stays connected.
  const std::string exact(1000, 'e');
  LineServer server(listener, {"first\n", exact + "\r\n", std::string(5000, 'y')}, false);
  SocketTextSource source("127.0.0.1", listener.port(), '\n', /*maxRetry=*/-1,
                          lineLimit(1000, OversizedLinePolicy::kFail));
  FakeReaderContext ctx(0, 1);
  auto reader = source.createReader(ctx);
  reader->start();
  VectorOutput<std::string> out;
  EXPECT_EQ(failureOf(*reader, ctx, out),
            "socketTextStream: a line from 127.0.0.1:" + std::to_string(listener.port()) +
                " exceeds source.socket.max-line-length (1000 bytes)");
  EXPECT_EQ(out.values, (std::vector<std::string>{"first", exact}));
  reader->close();
}

TEST(SocketTextSourceTest, DefaultLimitIsOneMebibyteAndTheFailureNamesIt) {
  Listener listener;
  const std::string chunk(size_t{1} << 20, 'z');
  LineServer server(listener, {chunk, chunk, chunk}, false);  // 3 mb, no newline
  SocketTextSource source("127.0.0.1", listener.port());
  EXPECT_EQ(source.getOptions().maxLineLength, size_t{1} << 20);
  EXPECT_EQ(source.getOptions().oversizedLines, OversizedLinePolicy::kFail);
  FakeReaderContext ctx(0, 1);
  auto reader = source.createReader(ctx);
  reader->start();
  VectorOutput<std::string> out;
  EXPECT_EQ(failureOf(*reader, ctx, out),
            "socketTextStream: a line from 127.0.0.1:" + std::to_string(listener.port()) +
                " exceeds source.socket.max-line-length (1 mb)");
  EXPECT_TRUE(out.values.empty());
  reader->close();
}

TEST(SocketTextSourceTest, TruncateEmitsTheFirstBytesAndReadsOnAfterTheDelimiter) {
  Listener listener;
  const size_t kMax = 1000;
  // 64 mb without a newline: read and dropped while at most kMax + 1 bytes
  // of it are held.
  const std::string chunk(size_t{1} << 20, 'x');
  std::vector<std::string> parts{"a\n"};
  for (int i = 0; i < 64; ++i) parts.push_back(chunk);
  parts.push_back("\nb\n");
  parts.push_back(std::string(kMax, 'e') + "\r\n");    // exactly the limit: whole
  parts.push_back(std::string(kMax + 1, 'f') + "\n");  // one byte over
  parts.push_back(std::string(kMax, 'g') + "\rh\n");   // the '\r' is content here
  parts.push_back(std::string(3 * kMax, 't'));         // an oversized tail
  LineServer server(listener, std::move(parts), true);
  SocketTextSource source("127.0.0.1", listener.port(), '\n', 0,
                          lineLimit(kMax, OversizedLinePolicy::kTruncate));
  FakeReaderContext ctx(0, 1);
  auto reader = source.createReader(ctx);
  reader->start();
  VectorOutput<std::string> out;
  ASSERT_EQ(failureOf(*reader, ctx, out), "ended");
  EXPECT_EQ(out.values, (std::vector<std::string>{"a", std::string(kMax, 'x'), "b",
                                                  std::string(kMax, 'e'), std::string(kMax, 'f'),
                                                  std::string(kMax, 'g'), std::string(kMax, 't')}));
  reader->close();
}

TEST(SocketTextSourceTest, ConnectGivesUpAfterTheTimeout) {
  // A listener that never accepts and whose accept queue is full: Linux drops
  // further SYNs, so the source's connect neither completes nor is refused.
  Listener listener(/*backlog=*/0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(listener.port()));
  std::vector<int> fillers;
  for (int i = 0; i < 3; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    fillers.push_back(fd);
  }
  SocketTextSourceOptions options;
  options.connectTimeout = std::chrono::milliseconds(200);
  SocketTextSource source("127.0.0.1", listener.port(), '\n', 0, options);
  FakeReaderContext ctx(0, 1);
  auto reader = source.createReader(ctx);
  const auto started = Clock::now();
  reader->start();
  VectorOutput<std::string> out;
  EXPECT_EQ(failureOf(*reader, ctx, out),
            "socketTextStream: cannot connect to 127.0.0.1:" + std::to_string(listener.port()) +
                ": timed out after 200 ms");
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(5));
  reader->close();
  for (int fd : fillers) ::close(fd);
}

TEST(SocketTextSourceTest, OptionsComeFromTheConfigurationKeys) {
  const SocketTextSourceOptions defaults = SocketTextSourceOptions::fromConfiguration({});
  EXPECT_EQ(defaults.maxLineLength, size_t{1} << 20);
  EXPECT_EQ(defaults.oversizedLines, OversizedLinePolicy::kFail);
  EXPECT_EQ(defaults.connectTimeout, std::chrono::seconds(10));

  Configuration config;
  config.setString("source.socket.max-line-length", "64 kb", "-D");
  config.setString("source.socket.oversized-lines", "Truncate", "-D");
  config.setString("source.socket.connect-timeout", "250 ms", "-D");
  const SocketTextSourceOptions set = SocketTextSourceOptions::fromConfiguration(config);
  EXPECT_EQ(set.maxLineLength, size_t{64} << 10);
  EXPECT_EQ(set.oversizedLines, OversizedLinePolicy::kTruncate);
  EXPECT_EQ(set.connectTimeout, std::chrono::milliseconds(250));

  auto messageFor = [](const char* key, const char* value) -> std::string {
    Configuration c;
    c.setString(key, value, "-D");
    try {
      (void)SocketTextSourceOptions::fromConfiguration(c);
      return "no exception";
    } catch (const SluiceException& e) {
      return e.what();
    }
  };
  EXPECT_EQ(messageFor("source.socket.oversized-lines", "drop"),
            "source.socket.oversized-lines: unknown policy 'drop'; use fail or truncate (from -D)");
  EXPECT_EQ(messageFor("source.socket.max-line-length", "0"),
            "source.socket.max-line-length must be at least 1 byte, got 0 bytes (from -D)");
  EXPECT_EQ(messageFor("source.socket.connect-timeout", "0 s"),
            "source.socket.connect-timeout must be above 0 ms, got 0 ms (from -D)");

  // The environment reads them when the source is added, so a bad value
  // fails while the job is built.
  Configuration bad;
  bad.setString("source.socket.oversized-lines", "drop", "-D");
  StreamExecutionEnvironment env(bad);
  EXPECT_THROW(env.socketTextStream("127.0.0.1", 9), SluiceException);
}

}  // namespace
}  // namespace sources_test
