// RecordWriter: the producer end of one job edge for one subtask.
//
// Each serialized element is framed as [u32 length][bytes] and copied into the
// channel's current segment; an element larger than what is left spans
// segments. A segment is handed to the consumer's gate when full, on flush
// (buffer timeout), or right away when the buffer timeout is 0.
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
  };

  RecordWriter(std::vector<Target> targets, BufferPool& pool, bool flushEveryRecord);

  int numberOfChannels() const override { return static_cast<int>(targets_.size()); }
  void emit(int channel, const uint8_t* data, size_t size) override;
  void broadcastEmit(const uint8_t* data, size_t size) override;
  void broadcastWatermark(Watermark watermark) override;
  void broadcastWatermarkStatus(WatermarkStatus status) override;
  void broadcastEndOfPartition();

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
  void append(int channel, const uint8_t* data, size_t size);
  void flush(int channel);
  void writeFramed(int channel, const uint8_t* data, size_t size);

  std::vector<Target> targets_;
  std::vector<Current> current_;
  BufferPool& pool_;
  const bool flushEveryRecord_;
  int pending_ = 0;                       // channels with a non-empty current segment
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
