// What a task is and what it is given: its identity (TaskInfo), the
// services every task of a job shares (TaskServices: configuration, clock,
// per-slot resources, the checkpoint I/O executor), its link to the source
// coordinator, and what it reports at the end (TaskResult).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include <sluice/core/clock.h>
#include <sluice/core/config.h>
#include <sluice/core/runtime_context.h>

#include "core/serial_executor.h"

namespace sluice::runtime {

struct TaskInfo {
  std::string taskName;  // the chain's name: "Source: X -> Map"
  std::string jobName;
  int vertex = 0;
  int subtask = 0;
  int parallelism = 1;
  int maxParallelism = 128;
  int attemptNumber = 0;
};

// Coordinator-side hooks a source task calls (implemented by the job).
class SourceCoordinatorLink {
 public:
  virtual ~SourceCoordinatorLink() = default;
  virtual void addReader(int subtask) = 0;
  virtual void requestSplit(int subtask) = 0;
};

// What every task of one job attempt shares. Thread-safe.
class TaskServices {
 public:
  TaskServices(Configuration configuration, std::shared_ptr<const Clock> clock, int numberOfSlots,
               SerialExecutor* checkpointExecutor)
      : configuration_(std::move(configuration)),
        clock_(std::move(clock)),
        numberOfSlots_(numberOfSlots < 1 ? 1 : numberOfSlots),
        checkpointExecutor_(checkpointExecutor) {}
  const Configuration& configuration() const { return configuration_; }
  const Clock& clock() const { return *clock_; }
  // With slot sharing, subtask i of every vertex runs in slot i.
  int numberOfSlots() const { return numberOfSlots_; }
  std::shared_ptr<void> slotResource(int slot, const std::string& key,
                                     const std::function<std::shared_ptr<void>()>& make);
  // Runs the asynchronous part of snapshots.
  SerialExecutor& checkpointExecutor() const { return *checkpointExecutor_; }
  // The metric variables of the TaskManager and the job the tasks run in:
  // <host>, <tm_id>, <job_id>, <job_name>. Set before any task runs.
  const std::map<std::string, std::string>& metricVariables() const { return metricVariables_; }
  void setMetricVariables(std::map<std::string, std::string> variables) {
    metricVariables_ = std::move(variables);
  }

 private:
  const Configuration configuration_;
  const std::shared_ptr<const Clock> clock_;
  const int numberOfSlots_;
  SerialExecutor* const checkpointExecutor_;
  std::map<std::string, std::string> metricVariables_;
  std::mutex mu_;
  std::map<std::pair<int, std::string>, std::shared_ptr<void>> resources_;
};

struct TaskResult {
  bool failed = false;
  bool cancelled = false;
  std::string error;  // names the operator, subtask and exception
  std::map<std::string, std::unique_ptr<Accumulator>> accumulators;
  int64_t numRecordsDropped = 0;
  std::map<std::string, int64_t> counters;  // OperatorContext::incrementCounter
};

}  // namespace sluice::runtime
