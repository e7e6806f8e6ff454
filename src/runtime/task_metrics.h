// The metrics of one task (Flink's TaskMetricGroup with its TaskIOMetricGroup):
// records and bytes in and out, busy / idle / backpressured time per second,
// input watermark, buffer pool usage; and the base of its operators' groups.
//
// Nothing here is on the per-record path: records are counted by the
// engine's outputs and the input processor (a store each), bytes once per
// buffer, idle time once per wait for input and backpressure once per wait
// for a buffer (BufferPool). The registry's thread turns the totals into
// rates once a second.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <sluice/graph/job_graph.h>

#include "core/metric_registry.h"
#include "runtime/task_environment.h"

namespace sluice::runtime {

class BufferPool;
class InputGate;
class InputProcessor;
class RecordWriter;

// 32 hex digits naming a job vertex, as Flink's JobVertexID prints: the same
// for the same program, in every process and every attempt.
std::string jobVertexHexId(const JobGraph& graph, int vertex);
// The same for an operator (stream node), Flink's OperatorID.
std::string operatorHexId(const StreamGraph& graph, int node);

class TaskMetrics {
 public:
  TaskMetrics(const TaskServices& services, const TaskInfo& info, const std::string& vertexId);
  ~TaskMetrics();

  metrics::MetricGroupImpl& group() { return *group_; }
  // A new group for chained operator `node` (kOperator scope).
  std::shared_ptr<metrics::MetricGroupImpl> operatorGroup(const std::string& operatorId,
                                                          const std::string& operatorName);

  // The task's IO metrics over what it owns; all must outlive close().
  struct Io {
    const InputProcessor* input = nullptr;
    const InputGate* gate = nullptr;
    int inputCapacity = 1;  // buffers the gate can hold at most (inPoolUsage)
    std::vector<const BufferPool*> outputPools;
    std::vector<const RecordWriter*> writers;
    std::function<int64_t()> recordsOut;  // records sent on the task's network edges
    bool isSource = false;
  };
  void registerIo(Io io);

  // Around every wait of the task for input or mail (task thread).
  void idleBegin() { idleSince_.store(nowNanos(), std::memory_order_relaxed); }
  void idleEnd() {
    const int64_t since = idleSince_.load(std::memory_order_relaxed);
    idleSince_.store(0, std::memory_order_relaxed);
    idleNanos_.store(idleNanos_.load(std::memory_order_relaxed) + (nowNanos() - since),
                     std::memory_order_relaxed);
  }

  // Unregisters every group (before what the views read goes away).
  void close();

  static int64_t nowNanos() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

 private:
  int64_t idleNanos() const;

  std::shared_ptr<metrics::MetricGroupImpl> group_;
  std::map<std::string, std::string> variables_;
  std::atomic<int64_t> idleNanos_{0};
  std::atomic<int64_t> idleSince_{0};
};

}  // namespace sluice::runtime
