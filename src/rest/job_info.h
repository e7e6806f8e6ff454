// What both Dispatchers share: a running or ended JobRun described in the
// REST API's neutral structs, and metric samples sorted into a MetricStore.
#pragma once

#include <string>
#include <vector>

#include "core/metric_registry.h"
#include "rest/dispatcher.h"
#include "runtime/mini_cluster.h"

namespace sluice::rest {

// Flink's ship strategy name of a partitioning ("HASH", "FORWARD", ...).
const char* shipStrategy(PartitionKind kind);

// `run` as the REST API shows it. Thread-safe (reads the run's locked state).
JobInfo describeJob(runtime::JobRun& run);

// Files `samples` into `store` by scope: JobManager, TaskManager `tmId`
// (samples of TaskManager scope with no <tm_id> variable), job, and task
// (job id -> vertex id -> subtask; operator metrics as "<operator>.<name>").
void addSamples(MetricStore& store, const std::vector<metrics::MetricSample>& samples,
                const std::string& tmId = "");

}  // namespace sluice::rest
