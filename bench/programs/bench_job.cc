// The job `sluice-bench --cluster` runs twice per measurement: as the
// executable (embedded mode, `-p 2`) and as the library through `sluice run`
// on a JobManager and two TaskManagers. One pipeline, deterministic, so both
// modes do exactly the same work (see bench/README.md, "Cluster mode").
//
//   sluice_bench_job --workload keyed-sum|wordcount --records N
//                    [--check-dir DIR] [-p P] [-D key=value ...]
//
// keyed-sum: generator of (i % 10000, 1) -> keyBy(f0) -> sum(1) -> sink, as
// sluice_bench.cc's keyed-sum. wordcount: a generator of lines of Zipf(1.0)
// words over a fixed 10000-word vocabulary -> flatMap split on spaces ->
// keyBy(word) -> sum(1) -> sink; N counts words, not lines. Line i and its
// words are a pure function of i, so every process generates the same corpus.
//
// The sink discards records but folds them into a count and a wrapping sum
// of the emitted values; at close each subtask writes "<count> <sum>" to
// DIR/sink-<subtask> (when --check-dir is given), which the benchmark checks,
// so no stage can be optimised away and a lost record shows.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <sluice/sluice.h>

namespace {

using KeyValue = std::pair<int64_t, int64_t>;
using WordCount = std::pair<std::string, int64_t>;

constexpr int64_t kNumKeys = 10000;      // keyed-sum key space
constexpr size_t kVocabulary = 10000;    // wordcount vocabulary
constexpr uint64_t kSeed = 20240917;     // vocabulary and corpus
constexpr int64_t kWordsPerCycle = 130;  // line i has 4 + i % 13 words: 130 per 13 lines

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The vocabulary (distinct lower-case words of length 2..12) and the Zipf
// CDF over it; built once per process, on first use.
struct Vocabulary {
  std::vector<std::string> words;
  std::vector<double> cdf;

  static const Vocabulary& get() {
    static const Vocabulary v = build();
    return v;
  }

 private:
  static Vocabulary build() {
    Vocabulary v;
    uint64_t state = kSeed;
    std::unordered_set<std::string> seen;
    while (v.words.size() < kVocabulary) {
      std::string w(2 + splitmix64(state) % 11, 'a');
      for (char& c : w) c = static_cast<char>('a' + splitmix64(state) % 26);
      if (seen.insert(w).second) v.words.push_back(std::move(w));
    }
    double total = 0;
    for (size_t r = 0; r < kVocabulary; ++r) {
      total += 1.0 / static_cast<double>(r + 1);  // s = 1.0
      v.cdf.push_back(total);
    }
    for (double& c : v.cdf) c /= total;
    return v;
  }
};

// Words before line i.
int64_t wordsBefore(int64_t line) {
  const int64_t r = line % 13;
  return kWordsPerCycle * (line / 13) + 4 * r + r * (r - 1) / 2;
}

// Lines needed for `words` words (the last one may be cut short).
int64_t linesFor(int64_t words) {
  int64_t lines = words / kWordsPerCycle * 13;
  while (wordsBefore(lines) < words) ++lines;
  return lines;
}

// Line i of a corpus of `totalWords` words.
std::string corpusLine(int64_t i, int64_t totalWords) {
  const Vocabulary& v = Vocabulary::get();
  const int64_t n = std::min<int64_t>(4 + i % 13, totalWords - wordsBefore(i));
  uint64_t state = kSeed ^ (static_cast<uint64_t>(i) * 0xd1b54a32d192ed03ULL);
  std::string line;
  line.reserve(static_cast<size_t>(n) * 8);
  for (int64_t k = 0; k < n; ++k) {
    const double u = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
    size_t r = static_cast<size_t>(std::lower_bound(v.cdf.begin(), v.cdf.end(), u) - v.cdf.begin());
    if (r >= kVocabulary) r = kVocabulary - 1;
    if (k > 0) line += ' ';
    line += v.words[r];
  }
  return line;
}

void tokenize(const std::string& line, sluice::Collector<WordCount>& out) {
  size_t start = 0;
  while (start <= line.size()) {
    size_t end = line.find(' ', start);
    if (end == std::string::npos) end = line.size();
    if (end > start) out.collect(WordCount{line.substr(start, end - start), 1});
    start = end + 1;
  }
}

// Counts records and sums their values (second field); see the top.
template <class T>
class CheckSink final : public sluice::Sink<T> {
 public:
  explicit CheckSink(std::string dir) : dir_(std::move(dir)) {}
  std::unique_ptr<sluice::SinkWriter<T>> createWriter(
      sluice::WriterInitContext& context) const override {
    return std::make_unique<Writer>(dir_, context.getSubtaskId());
  }

 private:
  class Writer final : public sluice::SinkWriter<T> {
   public:
    Writer(std::string dir, int subtask) : dir_(std::move(dir)), subtask_(subtask) {}
    void write(const T& value, const sluice::SinkWriterContext&) override {
      ++count_;
      sum_ += static_cast<uint64_t>(value.second);
    }
    void flush(bool endOfInput) override {
      if (!endOfInput || dir_.empty()) return;
      const std::string path = dir_ + "/sink-" + std::to_string(subtask_);
      std::FILE* f = std::fopen(path.c_str(), "w");
      if (f == nullptr) throw std::runtime_error("cannot write '" + path + "'");
      std::fprintf(f, "%" PRId64 " %" PRIu64 "\n", count_, sum_);
      if (std::fclose(f) != 0) throw std::runtime_error("cannot write '" + path + "'");
    }

   private:
    std::string dir_;
    int subtask_;
    int64_t count_ = 0;
    uint64_t sum_ = 0;
  };
  std::string dir_;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    auto env = sluice::StreamExecutionEnvironment::getExecutionEnvironment(argc, argv);
    std::string workload, checkDir;
    int64_t records = -1;
    const auto& args = env.getProgramArgs();
    for (size_t i = 0; i < args.size(); ++i) {
      auto value = [&]() -> std::string {
        if (i + 1 >= args.size()) throw std::invalid_argument(args[i] + " expects a value");
        return args[++i];
      };
      if (args[i] == "--workload") {
        workload = value();
      } else if (args[i] == "--records") {
        records = std::stoll(value());
      } else if (args[i] == "--check-dir") {
        checkDir = value();
      } else {
        throw std::invalid_argument("unknown argument '" + args[i] + "'");
      }
    }
    if (records < 0) throw std::invalid_argument("--records N is required");

    if (workload == "keyed-sum") {
      auto pairs = [](int64_t i) { return KeyValue{i % kNumKeys, 1}; };
      env.fromGenerator(pairs, records)
          .keyBy([](const KeyValue& kv) { return kv.first; })
          .sum(1)
          .sinkTo(CheckSink<KeyValue>(checkDir), "Discard");
    } else if (workload == "wordcount") {
      env.fromGenerator([records](int64_t i) { return corpusLine(i, records); }, linesFor(records))
          .flatMap(tokenize)
          .name("Tokenizer")
          .keyBy([](const WordCount& wc) { return wc.first; })
          .sum(1)
          .name("Counter")
          .sinkTo(CheckSink<WordCount>(checkDir), "Discard");
    } else {
      throw std::invalid_argument("--workload must be keyed-sum or wordcount, got '" + workload +
                                  "'");
    }
    env.execute("bench-" + workload);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "sluice_bench_job: " << e.what() << "\n";
    return 1;
  }
}
