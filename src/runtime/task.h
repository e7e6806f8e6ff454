// Task: one thread running one operator chain (one subtask of a job vertex).
//
// The loop is a mailbox loop: run pending mails, then either let the source
// head emit a batch or decode one buffer from the input gate, flush outputs
// whose buffer timeout passed, and sleep on the TaskWaker when there is
// nothing to do. Every operator call happens on this thread.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <vector>

#include <sluice/core/clock.h>
#include <sluice/core/config.h>
#include <sluice/graph/job_graph.h>

#include "runtime/buffer_pool.h"
#include "runtime/input_gate.h"
#include "runtime/mailbox.h"
#include "runtime/record_writer.h"
#include "runtime/task_waker.h"

namespace sluice::runtime {

// What feeds gate channel k of a task.
struct InputChannelInfo {
  int streamEdge = -1;
  int inputIndex = 0;
};

// Coordinator-side hooks a source task calls (implemented by the job).
class SourceCoordinatorLink {
 public:
  virtual ~SourceCoordinatorLink() = default;
  virtual void addReader(int subtask) = 0;
  virtual void requestSplit(int subtask) = 0;
};

struct TaskResult {
  bool failed = false;
  bool cancelled = false;
  std::string error;  // names the operator, subtask and exception
  std::map<std::string, std::unique_ptr<Accumulator>> accumulators;
  int64_t numRecordsDropped = 0;
  std::map<std::string, int64_t> counters;  // OperatorContext::incrementCounter
};

// What every task of one job shares: the configuration, the clock, and the
// resources of each slot. Thread-safe.
class TaskServices {
 public:
  TaskServices(Configuration configuration, std::shared_ptr<const Clock> clock, int numberOfSlots)
      : configuration_(std::move(configuration)),
        clock_(std::move(clock)),
        numberOfSlots_(numberOfSlots < 1 ? 1 : numberOfSlots) {}
  const Configuration& configuration() const { return configuration_; }
  const Clock& clock() const { return *clock_; }
  // With slot sharing, subtask i of every vertex runs in slot i.
  int numberOfSlots() const { return numberOfSlots_; }
  std::shared_ptr<void> slotResource(int slot, const std::string& key,
                                     const std::function<std::shared_ptr<void>()>& make);

 private:
  const Configuration configuration_;
  const std::shared_ptr<const Clock> clock_;
  const int numberOfSlots_;
  std::mutex mu_;
  std::map<std::pair<int, std::string>, std::shared_ptr<void>> resources_;
};

class Task {
 public:
  Task(const StreamGraph& graph, const JobGraph& jobGraph, int vertex, int subtask,
       int attemptNumber);
  ~Task();

  // Wiring, before run().
  InputGate& gate() { return *gate_; }
  void createGate(std::vector<InputChannelInfo> channels);
  // One writer per output job edge, in JobVertex::outputs order.
  void addWriter(int jobEdge, std::vector<RecordWriter::Target> targets, size_t segmentSize,
                 int buffersPerChannel, int floatingBuffers);
  void setSourceCoordinator(SourceCoordinatorLink* link) { coordinator_ = link; }
  // Must be set before run(); outlives the task.
  void setServices(TaskServices* services) { services_ = services; }

  // Runs the task to the end; never throws.
  TaskResult run();

  // Any thread.
  void cancel();
  void postSplit(std::vector<uint8_t> split);
  void postNoMoreSplits();
  void signalInputAvailable() { waker_.wake(); }
  void requestWakeupAt(TaskWaker::Clock::time_point when);  // task thread only

  const std::string& name() const { return taskName_; }
  int subtask() const { return subtask_; }

 private:
  class Context;
  class Runner;
  friend class Runner;

  const StreamGraph& graph_;
  const JobGraph& jobGraph_;
  const JobVertex& vertex_;
  const int subtask_;
  const int attemptNumber_;
  std::string taskName_;
  TaskWaker waker_;
  Mailbox mailbox_;
  std::unique_ptr<InputGate> gate_;
  std::vector<InputChannelInfo> channels_;
  std::vector<std::unique_ptr<BufferPool>> pools_;
  std::map<int, std::unique_ptr<RecordWriter>> writers_;  // by stream edge id
  SourceCoordinatorLink* coordinator_ = nullptr;
  TaskServices* services_ = nullptr;
  std::atomic<bool> cancelled_{false};
  std::atomic<int> pendingSplits_{0};  // assigned, not yet delivered to the reader
  TaskWaker::Clock::time_point wakeupAt_ = TaskWaker::Clock::time_point::max();

  // Processing-time timers of all operators in the chain (task thread only).
  struct ProcessingTimer {
    int64_t timestamp;
    uint64_t sequence;  // registration order among equal timestamps
    std::function<void(int64_t)> callback;
    bool operator>(const ProcessingTimer& o) const {
      return timestamp != o.timestamp ? timestamp > o.timestamp : sequence > o.sequence;
    }
  };
  void registerProcessingTimer(int64_t timestamp, std::function<void(int64_t)> callback);
  // Fires the timers that are due; returns the steady-clock time at which the
  // next one is due (max() when none is, or when a manual clock drives time).
  TaskWaker::Clock::time_point fireDueTimers();
  std::priority_queue<ProcessingTimer, std::vector<ProcessingTimer>, std::greater<>> timers_;
  uint64_t timerSequence_ = 0;
  bool manualClock_ = false;
  // Installed by run() while a source head is alive; called from mails.
  std::function<void(std::vector<std::vector<uint8_t>>)> onSplits_;
  std::function<void()> onNoMoreSplits_;
};

}  // namespace sluice::runtime
