// The registry of every configuration option Sluice knows.
//
// Each option is a constexpr ConfigOption<T> constant in sluice::options,
// named k + the key in PascalCase, with Flink's key name and, unless noted in
// its description, Flink's default. The description is user documentation:
// docs/configuration.md lists every option (a unit test checks it does).
//
// Adding an option takes two lines: its declaration below, and its name in
// kAllOptions at the end of this file. A unit test fails when a declared
// option is missing from kAllOptions, and when conf/config.yaml does not list
// it with its default.
//
// Only registered keys are accepted in config.yaml and in -D: an unknown key is
// an error with a "did you mean" suggestion (see config.h).
//
// Threads: everything here is immutable; registeredOptions() builds its table
// once, thread-safely, on first use.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <sluice/core/config.h>

namespace sluice::options {

// ---- pipeline and execution ----

inline constexpr ConfigOption<int32_t> kParallelismDefault{
    "parallelism.default", 1, "Parallelism of jobs and operators that do not set one."};

inline constexpr ConfigOption<int32_t> kPipelineMaxParallelism{
    "pipeline.max-parallelism", 128,
    "Number of key groups: the upper bound for the parallelism of keyed operators, and the "
    "largest parallelism a savepoint can be restored to. Flink's default is -1 (derived from the "
    "parallelism); Sluice uses a fixed 128 so that the key-group layout does not change with "
    "parallelism."};

inline constexpr ConfigOption<std::string> kPipelineName{
    "pipeline.name", "",
    "Name of the job, shown in logs and errors. Used when execute() is given no name."};

inline constexpr ConfigOption<std::string> kExecutionRuntimeMode{
    "execution.runtime-mode", "STREAMING",
    "STREAMING, BATCH or AUTOMATIC (BATCH when every source is bounded)."};

inline constexpr ConfigOption<std::chrono::milliseconds> kExecutionBufferTimeout{
    "execution.buffer-timeout", std::chrono::milliseconds{100},
    "Longest time a partly filled network buffer waits before it is sent. 0 ms sends after every "
    "record (lowest latency, lowest throughput)."};

inline constexpr ConfigOption<std::chrono::milliseconds> kPipelineAutoWatermarkInterval{
    "pipeline.auto-watermark-interval", std::chrono::milliseconds{200},
    "Interval at which sources emit periodic watermarks. 0 ms disables periodic watermarks."};

inline constexpr ConfigOption<bool> kPipelineObjectReuse{
    "pipeline.object-reuse", false,
    "Let chained operators pass records without copying. Only safe when user functions neither "
    "keep nor modify the records they receive."};

inline constexpr ConfigOption<bool> kPipelineWindowSlicing{
    "pipeline.window.slicing", true,
    "Whether windows with an incremental aggregation use Sluice's specialised window operators: "
    "the sliced operator for tumbling, sliding and cumulating event-time windows and tumbling "
    "and sliding processing-time windows, and the session operator for event-time session "
    "windows with a static gap; with reduce, aggregate or a field aggregation (with or without a "
    "window function), the default trigger, no evictor and the hashmap state backend. A Sluice "
    "option; Flink's DataStream windows always use the general operator."};

// ---- checkpoints and state ----

inline constexpr ConfigOption<std::chrono::milliseconds> kExecutionCheckpointingInterval{
    "execution.checkpointing.interval", std::chrono::milliseconds{0},
    "Interval between checkpoints. 0 ms (the default) disables periodic checkpoints; Flink "
    "leaves this option unset instead."};

inline constexpr ConfigOption<std::string> kStateBackendType{
    "state.backend.type", "hashmap",
    "Keyed state backend: 'hashmap' (objects on the heap), 'rocksdb' (embedded RocksDB on local "
    "disk) or 'tiered' (hot entries on the heap within a memory budget, the rest in RocksDB)."};

inline constexpr ConfigOption<std::string> kStateBackendRocksDbLocalDir{
    "state.backend.rocksdb.localdir", "",
    "Directory under which RocksDB keeps the working files of each keyed operator subtask; each "
    "subtask's directory is removed when it ends, and those of dead processes at the next start. "
    "Empty means the system temp directory."};

inline constexpr ConfigOption<bool> kStateBackendRocksDbMemoryManaged{
    "state.backend.rocksdb.memory.managed", true,
    "Size RocksDB's block cache and write buffers from the slot's managed memory, shared by all "
    "RocksDB states of the slot. When false, every keyed operator subtask gets the whole "
    "per-slot budget for itself."};

inline constexpr ConfigOption<double> kStateBackendRocksDbMemoryWriteBufferRatio{
    "state.backend.rocksdb.memory.write-buffer-ratio", 0.5,
    "Share of RocksDB's memory budget that write buffers (memtables) may take."};

inline constexpr ConfigOption<double> kStateBackendRocksDbMemoryHighPrioPoolRatio{
    "state.backend.rocksdb.memory.high-prio-pool-ratio", 0.1,
    "Share of RocksDB's block cache reserved for index and filter blocks."};

inline constexpr ConfigOption<MemorySize> kStateBackendTieredMemory{
    "state.backend.tiered.memory", MemorySize::ofMebiBytes(256),
    "Tiered backend: the most memory each keyed operator subtask's cache of state entries may "
    "take; the coldest entries are written back to RocksDB to stay within it. RocksDB's own "
    "block cache and write buffers come on top, from managed memory as for 'rocksdb'. Sluice "
    "only; Flink has no tiered backend."};

inline constexpr ConfigOption<std::string> kStateCheckpointsDir{
    "state.checkpoints.dir", "",
    "Directory (URI) where checkpoints are written. Required when checkpointing is enabled."};

inline constexpr ConfigOption<std::string> kExecutionCheckpointingMode{
    "execution.checkpointing.mode", "EXACTLY_ONCE",
    "EXACTLY_ONCE: a task with several input channels aligns checkpoint barriers (holds back the "
    "channels that delivered one until all have). AT_LEAST_ONCE: no alignment; records after a "
    "barrier may be replayed after a failure."};

inline constexpr ConfigOption<std::chrono::milliseconds> kExecutionCheckpointingTimeout{
    "execution.checkpointing.timeout", std::chrono::milliseconds{600000},
    "A checkpoint that has not completed after this long is aborted and counts as failed."};

inline constexpr ConfigOption<std::chrono::milliseconds> kExecutionCheckpointingMinPause{
    "execution.checkpointing.min-pause", std::chrono::milliseconds{0},
    "Least time between the end of one checkpoint and the start of the next."};

inline constexpr ConfigOption<int32_t> kExecutionCheckpointingMaxConcurrentCheckpoints{
    "execution.checkpointing.max-concurrent-checkpoints", 1,
    "How many checkpoints may be in progress at once."};

inline constexpr ConfigOption<int32_t> kExecutionCheckpointingTolerableFailedCheckpoints{
    "execution.checkpointing.tolerable-failed-checkpoints", 0,
    "Consecutive failed (declined or timed out) checkpoints tolerated; one more fails the job."};

inline constexpr ConfigOption<std::string> kExecutionCheckpointingExternalizedCheckpointRetention{
    "execution.checkpointing.externalized-checkpoint-retention", "DELETE_ON_CANCELLATION",
    "DELETE_ON_CANCELLATION removes the job's checkpoints when it is cancelled; "
    "RETAIN_ON_CANCELLATION keeps the retained ones for a later restore. Checkpoints of a failed "
    "job are always kept."};

inline constexpr ConfigOption<int32_t> kStateCheckpointsNumRetained{
    "state.checkpoints.num-retained", 1, "How many completed checkpoints are kept."};

inline constexpr ConfigOption<std::string> kStateSavepointsDir{
    "state.savepoints.dir", "",
    "Default directory for savepoints when triggerSavepoint() is given none."};

inline constexpr ConfigOption<bool> kStateBackendIncremental{
    "state.backend.incremental", false,
    "RocksDB and tiered: checkpoints reference the SST files earlier checkpoints already hold "
    "instead of writing all state again. Savepoints are always full and canonical."};

inline constexpr ConfigOption<std::string> kExecutionSavepointPath{
    "execution.savepoint.path", "",
    "A savepoint or retained checkpoint (its directory or its _metadata file) to start the job "
    "from."};

inline constexpr ConfigOption<bool> kExecutionSavepointIgnoreUnclaimedState{
    "execution.savepoint.ignore-unclaimed-state", false,
    "Start even when the savepoint holds state of an operator the job no longer has."};

// ---- failure recovery ----

inline constexpr ConfigOption<std::string> kRestartStrategyType{
    "restart-strategy.type", "",
    "fixed-delay, failure-rate, exponential-delay or none. Unset: none without checkpointing, "
    "fixed-delay with checkpointing (Flink's rule)."};

inline constexpr ConfigOption<int32_t> kRestartStrategyFixedDelayAttempts{
    "restart-strategy.fixed-delay.attempts", 1,
    "fixed-delay: restarts before the job fails. When the strategy is chosen because "
    "checkpointing is on, the default is unlimited (2147483647)."};

inline constexpr ConfigOption<std::chrono::milliseconds> kRestartStrategyFixedDelayDelay{
    "restart-strategy.fixed-delay.delay", std::chrono::milliseconds{1000},
    "fixed-delay: wait between a failure and the restart."};

inline constexpr ConfigOption<int32_t> kRestartStrategyFailureRateMaxFailuresPerInterval{
    "restart-strategy.failure-rate.max-failures-per-interval", 1,
    "failure-rate: failures within one interval before the job fails."};

inline constexpr ConfigOption<std::chrono::milliseconds>
    kRestartStrategyFailureRateFailureRateInterval{
        "restart-strategy.failure-rate.failure-rate-interval", std::chrono::milliseconds{60000},
        "failure-rate: the interval failures are counted in."};

inline constexpr ConfigOption<std::chrono::milliseconds> kRestartStrategyFailureRateDelay{
    "restart-strategy.failure-rate.delay", std::chrono::milliseconds{1000},
    "failure-rate: wait between a failure and the restart."};

inline constexpr ConfigOption<std::chrono::milliseconds>
    kRestartStrategyExponentialDelayInitialBackoff{
        "restart-strategy.exponential-delay.initial-backoff", std::chrono::milliseconds{1000},
        "exponential-delay: wait before the first restart."};

inline constexpr ConfigOption<std::chrono::milliseconds> kRestartStrategyExponentialDelayMaxBackoff{
    "restart-strategy.exponential-delay.max-backoff", std::chrono::milliseconds{300000},
    "exponential-delay: the wait never grows beyond this."};

inline constexpr ConfigOption<double> kRestartStrategyExponentialDelayBackoffMultiplier{
    "restart-strategy.exponential-delay.backoff-multiplier", 1.5,
    "exponential-delay: factor the wait grows by after each failure."};

inline constexpr ConfigOption<std::chrono::milliseconds>
    kRestartStrategyExponentialDelayResetBackoffThreshold{
        "restart-strategy.exponential-delay.reset-backoff-threshold",
        std::chrono::milliseconds{3600000},
        "exponential-delay: after running this long without failure the wait starts over."};

inline constexpr ConfigOption<double> kRestartStrategyExponentialDelayJitterFactor{
    "restart-strategy.exponential-delay.jitter-factor", 0.1,
    "exponential-delay: random share (+/-) added to each wait."};

inline constexpr ConfigOption<int32_t> kRestartStrategyExponentialDelayAttemptsBeforeResetBackoff{
    "restart-strategy.exponential-delay.attempts-before-reset-backoff", 2147483647,
    "exponential-delay: restarts before the job fails."};

// ---- sources ----

inline constexpr ConfigOption<MemorySize> kSourceSocketMaxLineLength{
    "source.socket.max-line-length", MemorySize::ofMebiBytes(1),
    "socketTextStream: longest line accepted, without its delimiter. The source never holds more "
    "than this of one line, so a peer that sends no delimiter cannot exhaust memory. Sluice only "
    "(Flink's socket source has no limit)."};

inline constexpr ConfigOption<std::string> kSourceSocketOversizedLines{
    "source.socket.oversized-lines", "fail",
    "socketTextStream: what a line longer than source.socket.max-line-length does. 'fail' fails "
    "the source; 'truncate' emits the line's first max-line-length bytes, drops the rest up to "
    "the delimiter and logs a warning. Sluice only."};

inline constexpr ConfigOption<std::chrono::milliseconds> kSourceSocketConnectTimeout{
    "source.socket.connect-timeout", std::chrono::milliseconds{10000},
    "socketTextStream: how long one connection attempt to an address may take before it fails "
    "(and is retried if retries are left). Sluice only."};

// ---- task manager: slots, memory, network ----

inline constexpr ConfigOption<int32_t> kTaskManagerNumberOfTaskSlots{
    "taskmanager.numberOfTaskSlots", 1,
    "Number of slots a TaskManager offers: how many parallel pipelines it runs."};

inline constexpr ConfigOption<MemorySize> kTaskManagerMemoryManagedSize{
    "taskmanager.memory.managed.size", MemorySize::ofMebiBytes(512),
    "Managed memory of a TaskManager, divided evenly among its slots. RocksDB sizes its block "
    "cache and write buffers from it."};

inline constexpr ConfigOption<MemorySize> kTaskManagerMemorySegmentSize{
    "taskmanager.memory.segment-size", MemorySize::ofKibiBytes(32),
    "Size of the memory segments (network buffers) records are serialized into."};

inline constexpr ConfigOption<int32_t> kTaskManagerNetworkMemoryBuffersPerChannel{
    "taskmanager.network.memory.buffers-per-channel", 2,
    "Network buffers per output channel; with the floating buffers they bound the memory a task's "
    "output holds in flight."};

inline constexpr ConfigOption<int32_t> kTaskManagerNetworkMemoryFloatingBuffersPerGate{
    "taskmanager.network.memory.floating-buffers-per-gate", 8,
    "Extra buffers per task output, shared by all its channels, used by whichever channel fills up "
    "first."};

// ---- cluster ----

inline constexpr ConfigOption<std::string> kJobManagerRpcAddress{
    "jobmanager.rpc.address", "localhost",
    "Host name or address of the JobManager, used by TaskManagers and clients to reach it."};

inline constexpr ConfigOption<int32_t> kJobManagerRpcPort{"jobmanager.rpc.port", 6123,
                                                          "Port of the JobManager's RPC endpoint."};

inline constexpr ConfigOption<std::string> kJobManagerBindHost{
    "jobmanager.bind-host", "localhost",
    "Address the JobManager's RPC endpoint listens on (Flink's default is all interfaces; Sluice "
    "binds to loopback unless told otherwise)."};

inline constexpr ConfigOption<int32_t> kRestPort{
    "rest.port", 8081,
    "Port of the REST API and web UI: the JobManager's, and in embedded mode the job process's "
    "when rest.embedded.enabled is set; 0: any free port (logged)."};

inline constexpr ConfigOption<std::string> kRestAddress{
    "rest.address", "localhost",
    "Address clients use to reach the JobManager's REST endpoint (cluster mode)."};

inline constexpr ConfigOption<std::string> kTaskManagerHost{
    "taskmanager.host", "localhost",
    "Address other processes use to reach this TaskManager's data port (Flink's default is the "
    "host's name; Sluice's is loopback)."};

inline constexpr ConfigOption<std::string> kTaskManagerBindHost{
    "taskmanager.bind-host", "localhost",
    "Address the TaskManager's RPC and data endpoints listen on (loopback by default)."};

inline constexpr ConfigOption<int32_t> kTaskManagerRpcPort{
    "taskmanager.rpc.port", 0, "Port of the TaskManager's RPC endpoint; 0 picks a free port."};

inline constexpr ConfigOption<int32_t> kTaskManagerDataPort{
    "taskmanager.data.port", 0,
    "Port of the TaskManager's data plane (records between TaskManagers); 0 picks a free port."};

inline constexpr ConfigOption<MemorySize> kTaskManagerMemoryNetworkMax{
    "taskmanager.memory.network.max", MemorySize::ofMebiBytes(1024),
    "Most memory a TaskManager's network buffers (sending and receiving) may take. A deployment "
    "that would need more fails with the sizes named. Flink derives it from a fraction of the "
    "process size; Sluice takes the cap directly."};

inline constexpr ConfigOption<std::chrono::milliseconds> kHeartbeatInterval{
    "heartbeat.interval", std::chrono::milliseconds{10000},
    "How often the JobManager and each TaskManager exchange heartbeats."};

inline constexpr ConfigOption<std::chrono::milliseconds> kHeartbeatTimeout{
    "heartbeat.timeout", std::chrono::milliseconds{50000},
    "A TaskManager that has not answered a heartbeat for this long is declared lost; its tasks' "
    "jobs fail over."};

inline constexpr ConfigOption<std::chrono::milliseconds> kSlotRequestTimeout{
    "slot.request.timeout", std::chrono::milliseconds{300000},
    "How long a job waits for enough free slots before it fails."};

inline constexpr ConfigOption<int32_t> kJobStoreExpirationTime{
    "jobstore.expiration-time", 3600,
    "Seconds after which a finished, canceled or failed job is removed from the JobManager: the "
    "CLI's list, the REST API and the web UI no longer show it."};

inline constexpr ConfigOption<int32_t> kJobStoreMaxCapacity{
    "jobstore.max-capacity", 2147483647,
    "How many finished, canceled or failed jobs the JobManager keeps; beyond it, the ones that "
    "ended first are removed."};

inline constexpr ConfigOption<bool> kClusterEvenlySpreadOutSlots{
    "cluster.evenly-spread-out-slots", false,
    "Place a job's slots on the TaskManager with the most free slots first, spreading the job "
    "over the cluster, instead of filling one TaskManager before the next."};

inline constexpr ConfigOption<std::string> kExecutionTarget{
    "execution.target", "local",
    "Where execute() runs the job: local (an embedded mini-cluster in this process) or remote "
    "(submitted to the JobManager at jobmanager.rpc.address:jobmanager.rpc.port)."};

inline constexpr ConfigOption<bool> kExecutionAttached{
    "execution.attached", true,
    "remote: whether execute() (and sluice run) waits for the job to end, or returns once the "
    "job is submitted (sluice run -d)."};

inline constexpr ConfigOption<std::string> kBlobStorageDirectory{
    "blob.storage.directory", "",
    "Where the JobManager keeps uploaded job libraries and TaskManagers keep their copies; empty "
    "means a new directory under the system's temporary directory."};

inline constexpr ConfigOption<std::string> kEnvLogDir{
    "env.log.dir", "log",
    "Directory of the cluster processes' log files (sluice-<role>-<host>.log), relative to the "
    "working directory unless absolute."};

// ---- REST endpoint, web UI and metrics ----

inline constexpr ConfigOption<std::string> kRestBindAddress{
    "rest.bind-address", "localhost",
    "Address the REST endpoint and web UI listen on (the JobManager's; in embedded mode the job "
    "process's). Flink's default is all interfaces; Sluice binds to loopback unless told "
    "otherwise."};

inline constexpr ConfigOption<bool> kRestEmbeddedEnabled{
    "rest.embedded.enabled", false,
    "Embedded mode only (beyond Flink): serve the REST API and web UI from the job's own process "
    "on rest.bind-address:rest.port while it runs, as Flink's local environment with the web "
    "UI."};

inline constexpr ConfigOption<std::string> kRestAuthenticationToken{
    "rest.authentication.token", "",
    "Beyond Flink: when set, every mutating REST call (cancel, savepoint, stop, jar upload, jar "
    "run and delete) and every job-changing CLI call must carry 'Authorization: Bearer <token>'; "
    "without it the call gets 401 and changes nothing. Read-only calls stay open."};

inline constexpr ConfigOption<bool> kSecuritySslRestEnabled{
    "security.ssl.rest.enabled", false,
    "Serve the REST API and web UI over HTTPS only (a plain-HTTP client is refused)."};

inline constexpr ConfigOption<std::string> kSecuritySslRestKeystore{
    "security.ssl.rest.keystore", "",
    "PEM file with the REST endpoint's certificate (chain). Flink takes a Java keystore; Sluice "
    "takes PEM files."};

inline constexpr ConfigOption<std::string> kSecuritySslRestKey{
    "security.ssl.rest.key", "",
    "PEM file with the private key of security.ssl.rest.keystore (beyond Flink, which keeps the "
    "key in the keystore)."};

inline constexpr ConfigOption<std::string> kSecuritySslRestTruststore{
    "security.ssl.rest.truststore", "",
    "PEM file with the certificates a REST client trusts; empty: the system's. Reserved: the CLI "
    "talks to the JobManager over gRPC, not REST."};

inline constexpr ConfigOption<std::chrono::milliseconds> kWebRefreshInterval{
    "web.refresh-interval", std::chrono::milliseconds(3000),
    "How often the web UI refreshes what it shows."};

inline constexpr ConfigOption<int32_t> kWebCheckpointsHistory{
    "web.checkpoints.history", 10,
    "Checkpoints kept in a job's checkpoint history (REST and web UI)."};

inline constexpr ConfigOption<std::string> kWebUploadDir{
    "web.upload.dir", "",
    "Directory of job libraries uploaded with POST /jars/upload; empty: 'jars' under "
    "blob.storage.directory."};

inline constexpr ConfigOption<bool> kWebSubmitEnable{
    "web.submit.enable", true, "Whether jobs may be uploaded and run through the REST API."};

inline constexpr ConfigOption<bool> kWebCancelEnable{
    "web.cancel.enable", true,
    "Whether the web UI offers to cancel jobs (as in Flink, REST calls may cancel regardless)."};

inline constexpr ConfigOption<std::chrono::milliseconds> kMetricsFetcherUpdateInterval{
    "metrics.fetcher.update-interval", std::chrono::milliseconds(10000),
    "How old the TaskManagers' metrics the JobManager serves over REST may be: it fetches them "
    "again when they are older."};

inline constexpr ConfigOption<std::string> kMetricsScopeJm{"metrics.scope.jm", "<host>.jobmanager",
                                                           "Scope format of JobManager metrics."};
inline constexpr ConfigOption<std::string> kMetricsScopeJmJob{
    "metrics.scope.jm-job", "<host>.jobmanager.<job_name>",
    "Scope format of job metrics on the JobManager."};
inline constexpr ConfigOption<std::string> kMetricsScopeTm{
    "metrics.scope.tm", "<host>.taskmanager.<tm_id>", "Scope format of TaskManager metrics."};
inline constexpr ConfigOption<std::string> kMetricsScopeTmJob{
    "metrics.scope.tm-job", "<host>.taskmanager.<tm_id>.<job_name>",
    "Scope format of job metrics on a TaskManager."};
inline constexpr ConfigOption<std::string> kMetricsScopeTask{
    "metrics.scope.task", "<host>.taskmanager.<tm_id>.<job_name>.<task_name>.<subtask_index>",
    "Scope format of task metrics."};
inline constexpr ConfigOption<std::string> kMetricsScopeOperator{
    "metrics.scope.operator",
    "<host>.taskmanager.<tm_id>.<job_name>.<operator_name>.<subtask_index>",
    "Scope format of operator metrics."};

inline constexpr ConfigOption<std::string> kMetricsReporterPromFactoryClass{
    "metrics.reporter.prom.factory.class", "",
    "Set to org.apache.flink.metrics.prometheus.PrometheusReporterFactory (or 'prometheus') to "
    "serve every metric of the process at http://<host>:<port>/metrics in Prometheus's text "
    "format. Sluice knows the reporter names 'prom' and 'slf4j' only."};

inline constexpr ConfigOption<std::string> kMetricsReporterPromPort{
    "metrics.reporter.prom.port", "9249",
    "Port of the Prometheus endpoint, or a range ('9250-9260': the first free one, so that "
    "several processes on one host can share the configuration); 0: any free port (logged)."};

inline constexpr ConfigOption<std::string> kMetricsReporterPromHost{
    "metrics.reporter.prom.host", "localhost",
    "Address the Prometheus endpoint listens on (beyond Flink, which listens on all "
    "interfaces)."};

inline constexpr ConfigOption<std::string> kMetricsReporterSlf4jFactoryClass{
    "metrics.reporter.slf4j.factory.class", "",
    "Set to org.apache.flink.metrics.slf4j.Slf4jReporterFactory (or 'log') to write every metric "
    "of the process to its log every metrics.reporter.slf4j.interval."};

inline constexpr ConfigOption<std::chrono::milliseconds> kMetricsReporterSlf4jInterval{
    "metrics.reporter.slf4j.interval", std::chrono::milliseconds(60000),
    "How often the log reporter writes the metrics."};

// Every option above. Keep in declaration order; registeredOptions() sorts.
inline constexpr std::tuple kAllOptions{
    &kParallelismDefault,
    &kPipelineMaxParallelism,
    &kPipelineName,
    &kExecutionRuntimeMode,
    &kExecutionBufferTimeout,
    &kPipelineAutoWatermarkInterval,
    &kPipelineObjectReuse,
    &kPipelineWindowSlicing,
    &kExecutionCheckpointingInterval,
    &kStateBackendType,
    &kStateBackendRocksDbLocalDir,
    &kStateBackendRocksDbMemoryManaged,
    &kStateBackendRocksDbMemoryWriteBufferRatio,
    &kStateBackendRocksDbMemoryHighPrioPoolRatio,
    &kStateBackendTieredMemory,
    &kStateCheckpointsDir,
    &kExecutionCheckpointingMode,
    &kExecutionCheckpointingTimeout,
    &kExecutionCheckpointingMinPause,
    &kExecutionCheckpointingMaxConcurrentCheckpoints,
    &kExecutionCheckpointingTolerableFailedCheckpoints,
    &kExecutionCheckpointingExternalizedCheckpointRetention,
    &kStateCheckpointsNumRetained,
    &kStateSavepointsDir,
    &kStateBackendIncremental,
    &kExecutionSavepointPath,
    &kExecutionSavepointIgnoreUnclaimedState,
    &kRestartStrategyType,
    &kRestartStrategyFixedDelayAttempts,
    &kRestartStrategyFixedDelayDelay,
    &kRestartStrategyFailureRateMaxFailuresPerInterval,
    &kRestartStrategyFailureRateFailureRateInterval,
    &kRestartStrategyFailureRateDelay,
    &kRestartStrategyExponentialDelayInitialBackoff,
    &kRestartStrategyExponentialDelayMaxBackoff,
    &kRestartStrategyExponentialDelayBackoffMultiplier,
    &kRestartStrategyExponentialDelayResetBackoffThreshold,
    &kRestartStrategyExponentialDelayJitterFactor,
    &kRestartStrategyExponentialDelayAttemptsBeforeResetBackoff,
    &kSourceSocketMaxLineLength,
    &kSourceSocketOversizedLines,
    &kSourceSocketConnectTimeout,
    &kTaskManagerNumberOfTaskSlots,
    &kTaskManagerMemoryManagedSize,
    &kTaskManagerMemorySegmentSize,
    &kTaskManagerNetworkMemoryBuffersPerChannel,
    &kTaskManagerNetworkMemoryFloatingBuffersPerGate,
    &kJobManagerRpcAddress,
    &kJobManagerRpcPort,
    &kJobManagerBindHost,
    &kRestPort,
    &kRestAddress,
    &kTaskManagerHost,
    &kTaskManagerBindHost,
    &kTaskManagerRpcPort,
    &kTaskManagerDataPort,
    &kTaskManagerMemoryNetworkMax,
    &kHeartbeatInterval,
    &kHeartbeatTimeout,
    &kSlotRequestTimeout,
    &kJobStoreExpirationTime,
    &kJobStoreMaxCapacity,
    &kClusterEvenlySpreadOutSlots,
    &kExecutionTarget,
    &kExecutionAttached,
    &kBlobStorageDirectory,
    &kEnvLogDir,
    &kRestBindAddress,
    &kRestEmbeddedEnabled,
    &kRestAuthenticationToken,
    &kSecuritySslRestEnabled,
    &kSecuritySslRestKeystore,
    &kSecuritySslRestKey,
    &kSecuritySslRestTruststore,
    &kWebRefreshInterval,
    &kWebCheckpointsHistory,
    &kWebUploadDir,
    &kWebSubmitEnable,
    &kWebCancelEnable,
    &kMetricsFetcherUpdateInterval,
    &kMetricsScopeJm,
    &kMetricsScopeJmJob,
    &kMetricsScopeTm,
    &kMetricsScopeTmJob,
    &kMetricsScopeTask,
    &kMetricsScopeOperator,
    &kMetricsReporterPromFactoryClass,
    &kMetricsReporterPromPort,
    &kMetricsReporterPromHost,
    &kMetricsReporterSlf4jFactoryClass,
    &kMetricsReporterSlf4jInterval,
};

}  // namespace sluice::options

namespace sluice {

// A registered option with its type erased, for validation and documentation.
struct OptionDescriptor {
  std::string_view key;
  // Flink's documentation type names: Integer, Long, Boolean, Double, String,
  // Duration, MemorySize.
  std::string_view typeName;
  // The default as it would be written in config.yaml ("100 ms", "32 kb", "").
  std::string defaultValue;
  std::string_view description;
  // Checks that a value parses as the option's type; the message has no key.
  Status (*validate)(std::string_view value);
};

// All registered options, sorted by key.
const std::vector<OptionDescriptor>& registeredOptions();

// The registered option with this exact key, or null.
const OptionDescriptor* findOption(std::string_view key);

// The registered key closest to an unknown one (by edit distance, or a key
// that extends it, as 'parallelism' -> 'parallelism.default'), or empty when
// none is close enough to be a plausible typo.
std::string_view suggestOptionKey(std::string_view unknownKey);

}  // namespace sluice
