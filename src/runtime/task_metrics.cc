#include "runtime/task_metrics.h"

#include <algorithm>

#include <fmt/format.h>

#include <sluice/graph/stream_graph.h>

#include "core/checksum.h"
#include "core/random_id.h"
#include "runtime/buffer_pool.h"
#include "runtime/input_gate.h"
#include "runtime/input_processor.h"
#include "runtime/record_writer.h"

namespace sluice::runtime {
namespace {

std::string hex128(const std::string& text) {
  const uint64_t hi = checksum64(text);
  const uint64_t lo = checksum64("sluice:" + text);
  return fmt::format("{:016x}{:016x}", hi, lo);
}

}  // namespace

std::string jobVertexHexId(const JobGraph& graph, int vertex) {
  const JobVertex& v = graph.vertices.at(static_cast<size_t>(vertex));
  std::string key = fmt::format("vertex:{}:{}", v.id, v.name);
  for (int n : v.chain) key += fmt::format(":{}", n);
  return hex128(key);
}

std::string operatorHexId(const StreamGraph& graph, int node) {
  return hex128(fmt::format("operator:{}:{}", node, graph.node(node).name));
}

TaskMetrics::TaskMetrics(const TaskServices& services, const TaskInfo& info,
                         const std::string& vertexId)
    : variables_(services.metricVariables()) {
  variables_["<task_id>"] = vertexId;
  variables_["<task_attempt_id>"] = randomHexId();
  variables_["<task_name>"] = info.taskName;
  variables_["<subtask_index>"] = std::to_string(info.subtask);
  variables_["<task_attempt_num>"] = std::to_string(info.attemptNumber);
  if (!variables_.count("<job_name>")) variables_["<job_name>"] = info.jobName;
  group_ = metrics::MetricRegistry::process().createGroup(metrics::ScopeKind::kTask, variables_);
  group_->retainOnClose();
}

TaskMetrics::~TaskMetrics() { close(); }

std::shared_ptr<metrics::MetricGroupImpl> TaskMetrics::operatorGroup(
    const std::string& operatorId, const std::string& operatorName) {
  auto vars = variables_;
  vars["<operator_id>"] = operatorId;
  vars["<operator_name>"] = operatorName;
  auto group = metrics::MetricRegistry::process().createGroup(metrics::ScopeKind::kOperator,
                                                              std::move(vars));
  group->retainOnClose();
  return group;
}

int64_t TaskMetrics::idleNanos() const {
  const int64_t since = idleSince_.load(std::memory_order_relaxed);
  const int64_t total = idleNanos_.load(std::memory_order_relaxed);
  return since == 0 ? total : total + std::max<int64_t>(0, nowNanos() - since);
}

void TaskMetrics::registerIo(Io io) {
  metrics::MetricGroupImpl& g = *group_;
  const InputProcessor* input = io.input;
  g.counterView("numRecordsIn", [input] { return input->recordsIn(); });
  g.rateView("numRecordsInPerSecond", [input] { return input->recordsIn(); });
  g.counterView("numRecordsOut", io.recordsOut);
  g.rateView("numRecordsOutPerSecond", io.recordsOut);
  g.counterView("numBytesIn", [input] { return input->bytesIn(); });
  g.rateView("numBytesInPerSecond", [input] { return input->bytesIn(); });
  auto bytesOut = [writers = io.writers] {
    int64_t n = 0;
    for (const RecordWriter* w : writers) n += w->bytesWritten();
    return n;
  };
  g.counterView("numBytesOut", bytesOut);
  g.rateView("numBytesOutPerSecond", bytesOut);
  g.timePerSecondView("idleTimeMsPerSecond", [this] { return idleNanos(); });
  auto backpressured = [pools = io.outputPools] {
    int64_t n = 0;
    for (const BufferPool* p : pools) n += p->waitedNanos();
    return n;
  };
  g.timePerSecondView("backPressuredTimeMsPerSecond", backpressured);
  g.remainderPerSecondView("busyTimeMsPerSecond",
                           {"idleTimeMsPerSecond", "backPressuredTimeMsPerSecond"});
  // Flink's accumulated times, in ms since the task started running.
  const int64_t started = nowNanos();
  g.counterView("accumulatedIdleTimeMs", [this] { return idleNanos() / 1'000'000; });
  g.counterView("accumulatedBackPressuredTimeMs",
                [backpressured] { return backpressured() / 1'000'000; });
  g.counterView("accumulatedBusyTimeMs", [this, backpressured, started] {
    return std::max<int64_t>(0, nowNanos() - started - idleNanos() - backpressured()) / 1'000'000;
  });
  g.gauge("currentInputWatermark",
          [input] { return static_cast<double>(input->inputWatermark()); });
  g.gauge("outPoolUsage", [pools = io.outputPools] {
    int64_t used = 0;
    int64_t max = 0;
    for (const BufferPool* p : pools) {
      used += p->usedSegments();
      max += p->maxSegments();
    }
    return max == 0 ? 0.0 : static_cast<double>(used) / static_cast<double>(max);
  });
  const InputGate* gate = io.gate;
  const int capacity = std::max(1, io.inputCapacity);
  g.gauge("inPoolUsage", [gate, capacity] {
    if (gate == nullptr) return 0.0;
    return std::min(1.0, static_cast<double>(gate->queuedBuffers()) / capacity);
  });
  if (io.isSource) {
    // Flink's sourceIdleTime: how long the source has had nothing to emit.
    g.gauge("sourceIdleTime", [this] {
      const int64_t since = idleSince_.load(std::memory_order_relaxed);
      return since == 0 ? 0.0 : static_cast<double>((nowNanos() - since) / 1'000'000);
    });
  }
}

void TaskMetrics::close() { group_.reset(); }

}  // namespace sluice::runtime
