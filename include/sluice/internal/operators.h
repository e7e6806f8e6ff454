// Typed operators and plumbing behind the DataStream API.
//
// Users rarely include this directly: DataStream methods create these
// operators. It implements, for a record type T, the runtime's abstract
// contracts from <sluice/graph/operator.h>:
//   - ChainedOutput<T>   calls the next chained operator's processElement;
//   - FanOutOutput<T>    copies to several outputs;
//   - NetworkOutput<T>   picks a record's channel and hands it to a
//                        RecordWriterBase: typed into an in-process batch, or
//                        serialized for another process;
//   - RecordProcessor<T> feeds records from batches or bytes to an operator;
// and the operators: map, flatMap, filter, process, keyed reduce and
// aggregations, keyed process, the two-input co-operators and the sink
// operator. Each operator holds its own copy of the user function and is
// created once per subtask by an OperatorFactory.
//
// Hot path: an operator reuses one output record; chaining is a virtual call
// per operator; no allocation per record unless the user's types allocate.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <sluice/checkpointed_function.h>
#include <sluice/core/flat_hash_map.h>
#include <sluice/core/key_hash.h>
#include <sluice/core/owned.h>
#include <sluice/core/serializer.h>
#include <sluice/functions.h>
#include <sluice/graph/operator.h>
#include <sluice/internal/function_state.h>
#include <sluice/internal/keyed_state_handler.h>
#include <sluice/internal/timer_service.h>
#include <sluice/sink.h>

namespace sluice::internal {

// ---------------------------------------------------------------------------
// Outputs

template <class T>
class ChainedOutput final : public Output<T> {
 public:
  ChainedOutput(StreamOperatorBase& target, int inputIndex)
      : target_(target),
        input_(*static_cast<Input<T>*>(target.inputPointer(inputIndex))),
        inputIndex_(inputIndex) {}

  // The next operator reads records in place: nothing to move. (Overridden
  // so the call does not take a second virtual dispatch.)
  void collect(StreamRecord<T>&& record) override {
    collect(static_cast<const StreamRecord<T>&>(record));
  }
  void collectValue(T&& value, bool hasTimestamp, int64_t timestamp,
                    StreamRecord<T>& scratch) override {
    collect(static_cast<const StreamRecord<T>&>(
        this->fill(scratch, std::move(value), hasTimestamp, timestamp)));
  }
  void collect(const StreamRecord<T>& record) override {
    this->countRecord();
    try {
      input_.processElement(record);
    } catch (const OperatorFailure&) {
      throw;
    } catch (const TaskCancelledException&) {
      throw;
    } catch (...) {
      throw OperatorFailure(target_.operatorName(), describeCurrentException());
    }
  }
  void emitWatermark(Watermark watermark) override {
    this->noteWatermark(watermark.timestamp);
    target_.processWatermark(inputIndex_, watermark);
  }
  void emitWatermarkStatus(WatermarkStatus status) override {
    target_.processWatermarkStatus(inputIndex_, status);
  }

 private:
  StreamOperatorBase& target_;
  Input<T>& input_;
  const int inputIndex_;
};

template <class T>
class FanOutOutput final : public Output<T> {
 public:
  explicit FanOutOutput(std::vector<std::unique_ptr<OutputBase>> outputs)
      : owned_(std::move(outputs)) {
    // Every branch sees every record: its count is the fan-out's.
    for (auto& o : owned_) {
      o->deriveCount([this] { return this->recordsCounted(); });
      outputs_.push_back(static_cast<Output<T>*>(o.get()));
    }
  }
  void collect(const StreamRecord<T>& record) override {
    this->countRecord();
    for (Output<T>* o : outputs_) o->collect(record);
  }
  // Every branch but the last gets a copy; the last may move from it.
  void collect(StreamRecord<T>&& record) override {
    this->countRecord();
    if (outputs_.empty()) return;
    const size_t last = outputs_.size() - 1;
    for (size_t i = 0; i < last; ++i) outputs_[i]->collect(record);
    outputs_[last]->collect(std::move(record));
  }
  void collectValue(T&& value, bool hasTimestamp, int64_t timestamp,
                    StreamRecord<T>& scratch) override {
    FanOutOutput::collect(
        std::move(this->fill(scratch, std::move(value), hasTimestamp, timestamp)));
  }
  void emitWatermark(Watermark watermark) override {
    this->noteWatermark(watermark.timestamp);
    for (Output<T>* o : outputs_) o->emitWatermark(watermark);
  }
  void emitWatermarkStatus(WatermarkStatus status) override {
    for (Output<T>* o : outputs_) o->emitWatermarkStatus(status);
  }

 private:
  std::vector<std::unique_ptr<OutputBase>> owned_;
  std::vector<Output<T>*> outputs_;
};

template <class T>
class DiscardingOutput final : public Output<T> {
 public:
  void collect(const StreamRecord<T>&) override { this->countRecord(); }
  void collect(StreamRecord<T>&&) override { this->countRecord(); }
  void collectValue(T&&, bool, int64_t, StreamRecord<T>&) override { this->countRecord(); }
  void emitWatermark(Watermark watermark) override { this->noteWatermark(watermark.timestamp); }
  void emitWatermarkStatus(WatermarkStatus) override {}
};

// ---------------------------------------------------------------------------
// Partitioners: pick the channel of a record. -1 means every channel.

template <class T>
class ChannelSelector {
 public:
  virtual ~ChannelSelector() = default;
  virtual int selectChannel(const StreamRecord<T>& record) = 0;
};

// Forward, global: always channel 0 (forward has exactly one channel).
template <class T>
class FirstChannelSelector final : public ChannelSelector<T> {
 public:
  int selectChannel(const StreamRecord<T>&) override { return 0; }
};

// Rebalance and rescale: round robin. Flink starts at a random channel; we
// start at the subtask's index so runs are reproducible.
template <class T>
class RoundRobinSelector final : public ChannelSelector<T> {
 public:
  RoundRobinSelector(int channels, int start) : channels_(channels), next_(start % channels) {}
  int selectChannel(const StreamRecord<T>&) override {
    int c = next_;
    if (++next_ == channels_) next_ = 0;
    return c;
  }

 private:
  const int channels_;
  int next_;
};

// Shuffle: uniformly random, seeded per subtask (xorshift64*).
template <class T>
class ShuffleSelector final : public ChannelSelector<T> {
 public:
  ShuffleSelector(int channels, int subtask)
      : channels_(static_cast<uint64_t>(channels)), state_(0x9E3779B97F4A7C15ULL * (subtask + 1)) {}
  int selectChannel(const StreamRecord<T>&) override {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return static_cast<int>((state_ * 2685821657736338717ULL >> 33) % channels_);
  }

 private:
  const uint64_t channels_;
  uint64_t state_;
};

template <class T>
class BroadcastSelector final : public ChannelSelector<T> {
 public:
  int selectChannel(const StreamRecord<T>&) override { return -1; }
};

// keyBy: Flink's key groups. keyGroup = murmur(hashCode(key)) % maxParallelism,
// channel = keyGroup * parallelism / maxParallelism.
template <class T, class KeySelector>
class KeyGroupSelector final : public ChannelSelector<T> {
 public:
  KeyGroupSelector(KeySelector key, int channels, int maxParallelism)
      : key_(std::move(key)), keyGroups_(maxParallelism), channelOfGroup_(maxParallelism) {
    checkParallelism(maxParallelism, channels);
    for (int32_t g = 0; g < maxParallelism; ++g) {
      channelOfGroup_[g] = computeOperatorIndexForKeyGroup(maxParallelism, channels, g);
    }
  }
  int selectChannel(const StreamRecord<T>& record) override {
    // Validated once above; per record only the hash and a table lookup.
    return channelOfGroup_[keyGroups_.keyGroupOf(key_(record.value))];
  }

 private:
  KeySelector key_;
  const KeyGroupAssigner keyGroups_;
  std::vector<int> channelOfGroup_;
};

template <class T, class K, class KeySelector>
class CustomSelector final : public ChannelSelector<T> {
 public:
  CustomSelector(std::unique_ptr<Partitioner<K>> partitioner, KeySelector key, int channels)
      : partitioner_(std::move(partitioner)), key_(std::move(key)), channels_(channels) {}
  int selectChannel(const StreamRecord<T>& record) override {
    int c = partitioner_->partition(key_(record.value), channels_);
    if (c < 0 || c >= channels_) {
      throw SluiceException("custom partitioner returned partition " + std::to_string(c) +
                            ", outside [0, " + std::to_string(channels_) + ")");
    }
    return c;
  }

 private:
  std::unique_ptr<Partitioner<K>> partitioner_;
  KeySelector key_;
  const int channels_;
};

// The producer end of a non-chained edge: picks each record's channel, then
// copies it into the channel's typed batch when the consumer runs in this
// process (moves it, when it is given as an rvalue), or serializes it when
// it does not (see element_batch.h).
template <class T>
class NetworkOutput final : public Output<T> {
 public:
  NetworkOutput(RecordWriterBase& writer, std::unique_ptr<ChannelSelector<T>> selector)
      : writer_(writer),
        selector_(std::move(selector)),
        firstChannelOnly_(dynamic_cast<FirstChannelSelector<T>*>(selector_.get()) != nullptr) {}

  void collect(const StreamRecord<T>& record) override { send(record); }
  // A record going to one local channel is moved into its batch.
  void collect(StreamRecord<T>&& record) override { send(std::move(record)); }
  void collectValue(T&& value, bool hasTimestamp, int64_t timestamp,
                    StreamRecord<T>& scratch) override {
    if (firstChannelOnly_ && writer_.isLocal(0)) {
      this->countRecord();
      auto& batch = static_cast<TypedElementBatch<T>&>(writer_.localBatch(0));
      batch.addValue(std::move(value), hasTimestamp, timestamp);
      writer_.recordAdded(0, batch);
      return;
    }
    Output<T>::collectValue(std::move(value), hasTimestamp, timestamp, scratch);
  }
  void emitWatermark(Watermark watermark) override {
    this->noteWatermark(watermark.timestamp);
    writer_.broadcastWatermark(watermark);
  }
  void emitWatermarkStatus(WatermarkStatus status) override {
    writer_.broadcastWatermarkStatus(status);
  }

 private:
  template <class R>
  void send(R&& record) {
    this->countRecord();
    const int c = firstChannelOnly_ ? 0 : selector_->selectChannel(record);
    if (c >= 0) {
      if (writer_.isLocal(c)) {
        addLocal(c, std::forward<R>(record));
        return;
      }
      DataOutputView out = serialize(record);
      writer_.emit(c, out.data(), out.size());
      return;
    }
    if (writer_.allLocal()) {
      for (int ch = 0; ch < writer_.numberOfChannels(); ++ch) addLocal(ch, record);
      return;
    }
    // Broadcast over local and remote channels: serialized once, for the
    // remote ones.
    DataOutputView out = serialize(record);
    for (int ch = 0; ch < writer_.numberOfChannels(); ++ch) {
      if (writer_.isLocal(ch)) {
        addLocal(ch, record);
      } else {
        writer_.emit(ch, out.data(), out.size());
      }
    }
  }
  template <class R>
  void addLocal(int channel, R&& record) {
    auto& batch = static_cast<TypedElementBatch<T>&>(writer_.localBatch(channel));
    batch.add(std::forward<R>(record));
    writer_.recordAdded(channel, batch);
  }
  // Small records serialize into a fixed array; larger ones spill into the
  // overflow vector, which keeps its capacity between records.
  DataOutputView serialize(const StreamRecord<T>& record) {
    DataOutputView out(small_, sizeof small_, overflow_);
    writeRecordHeader(record, out);
    TypeSerializer<T>::serialize(record.value, out);
    return out;
  }

  RecordWriterBase& writer_;
  std::unique_ptr<ChannelSelector<T>> selector_;
  // Forward, global, or a key group edge into one subtask: channel 0,
  // without asking the selector.
  const bool firstChannelOnly_;
  uint8_t small_[512];
  std::vector<uint8_t> overflow_;
};

template <class T>
class RecordProcessor final : public RecordProcessorBase {
 public:
  RecordProcessor(StreamOperatorBase& target, int inputIndex)
      : input_(*static_cast<Input<T>*>(target.inputPointer(inputIndex))) {}
  void processRecord(DataInputView& in, bool hasTimestamp, int64_t timestamp) override {
    TypeSerializer<T>::deserialize(record_.value, in);
    if (in.remaining() != 0) {
      throw SerializationError("record of type " + TypeSerializer<T>::schema() + " has " +
                               std::to_string(in.remaining()) + " unread trailing bytes");
    }
    record_.hasTimestamp = hasTimestamp;
    record_.timestamp = timestamp;
    input_.processElement(record_);
  }
  void processBatch(const ElementBatch& batch, size_t from, size_t to) override {
    const StreamRecord<T>* records = static_cast<const TypedElementBatch<T>&>(batch).records();
    input_.processElements(records + from, to - from);
  }

 private:
  Input<T>& input_;
  StreamRecord<T> record_;
};

template <class T>
class TypedOps final : public TypeOps {
  static_assert(Serializable<T>,
                "this record type has no sluice::TypeSerializer: declare a struct with "
                "SLUICE_STRUCT(Type, field1, field2, ...), use a supported type (numbers, "
                "std::string, pair, tuple, vector, optional, map, ...), or specialize "
                "sluice::TypeSerializer<T>");

 public:
  static std::shared_ptr<const TypeOps> instance() {
    static const std::shared_ptr<const TypeOps> ops = makeOwned<TypedOps<T>>();
    return ops;
  }
  std::string schema() const override { return TypeSerializer<T>::schema(); }
  std::unique_ptr<OutputBase> createChainedOutput(StreamOperatorBase& target,
                                                  int inputIndex) const override {
    return makeOwned<ChainedOutput<T>>(target, inputIndex);
  }
  std::unique_ptr<RecordProcessorBase> createRecordProcessor(StreamOperatorBase& target,
                                                             int inputIndex) const override {
    return makeOwned<RecordProcessor<T>>(target, inputIndex);
  }
  std::unique_ptr<ElementBatch> createBatch(size_t bytes) const override {
    return makeOwned<TypedElementBatch<T>>(bytes);
  }
  std::unique_ptr<OutputBase> createFanOut(
      std::vector<std::unique_ptr<OutputBase>> outputs) const override {
    if (outputs.empty()) return makeOwned<DiscardingOutput<T>>();
    if (outputs.size() == 1) return std::move(outputs.front());
    return makeOwned<FanOutOutput<T>>(std::move(outputs));
  }
};

// The network side of an edge whose partitioning needs no key.
template <class T>
class PlainNetworkFactory final : public NetworkOutputFactory {
 public:
  std::unique_ptr<OutputBase> createNetworkOutput(RecordWriterBase& writer, PartitionKind kind,
                                                  int subtask, int) const override {
    const int channels = writer.numberOfChannels();
    std::unique_ptr<ChannelSelector<T>> s;
    switch (kind) {
      case PartitionKind::kRebalance:
      case PartitionKind::kRescale: s = makeOwned<RoundRobinSelector<T>>(channels, subtask); break;
      case PartitionKind::kShuffle: s = makeOwned<ShuffleSelector<T>>(channels, subtask); break;
      case PartitionKind::kBroadcast: s = makeOwned<BroadcastSelector<T>>(); break;
      case PartitionKind::kForward:
      case PartitionKind::kGlobal: s = makeOwned<FirstChannelSelector<T>>(); break;
      default:
        throw SluiceException(std::string("partitioning ") + partitionKindName(kind) +
                              " needs a key selector");
    }
    return makeOwned<NetworkOutput<T>>(writer, std::move(s));
  }
};

template <class T, class KeySelector>
class KeyedNetworkFactory final : public NetworkOutputFactory {
 public:
  explicit KeyedNetworkFactory(KeySelector key) : key_(std::move(key)) {}
  std::unique_ptr<OutputBase> createNetworkOutput(RecordWriterBase& writer, PartitionKind, int,
                                                  int maxParallelism) const override {
    // One consumer owns every key group: no key to hash per record.
    if (writer.numberOfChannels() == 1) {
      checkParallelism(maxParallelism, 1);
      return makeOwned<NetworkOutput<T>>(writer, makeOwned<FirstChannelSelector<T>>());
    }
    return makeOwned<NetworkOutput<T>>(
        writer, makeOwned<KeyGroupSelector<T, KeySelector>>(key_, writer.numberOfChannels(),
                                                            maxParallelism));
  }

 private:
  KeySelector key_;
};

// Every sending subtask gets its own copy of the partitioner, as in Flink, so a
// partitioner may keep state without locks.
template <class T, class K, class P, class KeySelector>
class CustomNetworkFactory final : public NetworkOutputFactory {
 public:
  CustomNetworkFactory(P partitioner, KeySelector key)
      : partitioner_(std::move(partitioner)), key_(std::move(key)) {}
  std::unique_ptr<OutputBase> createNetworkOutput(RecordWriterBase& writer, PartitionKind, int,
                                                  int) const override {
    return makeOwned<NetworkOutput<T>>(
        writer, makeOwned<CustomSelector<T, K, KeySelector>>(std::make_unique<P>(partitioner_),
                                                             key_, writer.numberOfChannels()));
  }

 private:
  P partitioner_;
  KeySelector key_;
};

// ---------------------------------------------------------------------------
// Operator bases

// What the runtime calls on a user function, found once: its RichFunction,
// CheckpointedFunction and CheckpointListener sides (null when it has none).
// The operators keep these instead of templating their lifecycle on the
// function type, so one user function adds little more than its
// processElement to a job's code.
struct FunctionHooks {
  RichFunction* rich = nullptr;
  CheckpointedFunction* checkpointed = nullptr;
  CheckpointListener* listener = nullptr;
};

template <class F>
FunctionHooks hooksOf(F& f) {
  FunctionHooks h;
  if constexpr (std::is_base_of_v<RichFunction, F>) h.rich = &f;
  if constexpr (std::is_base_of_v<CheckpointedFunction, F>) h.checkpointed = &f;
  if constexpr (std::is_base_of_v<CheckpointListener, F>) h.listener = &f;
  (void)f;
  return h;
}

// open() and close() of a RichFunction (src/api/operators.cc).
void openHooks(const FunctionHooks& hooks, StreamingRuntimeContext& context);
void closeHooks(const FunctionHooks& hooks);

template <class F>
void openFunction(F& f, StreamingRuntimeContext& context) {
  openHooks(hooksOf(f), context);
}
template <class F>
void closeFunction(F& f) {
  closeHooks(hooksOf(f));
}

template <class IN, class OUT>
class OneInputOperator : public StreamOperatorBase, public Input<IN> {
 public:
  void setup(OperatorContext& context, OutputBase& output) override {
    StreamOperatorBase::setup(context, output);
    out_ = &static_cast<Output<OUT>&>(output);
    runtime_.setBase(&context.runtimeContext());
  }
  int numberOfInputs() const override { return 1; }
  void* inputPointer(int) override { return static_cast<Input<IN>*>(this); }

 protected:
  Output<OUT>& output() { return *out_; }
  // The context user functions get: the runtime's, plus keyed state.
  StreamingRuntimeContext& streamingContext() { return runtime_; }
  // Emits `value` with the timestamp of `from`.
  template <class V>
  void emit(V&& value, const StreamRecord<IN>& from) {
    record_.value = std::forward<V>(value);
    record_.timestamp = from.timestamp;
    record_.hasTimestamp = from.hasTimestamp;
    out_->collect(std::move(record_));
  }

  StreamRecord<OUT> record_;

 private:
  Output<OUT>* out_ = nullptr;
  StreamingRuntimeContext runtime_;
};

// Two inputs; the operator's watermark is the minimum of both inputs'.
template <class IN1, class IN2, class OUT>
class TwoInputOperator : public StreamOperatorBase {
 public:
  void setup(OperatorContext& context, OutputBase& output) override {
    StreamOperatorBase::setup(context, output);
    out_ = &static_cast<Output<OUT>&>(output);
    runtime_.setBase(&context.runtimeContext());
  }
  int numberOfInputs() const override { return 2; }
  void* inputPointer(int index) override {
    return index == 0 ? static_cast<void*>(&first_) : static_cast<void*>(&second_);
  }
  // The operator's watermark is the minimum over its active inputs; an idle
  // input does not hold it back, and the operator is idle only when both are.
  void processWatermark(int input, Watermark watermark) override {
    watermarks_[input] = watermark.timestamp;
    advance();
  }
  void processWatermarkStatus(int input, WatermarkStatus status) override {
    idle_[input] = status == WatermarkStatus::kIdle;
    bool nowIdle = idle_[0] && idle_[1];
    if (nowIdle != outputIdle_) {
      outputIdle_ = nowIdle;
      out_->emitWatermarkStatus(status);
    }
    if (!nowIdle) advance();
  }
  void endInput(int input) override {
    // An ended input no longer holds the watermark back.
    watermarks_[input] = kMaxTimestamp;
    idle_[input] = false;
    advance();
  }

  virtual void processElement1(const StreamRecord<IN1>& record) = 0;
  virtual void processElement2(const StreamRecord<IN2>& record) = 0;

 protected:
  Output<OUT>& output() { return *out_; }
  StreamingRuntimeContext& streamingContext() { return runtime_; }
  StreamRecord<OUT> record_;

 private:
  StreamingRuntimeContext runtime_;
  template <class IN, int kIndex>
  struct Side final : Input<IN> {
    explicit Side(TwoInputOperator& op) : op(op) {}
    void processElement(const StreamRecord<IN>& r) override {
      if constexpr (kIndex == 0) {
        op.processElement1(r);
      } else {
        op.processElement2(r);
      }
    }
    TwoInputOperator& op;
  };
  Output<OUT>* out_ = nullptr;
  Side<IN1, 0> first_{*this};
  Side<IN2, 1> second_{*this};
  void advance() {
    int64_t min = kMaxTimestamp;
    bool any = false;
    for (int i = 0; i < 2; ++i) {
      if (idle_[i]) continue;
      any = true;
      min = std::min(min, watermarks_[i]);
    }
    if (any && min > current_) {
      current_ = min;
      out_->emitWatermark(Watermark{min});
    }
  }

  int64_t watermarks_[2] = {kMinTimestamp, kMinTimestamp};
  bool idle_[2] = {false, false};
  bool outputIdle_ = false;
  int64_t current_ = kMinTimestamp;
};

// A Collector that stamps outputs with the current input's timestamp. Its
// record is scratch, refilled for every output, so the output may move
// from it.
template <class OUT>
class TimestampedCollector final : public Collector<OUT> {
 public:
  void setOutput(Output<OUT>* out) { out_ = out; }
  void setTimestampFrom(bool hasTimestamp, int64_t timestamp) {
    record_.hasTimestamp = hasTimestamp;
    record_.timestamp = timestamp;
  }
  void collect(const OUT& value) override {
    record_.value = value;
    out_->collect(std::move(record_));
  }
  void collect(OUT&& value) override {
    out_->collectValue(std::move(value), record_.hasTimestamp, record_.timestamp, record_);
  }

 private:
  Output<OUT>* out_ = nullptr;
  StreamRecord<OUT> record_;
};

// ---------------------------------------------------------------------------
// Operators

// The lifecycle of an operator that runs one user function: opens and closes
// it, and gives it operator state when it is a CheckpointedFunction (state
// restored from an earlier version of the job is carried on even when it is
// not). Templated on the operator's base (its record types) only; the
// function is reached through `hooks_`, set by UdfOperator. Operators with
// more to do in open() call FunctionOperator::open() last.
template <class Base>
class FunctionOperator : public Base {
 public:
  FunctionOperator() = default;
  FunctionOperator(const FunctionOperator&) = delete;
  FunctionOperator& operator=(const FunctionOperator&) = delete;
  void initializeState(const OperatorStateRestore* restore) override {
    functionState_.initializeBackend(this->context(), restore);
    functionState_.initializeCheckpointed(hooks_.checkpointed);
  }
  OperatorStateSnapshot snapshotState(int64_t checkpointId) override {
    OperatorStateSnapshot s;
    s.operatorState = functionState_.snapshotCheckpointed(hooks_.checkpointed, checkpointId);
    return s;
  }
  void notifyCheckpointComplete(int64_t checkpointId) override {
    if (hooks_.listener != nullptr) hooks_.listener->notifyCheckpointComplete(checkpointId);
  }
  void open() override { openHooks(hooks_, this->streamingContext()); }
  void close() override { closeHooks(hooks_); }

 protected:
  FunctionHooks hooks_;
  FunctionStateHandler functionState_;
};

// A FunctionOperator that owns its user function `f_`.
template <class Base, class F>
class UdfOperator : public FunctionOperator<Base> {
 public:
  explicit UdfOperator(F f) : f_(std::move(f)) { this->hooks_ = hooksOf(f_); }

 protected:
  F f_;
};

// A FunctionOperator on a keyed stream: also owns the keyed state backend
// and makes each element's key current before the function sees it.
template <class Base, class K>
class KeyedFunctionOperator : public FunctionOperator<Base> {
 public:
  void initializeState(const OperatorStateRestore* restore) override {
    keyed_.initialize(this->context(), restore);
    this->streamingContext().setKeyedStateBackend(&keyed_.backend());
    this->functionState_.initializeBackend(this->context(), restore);
    this->functionState_.initializeCheckpointed(this->hooks_.checkpointed, &keyed_.backend());
  }
  OperatorStateSnapshot snapshotState(int64_t checkpointId) override {
    OperatorStateSnapshot s;
    s.keyedState = keyed_.snapshot(checkpointId);
    s.operatorState =
        this->functionState_.snapshotCheckpointed(this->hooks_.checkpointed, checkpointId);
    return s;
  }
  void close() override {
    FunctionOperator<Base>::close();
    keyed_.dispose();
  }

 protected:
  KeyedStateHandler<K> keyed_;
};

template <class Base, class F, class K>
class KeyedUdfOperator : public KeyedFunctionOperator<Base, K> {
 public:
  explicit KeyedUdfOperator(F f) : f_(std::move(f)) { this->hooks_ = hooksOf(f_); }

 protected:
  F f_;
};

template <class IN, class OUT, class F>
class MapOperator final : public UdfOperator<OneInputOperator<IN, OUT>, F> {
 public:
  using UdfOperator<OneInputOperator<IN, OUT>, F>::UdfOperator;
  bool emitsOnePerInput() const override { return true; }
  void processElement(const StreamRecord<IN>& r) override {
    if constexpr (std::is_invocable_v<F&, const IN&>) {
      this->emit(this->f_(r.value), r);
    } else {
      this->emit(this->f_.map(r.value), r);
    }
  }
};

template <class IN, class OUT, class F>
class FlatMapOperator final : public UdfOperator<OneInputOperator<IN, OUT>, F> {
 public:
  using UdfOperator<OneInputOperator<IN, OUT>, F>::UdfOperator;
  void open() override {
    collector_.setOutput(&this->output());
    UdfOperator<OneInputOperator<IN, OUT>, F>::open();
  }
  void processElement(const StreamRecord<IN>& r) override {
    collector_.setTimestampFrom(r.hasTimestamp, r.timestamp);
    if constexpr (std::is_invocable_v<F&, const IN&, Collector<OUT>&>) {
      this->f_(r.value, collector_);
    } else {
      this->f_.flatMap(r.value, collector_);
    }
  }

 private:
  TimestampedCollector<OUT> collector_;
};

template <class T, class F>
class FilterOperator final : public UdfOperator<OneInputOperator<T, T>, F> {
 public:
  using UdfOperator<OneInputOperator<T, T>, F>::UdfOperator;
  void processElement(const StreamRecord<T>& r) override {
    bool keep;
    if constexpr (std::is_invocable_v<F&, const T&>) {
      keep = this->f_(r.value);
    } else {
      keep = this->f_.filter(r.value);
    }
    if (keep) this->output().collect(r);
  }
};

// The context handed to ProcessFunction-style user functions. `Base` is the
// function's Context class.
template <class Base>
class ProcessContextImpl : public Base {
 public:
  void setContext(OperatorContext* context) {
    side_.setContext(context);
    this->sideOutputs_ = &side_;
  }
  void setCurrent(bool hasTimestamp, int64_t timestamp) {
    hasTimestamp_ = hasTimestamp;
    timestamp_ = timestamp;
  }
  std::optional<int64_t> timestamp() const override {
    return hasTimestamp_ ? std::optional<int64_t>(timestamp_) : std::nullopt;
  }

 private:
  SideOutputs side_;
  bool hasTimestamp_ = false;
  int64_t timestamp_ = kMinTimestamp;
};

// The TimerService of non-keyed process functions: reads time, refuses
// timers (they need a key), as in Flink.
class NonKeyedTimerService final : public TimerService {
 public:
  void setContext(OperatorContext* context) { context_ = context; }
  void setWatermark(int64_t watermark) { watermark_ = watermark; }
  int64_t currentProcessingTime() const override { return context_->clock().currentTimeMillis(); }
  int64_t currentWatermark() const override { return watermark_; }
  void registerProcessingTimeTimer(int64_t) override { refuse(); }
  void registerEventTimeTimer(int64_t) override { refuse(); }
  void deleteProcessingTimeTimer(int64_t) override { refuse(); }
  void deleteEventTimeTimer(int64_t) override { refuse(); }

 private:
  [[noreturn]] void refuse() const {
    throw SluiceException("Setting timers is only supported on a keyed streams (operator '" +
                          context_->runtimeContext().getOperatorName() +
                          "'); use keyBy(...).process(...)");
  }
  OperatorContext* context_ = nullptr;
  int64_t watermark_ = kMinTimestamp;
};

template <class IN, class OUT, class F>
class ProcessOperator final : public UdfOperator<OneInputOperator<IN, OUT>, F> {
 public:
  using UdfOperator<OneInputOperator<IN, OUT>, F>::UdfOperator;
  void open() override {
    ctx_.setContext(&this->context());
    ctx_.timers.setContext(&this->context());
    collector_.setOutput(&this->output());
    UdfOperator<OneInputOperator<IN, OUT>, F>::open();
  }
  void processElement(const StreamRecord<IN>& r) override {
    ctx_.setCurrent(r.hasTimestamp, r.timestamp);
    collector_.setTimestampFrom(r.hasTimestamp, r.timestamp);
    this->f_.processElement(r.value, ctx_, collector_);
  }
  void processWatermark(int input, Watermark watermark) override {
    ctx_.timers.setWatermark(watermark.timestamp);
    UdfOperator<OneInputOperator<IN, OUT>, F>::processWatermark(input, watermark);
  }

 private:
  struct Ctx final : ProcessContextImpl<typename ProcessFunction<IN, OUT>::Context> {
    TimerService& timerService() override { return timers; }
    NonKeyedTimerService timers;
  };
  Ctx ctx_;
  TimestampedCollector<OUT> collector_;
};

// The context of keyed process functions (one or two inputs): the current
// key, its timers in the operator's timer service, and in onTimer the
// timer's domain. `OnTimerContext` is the function's context type.
template <class OnTimerContext, class K>
struct KeyedProcessContext final : ProcessContextImpl<OnTimerContext>, TimerService {
  const K& getCurrentKey() const override { return key; }
  TimerService& timerService() override { return *this; }
  TimeDomain timeDomain() const override {
    if (!domain) throw SluiceException("timeDomain() is only available in onTimer()");
    return *domain;
  }
  int64_t currentProcessingTime() const override { return timers->currentProcessingTime(); }
  int64_t currentWatermark() const override { return timers->currentWatermark(); }
  void registerProcessingTimeTimer(int64_t time) override {
    timers->registerProcessingTimeTimer(key, VoidNamespace{}, time);
  }
  void registerEventTimeTimer(int64_t time) override {
    timers->registerEventTimeTimer(key, VoidNamespace{}, time);
  }
  void deleteProcessingTimeTimer(int64_t time) override {
    timers->deleteProcessingTimeTimer(key, VoidNamespace{}, time);
  }
  void deleteEventTimeTimer(int64_t time) override {
    timers->deleteEventTimeTimer(key, VoidNamespace{}, time);
  }
  K key{};
  std::optional<TimeDomain> domain;
  InternalTimerService<K, VoidNamespace>* timers = nullptr;
};

// The output a two-input operator with timers hands its base: records pass
// through; a watermark (the minimum of both inputs', which the base
// decides) first fires the timers it passes, then goes downstream.
template <class OUT, class Timers>
struct TimerFiringOutput final : Output<OUT> {
  Output<OUT>* downstream = nullptr;
  Timers* timers = nullptr;
  void collect(const StreamRecord<OUT>& record) override { downstream->collect(record); }
  void collect(StreamRecord<OUT>&& record) override { downstream->collect(std::move(record)); }
  void emitWatermark(Watermark watermark) override {
    timers->advanceWatermark(watermark.timestamp);
    downstream->emitWatermark(watermark);
  }
  void emitWatermarkStatus(WatermarkStatus status) override {
    downstream->emitWatermarkStatus(status);
  }
};

// Runs a KeyedProcessFunction: keyed state, and timers per key (Flink's
// KeyedProcessOperator). Event-time timers fire before the watermark that
// passed them goes downstream; their outputs carry the timer's timestamp,
// those of processing-time timers none.
template <class K, class IN, class OUT, class F, class KeySelector>
class KeyedProcessOperator final : public KeyedUdfOperator<OneInputOperator<IN, OUT>, F, K> {
  using Base = KeyedUdfOperator<OneInputOperator<IN, OUT>, F, K>;

 public:
  KeyedProcessOperator(F f, KeySelector key) : Base(std::move(f)), key_(std::move(key)) {}
  void initializeState(const OperatorStateRestore* restore) override {
    Base::initializeState(restore);
    timers_.initForOperator(
        this->context(), [this](const Timer& t) { onTimer(t, TimeDomain::EVENT_TIME); },
        [this](const Timer& t) { onTimer(t, TimeDomain::PROCESSING_TIME); }, restore);
  }
  OperatorStateSnapshot snapshotState(int64_t checkpointId) override {
    OperatorStateSnapshot s = Base::snapshotState(checkpointId);
    s.writeTimers = timers_.snapshotLater();
    return s;
  }
  void open() override {
    ctx_.setContext(&this->context());
    ctx_.timers = &timers_;
    collector_.setOutput(&this->output());
    Base::open();
  }
  void processElement(const StreamRecord<IN>& r) override {
    ctx_.key = key_(r.value);
    ctx_.domain = std::nullopt;
    this->keyed_.setCurrentKey(ctx_.key);
    ctx_.setCurrent(r.hasTimestamp, r.timestamp);
    collector_.setTimestampFrom(r.hasTimestamp, r.timestamp);
    this->f_.processElement(r.value, ctx_, collector_);
  }
  void processWatermark(int input, Watermark watermark) override {
    timers_.advanceWatermark(watermark.timestamp);
    Base::processWatermark(input, watermark);
  }
  // The timers, for snapshots and tests.
  internal::InternalTimerService<K, VoidNamespace>& timerService() { return timers_; }

 private:
  using Timer = TimerData<K, VoidNamespace>;
  void onTimer(const Timer& t, TimeDomain domain) {
    ctx_.key = t.key;
    ctx_.domain = domain;
    this->keyed_.setCurrentKey(t.key);
    const bool event = domain == TimeDomain::EVENT_TIME;
    ctx_.setCurrent(event, event ? t.timestamp : kMinTimestamp);
    collector_.setTimestampFrom(event, event ? t.timestamp : kMinTimestamp);
    this->f_.onTimer(t.timestamp, ctx_, collector_);
  }

  using Ctx = KeyedProcessContext<typename KeyedProcessFunction<K, IN, OUT>::OnTimerContext, K>;
  KeySelector key_;
  Ctx ctx_;
  TimestampedCollector<OUT> collector_;
  internal::InternalTimerService<K, VoidNamespace> timers_;
};

// The operator of keyed connected streams: a KeyedCoProcessFunction (keyed
// state and timers), or a CoMapFunction / CoFlatMapFunction, which may use
// keyed state too (Flink's keyed CoStreamMap / CoStreamFlatMap). Each input
// has its key selector; both give the key type K. Timers fire when the
// operator's watermark (the minimum of both inputs') passes them, before the
// watermark goes downstream, as in Flink.
template <class K, class IN1, class IN2, class OUT, class F, class KS1, class KS2>
class KeyedCoProcessOperator final
    : public KeyedUdfOperator<TwoInputOperator<IN1, IN2, OUT>, F, K> {
  using Base = KeyedUdfOperator<TwoInputOperator<IN1, IN2, OUT>, F, K>;
  using Function = KeyedCoProcessFunction<K, IN1, IN2, OUT>;
  static constexpr bool kProcess = std::derived_from<F, Function>;
  static constexpr bool kFlatMap = std::derived_from<F, CoFlatMapFunction<IN1, IN2, OUT>>;

 public:
  KeyedCoProcessOperator(F f, KS1 key1, KS2 key2)
      : Base(std::move(f)), key1_(std::move(key1)), key2_(std::move(key2)) {}

  void setup(OperatorContext& context, OutputBase& output) override {
    // The base decides the operator's watermark; it reaches the timers
    // through this output first.
    downstream_ = &static_cast<Output<OUT>&>(output);
    hook_.downstream = downstream_;
    hook_.timers = &timers_;
    Base::setup(context, hook_);
  }
  void initializeState(const OperatorStateRestore* restore) override {
    Base::initializeState(restore);
    timers_.initForOperator(
        this->context(), [this](const Timer& t) { onTimer(t, TimeDomain::EVENT_TIME); },
        [this](const Timer& t) { onTimer(t, TimeDomain::PROCESSING_TIME); }, restore);
  }
  OperatorStateSnapshot snapshotState(int64_t checkpointId) override {
    OperatorStateSnapshot s = Base::snapshotState(checkpointId);
    s.writeTimers = timers_.snapshotLater();
    return s;
  }
  void open() override {
    ctx_.setContext(&this->context());
    ctx_.timers = &timers_;
    collector_.setOutput(downstream_);
    Base::open();
  }
  void processElement1(const StreamRecord<IN1>& r) override {
    enter(key1_(r.value), r.hasTimestamp, r.timestamp);
    if constexpr (kProcess) {
      this->f_.processElement1(r.value, ctx_, collector_);
    } else if constexpr (kFlatMap) {
      this->f_.flatMap1(r.value, collector_);
    } else {
      collector_.collect(this->f_.map1(r.value));
    }
  }
  void processElement2(const StreamRecord<IN2>& r) override {
    enter(key2_(r.value), r.hasTimestamp, r.timestamp);
    if constexpr (kProcess) {
      this->f_.processElement2(r.value, ctx_, collector_);
    } else if constexpr (kFlatMap) {
      this->f_.flatMap2(r.value, collector_);
    } else {
      collector_.collect(this->f_.map2(r.value));
    }
  }
  // The timers, for snapshots and tests.
  InternalTimerService<K, VoidNamespace>& timerService() { return timers_; }

 private:
  using Timer = TimerData<K, VoidNamespace>;

  void enter(K key, bool hasTimestamp, int64_t timestamp) {
    ctx_.key = std::move(key);
    ctx_.domain = std::nullopt;
    this->keyed_.setCurrentKey(ctx_.key);
    ctx_.setCurrent(hasTimestamp, timestamp);
    collector_.setTimestampFrom(hasTimestamp, timestamp);
  }
  void onTimer(const Timer& t, TimeDomain domain) {
    if constexpr (kProcess) {
      ctx_.key = t.key;
      ctx_.domain = domain;
      this->keyed_.setCurrentKey(t.key);
      const bool event = domain == TimeDomain::EVENT_TIME;
      ctx_.setCurrent(event, event ? t.timestamp : kMinTimestamp);
      collector_.setTimestampFrom(event, event ? t.timestamp : kMinTimestamp);
      this->f_.onTimer(t.timestamp, ctx_, collector_);
    } else {
      (void)t;
      (void)domain;
    }
  }

  using Ctx = KeyedProcessContext<typename Function::OnTimerContext, K>;

  KS1 key1_;
  KS2 key2_;
  Output<OUT>* downstream_ = nullptr;
  TimerFiringOutput<OUT, InternalTimerService<K, VoidNamespace>> hook_;
  Ctx ctx_;
  TimestampedCollector<OUT> collector_;
  InternalTimerService<K, VoidNamespace> timers_;
};

// A reduce function that can update the running value in place:
// apply(acc, next) returns true when `next` should replace `acc` instead.
template <class F, class T>
concept InPlaceReducer = requires(const F& f, T& acc, const T& in) {
  { f.apply(acc, in) } -> std::same_as<bool>;
};

// Keyed running reduce: emits the updated result for every element, like
// Flink's StreamGroupedReduceOperator. `F` is T(const T& acc, const T& next)
// or a ReduceFunction<T>. The running value of each key is keyed state (a
// ValueState named "_op_state", as in Flink), so it is part of the
// operator's snapshots in the configured backend's format.
//
// On the `hashmap` backend the running values live in a table keyed by the
// typed key instead, so an element costs one hash probe, with no key
// serialization and no backend call: a snapshot takes a copy of the table
// as the entries of "_op_state" (serialized when the snapshot is written,
// see SnapshotEntries), a restore reads it from there. The sync part of a
// checkpoint copies the table: proportional to the number of keys. A rich reduce
// function, which may use keyed state of its own, and keys without
// operator== keep the backend path.
template <class T, class K, class F, class KeySelector>
class KeyedReduceOperator final : public KeyedUdfOperator<OneInputOperator<T, T>, F, K> {
  using Base = KeyedUdfOperator<OneInputOperator<T, T>, F, K>;
  static constexpr bool kCanTable = TableKey<K> && !std::is_base_of_v<RichFunction, F>;

 public:
  KeyedReduceOperator(F f, KeySelector key) : Base(std::move(f)), key_(std::move(key)) {}
  bool emitsOnePerInput() const override { return true; }
  void initializeState(const OperatorStateRestore* restore) override {
    Base::initializeState(restore);
    values_ = &getOrCreateValueState<VoidNamespace>(this->keyed_.backend(),
                                                    ValueStateDescriptor<T>("_op_state"));
    if constexpr (kCanTable) {
      inTable_ = std::string_view(this->keyed_.backend().name()) == "hashmap" &&
                 entries_.prepare(this->keyed_.backend(), this->keyed_.keyGroups());
      if (inTable_) takeFromBackend();
    }
  }
  OperatorStateSnapshot snapshotState(int64_t checkpointId) override {
    if constexpr (kCanTable) {
      if (inTable_) {
        // A copy of the table, serialized when the snapshot is written.
        std::vector<std::pair<K, T>> frozen;
        frozen.reserve(table_.size());
        table_.forEach([&frozen](const K& key, const StreamRecord<T>& running) {
          frozen.emplace_back(key, running.value);
        });
        entries_.template handTo<T>(this->keyed_.backend(), "_op_state", std::move(frozen),
                                    [](std::vector<std::pair<K, T>>& f, auto&& add) {
                                      for (const auto& [key, value] : f) add(key, value);
                                    });
      }
    }
    return Base::snapshotState(checkpointId);
  }
  void processElements(const StreamRecord<T>* records, size_t n) override {
    if constexpr (kCanTable && std::is_trivially_copyable_v<K>) {
      if (inTable_) {
        // The table's slot for a record a few ahead is fetched while this
        // one is reduced. Only for keys that cost nothing to extract: for a
        // string key, extracting and hashing it twice costs more than the
        // misses it hides (wordcount -9%, keyed-sum +6%).
        constexpr size_t kAhead = 8;
        for (size_t i = 0; i < n; ++i) {
          if (i + kAhead < n) table_.prefetch(key_(records[i + kAhead].value));
          processElement(records[i]);
        }
        return;
      }
    }
    for (size_t i = 0; i < n; ++i) processElement(records[i]);
  }
  void processElement(const StreamRecord<T>& r) override {
    if constexpr (kCanTable) {
      if (inTable_) {
        auto [slot, inserted] = table_.tryEmplace(key_(r.value));
        StreamRecord<T>& running = slot->value;
        if (inserted) {
          running.value = r.value;
        } else {
          reduceInto(running.value, r.value);
        }
        // The table's record goes out as it is (no copy of the value):
        // outputs do not keep the records they are given.
        running.timestamp = r.timestamp;
        running.hasTimestamp = r.hasTimestamp;
        this->output().collect(running);
        return;
      }
    }
    this->keyed_.setCurrentKey(key_(r.value));
    std::optional<T> acc = values_->value();
    if (!acc) {
      acc.emplace(r.value);
    } else {
      reduceInto(*acc, r.value);
    }
    values_->update(*acc);
    this->emit(std::move(*acc), r);
  }

 private:
  void reduceInto(T& acc, const T& next) {
    if constexpr (InPlaceReducer<F, T>) {
      if (this->f_.apply(acc, next)) acc = next;
    } else if constexpr (std::is_invocable_v<F&, const T&, const T&>) {
      acc = this->f_(acc, next);
    } else {
      acc = this->f_.reduce(acc, next);
    }
  }
  // Moves the restored running values of this subtask's keys into the table.
  void takeFromBackend() {
    std::vector<std::string> keys;
    this->keyed_.backend().forEachKey(
        "_op_state", [&](std::string_view key, int32_t) { keys.emplace_back(key); });
    for (const std::string& bytes : keys) {
      const K key = KeyedStateHandler<K>::deserializeKey(bytes);
      this->keyed_.setCurrentKey(key);
      if (std::optional<T> value = values_->value()) {
        table_.tryEmplace(key).first->value.value = std::move(*value);
      }
      values_->clear();
    }
  }

  KeySelector key_;
  InternalValueState<VoidNamespace, T>* values_ = nullptr;
  bool inTable_ = false;
  // Each key's running value, in the record it is emitted in.
  FlatHashMap<K, StreamRecord<T>, TableKeyHash<K>> table_;
  SnapshotEntries<K> entries_;  // the table's, for a snapshot
};

template <class IN1, class IN2, class OUT, class F>
class CoMapOperator final : public UdfOperator<TwoInputOperator<IN1, IN2, OUT>, F> {
 public:
  using UdfOperator<TwoInputOperator<IN1, IN2, OUT>, F>::UdfOperator;
  bool emitsOnePerInput() const override { return true; }
  void processElement1(const StreamRecord<IN1>& r) override { emit(this->f_.map1(r.value), r); }
  void processElement2(const StreamRecord<IN2>& r) override { emit(this->f_.map2(r.value), r); }

 private:
  template <class R>
  void emit(OUT&& v, const R& from) {
    this->record_.value = std::move(v);
    this->record_.hasTimestamp = from.hasTimestamp;
    this->record_.timestamp = from.timestamp;
    this->output().collect(std::move(this->record_));
  }
};

template <class IN1, class IN2, class OUT, class F>
class CoFlatMapOperator final : public UdfOperator<TwoInputOperator<IN1, IN2, OUT>, F> {
 public:
  using UdfOperator<TwoInputOperator<IN1, IN2, OUT>, F>::UdfOperator;
  void open() override {
    collector_.setOutput(&this->output());
    UdfOperator<TwoInputOperator<IN1, IN2, OUT>, F>::open();
  }
  void processElement1(const StreamRecord<IN1>& r) override {
    collector_.setTimestampFrom(r.hasTimestamp, r.timestamp);
    this->f_.flatMap1(r.value, collector_);
  }
  void processElement2(const StreamRecord<IN2>& r) override {
    collector_.setTimestampFrom(r.hasTimestamp, r.timestamp);
    this->f_.flatMap2(r.value, collector_);
  }

 private:
  TimestampedCollector<OUT> collector_;
};

template <class IN1, class IN2, class OUT, class F>
class CoProcessOperator final : public UdfOperator<TwoInputOperator<IN1, IN2, OUT>, F> {
 public:
  using UdfOperator<TwoInputOperator<IN1, IN2, OUT>, F>::UdfOperator;
  void open() override {
    ctx_.setContext(&this->context());
    collector_.setOutput(&this->output());
    UdfOperator<TwoInputOperator<IN1, IN2, OUT>, F>::open();
  }
  void processElement1(const StreamRecord<IN1>& r) override {
    ctx_.setCurrent(r.hasTimestamp, r.timestamp);
    collector_.setTimestampFrom(r.hasTimestamp, r.timestamp);
    this->f_.processElement1(r.value, ctx_, collector_);
  }
  void processElement2(const StreamRecord<IN2>& r) override {
    ctx_.setCurrent(r.hasTimestamp, r.timestamp);
    collector_.setTimestampFrom(r.hasTimestamp, r.timestamp);
    this->f_.processElement2(r.value, ctx_, collector_);
  }

 private:
  ProcessContextImpl<typename CoProcessFunction<IN1, IN2, OUT>::Context> ctx_;
  TimestampedCollector<OUT> collector_;
};

// Runs a Sink's writer. Has no output.
//
// The writer is created in initializeState() (before open()), so that a
// CheckpointedSinkWriter can recover its state before the first element.
// Before every snapshot the writer is flushed (flush(false)); a
// CheckpointedSinkWriter then snapshots into the operator state, and hears
// of completed checkpoints. Processing-time timers the writer registers do
// not fire once the operator was closed.
// The part of SinkOperator that does not depend on T (src/api/operators.cc).
class SinkOperatorCore : public StreamOperatorBase,
                         private SinkWriterContext,
                         private WriterInitContext {
 public:
  SinkOperatorCore();
  ~SinkOperatorCore() override;
  // State restored from an earlier job that the writer does not ask for is
  // carried on.
  void initializeState(const OperatorStateRestore* restore) override;
  OperatorStateSnapshot snapshotState(int64_t checkpointId) override;
  void notifyCheckpointComplete(int64_t checkpointId) override;
  void open() override;
  void processWatermark(int, Watermark watermark) override { watermark_ = watermark.timestamp; }
  void processWatermarkStatus(int, WatermarkStatus) override {}
  void finish() override;
  void close() override;
  int numberOfInputs() const override { return 1; }

 protected:
  // Creates the writer; called once, in initializeState().
  virtual SinkWriterBase& createWriter(WriterInitContext& context) = 0;
  const SinkWriterContext& writerContext() const { return *this; }
  bool currentHasTimestamp_ = false;
  int64_t currentTimestamp_ = kMinTimestamp;

 private:
  std::optional<int64_t> timestamp() const override;
  int64_t currentWatermark() const override { return watermark_; }
  int getSubtaskId() const override;
  int getNumberOfParallelSubtasks() const override;
  RuntimeContext& getRuntimeContext() override;
  const Clock& clock() const override;
  bool registerProcessingTimer(int64_t timestamp, std::function<void(int64_t)> callback) override;

  FunctionStateHandler functionState_;
  SinkWriterBase* writer_ = nullptr;
  CheckpointedSinkWriter* checkpointed_ = nullptr;  // writer_, when it takes part in checkpoints
  int64_t watermark_ = kMinTimestamp;
  // False once closed or destroyed; timers the writer registered check it.
  std::shared_ptr<bool> alive_;
};

template <class T>
class SinkOperator final : public SinkOperatorCore, public Input<T> {
 public:
  explicit SinkOperator(std::shared_ptr<const Sink<T>> sink) : sink_(std::move(sink)) {}
  void* inputPointer(int) override { return static_cast<Input<T>*>(this); }
  void processElement(const StreamRecord<T>& r) override {
    currentHasTimestamp_ = r.hasTimestamp;
    currentTimestamp_ = r.timestamp;
    writer_->write(r.value, writerContext());
  }

 private:
  SinkWriterBase& createWriter(::sluice::WriterInitContext& context) override {
    writer_ = sink_->createWriter(context);
    return *writer_;
  }

  std::shared_ptr<const Sink<T>> sink_;
  std::unique_ptr<SinkWriter<T>> writer_;
};

// ---------------------------------------------------------------------------
// Factories

// An operator factory with output type OUT (void: none).
template <class OUT>
class TypedOperatorFactory : public OperatorFactory {
 public:
  std::shared_ptr<const TypeOps> outputType() const override {
    if constexpr (std::is_void_v<OUT>) {
      return nullptr;
    } else {
      return TypedOps<OUT>::instance();
    }
  }
};

// Creates an operator per subtask by copying a prototype function object.
template <class OUT, class Make>
class LambdaOperatorFactory final : public TypedOperatorFactory<OUT> {
 public:
  explicit LambdaOperatorFactory(Make make) : make_(std::move(make)) {}
  std::unique_ptr<StreamOperatorBase> createOperator() const override { return make_(); }

 private:
  Make make_;
};

template <class OUT, class Make>
std::shared_ptr<const OperatorFactory> makeOperatorFactory(Make make) {
  return makeOwned<LambdaOperatorFactory<OUT, Make>>(std::move(make));
}

}  // namespace sluice::internal
