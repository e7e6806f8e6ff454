// OperatorChain: the operators of one task, built, wired, opened and closed
// (Flink's OperatorChain).
//
// Build: one operator per stream node of the job vertex, each with its own
// OperatorContext/RuntimeContext. Wire, tail first so successors exist: a
// chained edge calls the successor's input directly, any other edge goes to
// the task's record writer for it; side outputs get a fan-out per tag.
// Open, tail first, so an operator that emits in open() finds its successors
// ready; finish, head first, so what an operator emits in finish() reaches
// its successors before they finish; close whatever was opened.
//
// Failures: lifecycle calls let exceptions through and leave the operator
// being called in currentOperator(), so the task names it. Task thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <sluice/graph/job_graph.h>
#include <sluice/graph/operator.h>

#include "checkpoint/subtask_checkpointer.h"
#include "runtime/input_processor.h"
#include "runtime/record_writer.h"
#include "runtime/task_environment.h"
#include "runtime/task_metrics.h"

namespace sluice::runtime {

// What the operators of a chain reach through their contexts, beyond the
// task's identity and services (implemented by the task).
class ChainHost {
 public:
  virtual ~ChainHost() = default;
  virtual void requestSplit() = 0;
  virtual void signalInputAvailable() = 0;
  virtual void requestWakeupAt(std::chrono::steady_clock::time_point when) = 0;
  virtual void registerProcessingTimer(int64_t timestamp,
                                       std::function<void(int64_t)> callback) = 0;
  virtual bool isIncrementalSnapshot(int64_t checkpointId) = 0;
};

class OperatorChain {
 public:
  OperatorChain(const StreamGraph& graph, const JobGraph& jobGraph, const JobVertex& vertex,
                const TaskInfo& info, TaskServices& services, ChainHost& host,
                TaskMetrics& metrics);
  ~OperatorChain();
  OperatorChain(const OperatorChain&) = delete;
  OperatorChain& operator=(const OperatorChain&) = delete;

  // Creates the operators and wires their outputs; `writers` are the task's
  // record writers by stream edge id.
  void build(const std::map<int, std::unique_ptr<RecordWriter>>& writers);
  // initializeState (from `restore`, by stream node) and open, tail first.
  void initializeAndOpen(const std::map<int, OperatorStateRestore>& restore);
  void finish();
  void notifyCheckpointComplete(int64_t id);
  // Closes every opened operator, tail first; a failure is reported into
  // `result` unless it already failed or `quiet` (after a cancel).
  void close(TaskResult& result, bool quiet);
  // Dropped records, counters and accumulators of every operator.
  void collectMetrics(TaskResult& result);
  // Registers every operator's IO metrics (numRecordsIn/Out and rates,
  // currentInput/OutputWatermark), reading the chain's outputs and, for the
  // head, `input`. Returns the reader of the records the chain sent on
  // network edges (the task's numRecordsOut). After build().
  std::function<int64_t()> registerMetrics(const InputProcessor& input);
  // Destroys outputs and operators.
  void release();

  StreamOperatorBase& head() { return *ops_.front(); }
  OutputBase& headOutput() { return *headOutput_; }
  std::span<const checkpoint::ChainedOperatorRef> operators() const { return refs_; }
  const std::string& currentOperator() const { return *current_; }
  void resetCurrentOperator();
  // "operator 'X' (subtask 2/4 of task 'T') failed: cause" into `result`.
  void fail(TaskResult& result, const std::string& operatorName, const std::string& cause) const;

 private:
  class Context;
  void wire(size_t index, const std::map<int, std::unique_ptr<RecordWriter>>& writers);
  // Reads operator i's numRecordsIn: the head's from `input`, the others'
  // from the outputs chained into them.
  std::function<int64_t()> recordsInOf(size_t i, const InputProcessor& input) const;

  const StreamGraph& graph_;
  const JobGraph& jobGraph_;
  const JobVertex& vertex_;
  const TaskInfo& info_;
  TaskServices& services_;
  ChainHost& host_;
  std::vector<std::unique_ptr<StreamOperatorBase>> ops_;
  std::vector<std::unique_ptr<Context>> contexts_;
  std::vector<std::unique_ptr<OutputBase>> outputs_;  // owned outputs, built tail first
  std::vector<checkpoint::ChainedOperatorRef> refs_;
  std::map<int, size_t> position_;  // stream node id -> index in the chain
  TaskMetrics& metrics_;
  // Per operator: its main output, side outputs, and the chained edge
  // outputs feeding it (what its record and watermark metrics read).
  std::vector<OutputBase*> mainOutput_;
  std::vector<std::vector<const OutputBase*>> sideOutputs_;
  std::vector<std::vector<const OutputBase*>> chainedInputs_;
  std::vector<const OutputBase*> networkOutputs_;
  OutputBase* headOutput_ = nullptr;
  size_t opened_ = 0;  // ops_ [n - opened_, n) are open
  const std::string* current_;
};

}  // namespace sluice::runtime
