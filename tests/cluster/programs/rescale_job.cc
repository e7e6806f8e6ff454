// The job tests/cluster/cluster_test.cc stops with a savepoint at one
// parallelism and resumes at another: keyed state, event-time timers and
// windows must all come through. Output goes through the exactly-once
// FileSink, one line per result:
//
//   c,<key>,<n>             the running count of a key reached n (keyed state)
//   w,<key>,<start>,<count> a 1 s tumbling event-time window fired
//   t,<key>,<timestamp>     an event-time timer fired
//
// Record i has key i % 50 and event time i * 10 ms, in order; every 100th
// record of a key (by index) registers a timer 500 ms after its time. All of it is
// deterministic: the expected lines follow from the record count alone.
// (Every record i with (i / 50) % 100 == 0 registers the timer.)
//
//   sluice_rescale_job --output DIR --checkpoints DIR [--records N] [--rate R]
//                      [--mode rescale|backpressure] [-D key=value ...]
//
// --mode backpressure: an unbounded generator keyed into a sink that sleeps
// 1 ms per record (the backpressure test cancels it).
#include <chrono>
#include <cstdint>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <sluice/sluice.h>

namespace {

constexpr int64_t kKeys = 50;

using Event = std::pair<int64_t, int64_t>;  // key, event time

class CountAndTimers final : public sluice::KeyedProcessFunction<int64_t, Event, std::string> {
 public:
  void open() override {
    count_ = &getRuntimeContext().getState(sluice::ValueStateDescriptor<int64_t>("count"));
  }
  void processElement(const Event& e, Context& ctx, sluice::Collector<std::string>& out) override {
    const int64_t n = count_->value().value_or(0) + 1;
    count_->update(n);
    out.collect("c," + std::to_string(e.first) + "," + std::to_string(n));
    // Decided by the record, not by the count: two source subtasks' records
    // of one key arrive in an order of their own.
    if ((e.second / 10 / kKeys) % 100 == 0) {
      ctx.timerService().registerEventTimeTimer(e.second + 500);
    }
  }
  void onTimer(int64_t timestamp, OnTimerContext& ctx,
               sluice::Collector<std::string>& out) override {
    out.collect("t," + std::to_string(ctx.getCurrentKey()) + "," + std::to_string(timestamp));
  }

 private:
  sluice::ValueState<int64_t>* count_ = nullptr;
};

class WindowLine final
    : public sluice::ProcessWindowFunction<std::pair<int64_t, int64_t>, std::string, int64_t,
                                           sluice::TimeWindow> {
 public:
  void process(const int64_t& key, Context& ctx,
               const std::vector<std::pair<int64_t, int64_t>>& counts,
               sluice::Collector<std::string>& out) override {
    out.collect("w," + std::to_string(key) + "," + std::to_string(ctx.window().getStart()) + "," +
                std::to_string(counts.front().second));
  }
};

}  // namespace

int main(int argc, char** argv) {
  try {
    auto env = sluice::StreamExecutionEnvironment::getExecutionEnvironment(argc, argv);
    std::string output, checkpoints, mode = "rescale";
    int64_t records = 12000;
    double rate = 4000;
    const auto& args = env.getProgramArgs();
    for (size_t i = 0; i < args.size(); ++i) {
      auto value = [&]() -> std::string {
        if (i + 1 >= args.size()) throw std::invalid_argument(args[i] + " expects a value");
        return args[++i];
      };
      if (args[i] == "--output") {
        output = value();
      } else if (args[i] == "--checkpoints") {
        checkpoints = value();
      } else if (args[i] == "--records") {
        records = std::stoll(value());
      } else if (args[i] == "--rate") {
        rate = std::stod(value());
      } else if (args[i] == "--mode") {
        mode = value();
      } else {
        throw std::invalid_argument("unknown argument '" + args[i] + "'");
      }
    }
    if (output.empty()) throw std::invalid_argument("--output DIR is required");
    if (!checkpoints.empty()) env.getCheckpointConfig().setCheckpointStorage(checkpoints);

    if (mode == "backpressure") {
      env.fromGenerator([](int64_t i) { return i; }, INT64_MAX, 0)
          .uid("source")
          .keyBy([](const int64_t& i) { return i % kKeys; })
          .map([](const int64_t& i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            return std::to_string(i);
          })
          .uid("slow")
          .sinkTo(sluice::FileSink<std::string>::forRowFormat(
                      output, sluice::SimpleStringEncoder<std::string>())
                      .build(),
                  "File Sink")
          .uid("file-sink");
      env.execute("backpressure job");
      return 0;
    }

    auto strategy =
        sluice::WatermarkStrategy<Event>::forMonotonousTimestamps().withTimestampAssigner(
            [](const Event& e) { return e.second; });
    auto events = env.fromGenerator(
                         [](int64_t i) {
                           return Event{i % kKeys, i * 10};
                         },
                         records, rate)
                      .uid("source")
                      .assignTimestampsAndWatermarks(strategy)
                      .uid("timestamps");
    auto counts = events.keyBy([](const Event& e) { return e.first; })
                      .process(CountAndTimers())
                      .uid("count-and-timers");
    auto windows =
        events.map([](const Event& e) {
                return std::pair<int64_t, int64_t>{e.first, 1};
              })
            .uid("ones")
            .keyBy([](const std::pair<int64_t, int64_t>& p) { return p.first; })
            .window(sluice::TumblingEventTimeWindows::of(std::chrono::seconds(1)))
            .reduce(
                [](const std::pair<int64_t, int64_t>& a, const std::pair<int64_t, int64_t>& b) {
                  return std::pair<int64_t, int64_t>{a.first, a.second + b.second};
                },
                WindowLine())
            .uid("windows");
    counts.unionWith(windows)
        .sinkTo(sluice::FileSink<std::string>::forRowFormat(
                    output, sluice::SimpleStringEncoder<std::string>())
                    .withBucketAssigner(sluice::BasePathBucketAssigner<std::string>())
                    .build(),
                "File Sink")
        .uid("file-sink");
    env.execute("rescale job");
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "rescale_job: " << e.what() << "\n";
    return 1;
  }
}
