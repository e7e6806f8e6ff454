// Metrics a user function can register (Flink's org.apache.flink.metrics):
// counters, gauges, histograms and meters in named, scoped groups.
//
//   class Tokenizer : public RichFlatMapFunction<std::string, std::string> {
//     void open(const Configuration&) override {
//       words_ = &getRuntimeContext().getMetricGroup().addGroup("tokenizer").counter("words");
//     }
//     void flatMap(const std::string& line, Collector<std::string>& out) override {
//       ... words_->inc(); ...
//     }
//     Counter* words_ = nullptr;
//   };
//
// Every metric has an identifier made of its group's scope and its name, as
// in Flink ("localhost.taskmanager.tm-1.WordCount.Tokenizer.0.tokenizer.words"
// with the default scope formats), and the variables of its group
// (<job_id>, <task_name>, <subtask_index>, <operator_name>, ...), which the
// Prometheus reporter turns into labels. Reporters and the REST API read
// metrics from other threads: every metric type here may be read
// concurrently with its updates.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sluice {

// A count that goes up (and down). inc()/dec() may be called from any thread.
class Counter {
 public:
  void inc() { count_.fetch_add(1, std::memory_order_relaxed); }
  void inc(int64_t n) { count_.fetch_add(n, std::memory_order_relaxed); }
  void dec() { count_.fetch_sub(1, std::memory_order_relaxed); }
  void dec(int64_t n) { count_.fetch_sub(n, std::memory_order_relaxed); }
  int64_t getCount() const { return count_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> count_{0};
};

// The statistics of a histogram's current sample.
struct HistogramStatistics {
  int64_t size = 0;  // values in the sample
  double mean = 0;
  double stdDev = 0;
  int64_t min = 0;
  int64_t max = 0;
  // Sorted sample, for getQuantile().
  std::vector<int64_t> values;
  // The value at quantile q in [0, 1] (linear interpolation, as Flink's
  // DescriptiveStatisticsHistogram); 0 for an empty sample.
  double getQuantile(double q) const;
};

// A distribution of int64 values (latencies, sizes).
class Histogram {
 public:
  virtual ~Histogram() = default;
  virtual void update(int64_t value) = 0;
  // Values recorded in all.
  virtual int64_t getCount() const = 0;
  virtual HistogramStatistics getStatistics() const = 0;
};

// Keeps the last `windowSize` values (Flink's
// DescriptiveStatisticsHistogram). Thread-safe.
class DescriptiveStatisticsHistogram final : public Histogram {
 public:
  explicit DescriptiveStatisticsHistogram(int windowSize = 500);
  ~DescriptiveStatisticsHistogram() override;
  void update(int64_t value) override;
  int64_t getCount() const override;
  HistogramStatistics getStatistics() const override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Events and their rate per second over the last 60 seconds (Flink's
// MeterView), counted in a Counter of its own or in one given to it.
// The rate is brought up to date once a second by the metric registry.
class Meter {
 public:
  virtual ~Meter() = default;
  virtual void markEvent() = 0;
  virtual void markEvent(int64_t n) = 0;
  virtual double getRate() const = 0;
  virtual int64_t getCount() const = 0;
};

// A named group of metrics with a scope (Flink's MetricGroup). Groups and
// metrics live until the operator that owns them closes; a reference
// returned here stays valid until then.
class MetricGroup {
 public:
  virtual ~MetricGroup() = default;

  // A new counter `name`, or the one this group already has under it.
  virtual Counter& counter(const std::string& name) = 0;
  // A gauge: `value` is called, from a reporter's thread, whenever the
  // metric is read; it must be thread-safe and quick.
  virtual void gauge(const std::string& name, std::function<double()> value) = 0;
  // Registers `histogram` (null: a DescriptiveStatisticsHistogram of 500).
  virtual Histogram& histogram(const std::string& name,
                               std::unique_ptr<Histogram> histogram = nullptr) = 0;
  // A meter over `events` (null: a counter of its own). `events` must
  // outlive the group.
  virtual Meter& meter(const std::string& name, Counter* events = nullptr) = 0;

  // A sub-group: its name joins the scope ("...operator.0.mygroup.metric").
  virtual MetricGroup& addGroup(const std::string& name) = 0;
  // A key-value sub-group: both join the scope, and `key` becomes a variable
  // <key> = value (a label for the Prometheus reporter).
  virtual MetricGroup& addGroup(const std::string& key, const std::string& value) = 0;

  // The scope of this group, e.g. {"localhost", "taskmanager", "tm-1", ...}.
  virtual std::vector<std::string> getScopeComponents() const = 0;
  // Every variable of this group and its parents: {"<job_id>", "..."}, ...
  virtual std::map<std::string, std::string> getAllVariables() const = 0;
  // The scope joined with '.', then the metric's name.
  virtual std::string getMetricIdentifier(const std::string& metricName) const = 0;
};

// A group whose metrics work but are reported nowhere (Flink's
// UnregisteredMetricsGroup): what functions get outside a running job.
// Its metrics live as long as the process.
MetricGroup& unregisteredMetricGroup();

}  // namespace sluice
