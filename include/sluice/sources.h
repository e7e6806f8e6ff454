// The built-in sources behind StreamExecutionEnvironment's fromElements,
// fromCollection, fromSequence, fromGenerator, readTextFile and
// socketTextStream. Each is a FLIP-27 Source (see <sluice/source.h>): an
// enumerator that hands out splits on request and a reader per subtask.
//
//   CollectionSource<T>   the elements of a shared vector, in order; one split
//                         for the whole vector (non-parallel, as in Flink).
//   NumberSequenceSource  the int64 numbers [from, to], inclusive, cut into
//                         one contiguous range per subtask. Bounded.
//   GeneratorSource<T,F>  generator(index) for index 0..count-1, ranges cut as
//                         above, optionally rate-limited (Flink's
//                         DataGeneratorSource). Unbounded with kUnboundedCount.
//   TextLineFileSource    the lines of a file, or of every file in a directory
//                         (one split per file). Bounded.
//   SocketTextSource      lines from a TCP socket until it closes
//                         (non-parallel, at-most-once), each at most a
//                         configured length.
//
// Common reader behaviour: a reader asks for a split when it starts with none
// and again whenever it has finished its last one; it ends (kEndOfInput) once
// the enumerator has said there are no more splits and every split it got is
// read. pollNext emits at most kMaxRecordsPerPoll records per call and then
// returns kMoreAvailable, so the task gets to check its mailbox in between.
// snapshotState returns every unfinished split with its position advanced to
// the first record not yet emitted; a fresh reader given those splits
// continues exactly there (splits that were finished are not returned).
//
// Threads: readers run on their task thread (the socket reader adds one
// fetcher thread of its own); enumerators are called one call at a time.
// Sources themselves are immutable after construction and shared by all
// subtasks.
//
// Failure: invalid arguments (from > to, a negative count or rate) throw
// SluiceException at construction, i.e. while the job is built. I/O failures
// throw SluiceException from the enumerator or reader, which fails the job
// with that message.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <sluice/core/owned.h>
#include <sluice/core/serializer.h>
#include <sluice/core/status.h>
#include <sluice/source.h>

namespace sluice {

// Records a built-in reader emits per pollNext call at most.
inline constexpr int kMaxRecordsPerPoll = 512;

// A half-open range [from, to) of indices into a CollectionSource's vector.
// `from` is the next element to emit.
struct CollectionSplit {
  int64_t from = 0;
  int64_t to = 0;
};
SLUICE_STRUCT(CollectionSplit, from, to)

// The inclusive range [from, to] of a number sequence (or of generator
// indices); `next` is the next number to emit (from <= next <= to). `from`
// and `to` identify the split and never change.
struct NumberSequenceSplit {
  int64_t from = 0;
  int64_t to = 0;
  int64_t next = 0;
};
SLUICE_STRUCT(NumberSequenceSplit, from, to, next)

// One file; `offset` is the byte offset of the first line not yet emitted.
struct FileSplit {
  std::string path;
  int64_t offset = 0;
};
SLUICE_STRUCT(FileSplit, path, offset)

// The socket source has nothing to split or to restore.
using SocketSplit = std::tuple<>;

// GeneratorSource's count for an endless stream.
inline constexpr int64_t kUnboundedCount = std::numeric_limits<int64_t>::max();

namespace internal {

// Test hook: where a rate-limited reader reads the time. Defaults to
// std::chrono::steady_clock::now.
using SourceClock = std::function<std::chrono::steady_clock::time_point()>;

// [from, to] cut into min(numSplits, size) contiguous ranges whose sizes differ
// by at most one, in ascending order. Requires from <= to and numSplits >= 1.
std::vector<NumberSequenceSplit> splitNumberRange(int64_t from, int64_t to, int numSplits);

// Hands out a fixed list of splits, one per request, in order; answers
// requests after the last one with signalNoMoreSplits. Splits given back by a
// failed reader are handed out again first. `discover` runs in start() (so a
// failure to find the input fails the job as it starts).
template <class SplitT>
class QueueSplitEnumerator final : public SplitEnumerator<SplitT> {
 public:
  QueueSplitEnumerator(SplitEnumeratorContext<SplitT>& context,
                       std::function<std::vector<SplitT>(int parallelism)> discover)
      : context_(context), discover_(std::move(discover)) {}
  // Continues from a checkpoint: hands out `unassigned` and discovers nothing.
  QueueSplitEnumerator(SplitEnumeratorContext<SplitT>& context, std::vector<SplitT> unassigned)
      : context_(context), pending_(unassigned.begin(), unassigned.end()) {}

  void start() override {
    if (!discover_) return;
    for (SplitT& s : discover_(context_.currentParallelism())) pending_.push_back(std::move(s));
  }
  std::vector<SplitT> snapshotState(int64_t) override {
    return std::vector<SplitT>(pending_.begin(), pending_.end());
  }
  void handleSplitRequest(int subtask) override {
    if (pending_.empty()) {
      context_.signalNoMoreSplits(subtask);
      return;
    }
    SplitT split = std::move(pending_.front());
    pending_.pop_front();
    context_.assignSplit(split, subtask);
  }
  void addSplitsBack(std::vector<SplitT> splits, int) override {
    for (auto it = splits.rbegin(); it != splits.rend(); ++it) pending_.push_front(std::move(*it));
  }
  void addReader(int) override {}

 private:
  SplitEnumeratorContext<SplitT>& context_;
  std::function<std::vector<SplitT>(int)> discover_;
  std::deque<SplitT> pending_;
};

// The indices 0..count-1 cut into one range per subtask of the parallelism
// the enumerator sees when it starts (GeneratorSource and the like).
inline std::unique_ptr<SplitEnumerator<NumberSequenceSplit>> indexRangeEnumerator(
    SplitEnumeratorContext<NumberSequenceSplit>& context, int64_t count) {
  return makeOwned<QueueSplitEnumerator<NumberSequenceSplit>>(context, [count](int parallelism) {
    if (count == 0) return std::vector<NumberSequenceSplit>{};
    return splitNumberRange(0, count - 1, parallelism);
  });
}

// The split bookkeeping every built-in bounded reader shares: a queue of
// assigned splits, one split request in flight at a time, end of input once
// the enumerator has no more splits and the queue is empty.
//
// A subclass implements readSplit(), which emits records of the current split
// (at most `budget`, decrementing it), advances the split's position in place
// so snapshotState() can copy it, and says whether the split is finished.
template <class T, class SplitT>
class QueuedSplitReader : public SourceReader<T, SplitT> {
 public:
  void start() override {
    if (pending_.empty() && !current_) requestSplit();
  }

  InputStatus pollNext(ReaderOutput<T>& output) override {
    int budget = kMaxRecordsPerPoll;
    for (;;) {
      if (!current_) {
        if (pending_.empty()) {
          if (noMoreSplits_) return InputStatus::kEndOfInput;
          if (!requestInFlight_) requestSplit();
          // The split (or the no-more-splits notice) comes as a mail, which
          // wakes the task.
          return InputStatus::kNothingAvailable;
        }
        current_.emplace(std::move(pending_.front()));
        pending_.pop_front();
        openSplit(*current_);
      }
      switch (readSplit(*current_, output, budget)) {
        case Step::kFinished:
          closeSplit();
          current_.reset();
          if (pending_.empty() && !noMoreSplits_) requestSplit();
          if (budget == 0) return InputStatus::kMoreAvailable;
          continue;
        case Step::kBlocked: return InputStatus::kNothingAvailable;
        case Step::kContinues: return InputStatus::kMoreAvailable;
      }
    }
  }

  void addSplits(std::vector<SplitT> splits) override {
    for (SplitT& s : splits) pending_.push_back(std::move(s));
    requestInFlight_ = false;
  }
  void notifyNoMoreSplits() override {
    noMoreSplits_ = true;
    requestInFlight_ = false;
  }
  std::vector<SplitT> snapshotState(int64_t) override {
    // Sized once, then filled. A push_back followed by a range insert from
    // the deque made GCC 12 at -O2/-O3 warn -Wstringop-overflow (a false
    // positive: it loses track of the capacity the push_back allocated) in
    // every user's release build that instantiates this reader.
    std::vector<SplitT> out;
    out.reserve(pending_.size() + (current_ ? 1 : 0));
    if (current_) out.push_back(*current_);
    for (const SplitT& s : pending_) out.push_back(s);
    return out;
  }
  void close() override {
    if (current_) closeSplit();
  }

 protected:
  enum class Step {
    kContinues,  // budget used up, the split has more
    kFinished,   // the split is done (it may have emitted its last records)
    kBlocked,    // nothing to emit now; the subclass arranged a wakeup
  };

  explicit QueuedSplitReader(SourceReaderContext& context) : context_(context) {}

  virtual void openSplit(SplitT& split) { (void)split; }
  virtual Step readSplit(SplitT& split, ReaderOutput<T>& output, int& budget) = 0;
  virtual void closeSplit() {}

  SourceReaderContext& context_;

 private:
  void requestSplit() {
    requestInFlight_ = true;
    context_.sendSplitRequest();
  }

  std::deque<SplitT> pending_;
  std::optional<SplitT> current_;
  bool requestInFlight_ = false;
  bool noMoreSplits_ = false;
};

// Emits the records of a NumberSequenceSplit, value by value; `emit(v)` emits
// the record for sequence value / generator index v. Returns true when the
// split's last value (`to`, possibly INT64_MAX) has been emitted.
template <class Emit>
bool emitSequence(NumberSequenceSplit& split, int& budget, Emit&& emit) {
  while (budget > 0) {
    const int64_t v = split.next;
    emit(v);
    --budget;
    if (v == split.to) return true;  // never computes to + 1, which may overflow
    split.next = v + 1;
  }
  return false;
}

}  // namespace internal

// ---------------------------------------------------------------------------

// The elements of a vector, in order, as one split (fromElements /
// fromCollection). Run it with parallelism 1: with more subtasks, one of them
// gets the split and the others end at once.
template <class T>
class CollectionSource final : public Source<T, CollectionSplit> {
 public:
  explicit CollectionSource(std::shared_ptr<const std::vector<T>> elements)
      : elements_(std::move(elements)) {
    if (!elements_) throw SluiceException("fromCollection: the element vector is null");
  }

  bool isNonParallel() const { return true; }
  Boundedness getBoundedness() const override { return Boundedness::kBounded; }

  std::unique_ptr<SplitEnumerator<CollectionSplit>> createEnumerator(
      SplitEnumeratorContext<CollectionSplit>& context) const override {
    const auto size = static_cast<int64_t>(elements_->size());
    return internal::makeOwned<internal::QueueSplitEnumerator<CollectionSplit>>(
        context, [size](int) {
          return std::vector<CollectionSplit>{{0, size}};
        });
  }

  std::unique_ptr<SourceReader<T, CollectionSplit>> createReader(
      SourceReaderContext& context) const override {
    return internal::makeOwned<Reader>(context, elements_);
  }
  std::unique_ptr<SplitEnumerator<CollectionSplit>> restoreEnumerator(
      SplitEnumeratorContext<CollectionSplit>& context,
      std::vector<CollectionSplit> unassigned) const override {
    return internal::makeOwned<internal::QueueSplitEnumerator<CollectionSplit>>(
        context, std::move(unassigned));
  }

 private:
  class Reader final : public internal::QueuedSplitReader<T, CollectionSplit> {
   public:
    Reader(SourceReaderContext& context, std::shared_ptr<const std::vector<T>> elements)
        : internal::QueuedSplitReader<T, CollectionSplit>(context),
          elements_(std::move(elements)) {}

   private:
    using Step = typename internal::QueuedSplitReader<T, CollectionSplit>::Step;
    Step readSplit(CollectionSplit& split, ReaderOutput<T>& output, int& budget) override {
      const int64_t end = std::min<int64_t>(split.to, static_cast<int64_t>(elements_->size()));
      while (split.from < end && budget > 0) {
        output.collect((*elements_)[static_cast<size_t>(split.from)]);
        ++split.from;
        --budget;
      }
      return split.from >= end ? Step::kFinished : Step::kContinues;
    }

    std::shared_ptr<const std::vector<T>> elements_;
  };

  std::shared_ptr<const std::vector<T>> elements_;
};

// The numbers from..to inclusive (fromSequence), cut into one range per
// subtask (the parallelism the enumerator sees when it starts). A reader that
// asks again after finishing its range may get another subtask's unclaimed
// range, as in Flink. Bounded.
class NumberSequenceSource final : public Source<int64_t, NumberSequenceSplit> {
 public:
  // Throws SluiceException when from > to.
  NumberSequenceSource(int64_t from, int64_t to);

  int64_t getFrom() const { return from_; }
  int64_t getTo() const { return to_; }
  Boundedness getBoundedness() const override { return Boundedness::kBounded; }
  std::unique_ptr<SplitEnumerator<NumberSequenceSplit>> createEnumerator(
      SplitEnumeratorContext<NumberSequenceSplit>& context) const override;
  std::unique_ptr<SourceReader<int64_t, NumberSequenceSplit>> createReader(
      SourceReaderContext& context) const override;
  std::unique_ptr<SplitEnumerator<NumberSequenceSplit>> restoreEnumerator(
      SplitEnumeratorContext<NumberSequenceSplit>& context,
      std::vector<NumberSequenceSplit> unassigned) const override {
    return internal::makeOwned<internal::QueueSplitEnumerator<NumberSequenceSplit>>(
        context, std::move(unassigned));
  }

 private:
  int64_t from_;
  int64_t to_;
};

// generator(index) for index 0..count-1 (Flink's DataGeneratorSource). The
// index ranges are cut over the subtasks like NumberSequenceSource's.
//
// `count` = kUnboundedCount makes the stream endless (kContinuousUnbounded).
// `recordsPerSecond` > 0 caps the total rate over all subtasks: each reader
// emits its share, recordsPerSecond / parallelism, on a fixed schedule (at
// most one second of missed records is made up after a stall). When a reader
// is ahead of its schedule, pollNext returns kNothingAvailable and asks for a
// wakeup when the next record is due; it never sleeps. 0 means no limit.
//
// F: callable as T(int64_t index). Every reader calls its own copy, on its
// task thread.
template <class T, class F>
class GeneratorSource final : public Source<T, NumberSequenceSplit> {
  static_assert(std::is_invocable_r_v<T, F&, int64_t>,
                "GeneratorSource<T, F>: F must be callable as T f(int64_t index)");
  static_assert(std::is_copy_constructible_v<F>,
                "GeneratorSource<T, F>: F must be copyable (each subtask gets a copy)");

 public:
  static constexpr int64_t kUnbounded = kUnboundedCount;

  // Throws SluiceException when count < 0 or recordsPerSecond < 0 (or NaN).
  GeneratorSource(F generator, int64_t count, double recordsPerSecond = 0)
      : generator_(std::move(generator)), count_(count), recordsPerSecond_(recordsPerSecond) {
    if (count < 0) {
      throw SluiceException("fromGenerator: count must be >= 0, got " + std::to_string(count));
    }
    if (!(recordsPerSecond >= 0)) {
      throw SluiceException("fromGenerator: recordsPerSecond must be >= 0 (0 = unlimited), got " +
                            std::to_string(recordsPerSecond));
    }
  }

  // Test hook: the clock rate-limited readers created from now on read.
  void setClockForTesting(internal::SourceClock clock) { clock_ = std::move(clock); }

  int64_t getCount() const { return count_; }
  double getRecordsPerSecond() const { return recordsPerSecond_; }

  Boundedness getBoundedness() const override {
    return count_ == kUnboundedCount ? Boundedness::kContinuousUnbounded : Boundedness::kBounded;
  }

  std::unique_ptr<SplitEnumerator<NumberSequenceSplit>> createEnumerator(
      SplitEnumeratorContext<NumberSequenceSplit>& context) const override {
    return internal::indexRangeEnumerator(context, count_);
  }

  std::unique_ptr<SourceReader<T, NumberSequenceSplit>> createReader(
      SourceReaderContext& context) const override {
    const int parallelism = std::max(1, context.currentParallelism());
    return internal::makeOwned<Reader>(context, generator_, recordsPerSecond_ / parallelism,
                                       clock_ ? clock_ : internal::SourceClock(&Clock::now));
  }
  std::unique_ptr<SplitEnumerator<NumberSequenceSplit>> restoreEnumerator(
      SplitEnumeratorContext<NumberSequenceSplit>& context,
      std::vector<NumberSequenceSplit> unassigned) const override {
    return internal::makeOwned<internal::QueueSplitEnumerator<NumberSequenceSplit>>(
        context, std::move(unassigned));
  }

 private:
  using Clock = std::chrono::steady_clock;

  class Reader final : public internal::QueuedSplitReader<T, NumberSequenceSplit> {
    using Base = internal::QueuedSplitReader<T, NumberSequenceSplit>;
    using Step = typename Base::Step;

   public:
    Reader(SourceReaderContext& context, F generator, double rate, internal::SourceClock clock)
        : Base(context), generator_(std::move(generator)), clock_(std::move(clock)) {
      if (rate > 0) intervalNs_ = 1e9 / rate;
    }

    void start() override {
      if (intervalNs_ > 0) epoch_ = clock_();
      Base::start();
    }

   private:
    Step readSplit(NumberSequenceSplit& split, ReaderOutput<T>& output, int& budget) override {
      auto emit = [&](int64_t index) { output.collect(generator_(index)); };
      if (intervalNs_ <= 0) {
        return internal::emitSequence(split, budget, emit) ? Step::kFinished : Step::kContinues;
      }
      // Record k of this reader is due at epoch_ + dueNs_ (dueNs_ = k * interval).
      const double nowNs = std::chrono::duration<double, std::nano>(clock_() - epoch_).count();
      if (dueNs_ > nowNs) {
        this->context_.requestWakeupAt(
            epoch_ + std::chrono::nanoseconds(static_cast<int64_t>(std::ceil(dueNs_))));
        return Step::kBlocked;
      }
      // After a stall, make up at most one second of records (like Guava's
      // bursty limiter, which Flink uses), not the whole backlog at once.
      if (nowNs - dueNs_ > 1e9) dueNs_ = nowNs - 1e9;
      const double allowed = std::floor((nowNs - dueNs_) / intervalNs_) + 1;
      int quota = allowed < budget ? static_cast<int>(allowed) : budget;
      const int before = quota;
      const bool finished = internal::emitSequence(split, quota, emit);
      budget -= before - quota;
      dueNs_ += (before - quota) * intervalNs_;
      if (finished) return Step::kFinished;
      return Step::kContinues;
    }

    F generator_;
    internal::SourceClock clock_;
    double intervalNs_ = 0;  // 0: unlimited
    Clock::time_point epoch_{};
    double dueNs_ = 0;
  };

  F generator_;
  int64_t count_;
  double recordsPerSecond_;
  internal::SourceClock clock_;
};

template <class F>
GeneratorSource(F, int64_t, double)
    -> GeneratorSource<std::decay_t<std::invoke_result_t<F&, int64_t>>, F>;
template <class F>
GeneratorSource(F, int64_t) -> GeneratorSource<std::decay_t<std::invoke_result_t<F&, int64_t>>, F>;

// The lines of a text file, or of every file in a directory (readTextFile).
//
// `path` names a file or a directory. A directory contributes each regular
// file directly in it (not recursively), sorted by name; names that start
// with '.' or '_' are skipped, as by Flink's default file filter (hidden and
// temporary files). Each file is one split.
//
// Lines end at "\n"; a "\r" right before it (or at the very end of the file)
// is dropped, so CRLF files read like LF files. A last line without a newline
// is emitted; an empty file emits nothing; empty lines are emitted as empty
// strings. Bytes are passed through unchanged (no UTF-8 check).
//
// The reader reads in large blocks (readBufferSize bytes, grown for a longer
// line) and never does a syscall per line.
//
// Only regular files are read (a symbolic link counts as what it points to).
// A FIFO, socket or device would block the reader or never end, so `path`
// being one, or a directory holding one (under a name not skipped above), is
// refused, decided by stat() before anything is opened: SluiceException
// "readTextFile: '<path>' is not a regular file or directory (it is a FIFO)"
// (or "a socket", "a character device", "a block device"), naming the entry
// (the first by name) for a directory. Subdirectories are skipped.
//
// Failure: the path is checked when the enumerator starts, i.e. as the job
// starts: a missing or unreadable path throws SluiceException
// "readTextFile: cannot open '<path>': <strerror>", and a non-regular file
// the message above; either fails the job before any record is read. A file
// that cannot be opened or read later (deleted in between, an I/O error,
// replaced by a FIFO) fails the job from the reader with the same kind of
// message naming that file.
class TextLineFileSource final : public Source<std::string, FileSplit> {
 public:
  static constexpr size_t kDefaultReadBufferSize = size_t{256} << 10;

  explicit TextLineFileSource(std::string path, size_t readBufferSize = kDefaultReadBufferSize);

  const std::string& getPath() const { return path_; }
  Boundedness getBoundedness() const override { return Boundedness::kBounded; }
  std::unique_ptr<SplitEnumerator<FileSplit>> createEnumerator(
      SplitEnumeratorContext<FileSplit>& context) const override;
  std::unique_ptr<SourceReader<std::string, FileSplit>> createReader(
      SourceReaderContext& context) const override;
  std::unique_ptr<SplitEnumerator<FileSplit>> restoreEnumerator(
      SplitEnumeratorContext<FileSplit>& context,
      std::vector<FileSplit> unassigned) const override {
    return internal::makeOwned<internal::QueueSplitEnumerator<FileSplit>>(context,
                                                                          std::move(unassigned));
  }

 private:
  std::string path_;
  size_t readBufferSize_;
};

class Configuration;

// What SocketTextSource does with a line longer than its maximum.
enum class OversizedLinePolicy {
  kFail,      // the source fails (the job fails; the restart strategy decides)
  kTruncate,  // the first maxLineLength bytes are emitted, the rest is dropped
};

// Limits of a SocketTextSource, by default those of the source.socket.* keys
// (see docs/configuration.md).
struct SocketTextSourceOptions {
  // The longest line, in bytes, without its delimiter (and without the '\r'
  // dropped before a '\n'). Must be >= 1.
  // Default: 1 mb (source.socket.max-line-length)
  size_t maxLineLength = size_t{1} << 20;
  // Default: kFail (source.socket.oversized-lines = fail)
  OversizedLinePolicy oversizedLines = OversizedLinePolicy::kFail;
  // How long one connect() to one address may take. Must be > 0.
  // Default: 10 s (source.socket.connect-timeout)
  std::chrono::milliseconds connectTimeout{10000};

  // The three source.socket.* keys of `config`, defaults where unset. Throws
  // SluiceException for a value out of range or an unknown policy, naming
  // the key, the value and where it was set:
  //   "source.socket.oversized-lines: unknown policy 'drop'; use fail or
  //    truncate (from -D)"
  static SocketTextSourceOptions fromConfiguration(const Configuration& config);
};

// Lines from a TCP socket (socketTextStream). Non-parallel: run it with
// parallelism 1.
//
// The reader starts a fetcher thread that connects to host:port (IPv4 or
// IPv6, every address getaddrinfo returns, in order), reads, cuts the bytes at
// `delimiter` (a "\r" before a '\n' delimiter is dropped) and puts the lines
// into a bounded queue (kQueueCapacity lines and kQueueCapacityBytes bytes,
// but always room for one line). When the queue is full the fetcher stops
// reading, so TCP flow control pushes back on the sender. pollNext takes
// lines from the queue without blocking.
//
// Each connect() is non-blocking and gives up after options.connectTimeout
// ("socketTextStream: cannot connect to <host>:<port>: timed out after
// 10 s" when it was the last address and no retries are left).
//
// Line length: the fetcher holds at most options.maxLineLength bytes of one
// line (plus one for a possible '\r'), whatever the peer sends, so memory is
// bounded by the reader's 64 kb receive buffer, that, and the queue. A
// longer line, under kFail, fails the source at once, without waiting for
// its delimiter and without reconnecting even if retries are left:
// "socketTextStream: a line from <host>:<port> exceeds
// source.socket.max-line-length (1 mb)". Under kTruncate its first
// maxLineLength bytes are emitted as soon as they are in, the rest is read
// and dropped up to the next delimiter, and a warning with the number of
// bytes dropped is logged for the first such line and every 1000th after.
//
// When the peer closes the connection, the source reconnects if retries are
// left (below) and otherwise ends after emitting the text after the last
// delimiter, if any (as Flink does).
//
// maxRetry: how often to reconnect, 500 ms apart, after a connection fails or
// ends: 0 never, n > 0 up to n times, < 0 forever. Retries are counted over
// the source's whole life. (Flink counts the first connection as an attempt,
// so its maxRetry n allows n - 1 reconnects; here n means n.) When the last
// allowed connection attempt fails the job fails with
// "socketTextStream: cannot connect to <host>:<port>: <strerror>"; a read
// error with no retries left fails it with "socketTextStream: error reading
// from <host>:<port>: <strerror>".
//
// Delivery is at-most-once: lines in the queue or in flight are lost on a
// failure, and snapshotState() records nothing (a socket cannot be rewound).
//
// close() stops the fetcher wherever it waits (connecting, reading, waiting
// for queue space, between retries) and joins it. Only the name lookup
// (getaddrinfo) cannot be interrupted.
class SocketTextSource final : public Source<std::string, SocketSplit> {
 public:
  static constexpr size_t kQueueCapacity = 1024;
  static constexpr size_t kQueueCapacityBytes = size_t{16} << 20;
  static constexpr std::chrono::milliseconds kRetryDelay{500};
  // Under kTruncate, a warning is logged for the first truncated line and
  // then for every this many.
  static constexpr int64_t kTruncationWarningEvery = 1000;

  // Throws SluiceException for an empty host, a port outside [0, 65535], or
  // options out of range (maxLineLength 0, connectTimeout <= 0).
  SocketTextSource(std::string host, int port, char delimiter = '\n', int64_t maxRetry = 0,
                   SocketTextSourceOptions options = {});

  bool isNonParallel() const { return true; }
  const std::string& getHost() const { return host_; }
  int getPort() const { return port_; }
  const SocketTextSourceOptions& getOptions() const { return options_; }
  Boundedness getBoundedness() const override { return Boundedness::kContinuousUnbounded; }
  std::unique_ptr<SplitEnumerator<SocketSplit>> createEnumerator(
      SplitEnumeratorContext<SocketSplit>& context) const override;
  std::unique_ptr<SourceReader<std::string, SocketSplit>> createReader(
      SourceReaderContext& context) const override;
  // A socket cannot be rewound: a restored source reconnects and reads on.
  std::unique_ptr<SplitEnumerator<SocketSplit>> restoreEnumerator(
      SplitEnumeratorContext<SocketSplit>& context,
      std::vector<SocketSplit> unassigned) const override;

 private:
  std::string host_;
  int port_;
  char delimiter_;
  int64_t maxRetry_;
  SocketTextSourceOptions options_;
};

}  // namespace sluice
