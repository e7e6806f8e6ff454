// Sinks, in the style of Flink's Sink V2 API: a Sink creates one SinkWriter
// per parallel subtask; the writer receives every element on its task thread,
// is flushed at the end of input, and closed last (also after a failure).
//
// Lifecycle of one writer, driven by the sink operator on the task thread:
//
//   createWriter(initContext)          while the operator initializes its state,
//                                      before open()
//   [initializeState(state, restored)] CheckpointedSinkWriter only, right after
//   write(element, context)*           interleaved with
//     flush(false)                     before every checkpoint snapshot, and
//     [snapshotState(checkpointId)]    CheckpointedSinkWriter only, then
//     [notifyCheckpointComplete(id)]   CheckpointedSinkWriter only, once the
//                                      checkpoint completed everywhere
//   flush(true)                        at the end of bounded input (not after a
//                                      failure or cancel)
//   close()                            always last, also after a failure
//
// A plain SinkWriter (print, writeAsText) ignores checkpoints: it gives
// at-least-once output at best. A writer that also derives from
// CheckpointedSinkWriter takes part in checkpoints; TwoPhaseCommitSink
// (<sluice/two_phase_commit.h>) builds exactly-once sinks on it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include <sluice/core/clock.h>
#include <sluice/core/runtime_context.h>

namespace sluice {

class OperatorStateBackend;

class SinkWriterContext {
 public:
  virtual ~SinkWriterContext() = default;
  // The element's timestamp, or nullopt when it has none.
  virtual std::optional<int64_t> timestamp() const = 0;
  virtual int64_t currentWatermark() const = 0;
};

// What a Sink is told when it creates the writer of one subtask. Valid until
// the writer is closed; task thread only.
class WriterInitContext {
 public:
  virtual ~WriterInitContext() = default;
  virtual int getSubtaskId() const = 0;
  virtual int getNumberOfParallelSubtasks() const = 0;
  virtual RuntimeContext& getRuntimeContext() = 0;

  // Processing time, for time-based rolling and date-time buckets: the
  // operator's clock (a ManualClock in tests that install one).
  // Default: the system clock.
  virtual const Clock& clock() const { return SystemClock::instance(); }
  // Calls `callback(timestamp)` on the task thread, between elements, once
  // clock() reads at least `timestamp`; never after the writer was closed.
  // Timers pending at the end of input do not fire. Returns false, and
  // registers nothing, when this context has no timers (the default): the
  // writer must then do its time-based work when it is called anyway.
  virtual bool registerProcessingTimer(int64_t timestamp, std::function<void(int64_t)> callback) {
    (void)timestamp;
    (void)callback;
    return false;
  }
};

// What a writer does besides writing elements (the part of SinkWriter<T>
// that does not depend on T).
class SinkWriterBase {
 public:
  virtual ~SinkWriterBase() = default;
  // `endOfInput`: the last call; everything buffered must be written out.
  // flush(false) runs before every checkpoint snapshot.
  virtual void flush(bool endOfInput) { (void)endOfInput; }
  virtual void close() {}
};

template <class T>
class SinkWriter : public SinkWriterBase {
 public:
  virtual void write(const T& element, const SinkWriterContext& context) = 0;
};

// A mix-in for a SinkWriter that takes part in checkpoints, as Flink's
// StatefulSinkWriter and CheckpointListener together. The sink operator finds
// it with dynamic_cast on the writer the Sink created. Task thread only.
//
// The writer keeps the state it needs across failures in operator state
// (<sluice/state/operator_state.h>): list states are split over the new
// subtasks when a job is restored at another parallelism, each element
// going to exactly one new subtask. An exception thrown from any hook fails
// the task; the job then restarts from the last completed checkpoint.
class CheckpointedSinkWriter {
 public:
  virtual ~CheckpointedSinkWriter() = default;
  // Once, right after the writer was created and before any element: obtain
  // the state objects from `state` (owned by the operator, valid until the
  // writer is closed) and, when `restored`, recover from them. `restored` is
  // true on a restore even if this subtask's share of the state is empty.
  virtual void initializeState(OperatorStateBackend& state, bool restored) = 0;
  // Checkpoint `checkpointId` is being taken (after flush(false)): put what
  // must survive a failure into the state objects; the operator serializes
  // them right after this returns.
  virtual void snapshotState(int64_t checkpointId) = 0;
  // Checkpoint `checkpointId` completed on every task. Not called for every
  // checkpoint: a later one subsumes the earlier ones, so this means "every
  // checkpoint up to and including `checkpointId`". May name a checkpoint
  // this writer instance did not snapshot (e.g. right after a restore).
  virtual void notifyCheckpointComplete(int64_t checkpointId) { (void)checkpointId; }
};

// Must be shareable between threads: createWriter is called once per subtask.
template <class T>
class Sink {
 public:
  using InputType = T;
  virtual ~Sink() = default;
  virtual std::unique_ptr<SinkWriter<T>> createWriter(WriterInitContext& context) const = 0;
};

}  // namespace sluice
