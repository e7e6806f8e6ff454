// Helpers shared by the integration suites: sinks that collect into a buffer
// the test owns, a discarding sink, resident memory and test data (temporary
// directories and waiting come from tests/harness/).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/sluice.h>

#include "harness/temp_dir.h"
#include "harness/wait.h"

namespace sluice::integration {

using test::TempDir;
using test::waitUntil;

inline std::vector<std::string> readLines(const std::string& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// Attaches a CollectSink to `stream` and returns the buffer it fills, so a job
// with several sinks can be run with execute() and every output inspected.
template <class T>
std::shared_ptr<internal::CollectBuffer<T>> collectInto(const DataStream<T>& stream,
                                                        const std::string& name = "Collect") {
  auto buffer = std::make_shared<internal::CollectBuffer<T>>();
  stream.sinkTo(CollectSink<T>(buffer), name);
  return buffer;
}

// Drops every element.
template <class T>
class DiscardSink final : public Sink<T> {
 public:
  std::unique_ptr<SinkWriter<T>> createWriter(WriterInitContext&) const override {
    return std::make_unique<Writer>();
  }

 private:
  class Writer final : public SinkWriter<T> {
   public:
    void write(const T&, const SinkWriterContext&) override {}
  };
};

template <class T>
std::vector<T> sorted(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// Resident set size of this process in bytes (/proc/self/statm).
inline int64_t residentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long size = 0;
  long resident = 0;
  int n = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  if (n != 2) return -1;
  return static_cast<int64_t>(resident) * ::sysconf(_SC_PAGESIZE);
}

// SplitMix64: small, fast and fully deterministic test data.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  int between(int lo, int hi) {
    return lo + static_cast<int>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t state_;
};

// Cancels a running job and checks it ends CANCELED (not FAILED) within 5 s.
inline void expectCancelledPromptly(JobClient& client) {
  const auto cancelledAt = std::chrono::steady_clock::now();
  client.cancel();
  try {
    client.getJobExecutionResult();
    ADD_FAILURE() << "a cancelled job reported a result";
  } catch (const JobExecutionException& e) {
    EXPECT_EQ(e.getStatus(), JobStatus::kCanceled) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - cancelledAt, std::chrono::seconds(5));
  EXPECT_EQ(client.getJobStatus(), JobStatus::kCanceled);
}

}  // namespace sluice::integration
