// Streaming WordCount end to end on the mini-cluster: a generated corpus of
// over a million Zipf-distributed words, counted by flatMap -> keyBy -> sum,
// checked against counts the test computes itself.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/sluice.h>

#include "integration/integration_util.h"

namespace sluice::integration {
namespace wordcount_test {
namespace {

using WordCount = std::pair<std::string, int64_t>;

constexpr int64_t kMinWords = 1'000'000;
constexpr int kVocabulary = 3000;

struct Corpus {
  std::vector<std::string> lines;
  std::unordered_map<std::string, int64_t> counts;  // the reference
  int64_t words = 0;
};

// Distinct lower-case words of 2..7 letters built from the word's rank.
std::vector<std::string> makeVocabulary() {
  static const char* kSyllables[] = {"ka", "lo", "mi", "ne", "su", "ta", "ri", "po",
                                     "da", "fe", "gu", "hi", "jo", "be", "zu", "ve"};
  std::vector<std::string> words;
  for (int i = 0; i < kVocabulary; ++i) {
    std::string w;
    int v = i;
    do {
      w += kSyllables[v % 16];
      v /= 16;
    } while (v > 0);
    if (i % 3 == 0) w += 'x';  // vary the length a little more
    words.push_back(std::move(w));
  }
  return words;
}

const Corpus& corpus() {
  static const Corpus c = [] {
    Corpus out;
    const std::vector<std::string> vocab = makeVocabulary();
    // Zipf with exponent 1: P(rank r) ~ 1 / r.
    std::vector<double> cdf(vocab.size());
    double total = 0;
    for (size_t r = 0; r < vocab.size(); ++r) {
      total += 1.0 / static_cast<double>(r + 1);
      cdf[r] = total;
    }
    Rng rng(20240607);
    while (out.words < kMinWords) {
      const int n = rng.between(5, 20);
      std::string line;
      for (int i = 0; i < n; ++i) {
        const double u = rng.uniform() * total;
        size_t r = static_cast<size_t>(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
        if (r >= vocab.size()) r = vocab.size() - 1;
        if (i > 0) line += ' ';
        line += vocab[r];
        ++out.counts[vocab[r]];
        ++out.words;
      }
      out.lines.push_back(std::move(line));
    }
    return out;
  }();
  return c;
}

void tokenize(const std::string& line, Collector<WordCount>& out) {
  size_t start = 0;
  while (start < line.size()) {
    size_t end = line.find(' ', start);
    if (end == std::string::npos) end = line.size();
    if (end > start) out.collect(WordCount(line.substr(start, end - start), 1));
    start = end + 1;
  }
}

// Running counts: for every word w seen n_w times, exactly the emissions
// (w, 1), (w, 2), ..., (w, n_w); the final count is the largest.
void expectRunningCounts(const std::vector<WordCount>& emitted, const Corpus& c) {
  ASSERT_EQ(static_cast<int64_t>(emitted.size()), c.words);
  std::unordered_map<std::string, std::vector<int64_t>> seen;
  seen.reserve(c.counts.size());
  for (const auto& [word, count] : emitted) seen[word].push_back(count);
  ASSERT_EQ(seen.size(), c.counts.size());
  int bad = 0;
  for (auto& [word, counts] : seen) {
    auto it = c.counts.find(word);
    if (it == c.counts.end()) {
      ADD_FAILURE() << "unexpected word '" << word << "'";
      if (++bad > 10) return;
      continue;
    }
    const int64_t n = it->second;
    std::sort(counts.begin(), counts.end());
    bool ok = static_cast<int64_t>(counts.size()) == n;
    for (int64_t i = 0; ok && i < n; ++i) ok = counts[static_cast<size_t>(i)] == i + 1;
    if (!ok) {
      ADD_FAILURE() << "word '" << word << "': expected counts 1.." << n << ", got "
                    << counts.size() << " emissions, max " << (counts.empty() ? 0 : counts.back());
      if (++bad > 10) return;
    }
    EXPECT_EQ(counts.empty() ? 0 : counts.back(), n) << word;
  }
}

TEST(WordCountCorpusTest, CorpusIsLargeAndSkewed) {
  const Corpus& c = corpus();
  EXPECT_GE(c.words, kMinWords);
  // Zipf: the most frequent word is far more common than the median one.
  int64_t maxCount = 0;
  for (const auto& [w, n] : c.counts) maxCount = std::max(maxCount, n);
  EXPECT_GT(maxCount, c.words / 20);
  EXPECT_GT(c.counts.size(), 2000u);
}

class WordCountTest : public ::testing::TestWithParam<int> {};

TEST_P(WordCountTest, RunningCountsMatchReference) {
  const Corpus& c = corpus();
  StreamExecutionEnvironment env;
  env.setParallelism(GetParam());
  std::vector<WordCount> emitted =
      env.fromCollection(c.lines)
          .flatMap(tokenize)
          .name("Tokenizer")
          .keyBy([](const WordCount& wc) { return wc.first; })
          .sum(1)
          .name("Counter")
          .executeAndCollect("WordCount p=" + std::to_string(GetParam()));
  expectRunningCounts(emitted, c);
}

INSTANTIATE_TEST_SUITE_P(Parallelism, WordCountTest, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return "p" + std::to_string(info.param); });

// "(word,17)" -> {"word", 17}
bool parseWordCount(const std::string& line, WordCount& out) {
  if (line.size() < 5 || line.front() != '(' || line.back() != ')') return false;
  const size_t comma = line.rfind(',');
  if (comma == std::string::npos || comma < 2) return false;
  out.first = line.substr(1, comma - 1);
  try {
    size_t used = 0;
    const std::string digits = line.substr(comma + 1, line.size() - comma - 2);
    out.second = std::stoll(digits, &used);
    return used == digits.size();
  } catch (...) {
    return false;
  }
}

TEST(WordCountFileTest, ReadTextFileToWriteAsTextAtParallelism2) {
  const Corpus& c = corpus();
  TempDir tmp("wordcount");
  const std::string input = tmp.file("input.txt");
  {
    std::ofstream out(input, std::ios::binary);
    for (const auto& line : c.lines) out << line << '\n';
  }
  const std::string outDir = tmp.file("counts");

  StreamExecutionEnvironment env;
  env.setParallelism(2);
  env.readTextFile(input)
      .flatMap(tokenize)
      .keyBy([](const WordCount& wc) { return wc.first; })
      .sum(1)
      .writeAsText(outDir);
  env.execute("WordCount files");

  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(outDir)) {
    files.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(sorted(files), (std::vector<std::string>{"1", "2"}));

  std::vector<WordCount> emitted;
  emitted.reserve(static_cast<size_t>(c.words));
  std::unordered_map<std::string, std::string> fileOfWord;  // keyBy: one subtask per word
  int malformed = 0;
  for (const char* name : {"1", "2"}) {
    for (const std::string& line : readLines(outDir + "/" + name)) {
      WordCount wc;
      if (parseWordCount(line, wc)) {
        auto [it, inserted] = fileOfWord.emplace(wc.first, name);
        if (!inserted && it->second != name) {
          ADD_FAILURE() << "word '" << wc.first << "' is in both files";
        }
        emitted.push_back(std::move(wc));
      } else if (++malformed <= 5) {
        ADD_FAILURE() << "malformed line in file " << name << ": '" << line << "'";
      }
    }
  }
  EXPECT_EQ(malformed, 0);
  expectRunningCounts(emitted, c);
}

}  // namespace
}  // namespace wordcount_test
}  // namespace sluice::integration
