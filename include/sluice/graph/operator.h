// The operator contract between the typed DataStream API and the untyped
// runtime.
//
// The API (templates in include/sluice/*.h) knows every record type; the
// runtime (src/runtime, plain C++) knows none. They meet here, through a few
// abstract classes:
//
//   OperatorFactory  creates one StreamOperatorBase per parallel subtask.
//   TypeOps          does for one record type T what needs T: chaining an
//                    Output<T> into the next operator's Input<T>, fanning one
//                    output out to several, turning bytes back into records.
//   NetworkOutputFactory
//                    serializes records of T into a RecordWriterBase and picks
//                    their channel (the partitioner of one edge).
//   SourceOperatorBase / SourceCoordinatorBase
//                    the reader and enumerator halves of a source, with splits
//                    exchanged as bytes so they can cross process boundaries.
//
// Threading: every method of an operator and of the outputs it is given runs
// on its task thread. Lifecycle, in order: setup -> open ->
// (processElement | processWatermark | processWatermarkStatus | endInput)* ->
// finish (bounded input ended: flush buffered results) -> close. close() also
// runs after a failure or cancel, without finish(). A method that throws fails
// the task; the runtime reports the operator, subtask and the exception.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <iosfwd>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <sluice/core/clock.h>
#include <sluice/core/config.h>
#include <sluice/core/runtime_context.h>
#include <sluice/core/serializer.h>
#include <sluice/core/stream_element.h>
#include <sluice/graph/element_batch.h>

namespace sluice {

// Thrown out of an operator call when the user code of operator `operatorName`
// failed; chained outputs wrap a successor's exception in one, so the task can
// name the operator that really threw.
class OperatorFailure : public std::runtime_error {
 public:
  OperatorFailure(std::string operatorName, std::string cause)
      : std::runtime_error(std::move(cause)), operatorName_(std::move(operatorName)) {}
  const std::string& operatorName() const { return operatorName_; }

 private:
  std::string operatorName_;
};

// Unwinds a task that was cancelled while blocked (e.g. waiting for a buffer).
// Never a failure; never wrapped.
class TaskCancelledException : public std::exception {
 public:
  const char* what() const noexcept override { return "task cancelled"; }
};

// "std::runtime_error: boom" for the exception being handled (call only
// inside a catch block).
std::string describeCurrentException();

// Where an operator emits. Watermarks and status go to every consumer.
//
// The engine's outputs count the records and note the last watermark that
// pass them (countRecord(), noteWatermark()): the operators' numRecordsIn,
// numRecordsOut and watermark metrics are read from them, by other threads.
// Only the task thread writes, so counting is a plain load and store. An
// output whose count the engine knows anyway (a source's, which counts per
// batch; a one-out-per-in operator's, whose count is its input's; a fan-out
// branch's, whose count is the fan-out's) stops counting: deriveCount(),
// on the task thread before records flow.
class OutputBase {
 public:
  virtual ~OutputBase() = default;
  virtual void emitWatermark(Watermark watermark) = 0;
  virtual void emitWatermarkStatus(WatermarkStatus status) = 0;

  int64_t recordsCounted() const {
    return derived_ ? derived_() : records_.load(std::memory_order_relaxed);
  }
  // kMinTimestamp until a watermark passed.
  int64_t lastWatermark() const { return watermark_.load(std::memory_order_relaxed); }

  // From now on recordsCounted() is `count()` (callable from any thread) and
  // records passing are not counted here.
  void deriveCount(std::function<int64_t()> count) {
    derived_ = std::move(count);
    counting_ = false;
  }

 protected:
  void countRecord() {
    if (counting_) {
      records_.store(records_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
  }
  void noteWatermark(int64_t timestamp) { watermark_.store(timestamp, std::memory_order_relaxed); }

 private:
  bool counting_ = true;
  std::atomic<int64_t> records_{0};
  std::atomic<int64_t> watermark_{kMinTimestamp};
  std::function<int64_t()> derived_;
};

template <class T>
class Output : public OutputBase {
 public:
  // The callee must not keep a reference to `record` after returning.
  virtual void collect(const StreamRecord<T>& record) = 0;
  // The same for a record the caller is done with (e.g. the scratch record
  // an operator refills for each output): the callee may move from it,
  // leaving it valid but unspecified. An output that keeps records (the
  // batches of an in-process channel) takes their storage instead of
  // copying it. By default it is collect(record).
  virtual void collect(StreamRecord<T>&& record) {
    collect(static_cast<const StreamRecord<T>&>(record));
  }
  // A value the caller is done with, going out with these timestamp fields:
  // the same as collect(StreamRecord<T>&&) of a record holding it. An output
  // that keeps records puts the value straight into its own record, one
  // move instead of two; by default `scratch` (the caller's record, which
  // may be left moved-from) carries it to collect().
  virtual void collectValue(T&& value, bool hasTimestamp, int64_t timestamp,
                            StreamRecord<T>& scratch) {
    collect(std::move(fill(scratch, std::move(value), hasTimestamp, timestamp)));
  }

 protected:
  // `scratch` holding `value` with these timestamp fields.
  static StreamRecord<T>& fill(StreamRecord<T>& scratch, T&& value, bool hasTimestamp,
                               int64_t timestamp) {
    scratch.value = std::move(value);
    scratch.hasTimestamp = hasTimestamp;
    scratch.timestamp = timestamp;
    return scratch;
  }
};

// One typed input of an operator.
template <class T>
class Input {
 public:
  virtual ~Input() = default;
  virtual void processElement(const StreamRecord<T>& record) = 0;
  // `n` consecutive records of an in-process batch, in order. An operator
  // that can overlap one record's memory accesses with the next ones'
  // overrides it; by default it is processElement() for each.
  virtual void processElements(const StreamRecord<T>* records, size_t n) {
    for (size_t i = 0; i < n; ++i) processElement(records[i]);
  }
};

// Services the runtime gives each operator instance. Valid from setup() until
// close() returns; task thread only, except where a method says otherwise.
class OperatorContext {
 public:
  virtual ~OperatorContext() = default;
  virtual RuntimeContext& runtimeContext() = 0;

  // The Output<X> for side-output tag `tagId` (X is the tag's type), or nullptr
  // when nothing in the job consumes that tag. Look it up once, in open().
  virtual OutputBase* sideOutput(const std::string& tagId) = 0;

  // Counts records dropped on purpose (e.g. to a side output nobody consumes),
  // so nothing is lost silently. Reported as the `numRecordsDropped` metric.
  virtual void countDroppedRecord() = 0;

  // Sources only: ask the source coordinator for another split.
  virtual void sendSplitRequest() = 0;
  // Sources only, any thread: data became available after emitNext() said
  // kNothingAvailable; the task will call emitNext() again.
  virtual void signalInputAvailable() = 0;
  // Sources only: call emitNext() again no later than `when`, even without a
  // signal (for rate limits and polling).
  virtual void requestWakeupAt(std::chrono::steady_clock::time_point when) = 0;

  // The job's configuration (state backend type, directories, memory).
  virtual const Configuration& configuration() = 0;
  // Processing time (TTL, processing-time timers); tests install a
  // ManualClock through the environment.
  virtual const Clock& clock() = 0;
  // An object shared by every operator of this subtask's slot (e.g. the
  // RocksDB block cache sized from the slot's managed memory): the one
  // stored under `key`, created with `make` by the first caller. Thread-safe.
  virtual std::shared_ptr<void> slotResource(
      const std::string& key, const std::function<std::shared_ptr<void>()>& make) = 0;
  // Managed memory of this subtask's slot in bytes
  // (taskmanager.memory.managed.size / taskmanager.numberOfTaskSlots).
  virtual int64_t managedMemoryPerSlot() = 0;
  // Whether the snapshot of `checkpointId` being taken now may be native
  // and incremental: state.backend.incremental is set, it is a checkpoint
  // (savepoints are always canonical) and it is stored in files.
  virtual bool incrementalSnapshot(int64_t checkpointId) {
    (void)checkpointId;
    return false;
  }

  // Calls `callback(timestamp)` on the task thread once clock() reads at
  // least `timestamp`, between records (never inside another call into the
  // operator). Timers still pending when the input ends do not fire, as in
  // Flink.
  virtual void registerProcessingTimer(int64_t timestamp,
                                       std::function<void(int64_t)> callback) = 0;
  // Adds `n` to the job-wide counter `name` (e.g. numLateRecordsDropped),
  // reported in the JobExecutionResult summed over all subtasks.
  virtual void incrementCounter(const std::string& name, int64_t n) = 0;
};

// A native keyed snapshot: RocksDB's own files instead of the canonical
// format, for incremental checkpoints (state.backend.incremental). SST files
// are immutable and named by RocksDB's unique id, so a checkpoint stores each
// one once and later checkpoints refer to the stored copy; the other files
// are small and private to one snapshot.
struct NativeKeyedSnapshot {
  struct SstFile {
    std::string fileName;  // as the snapshot names it, e.g. "000012.sst"
    std::string uniqueId;  // RocksDB's unique id: same id, same contents
    uint64_t sizeBytes = 0;
    // Absolute path of the stored copy (the job's shared directory); empty
    // in a snapshot not yet stored.
    std::string location;
    // XXH3-64 of the stored copy (with hasChecksums).
    uint64_t checksum = 0;
  };
  struct FileDigest {
    uint64_t sizeBytes = 0;
    uint64_t checksum = 0;
  };
  // The directory holding the private files: a local staging directory
  // while the snapshot is being stored, the checkpoint's copy afterwards.
  std::string directory;
  int32_t startKeyGroup = 0;
  int32_t endKeyGroup = -1;
  std::vector<SstFile> sstFiles;
  std::vector<std::string> privateFiles;
  // Once stored: the size and checksum of each private file, in the order
  // of privateFiles, and every SstFile::checksum. False for a snapshot not
  // yet stored and for one read from a checkpoint written before checksums.
  bool hasChecksums = false;
  std::vector<FileDigest> privateFileDigests;
};

// Writes a captured keyed-state snapshot (the canonical format of
// sluice/state/snapshot.h) to a stream. Any thread, once.
class StateSnapshotWriter {
 public:
  virtual ~StateSnapshotWriter() = default;
  virtual void writeTo(std::ostream& out) = 0;
  // Not null for a native snapshot, whose files the runtime stores itself
  // (writeTo() then throws). The files stay until the writer is destroyed.
  virtual const NativeKeyedSnapshot* nativeSnapshot() const { return nullptr; }
};

// What StreamOperatorBase::snapshotState captured.
struct OperatorStateSnapshot {
  // Keyed state; null for operators without keyed state.
  std::unique_ptr<StateSnapshotWriter> keyedState;
  // Operator state (lists, union lists, broadcast state), serialized by
  // OperatorStateBackend::snapshot(); empty when the operator has none.
  std::string operatorState;
  // Timers (InternalTimerService::snapshot()), tagged by key group; empty
  // when the operator has none.
  std::string timers;
  // Set instead of `timers` by an operator that writes its timers in the
  // checkpoint's asynchronous part (InternalTimerService::snapshotLater()):
  // returns what `timers` would hold. Any thread, once; the timers it reads
  // stay as they were until it has run or is destroyed.
  std::function<std::string()> writeTimers;

  // Fills `timers` from writeTimers, if set, on the calling thread.
  void resolveTimers() {
    if (!writeTimers) return;
    timers = writeTimers();
    writeTimers = nullptr;
  }
};

// One written keyed-state snapshot: a canonical file, bytes in memory, or a
// stored native snapshot (then `path` is its private-file directory).
struct KeyedStateHandleRef {
  std::string path;
  std::shared_ptr<const std::string> bytes;
  std::shared_ptr<const NativeKeyedSnapshot> native;
};

// What an operator restores from, already cut to its subtask: keyed
// snapshots that together cover (at least) its key groups, and its share of
// operator state after redistribution (OperatorStateBackend::repartition).
struct OperatorStateRestore {
  std::vector<KeyedStateHandleRef> keyedState;
  std::string operatorState;
  // The timer snapshots of every old subtask; each operator keeps the
  // timers of its own key groups.
  std::vector<std::string> timers;
};

// The id of the "checkpoint" a job completes when all its tasks finished:
// notifyCheckpointComplete(kFinalCheckpointId) commits what two-phase-commit
// sinks pre-committed at the end of their input.
inline constexpr int64_t kFinalCheckpointId = INT64_MAX;

enum class ChainingStrategy : uint8_t {
  kAlways,  // chain with the predecessor and successors when the rules allow
  kHead,    // start a new chain here; successors may chain to it
  kNever,   // never chain, in either direction
};

class StreamOperatorBase {
 public:
  virtual ~StreamOperatorBase() = default;

  // `output` is an Output<OUT> for the operator's output type; it is a
  // discarding output when nothing consumes the operator.
  virtual void setup(OperatorContext& context, OutputBase& output) {
    context_ = &context;
    output_ = &output;
  }
  virtual void open() {}
  // End of all input: emit what is buffered. Not called after failure/cancel.
  virtual void finish() {}
  virtual void close() {}

  // `input` is 0 for one-input operators, 0 or 1 for two-input operators.
  // The default forwards; two-input operators forward the minimum.
  virtual void processWatermark(int input, Watermark watermark) {
    (void)input;
    output_->emitWatermark(watermark);
  }
  virtual void processWatermarkStatus(int input, WatermarkStatus status) {
    (void)input;
    output_->emitWatermarkStatus(status);
  }
  // Input `input` will deliver nothing more (all its channels ended).
  virtual void endInput(int input) { (void)input; }

  // State. initializeState() runs after setup() and before open(): it creates
  // the operator's state backends and, when `restore` is not null, loads
  // them from a snapshot. Operators without state ignore it.
  virtual void initializeState(const OperatorStateRestore* restore) { (void)restore; }
  // Synchronous part of a snapshot: captures the operator's keyed state
  // (written later by the returned writer, on any thread) and its operator
  // state (serialized now). Called on the task thread between elements.
  virtual OperatorStateSnapshot snapshotState(int64_t checkpointId) {
    (void)checkpointId;
    return {};
  }

  // Checkpoint hooks. prepareSnapshotPreBarrier runs right before the
  // barrier of `checkpointId` is sent downstream (emit what must precede
  // it); notifyCheckpointComplete runs once the coordinator has made that
  // checkpoint durable (two-phase-commit sinks commit then). A notice may be
  // skipped when a later checkpoint completes first; kFinalCheckpointId
  // comes once every task of the job has finished its bounded input.
  virtual void prepareSnapshotPreBarrier(int64_t checkpointId) { (void)checkpointId; }
  virtual void notifyCheckpointComplete(int64_t checkpointId) { (void)checkpointId; }

  // True if the operator emits exactly one record per record it receives
  // (map, reduce, timestamp assignment): the engine then takes its
  // numRecordsOut from its numRecordsIn instead of counting.
  virtual bool emitsOnePerInput() const { return false; }

  virtual int numberOfInputs() const = 0;
  // The Input<T>* of input `index`, type-erased; TypeOps<T> casts it back.
  virtual void* inputPointer(int index) = 0;

  const std::string& operatorName() const { return context_->runtimeContext().getOperatorName(); }

 protected:
  OperatorContext& context() { return *context_; }
  OutputBase& outputBase() { return *output_; }

 private:
  OperatorContext* context_ = nullptr;
  OutputBase* output_ = nullptr;
};

// The reader half of a source, as the task sees it.
class SourceOperatorBase : public StreamOperatorBase {
 public:
  // Emits the records available now (a bounded batch) and says what next.
  virtual InputStatus emitNext() = 0;
  // Splits assigned by the coordinator, serialized with the split type's
  // serializer. Task thread.
  virtual void addSplits(const std::vector<std::vector<uint8_t>>& splits) = 0;
  virtual void noMoreSplits() = 0;
  // Records emitted so far, published at least once per emitNext(); any
  // thread.
  virtual int64_t recordsEmitted() const = 0;
  // Ends event time (a bounded input's end, a drain): emits the maximum
  // watermark. A source that generates watermarks emits it through its
  // generator's output, which then emits nothing lower.
  virtual void emitMaxWatermark() { outputBase().emitWatermark(Watermark::max()); }

  int numberOfInputs() const override { return 0; }
  void* inputPointer(int) override { return nullptr; }
};

// The coordinator's view of the subtasks of one source; runtime-implemented.
// Thread-safe.
class SplitEnumeratorContextBase {
 public:
  virtual ~SplitEnumeratorContextBase() = default;
  virtual int currentParallelism() const = 0;
  virtual void assignSplit(int subtask, std::vector<uint8_t> serializedSplit) = 0;
  virtual void signalNoMoreSplits(int subtask) = 0;
};

// The enumerator half of a source. The runtime calls it from one thread at a
// time (it serializes the calls).
class SourceCoordinatorBase {
 public:
  virtual ~SourceCoordinatorBase() = default;
  virtual void start() = 0;
  virtual void addReader(int subtask) = 0;
  virtual void handleSplitRequest(int subtask) = 0;
  // The enumerator's checkpoint (its unassigned splits), serialized. Taken
  // by the checkpoint coordinator right before it triggers the sources.
  virtual std::string snapshotState(int64_t checkpointId) = 0;
  virtual void close() {}
};

// Consumer side of a network edge: records of one channel -> Input<T>.
class RecordProcessorBase {
 public:
  virtual ~RecordProcessorBase() = default;
  // One record off a serialized channel: its value's bytes.
  virtual void processRecord(DataInputView& in, bool hasTimestamp, int64_t timestamp) = 0;
  // Records [from, to) of an in-process batch (a TypedElementBatch of the
  // edge's record type), in order.
  virtual void processBatch(const ElementBatch& batch, size_t from, size_t to) = 0;
};

// Producer side of a network edge (one per outgoing edge of a subtask);
// runtime-implemented. Task thread.
//
// A channel is local (its consumer runs in this process: records go into
// typed batches, see element_batch.h) or remote (records are serialized:
// `serializedRecord` is one record as framed by writeRecordHeader() followed
// by the value's bytes). Watermarks and status go to every channel in the
// form it takes.
class RecordWriterBase {
 public:
  virtual ~RecordWriterBase() = default;
  virtual int numberOfChannels() const = 0;
  // Remote channels only.
  virtual void emit(int channel, const uint8_t* serializedRecord, size_t size) = 0;
  // Every channel, all of them remote.
  virtual void broadcastEmit(const uint8_t* serializedRecord, size_t size) = 0;
  virtual void broadcastWatermark(Watermark watermark) = 0;
  virtual void broadcastWatermarkStatus(WatermarkStatus status) = 0;

  bool isLocal(int channel) const { return local_[static_cast<size_t>(channel)] != 0; }
  bool allLocal() const { return allLocal_; }
  // The batch local `channel` is filling (a TypedElementBatch of the edge's
  // record type; a new one from the pool when there is none, which may block:
  // backpressure). After adding a record, call recordAdded(channel, batch).
  ElementBatch& localBatch(int channel) {
    ElementBatch* b = batches_[static_cast<size_t>(channel)];
    return b != nullptr ? *b : acquireBatch(channel);
  }
  // `batch` is localBatch(channel), which just took a record.
  void recordAdded(int channel, const ElementBatch& batch) {
    if (handOverEveryRecord_ || batch.full()) handOverBatch(channel);
  }

 protected:
  // Which channels are local; sets up the batch slots.
  void setLocalChannels(std::vector<uint8_t> local, bool handOverEveryRecord) {
    local_ = std::move(local);
    batches_.assign(local_.size(), nullptr);
    handOverEveryRecord_ = handOverEveryRecord;
    allLocal_ = true;
    for (uint8_t l : local_) allLocal_ = allLocal_ && l != 0;
  }
  // Sets batches_[channel] to a fresh batch and returns it.
  virtual ElementBatch& acquireBatch(int channel) = 0;
  // Hands batches_[channel] to the consumer and clears the slot.
  virtual void handOverBatch(int channel) = 0;

  std::vector<ElementBatch*> batches_;  // per channel: the batch being filled, or null

 private:
  std::vector<uint8_t> local_;
  bool allLocal_ = false;
  bool handOverEveryRecord_ = false;
};

// Element tags on the wire. A serialized element is [tag][fields][value].
enum class ElementTag : uint8_t {
  kRecord = 0,
  kRecordWithTimestamp = 1,
  kWatermark = 2,
  kWatermarkStatus = 3,
  kBarrier = 4,
  kEndOfPartition = 5,
};

template <class T>
inline void writeRecordHeader(const StreamRecord<T>& record, DataOutputView& out) {
  if (record.hasTimestamp) {
    out.writeU8(static_cast<uint8_t>(ElementTag::kRecordWithTimestamp));
    out.writeI64(record.timestamp);
  } else {
    out.writeU8(static_cast<uint8_t>(ElementTag::kRecord));
  }
}

enum class PartitionKind : uint8_t {
  kDefault,  // not chosen by the user: forward when parallelism matches, else rebalance
  kForward,
  kRebalance,
  kRescale,
  kHash,
  kBroadcast,
  kShuffle,
  kGlobal,
  kCustom,
};

const char* partitionKindName(PartitionKind kind);

// Everything that needs the record type T of an output or an edge.
class TypeOps {
 public:
  virtual ~TypeOps() = default;
  virtual std::string schema() const = 0;
  // An Output<T> that calls target's Input<T> number `inputIndex` directly.
  virtual std::unique_ptr<OutputBase> createChainedOutput(StreamOperatorBase& target,
                                                          int inputIndex) const = 0;
  virtual std::unique_ptr<RecordProcessorBase> createRecordProcessor(StreamOperatorBase& target,
                                                                     int inputIndex) const = 0;
  // An empty batch of T for an in-process channel, holding about `bytes`
  // of records.
  virtual std::unique_ptr<ElementBatch> createBatch(size_t bytes) const = 0;
  // One Output<T> that forwards to all `outputs` (each an Output<T>); with
  // none it discards.
  virtual std::unique_ptr<OutputBase> createFanOut(
      std::vector<std::unique_ptr<OutputBase>> outputs) const = 0;
};

// The partitioner and serializer of one edge.
class NetworkOutputFactory {
 public:
  virtual ~NetworkOutputFactory() = default;
  // `kind` is the edge's resolved partitioning (never kDefault);
  // `downstreamMaxParallelism` defines the key groups for kHash.
  virtual std::unique_ptr<OutputBase> createNetworkOutput(RecordWriterBase& writer,
                                                          PartitionKind kind, int subtaskIndex,
                                                          int downstreamMaxParallelism) const = 0;
};

class OperatorFactory {
 public:
  virtual ~OperatorFactory() = default;
  // A fresh operator for one subtask, with its own copy of the user function.
  virtual std::unique_ptr<StreamOperatorBase> createOperator() const = 0;
  virtual bool isSource() const { return false; }
  // Sources: the enumerator, created once per job run (again after each
  // restart). `restoredState` is what SourceCoordinatorBase::snapshotState
  // returned for the checkpoint the job restores, or null on a fresh start.
  virtual std::unique_ptr<SourceCoordinatorBase> createCoordinator(
      SplitEnumeratorContextBase& context, const std::string* restoredState) const {
    (void)context;
    (void)restoredState;
    return nullptr;
  }
  // The main output's record type (nullptr for sinks).
  virtual std::shared_ptr<const TypeOps> outputType() const = 0;
  // Sources that only work with one subtask (fromElements, socketTextStream).
  virtual bool isNonParallel() const { return false; }
};

}  // namespace sluice
