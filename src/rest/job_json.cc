// Flink's cluster, job and checkpoint response bodies (rest/rest_json.h).
#include <time.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include <sluice/core/build_fingerprint.h>

#include "rest/rest_json.h"
#include "rest/web_monitor.h"

namespace sluice::rest {
namespace {

// Flink's JobStatus, in its declaration order (JobDetailsInfo "timestamps").
constexpr std::array<const char*, 11> kJobStatuses = {
    "INITIALIZING", "CREATED",  "RUNNING",    "FAILING",   "FAILED",     "CANCELLING",
    "CANCELED",     "FINISHED", "RESTARTING", "SUSPENDED", "RECONCILING"};

// Flink's ExecutionState, in its declaration order ("tasks", "status-counts").
constexpr std::array<const char*, 10> kExecutionStates = {
    "CREATED",   "SCHEDULED", "DEPLOYING", "RUNNING",     "FINISHED",
    "CANCELING", "CANCELED",  "FAILED",    "RECONCILING", "INITIALIZING"};

constexpr const char* kVersion = SLUICE_VERSION_STRING;
constexpr const char* kRevision = "unknown";

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Json nullIfEmpty(const std::string& s) { return s.empty() ? Json(nullptr) : Json(s); }

// -1 for "not known", as Flink sends it.
int64_t knownOrMinusOne(int64_t t) { return t > 0 ? t : -1; }

// Flink's duration of something that started at `start` and ended at `end`
// (-1: still running): -1 when it has not started.
int64_t durationOf(int64_t start, int64_t end, int64_t now) {
  if (start <= 0) return -1;
  return std::max<int64_t>(0, (end > 0 ? end : now) - start);
}

// Subtask states of a vertex counted by ExecutionState; subtasks the vertex
// does not list yet count as CREATED (Flink creates every one up front).
std::map<std::string, int> subtaskStateCounts(const VertexInfo& v) {
  std::map<std::string, int> counts;
  for (const char* s : kExecutionStates) counts[s] = 0;
  for (const SubtaskInfo& s : v.subtasks) {
    auto it = counts.find(s.status);
    if (it != counts.end()) ++it->second;
  }
  const int missing = v.parallelism - static_cast<int>(v.subtasks.size());
  if (missing > 0) counts["CREATED"] += missing;
  return counts;
}

Json resourceProfile(const TaskManagerInfo& tm, double fraction) {
  constexpr int64_t kMb = 1 << 20;
  return Json{{"cpuCores", tm.cpuCores * fraction},
              {"taskHeapMemory", 0},
              {"taskOffHeapMemory", 0},
              {"managedMemory", static_cast<int64_t>(tm.managedMemory * fraction / kMb)},
              {"networkMemory", static_cast<int64_t>(tm.networkMemory * fraction / kMb)},
              {"extendedResources", Json::object()}};
}

int64_t metricInt(const MetricStore::Values* m, const std::string& id) {
  if (!m) return 0;
  auto it = m->find(id);
  if (it == m->end()) return 0;
  char* end = nullptr;
  const double d = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || !std::isfinite(d)) return 0;
  return static_cast<int64_t>(d);
}

Json metricNumber(const MetricStore::Values* m, const std::string& id) {
  if (!m) return nullptr;
  auto it = m->find(id);
  if (it == m->end()) return nullptr;
  char* end = nullptr;
  const double d = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || !std::isfinite(d)) return nullptr;
  return d;
}

const char* checkpointClass(const std::string& status) {
  if (status == "COMPLETED") return "completed";
  if (status == "FAILED") return "failed";
  return "in_progress";
}

Json checkpointEntry(const JobInfo& job, const CheckpointInfo& c) {
  const char* cls = checkpointClass(c.status);
  Json e{{"className", cls},
         {"@class", cls},
         {"id", c.id},
         {"status", c.status},
         {"is_savepoint", c.isSavepoint},
         {"savepointFormat", c.isSavepoint ? Json("CANONICAL") : Json(nullptr)},
         {"trigger_timestamp", c.triggerTimestamp},
         {"latest_ack_timestamp", c.latestAckTimestamp},
         {"checkpointed_size", c.checkpointedSize},
         {"state_size", c.stateSize},
         {"end_to_end_duration", c.endToEndDurationMs},
         {"alignment_buffered", 0},
         {"processed_data", 0},
         {"persisted_data", 0},
         {"num_subtasks", c.numSubtasks},
         {"num_acknowledged_subtasks", c.numAcknowledgedSubtasks},
         {"checkpoint_type", c.isSavepoint               ? "SAVEPOINT"
                             : job.checkpoints.unaligned ? "UNALIGNED_CHECKPOINT"
                                                         : "CHECKPOINT"},
         {"tasks", Json::object()},
         {"alignment_duration", c.alignmentDurationMs}};
  if (c.status == "COMPLETED") {
    e["external_path"] = nullIfEmpty(c.externalPath);
    e["discarded"] = false;
  } else if (c.status == "FAILED") {
    e["failure_timestamp"] = c.failureTimestamp;
    e["failure_message"] = nullIfEmpty(c.failureMessage);
  }
  return e;
}

Json statsSummary(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  const bool empty = values.empty();
  return Json{{"min", empty ? 0 : static_cast<int64_t>(values.front())},
              {"max", empty ? 0 : static_cast<int64_t>(values.back())},
              {"avg", empty ? 0 : static_cast<int64_t>(sum / static_cast<double>(values.size()))},
              {"p50", percentile(values, 0.5)},
              {"p90", percentile(values, 0.9)},
              {"p95", percentile(values, 0.95)},
              {"p99", percentile(values, 0.99)},
              {"p999", percentile(values, 0.999)}};
}

Json taskManagerEntry(const TaskManagerInfo& tm) {
  const double free = tm.slotsNumber > 0 ? static_cast<double>(tm.freeSlots) / tm.slotsNumber : 0.0;
  return Json{{"id", tm.id},
              {"path", tm.path},
              {"dataPort", tm.dataPort},
              {"jmxPort", -1},
              {"timeSinceLastHeartbeat", tm.timeSinceLastHeartbeat},
              {"slotsNumber", tm.slotsNumber},
              {"freeSlots", tm.freeSlots},
              {"totalResource", resourceProfile(tm, 1.0)},
              {"freeResource", resourceProfile(tm, free)},
              {"hardware",
               {{"cpuCores", tm.cpuCores},
                {"physicalMemory", tm.physicalMemory},
                {"freeMemory", tm.freeMemory},
                {"managedMemory", tm.managedMemory}}},
              {"memoryConfiguration",
               {{"frameworkHeap", 0},
                {"taskHeap", 0},
                {"frameworkOffHeap", 0},
                {"taskOffHeap", 0},
                {"networkMemory", tm.networkMemory},
                {"managedMemory", tm.managedMemory},
                {"jvmMetaspace", 0},
                {"jvmOverhead", 0},
                {"totalFlinkMemory", tm.networkMemory + tm.managedMemory},
                {"totalProcessMemory", tm.networkMemory + tm.managedMemory}}},
              {"blocked", false}};
}

}  // namespace

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool isJobTerminal(std::string_view state) {
  return state == "FINISHED" || state == "CANCELED" || state == "FAILED";
}

bool isExecutionTerminal(std::string_view state) {
  return state == "FINISHED" || state == "CANCELED" || state == "FAILED";
}

double percentile(const std::vector<double>& sorted, double p) {
  const size_t n = sorted.size();
  if (n == 0) return 0;
  const double pos = p * static_cast<double>(n + 1);
  if (pos < 1) return sorted.front();
  if (pos >= static_cast<double>(n)) return sorted.back();
  const auto lowerIndex = static_cast<size_t>(pos);  // 1-based position of the lower value
  const double d = pos - static_cast<double>(lowerIndex);
  const double lowerValue = sorted[lowerIndex - 1];
  return lowerValue + d * (sorted[lowerIndex] - lowerValue);
}

// ---- cluster ----

Json dashboardConfig(const WebMonitorOptions& options, bool webSubmit) {
  const time_t t = time(nullptr);
  struct tm local {};
  localtime_r(&t, &local);
  return Json{{"refresh-interval", options.refreshIntervalMs},
              {"timezone-name", local.tm_zone ? local.tm_zone : "UTC"},
              {"timezone-offset", static_cast<int64_t>(local.tm_gmtoff) * 1000},
              {"flink-version", kVersion},
              {"flink-revision", kRevision},
              {"features",
               {{"web-submit", webSubmit},
                {"web-cancel", options.cancelEnabled},
                {"web-rescale", false},
                {"web-history", false}}},
              {"mode", options.mode},
              {"token-required", !options.token.empty()}};
}

Json clusterOverview(const ClusterOverview& overview, const std::vector<JobInfo>& jobs) {
  int running = 0, finished = 0, cancelled = 0, failed = 0;
  for (const JobInfo& j : jobs) {
    if (j.state == "FINISHED") {
      ++finished;
    } else if (j.state == "CANCELED") {
      ++cancelled;
    } else if (j.state == "FAILED") {
      ++failed;
    } else {
      ++running;
    }
  }
  return Json{{"taskmanagers", overview.taskManagers},
              {"slots-total", overview.slotsTotal},
              {"slots-available", overview.slotsAvailable},
              {"jobs-running", running},
              {"jobs-finished", finished},
              {"jobs-cancelled", cancelled},
              {"jobs-failed", failed},
              {"flink-version", kVersion},
              {"flink-commit", kRevision}};
}

Json taskManagerList(const std::vector<TaskManagerInfo>& taskManagers) {
  Json list = Json::array();
  for (const TaskManagerInfo& tm : taskManagers) list.push_back(taskManagerEntry(tm));
  return Json{{"taskmanagers", std::move(list)}};
}

Json taskManagerDetails(const TaskManagerInfo& tm, const MetricStore::Values* m) {
  Json j = taskManagerEntry(tm);
  j["allocatedSlots"] = Json::array();
  j["metrics"] = Json{
      {"heapUsed", 0},
      {"heapCommitted", 0},
      {"heapMax", 0},
      {"nonHeapUsed", 0},
      {"nonHeapCommitted", 0},
      {"nonHeapMax", 0},
      {"directCount", 0},
      {"directUsed", 0},
      {"directMax", 0},
      {"mappedCount", 0},
      {"mappedUsed", 0},
      {"mappedMax", 0},
      {"memorySegmentsAvailable", metricInt(m, "Status.Shuffle.Netty.AvailableMemorySegments")},
      {"memorySegmentsTotal", metricInt(m, "Status.Shuffle.Netty.TotalMemorySegments")},
      {"nettyShuffleMemorySegmentsAvailable",
       metricInt(m, "Status.Shuffle.Netty.AvailableMemorySegments")},
      {"nettyShuffleMemorySegmentsUsed", metricInt(m, "Status.Shuffle.Netty.UsedMemorySegments")},
      {"nettyShuffleMemorySegmentsTotal", metricInt(m, "Status.Shuffle.Netty.TotalMemorySegments")},
      {"nettyShuffleMemoryAvailable", metricInt(m, "Status.Shuffle.Netty.AvailableMemory")},
      {"nettyShuffleMemoryUsed", metricInt(m, "Status.Shuffle.Netty.UsedMemory")},
      {"nettyShuffleMemoryTotal", metricInt(m, "Status.Shuffle.Netty.TotalMemory")},
      {"garbageCollectors", Json::array()},
      {"processMemoryRss", metricInt(m, "Status.Process.Memory.RSS")},
      {"cpuLoad", metricNumber(m, "Status.Process.CPU.Load")},
      {"managedMemoryUsed", metricInt(m, "Status.Flink.Memory.Managed.Used")},
      {"managedMemoryTotal", metricInt(m, "Status.Flink.Memory.Managed.Total")}};
  return j;
}

// ---- jobs ----

Json jobIds(const std::vector<JobInfo>& jobs) {
  Json list = Json::array();
  for (const JobInfo& j : jobs) list.push_back({{"id", j.id}, {"status", j.state}});
  return Json{{"jobs", std::move(list)}};
}

Json jobsOverview(const std::vector<JobInfo>& jobs) {
  Json list = Json::array();
  for (const JobInfo& j : jobs) {
    std::map<std::string, int> tasks;
    for (const char* s : kExecutionStates) tasks[lower(s)] = 0;
    int total = 0;
    for (const VertexInfo& v : j.vertices) {
      total += v.parallelism;
      for (const auto& [state, n] : subtaskStateCounts(v)) tasks[lower(state)] += n;
    }
    int64_t lastModification = j.startTime;
    for (const auto& [state, ts] : j.timestamps) lastModification = std::max(lastModification, ts);
    lastModification = std::max(lastModification, j.endTime);
    Json t(tasks);
    t["total"] = total;
    list.push_back({{"jid", j.id},
                    {"name", j.name},
                    {"start-time", j.startTime},
                    {"end-time", j.endTime},
                    {"duration", j.durationMs},
                    {"state", j.state},
                    {"last-modification", lastModification},
                    {"tasks", std::move(t)}});
  }
  return Json{{"jobs", std::move(list)}};
}

Json jobPlan(const JobInfo& job) {
  Json nodes = Json::array();
  for (const VertexInfo& v : job.vertices) {
    Json node{{"id", v.id},
              {"parallelism", v.parallelism},
              {"operator", ""},
              {"operator_strategy", ""},
              {"description", v.name}};
    if (!v.inputs.empty()) {
      Json inputs = Json::array();
      for (size_t i = 0; i < v.inputs.size(); ++i) {
        inputs.push_back({{"num", static_cast<int>(i)},
                          {"id", v.inputs[i].sourceVertexId},
                          {"ship_strategy", v.inputs[i].shipStrategy},
                          {"exchange", "pipelined_bounded"}});
      }
      node["inputs"] = std::move(inputs);
    }
    node["optimizer_properties"] = Json::object();
    nodes.push_back(std::move(node));
  }
  return Json{{"jid", job.id}, {"name", job.name}, {"type", "STREAMING"}, {"nodes", nodes}};
}

Json jobDetails(const JobInfo& job, const MetricStore& metrics, int64_t now) {
  Json timestamps = Json::object();
  for (const char* s : kJobStatuses) {
    auto it = job.timestamps.find(s);
    timestamps[s] = it == job.timestamps.end() ? 0 : it->second;
  }
  std::map<std::string, int> statusCounts;
  for (const char* s : kExecutionStates) statusCounts[s] = 0;
  Json vertices = Json::array();
  for (const VertexInfo& v : job.vertices) {
    auto sc = statusCounts.find(v.status);
    if (sc != statusCounts.end()) ++sc->second;
    std::vector<const MetricStore::Values*> subtasks;
    for (int i = 0; i < v.parallelism; ++i) {
      subtasks.push_back(subtaskMetrics(metrics, job.id, v.id, i));
    }
    const int64_t start = knownOrMinusOne(v.startTime);
    const int64_t end = isExecutionTerminal(v.status) ? knownOrMinusOne(v.endTime) : -1;
    vertices.push_back({{"id", v.id},
                        {"name", v.name},
                        {"maxParallelism", v.maxParallelism},
                        {"parallelism", v.parallelism},
                        {"status", v.status},
                        {"start-time", start},
                        {"end-time", end},
                        {"duration", durationOf(start, end, now)},
                        {"tasks", subtaskStateCounts(v)},
                        {"metrics", ioMetricsInfo(subtasks, isExecutionTerminal(v.status))}});
  }
  return Json{{"jid", job.id},
              {"name", job.name},
              {"isStoppable", job.isStoppable},
              {"state", job.state},
              {"job-type", "STREAMING"},
              {"start-time", job.startTime},
              {"end-time", job.endTime},
              {"duration", job.durationMs},
              {"maxParallelism", job.maxParallelism},
              {"now", now},
              {"timestamps", std::move(timestamps)},
              {"vertices", std::move(vertices)},
              {"status-counts", statusCounts},
              {"plan", jobPlan(job)}};
}

Json subtaskDetails(const JobInfo& job, const VertexInfo& vertex, const SubtaskInfo& s,
                    const MetricStore& metrics, int64_t now) {
  const int64_t start = knownOrMinusOne(s.startTime);
  const int64_t end = isExecutionTerminal(s.status) ? knownOrMinusOne(s.endTime) : -1;
  const std::string host = s.host.empty() ? "(unassigned)" : s.host;
  const MetricStore::Values* m = subtaskMetrics(metrics, job.id, vertex.id, s.subtask);
  return Json{{"subtask", s.subtask},
              {"status", s.status},
              {"attempt", s.attempt},
              {"endpoint", s.endpoint.empty() ? host : s.endpoint},
              {"host", host},
              {"start-time", start},
              {"end-time", end},
              {"duration", durationOf(start, end, now)},
              {"metrics", ioMetricsInfo({m}, isExecutionTerminal(s.status))},
              {"taskmanager-id", s.taskManagerId.empty() ? "(unassigned)" : s.taskManagerId}};
}

Json vertexDetails(const JobInfo& job, const VertexInfo& vertex, const MetricStore& metrics,
                   int64_t now) {
  Json subtasks = Json::array();
  for (const SubtaskInfo& s : vertex.subtasks) {
    subtasks.push_back(subtaskDetails(job, vertex, s, metrics, now));
  }
  return Json{{"id", vertex.id},
              {"name", vertex.name},
              {"parallelism", vertex.parallelism},
              {"maxParallelism", vertex.maxParallelism},
              {"now", now},
              {"subtasks", std::move(subtasks)}};
}

Json jobExceptions(const JobInfo& job, size_t maxExceptions) {
  Json all = Json::array();
  size_t taskExceptions = 0;
  for (const ExceptionInfo& e : job.exceptions) {
    if (e.taskName.empty()) continue;
    ++taskExceptions;
    if (all.size() >= maxExceptions) continue;
    all.push_back({{"exception", e.stacktrace},
                   {"task", e.taskName},
                   {"location", nullIfEmpty(e.location)},
                   {"endpoint", nullIfEmpty(e.location)},
                   {"timestamp", e.timestamp},
                   {"taskManagerId", nullIfEmpty(e.taskManagerId)}});
  }
  Json entries = Json::array();
  for (const ExceptionInfo& e : job.exceptions) {
    if (entries.size() >= maxExceptions) break;
    entries.push_back({{"exceptionName", e.exceptionName},
                       {"stacktrace", e.stacktrace},
                       {"timestamp", e.timestamp},
                       {"taskName", nullIfEmpty(e.taskName)},
                       {"location", nullIfEmpty(e.location)},
                       {"endpoint", nullIfEmpty(e.location)},
                       {"taskManagerId", nullIfEmpty(e.taskManagerId)},
                       {"failureLabels", Json::object()},
                       {"concurrentExceptions", Json::array()}});
  }
  const bool none = job.exceptions.empty();
  return Json{
      {"root-exception", none ? Json(nullptr) : Json(job.exceptions.front().stacktrace)},
      {"timestamp", none ? Json(nullptr) : Json(job.exceptions.front().timestamp)},
      {"all-exceptions", std::move(all)},
      {"truncated", taskExceptions > maxExceptions},
      {"exceptionHistory",
       {{"entries", std::move(entries)}, {"truncated", job.exceptions.size() > maxExceptions}}}};
}

// ---- checkpoints ----

Json checkpointingStatistics(const JobInfo& job) {
  const CheckpointingInfo& c = job.checkpoints;
  std::vector<double> checkpointed, state, duration, alignment;
  Json history = Json::array();
  Json latestCompleted = nullptr, latestSavepoint = nullptr, latestFailed = nullptr;
  for (const CheckpointInfo& ci : c.history) {  // newest first
    history.push_back(checkpointEntry(job, ci));
    if (ci.status == "COMPLETED") {
      checkpointed.push_back(static_cast<double>(ci.checkpointedSize));
      state.push_back(static_cast<double>(ci.stateSize));
      duration.push_back(static_cast<double>(ci.endToEndDurationMs));
      alignment.push_back(static_cast<double>(ci.alignmentDurationMs));
      if (ci.isSavepoint && latestSavepoint.is_null()) latestSavepoint = history.back();
      if (!ci.isSavepoint && latestCompleted.is_null()) latestCompleted = history.back();
    } else if (ci.status == "FAILED" && latestFailed.is_null()) {
      latestFailed = history.back();
    }
  }
  Json restored = nullptr;
  if (c.restored) {
    restored = Json{{"id", c.restored->id},
                    {"restore_timestamp", c.restored->restoreTimestamp},
                    {"is_savepoint", c.restored->isSavepoint},
                    {"external_path", nullIfEmpty(c.restored->externalPath)}};
  }
  const std::vector<double> zeros(checkpointed.size(), 0.0);
  return Json{{"counts",
               {{"restored", c.restoredCount},
                {"total", c.completedCount + c.failedCount + c.inProgressCount},
                {"in_progress", c.inProgressCount},
                {"completed", c.completedCount},
                {"failed", c.failedCount}}},
              {"summary",
               {{"checkpointed_size", statsSummary(checkpointed)},
                {"state_size", statsSummary(state)},
                {"end_to_end_duration", statsSummary(duration)},
                {"alignment_buffered", statsSummary(zeros)},
                {"processed_data", statsSummary(zeros)},
                {"persisted_data", statsSummary(zeros)},
                {"alignment_duration", statsSummary(alignment)}}},
              {"latest",
               {{"completed", std::move(latestCompleted)},
                {"savepoint", std::move(latestSavepoint)},
                {"failed", std::move(latestFailed)},
                {"restored", std::move(restored)}}},
              {"history", std::move(history)}};
}

Json checkpointConfig(const JobInfo& job) {
  const CheckpointingInfo& c = job.checkpoints;
  return Json{{"mode", c.mode},
              {"interval", c.intervalMs},
              {"timeout", c.timeoutMs},
              {"min_pause", c.minPauseMs},
              {"max_concurrent", c.maxConcurrent},
              {"externalization",
               {{"enabled", c.externalized}, {"delete_on_cancellation", c.deleteOnCancellation}}},
              {"state_backend", c.stateBackend},
              {"checkpoint_storage", c.checkpointStorage},
              {"unaligned_checkpoints", c.unaligned},
              {"tolerable_failed_checkpoints", c.tolerableFailures},
              {"aligned_checkpoint_timeout", 0},
              {"checkpoints_after_tasks_finish", true},
              {"state_changelog_enabled", false}};
}

Json checkpointDetails(const JobInfo& job, const CheckpointInfo& checkpoint) {
  Json e = checkpointEntry(job, checkpoint);
  Json tasks = Json::object();
  for (const auto& [vertexId, t] : checkpoint.tasks) {
    const int64_t e2e =
        t.latestAckTimestamp > 0 && checkpoint.triggerTimestamp > 0
            ? std::max<int64_t>(0, t.latestAckTimestamp - checkpoint.triggerTimestamp)
            : -1;
    tasks[vertexId] = Json{{"id", checkpoint.id},
                           {"status", checkpoint.status},
                           {"latest_ack_timestamp", t.latestAckTimestamp},
                           {"checkpointed_size", t.stateSize},
                           {"state_size", t.stateSize},
                           {"end_to_end_duration", e2e},
                           {"alignment_buffered", 0},
                           {"processed_data", 0},
                           {"persisted_data", 0},
                           {"num_subtasks", t.numSubtasks},
                           {"num_acknowledged_subtasks", t.numAcknowledged}};
  }
  e["tasks"] = std::move(tasks);
  return e;
}

}  // namespace sluice::rest
