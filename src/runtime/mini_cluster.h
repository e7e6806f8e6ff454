// The embedded mini-cluster: runs one job's subtasks as threads in this
// process, wired by in-process channels. A standalone cluster runs the same
// Task code and swaps only the channels (ARCHITECTURE.md).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sluice/core/clock.h>
#include <sluice/core/config.h>
#include <sluice/core/runtime_context.h>
#include <sluice/graph/job_graph.h>

namespace sluice::runtime {

enum class JobState { kCreated, kRunning, kFinished, kCanceled, kFailed };
const char* jobStateName(JobState state);

struct MiniClusterOptions {
  size_t segmentSize = 32 * 1024;  // taskmanager.memory.segment-size
  int buffersPerChannel = 2;       // taskmanager.network.memory.buffers-per-channel
  int floatingBuffers = 8;         // taskmanager.network.memory.floating-buffers-per-gate
  // The job's configuration, as operators see it (state backend settings).
  Configuration configuration;
  // Processing time for every operator; null means the system clock.
  std::shared_ptr<const Clock> clock;
};

// What the checkpoint coordinator did so far (for tests and the client).
struct CheckpointStats {
  int64_t completed = 0;  // checkpoints and savepoints
  int64_t failed = 0;     // declined, timed out or not written
  int64_t restarts = 0;   // attempts after the first
  int64_t latestCompletedId = -1;
  std::string latestCompletedDirectory;  // empty for in-memory checkpoints
  int64_t totalDurationMs = 0;           // trigger to completion, over completed ones
  int64_t maxDurationMs = 0;
  int64_t totalSizeBytes = 0;  // state written, over completed ones
  int64_t maxSizeBytes = 0;
};

struct JobOutcome {
  JobState state = JobState::kCreated;
  std::string error;  // the first failure's message, when kFailed
  int64_t netRuntimeMs = 0;
  std::map<std::string, Accumulator::Value> accumulators;
  int64_t numRecordsDropped = 0;
  std::map<std::string, int64_t> counters;
};

// One running job. Thread-safe.
class JobRun {
 public:
  // Resolves nothing: `graph` must be resolved. Starts all tasks.
  static std::shared_ptr<JobRun> start(std::shared_ptr<const StreamGraph> graph,
                                       MiniClusterOptions options);
  ~JobRun();

  JobState state() const;
  // Cancels every task; wait() then reports kCanceled.
  void cancel();
  // Blocks until the job reached a terminal state.
  JobOutcome wait();
  const JobGraph& jobGraph() const { return jobGraph_; }
  const std::string& jobId() const;

  // Takes a savepoint into a new directory under `directory` (empty: the
  // state.savepoints.dir option) and returns its path once it is complete.
  // With `terminate`, the job then ends (FINISHED); with `drain` as well,
  // sources first emit the maximum watermark so that every window fires.
  // Throws SluiceException when the savepoint fails.
  std::string triggerSavepoint(const std::string& directory, bool terminate = false,
                               bool drain = false);
  CheckpointStats checkpointStats() const;

 private:
  class Impl;
  JobRun() = default;
  void monitor();

  std::shared_ptr<const StreamGraph> graph_;
  JobGraph jobGraph_;
  std::unique_ptr<Impl> impl_;
  mutable std::mutex mu_;
  std::condition_variable done_;
  JobOutcome outcome_;
  std::thread monitor_;
};

}  // namespace sluice::runtime
