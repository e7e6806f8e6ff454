#include <optional>

#include <fmt/format.h>

#include <sluice/environment.h>

#include "api/embedded_rest.h"
#include "api/signal_cancel.h"
#include "cluster/plan_mode.h"
#include "core/logging.h"
#include "runtime/mini_cluster.h"

namespace sluice {

namespace internal {

class JobHandle {
 public:
  JobHandle(std::string name, std::shared_ptr<runtime::JobRun> run)
      : name_(std::move(name)), run_(std::move(run)) {}
  const std::string& name() const { return name_; }
  runtime::JobRun& run() { return *run_; }

 private:
  std::string name_;
  std::shared_ptr<runtime::JobRun> run_;
};

namespace {

std::shared_ptr<StreamGraph> prepare(const EnvironmentState& state, const std::string& jobName) {
  auto graph = std::make_shared<StreamGraph>(state.graph);
  std::string name = jobName;
  if (name.empty()) name = state.config.get(options::kPipelineName);
  if (name.empty()) name = "Sluice Streaming Job";
  graph->jobName = name;
  graph->defaultParallelism = state.parallelism;
  graph->defaultMaxParallelism = state.maxParallelism;
  graph->chainingEnabled = state.chainingEnabled;
  graph->bufferTimeoutMs = state.bufferTimeoutMs;
  graph->resolve();
  return graph;
}

runtime::MiniClusterOptions clusterOptions(const Configuration& config) {
  runtime::MiniClusterOptions o;
  o.segmentSize = config.get(options::kTaskManagerMemorySegmentSize).bytes;
  o.buffersPerChannel = config.get(options::kTaskManagerNetworkMemoryBuffersPerChannel);
  o.floatingBuffers = config.get(options::kTaskManagerNetworkMemoryFloatingBuffersPerGate);
  if (o.segmentSize < 64 || o.segmentSize > (size_t{1} << 30)) {
    throw SluiceException(
        fmt::format("taskmanager.memory.segment-size must be between 64 b and 1 gb, got {} bytes",
                    o.segmentSize));
  }
  if (o.buffersPerChannel < 1) {
    throw SluiceException("taskmanager.network.memory.buffers-per-channel must be at least 1");
  }
  if (o.floatingBuffers < 0) {
    throw SluiceException(
        "taskmanager.network.memory.floating-buffers-per-gate must not be negative");
  }
  (void)parseStateBackendType(config.get(options::kStateBackendType));
  double wb = config.get(options::kStateBackendRocksDbMemoryWriteBufferRatio);
  if (!(wb > 0 && wb < 1)) {
    throw SluiceException(fmt::format(
        "state.backend.rocksdb.memory.write-buffer-ratio must be in (0, 1), got {}", wb));
  }
  double hp = config.get(options::kStateBackendRocksDbMemoryHighPrioPoolRatio);
  if (!(hp >= 0 && hp < 1)) {
    throw SluiceException(fmt::format(
        "state.backend.rocksdb.memory.high-prio-pool-ratio must be in [0, 1), got {}", hp));
  }
  o.configuration = config;
  return o;
}

// Plan mode (a cluster process runs the job's main to get its graph): hand
// the graph over and unwind out of main. Else, with execution.target:
// remote, submit it to the cluster and wait (returns true).
std::optional<JobExecutionResult> captureOrSubmit(const std::shared_ptr<EnvironmentState>& state,
                                                  const std::string& jobName) {
  if (cluster::planModeActive()) {
    auto graph = prepare(*state, jobName);
    state->graph = StreamGraph();
    cluster::capture(std::move(graph), state->config);
  }
  const std::string target = state->config.get(options::kExecutionTarget);
  if (target == "local") return std::nullopt;
  if (target != "remote") {
    throw SluiceException(
        fmt::format("execution.target must be 'local' or 'remote', got '{}'", target));
  }
  if (!cluster::remoteExecutor()) {
    throw SluiceException(
        "execution.target is 'remote', but this program cannot submit to a cluster: build it "
        "with sluice_add_job() (it links the cluster client), or submit its library with "
        "'sluice run'");
  }
  auto graph = prepare(*state, jobName);
  state->graph = StreamGraph();
  const std::string name = graph->jobName;
  cluster::RemoteJobResult r = cluster::remoteExecutor()(std::move(graph), state->config);
  if (r.state != JobStatus::kFinished) throw JobExecutionException(name, r.state, r.error);
  return JobExecutionResult(name, r.netRuntimeMs, {}, 0, std::move(r.counters));
}

std::shared_ptr<JobHandle> start(const std::shared_ptr<EnvironmentState>& state,
                                 const std::string& jobName) {
  if (cluster::planModeActive()) (void)captureOrSubmit(state, jobName);
  if (state->config.get(options::kExecutionTarget) != "local") {
    throw SluiceException(
        "executeAsync() runs jobs locally only: with execution.target: remote use execute(), "
        "or 'sluice run -d'");
  }
  auto graph = prepare(*state, jobName);
  auto options = clusterOptions(state->config);
  options.clock = state->clock;
  // As in Flink, execute() consumes the transformations built so far.
  state->graph = StreamGraph();
  std::shared_ptr<runtime::JobRun> run;
  try {
    run = runtime::JobRun::start(graph, options);
  } catch (...) {
    // A source enumerator that cannot start (e.g. a missing input file).
    throw JobExecutionException(graph->jobName, JobStatus::kFailed, describeCurrentException());
  }
  // Its REST endpoint, web UI and metric reporters, when configured. A
  // failure to start them fails the job's start (a port taken, say).
  try {
    registerEmbeddedJob(state->config, run);
  } catch (...) {
    run->cancel();
    run->wait();
    throw JobExecutionException(graph->jobName, JobStatus::kFailed, describeCurrentException());
  }
  return std::make_shared<JobHandle>(graph->jobName, std::move(run));
}

}  // namespace

JobExecutionResult executeState(const std::shared_ptr<EnvironmentState>& state,
                                const std::string& jobName) {
  if (std::optional<JobExecutionResult> remote = captureOrSubmit(state, jobName)) {
    return std::move(*remote);
  }
  std::shared_ptr<JobHandle> handle = start(state, jobName);
  SignalCancelScope signals(&handle->run());
  handle->run().wait();
  signals.finishIfSignalled();
  return JobClient(std::move(handle)).getJobExecutionResult();
}

}  // namespace internal

JobStatus JobClient::getJobStatus() const { return handle_->run().state(); }
const std::string& JobClient::getJobName() const { return handle_->name(); }
void JobClient::cancel() { handle_->run().cancel(); }

JobExecutionResult JobClient::getJobExecutionResult() {
  runtime::JobOutcome out = handle_->run().wait();
  if (out.state != JobStatus::kFinished) {
    throw JobExecutionException(handle_->name(), out.state, out.error);
  }
  return JobExecutionResult(handle_->name(), out.netRuntimeMs, std::move(out.accumulators),
                            out.numRecordsDropped, std::move(out.counters));
}

const std::string& JobClient::getJobId() const { return handle_->run().jobId(); }

std::string JobClient::getWebInterfaceURL() const { return internal::embeddedWebInterfaceUrl(); }

std::string JobClient::triggerSavepoint(const std::string& directory) {
  return handle_->run().triggerSavepoint(directory);
}

int64_t JobClient::triggerCheckpoint() { return handle_->run().triggerCheckpoint(); }

std::string JobClient::stopWithSavepoint(bool drain, const std::string& directory) {
  return handle_->run().triggerSavepoint(directory, true, drain);
}

JobClient::CheckpointStats JobClient::getCheckpointStats() const {
  checkpoint::CheckpointStats s = handle_->run().checkpointStats();
  CheckpointStats out;
  out.completed = s.completed;
  out.failed = s.failed;
  out.restarts = s.restarts;
  out.latestCompletedId = s.latestCompletedId;
  out.latestCompletedPath = s.latestCompletedDirectory;
  out.totalDurationMs = s.totalDurationMs;
  out.maxDurationMs = s.maxDurationMs;
  out.totalSizeBytes = s.totalSizeBytes;
  out.maxSizeBytes = s.maxSizeBytes;
  return out;
}

// ---- CheckpointConfig ----

CheckpointConfig& CheckpointConfig::setCheckpointInterval(std::chrono::milliseconds interval) {
  if (interval.count() < 10) {
    throw SluiceException(
        fmt::format("checkpoint interval must be at least 10 ms, got {} ms", interval.count()));
  }
  config_->set(options::kExecutionCheckpointingInterval, interval);
  return *this;
}
CheckpointConfig& CheckpointConfig::setCheckpointingMode(CheckpointingMode mode) {
  config_->set(options::kExecutionCheckpointingMode,
               mode == CheckpointingMode::kExactlyOnce ? "EXACTLY_ONCE" : "AT_LEAST_ONCE");
  return *this;
}
CheckpointConfig& CheckpointConfig::setCheckpointTimeout(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) throw SluiceException("checkpoint timeout must be positive");
  config_->set(options::kExecutionCheckpointingTimeout, timeout);
  return *this;
}
CheckpointConfig& CheckpointConfig::setMinPauseBetweenCheckpoints(std::chrono::milliseconds p) {
  if (p.count() < 0) throw SluiceException("minimum pause between checkpoints must be >= 0");
  config_->set(options::kExecutionCheckpointingMinPause, p);
  return *this;
}
CheckpointConfig& CheckpointConfig::setMaxConcurrentCheckpoints(int n) {
  if (n < 1) throw SluiceException("max concurrent checkpoints must be at least 1");
  config_->set(options::kExecutionCheckpointingMaxConcurrentCheckpoints, n);
  return *this;
}
CheckpointConfig& CheckpointConfig::setTolerableCheckpointFailureNumber(int n) {
  if (n < 0) throw SluiceException("tolerable checkpoint failure number must be >= 0");
  config_->set(options::kExecutionCheckpointingTolerableFailedCheckpoints, n);
  return *this;
}
CheckpointConfig& CheckpointConfig::setExternalizedCheckpointRetention(
    ExternalizedCheckpointRetention r) {
  config_->set(options::kExecutionCheckpointingExternalizedCheckpointRetention,
               r == ExternalizedCheckpointRetention::kRetainOnCancellation
                   ? "RETAIN_ON_CANCELLATION"
                   : "DELETE_ON_CANCELLATION");
  return *this;
}
CheckpointConfig& CheckpointConfig::setCheckpointStorage(const std::string& directory) {
  config_->set(options::kStateCheckpointsDir, directory);
  return *this;
}
CheckpointConfig& CheckpointConfig::setNumRetainedCheckpoints(int n) {
  if (n < 1) throw SluiceException("the number of retained checkpoints must be at least 1");
  config_->set(options::kStateCheckpointsNumRetained, n);
  return *this;
}
bool CheckpointConfig::isCheckpointingEnabled() const {
  return config_->get(options::kExecutionCheckpointingInterval).count() > 0;
}
std::chrono::milliseconds CheckpointConfig::getCheckpointInterval() const {
  return config_->get(options::kExecutionCheckpointingInterval);
}

// ---- RestartStrategies ----

namespace {
std::string millis(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }
}  // namespace

RestartStrategyConfiguration RestartStrategies::noRestart() {
  return {{{std::string(options::kRestartStrategyType.key), "none"}}};
}
RestartStrategyConfiguration RestartStrategies::fixedDelayRestart(int attempts,
                                                                  std::chrono::milliseconds delay) {
  return {{{std::string(options::kRestartStrategyType.key), "fixed-delay"},
           {std::string(options::kRestartStrategyFixedDelayAttempts.key), std::to_string(attempts)},
           {std::string(options::kRestartStrategyFixedDelayDelay.key), millis(delay)}}};
}
RestartStrategyConfiguration RestartStrategies::failureRateRestart(
    int maxFailuresPerInterval, std::chrono::milliseconds interval,
    std::chrono::milliseconds delay) {
  return {
      {{std::string(options::kRestartStrategyType.key), "failure-rate"},
       {std::string(options::kRestartStrategyFailureRateMaxFailuresPerInterval.key),
        std::to_string(maxFailuresPerInterval)},
       {std::string(options::kRestartStrategyFailureRateFailureRateInterval.key), millis(interval)},
       {std::string(options::kRestartStrategyFailureRateDelay.key), millis(delay)}}};
}
RestartStrategyConfiguration RestartStrategies::exponentialDelayRestart(
    std::chrono::milliseconds initialBackoff, std::chrono::milliseconds maxBackoff,
    double multiplier, std::chrono::milliseconds resetBackoffThreshold, double jitterFactor) {
  return {
      {{std::string(options::kRestartStrategyType.key), "exponential-delay"},
       {std::string(options::kRestartStrategyExponentialDelayInitialBackoff.key),
        millis(initialBackoff)},
       {std::string(options::kRestartStrategyExponentialDelayMaxBackoff.key), millis(maxBackoff)},
       {std::string(options::kRestartStrategyExponentialDelayBackoffMultiplier.key),
        fmt::format("{}", multiplier)},
       {std::string(options::kRestartStrategyExponentialDelayResetBackoffThreshold.key),
        millis(resetBackoffThreshold)},
       {std::string(options::kRestartStrategyExponentialDelayJitterFactor.key),
        fmt::format("{}", jitterFactor)}}};
}

StreamExecutionEnvironment& StreamExecutionEnvironment::enableCheckpointing(
    std::chrono::milliseconds interval, CheckpointingMode mode) {
  getCheckpointConfig().setCheckpointInterval(interval).setCheckpointingMode(mode);
  return *this;
}

StreamExecutionEnvironment& StreamExecutionEnvironment::setRestartStrategy(
    const RestartStrategyConfiguration& strategy) {
  for (const auto& [key, value] : strategy.settings) state_->config.setString(key, value);
  return *this;
}

StreamExecutionEnvironment::StreamExecutionEnvironment(const Configuration& config)
    : state_(std::make_shared<internal::EnvironmentState>()) {
  state_->config = config;
  state_->parallelism = config.get(options::kParallelismDefault);
  state_->maxParallelism = config.get(options::kPipelineMaxParallelism);
  state_->bufferTimeoutMs = config.get(options::kExecutionBufferTimeout).count();
  if (state_->parallelism < 1) {
    throw SluiceException(fmt::format("parallelism.default must be at least 1, got {} (from {})",
                                      state_->parallelism,
                                      config.source(options::kParallelismDefault.key)));
  }
  if (state_->maxParallelism < 1 || state_->maxParallelism > kUpperBoundMaxParallelism) {
    throw SluiceException(fmt::format("pipeline.max-parallelism must be in [1, 32768], got {}",
                                      state_->maxParallelism));
  }
  (void)internal::clusterOptions(config);  // validate early
}

StreamExecutionEnvironment StreamExecutionEnvironment::getExecutionEnvironment(
    int argc, const char* const* argv) {
  std::vector<std::string> rest;
  Configuration config;
  if (const Configuration* base = cluster::planModeConfiguration()) {
    // Plan mode: the configuration the job was submitted with, not a file
    // of this process; the job's own -D / -p still apply on top.
    CommandLine cli = parseCommandLine(argc, argv).valueOrThrow();
    config = *base;
    config.addAll(cli.config);
    rest = std::move(cli.remaining);
  } else {
    config = loadConfiguration(argc, argv, &rest).valueOrThrow();
  }
  StreamExecutionEnvironment env(config);
  env.programArgs_ = std::move(rest);
  return env;
}

StreamExecutionEnvironment StreamExecutionEnvironment::getExecutionEnvironment() {
  const char* argv[] = {"sluice"};
  return getExecutionEnvironment(1, argv);
}

StreamExecutionEnvironment& StreamExecutionEnvironment::setAutoWatermarkInterval(
    std::chrono::milliseconds interval) {
  if (interval.count() < 0) {
    throw SluiceException("setAutoWatermarkInterval: the interval must not be negative, got " +
                          std::to_string(interval.count()) + " ms");
  }
  state_->config.set(options::kPipelineAutoWatermarkInterval, interval);
  return *this;
}

StreamExecutionEnvironment& StreamExecutionEnvironment::setStateBackend(const std::string& type) {
  return setStateBackend(parseStateBackendType(type));
}

StreamExecutionEnvironment& StreamExecutionEnvironment::setStateBackend(StateBackendType type) {
  state_->config.set(options::kStateBackendType, std::string(stateBackendTypeName(type)));
  return *this;
}

StreamExecutionEnvironment& StreamExecutionEnvironment::setClock(
    std::shared_ptr<const Clock> clock) {
  if (!clock) throw SluiceException("setClock: the clock must not be null");
  state_->clock = std::move(clock);
  return *this;
}

StreamExecutionEnvironment& StreamExecutionEnvironment::setParallelism(int parallelism) {
  if (parallelism < 1) {
    throw SluiceException(
        fmt::format("setParallelism: parallelism must be at least 1, got {}", parallelism));
  }
  state_->parallelism = parallelism;
  return *this;
}

StreamExecutionEnvironment& StreamExecutionEnvironment::setMaxParallelism(int maxParallelism) {
  if (maxParallelism < 1 || maxParallelism > kUpperBoundMaxParallelism) {
    throw SluiceException(
        fmt::format("setMaxParallelism: must be in [1, 32768], got {}", maxParallelism));
  }
  state_->maxParallelism = maxParallelism;
  return *this;
}

StreamExecutionEnvironment& StreamExecutionEnvironment::setBufferTimeout(int64_t millis) {
  if (millis < -1) {
    throw SluiceException(fmt::format("setBufferTimeout: must be >= -1, got {}", millis));
  }
  state_->bufferTimeoutMs = millis;
  return *this;
}

StreamExecutionEnvironment& StreamExecutionEnvironment::disableOperatorChaining() {
  state_->chainingEnabled = false;
  return *this;
}

SingleOutputStreamOperator<int64_t> StreamExecutionEnvironment::fromSequence(int64_t from,
                                                                             int64_t to) {
  if (from > to) {
    throw SluiceException(
        fmt::format("fromSequence: from ({}) must not be greater than to ({})", from, to));
  }
  return fromSource(NumberSequenceSource(from, to), "Sequence Source");
}

SingleOutputStreamOperator<std::string> StreamExecutionEnvironment::readTextFile(
    const std::string& path) {
  return fromSource(TextLineFileSource(path), "Text File Source: " + path);
}

SingleOutputStreamOperator<std::string> StreamExecutionEnvironment::socketTextStream(
    const std::string& host, int port, char delimiter, int64_t maxRetry) {
  if (port < 0 || port > 65535) {
    throw SluiceException(
        fmt::format("socketTextStream: port must be in [0, 65535], got {}", port));
  }
  return addSource<std::string, SocketTextSource::SplitType>(
      std::make_shared<SocketTextSource>(
          host, port, delimiter, maxRetry,
          SocketTextSourceOptions::fromConfiguration(state_->config)),
      "Socket Stream", true);
}

JobExecutionResult StreamExecutionEnvironment::execute(const std::string& jobName) {
  return internal::executeState(state_, jobName);
}

JobClient StreamExecutionEnvironment::executeAsync(const std::string& jobName) {
  return JobClient(internal::start(state_, jobName));
}

JobGraph StreamExecutionEnvironment::getJobGraph(const std::string& jobName) const {
  return createJobGraph(*internal::prepare(*state_, jobName));
}

}  // namespace sluice
