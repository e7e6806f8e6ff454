#include "runtime/record_writer.h"

#include <algorithm>
#include <cstring>

namespace sluice::runtime {

RecordWriter::RecordWriter(std::vector<Target> targets, BufferPool& pool, bool flushEveryRecord)
    : targets_(std::move(targets)),
      current_(targets_.size()),
      pool_(pool),
      flushEveryRecord_(flushEveryRecord) {
  std::vector<uint8_t> local(targets_.size());
  for (size_t c = 0; c < targets_.size(); ++c) local[c] = targets_[c].local ? 1 : 0;
  setLocalChannels(std::move(local), flushEveryRecord);
}

ElementBatch& RecordWriter::acquireBatch(int channel) {
  ElementBatch* b = pool_.requestBatch();
  if (b == nullptr) throw TaskCancelledException();
  batches_[static_cast<size_t>(channel)] = b;
  ++pending_;
  return *b;
}

void RecordWriter::handOverBatch(int channel) {
  ElementBatch*& b = batches_[static_cast<size_t>(channel)];
  const auto bytes = static_cast<uint32_t>(b->approximateBytes());
  bytesWritten_.store(bytesWritten_.load(std::memory_order_relaxed) + bytes,
                      std::memory_order_relaxed);
  targets_[channel].sink->push(targets_[channel].gateChannel, Buffer{nullptr, bytes, &pool_, b});
  b = nullptr;
  --pending_;
}

void RecordWriter::emitElement(int channel, const uint8_t* data, size_t size) {
  if (isLocal(channel)) {
    localBatch(channel).addControl(data, size);
    if (flushEveryRecord_ || batches_[static_cast<size_t>(channel)]->full()) handOverBatch(channel);
    return;
  }
  writeFramed(channel, data, size);
  if (flushEveryRecord_) flush(channel);
}

void RecordWriter::broadcastElement(const uint8_t* data, size_t size) {
  for (int ch = 0; ch < numberOfChannels(); ++ch) emitElement(ch, data, size);
}

void RecordWriter::append(int channel, const uint8_t* data, size_t size) {
  Current& c = current_[channel];
  const size_t cap = pool_.segmentSize();
  while (size > 0) {
    if (c.segment == nullptr) {
      c.segment = pool_.request();
      if (c.segment == nullptr) throw TaskCancelledException();
      c.used = 0;
      ++pending_;
    }
    size_t n = std::min(size, cap - c.used);
    std::memcpy(c.segment + c.used, data, n);
    c.used += static_cast<uint32_t>(n);
    data += n;
    size -= n;
    if (c.used == cap) flush(channel);
  }
}

void RecordWriter::flush(int channel) {
  if (isLocal(channel)) {
    if (batches_[static_cast<size_t>(channel)] != nullptr) handOverBatch(channel);
    return;
  }
  Current& c = current_[channel];
  if (c.segment == nullptr) return;
  bytesWritten_.store(bytesWritten_.load(std::memory_order_relaxed) + c.used,
                      std::memory_order_relaxed);
  targets_[channel].sink->push(targets_[channel].gateChannel, Buffer{c.segment, c.used, &pool_});
  c.segment = nullptr;
  c.used = 0;
  --pending_;
}

void RecordWriter::writeFramed(int channel, const uint8_t* data, size_t size) {
  uint32_t len = static_cast<uint32_t>(size);
  Current& c = current_[channel];
  if (c.segment != nullptr && pool_.segmentSize() - c.used > size + 4) {
    // Fast path: the element fits the current segment with room to spare.
    std::memcpy(c.segment + c.used, &len, 4);
    if (size > 0) std::memcpy(c.segment + c.used + 4, data, size);
    c.used += static_cast<uint32_t>(size + 4);
    return;
  }
  uint8_t header[4];
  std::memcpy(header, &len, 4);
  append(channel, header, 4);
  append(channel, data, size);
}

void RecordWriter::emit(int channel, const uint8_t* data, size_t size) {
  writeFramed(channel, data, size);
  if (flushEveryRecord_) flush(channel);
}

void RecordWriter::broadcastEmit(const uint8_t* data, size_t size) {
  for (int ch = 0; ch < numberOfChannels(); ++ch) emit(ch, data, size);
}

void RecordWriter::broadcastWatermark(Watermark watermark) {
  uint8_t buf[9];
  buf[0] = static_cast<uint8_t>(ElementTag::kWatermark);
  std::memcpy(buf + 1, &watermark.timestamp, 8);
  broadcastElement(buf, sizeof buf);
}

void RecordWriter::broadcastWatermarkStatus(WatermarkStatus status) {
  uint8_t buf[2] = {static_cast<uint8_t>(ElementTag::kWatermarkStatus),
                    static_cast<uint8_t>(status)};
  broadcastElement(buf, sizeof buf);
}

void RecordWriter::broadcastBarrier(const uint8_t* encoded, size_t size) {
  broadcastElement(encoded, size);
}

void RecordWriter::broadcastEndOfPartition() {
  uint8_t buf[1] = {static_cast<uint8_t>(ElementTag::kEndOfPartition)};
  for (int ch = 0; ch < numberOfChannels(); ++ch) {
    if (isLocal(ch)) {
      localBatch(ch).addControl(buf, 1);
    } else {
      writeFramed(ch, buf, 1);
    }
  }
  flushAll();
}

void RecordWriter::flushAll() {
  if (pending_ == 0) return;
  for (int ch = 0; ch < numberOfChannels(); ++ch) flush(ch);
}

void RecordWriter::releaseAll() {
  for (auto& c : current_) {
    if (c.segment != nullptr) pool_.recycle(c.segment);
    c.segment = nullptr;
  }
  for (auto& b : batches_) {
    if (b != nullptr) pool_.recycleBatch(b);
    b = nullptr;
  }
  pending_ = 0;
}

bool ElementDecoder::next(const uint8_t*& data, size_t& size) {
  if (clearPartial_) {
    partial_.clear();
    clearPartial_ = false;
  }
  for (;;) {
    if (buffer_.data == nullptr) return false;
    if (partial_.size() >= 4) {
      // An element whose prefix arrived whole may be complete already (a
      // zero-length element ends with its prefix).
      uint32_t len;
      std::memcpy(&len, partial_.data(), 4);
      if (partial_.size() == 4 + size_t{len}) {
        data = partial_.data() + 4;
        size = len;
        clearPartial_ = true;
        return true;
      }
    }
    size_t avail = buffer_.size - position_;
    if (avail == 0) {
      recycle(buffer_);
      buffer_ = Buffer{};
      return false;
    }
    const uint8_t* p = buffer_.data + position_;
    if (partial_.empty() && avail >= 4) {
      uint32_t len;
      std::memcpy(&len, p, 4);
      if (avail - 4 >= len) {
        data = p + 4;
        size = len;
        position_ += 4 + size_t{len};
        return true;
      }
    }
    // The element continues in a later buffer: assemble it.
    if (partial_.size() < 4) {
      size_t take = std::min(4 - partial_.size(), avail);
      partial_.insert(partial_.end(), p, p + take);
      position_ += take;
      continue;
    }
    uint32_t len;
    std::memcpy(&len, partial_.data(), 4);
    size_t total = 4 + size_t{len};
    size_t take = std::min(total - partial_.size(), avail);
    partial_.insert(partial_.end(), p, p + take);
    position_ += take;
    if (partial_.size() == total) {
      data = partial_.data() + 4;
      size = len;
      clearPartial_ = true;
      return true;
    }
  }
}

void ElementDecoder::release() {
  if (buffer_.data != nullptr) recycle(buffer_);
  buffer_ = Buffer{};
  partial_.clear();
}

}  // namespace sluice::runtime
