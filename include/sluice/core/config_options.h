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

// ---- checkpoints and state ----

inline constexpr ConfigOption<std::chrono::milliseconds> kExecutionCheckpointingInterval{
    "execution.checkpointing.interval", std::chrono::milliseconds{0},
    "Interval between checkpoints. 0 ms (the default) disables periodic checkpoints; Flink "
    "leaves this option unset instead."};

inline constexpr ConfigOption<std::string> kStateBackendType{
    "state.backend.type", "hashmap",
    "Keyed state backend: 'hashmap' (objects on the heap) or 'rocksdb' (embedded RocksDB on local "
    "disk)."};

inline constexpr ConfigOption<std::string> kStateBackendRocksDbLocalDir{
    "state.backend.rocksdb.localdir", "",
    "Directory under which RocksDB keeps the working files of each keyed operator subtask; each "
    "subtask's directory is removed when it ends. Empty means the system temp directory."};

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

inline constexpr ConfigOption<std::string> kStateCheckpointsDir{
    "state.checkpoints.dir", "",
    "Directory (URI) where checkpoints are written. Required when checkpointing is enabled."};

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

inline constexpr ConfigOption<int32_t> kRestPort{
    "rest.port", 8081,
    "Port of the REST API and web UI of the JobManager (cluster mode; not used by the embedded "
    "mini-cluster yet)."};

// Every option above. Keep in declaration order; registeredOptions() sorts.
inline constexpr std::tuple kAllOptions{
    &kParallelismDefault,
    &kPipelineMaxParallelism,
    &kPipelineName,
    &kExecutionRuntimeMode,
    &kExecutionBufferTimeout,
    &kPipelineAutoWatermarkInterval,
    &kPipelineObjectReuse,
    &kExecutionCheckpointingInterval,
    &kStateBackendType,
    &kStateBackendRocksDbLocalDir,
    &kStateBackendRocksDbMemoryManaged,
    &kStateBackendRocksDbMemoryWriteBufferRatio,
    &kStateBackendRocksDbMemoryHighPrioPoolRatio,
    &kStateCheckpointsDir,
    &kTaskManagerNumberOfTaskSlots,
    &kTaskManagerMemoryManagedSize,
    &kTaskManagerMemorySegmentSize,
    &kTaskManagerNetworkMemoryBuffersPerChannel,
    &kTaskManagerNetworkMemoryFloatingBuffersPerGate,
    &kJobManagerRpcAddress,
    &kJobManagerRpcPort,
    &kRestPort,
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
