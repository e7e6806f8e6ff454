// Plan mode: running a job's main() to capture its StreamGraph instead of
// executing it (Flink's client does the same with a job's main()).
//
// A cluster process (JobManager, TaskManager, client) loads the job library
// and calls its main inside capturePlan(). While it runs on this thread,
// StreamExecutionEnvironment::getExecutionEnvironment() starts from the
// submitted configuration (not from a config file of this process), and
// execute() / executeAsync() hand the resolved graph here and unwind out of
// main with PlanCaptured, which is no std::exception, so a job's
// `catch (const std::exception&)` does not swallow it. Building the pipeline
// must be deterministic: every process must capture the same graph.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <sluice/core/config.h>
#include <sluice/core/job_status.h>
#include <sluice/graph/stream_graph.h>

namespace sluice::cluster {

struct CapturedPlan {
  std::shared_ptr<StreamGraph> graph;  // resolved, with its job name
  Configuration configuration;         // the environment's, as the job's tasks see it
};

// Thrown by execute() in plan mode once the plan is captured.
struct PlanCaptured {};

using JobMain = int (*)(int argc, char** argv);

// Runs `main` with `args` (argv[0] is set to the library's name) in plan
// mode on this thread, `configuration` as the job's base configuration.
// Throws SluiceException naming the library when main returns without
// calling execute(), throws, or returns an error.
CapturedPlan capturePlan(JobMain main, const std::string& libraryName,
                         const std::vector<std::string>& args, const Configuration& configuration);

// For the API: whether this thread runs a main in plan mode, and its base
// configuration (null when not in plan mode).
bool planModeActive();
const Configuration* planModeConfiguration();
// Records the plan and throws PlanCaptured.
[[noreturn]] void capture(std::shared_ptr<StreamGraph> graph, Configuration configuration);

// execute() with execution.target: remote. The cluster client library sets
// it (a job executable built with sluice_add_job links it); null otherwise.
struct RemoteJobResult {
  JobStatus state = JobStatus::kFinished;  // kFinished, kFailed, kCanceled
  std::string error;
  int64_t netRuntimeMs = 0;
  std::map<std::string, int64_t> counters;
};
using RemoteExecutor = std::function<RemoteJobResult(std::shared_ptr<StreamGraph> graph,
                                                     const Configuration& configuration)>;
void setRemoteExecutor(RemoteExecutor executor);
const RemoteExecutor& remoteExecutor();

}  // namespace sluice::cluster
