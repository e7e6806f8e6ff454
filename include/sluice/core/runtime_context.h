// RuntimeContext: what a rich user function learns about where it runs, and
// accumulators it can publish to the job result.
//
// The runtime gives every parallel instance of an operator its own context
// before `open()`; it is valid until `close()` returns and is used only from
// the task thread that runs the operator.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <variant>

#include <sluice/core/metrics.h>

namespace sluice {

// A value aggregated over all parallel instances and reported in the job's
// result (JobExecutionResult::getAccumulatorResult). Implementations must be
// mergeable: the result is the merge of every subtask's local value.
class Accumulator {
 public:
  using Value = std::variant<int64_t, double>;
  virtual ~Accumulator() = default;
  virtual Value getLocalValue() const = 0;
  virtual void merge(const Accumulator& other) = 0;
  virtual std::unique_ptr<Accumulator> clone() const = 0;
};

class LongCounter final : public Accumulator {
 public:
  void add(int64_t v) { value_ += v; }
  Value getLocalValue() const override { return value_; }
  void merge(const Accumulator& o) override { value_ += std::get<int64_t>(o.getLocalValue()); }
  std::unique_ptr<Accumulator> clone() const override {
    return std::make_unique<LongCounter>(*this);
  }

 private:
  int64_t value_ = 0;
};
using IntCounter = LongCounter;

class DoubleCounter final : public Accumulator {
 public:
  void add(double v) { value_ += v; }
  Value getLocalValue() const override { return value_; }
  void merge(const Accumulator& o) override { value_ += std::get<double>(o.getLocalValue()); }
  std::unique_ptr<Accumulator> clone() const override {
    return std::make_unique<DoubleCounter>(*this);
  }

 private:
  double value_ = 0;
};

class RuntimeContext {
 public:
  virtual ~RuntimeContext() = default;
  virtual int getIndexOfThisSubtask() const = 0;
  virtual int getNumberOfParallelSubtasks() const = 0;
  virtual int getMaxNumberOfParallelSubtasks() const = 0;
  virtual int getAttemptNumber() const = 0;
  // The task's name: the names of the chained operators it runs, as Flink
  // reports it ("Source: Sequence -> Map").
  virtual const std::string& getTaskName() const = 0;
  // This operator's own name, as given with `.name(...)` or its default.
  virtual const std::string& getOperatorName() const = 0;
  // "Map (2/4)#0", as Flink prints it.
  virtual const std::string& getTaskNameWithSubtasks() const = 0;
  virtual const std::string& getJobName() const = 0;

  // Registers `acc` under `name`. The caller owns it and keeps it alive as
  // long as the function object lives (a member of the function is right):
  // the runtime reads it after close(). Registering the same name twice in
  // one subtask throws; one name with two accumulator types fails the job.
  virtual void addAccumulator(const std::string& name, Accumulator* acc) = 0;
  virtual Accumulator* getAccumulator(const std::string& name) const = 0;

  // This operator's metric group (Flink's OperatorMetricGroup): metrics
  // registered here are reported with the operator's scope and variables,
  // by the REST API and every configured reporter. Outside a running job
  // (test harnesses) a group whose metrics nothing reports.
  virtual MetricGroup& getMetricGroup() { return unregisteredMetricGroup(); }
};

}  // namespace sluice
