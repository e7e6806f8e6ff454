// window-bench: the cost of the window operators on their own (Google
// Benchmark), without source, network exchange or sink: the operator a
// windowed job builds is taken from its stream graph and fed records
// directly, as the task would after the exchange. See bench/README.md
// ("Windows").
//
// The input is sluice-bench's window workload: element i is (key i % keys,
// value i % 1000, event time i / 1000 ms), a watermark every 100K elements
// (100 ms of event time). Each benchmark runs both operators, the sliced
// (pipeline.window.slicing on) and the general one (off), so their ratio is
// measured in one run:
//
//   Tumbling/<keys>/<sliced>   1 s tumbling windows, sum(1) (window-tumbling)
//   Sliding/<keys>/<sliced>    10 s / 2 s sliding windows, count and max
//                              of field 1 (window-sliding)
//   Cumulating/<keys>/<sliced> 10 s / 1 s cumulating windows, sum(1)
//   SlidingProcessing/<keys>/<sliced>  10 s / 2 s sliding processing-time
//                              windows, count and max of field 1; the
//                              task's clock moves 1 ms every 1000 elements
//                              and fires the timers due (as event time does
//                              above), watermarks are only forwarded
//   Snapshot/<keys>/<sliced>   the synchronous part of a checkpoint
//                              (snapshotState) with one live 1 s tumbling
//                              window per key: what the task spends on it
//                              before it goes on; counters report the
//                              asynchronous write (write_ms) and what the
//                              task spends when the checkpoint completes
//                              (complete_ms: the sliced operator removes
//                              its slices from the backend again)
//   SessionSnapshot/<keys>/<session>  the same with one open 1 s-gap
//                              event-time session per key (the session
//                              operator, or the general one)
//   ReduceSnapshot/<keys>      the same for the keyed running reduce
//
// Counters: ns per element (per snapshot), and elements per second.
#include <chrono>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>

#include <benchmark/benchmark.h>

#include <sluice/sluice.h>
#include <sluice/testing.h>

namespace {

using Event = std::tuple<int64_t, int64_t, int64_t>;  // key, value, timestamp

class CountAndMax final : public sluice::AggregateFunction<Event, Event, Event> {
 public:
  Event createAccumulator() override { return {0, 0, -1}; }
  Event add(const Event& e, Event acc) override {
    return {std::get<0>(e), std::get<1>(acc) + 1, std::max(std::get<2>(acc), std::get<1>(e))};
  }
  Event getResult(const Event& acc) override { return acc; }
  Event merge(Event a, Event b) override {
    return {std::get<0>(a), std::get<1>(a) + std::get<1>(b),
            std::max(std::get<2>(a), std::get<2>(b))};
  }
};

// Counts what the operator emits.
class CountingOutput final : public sluice::Output<Event> {
 public:
  void collect(const sluice::StreamRecord<Event>& r) override {
    ++records;
    checksum += std::get<1>(r.value);
  }
  void emitWatermark(sluice::Watermark) override {}
  void emitWatermarkStatus(sluice::WatermarkStatus) override {}
  int64_t records = 0;
  int64_t checksum = 0;
};

// kRunningSum is no window: the keyed running reduce (KeyedReduceOperator),
// for the Snapshot rows; kSession (1 s gap) is for them too.
enum class Windows { kTumbling, kSliding, kCumulating, kSlidingProcessing, kRunningSum, kSession };

// One subtask of the window operator of a job, ready for records.
class WindowTask {
 public:
  WindowTask(Windows windows, bool slicing)
      : context_("window", 0, 1, sluice::kDefaultMaxParallelism) {
    sluice::Configuration config;
    config.set(sluice::options::kPipelineWindowSlicing, slicing);
    sluice::StreamExecutionEnvironment env(config);
    auto keyed =
        env.fromElements(Event{0, 0, 0}).keyBy([](const Event& e) { return std::get<0>(e); });
    using std::chrono::seconds;
    int id = -1;
    switch (windows) {
      case Windows::kTumbling:
        id = keyed.window(sluice::TumblingEventTimeWindows::of(seconds(1))).sum(1).getId();
        break;
      case Windows::kSliding:
        id = keyed.window(sluice::SlidingEventTimeWindows::of(seconds(10), seconds(2)))
                 .aggregate(CountAndMax())
                 .getId();
        break;
      case Windows::kCumulating:
        id = keyed.window(sluice::CumulativeEventTimeWindows::of(seconds(10), seconds(1)))
                 .sum(1)
                 .getId();
        break;
      case Windows::kSlidingProcessing:
        id = keyed.window(sluice::SlidingProcessingTimeWindows::of(seconds(10), seconds(2)))
                 .aggregate(CountAndMax())
                 .getId();
        processingTime_ = true;
        break;
      case Windows::kSession:
        id = keyed.window(sluice::EventTimeSessionWindows::withGap(seconds(1))).sum(1).getId();
        break;
      case Windows::kRunningSum:
        id = keyed
                 .reduce([](const Event& a, const Event& b) {
                   return Event{std::get<0>(a), std::get<1>(a) + std::get<1>(b), std::get<2>(b)};
                 })
                 .getId();
        break;
    }
    const sluice::StreamNode& node = env.getStreamGraph().node(id);
    const char* fast = windows == Windows::kSession ? "SessionWindow(" : "SlicingWindow(";
    if (windows != Windows::kRunningSum && (node.name.rfind(fast, 0) == 0) != slicing) {
      throw std::runtime_error("unexpected window operator " + node.name);
    }
    op_ = node.factory->createOperator();
    context_.config().set(sluice::options::kStateBackendType, std::string("hashmap"));
    op_->setup(context_, output_);
    op_->initializeState(nullptr);
    op_->open();
    input_ = static_cast<sluice::Input<Event>*>(op_->inputPointer(0));
    record_.hasTimestamp = true;
  }
  ~WindowTask() { op_->close(); }

  // Elements [from, to) of the workload, with its watermarks; in
  // processing time, the clock at i / 1000 ms after its start.
  void feed(int64_t from, int64_t to, int64_t keys) {
    for (int64_t i = from; i < to; ++i) {
      if (processingTime_ && i % 1000 == 0) context_.setProcessingTime(kClockStart + i / 1000);
      record_.value = Event{i % keys, i % 1000, i / 1000};
      record_.timestamp = i / 1000;
      input_->processElement(record_);
      if (i % 100'000 == 99'999) op_->processWatermark(0, sluice::Watermark{i / 1000 - 1});
    }
  }
  sluice::StreamOperatorBase& op() { return *op_; }
  const CountingOutput& output() const { return output_; }

 private:
  sluice::testing::HarnessOperatorContext context_;
  CountingOutput output_;
  std::unique_ptr<sluice::StreamOperatorBase> op_;
  sluice::Input<Event>* input_ = nullptr;
  sluice::StreamRecord<Event> record_;
  bool processingTime_ = false;
  static constexpr int64_t kClockStart = 1'000'000;  // the harness clock's start
};

void run(benchmark::State& state, Windows windows) {
  const int64_t keys = state.range(0);
  const bool slicing = state.range(1) != 0;
  WindowTask task(windows, slicing);
  constexpr int64_t kBatch = 1'000'000;
  int64_t next = 0;
  for (auto _ : state) {
    task.feed(next, next + kBatch, keys);
    next += kBatch;
  }
  state.SetItemsProcessed(next);
  state.counters["ns/element"] = benchmark::Counter(
      static_cast<double>(next), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["fired"] = static_cast<double>(task.output().records);
  state.SetLabel(slicing ? "sliced" : "general");
}

void BM_Tumbling(benchmark::State& state) { run(state, Windows::kTumbling); }
void BM_Sliding(benchmark::State& state) { run(state, Windows::kSliding); }
void BM_Cumulating(benchmark::State& state) { run(state, Windows::kCumulating); }
void BM_SlidingProcessing(benchmark::State& state) { run(state, Windows::kSlidingProcessing); }

// snapshotState() of `task` after one element per key (all in the first
// window), repeatedly; counters: the asynchronous write and what the
// operator does when the checkpoint completes, per snapshot.
void snapshots(benchmark::State& state, WindowTask& task, int64_t keys) {
  task.feed(0, keys, keys);
  int64_t checkpoint = 0;
  double writeSeconds = 0;
  double completeSeconds = 0;
  size_t bytes = 0;
  for (auto _ : state) {
    sluice::OperatorStateSnapshot s = task.op().snapshotState(++checkpoint);
    state.PauseTiming();
    const auto start = std::chrono::steady_clock::now();
    std::ostringstream out;
    s.resolveTimers();  // the general operator writes its timers here
    s.keyedState->writeTo(out);
    writeSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bytes = out.str().size();
    s = {};
    const auto completed = std::chrono::steady_clock::now();
    task.op().notifyCheckpointComplete(checkpoint);
    completeSeconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - completed).count();
    state.ResumeTiming();
  }
  state.counters["write_ms"] = writeSeconds * 1000.0 / static_cast<double>(checkpoint);
  state.counters["complete_ms"] = completeSeconds * 1000.0 / static_cast<double>(checkpoint);
  state.counters["bytes"] = static_cast<double>(bytes);
}

void BM_Snapshot(benchmark::State& state) {
  const bool slicing = state.range(1) != 0;
  WindowTask task(Windows::kTumbling, slicing);
  snapshots(state, task, state.range(0));
  state.SetLabel(slicing ? "sliced" : "general");
}

void BM_SessionSnapshot(benchmark::State& state) {
  const bool slicing = state.range(1) != 0;
  WindowTask task(Windows::kSession, slicing);
  snapshots(state, task, state.range(0));
  state.SetLabel(slicing ? "session" : "general");
}

void BM_ReduceSnapshot(benchmark::State& state) {
  WindowTask task(Windows::kRunningSum, false);
  snapshots(state, task, state.range(0));
}

void args(benchmark::internal::Benchmark* b) {
  for (int64_t keys : {10'000, 1'000'000}) {
    for (int sliced : {1, 0}) b->Args({keys, sliced});
  }
}

BENCHMARK(BM_Tumbling)->Apply(args)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Sliding)->Apply(args)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cumulating)->Apply(args)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SlidingProcessing)->Apply(args)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Snapshot)->Apply(args)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_SessionSnapshot)->Apply(args)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_ReduceSnapshot)
    ->Arg(10'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
