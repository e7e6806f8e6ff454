// A RuntimeContext for driving sources, sinks and functions outside a job.
#pragma once

#include <string>

#include <sluice/core/runtime_context.h>

namespace sluice::testing {

class FakeRuntimeContext final : public RuntimeContext {
 public:
  FakeRuntimeContext(int subtask, int parallelism) : subtask_(subtask), parallelism_(parallelism) {}
  int getIndexOfThisSubtask() const override { return subtask_; }
  int getNumberOfParallelSubtasks() const override { return parallelism_; }
  int getMaxNumberOfParallelSubtasks() const override { return 128; }
  int getAttemptNumber() const override { return 0; }
  const std::string& getTaskName() const override { return name_; }
  const std::string& getOperatorName() const override { return name_; }
  const std::string& getTaskNameWithSubtasks() const override { return name_; }
  const std::string& getJobName() const override { return name_; }
  void addAccumulator(const std::string&, Accumulator*) override {}
  Accumulator* getAccumulator(const std::string&) const override { return nullptr; }

 private:
  int subtask_;
  int parallelism_;
  std::string name_ = "test";
};

}  // namespace sluice::testing
