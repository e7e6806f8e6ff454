// Input processors: how a task's head operator gets its input (Flink's
// StreamInputProcessor and SourceOperator's loop).
//
// SourceInputProcessor: the head is a source reader; each call lets it emit
// a bounded batch. Checkpoints are triggered here by the coordinator: the
// barrier starts at the source. A stop-with-savepoint stops the source
// after its barrier (with drain, after the maximum watermark).
//
// NetworkInputProcessor: the head reads the task's input gate; each call
// takes one buffer (or resumes a channel that alignment had blocked): a
// typed batch from a subtask of this process, whose records go to the head
// as they are, or serialized bytes from another process, decoded here.
// Watermarks go through one WatermarkValve per input (the minimum over its
// active channels); barriers go through the BarrierAligner; end of
// partition ends an input once all its channels ended.
//
// Task thread only.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <sluice/core/watermark_valve.h>
#include <sluice/graph/job_graph.h>
#include <sluice/graph/operator.h>

#include "checkpoint/barrier_aligner.h"
#include "checkpoint/checkpoint_options.h"
#include "runtime/input_gate.h"
#include "runtime/record_writer.h"

namespace sluice::runtime {

// What feeds gate channel k of a task.
struct InputChannelInfo {
  int streamEdge = -1;
  int inputIndex = 0;
};

// What an input processor asks of its task when a checkpoint is due.
class CheckpointHandler {
 public:
  virtual ~CheckpointHandler() = default;
  // Snapshot now and forward the barrier downstream.
  virtual void performCheckpoint(const CheckpointBarrier& barrier,
                                 const checkpoint::CheckpointOptions& options) = 0;
  // This task does not take checkpoint `id` (not a failure of it).
  virtual void declineCheckpoint(int64_t id, const std::string& reason) = 0;
  // Whether the task took a newer (or the same) checkpoint before `id`:
  // performCheckpoint() then declines it.
  virtual bool checkpointOvertaken(int64_t id) const = 0;
};

class InputProcessor {
 public:
  virtual ~InputProcessor() = default;
  // Processes what is available now.
  virtual InputStatus processInput() = 0;
  // The coordinator's trigger reached this task.
  virtual void triggerCheckpoint(const CheckpointBarrier& barrier,
                                 const checkpoint::CheckpointOptions& options) = 0;
  // The coordinator aborted checkpoint `id`.
  virtual void abortCheckpoint(int64_t id, const checkpoint::CheckpointOptions& options) = 0;
  // Returns the buffers it holds to their pools.
  virtual void release() {}

  // The task's input metrics (numRecordsIn, numBytesIn,
  // currentInputWatermark): written on the task thread, read by any.
  int64_t recordsIn() const { return recordsIn_.load(std::memory_order_relaxed); }
  int64_t bytesIn() const { return bytesIn_.load(std::memory_order_relaxed); }
  int64_t inputWatermark() const { return inputWatermark_.load(std::memory_order_relaxed); }

 protected:
  static void add(std::atomic<int64_t>& cell, int64_t n) {
    cell.store(cell.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::atomic<int64_t> recordsIn_{0};
  std::atomic<int64_t> bytesIn_{0};
  std::atomic<int64_t> inputWatermark_{kMinTimestamp};
};

class SourceInputProcessor final : public InputProcessor {
 public:
  SourceInputProcessor(SourceOperatorBase& source, CheckpointHandler& handler)
      : source_(source), handler_(handler) {}

  InputStatus processInput() override;
  void triggerCheckpoint(const CheckpointBarrier& barrier,
                         const checkpoint::CheckpointOptions& options) override;
  void abortCheckpoint(int64_t id, const checkpoint::CheckpointOptions& options) override;

  SourceOperatorBase& source() { return source_; }

 private:
  SourceOperatorBase& source_;
  CheckpointHandler& handler_;
  bool stopped_ = false;  // a stop-with-savepoint barrier was emitted
};

class NetworkInputProcessor final : public InputProcessor,
                                    private checkpoint::BarrierAligner::Actions {
 public:
  NetworkInputProcessor(StreamOperatorBase& head, InputGate& gate,
                        const std::vector<InputChannelInfo>& channels, const StreamGraph& graph,
                        CheckpointingMode mode, CheckpointHandler& handler);

  InputStatus processInput() override;
  void triggerCheckpoint(const CheckpointBarrier& barrier,
                         const checkpoint::CheckpointOptions& options) override;
  void abortCheckpoint(int64_t id, const checkpoint::CheckpointOptions& options) override;
  void release() override;

 private:
  // BarrierAligner::Actions
  void triggerCheckpointOnBarrier(const CheckpointBarrier& barrier,
                                  const checkpoint::CheckpointOptions& options) override;
  void declineCheckpointOnBarrier(int64_t id, const std::string& reason) override;

  // Where the reading of channel c's current batch stands.
  struct BatchCursor {
    Buffer buffer;       // buffer.batch is null when no batch is being read
    size_t record = 0;   // the next record
    size_t control = 0;  // the next control element
  };

  // Reads channel c's buffers until they are used up or c is blocked.
  void drainChannel(int c);
  // Reads the rest of channel c's current batch, or up to where c blocks;
  // returns the records it handed to the head.
  int64_t drainBatch(int c);
  bool busy(size_t c) const {
    return decoders_[c].hasBuffer() || cursors_[c].buffer.batch != nullptr || !queued_[c].empty();
  }
  // Hands one element to the chain; true if it was a record.
  bool handle(int c, const uint8_t* data, size_t size);
  void apply(int input, const WatermarkValve::Emit& emit);
  int numberOfChannels() const { return static_cast<int>(channels_.size()); }

  StreamOperatorBase& head_;
  InputGate& gate_;
  const std::vector<InputChannelInfo>& channels_;
  CheckpointHandler& handler_;
  std::vector<ElementDecoder> decoders_;
  std::vector<BatchCursor> cursors_;
  std::vector<std::unique_ptr<RecordProcessorBase>> processors_;
  std::vector<int> localIndex_;  // channel -> index among its input's channels
  std::vector<int> channelsPerInput_;
  std::vector<int> endedPerInput_;
  std::vector<WatermarkValve> valves_;
  std::vector<std::deque<Buffer>> queued_;  // buffers of blocked or busy channels
  checkpoint::BarrierAligner aligner_;
  int ended_ = 0;
  std::vector<int64_t> inputWatermarks_;  // per input, for currentInputWatermark
};

}  // namespace sluice::runtime
