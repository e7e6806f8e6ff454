#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/sinks.h>
#include <sluice/testing.h>

#include "harness/temp_dir.h"

namespace sinks_test {
namespace {

using namespace sluice;
namespace fs = std::filesystem;

struct Trade {
  std::string symbol;
  int64_t qty = 0;
  double price = 0;
};
SLUICE_STRUCT(Trade, symbol, qty, price)

using sluice::testing::HarnessRuntimeContext;

class FakeInitContext final : public WriterInitContext {
 public:
  FakeInitContext(int subtask, int parallelism)
      : subtask_(subtask), parallelism_(parallelism), runtime_("test", subtask, parallelism, 128) {}
  int getSubtaskId() const override { return subtask_; }
  int getNumberOfParallelSubtasks() const override { return parallelism_; }
  RuntimeContext& getRuntimeContext() override { return runtime_; }

 private:
  int subtask_;
  int parallelism_;
  HarnessRuntimeContext runtime_;
};

class NoContext final : public SinkWriterContext {
 public:
  std::optional<int64_t> timestamp() const override { return std::nullopt; }
  int64_t currentWatermark() const override { return 0; }
};

const NoContext kCtx;

// Writes `values` through one writer of `sink` for subtask i of p, then
// flushes and closes it, as the runtime does at the end of input.
template <class T>
void writeAll(const Sink<T>& sink, int subtask, int parallelism, const std::vector<T>& values) {
  FakeInitContext init(subtask, parallelism);
  auto writer = sink.createWriter(init);
  for (const T& v : values) writer->write(v, kCtx);
  writer->flush(true);
  writer->close();
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string readStream(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  return out;
}

using test::TempDir;

std::string exceptionMessage(const std::function<void()>& f) {
  try {
    f();
  } catch (const SluiceException& e) {
    return e.what();
  }
  return "<no exception>";
}

// ---------------------------------------------------------------------------
// PrintSink

TEST(PrintSinkTest, PrefixesLikeFlinksPrintSinkOutputWriter) {
  EXPECT_EQ(internal::printPrefix("", 0, 1), "");
  EXPECT_EQ(internal::printPrefix("id", 0, 1), "id> ");
  EXPECT_EQ(internal::printPrefix("", 1, 3), "2> ");
  EXPECT_EQ(internal::printPrefix("id", 2, 3), "id:3> ");
}

TEST(PrintSinkTest, PrintsToStringOfEachElementWithPrefix) {
  struct Case {
    std::string id;
    int subtask;
    int parallelism;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"", 0, 1, "(a,1)\n(b,2)\n"},
      {"sink", 0, 1, "sink> (a,1)\nsink> (b,2)\n"},
      {"", 1, 4, "2> (a,1)\n2> (b,2)\n"},
      {"sink", 3, 4, "sink:4> (a,1)\nsink:4> (b,2)\n"},
  };
  for (const auto& c : cases) {
    std::FILE* f = std::tmpfile();
    ASSERT_NE(f, nullptr);
    auto sink = PrintSink<std::pair<std::string, int>>::toStream(f, c.id);
    writeAll<std::pair<std::string, int>>(sink, c.subtask, c.parallelism, {{"a", 1}, {"b", 2}});
    EXPECT_EQ(readStream(f), c.want) << "id '" << c.id << "' p " << c.parallelism;
    std::fclose(f);
  }
}

TEST(PrintSinkTest, ConcurrentWritersNeverInterleaveMidLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  auto sink = PrintSink<std::string>::toStream(f);
  constexpr int kWriters = 4;
  constexpr int kLines = 2000;
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      FakeInitContext init(w, kWriters);
      auto writer = sink.createWriter(init);
      // Long lines make a torn write likely if lines were not written whole.
      for (int i = 0; i < kLines; ++i) {
        writer->write(std::to_string(i) + std::string(300, static_cast<char>('a' + w)), kCtx);
      }
      writer->flush(true);
      writer->close();
    });
  }
  for (auto& t : threads) t.join();
  std::istringstream in(readStream(f));
  std::fclose(f);
  std::vector<int> next(kWriters, 0);
  std::string line;
  int total = 0;
  while (std::getline(in, line)) {
    ++total;
    ASSERT_GE(line.size(), 3u);
    const int w = line[0] - '1';
    ASSERT_TRUE(w >= 0 && w < kWriters) << line;
    const std::string expected = std::to_string(w + 1) + "> " + std::to_string(next[w]) +
                                 std::string(300, static_cast<char>('a' + w));
    ASSERT_EQ(line, expected);
    ++next[w];
  }
  EXPECT_EQ(total, kWriters * kLines);
}

// ---------------------------------------------------------------------------
// TextFileSink

TEST(TextFileSinkTest, ParallelismOneWritesTheFile) {
  TempDir dir;
  const std::string path = dir / "out.txt";
  TextFileSink<std::tuple<std::string, int64_t>> sink(path);
  writeAll<std::tuple<std::string, int64_t>>(sink, 0, 1, {{"hello", 1}, {"world", 22}});
  EXPECT_EQ(readFile(path), "(hello,1)\n(world,22)\n");
}

TEST(TextFileSinkTest, ParallelismThreeWritesNumberedFilesInADirectory) {
  TempDir dir;
  const std::string path = dir / "out";
  TextFileSink<int> sink(path);
  for (int s = 0; s < 3; ++s) writeAll<int>(sink, s, 3, {s * 10, s * 10 + 1});
  ASSERT_TRUE(fs::is_directory(path));
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(path)) names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"1", "2", "3"}));
  EXPECT_EQ(readFile(path + "/1"), "0\n1\n");
  EXPECT_EQ(readFile(path + "/2"), "10\n11\n");
  EXPECT_EQ(readFile(path + "/3"), "20\n21\n");
}

TEST(TextFileSinkTest, SubtasksCreateTheDirectoryConcurrently) {
  TempDir dir;
  const std::string path = dir / "race";
  TextFileSink<int> sink(path);
  constexpr int kP = 8;
  std::vector<std::thread> threads;
  for (int s = 0; s < kP; ++s) threads.emplace_back([&, s] { writeAll<int>(sink, s, kP, {s}); });
  for (auto& t : threads) t.join();
  for (int s = 0; s < kP; ++s) {
    EXPECT_EQ(readFile(path + "/" + std::to_string(s + 1)), std::to_string(s) + "\n");
  }
}

TEST(TextFileSinkTest, LargeOutputIsWrittenCompletely) {
  TempDir dir;
  const std::string path = dir / "big.txt";
  TextFileSink<int64_t> sink(path);
  std::vector<int64_t> values;
  std::string want;
  for (int64_t i = 0; i < 200000; ++i) {
    values.push_back(i * 7919);
    want += std::to_string(i * 7919) + "\n";
  }
  ASSERT_GT(want.size(), internal::TextOutputFile::kBufferSize * 3);
  writeAll(sink, 0, 1, values);
  EXPECT_EQ(readFile(path), want);
}

TEST(TextFileSinkTest, NoOverwriteFailsOnAnExistingFile) {
  TempDir dir;
  const std::string path = dir / "exists.txt";
  std::ofstream(path) << "old\n";
  TextFileSink<int> sink(path);
  EXPECT_EQ(exceptionMessage([&] { writeAll<int>(sink, 0, 1, {1}); }),
            "writeAsText: '" + path +
                "' already exists and WriteMode::kNoOverwrite does not replace it (use "
                "WriteMode::kOverwrite)");
  EXPECT_EQ(readFile(path), "old\n");
}

TEST(TextFileSinkTest, OverwriteReplacesAFileAndTruncatesIt) {
  TempDir dir;
  const std::string path = dir / "exists.txt";
  std::ofstream(path) << "a much longer old content\nwith two lines\n";
  TextFileSink<int> sink(path, WriteMode::kOverwrite);
  writeAll<int>(sink, 0, 1, {7});
  EXPECT_EQ(readFile(path), "7\n");
}

TEST(TextFileSinkTest, OverwriteWithParallelismOneReplacesADirectory) {
  TempDir dir;
  const std::string path = dir / "was_dir";
  fs::create_directories(path + "/inner");
  std::ofstream(path + "/1") << "old\n";
  TextFileSink<int> sink(path, WriteMode::kOverwrite);
  writeAll<int>(sink, 0, 1, {5});
  ASSERT_TRUE(fs::is_regular_file(path));
  EXPECT_EQ(readFile(path), "5\n");
}

TEST(TextFileSinkTest, ParallelOutputOverAnExistingPath) {
  TempDir dir;
  // An existing file where the directory goes: an error without overwrite...
  const std::string path = dir / "was_file";
  std::ofstream(path) << "old\n";
  TextFileSink<int> keep(path);
  EXPECT_EQ(exceptionMessage([&] { writeAll<int>(keep, 0, 2, {1}); }),
            "writeAsText: '" + path +
                "' already exists and WriteMode::kNoOverwrite does not replace it (use "
                "WriteMode::kOverwrite)");
  // ...replaced by the directory with it.
  TextFileSink<int> replace(path, WriteMode::kOverwrite);
  writeAll<int>(replace, 0, 2, {1});
  writeAll<int>(replace, 1, 2, {2});
  EXPECT_EQ(readFile(path + "/1"), "1\n");
  EXPECT_EQ(readFile(path + "/2"), "2\n");

  // An existing directory is used; only an existing subtask file is an error.
  const std::string d = dir / "existing_dir";
  fs::create_directory(d);
  std::ofstream(d + "/2") << "old\n";
  TextFileSink<int> sink(d);
  writeAll<int>(sink, 0, 2, {10});
  EXPECT_EQ(readFile(d + "/1"), "10\n");
  EXPECT_NE(exceptionMessage([&] { writeAll<int>(sink, 1, 2, {20}); }).find("already exists"),
            std::string::npos);
  TextFileSink<int> overwrite(d, WriteMode::kOverwrite);
  writeAll<int>(overwrite, 1, 2, {20});
  EXPECT_EQ(readFile(d + "/2"), "20\n");
}

TEST(TextFileSinkTest, CannotCreateNamesThePath) {
  TempDir dir;
  const std::string path = dir / "no/such/dir/out.txt";
  TextFileSink<int> sink(path);
  EXPECT_EQ(exceptionMessage([&] { writeAll<int>(sink, 0, 1, {1}); }),
            "writeAsText: cannot create '" + path + "': No such file or directory");
}

TEST(TextFileSinkTest, WriteErrorNamesThePath) {
  // /dev/full accepts open() and fails every write with ENOSPC.
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "/dev/full is not available";
  TextFileSink<std::string> sink("/dev/full", WriteMode::kOverwrite);
  FakeInitContext init(0, 1);
  auto writer = sink.createWriter(init);
  writer->write("x", kCtx);
  EXPECT_EQ(exceptionMessage([&] { writer->flush(true); }),
            "writeAsText: cannot write '/dev/full': No space left on device");
  writer->close();
}

// ---------------------------------------------------------------------------
// CsvFileSink

TEST(CsvFileSinkTest, TuplesPairsAndStructs) {
  TempDir dir;
  CsvFileSink<std::tuple<int, std::string, double>> tuples(dir / "t.csv");
  writeAll<std::tuple<int, std::string, double>>(tuples, 0, 1, {{1, "a", 2.5}, {2, "b", 1.0}});
  EXPECT_EQ(readFile(dir / "t.csv"), "1,a,2.5\n2,b,1.0\n");

  CsvFileSink<std::pair<std::string, int64_t>> pairs(dir / "p.csv", WriteMode::kNoOverwrite, "\r\n",
                                                     "|");
  writeAll<std::pair<std::string, int64_t>>(pairs, 0, 1, {{"x", 1}, {"y", -2}});
  EXPECT_EQ(readFile(dir / "p.csv"), "x|1\r\ny|-2\r\n");

  CsvFileSink<Trade> trades(dir / "trades");
  writeAll<Trade>(trades, 0, 2, {{"ACME", 10, 99.5}});
  writeAll<Trade>(trades, 1, 2, {{"INIT", 3, 1e-5}});
  EXPECT_EQ(readFile(dir / "trades/1"), "ACME,10,99.5\n");
  EXPECT_EQ(readFile(dir / "trades/2"), "INIT,3,1.0E-5\n");
}

TEST(CsvFileSinkTest, FieldsAreNotQuoted) {
  // As Flink's writeAsCsv: a delimiter inside a field is written as is.
  TempDir dir;
  CsvFileSink<std::tuple<std::string, std::pair<int, int>>> sink(dir / "q.csv");
  writeAll<std::tuple<std::string, std::pair<int, int>>>(sink, 0, 1, {{"a,b \"c\"", {1, 2}}});
  EXPECT_EQ(readFile(dir / "q.csv"), "a,b \"c\",(1,2)\n");
}

TEST(CsvFileSinkTest, ErrorsNameWriteAsCsv) {
  TempDir dir;
  const std::string path = dir / "exists.csv";
  std::ofstream(path) << "old\n";
  CsvFileSink<std::pair<int, int>> sink(path);
  EXPECT_EQ(exceptionMessage([&] {
              writeAll<std::pair<int, int>>(sink, 0, 1, {{1, 2}});
            }).rfind("writeAsCsv: '" + path + "' already exists", 0),
            0u);
}

// ---------------------------------------------------------------------------
// CollectSink

TEST(CollectSinkTest, CollectsFromEveryWriter) {
  auto buffer = std::make_shared<internal::CollectBuffer<std::string>>();
  CollectSink<std::string> sink(buffer);
  std::vector<std::thread> threads;
  for (int s = 0; s < 3; ++s) {
    threads.emplace_back([&, s] {
      std::vector<std::string> values;
      for (int i = 0; i < 1000; ++i) values.push_back(std::to_string(s) + ":" + std::to_string(i));
      writeAll<std::string>(sink, s, 3, values);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(buffer->size(), 3000u);
  auto got = buffer->take();
  EXPECT_EQ(buffer->size(), 0u);
  ASSERT_EQ(got.size(), 3000u);
  // Each subtask's elements keep their order.
  std::vector<int> next(3, 0);
  for (const auto& v : got) {
    const int s = v[0] - '0';
    EXPECT_EQ(v, std::to_string(s) + ":" + std::to_string(next[s]));
    ++next[s];
  }
}

}  // namespace
}  // namespace sinks_test
