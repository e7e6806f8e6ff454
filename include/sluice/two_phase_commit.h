// TwoPhaseCommitSink: exactly-once sinks over checkpoints, as Flink's
// TwoPhaseCommitSinkFunction.
//
// A sink that can write into a transaction (a set of files, a database
// transaction, a Kafka transaction) and make it visible later in one step
// gets exactly-once output from checkpoints with two phases per transaction:
//
//   pre-commit  when checkpoint n is taken, the open transaction is flushed
//               and made durable (preCommit); it is now "pending for n", and
//               a new transaction begins for the elements that follow;
//   commit      once the checkpoint coordinator says checkpoint n completed
//               on every task, every transaction pending for n or earlier is
//               committed, in checkpoint order (commit).
//
// The pending transactions and the open one are kept in operator state. After
// a failure the job restarts from the last completed checkpoint: every
// transaction pending in that checkpoint belongs to a completed checkpoint, so
// it is committed (recoverAndCommit; it may have been committed already,
// hence commit must be idempotent), and the transaction that was open when
// the checkpoint was taken is aborted (recoverAndAbort), because the elements
// written into it are replayed. Then a new transaction begins.
//
// Writing a sink: derive from TwoPhaseCommitSink<IN, TXN>, where TXN
// describes one transaction and has a sluice::TypeSerializer (e.g. a
// SLUICE_STRUCT; members left out of SLUICE_STRUCT are not checkpointed and
// may hold run-time resources such as an open connection), and implement:
//
//   class TxnFileSink final : public TwoPhaseCommitSink<std::string, Txn> {
//    protected:
//     std::unique_ptr<TwoPhaseCommitSink> clone() const override {
//       return internal::makeOwned<TxnFileSink>(*this);
//     }
//     Txn beginTransaction() override { ... }
//     void invoke(Txn& txn, const std::string& value, const SinkWriterContext&) override { ... }
//     void preCommit(Txn& txn) override { ... }      // flush, make durable
//     void commit(const Txn& txn) override { ... }   // idempotent
//     void abort(const Txn& txn) override { ... }    // idempotent
//   };
//   stream.sinkTo(TxnFileSink(...));
//
// Instances: the Sink handed to sinkTo() is a prototype shared by all
// subtasks and never runs a transaction; every subtask works on its own
// clone(), on its task thread, so the hooks may use the object's members
// freely. Order of calls on a clone:
//
//   open(initContext)
//   [recoverAndCommit(txn) for every pending transaction restored, in
//    checkpoint order; recoverAndAbort(txn) for every open one restored]
//   beginTransaction()
//   ( invoke(current, element, ctx)*
//     | at checkpoint n:   preCommit(current); beginTransaction()
//     | at completion of n: commit(txn) for every txn pending for <= n )*
//   at the end of bounded input: preCommit(current); the last transaction
//     is pending for kFinalCheckpointId, committed with every other pending
//     one when the runtime reports the job's final checkpoint complete
//   abort(current) when the writer is closed without reaching the end of
//     input (failure, cancel)
//   close()
//
// Failures: an exception from any hook fails the task, and the job restarts
// from the last completed checkpoint; a transaction stays pending until its
// commit() returned, so a commit that failed is retried by recoverAndCommit.
// An exception from abort() or close() while the writer is being closed is
// logged, not thrown (the task is already ending; the transaction is
// aborted again on restore when it was checkpointed).
//
// Semantics and limits:
//   - Exactly-once needs checkpointing: without it nothing is committed before
//     the end of input (never, for an unbounded job).
//   - The end of bounded input pre-commits the last transaction; it is
//     committed once every task of the job has finished and (with
//     checkpointing) a final checkpoint holding it has completed, as in
//     Flink's FLIP-147. A failure before that restores an earlier
//     checkpoint and aborts it; a failure after restores the final one and
//     commits it. Either way each element is committed once.
//   - There is no transaction timeout: a transaction stays pending until its
//     checkpoint completes or a restore resolves it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <sluice/core/owned.h>
#include <sluice/core/serializer.h>
#include <sluice/core/status.h>
#include <sluice/graph/operator.h>
#include <sluice/sink.h>
#include <sluice/state/operator_state.h>
#include <sluice/state/state.h>

namespace sluice {

namespace internal {
template <class IN, class TXN>
class TwoPhaseCommitWriter;

// Logs `message` as an error (library code does not print). Any thread.
void logSinkError(const std::string& message);
}  // namespace internal

template <class IN, class TXN>
class TwoPhaseCommitSink : public Sink<IN> {
  static_assert(Serializable<TXN>,
                "TwoPhaseCommitSink<IN, TXN>: TXN is checkpointed and needs a "
                "sluice::TypeSerializer (declare it with SLUICE_STRUCT)");
  static_assert(std::is_default_constructible_v<TXN> && std::is_copy_constructible_v<TXN>,
                "TwoPhaseCommitSink<IN, TXN>: TXN must be default- and copy-constructible");

 public:
  using TransactionType = TXN;

  // Names of the operator states the writer keeps (list states, split over
  // the subtasks on rescale): pairs (checkpoint id, pre-committed
  // transaction), and the transaction open when the checkpoint was taken.
  static constexpr const char* kPendingStateName = "two-phase-commit-pending";
  static constexpr const char* kCurrentStateName = "two-phase-commit-current";

  TwoPhaseCommitSink() = default;
  // A copy starts without a transaction (clone() copies the prototype).
  TwoPhaseCommitSink(const TwoPhaseCommitSink& other) : Sink<IN>(other) {}
  TwoPhaseCommitSink& operator=(const TwoPhaseCommitSink&) = delete;

  // Clones the prototype for this subtask; the writer owns the clone.
  std::unique_ptr<SinkWriter<IN>> createWriter(WriterInitContext& context) const override {
    std::unique_ptr<TwoPhaseCommitSink> instance = clone();
    if (!instance) throw SluiceException("TwoPhaseCommitSink: clone() returned null");
    return internal::makeOwned<internal::TwoPhaseCommitWriter<IN, TXN>>(std::move(instance),
                                                                        context);
  }

 protected:
  // A fresh copy of this prototype for one subtask (`make_unique<Self>(*this)`).
  virtual std::unique_ptr<TwoPhaseCommitSink> clone() const = 0;

  // First call on a clone, before any transaction: `context` (valid until
  // close()) gives the subtask, the processing-time clock and timers.
  virtual void open(WriterInitContext& context) { (void)context; }

  // Starts a transaction; elements go into it until the next checkpoint.
  virtual TXN beginTransaction() = 0;
  // Writes `value` into `transaction`.
  virtual void invoke(TXN& transaction, const IN& value, const SinkWriterContext& context) = 0;
  // Phase one: flush `transaction` and make it durable, so that commit() can
  // later succeed even after a crash. Nothing is written into it afterwards.
  virtual void preCommit(TXN& transaction) = 0;
  // Phase two: make the pre-committed `transaction` visible. Must be
  // idempotent: after a restore it may run for a transaction that was
  // committed before the failure.
  virtual void commit(const TXN& transaction) = 0;
  // Discards `transaction` (pre-committed or not). Must tolerate a
  // transaction already aborted.
  virtual void abort(const TXN& transaction) = 0;
  // On restore: commit a transaction pre-committed by an earlier run.
  // Default: commit().
  virtual void recoverAndCommit(const TXN& transaction) { commit(transaction); }
  // On restore: abort the transaction an earlier run had open at the
  // checkpoint (possibly with more written into it after). Default: abort().
  virtual void recoverAndAbort(const TXN& transaction) { abort(transaction); }
  // Last call on a clone; releases resources. Also after a failure.
  virtual void close() {}

  // The transaction elements are written into now, or nullptr before the
  // first one began and after the end of input. For work between elements
  // (e.g. in a processing-time timer).
  TXN* currentTransaction() { return current_; }

 private:
  friend class internal::TwoPhaseCommitWriter<IN, TXN>;
  TXN* current_ = nullptr;  // set by the writer
};

namespace internal {

// The writer of one subtask: runs the protocol on its TwoPhaseCommitSink
// clone. See the top of this file.
template <class IN, class TXN>
class TwoPhaseCommitWriter final : public SinkWriter<IN>, public CheckpointedSinkWriter {
  using SinkType = TwoPhaseCommitSink<IN, TXN>;
  using Pending = std::pair<int64_t, TXN>;

 public:
  TwoPhaseCommitWriter(std::unique_ptr<SinkType> sink, WriterInitContext& context)
      : sink_(std::move(sink)), context_(context) {}
  ~TwoPhaseCommitWriter() override { sink_->current_ = nullptr; }

  void initializeState(OperatorStateBackend& state, bool restored) override {
    if (started_) throw SluiceException("TwoPhaseCommitSink: initializeState() after the start");
    pendingState_ = &state.getListState(ListStateDescriptor<Pending>(SinkType::kPendingStateName));
    currentState_ = &state.getListState(ListStateDescriptor<TXN>(SinkType::kCurrentStateName));
    sink_->open(context_);
    opened_ = true;
    if (restored) {
      // Every pending transaction in a restored checkpoint belongs to a
      // checkpoint that completed (restores use completed checkpoints only).
      std::vector<Pending> pending = pendingState_->get();
      std::stable_sort(pending.begin(), pending.end(),
                       [](const Pending& a, const Pending& b) { return a.first < b.first; });
      for (const Pending& p : pending) sink_->recoverAndCommit(p.second);
      for (const TXN& open : currentState_->get()) sink_->recoverAndAbort(open);
    }
    pendingState_->clear();
    currentState_->clear();
    begin();
  }

  void write(const IN& element, const SinkWriterContext& context) override {
    if (!current_) [[unlikely]]
      startOrFail();
    sink_->invoke(*current_, element, context);
  }

  void flush(bool endOfInput) override {
    if (!endOfInput) return;  // pre-commit happens in snapshotState()
    if (!started_) startWithoutState();
    if (current_) {
      sink_->preCommit(*current_);
      pending_.emplace_back(kEndOfInput, std::move(*current_));
      setCurrent(std::nullopt);
    }
    // The last transaction is committed by notifyCheckpointComplete(
    // kFinalCheckpointId), which the runtime sends once every task of the
    // job has finished (after a final checkpoint that records it as
    // pending, so a failure in between restores and commits it instead of
    // writing it again).
    finished_ = true;
  }

  void snapshotState(int64_t checkpointId) override {
    if (pendingState_ == nullptr) {
      throw SluiceException(
          "TwoPhaseCommitSink: snapshotState() without initializeState() (the writer was "
          "created outside a sink operator)");
    }
    if (current_) {
      sink_->preCommit(*current_);
      pending_.emplace_back(checkpointId, std::move(*current_));
      setCurrent(std::nullopt);
      begin();
    }
    pendingState_->update(pending_);
    if (current_) {
      currentState_->update({*current_});
    } else {
      currentState_->clear();
    }
  }

  void notifyCheckpointComplete(int64_t checkpointId) override { commitUpTo(checkpointId); }

  void close() override {
    if (closed_) return;
    closed_ = true;
    if (current_) {
      try {
        sink_->abort(*current_);
      } catch (const std::exception& e) {
        logSinkError(std::string("TwoPhaseCommitSink: aborting the open transaction failed: ") +
                     e.what());
      }
      setCurrent(std::nullopt);
    }
    if (opened_) {
      try {
        sink_->close();
      } catch (const std::exception& e) {
        logSinkError(std::string("TwoPhaseCommitSink: close() failed: ") + e.what());
      }
    }
  }

 private:
  static constexpr int64_t kEndOfInput = kFinalCheckpointId;

  void setCurrent(std::optional<TXN> txn) {
    current_ = std::move(txn);
    sink_->current_ = current_ ? &*current_ : nullptr;
  }
  void begin() {
    started_ = true;
    setCurrent(sink_->beginTransaction());
  }
  // Writers driven without a sink operator (no state): a fresh start.
  void startWithoutState() {
    sink_->open(context_);
    opened_ = true;
    begin();
  }
  void startOrFail() {
    if (finished_) throw SluiceException("TwoPhaseCommitSink: write() after the end of input");
    if (closed_) throw SluiceException("TwoPhaseCommitSink: write() after close()");
    if (started_) {
      throw SluiceException(
          "TwoPhaseCommitSink: no open transaction (beginTransaction() failed earlier)");
    }
    startWithoutState();
  }
  // Commits every pending transaction of a checkpoint <= `checkpointId`, in
  // order; each leaves the pending list only once its commit returned.
  void commitUpTo(int64_t checkpointId) {
    size_t done = 0;
    try {
      while (done < pending_.size() && pending_[done].first <= checkpointId) {
        sink_->commit(pending_[done].second);
        ++done;
      }
    } catch (...) {
      pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(done));
      throw;
    }
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(done));
  }

  std::unique_ptr<SinkType> sink_;
  WriterInitContext& context_;
  ListState<Pending>* pendingState_ = nullptr;
  ListState<TXN>* currentState_ = nullptr;
  std::optional<TXN> current_;
  std::vector<Pending> pending_;  // in checkpoint order
  bool opened_ = false;
  bool started_ = false;
  bool finished_ = false;
  bool closed_ = false;
};

}  // namespace internal

}  // namespace sluice
