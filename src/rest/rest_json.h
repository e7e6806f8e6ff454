// Flink's REST response bodies, rendered from the Dispatcher's neutral
// structs (rest/dispatcher.h). Internal to rest/web_monitor. Field names,
// nesting and value rules are those of Flink 1.17-1.19's
// flink-runtime rest/messages classes, named at each function, so that
// Flink users' scripts and the dashboard read them unchanged. Where Sluice
// has no value for a Flink field it sends Flink's "unknown" (-1, 0, null or
// an empty object, as Flink does); fields beyond Flink are marked "Sluice:"
// below.
//
// Metric values come from a MetricStore, by Flink's REST metric ids. Task
// metrics of a subtask are the ids without an operator prefix
// ("numRecordsIn"); operator metrics are "<operator>.<name>".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rest/dispatcher.h"
#include "rest/rest_params.h"

namespace sluice::rest {

struct WebMonitorOptions;

using Json = nlohmann::json;

int64_t nowMs();
// FINISHED, CANCELED, FAILED: Flink's globally terminal JobStatus.
bool isJobTerminal(std::string_view state);
// FINISHED, CANCELED, FAILED: Flink's terminal ExecutionState.
bool isExecutionTerminal(std::string_view state);

// ---- cluster ----

// DashboardConfiguration (GET /config). Sluice: "mode" (embedded | cluster)
// and "token-required" (mutating calls need rest.authentication.token).
Json dashboardConfig(const WebMonitorOptions& options, bool webSubmit);
// ClusterOverviewWithVersion (GET /overview).
Json clusterOverview(const ClusterOverview& overview, const std::vector<JobInfo>& jobs);
// TaskManagersInfo (GET /taskmanagers).
Json taskManagerList(const std::vector<TaskManagerInfo>& taskManagers);
// TaskManagerDetailsInfo (GET /taskmanagers/:id): the list entry plus
// allocatedSlots and metrics (TaskManagerMetricsInfo; JVM-only fields 0).
// Sluice metrics fields: processMemoryRss, cpuLoad, managedMemoryUsed,
// managedMemoryTotal.
Json taskManagerDetails(const TaskManagerInfo& tm, const MetricStore::Values* metrics);

// ---- jobs ----

// JobIdsWithStatusOverview (GET /jobs).
Json jobIds(const std::vector<JobInfo>& jobs);
// MultipleJobsDetails (GET /jobs/overview).
Json jobsOverview(const std::vector<JobInfo>& jobs);
// JobDetailsInfo (GET /jobs/:jobid), with each vertex's IOMetricsInfo summed
// over its subtasks from `metrics`.
Json jobDetails(const JobInfo& job, const MetricStore& metrics, int64_t now);
// The JSON plan (JobPlanInfo's "plan").
Json jobPlan(const JobInfo& job);
// JobVertexDetailsInfo (GET /jobs/:jobid/vertices/:vertexid).
Json vertexDetails(const JobInfo& job, const VertexInfo& vertex, const MetricStore& metrics,
                   int64_t now);
// SubtaskExecutionAttemptDetailsInfo (.../subtasks/:subtaskindex).
Json subtaskDetails(const JobInfo& job, const VertexInfo& vertex, const SubtaskInfo& subtask,
                    const MetricStore& metrics, int64_t now);
// JobExceptionsInfoWithHistory (GET /jobs/:jobid/exceptions), at most
// `maxExceptions` entries in each list.
Json jobExceptions(const JobInfo& job, size_t maxExceptions);

// ---- checkpoints ----

// CheckpointingStatistics (GET /jobs/:jobid/checkpoints). Sluice:
// "alignment_duration" (ms, the longest barrier alignment of a subtask) in
// each history entry and in the summary.
Json checkpointingStatistics(const JobInfo& job);
// CheckpointConfigInfo (GET /jobs/:jobid/checkpoints/config).
Json checkpointConfig(const JobInfo& job);
// CheckpointStatistics with its per-vertex TaskCheckpointStatistics
// (GET /jobs/:jobid/checkpoints/details/:checkpointid).
Json checkpointDetails(const JobInfo& job, const CheckpointInfo& checkpoint);
// Flink's percentile estimate (Commons Math "legacy": position p*(n+1)) of
// `sorted`, p in (0, 1]; 0 for an empty list.
double percentile(const std::vector<double>& sorted, double p);

// ---- vertex metrics ----

// JobVertexBackPressureInfo (.../backpressure) from backPressuredTimeMsPerSecond,
// idleTimeMsPerSecond and busyTimeMsPerSecond of each subtask; {"status":
// "deprecated"} (Flink's answer without metrics) when no subtask has them.
Json backpressure(const VertexInfo& vertex, const MetricStore& metrics, const std::string& jobId,
                  int64_t now);
// Flink's level of a back-pressure ratio: <= 0.10 "ok", <= 0.5 "low", else "high".
const char* backpressureLevel(double ratio);
// [{"id": "<subtask>.currentInputWatermark", "value": "..."}] (.../watermarks).
Json watermarks(const VertexInfo& vertex, const MetricStore& metrics, const std::string& jobId);

// The task metrics of one subtask, or null when it has reported none.
const MetricStore::Values* subtaskMetrics(const MetricStore& metrics, const std::string& jobId,
                                          const std::string& vertexId, int subtask);
// IOMetricsInfo summed over `subtasks` (null entries: nothing reported yet);
// the *-complete flags are `complete`.
Json ioMetricsInfo(const std::vector<const MetricStore::Values*>& subtasks, bool complete);

// ---- metric queries (MetricCollectionResponseBody, AggregatedMetricsResponseBody) ----

// Without `get`: [{"id": id}] of every metric; with it: [{"id", "value"}] of
// those requested that exist, in the requested order.
Json metricQuery(const MetricStore::Values& values, const std::optional<std::string>& get);
// Vertex metrics: ids "<subtask>.<metric id>" over every subtask.
MetricStore::Values vertexMetricValues(const MetricStore& metrics, const std::string& jobId,
                                       const std::string& vertexId);
// .../subtasks/metrics: without `get`: [{"id"}] of the metrics of any selected
// subtask; with it: [{"id", "min", "max", "avg", "sum"}] (those in `agg`) over
// the selected subtasks' numeric values, metrics without any left out.
Json aggregatedSubtaskMetrics(const MetricStore& metrics, const std::string& jobId,
                              const VertexInfo& vertex, const std::optional<std::string>& get,
                              const Aggregations& agg, const SubtaskSelection& subtasks);

}  // namespace sluice::rest
