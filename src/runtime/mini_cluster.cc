#include "runtime/mini_cluster.h"

#include <atomic>
#include <chrono>

#include <fmt/format.h>

#include "core/logging.h"
#include "runtime/task.h"

namespace sluice::runtime {

const char* jobStateName(JobState state) {
  switch (state) {
    case JobState::kCreated: return "CREATED";
    case JobState::kRunning: return "RUNNING";
    case JobState::kFinished: return "FINISHED";
    case JobState::kCanceled: return "CANCELED";
    case JobState::kFailed: return "FAILED";
  }
  return "UNKNOWN";
}

namespace {

// The coordinator of one source vertex: owns the enumerator and serializes
// every call into it.
class SourceCoordinatorHolder final : public SourceCoordinatorLink,
                                      public SplitEnumeratorContextBase {
 public:
  SourceCoordinatorHolder(std::vector<Task*> tasks, const OperatorFactory& factory)
      : tasks_(std::move(tasks)) {
    coordinator_ = factory.createCoordinator(*this);
  }

  void start() {
    std::lock_guard lock(mu_);
    coordinator_->start();
  }
  void close() {
    std::lock_guard lock(mu_);
    coordinator_->close();
  }

  void addReader(int subtask) override {
    std::lock_guard lock(mu_);
    coordinator_->addReader(subtask);
  }
  void requestSplit(int subtask) override {
    std::lock_guard lock(mu_);
    coordinator_->handleSplitRequest(subtask);
  }

  int currentParallelism() const override { return static_cast<int>(tasks_.size()); }
  void assignSplit(int subtask, std::vector<uint8_t> split) override {
    tasks_.at(subtask)->postSplit(std::move(split));
  }
  void signalNoMoreSplits(int subtask) override { tasks_.at(subtask)->postNoMoreSplits(); }

 private:
  std::vector<Task*> tasks_;
  std::recursive_mutex mu_;  // the enumerator may call back into us
  std::unique_ptr<SourceCoordinatorBase> coordinator_;
};

}  // namespace

class JobRun::Impl {
 public:
  // Declared first: tasks (and the state backends they own) go before it.
  std::unique_ptr<TaskServices> services;
  std::vector<std::vector<std::unique_ptr<Task>>> tasks;  // [vertex][subtask]
  std::vector<std::unique_ptr<SourceCoordinatorHolder>> coordinators;
  std::vector<std::thread> threads;
  std::vector<TaskResult> results;
  std::vector<Task*> flat;
  std::atomic<bool> cancelRequested{false};
  std::mutex failMu;
  bool failed = false;
  std::string firstError;  // the failure that happened first, in time
  std::chrono::steady_clock::time_point started;
};

std::shared_ptr<JobRun> JobRun::start(std::shared_ptr<const StreamGraph> graph,
                                      MiniClusterOptions options) {
  std::shared_ptr<JobRun> run(new JobRun());
  run->graph_ = std::move(graph);
  run->jobGraph_ = createJobGraph(*run->graph_);
  run->impl_ = std::make_unique<Impl>();
  Impl& im = *run->impl_;
  const JobGraph& jg = run->jobGraph_;
  const StreamGraph& sg = *run->graph_;
  ExecutionGraph eg = createExecutionGraph(jg);

  int slots = 1;
  for (const auto& v : jg.vertices) slots = std::max(slots, v.parallelism);
  std::shared_ptr<const Clock> clock = options.clock;
  if (!clock) clock = std::shared_ptr<const Clock>(&SystemClock::instance(), [](const Clock*) {});
  im.services = std::make_unique<TaskServices>(options.configuration, std::move(clock), slots);
  im.tasks.resize(jg.vertices.size());
  for (const auto& v : jg.vertices) {
    for (int s = 0; s < v.parallelism; ++s) {
      im.tasks[v.id].push_back(std::make_unique<Task>(sg, jg, v.id, s, 0));
      im.tasks[v.id].back()->setServices(im.services.get());
    }
  }
  // Gate channels: for each consumer subtask, the channels of its input
  // edges in edge order.
  std::vector<std::vector<int>> gateChannel(jg.edges.size());  // per edge, per channel
  for (const auto& v : jg.vertices) {
    for (int s = 0; s < v.parallelism; ++s) {
      std::vector<InputChannelInfo> infos;
      for (int je : v.inputs) {
        auto& chans = eg.channels[je];
        gateChannel[je].resize(chans.size(), -1);
        for (size_t k = 0; k < chans.size(); ++k) {
          if (chans[k].consumerSubtask != s) continue;
          gateChannel[je][k] = static_cast<int>(infos.size());
          const StreamEdge& e = sg.edge(jg.edges[je].streamEdge);
          infos.push_back({e.id, e.inputIndex});
        }
      }
      im.tasks[v.id][s]->createGate(std::move(infos));
    }
  }
  for (const auto& v : jg.vertices) {
    for (int je : v.outputs) {
      const auto& chans = eg.channels[je];
      const JobEdge& edge = jg.edges[je];
      for (int s = 0; s < v.parallelism; ++s) {
        std::vector<RecordWriter::Target> targets;
        for (size_t k = 0; k < chans.size(); ++k) {
          if (chans[k].producerSubtask != s) continue;
          Task& consumer = *im.tasks[edge.target][chans[k].consumerSubtask];
          targets.push_back({&consumer.gate(), gateChannel[je][k]});
        }
        im.tasks[v.id][s]->addWriter(je, std::move(targets), options.segmentSize,
                                     options.buffersPerChannel, options.floatingBuffers);
      }
    }
  }
  for (const auto& v : jg.vertices) {
    const StreamNode& head = sg.node(v.head());
    if (!head.factory->isSource()) continue;
    std::vector<Task*> ts;
    for (auto& t : im.tasks[v.id]) ts.push_back(t.get());
    im.coordinators.push_back(std::make_unique<SourceCoordinatorHolder>(ts, *head.factory));
    for (auto& t : im.tasks[v.id]) t->setSourceCoordinator(im.coordinators.back().get());
  }
  for (auto& per : im.tasks)
    for (auto& t : per) im.flat.push_back(t.get());
  im.results.resize(im.flat.size());

  log::info("Starting job '{}' with {} tasks in {} vertices", jg.jobName, im.flat.size(),
            jg.vertices.size());
  im.started = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(run->mu_);
    run->outcome_.state = JobState::kRunning;
  }
  for (auto& c : im.coordinators) c->start();
  for (size_t i = 0; i < im.flat.size(); ++i) {
    im.threads.emplace_back([run = run.get(), i] {
      Impl& im = *run->impl_;
      im.results[i] = im.flat[i]->run();
      if (im.results[i].failed) {
        std::lock_guard lock(im.failMu);
        if (!im.failed) {
          im.failed = true;
          im.firstError = im.results[i].error;
          log::error("{}", im.results[i].error);
          for (Task* t : im.flat) t->cancel();
        }
      }
    });
  }
  run->monitor_ = std::thread([run = run.get()] { run->monitor(); });
  return run;
}

void JobRun::monitor() {
  Impl& im = *impl_;
  for (auto& t : im.threads) t.join();
  std::string coordinatorError;
  for (auto& c : im.coordinators) {
    try {
      c->close();
    } catch (...) {
      if (coordinatorError.empty()) {
        coordinatorError = "source enumerator close() failed: " + describeCurrentException();
      }
    }
  }
  JobOutcome out;
  out.netRuntimeMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now() - im.started)
                         .count();
  std::map<std::string, std::unique_ptr<Accumulator>> accs;
  std::string accumulatorError;
  bool anyCancelled = false;
  try {
    for (auto& r : im.results) {
      anyCancelled |= r.cancelled;
      out.numRecordsDropped += r.numRecordsDropped;
      for (auto& [name, v] : r.counters) out.counters[name] += v;
      for (auto& [name, acc] : r.accumulators) {
        auto it = accs.find(name);
        if (it == accs.end()) {
          accs.emplace(name, acc->clone());
        } else if (it->second->getLocalValue().index() != acc->getLocalValue().index()) {
          accumulatorError = fmt::format(
              "accumulator '{}' is registered with different types in different operators", name);
        } else {
          it->second->merge(*acc);
        }
      }
    }
    for (auto& [name, acc] : accs) out.accumulators[name] = acc->getLocalValue();
  } catch (...) {
    accumulatorError = "merging accumulators failed: " + describeCurrentException();
  }
  if (accumulatorError.empty()) accumulatorError = coordinatorError;
  if (im.failed || !accumulatorError.empty()) {
    out.state = JobState::kFailed;
    out.error = im.failed ? im.firstError : accumulatorError;
  } else if (im.cancelRequested.load() && anyCancelled) {
    // A cancel that came after every task had finished changes nothing.
    out.state = JobState::kCanceled;
  } else {
    out.state = JobState::kFinished;
  }
  log::info("Job '{}' switched to {} after {} ms", jobGraph_.jobName, jobStateName(out.state),
            out.netRuntimeMs);
  {
    std::lock_guard lock(mu_);
    outcome_ = std::move(out);
  }
  done_.notify_all();
}

JobState JobRun::state() const {
  std::lock_guard lock(mu_);
  return outcome_.state;
}

void JobRun::cancel() {
  impl_->cancelRequested.store(true);
  for (Task* t : impl_->flat) t->cancel();
}

JobOutcome JobRun::wait() {
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] {
    return outcome_.state != JobState::kRunning && outcome_.state != JobState::kCreated;
  });
  return outcome_;
}

JobRun::~JobRun() {
  if (monitor_.joinable()) {
    {
      std::lock_guard lock(mu_);
      if (outcome_.state == JobState::kRunning) {
        impl_->cancelRequested.store(true);
        for (Task* t : impl_->flat) t->cancel();
      }
    }
    monitor_.join();
  }
}

}  // namespace sluice::runtime
