// Cancelling a job whose producer task is blocked on backpressure (waiting
// for a network buffer) is a cancellation, not a failure: the job ends
// CANCELED with no error.
//
// Made deterministic with a one-segment pool and a sink that blocks inside
// its first record: the source fills its only 64-byte segment part-way
// through its 5th record (13 bytes each), hands it over and, inside the same
// emit, asks for the next segment, which cannot come while the sink holds the
// first one. So once the sink has its first record, the source is in (or
// entering) BufferPool::request() and the cancel must unwind it.
#include <cstdint>
#include <latch>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include <sluice/sluice.h>

#include "runtime/mini_cluster.h"

namespace task_cancel_test {
namespace {

using namespace sluice;
using namespace sluice::runtime;

struct Latches {
  std::latch firstRecord{1};
  std::latch release{1};
};

class BlockingSink final : public Sink<int64_t> {
 public:
  explicit BlockingSink(std::shared_ptr<Latches> latches) : latches_(std::move(latches)) {}

  class Writer final : public SinkWriter<int64_t> {
   public:
    explicit Writer(std::shared_ptr<Latches> latches) : latches_(std::move(latches)) {}
    void write(const int64_t&, const SinkWriterContext&) override {
      if (first_) {
        first_ = false;
        latches_->firstRecord.count_down();
        latches_->release.wait();
      }
    }

   private:
    std::shared_ptr<Latches> latches_;
    bool first_ = true;
  };

  std::unique_ptr<SinkWriter<int64_t>> createWriter(WriterInitContext&) const override {
    return std::make_unique<Writer>(latches_);
  }

 private:
  std::shared_ptr<Latches> latches_;
};

TEST(TaskCancelTest, CancelWhileBlockedOnBackpressureEndsCanceledNotFailed) {
  auto latches = std::make_shared<Latches>();
  StreamExecutionEnvironment env;
  env.fromSequence(1, 1'000'000'000).rebalance().sinkTo(BlockingSink(latches), "Blocking Sink");
  auto graph = std::make_shared<StreamGraph>(env.getStreamGraph());
  graph->jobName = "cancel under backpressure";
  graph->bufferTimeoutMs = -1;  // only full buffers: no timer flush in between
  graph->resolve();
  MiniClusterOptions options;
  options.segmentSize = 64;
  options.buffersPerChannel = 1;
  options.floatingBuffers = 0;

  auto run = JobRun::start(graph, options);
  ASSERT_EQ(run->jobGraph().vertices.size(), 2u);
  latches->firstRecord.wait();
  run->cancel();
  latches->release.count_down();
  JobOutcome outcome = run->wait();
  EXPECT_STREQ(jobStatusName(outcome.state), "CANCELED") << outcome.error;
  EXPECT_EQ(outcome.error, "");
}

}  // namespace
}  // namespace task_cancel_test
