// How jobs fail: an exception in user code fails execute() with a
// JobExecutionException that names the operator, the subtask and the cause;
// a failure downstream of an endless source still ends the job; an invalid
// job is rejected while it is built.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sluice/sluice.h>

#include "integration/integration_util.h"

namespace sluice::integration {
namespace failure_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

int64_t explodeAt42(const int64_t& v) {
  if (v == 42) throw std::runtime_error("boom at 42");
  return v;
}

// Runs the job with execute() and returns the JobExecutionException it threw.
JobExecutionException executeExpectingFailure(StreamExecutionEnvironment& env,
                                              const std::string& jobName) {
  try {
    env.execute(jobName);
  } catch (const JobExecutionException& e) {
    return e;
  }
  ADD_FAILURE() << "job '" << jobName << "' finished instead of failing";
  return JobExecutionException(jobName, JobStatus::kFinished, "");
}

// Runs the job with executeAsync() and waits, with a deadline, for it to end.
// Returns the exception it ended with; fails the test when it does not end in
// time (and cancels it).
std::optional<JobExecutionException> runWithDeadline(StreamExecutionEnvironment& env,
                                                     const std::string& jobName,
                                                     std::chrono::seconds deadline) {
  JobClient client = env.executeAsync(jobName);
  const bool ended = waitUntil(
      [&] {
        JobStatus s = client.getJobStatus();
        return s != JobStatus::kRunning && s != JobStatus::kCreated;
      },
      deadline);
  if (!ended) {
    ADD_FAILURE() << "job '" << jobName << "' did not end within " << deadline.count() << " s";
    client.cancel();
  }
  try {
    client.getJobExecutionResult();
  } catch (const JobExecutionException& e) {
    return e;
  }
  ADD_FAILURE() << "job '" << jobName << "' finished instead of failing";
  return std::nullopt;
}

TEST(FailureTest, ThrowingMapFailsExecuteNamingOperatorSubtaskAndCause) {
  StreamExecutionEnvironment env;
  env.fromSequence(1, 100).map(explodeAt42).name("Exploder").sinkTo(DiscardSink<int64_t>());
  JobExecutionException e = executeExpectingFailure(env, "failing map");
  EXPECT_EQ(e.getStatus(), JobStatus::kFailed);
  EXPECT_EQ(e.getJobName(), "failing map");
  const std::string what = e.what();
  EXPECT_THAT(what, HasSubstr("Exploder"));
  EXPECT_THAT(what, HasSubstr("subtask"));
  EXPECT_THAT(what, HasSubstr("std::runtime_error"));
  EXPECT_THAT(what, HasSubstr("boom at 42"));
}

TEST(FailureTest, ThrowInChainedSuccessorNamesTheSuccessor) {
  StreamExecutionEnvironment env;
  env.fromSequence(1, 100)
      .map([](const int64_t& v) { return v; })
      .name("Head")
      .map(explodeAt42)
      .name("Successor")
      .sinkTo(DiscardSink<int64_t>());
  const std::string what = executeExpectingFailure(env, "chained").what();
  EXPECT_THAT(what, HasSubstr("operator 'Successor'"));
  EXPECT_THAT(what, Not(HasSubstr("operator 'Head'")));
  EXPECT_THAT(what, HasSubstr("std::runtime_error"));
  EXPECT_THAT(what, HasSubstr("boom at 42"));
}

TEST(FailureTest, ThrowInChainedSuccessorOfANetworkInputNamesTheSuccessor) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  env.fromSequence(1, 100)
      .rebalance()
      .map([](const int64_t& v) { return v; })
      .name("Head")
      .map(explodeAt42)
      .name("Successor")
      .sinkTo(DiscardSink<int64_t>());
  const std::string what = executeExpectingFailure(env, "chained after network").what();
  EXPECT_THAT(what, HasSubstr("operator 'Successor'"));
  EXPECT_THAT(what, Not(HasSubstr("operator 'Head'")));
  EXPECT_THAT(what, HasSubstr("/2"));  // "subtask i/2"
  EXPECT_THAT(what, HasSubstr("boom at 42"));
}

TEST(FailureTest, ThrowingSourceGeneratorFailsTheJob) {
  StreamExecutionEnvironment env;
  env.fromGenerator(
         [](int64_t i) -> int64_t {
           if (i == 42) throw std::runtime_error("boom at 42");
           return i;
         },
         100)
      .sinkTo(DiscardSink<int64_t>());
  JobExecutionException e = executeExpectingFailure(env, "failing source");
  EXPECT_EQ(e.getStatus(), JobStatus::kFailed);
  const std::string what = e.what();
  EXPECT_THAT(what, HasSubstr("Generator Source"));
  EXPECT_THAT(what, HasSubstr("subtask"));
  EXPECT_THAT(what, HasSubstr("std::runtime_error"));
  EXPECT_THAT(what, HasSubstr("boom at 42"));
}

class FailingOpen final : public RichMapFunction<int64_t, int64_t> {
 public:
  void open() override { throw std::logic_error("cannot open"); }
  int64_t map(const int64_t& v) override { return v; }
};

TEST(FailureTest, ThrowInOpenFailsTheJob) {
  StreamExecutionEnvironment env;
  env.fromSequence(1, 100).map(FailingOpen()).name("Opener").sinkTo(DiscardSink<int64_t>());
  JobExecutionException e = executeExpectingFailure(env, "failing open");
  EXPECT_EQ(e.getStatus(), JobStatus::kFailed);
  const std::string what = e.what();
  EXPECT_THAT(what, HasSubstr("Opener"));
  EXPECT_THAT(what, HasSubstr("std::logic_error"));
  EXPECT_THAT(what, HasSubstr("cannot open"));
}

std::atomic<int> gOpened{0};
std::atomic<int> gClosed{0};

class CountOpenClose final : public RichMapFunction<int64_t, int64_t> {
 public:
  void open() override { gOpened.fetch_add(1); }
  void close() override { gClosed.fetch_add(1); }
  int64_t map(const int64_t& v) override { return v; }
};

TEST(FailureTest, CloseRunsAfterAFailure) {
  gOpened = 0;
  gClosed = 0;
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  env.fromSequence(1, 1000)
      .map(CountOpenClose())
      .name("Counted")
      .map(explodeAt42)
      .name("Exploder")
      .sinkTo(DiscardSink<int64_t>());
  executeExpectingFailure(env, "close after failure");
  EXPECT_EQ(gOpened.load(), 2);
  EXPECT_EQ(gClosed.load(), 2);
}

// The map runs in its own task; its source never ends. The failure must
// cancel the source, and the job must report the map's failure (not the
// source's cancellation).
TEST(FailureTest, FailureDownstreamOfUnboundedSourceEndsTheJob) {
  StreamExecutionEnvironment env;
  env.fromGenerator([](int64_t i) { return i; }, kUnboundedCount)
      .map(explodeAt42)
      .name("Exploder")
      .disableChaining()
      .sinkTo(DiscardSink<int64_t>());
  auto e = runWithDeadline(env, "unbounded upstream", std::chrono::seconds(30));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->getStatus(), JobStatus::kFailed);
  const std::string what = e->what();
  EXPECT_THAT(what, HasSubstr("operator 'Exploder'"));
  EXPECT_THAT(what, HasSubstr("boom at 42"));
  EXPECT_THAT(what, Not(HasSubstr("cancelled")));
}

TEST(FailureTest, FailureInKeyedDownstreamOfParallelUnboundedSourceEndsTheJob) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  env.fromGenerator([](int64_t i) { return i; }, kUnboundedCount)
      .keyBy([](const int64_t& v) { return v % 16; })
      .map(explodeAt42)
      .name("Exploder")
      .sinkTo(DiscardSink<int64_t>());
  auto e = runWithDeadline(env, "keyed unbounded upstream", std::chrono::seconds(30));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->getStatus(), JobStatus::kFailed);
  const std::string what = e->what();
  EXPECT_THAT(what, HasSubstr("operator 'Exploder'"));
  EXPECT_THAT(what, HasSubstr("boom at 42"));
}

class OutOfRangePartitioner final : public Partitioner<int64_t> {
 public:
  int partition(const int64_t& key, int numPartitions) override {
    return key == 7 ? numPartitions : 0;
  }
};

TEST(FailureTest, CustomPartitionerOutOfRangeFailsTheJob) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  env.fromSequence(1, 100)
      .partitionCustom(OutOfRangePartitioner(), [](const int64_t& v) { return v; })
      .map([](const int64_t& v) { return v; })
      .sinkTo(DiscardSink<int64_t>());
  const std::string what = executeExpectingFailure(env, "bad partitioner").what();
  EXPECT_THAT(what, HasSubstr("custom partitioner returned partition 2"));
}

// --- invalid jobs are rejected while they are built ------------------------------

// --- guards against misbehaving user sources and accumulators ----------------

using LateSplit = std::tuple<int64_t>;

// A source whose enumerator answers the first split request with "no more
// splits" and every later one with a split; `lateRequest` makes the reader ask
// again just before it ends, so that split arrives after the reader finished.
class ScriptedSource final : public Source<int64_t, LateSplit> {
 public:
  ScriptedSource(bool lateRequest, bool throwOnEnumeratorClose)
      : lateRequest_(lateRequest), throwOnClose_(throwOnEnumeratorClose) {}
  Boundedness getBoundedness() const override { return Boundedness::kBounded; }

  std::unique_ptr<SplitEnumerator<LateSplit>> createEnumerator(
      SplitEnumeratorContext<LateSplit>& context) const override {
    return std::make_unique<Enumerator>(context, throwOnClose_);
  }
  std::unique_ptr<SourceReader<int64_t, LateSplit>> createReader(
      SourceReaderContext& context) const override {
    return std::make_unique<Reader>(context, lateRequest_);
  }

 private:
  class Enumerator final : public SplitEnumerator<LateSplit> {
   public:
    Enumerator(SplitEnumeratorContext<LateSplit>& context, bool throwOnClose)
        : context_(context), throwOnClose_(throwOnClose) {}
    void handleSplitRequest(int subtask) override {
      if (requests_++ == 0) {
        context_.signalNoMoreSplits(subtask);
      } else {
        context_.assignSplit(LateSplit{7}, subtask);
      }
    }
    void addSplitsBack(std::vector<LateSplit>, int) override {}
    void addReader(int) override {}
    void close() override {
      if (throwOnClose_) throw std::runtime_error("enumerator close exploded");
    }

   private:
    SplitEnumeratorContext<LateSplit>& context_;
    bool throwOnClose_;
    int requests_ = 0;
  };

  class Reader final : public SourceReader<int64_t, LateSplit> {
   public:
    Reader(SourceReaderContext& context, bool lateRequest)
        : context_(context), lateRequest_(lateRequest) {}
    void start() override { context_.sendSplitRequest(); }
    InputStatus pollNext(ReaderOutput<int64_t>&) override {
      if (!noMoreSplits_) return InputStatus::kNothingAvailable;
      if (lateRequest_) context_.sendSplitRequest();
      return InputStatus::kEndOfInput;
    }
    void addSplits(std::vector<LateSplit>) override {}
    void notifyNoMoreSplits() override { noMoreSplits_ = true; }
    std::vector<LateSplit> snapshotState(int64_t) override { return {}; }

   private:
    SourceReaderContext& context_;
    bool lateRequest_;
    bool noMoreSplits_ = false;
  };

  bool lateRequest_;
  bool throwOnClose_;
};

TEST(FailureTest, ASplitAssignedAfterTheReaderEndedFailsInsteadOfVanishing) {
  StreamExecutionEnvironment env;
  env.fromSource(ScriptedSource(true, false), "Scripted").sinkTo(DiscardSink<int64_t>());
  JobExecutionException e = executeExpectingFailure(env, "late split");
  EXPECT_THAT(e.what(), HasSubstr("Source: Scripted"));
  EXPECT_THAT(e.what(), HasSubstr("1 split(s) were assigned after the source reader had finished"));
}

TEST(FailureTest, ScriptedSourceWithoutALateSplitFinishes) {
  // The control case for the test above: the same source, no late request.
  StreamExecutionEnvironment env;
  env.fromSource(ScriptedSource(false, false), "Scripted").sinkTo(DiscardSink<int64_t>());
  EXPECT_NO_THROW(env.execute("no late split"));
}

TEST(FailureTest, ThrowingEnumeratorCloseFailsTheJobInsteadOfTheProcess) {
  StreamExecutionEnvironment env;
  env.fromSource(ScriptedSource(false, true), "Scripted").sinkTo(DiscardSink<int64_t>());
  JobExecutionException e = executeExpectingFailure(env, "enumerator close");
  EXPECT_EQ(e.getStatus(), JobStatus::kFailed);
  EXPECT_THAT(e.what(), HasSubstr("source enumerator close() failed"));
  EXPECT_THAT(e.what(), HasSubstr("enumerator close exploded"));
}

class UncopyableAccumulator final : public Accumulator {
 public:
  Value getLocalValue() const override { return int64_t{0}; }
  void merge(const Accumulator&) override {}
  std::unique_ptr<Accumulator> clone() const override {
    throw std::runtime_error("clone exploded");
  }
};

class RegistersUncopyable final : public RichMapFunction<int64_t, int64_t> {
 public:
  void open() override { getRuntimeContext().addAccumulator("bad", &accumulator_); }
  int64_t map(const int64_t& v) override { return v; }

 private:
  UncopyableAccumulator accumulator_;
};

TEST(FailureTest, ThrowingAccumulatorFailsTheJobInsteadOfTheProcess) {
  StreamExecutionEnvironment env;
  env.fromSequence(1, 10)
      .map(RegistersUncopyable{})
      .name("Counting")
      .sinkTo(DiscardSink<int64_t>());
  JobExecutionException e = executeExpectingFailure(env, "accumulator");
  EXPECT_THAT(e.what(), HasSubstr("operator 'Counting'"));
  EXPECT_THAT(e.what(), HasSubstr("clone exploded"));
}

TEST(InvalidJobTest, ParallelismZeroIsRejected) {
  StreamExecutionEnvironment env;
  EXPECT_THROW(env.setParallelism(0), SluiceException);
  EXPECT_THROW(env.setMaxParallelism(0), SluiceException);
  auto mapped = env.fromSequence(1, 10).map([](const int64_t& v) { return v; });
  EXPECT_THROW(mapped.setParallelism(0), SluiceException);
  EXPECT_THROW(mapped.setMaxParallelism(0), SluiceException);
  EXPECT_THROW(mapped.sinkTo(DiscardSink<int64_t>()).setParallelism(-1), SluiceException);

  Configuration config;
  config.set(options::kParallelismDefault, 0);
  EXPECT_THROW(StreamExecutionEnvironment{config}, SluiceException);
}

TEST(InvalidJobTest, UidUsedTwiceIsRejected) {
  StreamExecutionEnvironment env;
  auto a = env.fromSequence(1, 10).map([](const int64_t& v) { return v; }).uid("same");
  auto b = a.map([](const int64_t& v) { return v + 1; });
  try {
    b.uid("same");
    FAIL() << "a second operator took uid 'same'";
  } catch (const SluiceException& e) {
    EXPECT_THAT(e.what(), HasSubstr("same"));
  }
}

TEST(InvalidJobTest, ParallelismAboveMaxParallelismIsRejectedBeforeRunning) {
  StreamExecutionEnvironment env;
  env.setMaxParallelism(4);
  env.fromSequence(1, 10)
      .map([](const int64_t& v) { return v; })
      .setParallelism(8)
      .sinkTo(DiscardSink<int64_t>());
  try {
    env.execute();
    FAIL() << "a job with parallelism 8 > max parallelism 4 ran";
  } catch (const JobExecutionException&) {
    FAIL() << "rejected only after it started";
  } catch (const SluiceException& e) {
    EXPECT_THAT(e.what(), HasSubstr("max parallelism"));
  }
}

TEST(InvalidJobTest, EmptyJobIsRejected) {
  StreamExecutionEnvironment env;
  EXPECT_THROW(env.execute(), SluiceException);
}

}  // namespace
}  // namespace failure_test
}  // namespace sluice::integration
