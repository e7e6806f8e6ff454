// Windowed WordCount: words with event timestamps, counted per word in 5 s
// tumbling event-time windows, as in Flink's WindowWordCount example.
//
//   windowed_wordcount                     200,000 generated words
//   windowed_wordcount --events N          N generated words
//   windowed_wordcount --output PATH       write the counts to PATH
//   windowed_wordcount -p 2 -D key=value   any Flink-style setting
//
// The generator is deterministic: word i is kWords[(i * 3) % 8] with event
// time i * 100 + (i % 5) * 50 ms, so up to 200 ms out of order; the
// watermark allows 1 s of disorder. Each line of output is
// "word,count,windowStart,windowEnd" for one fired window.
#include <chrono>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <sluice/sluice.h>

namespace {

constexpr const char* kWords[] = {"to", "be", "or", "not", "that", "is", "the", "question"};

struct TimedWord {
  std::string word;
  int64_t timestamp = 0;
};

using Count = std::pair<std::string, int64_t>;

// Adds the window's bounds to the count the reduce kept.
class WithWindow final
    : public sluice::ProcessWindowFunction<Count, std::string, std::string, sluice::TimeWindow> {
 public:
  void process(const std::string& word, Context& ctx, const std::vector<Count>& counts,
               sluice::Collector<std::string>& out) override {
    out.collect(word + "," + std::to_string(counts.front().second) + "," +
                std::to_string(ctx.window().getStart()) + "," +
                std::to_string(ctx.window().getEnd()));
  }
};

}  // namespace

template <>
struct sluice::TypeSerializer<TimedWord> {
  static void serialize(const TimedWord& v, DataOutputView& out) {
    out.writeString(v.word);
    out.writeI64(v.timestamp);
  }
  static void deserialize(TimedWord& v, DataInputView& in) {
    in.readString(v.word);
    v.timestamp = in.readI64();
  }
  static std::string schema() { return "TimedWord{word:string,timestamp:int64}"; }
};

int main(int argc, char** argv) {
  try {
    auto env = sluice::StreamExecutionEnvironment::getExecutionEnvironment(argc, argv);
    int64_t events = 200'000;
    std::string output;
    const auto& args = env.getProgramArgs();
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--events" && i + 1 < args.size()) {
        events = std::stoll(args[++i]);
      } else if (args[i] == "--output" && i + 1 < args.size()) {
        output = args[++i];
      } else {
        std::cerr << "windowed_wordcount: unknown argument '" << args[i]
                  << "' (expected --events N, --output PATH, -p N, -D key=value)\n";
        return 2;
      }
    }

    auto strategy =
        sluice::WatermarkStrategy<TimedWord>::forBoundedOutOfOrderness(std::chrono::seconds(1))
            .withTimestampAssigner([](const TimedWord& w) { return w.timestamp; });
    auto counts = env.fromGenerator(
                         [](int64_t i) {
                           return TimedWord{kWords[(i * 3) % 8], i * 100 + (i % 5) * 50};
                         },
                         events)
                      .assignTimestampsAndWatermarks(strategy)
                      .map([](const TimedWord& w) {
                        return Count{w.word, 1};
                      })
                      .keyBy([](const Count& c) { return c.first; })
                      .window(sluice::TumblingEventTimeWindows::of(std::chrono::seconds(5)))
                      .reduce(
                          [](const Count& a, const Count& b) {
                            return Count{a.first, a.second + b.second};
                          },
                          WithWindow());
    if (output.empty()) {
      counts.print();
    } else {
      counts.writeAsText(output, sluice::WriteMode::kOverwrite);
    }
    env.execute("Windowed WordCount");
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "windowed_wordcount: " << e.what() << "\n";
    return 1;
  }
}
