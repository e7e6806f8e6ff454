// RecordWriter: the producer end of one job edge for one subtask.
//
// A local channel (its consumer in this process) fills typed element
// batches (sluice/graph/element_batch.h): records are added by the typed
// NetworkOutput, control elements here, in their wire encoding.
//
// On a remote channel each serialized element is framed as [u32 length]
// [bytes] and copied into the channel's current segment; an element larger
// than what is left spans segments.
//
// Either is handed to the consumer's gate (or the data plane) when full, on
// flush (buffer timeout), or right away when the buffer timeout is 0.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include <sluice/graph/operator.h>

#include "runtime/buffer_pool.h"
#include "runtime/input_gate.h"

namespace sluice::runtime {

class RecordWriter final : public RecordWriterBase {
 public:
  // One output channel: the sink its buffers go to and the channel number
  // they carry there (the consumer gate's channel index, or the remote
  // subpartition's).
  struct Target {
    BufferSink* sink;
    int gateChannel;
    // The sink is an InputGate of this process: typed batches, no bytes.
    bool local = false;
  };

  // With local targets the pool must have a batch factory.
  RecordWriter(std::vector<Target> targets, BufferPool& pool, bool flushEveryRecord);

  int numberOfChannels() const override { return static_cast<int>(targets_.size()); }
  void emit(int channel, const uint8_t* data, size_t size) override;
  void broadcastEmit(const uint8_t* data, size_t size) override;
  void broadcastWatermark(Watermark watermark) override;
  void broadcastWatermarkStatus(WatermarkStatus status) override;
  void broadcastEndOfPartition();
  // A checkpoint barrier in its wire encoding, to every channel.
  void broadcastBarrier(const uint8_t* encoded, size_t size);

  // Hands every partly filled segment to its consumer.
  void flushAll();
  bool hasPendingData() const { return pending_ > 0; }
  // Returns held segments to the pool (cancel/failure path).
  void releaseAll();
  // Bytes handed to consumers so far (numBytesOut). Any thread.
  int64_t bytesWritten() const { return bytesWritten_.load(std::memory_order_relaxed); }

 private:
  struct Current {
    uint8_t* segment = nullptr;
    uint32_t used = 0;
  };
  ElementBatch& acquireBatch(int channel) override;
  void handOverBatch(int channel) override;
  // A control element (or, on a remote channel, any element) to `channel`.
  void emitElement(int channel, const uint8_t* data, size_t size);
  void broadcastElement(const uint8_t* data, size_t size);
  void append(int channel, const uint8_t* data, size_t size);
  void flush(int channel);
  void writeFramed(int channel, const uint8_t* data, size_t size);

  std::vector<Target> targets_;
  std::vector<Current> current_;
  BufferPool& pool_;
  const bool flushEveryRecord_;
  int pending_ = 0;                       // channels with a non-empty current segment or batch
  std::atomic<int64_t> bytesWritten_{0};  // counted per buffer, on the task thread
};

// Reassembles framed elements from a channel's buffers, including elements
// that span buffers.
class ElementDecoder {
 public:
  bool hasBuffer() const { return buffer_.data != nullptr; }
  void setBuffer(Buffer buffer) {
    buffer_ = buffer;
    position_ = 0;
  }
  // The next whole element, valid until the next call. False when the current
  // buffer is used up (it is then recycled).
  bool next(const uint8_t*& data, size_t& size);
  void release();

 private:
  Buffer buffer_;
  size_t position_ = 0;
  std::vector<uint8_t> partial_;
  bool clearPartial_ = false;
};

}  // namespace sluice::runtime
