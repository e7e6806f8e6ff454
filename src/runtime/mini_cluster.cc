#include "runtime/mini_cluster.h"

#include <fmt/format.h>

#include <sluice/core/clock.h>
#include <sluice/core/config_options.h>

#include "checkpoint/checkpoint_integrity.h"
#include "checkpoint/checkpoint_metadata.h"
#include "checkpoint/state_assignment.h"
#include "core/logging.h"
#include "core/random_id.h"

namespace sluice::runtime {
namespace {

// The savepoint a job starts from (execution.savepoint.path), if any,
// verified whole: a damaged one fails the submission, naming the file.
std::optional<checkpoint::CompletedCheckpoint> initialCheckpoint(const Configuration& config) {
  const std::string path =
      checkpoint::stripFileScheme(config.get(options::kExecutionSavepointPath));
  if (path.empty()) return std::nullopt;
  Result<checkpoint::CompletedCheckpoint> cp = checkpoint::loadCheckpoint(path);
  if (!cp.isOk()) throw SluiceException(cp.status().message());
  Status verified = checkpoint::verifyCheckpoint(cp.value());
  if (!verified.isOk()) throw SluiceException(verified.message());
  return std::move(cp).value();
}

void warnAboutMissingUids(const StreamGraph& graph) {
  std::string list;
  for (const StreamNode& node : graph.nodes()) {
    if (!node.uid.empty()) continue;
    list += fmt::format("{}'{}'", list.empty() ? "" : ", ", node.name);
  }
  if (list.empty()) return;
  log::warn(
      "Operators without a uid get one from their position in the job ({}); state restores "
      "only into the same job shape. Set .uid(\"...\") on stateful operators.",
      list);
}

}  // namespace

std::shared_ptr<JobRun> JobRun::start(std::shared_ptr<const StreamGraph> graph,
                                      MiniClusterOptions options,
                                      const DeploymentFactory& deployment, std::string jobId) {
  std::shared_ptr<JobRun> run(new JobRun());
  run->graph_ = std::move(graph);
  run->jobGraph_ = createJobGraph(*run->graph_);
  run->jobId_ = jobId.empty() ? randomHexId() : std::move(jobId);
  run->startTimeMs_ = SystemClock::instance().currentTimeMillis();
  auto& vars = options.metricVariables;
  if (!vars.count("<host>")) vars["<host>"] = "localhost";
  if (!vars.count("<tm_id>")) vars["<tm_id>"] = embeddedTaskManagerId();
  vars["<job_id>"] = run->jobId_;
  vars["<job_name>"] = run->jobGraph_.jobName;
  run->configuration_ = options.configuration;
  const StreamGraph& sg = *run->graph_;
  const JobGraph& jg = run->jobGraph_;

  auto config = checkpoint::CheckpointCoordinatorConfig::fromConfiguration(options.configuration);
  if (config.periodic() && config.incremental && config.checkpointsBase.empty()) {
    log::warn(
        "state.backend.incremental is set, but state.checkpoints.dir is not: checkpoints kept in "
        "memory are always full");
  }
  std::optional<checkpoint::CompletedCheckpoint> initial = initialCheckpoint(options.configuration);
  if (config.periodic() || initial) warnAboutMissingUids(sg);

  std::shared_ptr<const Clock> clock = options.clock;
  if (!clock) clock = std::shared_ptr<const Clock>(&SystemClock::instance(), [](const Clock*) {});
  checkpoint::CheckpointCoordinator::JobInfo job{run->jobId_, run->graph_, &run->jobGraph_,
                                                 checkpoint::operatorUids(sg)};
  run->checkpointExecutor_ = std::make_unique<SerialExecutor>("checkpoint-io");
  run->coordinator_ =
      std::make_unique<checkpoint::CheckpointCoordinator>(config, std::move(job), clock);
  if (Status st = run->coordinator_->initializeStorage(); !st.isOk()) {
    throw SluiceException(st.message());
  }
  run->coordinator_->setHistorySize(options.configuration.get(options::kWebCheckpointsHistory));
  run->scheduler_ = std::make_unique<Scheduler>(
      run->graph_, run->jobGraph_, options, *run->coordinator_, *run->checkpointExecutor_,
      run->jobId_, deployment ? deployment(run->jobId_, run->jobGraph_) : nullptr);

  log::info("Starting job '{}' ({}) with {} vertices; checkpointing {}", jg.jobName, run->jobId_,
            jg.vertices.size(),
            config.periodic() ? fmt::format("every {} ms", config.interval.count()) : "off");
  run->started_ = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(run->mu_);
    run->outcome_.state = JobStatus::kRunning;
  }
  if (initial) run->coordinator_->setRestoredCheckpoint(*initial);
  run->scheduler_->start(initial ? &*initial : nullptr);
  run->coordinator_->startTimer();
  run->registerJobMetrics(vars.at("<host>"));
  run->monitor_ = std::thread([run = run.get()] { run->monitor(); });
  return run;
}

// Flink's job metrics (the jobmanager.job scope): availability and
// checkpointing.
void JobRun::registerJobMetrics(const std::string& host) {
  metricGroup_ = metrics::MetricRegistry::process().createGroup(
      metrics::ScopeKind::kJobManagerJob,
      {{"<host>", host}, {"<job_id>", jobId_}, {"<job_name>", jobGraph_.jobName}});
  metrics::MetricGroupImpl& g = *metricGroup_;
  g.gauge("uptime", [this] {
    return state() == JobStatus::kRunning ? static_cast<double>(runtimeMs()) : -1.0;
  });
  g.gauge("downtime", [] { return 0.0; });
  g.gauge("numRestarts", [this] { return static_cast<double>(scheduler_->restarts()); });
  g.gauge("fullRestarts", [this] { return static_cast<double>(scheduler_->restarts()); });
  auto stat = [this](int64_t checkpoint::CheckpointStats::*field) {
    return [this, field] { return static_cast<double>(coordinator_->stats().*field); };
  };
  using S = checkpoint::CheckpointStats;
  g.gauge("lastCheckpointDuration", stat(&S::lastDurationMs));
  g.gauge("lastCheckpointSize", stat(&S::lastSizeBytes));
  g.gauge("lastCheckpointFullSize", stat(&S::lastSizeBytes));
  g.gauge("numberOfCompletedCheckpoints", stat(&S::completed));
  g.gauge("numberOfFailedCheckpoints", stat(&S::failed));
  g.gauge("numberOfInProgressCheckpoints", stat(&S::inProgress));
  g.gauge("totalNumberOfCheckpoints", [this] {
    const S s = coordinator_->stats();
    return static_cast<double>(s.completed + s.failed + s.inProgress);
  });
  g.gauge("lastCheckpointRestoreTimestamp", stat(&S::lastRestoreTimestamp));
  g.gauge("lastCompletedCheckpointId", stat(&S::latestCompletedId));
}

void JobRun::monitor() {
  JobOutcome out = scheduler_->run();
  out.netRuntimeMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now() - started_)
                         .count();
  coordinator_->shutdown(out.state);
  endTimeMs_.store(SystemClock::instance().currentTimeMillis());
  log::info("Job '{}' switched to {} after {} ms", jobGraph_.jobName, jobStatusName(out.state),
            out.netRuntimeMs);
  std::function<void(JobRun&)> onEnd;
  {
    std::lock_guard lock(mu_);
    outcome_ = std::move(out);
    onEnd = std::move(onEnd_);
  }
  // Before the waiters wake: what they read next (the REST API) already
  // knows the job ended.
  if (onEnd) {
    try {
      onEnd(*this);
    } catch (...) {
      log::error("Job '{}': its end listener failed: {}", jobGraph_.jobName,
                 describeCurrentException());
    }
  }
  done_.notify_all();
}

void JobRun::onEnd(std::function<void(JobRun&)> f) {
  {
    std::lock_guard lock(mu_);
    if (!isTerminal(outcome_.state)) {
      onEnd_ = std::move(f);
      return;
    }
  }
  f(*this);
}

int64_t JobRun::runtimeMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               started_)
      .count();
}

JobStatus JobRun::state() const {
  std::lock_guard lock(mu_);
  return outcome_.state;
}

void JobRun::cancel() { scheduler_->cancel(); }

std::string JobRun::triggerSavepoint(const std::string& directory, bool terminate, bool drain) {
  const std::string base = checkpoint::stripFileScheme(
      directory.empty() ? coordinator_->config().savepointsBase : directory);
  if (base.empty()) {
    throw SluiceException(
        "no savepoint directory: pass one, or set state.savepoints.dir in the configuration");
  }
  checkpoint::CheckpointOptions o;
  o.type = CheckpointType::kSavepoint;
  o.terminate = terminate;
  o.drain = drain;
  return coordinator_->triggerCheckpoint(o, base).get().directory;
}

int64_t JobRun::triggerCheckpoint() {
  return coordinator_->triggerCheckpoint(checkpoint::CheckpointOptions{}, "").get().id;
}

checkpoint::CheckpointStats JobRun::checkpointStats() const {
  checkpoint::CheckpointStats s = coordinator_->stats();
  s.restarts = scheduler_->restarts();
  return s;
}

JobOutcome JobRun::wait() {
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return isTerminal(outcome_.state); });
  return outcome_;
}

JobRun::~JobRun() {
  if (monitor_.joinable()) {
    if (state() == JobStatus::kRunning) cancel();
    monitor_.join();
  }
  metricGroup_.reset();  // its gauges read the scheduler and coordinator
}

const std::string& embeddedTaskManagerId() {
  static const std::string id = "embedded-" + randomHexId().substr(0, 12);
  return id;
}

}  // namespace sluice::runtime
