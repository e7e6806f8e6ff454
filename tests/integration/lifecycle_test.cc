// Job lifecycle through JobClient (executeAsync, status, cancel, result) and
// how configuration sets the parallelism operators actually run with.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sluice/sluice.h>

#include "integration/integration_util.h"

namespace sluice::integration {
namespace lifecycle_test {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int64_t> gMapped{0};

// Counts records as they flow: accumulators are only visible at the end.
int64_t countRecord(const int64_t& v) {
  gMapped.fetch_add(1, std::memory_order_relaxed);
  return v;
}

// Starts the unbounded job built in `env`, waits until records flow, cancels
// it and checks it ends as cancelled, promptly.
void runAndCancel(StreamExecutionEnvironment& env, const std::string& jobName) {
  gMapped = 0;
  JobClient client = env.executeAsync(jobName);
  EXPECT_EQ(client.getJobName(), jobName);
  ASSERT_TRUE(waitUntil([] { return gMapped.load() > 10000; }, std::chrono::seconds(20)))
      << "no records flowed";
  EXPECT_EQ(client.getJobStatus(), JobStatus::kRunning);

  const auto cancelledAt = Clock::now();
  client.cancel();
  try {
    client.getJobExecutionResult();
    ADD_FAILURE() << "a cancelled job reported a result";
  } catch (const JobExecutionException& e) {
    EXPECT_EQ(e.getStatus(), JobStatus::kCanceled) << e.what();
    EXPECT_THAT(e.what(), ::testing::HasSubstr("cancelled"));
  }
  const auto took = Clock::now() - cancelledAt;
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_EQ(client.getJobStatus(), JobStatus::kCanceled);
}

TEST(LifecycleTest, CancelUnboundedChainedJob) {
  StreamExecutionEnvironment env;
  env.fromGenerator([](int64_t i) { return i; }, kUnboundedCount)
      .map(countRecord)
      .sinkTo(DiscardSink<int64_t>());
  runAndCancel(env, "unbounded chained");
}

// With network edges between the tasks, a producer may be waiting for a free
// buffer when the job is cancelled: that is still a cancellation.
TEST(LifecycleTest, CancelUnboundedJobWithNetworkEdges) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  env.fromGenerator([](int64_t i) { return i; }, kUnboundedCount)
      .map(countRecord)
      .rebalance()
      .map([](const int64_t& v) { return v % 1000; })
      .disableChaining()
      .sinkTo(DiscardSink<int64_t>());
  runAndCancel(env, "unbounded with network");
}

// User code that wraps every exception, including the one that unwinds a task
// cancelled while it waits for a network buffer, must not turn the cancel into
// a failure.
TEST(LifecycleTest, CancelIsNotAFailureWhenUserCodeWrapsEveryException) {
  StreamExecutionEnvironment env;
  env.fromGenerator([](int64_t i) { return i; }, kUnboundedCount)
      .flatMap([](const int64_t& v, Collector<int64_t>& out) {
        countRecord(v);
        try {
          out.collect(v);
        } catch (const std::exception& e) {
          throw std::runtime_error(std::string("wrapped: ") + e.what());
        }
      })
      .rebalance()
      .map([](const int64_t& v) {
        std::this_thread::sleep_for(std::chrono::microseconds(20));  // a slow consumer
        return v;
      })
      .sinkTo(DiscardSink<int64_t>());
  runAndCancel(env, "wrapping user code");
}

// Cancelled while its tasks are still starting.
TEST(LifecycleTest, CancelRightAfterStart) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  env.fromGenerator([](int64_t i) { return i; }, kUnboundedCount)
      .rebalance()
      .map([](const int64_t& v) { return v % 7; })
      .sinkTo(DiscardSink<int64_t>());
  JobClient client = env.executeAsync("cancel at once");
  expectCancelledPromptly(client);
}

// A rate-limited source spends its time waiting for the next record's due
// time; cancel must wake it.
TEST(LifecycleTest, CancelRateLimitedSource) {
  gMapped = 0;
  StreamExecutionEnvironment env;
  env.fromGenerator([](int64_t i) { return i; }, kUnboundedCount, 20.0)
      .map(countRecord)
      .sinkTo(DiscardSink<int64_t>());
  JobClient client = env.executeAsync("rate limited");
  ASSERT_TRUE(waitUntil([] { return gMapped.load() > 0; }, std::chrono::seconds(10)));
  expectCancelledPromptly(client);
}

TEST(LifecycleTest, CancelAfterTheJobFinishedKeepsItFinished) {
  StreamExecutionEnvironment env;
  auto out = collectInto<int64_t>(env.fromSequence(1, 100));
  JobClient client = env.executeAsync("short");
  JobExecutionResult result = client.getJobExecutionResult();
  client.cancel();
  EXPECT_EQ(client.getJobStatus(), JobStatus::kFinished);
  EXPECT_EQ(result.getJobName(), "short");
  EXPECT_EQ(out->take().size(), 100u);
}

class SumAccumulator final : public RichMapFunction<int64_t, int64_t> {
 public:
  void open() override { getRuntimeContext().addAccumulator("sum", &sum_); }
  int64_t map(const int64_t& v) override {
    sum_.add(v);
    return v * v;
  }

 private:
  LongCounter sum_;
};

void buildBounded(StreamExecutionEnvironment& env,
                  std::shared_ptr<internal::CollectBuffer<int64_t>>& out) {
  env.setParallelism(3);
  out = collectInto<int64_t>(env.fromSequence(1, 20000).map(SumAccumulator()));
}

TEST(LifecycleTest, BoundedExecuteAsyncEqualsExecute) {
  std::shared_ptr<internal::CollectBuffer<int64_t>> out;

  StreamExecutionEnvironment syncEnv;
  buildBounded(syncEnv, out);
  JobExecutionResult syncResult = syncEnv.execute("bounded");
  std::vector<int64_t> syncOut = sorted(out->take());

  StreamExecutionEnvironment asyncEnv;
  buildBounded(asyncEnv, out);
  JobClient client = asyncEnv.executeAsync("bounded");
  JobExecutionResult asyncResult = client.getJobExecutionResult();
  // Asking again gives the same result.
  EXPECT_EQ(client.getJobExecutionResult().getAllAccumulatorResults(),
            asyncResult.getAllAccumulatorResults());
  std::vector<int64_t> asyncOut = sorted(out->take());
  EXPECT_EQ(client.getJobStatus(), JobStatus::kFinished);

  std::vector<int64_t> expected;
  for (int64_t v = 1; v <= 20000; ++v) expected.push_back(v * v);
  EXPECT_EQ(syncOut, expected);
  EXPECT_EQ(asyncOut, expected);
  EXPECT_EQ(syncResult.getJobName(), asyncResult.getJobName());
  EXPECT_EQ(syncResult.getAllAccumulatorResults(), asyncResult.getAllAccumulatorResults());
  EXPECT_EQ(asyncResult.getAccumulatorResult<int64_t>("sum"), int64_t{20000} * 20001 / 2);
  EXPECT_EQ(syncResult.getNumRecordsDropped(), asyncResult.getNumRecordsDropped());
}

// An environment runs a new, empty job after execute().
TEST(LifecycleTest, ExecuteConsumesTheBuiltJob) {
  StreamExecutionEnvironment env;
  auto first = collectInto<int64_t>(env.fromSequence(1, 10));
  env.execute("first");
  auto second = collectInto<int64_t>(env.fromSequence(11, 15));
  env.execute("second");
  EXPECT_EQ(sorted(first->take()), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(sorted(second->take()), (std::vector<int64_t>{11, 12, 13, 14, 15}));
}

// --- configuration -> parallelism ------------------------------------------------------

// (subtask, parallelism) of the subtask that mapped each record.
class ObserveParallelism final : public RichMapFunction<int64_t, std::pair<int, int>> {
 public:
  std::pair<int, int> map(const int64_t&) override {
    return {getRuntimeContext().getIndexOfThisSubtask(),
            getRuntimeContext().getNumberOfParallelSubtasks()};
  }
};

class CountSubtasks final : public RichMapFunction<int64_t, int64_t> {
 public:
  void open() override {
    getRuntimeContext().addAccumulator("subtasks", &subtasks_);
    getRuntimeContext().addAccumulator("parallelism", &parallelism_);
    subtasks_.add(1);
    parallelism_.add(getRuntimeContext().getNumberOfParallelSubtasks());
  }
  int64_t map(const int64_t& v) override { return v; }

 private:
  LongCounter subtasks_, parallelism_;
};

// The parallelism the map ran with: the number of its subtasks that opened,
// each of which also reported the parallelism it was told.
int observedParallelism(StreamExecutionEnvironment& env, int operatorParallelism = -1) {
  auto mapped = env.fromSequence(1, 1000).map(CountSubtasks());
  if (operatorParallelism > 0) mapped.setParallelism(operatorParallelism);
  mapped.sinkTo(DiscardSink<int64_t>());
  JobExecutionResult r = env.execute();
  const int64_t subtasks = r.getAccumulatorResult<int64_t>("subtasks");
  EXPECT_EQ(r.getAccumulatorResult<int64_t>("parallelism"), subtasks * subtasks);
  return static_cast<int>(subtasks);
}

TEST(ConfigurationTest, ParallelismDefaultFromConfiguration) {
  Configuration config;
  config.set(options::kParallelismDefault, 3);
  StreamExecutionEnvironment env(config);
  EXPECT_EQ(env.getParallelism(), 3);
  EXPECT_EQ(observedParallelism(env), 3);
}

TEST(ConfigurationTest, ParallelismDefaultFromConfigurationString) {
  Configuration config;
  config.setString("parallelism.default", "3");
  StreamExecutionEnvironment env(config);
  auto got = env.fromSequence(1, 3000).map(ObserveParallelism()).executeAndCollect();
  ASSERT_EQ(got.size(), 3000u);
  for (const auto& [subtask, parallelism] : got) {
    EXPECT_EQ(parallelism, 3);
    EXPECT_TRUE(subtask >= 0 && subtask < 3);
  }
}

TEST(ConfigurationTest, EnvironmentSetParallelismOverridesConfiguration) {
  Configuration config;
  config.set(options::kParallelismDefault, 3);
  StreamExecutionEnvironment env(config);
  env.setParallelism(2);
  EXPECT_EQ(observedParallelism(env), 2);
}

TEST(ConfigurationTest, OperatorSetParallelismOverridesEnvironment) {
  Configuration config;
  config.set(options::kParallelismDefault, 3);
  StreamExecutionEnvironment env(config);
  env.setParallelism(2);
  EXPECT_EQ(observedParallelism(env, 4), 4);
}

TEST(ConfigurationTest, CommandLineDashPWinsOverDashD) {
  const char* argv[] = {"job", "-p", "2", "-D", "parallelism.default=5", "--input", "x"};
  auto env = StreamExecutionEnvironment::getExecutionEnvironment(7, argv);
  EXPECT_EQ(env.getParallelism(), 2);
  EXPECT_EQ(env.getProgramArgs(), (std::vector<std::string>{"--input", "x"}));
  EXPECT_EQ(observedParallelism(env), 2);
}

TEST(ConfigurationTest, CommandLineDashDAlone) {
  const char* argv[] = {"job", "-D", "parallelism.default=5"};
  auto env = StreamExecutionEnvironment::getExecutionEnvironment(3, argv);
  EXPECT_EQ(env.getParallelism(), 5);
  EXPECT_EQ(observedParallelism(env), 5);
}

TEST(ConfigurationTest, BadCommandLineValueIsRejected) {
  const char* argv[] = {"job", "-D", "parallelism.default=four"};
  EXPECT_THROW(StreamExecutionEnvironment::getExecutionEnvironment(3, argv), SluiceException);
}

}  // namespace
}  // namespace lifecycle_test
}  // namespace sluice::integration
