// Sources, in the style of Flink's FLIP-27 `Source` API.
//
// A source is split into
//   - a SplitEnumerator, one per source and job, which discovers the units of
//     work (splits: a file, a range of a sequence, a partition) and assigns
//     them to readers when they ask;
//   - a SourceReader per parallel subtask, which reads the records of the
//     splits it was given and can report, for each unfinished split, how far
//     it got (snapshotState), which is what a checkpoint stores.
// Splits travel between the two as bytes, serialized with TypeSerializer<Split>,
// so a split type must be Serializable (a SLUICE_STRUCT, a tuple, ...).
//
// Threading: a reader runs on its task thread; pollNext must not block. A
// reader that waits for external data returns kNothingAvailable and calls
// SourceReaderContext::signalAvailable() (from any thread) when data arrives.
// The enumerator's methods are called one at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sluice/core/serializer.h>
#include <sluice/core/status.h>
#include <sluice/core/stream_element.h>
#include <sluice/graph/operator.h>
#include <sluice/state/operator_state.h>
#include <sluice/watermarks.h>

namespace sluice {

enum class Boundedness { kBounded, kContinuousUnbounded };

class SourceReaderContext {
 public:
  virtual ~SourceReaderContext() = default;
  virtual int getIndexOfSubtask() const = 0;
  virtual int currentParallelism() const = 0;
  // Ask the enumerator for a split (answered by addSplits/notifyNoMoreSplits).
  virtual void sendSplitRequest() = 0;
  // Any thread: pollNext should be called again.
  virtual void signalAvailable() = 0;
  // Poll again no later than `when` (rate limits, polling).
  virtual void requestWakeupAt(std::chrono::steady_clock::time_point when) = 0;
  virtual RuntimeContext& runtimeContext() = 0;
};

template <class T>
class ReaderOutput {
 public:
  virtual ~ReaderOutput() = default;
  virtual void collect(const T& value) = 0;
  virtual void collect(const T& value, int64_t timestamp) = 0;
  // A record the reader no longer needs: the output may take it over instead
  // of copying it.
  virtual void collect(T&& value) { collect(static_cast<const T&>(value)); }
  virtual void collect(T&& value, int64_t timestamp) {
    collect(static_cast<const T&>(value), timestamp);
  }
};

template <class T, class SplitT>
class SourceReader {
 public:
  virtual ~SourceReader() = default;
  virtual void start() {}
  // Emits zero or more records; never blocks.
  virtual InputStatus pollNext(ReaderOutput<T>& output) = 0;
  virtual void addSplits(std::vector<SplitT> splits) = 0;
  // The enumerator has no more splits for this reader.
  virtual void notifyNoMoreSplits() = 0;
  // The unfinished splits with their current positions (for checkpoints).
  virtual std::vector<SplitT> snapshotState(int64_t checkpointId) = 0;
  virtual void close() {}
};

template <class SplitT>
class SplitEnumeratorContext {
 public:
  virtual ~SplitEnumeratorContext() = default;
  virtual int currentParallelism() const = 0;
  virtual void assignSplit(const SplitT& split, int subtask) = 0;
  virtual void signalNoMoreSplits(int subtask) = 0;
};

template <class SplitT>
class SplitEnumerator {
 public:
  virtual ~SplitEnumerator() = default;
  virtual void start() {}
  virtual void handleSplitRequest(int subtask) = 0;
  // Splits of a failed reader, to be assigned again.
  virtual void addSplitsBack(std::vector<SplitT> splits, int subtask) = 0;
  virtual void addReader(int subtask) = 0;
  // The splits not assigned yet, for checkpoint `checkpointId`; a job that
  // restores the checkpoint gets them back through Source::restoreEnumerator.
  // (Flink lets the checkpoint be any type; here it is the unassigned
  // splits, which is what every enumerator built on a split queue needs.)
  virtual std::vector<SplitT> snapshotState(int64_t checkpointId) {
    (void)checkpointId;
    throw SluiceException(
        "this source's SplitEnumerator does not support checkpoints: override "
        "SplitEnumerator::snapshotState and Source::restoreEnumerator");
  }
  virtual void close() {}
};

// A source of records of type T. Must be copyable or shareable: the job keeps
// one instance and calls its create* methods from several threads.
template <class T, class SplitT>
class Source {
 public:
  using OutputType = T;
  using SplitType = SplitT;
  virtual ~Source() = default;
  virtual Boundedness getBoundedness() const = 0;
  virtual std::unique_ptr<SplitEnumerator<SplitT>> createEnumerator(
      SplitEnumeratorContext<SplitT>& context) const = 0;
  virtual std::unique_ptr<SourceReader<T, SplitT>> createReader(
      SourceReaderContext& context) const = 0;
  // An enumerator that continues from a checkpoint: `unassigned` is what
  // SplitEnumerator::snapshotState returned. Splits that readers held are
  // restored into the readers, not here.
  virtual std::unique_ptr<SplitEnumerator<SplitT>> restoreEnumerator(
      SplitEnumeratorContext<SplitT>& context, std::vector<SplitT> unassigned) const {
    (void)context;
    (void)unassigned;
    throw SluiceException(
        "this source cannot be restored from a checkpoint: it does not override "
        "Source::restoreEnumerator");
  }
};

// ---------------------------------------------------------------------------
// The operator and coordinator that run a Source (used by fromSource()).

namespace internal {

// The part of SourceOperator that does not depend on the record and split
// types (src/api/operators.cc): the reader's splits as operator list state
// (split-distributed when the job restores at another parallelism, as in
// Flink's SourceOperator), the emit loop, and the reader's context.
class SourceOperatorCore : public SourceOperatorBase, private SourceReaderContext {
 public:
  // How much one emitNext() may do before the task checks its mail again:
  // at most this many records, and at most kMaxPolls calls of pollNext.
  static constexpr int kMaxRecordsPerEmit = 1024;
  static constexpr int kMaxPolls = 64;

  SourceOperatorCore();
  ~SourceOperatorCore() override;
  void initializeState(const OperatorStateRestore* restore) override;
  OperatorStateSnapshot snapshotState(int64_t checkpointId) override;
  void open() override;
  void close() override;
  InputStatus emitNext() override;
  void addSplits(const std::vector<std::vector<uint8_t>>& splits) override;
  void noMoreSplits() override;
  int64_t recordsEmitted() const override { return emittedTotal_.load(std::memory_order_relaxed); }

 protected:
  // The typed reader, created in open().
  virtual void createReader(SourceReaderContext& context) = 0;
  virtual bool hasReader() const = 0;
  virtual void startReader() = 0;
  virtual void closeReader() = 0;
  virtual InputStatus pollReader() = 0;
  virtual void addReaderSplits(const std::vector<std::vector<uint8_t>>& splits) = 0;
  virtual void notifyReaderNoMoreSplits() = 0;
  // The reader's unfinished splits, serialized.
  virtual std::vector<std::string> snapshotReaderSplits(int64_t checkpointId) = 0;

  int64_t emitted_ = 0;  // records emitted so far, by any call

 private:
  int getIndexOfSubtask() const override;
  int currentParallelism() const override;
  void sendSplitRequest() override;
  void signalAvailable() override;
  void requestWakeupAt(std::chrono::steady_clock::time_point when) override;
  RuntimeContext& runtimeContext() override;

  // emitted_ as of the end of the last emitNext(), for the metrics.
  std::atomic<int64_t> emittedTotal_{0};
  std::unique_ptr<OperatorStateBackend> state_;
  ListState<std::string>* splitsState_ = nullptr;
  std::vector<std::vector<uint8_t>> restoredSplits_;
};

// With a WatermarkStrategy (fromSource(source, strategy, name)), the source
// assigns the records' timestamps and generates watermarks itself, as
// Flink's SourceOperator does: one generator per subtask (not per split),
// and no operator between the reader and the output.
template <class T, class SplitT>
class SourceOperator final : public SourceOperatorCore, private ReaderOutput<T> {
 public:
  explicit SourceOperator(std::shared_ptr<const Source<T, SplitT>> source,
                          const WatermarkStrategy<T>* strategy = nullptr)
      : source_(std::move(source)) {
    if (strategy != nullptr) stamper_.emplace(*strategy);
  }

  void setup(OperatorContext& context, OutputBase& output) override {
    SourceOperatorCore::setup(context, output);
    output_ = &static_cast<Output<T>&>(output);
  }
  void open() override {
    if (stamper_) stamper_->open(context(), *output_);
    SourceOperatorCore::open();
  }
  void finish() override {
    if (stamper_) stamper_->finish();
  }
  void emitMaxWatermark() override {
    if (stamper_) {
      stamper_->emitMaxWatermark();
    } else {
      SourceOperatorCore::emitMaxWatermark();
    }
  }

 private:
  void createReader(::sluice::SourceReaderContext& context) override {
    reader_ = source_->createReader(context);
  }
  bool hasReader() const override { return reader_ != nullptr; }
  void startReader() override { reader_->start(); }
  void closeReader() override { reader_->close(); }
  InputStatus pollReader() override { return reader_->pollNext(*this); }
  void addReaderSplits(const std::vector<std::vector<uint8_t>>& splits) override {
    std::vector<SplitT> typed(splits.size());
    for (size_t i = 0; i < splits.size(); ++i) {
      DataInputView in(splits[i].data(), splits[i].size());
      TypeSerializer<SplitT>::deserialize(typed[i], in);
    }
    reader_->addSplits(std::move(typed));
  }
  void notifyReaderNoMoreSplits() override { reader_->notifyNoMoreSplits(); }
  std::vector<std::string> snapshotReaderSplits(int64_t checkpointId) override {
    std::vector<std::string> splits;
    std::vector<uint8_t> bytes;
    for (const SplitT& split : reader_->snapshotState(checkpointId)) {
      bytes.clear();
      DataOutputView out(bytes);
      TypeSerializer<SplitT>::serialize(split, out);
      splits.emplace_back(bytes.begin(), bytes.end());
    }
    return splits;
  }

  // ReaderOutput
  void collect(const T& value) override { emitCopy(value, false, kMinTimestamp); }
  void collect(const T& value, int64_t timestamp) override { emitCopy(value, true, timestamp); }
  // A value the reader is done with goes to the output as a value: into an
  // in-process batch it is moved once, not via record_.
  void collect(T&& value) override { emitValue(std::move(value), false, kMinTimestamp); }
  void collect(T&& value, int64_t timestamp) override {
    emitValue(std::move(value), true, timestamp);
  }

  void emitCopy(const T& value, bool hasTimestamp, int64_t timestamp) {
    ++emitted_;
    record_.value = value;
    if (!stamper_) {
      if (hasTimestamp) {
        record_.setTimestamp(timestamp);
      } else {
        record_.eraseTimestamp();
      }
      output_->collect(std::move(record_));
      return;
    }
    const int64_t ts = stamper_->timestampOf(value, hasTimestamp ? timestamp : kMinTimestamp);
    record_.setTimestamp(ts);
    output_->collect(std::move(record_));
    stamper_->onEvent(value, ts);
  }
  void emitValue(T&& value, bool hasTimestamp, int64_t timestamp) {
    if (stamper_ && !stamper_->emitsOnlyPeriodically()) {
      // A watermark the generator emits for this event follows the event,
      // so the generator sees the value after it went out: a copy.
      emitCopy(value, hasTimestamp, timestamp);
      return;
    }
    ++emitted_;
    if (!stamper_) {
      output_->collectValue(std::move(value), hasTimestamp, timestamp, record_);
      return;
    }
    // The generator cannot emit here, so it may see the event first and the
    // value move on.
    const int64_t ts = stamper_->timestampOf(value, hasTimestamp ? timestamp : kMinTimestamp);
    stamper_->onEvent(value, ts);
    output_->collectValue(std::move(value), true, ts, record_);
  }

  std::shared_ptr<const Source<T, SplitT>> source_;
  std::optional<WatermarkStamper<T>> stamper_;  // none without a strategy
  std::unique_ptr<SourceReader<T, SplitT>> reader_;
  Output<T>* output_ = nullptr;
  StreamRecord<T> record_;
};

template <class SplitT>
class SourceCoordinator final : public SourceCoordinatorBase,
                                private SplitEnumeratorContext<SplitT> {
 public:
  // `restored`: the serialized unassigned splits of a checkpoint, or null.
  template <class T>
  SourceCoordinator(const Source<T, SplitT>& source, SplitEnumeratorContextBase& context,
                    const std::string* restored)
      : context_(context) {
    if (restored == nullptr) {
      enumerator_ = source.createEnumerator(*this);
      return;
    }
    DataInputView in(reinterpret_cast<const uint8_t*>(restored->data()), restored->size());
    std::vector<SplitT> unassigned(in.readU32());
    for (SplitT& split : unassigned) TypeSerializer<SplitT>::deserialize(split, in);
    enumerator_ = source.restoreEnumerator(*this, std::move(unassigned));
  }
  void start() override { enumerator_->start(); }
  void addReader(int subtask) override { enumerator_->addReader(subtask); }
  void handleSplitRequest(int subtask) override { enumerator_->handleSplitRequest(subtask); }
  std::string snapshotState(int64_t checkpointId) override {
    std::vector<SplitT> unassigned = enumerator_->snapshotState(checkpointId);
    std::vector<uint8_t> bytes;
    DataOutputView out(bytes);
    out.writeU32(static_cast<uint32_t>(unassigned.size()));
    for (const SplitT& split : unassigned) TypeSerializer<SplitT>::serialize(split, out);
    return std::string(bytes.begin(), bytes.end());
  }
  void close() override { enumerator_->close(); }

 private:
  int currentParallelism() const override { return context_.currentParallelism(); }
  void assignSplit(const SplitT& split, int subtask) override {
    std::vector<uint8_t> bytes;
    DataOutputView out(bytes);
    TypeSerializer<SplitT>::serialize(split, out);
    context_.assignSplit(subtask, std::move(bytes));
  }
  void signalNoMoreSplits(int subtask) override { context_.signalNoMoreSplits(subtask); }

  SplitEnumeratorContextBase& context_;
  std::unique_ptr<SplitEnumerator<SplitT>> enumerator_;
};

}  // namespace internal
}  // namespace sluice
