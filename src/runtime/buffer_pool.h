// Fixed-size memory segments for records crossing task boundaries.
//
// A BufferPool hands out at most `maxSegments` segments of `segmentSize`
// bytes, allocated on first use and reused afterwards. A producer that finds
// no free segment blocks until its consumer recycles one: that wait is
// backpressure, and it is what keeps a job's memory bounded.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace sluice::runtime {

class BufferPool;

// A filled (or partly filled) segment travelling from producer to consumer.
// The consumer returns it with pool->recycle(data).
struct Buffer {
  uint8_t* data = nullptr;
  uint32_t size = 0;
  BufferPool* pool = nullptr;
};

class BufferPool {
 public:
  BufferPool(size_t segmentSize, int maxSegments);
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // Blocks while every segment is in use. Returns nullptr once cancel() was
  // called. Any thread.
  uint8_t* request();
  // Any thread.
  void recycle(uint8_t* segment);
  // Wakes and fails every current and future request().
  void cancel();

  size_t segmentSize() const { return segmentSize_; }
  int maxSegments() const { return maxSegments_; }
  int allocatedSegments() const;

 private:
  const size_t segmentSize_;
  const int maxSegments_;
  mutable std::mutex mu_;
  std::condition_variable available_;
  std::vector<std::unique_ptr<uint8_t[]>> owned_;
  std::vector<uint8_t*> free_;
  bool cancelled_ = false;
};

}  // namespace sluice::runtime
