// A source task handed a checkpoint trigger after a newer one declines it,
// so the older checkpoint fails at once, naming why, instead of waiting for
// its timeout: its barrier would follow the newer one downstream, where
// every task gives it up. The coordinator sends triggers in id order
// (checkpoint_coordinator_test.cc); here the newer trigger reaches the
// readers around it, straight through the source's coordinator. A
// stop-with-savepoint --drain so declined has not ended event time nor
// stopped the source.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sluice/sluice.h>

#include "runtime/mini_cluster.h"
#include "runtime/scheduler.h"
#include "runtime/source_coordinator_holder.h"

namespace checkpoint_order_test {
namespace {

using namespace sluice;
using namespace sluice::runtime;
using ::testing::HasSubstr;

// Counts the records it is given and keeps the highest watermark it saw.
struct Seen {
  std::atomic<int64_t> records{0};
  std::atomic<int64_t> maxWatermark{kMinTimestamp};
};

class CountingSink final : public Sink<int64_t> {
 public:
  explicit CountingSink(std::shared_ptr<Seen> seen) : seen_(std::move(seen)) {}

  class Writer final : public SinkWriter<int64_t> {
   public:
    explicit Writer(std::shared_ptr<Seen> seen) : seen_(std::move(seen)) {}
    void write(const int64_t&, const SinkWriterContext& context) override {
      if (context.currentWatermark() > seen_->maxWatermark.load()) {
        seen_->maxWatermark.store(context.currentWatermark());
      }
      ++seen_->records;
    }

   private:
    std::shared_ptr<Seen> seen_;
  };

  std::unique_ptr<SinkWriter<int64_t>> createWriter(WriterInitContext&) const override {
    return std::make_unique<Writer>(seen_);
  }

 private:
  std::shared_ptr<Seen> seen_;
};

// A parallelism-1 job of an unbounded sequence into a CountingSink, started
// and seen running, with periodic checkpoints on but none due. With
// `bounded`, a first pipeline (its source is vertex 0) counts 1..10 into it.
std::shared_ptr<JobRun> startCounting(const std::shared_ptr<Seen>& seen,
                                      const std::shared_ptr<Seen>& bounded = nullptr) {
  StreamExecutionEnvironment env;
  env.setParallelism(1);
  if (bounded) {
    env.fromSequence(1, 10)
        .uid("ten")
        .rebalance()
        .sinkTo(CountingSink(bounded), "Ten")
        .uid("ten-sink");
  }
  env.fromSequence(1, 1'000'000'000'000)
      .uid("numbers")
      .rebalance()
      .sinkTo(CountingSink(seen), "Counting Sink")
      .uid("count");
  auto graph = std::make_shared<StreamGraph>(env.getStreamGraph());
  graph->jobName = "checkpoint order";
  graph->resolve();
  MiniClusterOptions options;
  // A checkpoint nobody declines fails after 20 s.
  options.configuration.set(options::kExecutionCheckpointingInterval, std::chrono::hours(1));
  options.configuration.set(options::kExecutionCheckpointingTimeout, std::chrono::seconds(20));
  auto run = JobRun::start(graph, options);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (seen->records.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GT(seen->records.load(), 0) << "the job did not start";
  return run;
}

// Checkpoint `id` reaches the running source reader straight from its
// coordinator (the checkpoint coordinator knows nothing of it and drops its
// acknowledgements).
void triggerAtTheSource(JobRun& run, int64_t id) {
  auto* source = dynamic_cast<SourceCoordinatorHolder*>(run.scheduler().sourceCoordinator(0));
  ASSERT_NE(source, nullptr);
  (void)source->snapshotAndTrigger(CheckpointBarrier{id, 0}, checkpoint::CheckpointOptions{});
}

// The coordinator's checkpoint 1, after the source took 5, fails at once
// naming why; a declined checkpoint does not count against the tolerable
// failures, so the job runs on (and is then cancelled).
void expectCheckpointOneDeclinedThenCancel(JobRun& run) {
  std::string error;
  try {
    run.triggerCheckpoint();
  } catch (const SluiceException& e) {
    error = e.what();
  }
  EXPECT_THAT(error, HasSubstr("Checkpoint 1 failed: the task took checkpoint 5 before it"));
  EXPECT_EQ(run.state(), JobStatus::kRunning);
  run.cancel();
  EXPECT_EQ(run.wait().state, JobStatus::kCanceled);
}

TEST(CheckpointOrderTest, ASourceDeclinesATriggerOlderThanItsLastCheckpoint) {
  auto seen = std::make_shared<Seen>();
  auto run = startCounting(seen);
  triggerAtTheSource(*run, 5);
  expectCheckpointOneDeclinedThenCancel(*run);
}

TEST(CheckpointOrderTest, ADeclinedDrainingStopNeitherEndsEventTimeNorStopsTheSource) {
  auto seen = std::make_shared<Seen>();
  auto run = startCounting(seen);
  triggerAtTheSource(*run, 5);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("sluice-checkpoint-order-" + std::to_string(::getpid()));
  std::string error;
  try {
    run->triggerSavepoint(dir.string(), /*terminate=*/true, /*drain=*/true);
  } catch (const SluiceException& e) {
    error = e.what();
  }
  EXPECT_THAT(error, HasSubstr("the task took checkpoint 5 before it"));
  // The source reads on, and what it sends after the declined stop was
  // never behind the maximum watermark.
  const int64_t before = seen->records.load();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (seen->records.load() < before + 10'000 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE(seen->records.load(), before + 10'000) << "the source stopped";
  EXPECT_LT(seen->maxWatermark.load(), Watermark::max().timestamp);
  EXPECT_EQ(run->state(), JobStatus::kRunning);
  run->cancel();
  EXPECT_EQ(run->wait().state, JobStatus::kCanceled);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// A task that has finished its input takes later checkpoints without
// barriers; handed an older one after a newer, it declines it as a running
// task does, instead of leaving it to its timeout.
TEST(CheckpointOrderTest, AFinishedTaskDeclinesATriggerOlderThanItsLastCheckpoint) {
  auto run = startCounting(std::make_shared<Seen>(), std::make_shared<Seen>());
  // The bounded source (vertex 0) finishes; the job runs on.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto finished = [&] {
    return run->scheduler().subtaskStatuses().at(0).at(0).state == "FINISHED";
  };
  while (!finished() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(finished()) << "the bounded source did not finish";
  triggerAtTheSource(*run, 5);  // the finished source task takes checkpoint 5
  expectCheckpointOneDeclinedThenCancel(*run);
}

}  // namespace
}  // namespace checkpoint_order_test
