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

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <sluice/core/serializer.h>
#include <sluice/core/stream_element.h>
#include <sluice/graph/operator.h>

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
};

// ---------------------------------------------------------------------------
// The operator and coordinator that run a Source (used by fromSource()).

namespace internal {

template <class T, class SplitT>
class SourceOperator final : public SourceOperatorBase,
                             private SourceReaderContext,
                             private ReaderOutput<T> {
 public:
  // How much one emitNext() may do before the task checks its mail again:
  // at most this many records, and at most kMaxPolls calls of pollNext.
  static constexpr int kMaxRecordsPerEmit = 1024;
  static constexpr int kMaxPolls = 64;

  explicit SourceOperator(std::shared_ptr<const Source<T, SplitT>> source)
      : source_(std::move(source)) {}

  void setup(OperatorContext& context, OutputBase& output) override {
    SourceOperatorBase::setup(context, output);
    output_ = &static_cast<Output<T>&>(output);
  }
  void open() override {
    reader_ = source_->createReader(*this);
    reader_->start();
  }
  void close() override {
    if (reader_) reader_->close();
  }

  InputStatus emitNext() override {
    emitted_ = 0;
    for (int i = 0; i < kMaxPolls && emitted_ < kMaxRecordsPerEmit; ++i) {
      InputStatus s = reader_->pollNext(*this);
      if (s == InputStatus::kMoreAvailable) continue;
      // A bounded input's end: every event-time window and timer downstream
      // must fire, as in Flink.
      if (s == InputStatus::kEndOfInput) output_->emitWatermark(Watermark::max());
      return s;
    }
    return InputStatus::kMoreAvailable;
  }

  void addSplits(const std::vector<std::vector<uint8_t>>& splits) override {
    std::vector<SplitT> typed(splits.size());
    for (size_t i = 0; i < splits.size(); ++i) {
      DataInputView in(splits[i].data(), splits[i].size());
      TypeSerializer<SplitT>::deserialize(typed[i], in);
    }
    reader_->addSplits(std::move(typed));
  }
  void noMoreSplits() override { reader_->notifyNoMoreSplits(); }

 private:
  // SourceReaderContext
  int getIndexOfSubtask() const override {
    return const_cast<SourceOperator*>(this)->context().runtimeContext().getIndexOfThisSubtask();
  }
  int currentParallelism() const override {
    return const_cast<SourceOperator*>(this)
        ->context()
        .runtimeContext()
        .getNumberOfParallelSubtasks();
  }
  void sendSplitRequest() override { context().sendSplitRequest(); }
  void signalAvailable() override { context().signalInputAvailable(); }
  void requestWakeupAt(std::chrono::steady_clock::time_point when) override {
    context().requestWakeupAt(when);
  }
  RuntimeContext& runtimeContext() override { return context().runtimeContext(); }

  // ReaderOutput
  void collect(const T& value) override {
    ++emitted_;
    record_.value = value;
    record_.eraseTimestamp();
    output_->collect(record_);
  }
  void collect(const T& value, int64_t timestamp) override {
    ++emitted_;
    record_.value = value;
    record_.setTimestamp(timestamp);
    output_->collect(record_);
  }

  std::shared_ptr<const Source<T, SplitT>> source_;
  std::unique_ptr<SourceReader<T, SplitT>> reader_;
  Output<T>* output_ = nullptr;
  StreamRecord<T> record_;
  int emitted_ = 0;
};

template <class SplitT>
class SourceCoordinator final : public SourceCoordinatorBase,
                                private SplitEnumeratorContext<SplitT> {
 public:
  template <class T>
  SourceCoordinator(const Source<T, SplitT>& source, SplitEnumeratorContextBase& context)
      : context_(context) {
    enumerator_ = source.createEnumerator(*this);
  }
  void start() override { enumerator_->start(); }
  void addReader(int subtask) override { enumerator_->addReader(subtask); }
  void handleSplitRequest(int subtask) override { enumerator_->handleSplitRequest(subtask); }
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
