// Fixed-size memory segments for records crossing task boundaries.
//
// A BufferPool hands out at most `maxSegments` segments of `segmentSize`
// bytes, allocated on first use and reused afterwards. A producer that finds
// no free segment blocks until its consumer recycles one: that wait is
// backpressure, and it is what keeps a job's memory bounded.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
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

// Where a producer hands its filled buffers: the consumer's InputGate when
// both run in this process, a remote channel of the data plane otherwise.
// Whoever receives the buffer recycles it once done with it. Thread-safe.
class BufferSink {
 public:
  virtual ~BufferSink() = default;
  virtual void push(int channel, Buffer buffer) = 0;
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
  // Called (outside the pool's lock) after every recycle(): a receiving
  // data-plane channel announces the freed buffer as credit. Set before use.
  void setRecycleListener(std::function<void()> listener) { onRecycle_ = std::move(listener); }
  // Wakes and fails every current and future request().
  void cancel();

  size_t segmentSize() const { return segmentSize_; }
  int maxSegments() const { return maxSegments_; }
  int allocatedSegments() const;
  // Segments handed out and not yet recycled (outPoolUsage). Any thread.
  int usedSegments() const;
  // Nanoseconds request() has spent waiting for a free segment so far,
  // including a wait going on now (backPressuredTimeMsPerSecond). Any thread.
  int64_t waitedNanos() const;
  // Bytes of segments allocated by every pool of this process (the
  // TaskManager's network memory in use).
  static int64_t processAllocatedBytes();

  ~BufferPool();

 private:
  const size_t segmentSize_;
  const int maxSegments_;
  mutable std::mutex mu_;
  std::condition_variable available_;
  std::vector<std::unique_ptr<uint8_t[]>> owned_;
  std::vector<uint8_t*> free_;
  bool cancelled_ = false;
  std::atomic<int64_t> waitedNanos_{0};
  std::atomic<int64_t> waitingSince_{0};  // steady-clock ns; 0: not waiting
  std::function<void()> onRecycle_;
};

}  // namespace sluice::runtime
