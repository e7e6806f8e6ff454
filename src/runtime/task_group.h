// TaskGroup: the tasks of one job attempt that run in this process, each on
// its own thread, wired by channels. Embedded, the group holds every subtask
// of the job; in a TaskManager, the subtasks the JobManager deployed there,
// and channels to subtasks elsewhere go through RemoteChannels (the data
// plane).
//
// TaskDeployment is how the Scheduler runs an attempt without knowing where:
// LocalDeployment runs a TaskGroup of the whole job in this process; the
// cluster's deployment sends the subtasks to TaskManagers.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sluice/core/clock.h>
#include <sluice/core/config.h>
#include <sluice/graph/job_graph.h>

#include "checkpoint/checkpoint_coordinator_gateway.h"
#include "checkpoint/state_assignment.h"
#include "core/serial_executor.h"
#include "runtime/task.h"
#include "runtime/task_control.h"

namespace sluice::runtime {

struct MiniClusterOptions {
  size_t segmentSize = 32 * 1024;  // taskmanager.memory.segment-size
  int buffersPerChannel = 2;       // taskmanager.network.memory.buffers-per-channel
  int floatingBuffers = 8;         // taskmanager.network.memory.floating-buffers-per-gate
  // The job's configuration, as operators see it (state backend settings).
  Configuration configuration;
  // Processing time for every operator; null means the system clock.
  std::shared_ptr<const Clock> clock;
  // <host>, <tm_id>, <job_id>, <job_name> of the tasks' metrics.
  std::map<std::string, std::string> metricVariables;
};

// Channels whose other end runs in another process.
class RemoteChannels {
 public:
  virtual ~RemoteChannels() = default;
  // The sink of channel `subpartition` of producer subtask `producerSubtask`
  // on job edge `jobEdge`, whose consumer runs elsewhere.
  virtual BufferSink* producerChannel(int jobEdge, int producerSubtask, int subpartition) = 0;
  struct Input {
    int jobEdge;
    int producerSubtask;
    int subpartition;  // the channel's index among the producer's channels
    int gateChannel;
  };
  // Connects the gate of consumer subtask (vertex, subtask) to its producers
  // elsewhere.
  virtual void consumeRemote(int vertex, int subtask, std::vector<Input> inputs,
                             InputGate& gate) = 0;
};

struct TaskGroupSpec {
  int attempt = 0;
  // What each task restores; tasks not in it start empty.
  const checkpoint::StateAssignment* restores = nullptr;
  checkpoint::CheckpointCoordinatorGateway* checkpointGateway = nullptr;
  CheckpointingMode mode = CheckpointingMode::kExactlyOnce;
  std::string incrementalSharedDirectory;
  TaskListener* listener = nullptr;
  // Which subtasks run here; null: all of them.
  std::function<bool(int vertex, int subtask)> isLocal;
  // Required when some subtask runs elsewhere.
  RemoteChannels* remote = nullptr;
  // Slots of this process the job's tasks share (managed memory is divided
  // by it); 0: the job's largest parallelism (every subtask index one slot).
  int numberOfSlots = 0;
};

class TaskGroup {
 public:
  // Creates and wires the tasks; none runs yet. `checkpointExecutor`
  // outlives the group.
  TaskGroup(const StreamGraph& graph, const JobGraph& jobGraph, const MiniClusterOptions& options,
            SerialExecutor& checkpointExecutor, TaskGroupSpec spec);
  ~TaskGroup();

  // Null when (vertex, subtask) does not run here.
  Task* task(int vertex, int subtask);
  const std::vector<Task*>& tasks() const { return flat_; }

  // Runs every task on a thread of its own; `ended` is called on that thread
  // once the task's run() returned.
  void start(std::function<void(Task&, TaskResult&)> ended);
  // Waits for every thread.
  void join();
  void cancelAll();

 private:
  void wire(const StreamGraph& graph, const JobGraph& jobGraph, const MiniClusterOptions& options,
            const TaskGroupSpec& spec);

  std::unique_ptr<TaskServices> services_;
  std::vector<std::vector<std::unique_ptr<Task>>> tasks_;  // [vertex][subtask], null elsewhere
  std::vector<Task*> flat_;
  std::vector<std::thread> threads_;
};

// What the scheduler hears about the tasks of an attempt.
class TaskEvents : public TaskListener {
 public:
  // The task's run() ended (finished, failed or cancelled). Any thread.
  virtual void taskEnded(int vertex, int subtask, TaskResult result) = 0;
};

// An attempt could not start for a reason that may pass (no slots yet, a
// checkpoint not readable now): the restart strategy decides whether to try
// again.
class RetryableStartFailure : public SluiceException {
 public:
  using SluiceException::SluiceException;
};

// Where a subtask runs, for the REST API.
struct TaskLocation {
  std::string host = "localhost";
  std::string taskManagerId;
  std::string endpoint;  // "host:port" of its TaskManager; empty embedded
};

class TaskDeployment {
 public:
  virtual ~TaskDeployment() = default;
  // Where (vertex, subtask) of the latest deployed attempt runs.
  virtual TaskLocation location(int vertex, int subtask) const {
    (void)vertex;
    (void)subtask;
    return {};
  }
  struct Attempt {
    std::string jobId;
    int number = 0;
    // The checkpoint the attempt restores (null: none) and its assignment.
    const checkpoint::CompletedCheckpoint* checkpoint = nullptr;
    const checkpoint::StateAssignment* restores = nullptr;
    checkpoint::CheckpointCoordinatorGateway* checkpointGateway = nullptr;
    CheckpointingMode mode = CheckpointingMode::kExactlyOnce;
    std::string incrementalSharedDirectory;
    TaskEvents* events = nullptr;
  };
  // Creates every task of the attempt and returns a control for each,
  // [vertex][subtask]; none runs yet. Throws RetryableStartFailure when the
  // resources are not there (yet), SluiceException otherwise.
  virtual std::vector<std::vector<TaskControl*>> deploy(const Attempt& attempt) = 0;
  // Where the deployed reader tasks of source vertex `vertex` send their
  // split requests (tasks elsewhere reach it through the scheduler's
  // sourceCoordinator()).
  virtual void setSourceCoordinator(int vertex, SourceCoordinatorLink* link) = 0;
  // Runs the deployed tasks.
  virtual void start() = 0;
  // Blocks until every task of the attempt ended (events->taskEnded was
  // called for each). Then the controls are no longer used.
  virtual void join() = 0;
};

// Every subtask as a thread of this process.
class LocalDeployment final : public TaskDeployment {
 public:
  LocalDeployment(std::shared_ptr<const StreamGraph> graph, const JobGraph& jobGraph,
                  MiniClusterOptions options, SerialExecutor& checkpointExecutor)
      : graph_(std::move(graph)),
        jobGraph_(jobGraph),
        options_(std::move(options)),
        checkpointExecutor_(checkpointExecutor) {}
  std::vector<std::vector<TaskControl*>> deploy(const Attempt& attempt) override;
  TaskLocation location(int vertex, int subtask) const override;
  void setSourceCoordinator(int vertex, SourceCoordinatorLink* link) override;
  void start() override;
  void join() override;

 private:
  const std::shared_ptr<const StreamGraph> graph_;
  const JobGraph& jobGraph_;
  const MiniClusterOptions options_;
  SerialExecutor& checkpointExecutor_;
  TaskEvents* events_ = nullptr;
  std::unique_ptr<TaskGroup> group_;
};

}  // namespace sluice::runtime
