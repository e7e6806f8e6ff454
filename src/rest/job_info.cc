#include "rest/job_info.h"

#include <algorithm>

#include <fmt/format.h>

#include <sluice/core/config_options.h>

#include "runtime/task_metrics.h"

namespace sluice::rest {
namespace {

// Flink's ExecutionJobVertex aggregation of its subtasks' states.
std::string aggregateState(const std::vector<runtime::SubtaskStatus>& subtasks) {
  if (subtasks.empty()) return "CREATED";
  auto any = [&](const char* s) {
    return std::any_of(subtasks.begin(), subtasks.end(),
                       [&](const runtime::SubtaskStatus& t) { return t.state == s; });
  };
  auto all = [&](const char* s) {
    return std::all_of(subtasks.begin(), subtasks.end(),
                       [&](const runtime::SubtaskStatus& t) { return t.state == s; });
  };
  if (any("FAILED")) return "FAILED";
  if (any("CANCELING")) return "CANCELING";
  if (all("FINISHED")) return "FINISHED";
  if (all("CANCELED")) return "CANCELED";
  if (any("RUNNING") || any("FINISHED")) return "RUNNING";
  if (any("CANCELED")) return "CANCELED";
  return subtasks.front().state;
}

}  // namespace

const char* shipStrategy(PartitionKind kind) {
  switch (kind) {
    case PartitionKind::kHash: return "HASH";
    case PartitionKind::kForward: return "FORWARD";
    case PartitionKind::kRebalance: return "REBALANCE";
    case PartitionKind::kRescale: return "RESCALE";
    case PartitionKind::kBroadcast: return "BROADCAST";
    case PartitionKind::kShuffle: return "SHUFFLE";
    case PartitionKind::kGlobal: return "GLOBAL";
    case PartitionKind::kCustom: return "CUSTOM";
    case PartitionKind::kDefault: return "FORWARD";
  }
  return "FORWARD";
}

namespace {

const char* recordStatus(checkpoint::CheckpointRecord::Status s) {
  switch (s) {
    case checkpoint::CheckpointRecord::Status::kInProgress: return "IN_PROGRESS";
    case checkpoint::CheckpointRecord::Status::kCompleted: return "COMPLETED";
    case checkpoint::CheckpointRecord::Status::kFailed: return "FAILED";
  }
  return "IN_PROGRESS";
}

}  // namespace

JobInfo describeJob(runtime::JobRun& run) {
  const JobGraph& jg = run.jobGraph();
  const StreamGraph& sg = *run.streamGraph();
  JobInfo job;
  job.id = run.jobId();
  job.name = jg.jobName;
  const JobStatus state = run.state();
  job.state = jobStatusName(state);
  job.startTime = run.startTimeMs();
  job.endTime = isTerminal(state) ? run.endTimeMs() : -1;
  job.durationMs = run.runtimeMs();
  if (job.endTime > 0) job.durationMs = job.endTime - job.startTime;
  job.timestamps["INITIALIZING"] = job.startTime;
  job.timestamps["CREATED"] = job.startTime;
  job.timestamps["RUNNING"] = job.startTime;
  if (job.endTime > 0) job.timestamps[job.state] = job.endTime;
  job.restarts = run.scheduler().restarts();

  const auto statuses = run.scheduler().subtaskStatuses();
  std::vector<std::string> ids;
  for (const auto& v : jg.vertices) ids.push_back(runtime::jobVertexHexId(jg, v.id));
  for (const auto& v : jg.vertices) {
    VertexInfo info;
    info.id = ids[v.id];
    info.index = v.id;
    info.name = v.name;
    info.parallelism = v.parallelism;
    info.maxParallelism = v.maxParallelism;
    job.maxParallelism = std::max(job.maxParallelism, v.maxParallelism);
    for (int n : v.chain) info.operatorNames.push_back(sg.node(n).name);
    for (int je : v.inputs) {
      const JobEdge& e = jg.edges.at(static_cast<size_t>(je));
      info.inputs.push_back({ids.at(static_cast<size_t>(e.source)), shipStrategy(e.partition)});
    }
    const std::vector<runtime::SubtaskStatus> none;
    const auto& sts = static_cast<size_t>(v.id) < statuses.size() ? statuses[v.id] : none;
    for (size_t s = 0; s < sts.size(); ++s) {
      SubtaskInfo st;
      st.subtask = static_cast<int>(s);
      st.status = sts[s].state;
      // A job that ended leaves no subtask running.
      if (isTerminal(state) && (st.status == "RUNNING" || st.status == "CREATED")) {
        st.status = state == JobStatus::kFinished ? "FINISHED" : "CANCELED";
      }
      st.attempt = sts[s].attempt;
      st.host = sts[s].location.host;
      st.taskManagerId = sts[s].location.taskManagerId;
      st.endpoint = sts[s].location.endpoint;
      st.startTime = sts[s].startTime;
      st.endTime = sts[s].endTime;
      info.startTime = info.startTime < 0 ? st.startTime : std::min(info.startTime, st.startTime);
      info.endTime = std::max(info.endTime, st.endTime);
      info.subtasks.push_back(std::move(st));
    }
    std::vector<runtime::SubtaskStatus> view;
    for (const auto& st : info.subtasks) {
      runtime::SubtaskStatus x;
      x.state = st.status;
      view.push_back(x);
    }
    info.status = aggregateState(view);
    if (info.status != "FINISHED" && info.status != "CANCELED" && info.status != "FAILED") {
      info.endTime = -1;
    }
    job.vertices.push_back(std::move(info));
  }

  // Checkpoints.
  const auto& cc = run.coordinator().config();
  CheckpointingInfo& c = job.checkpoints;
  c.enabled = cc.periodic();
  c.mode = cc.mode == CheckpointingMode::kExactlyOnce ? "exactly_once" : "at_least_once";
  c.intervalMs = cc.interval.count();
  c.timeoutMs = cc.timeout.count();
  c.minPauseMs = cc.minPause.count();
  c.maxConcurrent = cc.maxConcurrent;
  c.externalized = !cc.checkpointsBase.empty();
  c.deleteOnCancellation = !cc.retainOnCancellation;
  const std::string backend = run.configuration().get(options::kStateBackendType);
  // Flink's class names; the tiered backend is Sluice's own.
  c.stateBackend = backend == "rocksdb"  ? "EmbeddedRocksDBStateBackend"
                   : backend == "tiered" ? "TieredStateBackend"
                                         : "HashMapStateBackend";
  c.checkpointStorage =
      cc.checkpointsBase.empty() ? "JobManagerCheckpointStorage" : "FileSystemCheckpointStorage";
  c.tolerableFailures = cc.tolerableFailures;
  const checkpoint::CheckpointStats stats = run.checkpointStats();
  c.restoredCount = stats.restored;
  c.completedCount = stats.completed;
  c.failedCount = stats.failed;
  c.inProgressCount = stats.inProgress;
  for (auto it = stats.history.rbegin(); it != stats.history.rend(); ++it) {
    CheckpointInfo ci;
    ci.id = it->id;
    ci.status = recordStatus(it->status);
    ci.isSavepoint = it->isSavepoint;
    ci.triggerTimestamp = it->triggerTimestamp;
    ci.latestAckTimestamp = it->latestAckTimestamp;
    ci.endToEndDurationMs =
        it->status == checkpoint::CheckpointRecord::Status::kInProgress
            ? std::max<int64_t>(
                  0, (it->latestAckTimestamp > 0 ? it->latestAckTimestamp : it->triggerTimestamp) -
                         it->triggerTimestamp)
            : it->durationMs;
    ci.checkpointedSize = it->sizeBytes;
    ci.stateSize = it->sizeBytes;
    ci.numSubtasks = it->numSubtasks;
    ci.numAcknowledgedSubtasks = it->numAcknowledged;
    ci.externalPath = it->externalPath;
    ci.failureMessage = it->failureMessage;
    ci.failureTimestamp = it->failureTimestamp;
    for (const auto& [vertex, vs] : it->vertices) {
      if (static_cast<size_t>(vertex) >= ids.size()) continue;
      CheckpointInfo::TaskStats& ts = ci.tasks[ids[static_cast<size_t>(vertex)]];
      ts.numSubtasks = vs.numSubtasks;
      ts.numAcknowledged = vs.numAcknowledged;
      ts.latestAckTimestamp = vs.latestAckTimestamp;
    }
    c.history.push_back(std::move(ci));
  }
  if (stats.restored > 0) {
    c.restored = CheckpointingInfo::Restored{stats.lastRestoredId, stats.lastRestoreTimestamp,
                                             stats.lastRestoredIsSavepoint, stats.lastRestoredPath};
  }

  // Exceptions, newest first.
  const auto failures = run.scheduler().failures();
  for (auto it = failures.rbegin(); it != failures.rend(); ++it) {
    ExceptionInfo e;
    e.exceptionName = "sluice::SluiceException";
    e.stacktrace = it->message;
    e.timestamp = it->timestamp;
    e.taskName = it->taskName;
    e.location = it->location.endpoint.empty() ? it->location.host : it->location.endpoint;
    e.taskManagerId = it->location.taskManagerId;
    job.exceptions.push_back(std::move(e));
  }
  return job;
}

void addSamples(MetricStore& store, const std::vector<metrics::MetricSample>& samples,
                const std::string& tmId) {
  auto var = [](const metrics::MetricSample& s, const char* name) -> std::string {
    auto it = s.variables.find(name);
    return it == s.variables.end() ? std::string() : it->second;
  };
  for (const metrics::MetricSample& s : samples) {
    const std::string value = metrics::formatMetricValue(s.value);
    const std::string id = s.restId();
    switch (s.kind) {
      case metrics::ScopeKind::kJobManager: store.jobManager[id] = value; break;
      case metrics::ScopeKind::kJobManagerJob: store.jobs[var(s, "<job_id>")][id] = value; break;
      case metrics::ScopeKind::kTaskManager: {
        std::string tm = var(s, "<tm_id>");
        if (tm.empty()) tm = tmId;
        store.taskManagers[tm][id] = value;
        break;
      }
      case metrics::ScopeKind::kTaskManagerJob: break;
      case metrics::ScopeKind::kTask:
      case metrics::ScopeKind::kOperator: {
        int subtask = 0;
        try {
          subtask = std::stoi(var(s, "<subtask_index>"));
        } catch (...) {
          continue;
        }
        auto& values = store.tasks[var(s, "<job_id>")][var(s, "<task_id>")][subtask];
        if (s.kind == metrics::ScopeKind::kOperator) {
          values[var(s, "<operator_name>") + "." + id] = value;
        } else {
          values[id] = value;
        }
        break;
      }
    }
  }
}

}  // namespace sluice::rest
