#include "runtime/task_group.h"

#include <pthread.h>

#include <algorithm>

#include <fmt/format.h>

namespace sluice::runtime {

TaskGroup::TaskGroup(const StreamGraph& graph, const JobGraph& jobGraph,
                     const MiniClusterOptions& options, SerialExecutor& checkpointExecutor,
                     TaskGroupSpec spec) {
  int slots = spec.numberOfSlots;
  if (slots <= 0) {
    slots = 1;
    for (const auto& v : jobGraph.vertices) slots = std::max(slots, v.parallelism);
  }
  std::shared_ptr<const Clock> clock = options.clock;
  if (!clock) clock = std::shared_ptr<const Clock>(&SystemClock::instance(), [](const Clock*) {});
  services_ = std::make_unique<TaskServices>(options.configuration, std::move(clock), slots,
                                             &checkpointExecutor);
  services_->setMetricVariables(options.metricVariables);
  tasks_.resize(jobGraph.vertices.size());
  for (const auto& v : jobGraph.vertices) {
    tasks_[v.id].resize(static_cast<size_t>(v.parallelism));
    for (int s = 0; s < v.parallelism; ++s) {
      if (spec.isLocal && !spec.isLocal(v.id, s)) continue;
      auto task = std::make_unique<Task>(graph, jobGraph, v.id, s, spec.attempt);
      task->setServices(services_.get());
      task->setListener(spec.listener);
      task->setCheckpointing(spec.checkpointGateway, spec.mode, spec.incrementalSharedDirectory);
      if (spec.restores != nullptr) {
        auto r = spec.restores->tasks.find(checkpoint::TaskId{v.id, s});
        if (r != spec.restores->tasks.end()) task->setRestore(r->second);
      }
      flat_.push_back(task.get());
      tasks_[v.id][s] = std::move(task);
    }
  }
  wire(graph, jobGraph, options, spec);
}

TaskGroup::~TaskGroup() { join(); }

TaskLocation LocalDeployment::location(int, int) const {
  TaskLocation l;
  auto tm = options_.metricVariables.find("<tm_id>");
  if (tm != options_.metricVariables.end()) l.taskManagerId = tm->second;
  return l;
}

Task* TaskGroup::task(int vertex, int subtask) {
  return tasks_.at(static_cast<size_t>(vertex)).at(static_cast<size_t>(subtask)).get();
}

// Gate channels: for each consumer subtask, the channels of its input edges
// in edge order; then one record writer per output edge of each producer.
// A channel with one end elsewhere goes through the remote channels.
void TaskGroup::wire(const StreamGraph& sg, const JobGraph& jg, const MiniClusterOptions& options,
                     const TaskGroupSpec& spec) {
  ExecutionGraph eg = createExecutionGraph(jg);
  std::vector<std::vector<int>> gateChannel(jg.edges.size());  // per edge, per channel
  // The index of each channel among its producer's channels (subpartition).
  std::vector<std::vector<int>> subpartition(jg.edges.size());
  for (size_t je = 0; je < jg.edges.size(); ++je) {
    const auto& chans = eg.channels[je];
    subpartition[je].resize(chans.size());
    std::vector<int> next(static_cast<size_t>(jg.vertices.at(jg.edges[je].source).parallelism));
    for (size_t k = 0; k < chans.size(); ++k) {
      subpartition[je][k] = next.at(static_cast<size_t>(chans[k].producerSubtask))++;
    }
  }
  for (const auto& v : jg.vertices) {
    for (int s = 0; s < v.parallelism; ++s) {
      Task* consumer = task(v.id, s);
      std::vector<InputChannelInfo> infos;
      std::vector<RemoteChannels::Input> remoteInputs;
      for (int je : v.inputs) {
        auto& chans = eg.channels[je];
        gateChannel[je].resize(chans.size(), -1);
        const int producerVertex = jg.edges[je].source;
        for (size_t k = 0; k < chans.size(); ++k) {
          if (chans[k].consumerSubtask != s) continue;
          gateChannel[je][k] = static_cast<int>(infos.size());
          const StreamEdge& e = sg.edge(jg.edges[je].streamEdge);
          if (consumer != nullptr && task(producerVertex, chans[k].producerSubtask) == nullptr) {
            remoteInputs.push_back(
                {je, chans[k].producerSubtask, subpartition[je][k], gateChannel[je][k]});
          }
          infos.push_back({e.id, e.inputIndex});
        }
      }
      if (consumer == nullptr) continue;
      consumer->createGate(std::move(infos));
      if (!remoteInputs.empty()) {
        if (spec.remote == nullptr) throw SluiceException("a remote input without a data plane");
        spec.remote->consumeRemote(v.id, s, std::move(remoteInputs), consumer->gate());
      }
    }
  }
  for (const auto& v : jg.vertices) {
    for (int je : v.outputs) {
      const auto& chans = eg.channels[je];
      const JobEdge& edge = jg.edges[je];
      for (int s = 0; s < v.parallelism; ++s) {
        Task* producer = task(v.id, s);
        if (producer == nullptr) continue;
        std::vector<RecordWriter::Target> targets;
        for (size_t k = 0; k < chans.size(); ++k) {
          if (chans[k].producerSubtask != s) continue;
          Task* consumer = task(edge.target, chans[k].consumerSubtask);
          if (consumer != nullptr) {
            targets.push_back({&consumer->gate(), gateChannel[je][k], /*local=*/true});
          } else {
            if (spec.remote == nullptr) {
              throw SluiceException("a remote output without a data plane");
            }
            targets.push_back(
                {spec.remote->producerChannel(static_cast<int>(je), s, subpartition[je][k]),
                 subpartition[je][k]});
          }
        }
        producer->addWriter(je, std::move(targets), options.segmentSize, options.buffersPerChannel,
                            options.floatingBuffers);
      }
    }
  }
}

void TaskGroup::start(std::function<void(Task&, TaskResult&)> ended) {
  for (Task* t : flat_) {
    threads_.emplace_back([t, ended] {
      // The OS name (top -H, gdb), at most 15 bytes: a task started from an
      // RPC thread would otherwise carry that thread's name.
      ::pthread_setname_np(
          ::pthread_self(),
          fmt::format("task-{}-{}", t->vertexId(), t->subtask()).substr(0, 15).c_str());
      TaskResult result = t->run();
      ended(*t, result);
    });
  }
}

void TaskGroup::join() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void TaskGroup::cancelAll() {
  for (Task* t : flat_) t->cancel();
}

// ---- LocalDeployment ----------------------------------------------------------------

std::vector<std::vector<TaskControl*>> LocalDeployment::deploy(const Attempt& attempt) {
  TaskGroupSpec spec;
  spec.attempt = attempt.number;
  spec.restores = attempt.restores;
  spec.checkpointGateway = attempt.checkpointGateway;
  spec.mode = attempt.mode;
  spec.incrementalSharedDirectory = attempt.incrementalSharedDirectory;
  spec.listener = attempt.events;
  events_ = attempt.events;
  // The previous attempt's tasks ended (join()); the scheduler no longer
  // reaches them once it holds the new controls.
  group_.reset();
  group_ = std::make_unique<TaskGroup>(*graph_, jobGraph_, options_, checkpointExecutor_,
                                       std::move(spec));
  std::vector<std::vector<TaskControl*>> controls(jobGraph_.vertices.size());
  for (const auto& v : jobGraph_.vertices) {
    for (int s = 0; s < v.parallelism; ++s) controls[v.id].push_back(group_->task(v.id, s));
  }
  return controls;
}

void LocalDeployment::setSourceCoordinator(int vertex, SourceCoordinatorLink* link) {
  for (int s = 0; s < jobGraph_.vertices.at(static_cast<size_t>(vertex)).parallelism; ++s) {
    group_->task(vertex, s)->setSourceCoordinator(link);
  }
}

void LocalDeployment::start() {
  TaskEvents* events = events_;
  group_->start([events](Task& task, TaskResult& result) {
    events->taskEnded(task.vertexId(), task.subtask(), std::move(result));
  });
}

void LocalDeployment::join() { group_->join(); }

}  // namespace sluice::runtime
