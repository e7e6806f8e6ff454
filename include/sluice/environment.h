// StreamExecutionEnvironment: where a job is built and from where it runs.
//
//   auto env = sluice::StreamExecutionEnvironment::getExecutionEnvironment(argc, argv);
//   env.fromSequence(1, 100).map(...).print();
//   env.execute("My Job");
//
// Settings come, lowest precedence first, from conf/config.yaml (Flink's key
// names), `-D key=value` and `-p N` on the command line, calls on the
// environment, and calls on single operators. execute() runs the job on the
// embedded mini-cluster (one thread per parallel subtask) and blocks until it
// ends; executeAsync() returns a JobClient at once. After either, the
// environment starts a new, empty job, as in Flink.
//
// An environment and its DataStreams are used from one thread while the job
// is built. JobClient is thread-safe.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <sluice/core/clock.h>
#include <sluice/core/config.h>
#include <sluice/core/config_options.h>
#include <sluice/core/job_status.h>
#include <sluice/datastream.h>
#include <sluice/graph/job_graph.h>
#include <sluice/source.h>
#include <sluice/sources.h>
#include <sluice/state/keyed_state_backend.h>

namespace sluice {

// A job that failed or was cancelled; what() names the failing operator,
// subtask and the cause.
class JobExecutionException : public SluiceException {
 public:
  JobExecutionException(std::string jobName, JobStatus status, const std::string& message)
      : SluiceException("Job '" + jobName + "' " +
                        (status == JobStatus::kCanceled ? "was cancelled" : "failed") +
                        (message.empty() ? "" : ": " + message)),
        jobName_(std::move(jobName)),
        status_(status) {}
  const std::string& getJobName() const { return jobName_; }
  JobStatus getStatus() const { return status_; }

 private:
  std::string jobName_;
  JobStatus status_;
};

class JobExecutionResult {
 public:
  JobExecutionResult() = default;
  JobExecutionResult(std::string jobName, int64_t netRuntimeMs,
                     std::map<std::string, Accumulator::Value> accumulators, int64_t dropped,
                     std::map<std::string, int64_t> counters = {})
      : jobName_(std::move(jobName)),
        netRuntimeMs_(netRuntimeMs),
        accumulators_(std::move(accumulators)),
        numRecordsDropped_(dropped),
        counters_(std::move(counters)) {}

  const std::string& getJobName() const { return jobName_; }
  // Wall time from start to end, in milliseconds.
  int64_t getNetRuntime() const { return netRuntimeMs_; }
  // The merged value of accumulator `name` (int64_t for LongCounter, double
  // for DoubleCounter). Throws when there is no such accumulator.
  template <class V>
  V getAccumulatorResult(const std::string& name) const {
    auto it = accumulators_.find(name);
    if (it == accumulators_.end()) throw SluiceException("no accumulator named '" + name + "'");
    if (!std::holds_alternative<V>(it->second)) {
      throw SluiceException("accumulator '" + name + "' holds another type");
    }
    return std::get<V>(it->second);
  }
  const std::map<std::string, Accumulator::Value>& getAllAccumulatorResults() const {
    return accumulators_;
  }
  // Records dropped on purpose, e.g. emitted to a side output nothing reads.
  int64_t getNumRecordsDropped() const { return numRecordsDropped_; }
  // A counter the runtime keeps (Flink's metric name), summed over all
  // operators and subtasks: e.g. "numLateRecordsDropped" of window operators.
  // 0 when nothing counted it.
  int64_t getCounter(const std::string& name) const {
    auto it = counters_.find(name);
    return it == counters_.end() ? 0 : it->second;
  }

 private:
  std::string jobName_;
  int64_t netRuntimeMs_ = 0;
  std::map<std::string, Accumulator::Value> accumulators_;
  int64_t numRecordsDropped_ = 0;
  std::map<std::string, int64_t> counters_;
};

namespace internal {
class JobHandle;
// Runs the job built in `state` and blocks (what execute() does).
JobExecutionResult executeState(const std::shared_ptr<EnvironmentState>& state,
                                const std::string& jobName);
}  // namespace internal

// A handle to a job started with executeAsync(). Copies share the job. When
// the last copy is destroyed while the job still runs, the job is cancelled
// and the destructor waits for it to stop (embedded mode has no detached jobs).
class JobClient {
 public:
  explicit JobClient(std::shared_ptr<internal::JobHandle> handle) : handle_(std::move(handle)) {}
  JobStatus getJobStatus() const;
  const std::string& getJobName() const;
  // Asks every task to stop; getJobExecutionResult() then throws with status
  // kCanceled.
  void cancel();
  // Blocks until the job ends. Throws JobExecutionException when it failed or
  // was cancelled.
  JobExecutionResult getJobExecutionResult();
  // The job's id (32 hex digits); its checkpoints live in
  // <state.checkpoints.dir>/<job id>/chk-<n>.
  const std::string& getJobId() const;
  // Where this process serves the REST API and web UI
  // ("http://127.0.0.1:8081"), as Flink's ClusterClient::getWebInterfaceURL;
  // empty unless the job's configuration turned it on
  // (rest.embedded.enabled).
  std::string getWebInterfaceURL() const;

  // Takes a savepoint into a new directory under `directory` (empty: the
  // state.savepoints.dir option) and returns that directory once the
  // savepoint is complete; the job runs on. Throws SluiceException when it
  // fails (e.g. the job has finished, or the directory is not writable).
  std::string triggerSavepoint(const std::string& directory = "");
  // Takes a savepoint and then ends the job (status FINISHED). With `drain`
  // (Flink's advanceToEndOfEventTime) sources first emit the maximum
  // watermark, so every event-time window and timer fires before the
  // savepoint. Returns the savepoint's directory.
  std::string stopWithSavepoint(bool drain, const std::string& directory = "");
  // Takes a checkpoint now, besides the periodic ones (Flink's REST
  // POST /jobs/:jobid/checkpoints), and returns its id once it is complete.
  // Tests use it to checkpoint at a known point instead of waiting for the
  // interval. Throws SluiceException when it fails (the job is not running,
  // a task declined, its state could not be written).
  int64_t triggerCheckpoint();

  // Checkpoints completed / failed so far and restarts done.
  struct CheckpointStats {
    int64_t completed = 0;
    int64_t failed = 0;
    int64_t restarts = 0;
    int64_t latestCompletedId = -1;
    std::string latestCompletedPath;  // empty for checkpoints kept in memory
    // Trigger to completion, and bytes written (metadata, operator state,
    // timers, keyed snapshots), over the completed checkpoints.
    int64_t totalDurationMs = 0;
    int64_t maxDurationMs = 0;
    int64_t totalSizeBytes = 0;
    int64_t maxSizeBytes = 0;
  };
  CheckpointStats getCheckpointStats() const;

 private:
  std::shared_ptr<internal::JobHandle> handle_;
};

namespace internal {

template <class T, class SplitT>
class SourceOperatorFactory final : public OperatorFactory {
 public:
  // `strategy`: null, or the timestamps and watermarks the source makes.
  SourceOperatorFactory(std::shared_ptr<const Source<T, SplitT>> source, bool nonParallel,
                        std::shared_ptr<const WatermarkStrategy<T>> strategy = nullptr)
      : source_(std::move(source)), nonParallel_(nonParallel), strategy_(std::move(strategy)) {}
  std::unique_ptr<StreamOperatorBase> createOperator() const override {
    return makeOwned<SourceOperator<T, SplitT>>(source_, strategy_.get());
  }
  bool isSource() const override { return true; }
  std::unique_ptr<SourceCoordinatorBase> createCoordinator(
      SplitEnumeratorContextBase& context, const std::string* restoredState) const override {
    return makeOwned<SourceCoordinator<SplitT>>(*source_, context, restoredState);
  }
  std::shared_ptr<const TypeOps> outputType() const override { return TypedOps<T>::instance(); }
  bool isNonParallel() const override { return nonParallel_; }

 private:
  std::shared_ptr<const Source<T, SplitT>> source_;
  bool nonParallel_;
  std::shared_ptr<const WatermarkStrategy<T>> strategy_;
};

}  // namespace internal

// What happens to retained checkpoints when the job is cancelled.
enum class ExternalizedCheckpointRetention { kDeleteOnCancellation, kRetainOnCancellation };

// The execution.checkpointing.* and state.checkpoints.* settings of one
// environment, as Flink's CheckpointConfig. Each setter writes the
// configuration key it names.
class CheckpointConfig {
 public:
  explicit CheckpointConfig(Configuration& config) : config_(&config) {}
  CheckpointConfig& setCheckpointInterval(std::chrono::milliseconds interval);
  CheckpointConfig& setCheckpointingMode(CheckpointingMode mode);
  CheckpointConfig& setCheckpointTimeout(std::chrono::milliseconds timeout);
  CheckpointConfig& setMinPauseBetweenCheckpoints(std::chrono::milliseconds pause);
  CheckpointConfig& setMaxConcurrentCheckpoints(int n);
  CheckpointConfig& setTolerableCheckpointFailureNumber(int n);
  CheckpointConfig& setExternalizedCheckpointRetention(ExternalizedCheckpointRetention r);
  // state.checkpoints.dir: a directory path (or file:// URI).
  CheckpointConfig& setCheckpointStorage(const std::string& directory);
  CheckpointConfig& setNumRetainedCheckpoints(int n);
  bool isCheckpointingEnabled() const;
  std::chrono::milliseconds getCheckpointInterval() const;

 private:
  Configuration* config_;
};

// Restart strategies for StreamExecutionEnvironment::setRestartStrategy (the
// restart-strategy.* keys).
struct RestartStrategyConfiguration {
  std::vector<std::pair<std::string, std::string>> settings;  // key, value
};
struct RestartStrategies {
  static RestartStrategyConfiguration noRestart();
  static RestartStrategyConfiguration fixedDelayRestart(int attempts,
                                                        std::chrono::milliseconds delay);
  static RestartStrategyConfiguration failureRateRestart(int maxFailuresPerInterval,
                                                         std::chrono::milliseconds interval,
                                                         std::chrono::milliseconds delay);
  static RestartStrategyConfiguration exponentialDelayRestart(
      std::chrono::milliseconds initialBackoff, std::chrono::milliseconds maxBackoff,
      double multiplier, std::chrono::milliseconds resetBackoffThreshold, double jitterFactor);
};

class StreamExecutionEnvironment {
 public:
  // Reads the config file, `-D key=value`, `-p N` and `-c file` from the
  // command line; arguments it does not know are left in getProgramArgs().
  // Throws SluiceException naming the key/file for a bad setting.
  static StreamExecutionEnvironment getExecutionEnvironment(int argc, const char* const* argv);
  static StreamExecutionEnvironment getExecutionEnvironment();

  explicit StreamExecutionEnvironment(const Configuration& config = Configuration());

  StreamExecutionEnvironment& setParallelism(int parallelism);
  int getParallelism() const { return state_->parallelism; }
  // Default 128 (pipeline.max-parallelism): the number of key groups.
  StreamExecutionEnvironment& setMaxParallelism(int maxParallelism);
  int getMaxParallelism() const { return state_->maxParallelism; }
  // Milliseconds a partly filled network buffer may wait before it is sent:
  // 0 sends every record at once, -1 only full buffers. Default 100.
  StreamExecutionEnvironment& setBufferTimeout(int64_t millis);
  int64_t getBufferTimeout() const { return state_->bufferTimeoutMs; }
  StreamExecutionEnvironment& disableOperatorChaining();
  // Takes a checkpoint every `interval` (execution.checkpointing.interval).
  // Checkpoints go to state.checkpoints.dir, or stay in memory when it is
  // empty. See docs/checkpoints.md.
  StreamExecutionEnvironment& enableCheckpointing(
      std::chrono::milliseconds interval, CheckpointingMode mode = CheckpointingMode::kExactlyOnce);
  CheckpointConfig getCheckpointConfig() { return CheckpointConfig(state_->config); }
  StreamExecutionEnvironment& setRestartStrategy(const RestartStrategyConfiguration& strategy);
  // How often periodic watermark generators emit (pipeline.auto-watermark-
  // interval, default 200 ms; 0 disables periodic watermarks).
  StreamExecutionEnvironment& setAutoWatermarkInterval(std::chrono::milliseconds interval);
  bool isChainingEnabled() const { return state_->chainingEnabled; }
  const Configuration& getConfiguration() const { return state_->config; }
  // The keyed state backend of every keyed operator: "hashmap", "rocksdb" or
  // "tiered" (sets state.backend.type; see docs/state.md).
  StreamExecutionEnvironment& setStateBackend(const std::string& type);
  StreamExecutionEnvironment& setStateBackend(StateBackendType type);
  // Replaces the processing-time clock of the job's operators (state TTL,
  // processing time). Meant for tests, with a ManualClock they advance; the
  // clock must be thread-safe. Default: the system clock.
  StreamExecutionEnvironment& setClock(std::shared_ptr<const Clock> clock);
  const std::vector<std::string>& getProgramArgs() const { return programArgs_; }

  // --- sources ---------------------------------------------------------------

  // A non-parallel source of the given elements, in order.
  // String literals become std::string.
  template <class T, class... More>
  auto fromElements(T first, More... rest) {
    using E = std::conditional_t<std::is_convertible_v<T, std::string_view> &&
                                     !std::is_same_v<T, std::string>,
                                 std::string, T>;
    static_assert((std::is_convertible_v<More, E> && ...),
                  "fromElements: all elements must have the type of the first");
    return fromCollection(std::vector<E>{E(std::move(first)), E(std::move(rest))...});
  }
  template <class T>
  SingleOutputStreamOperator<T> fromCollection(std::vector<T> elements) {
    return fromCollection(std::make_shared<const std::vector<T>>(std::move(elements)));
  }
  // The same over elements shared with the caller rather than copied (as a
  // Java collection is referenced, not copied): the job keeps them alive
  // while it runs, and several jobs can read one collection. It must not
  // change while a job reads it.
  template <class T>
  SingleOutputStreamOperator<T> fromCollection(std::shared_ptr<const std::vector<T>> elements) {
    if (elements == nullptr) throw SluiceException("fromCollection: the collection is null");
    return addSource<T, typename CollectionSource<T>::SplitType>(
        std::make_shared<CollectionSource<T>>(std::move(elements)), "Collection Source", true);
  }
  // The numbers from..to, inclusive, split over the source's subtasks.
  SingleOutputStreamOperator<int64_t> fromSequence(int64_t from, int64_t to);
  // generator(index) for index 0..count-1 (sluice::kUnboundedCount for an
  // endless stream), at most `recordsPerSecond` in total when > 0.
  template <class F>
  auto fromGenerator(F generator, int64_t count, double recordsPerSecond = 0) {
    static_assert(std::is_invocable_v<F&, int64_t>,
                  "fromGenerator(f, ...): f must be callable as T f(int64_t index)");
    using T = std::decay_t<std::invoke_result_t<F&, int64_t>>;
    return fromSource(GeneratorSource<T, F>(std::move(generator), count, recordsPerSecond),
                      "Generator Source");
  }
  // The lines of a regular file, or of every file in a directory (FIFOs,
  // sockets and devices are refused).
  SingleOutputStreamOperator<std::string> readTextFile(const std::string& path);
  // Lines read from a TCP socket until it closes. At-most-once. Lines are
  // bounded by source.socket.max-line-length (source.socket.oversized-lines:
  // fail or truncate); a connect gives up after source.socket.connect-timeout.
  SingleOutputStreamOperator<std::string> socketTextStream(const std::string& host, int port,
                                                           char delimiter = '\n',
                                                           int64_t maxRetry = 0);

  template <class S>
  SingleOutputStreamOperator<typename S::OutputType> fromSource(S source,
                                                                const std::string& sourceName) {
    using T = typename S::OutputType;
    using SplitT = typename S::SplitType;
    static_assert(std::is_base_of_v<Source<T, SplitT>, S>,
                  "fromSource: S must derive from sluice::Source<T, Split>");
    return addSource<T, SplitT>(std::make_shared<const S>(std::move(source)), sourceName, false);
  }
  // A source whose records get timestamps and watermarks from `strategy`
  // (Flink's fromSource(source, watermarkStrategy, name)). As in Flink, the
  // source operator assigns them itself: there is no Timestamps/Watermarks
  // operator after it. Its watermarks replace any the records had.
  template <class S>
  SingleOutputStreamOperator<typename S::OutputType> fromSource(
      S source, const WatermarkStrategy<typename S::OutputType>& strategy,
      const std::string& sourceName) {
    using T = typename S::OutputType;
    using SplitT = typename S::SplitType;
    static_assert(std::is_base_of_v<Source<T, SplitT>, S>,
                  "fromSource: S must derive from sluice::Source<T, Split>");
    return addSource<T, SplitT>(std::make_shared<const S>(std::move(source)), sourceName, false,
                                std::make_shared<const WatermarkStrategy<T>>(strategy));
  }

  // --- running -----------------------------------------------------------------

  // Runs the job and blocks until it ends. Throws JobExecutionException when
  // it fails, naming the operator, subtask and cause.
  JobExecutionResult execute(const std::string& jobName = "");
  JobClient executeAsync(const std::string& jobName = "");

  // The job as it would run now (chained, with parallelism resolved), without
  // running it. For tests and tools.
  JobGraph getJobGraph(const std::string& jobName = "") const;
  const StreamGraph& getStreamGraph() const { return state_->graph; }

  const std::shared_ptr<internal::EnvironmentState>& state() const { return state_; }

 private:
  template <class T, class SplitT>
  SingleOutputStreamOperator<T> addSource(
      std::shared_ptr<const Source<T, SplitT>> source, const std::string& name, bool nonParallel,
      std::shared_ptr<const WatermarkStrategy<T>> strategy = nullptr) {
    std::shared_ptr<const OperatorFactory> factory =
        internal::makeOwned<internal::SourceOperatorFactory<T, SplitT>>(
            std::move(source), nonParallel, std::move(strategy));
    int node = state_->graph.addNode("Source: " + name, factory);
    return SingleOutputStreamOperator<T>(state_, node);
  }

  std::shared_ptr<internal::EnvironmentState> state_;
  std::vector<std::string> programArgs_;
};

template <class T>
std::vector<T> DataStream<T>::executeAndCollect(const std::string& jobName) {
  auto buffer = std::make_shared<internal::CollectBuffer<T>>();
  sinkTo(CollectSink<T>(buffer), "Collect Sink");
  internal::executeState(env_, jobName);
  return buffer->take();
}

}  // namespace sluice
