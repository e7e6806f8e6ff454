// A source task handed a checkpoint trigger after a newer one declines it,
// so the older checkpoint fails at once, naming why, instead of waiting for
// its timeout: its barrier would follow the newer one downstream, where
// every task gives it up. The coordinator sends triggers in id order
// (checkpoint_coordinator_test.cc); here the newer trigger reaches the
// readers around it, straight through the source's coordinator.
#include <atomic>
#include <chrono>
#include <cstdint>
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

class CountingSink final : public Sink<int64_t> {
 public:
  explicit CountingSink(std::shared_ptr<std::atomic<int64_t>> seen) : seen_(std::move(seen)) {}

  class Writer final : public SinkWriter<int64_t> {
   public:
    explicit Writer(std::shared_ptr<std::atomic<int64_t>> seen) : seen_(std::move(seen)) {}
    void write(const int64_t&, const SinkWriterContext&) override { ++*seen_; }

   private:
    std::shared_ptr<std::atomic<int64_t>> seen_;
  };

  std::unique_ptr<SinkWriter<int64_t>> createWriter(WriterInitContext&) const override {
    return std::make_unique<Writer>(seen_);
  }

 private:
  std::shared_ptr<std::atomic<int64_t>> seen_;
};

TEST(CheckpointOrderTest, ASourceDeclinesATriggerOlderThanItsLastCheckpoint) {
  auto seen = std::make_shared<std::atomic<int64_t>>(0);
  StreamExecutionEnvironment env;
  env.setParallelism(1);
  env.fromSequence(1, 1'000'000'000'000)
      .uid("numbers")
      .rebalance()
      .sinkTo(CountingSink(seen), "Counting Sink")
      .uid("count");
  auto graph = std::make_shared<StreamGraph>(env.getStreamGraph());
  graph->jobName = "checkpoint order";
  graph->resolve();
  MiniClusterOptions options;
  // Periodic checkpoints on, but none due while the test runs; a
  // checkpoint nobody declines fails after 20 s.
  options.configuration.set(options::kExecutionCheckpointingInterval, std::chrono::hours(1));
  options.configuration.set(options::kExecutionCheckpointingTimeout, std::chrono::seconds(20));

  auto run = JobRun::start(graph, options);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (seen->load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GT(seen->load(), 0) << "the job did not start";

  // Checkpoint 5 reaches the running reader first (the coordinator knows
  // nothing of it and drops its acknowledgements).
  auto* source = dynamic_cast<SourceCoordinatorHolder*>(run->scheduler().sourceCoordinator(0));
  ASSERT_NE(source, nullptr);
  (void)source->snapshotAndTrigger(CheckpointBarrier{5, 0}, checkpoint::CheckpointOptions{});
  // Then the coordinator's checkpoint 1.
  std::string error;
  try {
    run->triggerCheckpoint();
  } catch (const SluiceException& e) {
    error = e.what();
  }
  EXPECT_THAT(error, HasSubstr("Checkpoint 1 failed: the task took checkpoint 5 before it"));
  // A declined checkpoint does not count against the tolerable failures:
  // the job runs on.
  EXPECT_EQ(run->state(), JobStatus::kRunning);
  run->cancel();
  EXPECT_EQ(run->wait().state, JobStatus::kCanceled);
}

}  // namespace
}  // namespace checkpoint_order_test
