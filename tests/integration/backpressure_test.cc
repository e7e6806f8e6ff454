// Backpressure: a fast endless source feeding a slow sink must not buffer
// without bound. The network pool (ARCHITECTURE.md, "Data path") caps what is
// in flight, so memory stays flat while the source is throttled to the
// sink's pace. Takes about 3 seconds (Slow prefix).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/sluice.h>

#include "integration/integration_util.h"

namespace sluice::integration {
namespace backpressure_test {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int64_t> gProduced{0};
std::atomic<int64_t> gConsumed{0};

// A slow consumer: ~100 µs per record. The sleep is the simulated workload.
class SlowSink final : public Sink<std::string> {
 public:
  std::unique_ptr<SinkWriter<std::string>> createWriter(WriterInitContext&) const override {
    return std::make_unique<Writer>();
  }

 private:
  class Writer final : public SinkWriter<std::string> {
   public:
    void write(const std::string& s, const SinkWriterContext&) override {
      if (s.size() != 64)
        throw std::runtime_error("corrupt record of size " + std::to_string(s.size()));
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      gConsumed.fetch_add(1, std::memory_order_relaxed);
    }
  };
};

TEST(SlowBackpressureTest, SlowSinkBoundsMemoryAndThrottlesTheSource) {
  gProduced = 0;
  gConsumed = 0;
  StreamExecutionEnvironment env;
  env.setParallelism(1);
  env.fromGenerator(
         [](int64_t i) {
           std::string s = std::to_string(i);
           s.resize(64, '.');
           return s;
         },
         kUnboundedCount)
      .map([](const std::string& s) {
        gProduced.fetch_add(1, std::memory_order_relaxed);
        return s;
      })
      .setParallelism(1)
      .sinkTo(SlowSink(), "Slow Sink")
      .disableChaining();

  const auto start = Clock::now();
  JobClient client = env.executeAsync("backpressure");
  ASSERT_TRUE(waitUntil([] { return gConsumed.load() > 0; }, std::chrono::seconds(10)))
      << "the sink received nothing";

  // Sample resident memory every 250 ms for ~3 s; the baseline is taken at
  // 1 s, once buffers, threads and allocator arenas have settled.
  std::this_thread::sleep_until(start + std::chrono::seconds(1));
  const int64_t baseline = residentBytes();
  ASSERT_GT(baseline, 0);
  int64_t peak = baseline;
  int64_t maxInFlight = 0;
  while (Clock::now() < start + std::chrono::seconds(3)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    peak = std::max(peak, residentBytes());
    const int64_t consumed = gConsumed.load();  // read first: the difference over-estimates
    maxInFlight = std::max(maxInFlight, gProduced.load() - consumed);
    EXPECT_EQ(client.getJobStatus(), JobStatus::kRunning);
  }

  const int64_t growth = peak - baseline;
  RecordProperty("rssGrowthBytes", std::to_string(growth));
  RecordProperty("maxInFlightRecords", std::to_string(maxInFlight));
  RecordProperty("consumedRecords", std::to_string(gConsumed.load()));
  EXPECT_LT(growth, int64_t{32} << 20)
      << "resident memory grew by " << (growth >> 20) << " MiB under backpressure";
  EXPECT_GT(gConsumed.load(), 0);
  // The pool holds at most 2 + 8 segments of 32 KiB between map and sink, ~73
  // bytes per record: a few thousand records. Without backpressure the
  // source would be millions ahead.
  EXPECT_LT(maxInFlight, 100000) << "produced " << gProduced.load() << ", consumed "
                                 << gConsumed.load();

  expectCancelledPromptly(client);
}

}  // namespace
}  // namespace backpressure_test
}  // namespace sluice::integration
