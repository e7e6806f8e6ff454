// Order-independent checksums over output rows, shared by the Sluice jobs and
// the hand-written baselines.
//
// A row's hash is a 64-bit hash of its fields in a fixed order (integers by
// value, doubles by bit pattern, strings by bytes, each with its length, so
// ("ab", "c") and ("a", "bc") differ). String hashes come from
// std::hash<std::string_view>, so checksums are comparable within one
// binary, not across standard libraries. A result's checksum is the number of
// rows and the wrapping sum of their hashes: equal multisets of rows give
// equal checksums whatever order and subtask they came from.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <sluice/sluice.h>

#include "nexmark/model.h"

namespace sluice::nexmark {

struct Checksum {
  int64_t rows = 0;
  uint64_t sum = 0;

  void add(uint64_t rowHash) {
    ++rows;
    sum += rowHash;
  }
  friend bool operator==(const Checksum&, const Checksum&) = default;
  std::string toString() const;
};

class RowHasher {
 public:
  RowHasher& add(int64_t v) { return mixIn(static_cast<uint64_t>(v)); }
  RowHasher& add(double v) { return mixIn(std::bit_cast<uint64_t>(v)); }
  RowHasher& add(std::string_view s) {
    // libstdc++'s murmur-based byte hash: the same in every run of one binary,
    // which is all the engine-to-baseline comparison needs.
    mixIn(s.size());
    return mixIn(std::hash<std::string_view>{}(s));
  }
  uint64_t finish() const { return mix(h_ ^ 0xA0761D6478BD642FULL); }

 private:
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  RowHasher& mixIn(uint64_t v) {
    h_ = mix(h_ + 0x9E3779B97F4A7C15ULL + v);
    return *this;
  }
  uint64_t h_ = 0x2545F4914F6CDD1DULL;
};

// Output rows of the queries (the columns of Flink's Nexmark sink tables).
struct BidRow {  // q0 and q7: the bid columns Flink's q0 and q7 select
  int64_t auction = 0;
  int64_t bidder = 0;
  int64_t price = 0;
  int64_t dateTime = 0;
  std::string extra;
};
SLUICE_STRUCT(BidRow, auction, bidder, price, dateTime, extra)

inline BidRow toBidRow(const Bid& b) {
  return BidRow{b.auction, b.bidder, b.price, b.dateTime, b.extra};
}

struct Q1Row {  // q1: a bid with its price in euro
  int64_t auction = 0;
  int64_t bidder = 0;
  // 0.908 * price, Flink's DECIMAL(23, 3), as an exact count of thousandths
  // (price * 908).
  int64_t priceThousandths = 0;
  int64_t dateTime = 0;
  std::string extra;
};
SLUICE_STRUCT(Q1Row, auction, bidder, priceThousandths, dateTime, extra)

struct Q3Row {  // q3: a local seller and one of their category-10 auctions
  std::string name;
  std::string city;
  std::string state;
  int64_t auctionId = 0;
};
SLUICE_STRUCT(Q3Row, name, city, state, auctionId)

uint64_t rowHash(const Person& p);
uint64_t rowHash(const Auction& a);
uint64_t rowHash(const Bid& b);
uint64_t rowHash(const Event& e);
uint64_t rowHash(const BidRow& r);
uint64_t rowHash(const Q1Row& r);
uint64_t rowHash(const Q3Row& r);

// Tuples and pairs of int64_t, double and std::string, field by field.
template <class... Ts>
uint64_t rowHash(const std::tuple<Ts...>& t) {
  RowHasher h;
  std::apply([&](const auto&... f) { (h.add(f), ...); }, t);
  return h.finish();
}
template <class A, class B>
uint64_t rowHash(const std::pair<A, B>& p) {
  return rowHash(std::tuple<A, B>(p.first, p.second));
}

// Latencies in microseconds, log-linear buckets (64 per power of two, so a
// percentile is within 1/64 of the true value).
class LatencyHistogram {
 public:
  void record(int64_t micros) {
    const auto v = static_cast<uint64_t>(micros < 0 ? 0 : micros);
    size_t idx = 0;
    if (v < 64) {
      idx = v;
    } else {
      const int e = 63 - std::countl_zero(v);  // >= 6
      idx = static_cast<size_t>(e - 5) * 64 + ((v >> (e - 6)) & 63);
    }
    ++buckets_[std::min(idx, buckets_.size() - 1)];
    ++count_;
  }
  void merge(const LatencyHistogram& other) {
    for (size_t i = 0; i < buckets_.size(); ++i) buckets_[i] += other.buckets_[i];
    count_ += other.count_;
  }
  int64_t count() const { return count_; }
  // The lower bound of the bucket holding the q-quantile (0 < q <= 1), us.
  int64_t quantile(double q) const;

 private:
  std::array<int64_t, 64 * 40> buckets_{};
  int64_t count_ = 0;
};

// Latency mode: the jobs' event time is the wall clock. The source records
// when its first event was generated (sourceStartMicros, system clock); event
// time t was then created at sourceStartMicros + (t - baseTime) ms, and a row
// with timestamp t reaching the sink has latency now - that. For a window
// result (timestamp = window end - 1) that is the time from the creation of
// the window's last possible event to the result at the sink.
struct LatencyOrigin {
  int64_t baseTime = 0;
  std::shared_ptr<std::atomic<int64_t>> sourceStartMicros;
};

inline int64_t wallMicrosNow() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What a job's sink writers publish when they close; read after the job.
// Either plain rows (add), per-key sums of a count (addKeyCounts, q12), whose
// checksum is taken over the (key, total) pairs at the end, or the latest row
// per key of an updating result (addLatestRows, q4), whose checksum is taken
// over those final rows.
class ResultCollector {
 public:
  void add(const Checksum& part) {
    std::lock_guard lock(mu_);
    checksum_.rows += part.rows;
    checksum_.sum += part.sum;
  }
  void addKeyCounts(const std::unordered_map<int64_t, int64_t>& counts) {
    std::lock_guard lock(mu_);
    for (const auto& [k, c] : counts) keyCounts_[k] += c;
  }
  // key -> hash of its latest row. The updates of one key all pass one sink
  // subtask (the sink follows the keyed operator that emits them), so a key
  // published twice means rows went astray: std::logic_error.
  void addLatestRows(const std::unordered_map<int64_t, uint64_t>& rows);
  // The rows' checksum, or that of the (key, total) pairs when per-key
  // counts were collected, or that of the final rows of an updating result.
  Checksum result() const;
  const std::map<int64_t, int64_t>& keyCounts() const { return keyCounts_; }

  // Latency mode: sinks also record each row's latency (see LatencyOrigin).
  void enableLatency(LatencyOrigin origin) { origin_ = std::move(origin); }
  const std::optional<LatencyOrigin>& latencyOrigin() const { return origin_; }
  void addLatencies(const LatencyHistogram& h) {
    std::lock_guard lock(mu_);
    latencies_.merge(h);
  }
  const LatencyHistogram& latencies() const { return latencies_; }

 private:
  std::optional<LatencyOrigin> origin_;  // set before the job runs
  LatencyHistogram latencies_;
  mutable std::mutex mu_;
  Checksum checksum_;
  std::map<int64_t, int64_t> keyCounts_;
  std::unordered_map<int64_t, uint64_t> latestRows_;
};

// Checksum of (key, total) rows.
Checksum keyCountChecksum(const std::map<int64_t, int64_t>& counts);

// Latency mode: a sink writer's per-row latencies (see LatencyOrigin),
// published at close. Inactive unless the collector has a latency origin.
class LatencyRecorder {
 public:
  explicit LatencyRecorder(const ResultCollector& out) {
    if (out.latencyOrigin()) {
      origin_ = *out.latencyOrigin();
      latencies_ = std::make_unique<LatencyHistogram>();
    }
  }
  void record(const sluice::SinkWriterContext& ctx) {
    if (!latencies_) return;
    const std::optional<int64_t> ts = ctx.timestamp();
    const int64_t start = origin_.sourceStartMicros->load(std::memory_order_relaxed);
    // A row whose latency is negative was fired early by the end of the
    // input (a window that the input ended inside); it has none.
    const int64_t latency =
        ts && start > 0 ? wallMicrosNow() - (start + (*ts - origin_.baseTime) * 1000) : -1;
    if (latency >= 0) latencies_->record(latency);
  }
  void publish(ResultCollector& out) {
    if (!latencies_) return;
    out.addLatencies(*latencies_);
    latencies_ = std::make_unique<LatencyHistogram>();
  }

 private:
  LatencyOrigin origin_;
  std::unique_ptr<LatencyHistogram> latencies_;  // latency mode only
};

// A sink that folds every row into a checksum (per writer, published at close).
template <class T>
class ChecksumSink final : public sluice::Sink<T> {
 public:
  explicit ChecksumSink(std::shared_ptr<ResultCollector> out) : out_(std::move(out)) {}
  std::unique_ptr<sluice::SinkWriter<T>> createWriter(sluice::WriterInitContext&) const override {
    return std::make_unique<Writer>(out_);
  }

 private:
  class Writer final : public sluice::SinkWriter<T> {
   public:
    explicit Writer(std::shared_ptr<ResultCollector> out)
        : out_(std::move(out)), latencies_(*out_) {}
    void write(const T& row, const sluice::SinkWriterContext& ctx) override {
      local_.add(rowHash(row));
      latencies_.record(ctx);
    }
    void close() override {
      out_->add(local_);
      local_ = {};
      latencies_.publish(*out_);
    }

   private:
    std::shared_ptr<ResultCollector> out_;
    Checksum local_;
    LatencyRecorder latencies_;
  };
  std::shared_ptr<ResultCollector> out_;
};

// The sink of an updating result (q4), as an upsert sink: each row replaces
// the previous row of its key (field 0); at close the writer publishes the
// latest row per key, so the checksum covers the final result, one row per
// key, whatever the updates before it.
template <class T>
class UpsertSink final : public sluice::Sink<T> {
 public:
  explicit UpsertSink(std::shared_ptr<ResultCollector> out) : out_(std::move(out)) {}
  std::unique_ptr<sluice::SinkWriter<T>> createWriter(sluice::WriterInitContext&) const override {
    return std::make_unique<Writer>(out_);
  }

 private:
  class Writer final : public sluice::SinkWriter<T> {
   public:
    explicit Writer(std::shared_ptr<ResultCollector> out)
        : out_(std::move(out)), latencies_(*out_) {}
    void write(const T& row, const sluice::SinkWriterContext& ctx) override {
      latest_[std::get<0>(row)] = rowHash(row);
      latencies_.record(ctx);
    }
    void close() override {
      out_->addLatestRows(latest_);
      latest_.clear();
      latencies_.publish(*out_);
    }

   private:
    std::shared_ptr<ResultCollector> out_;
    std::unordered_map<int64_t, uint64_t> latest_;
    LatencyRecorder latencies_;
  };
  std::shared_ptr<ResultCollector> out_;
};

// q12's sink: sums field 1 (a count) per field 0 (a key) of each row.
template <class T>
class KeyCountSink final : public sluice::Sink<T> {
 public:
  explicit KeyCountSink(std::shared_ptr<ResultCollector> out) : out_(std::move(out)) {}
  std::unique_ptr<sluice::SinkWriter<T>> createWriter(sluice::WriterInitContext&) const override {
    return std::make_unique<Writer>(out_);
  }

 private:
  class Writer final : public sluice::SinkWriter<T> {
   public:
    explicit Writer(std::shared_ptr<ResultCollector> out) : out_(std::move(out)) {}
    void write(const T& row, const sluice::SinkWriterContext&) override {
      counts_[std::get<0>(row)] += std::get<1>(row);
    }
    void close() override {
      out_->addKeyCounts(counts_);
      counts_.clear();
    }

   private:
    std::shared_ptr<ResultCollector> out_;
    std::unordered_map<int64_t, int64_t> counts_;
  };
  std::shared_ptr<ResultCollector> out_;
};

}  // namespace sluice::nexmark
