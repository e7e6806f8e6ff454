// Buffers for records crossing task boundaries: fixed-size memory segments
// of serialized elements, or typed element batches (sluice/graph/element_batch.h)
// between subtasks of one process.
//
// A BufferPool hands out at most `maxSegments` buffers at a time, segments of
// `segmentSize` bytes and batches (of kBatchSegments segments' worth of
// records) together, allocated on first use and reused afterwards. A producer that finds no
// free buffer blocks until its consumer recycles one: that wait is
// backpressure, and it is what keeps a job's memory bounded.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <sluice/graph/element_batch.h>

namespace sluice::runtime {

class BufferPool;

// A filled (or partly filled) segment, or an element batch, travelling from
// producer to consumer. The consumer returns it with recycle(buffer).
struct Buffer {
  uint8_t* data = nullptr;  // a segment's bytes; null for a batch
  uint32_t size = 0;        // bytes used; for a batch, its approximateBytes()
  BufferPool* pool = nullptr;
  ElementBatch* batch = nullptr;
};

// Returns the segment or batch of `buffer` to its pool.
void recycle(const Buffer& buffer);

// Where a producer hands its filled buffers: the consumer's InputGate when
// both run in this process, a remote channel of the data plane otherwise.
// Whoever receives the buffer recycles it once done with it. Thread-safe.
class BufferSink {
 public:
  virtual ~BufferSink() = default;
  virtual void push(int channel, Buffer buffer) = 0;
};

// How many segments' worth of records a typed batch holds. A batch crosses
// threads whole, and a consumer that drained its gate sleeps until the next
// one comes: larger batches pay that wake-up less often (about 6 ns per
// record at 32 KiB of int64 triples, under 2 ns at 128 KiB).
inline constexpr size_t kBatchSegments = 4;

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

  // Batches: the same bound, shared with segments. `factory` makes a new
  // (empty) batch of about `batchBytes` of records (what the process's
  // network memory counts it as); set it before the first requestBatch().
  void setBatchFactory(std::function<std::unique_ptr<ElementBatch>()> factory, size_t batchBytes) {
    makeBatch_ = std::move(factory);
    batchBytes_ = batchBytes;
  }
  // Blocks while every buffer is in use; an empty batch, or nullptr once
  // cancel() was called. Any thread.
  ElementBatch* requestBatch();
  // Any thread.
  void recycleBatch(ElementBatch* batch);
  // Called (outside the pool's lock) after every recycle(): a receiving
  // data-plane channel announces the freed buffer as credit. Set before use.
  void setRecycleListener(std::function<void()> listener) { onRecycle_ = std::move(listener); }
  // Wakes and fails every current and future request().
  void cancel();

  size_t segmentSize() const { return segmentSize_; }
  int maxSegments() const { return maxSegments_; }
  // Segments and batches allocated so far.
  int allocatedSegments() const;
  // Segments and batches handed out and not yet recycled (outPoolUsage).
  // Any thread.
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
  // Frees one idle buffer of the other kind when the pool is at its bound.
  bool makeRoomLocked(bool forBatch);
  void waitLocked(std::unique_lock<std::mutex>& lock);

  std::vector<std::unique_ptr<uint8_t[]>> owned_;
  std::vector<uint8_t*> free_;
  std::vector<std::unique_ptr<ElementBatch>> ownedBatches_;
  // Handed out oldest first. A batch the consumer has just recycled is
  // still in its core's cache; refilling that one at once made every store
  // of the producer fetch its line back from the other core (LIFO reuse
  // cost keyed-sum p1 30% of its CPU on two cores).
  std::deque<ElementBatch*> freeBatches_;
  std::function<std::unique_ptr<ElementBatch>()> makeBatch_;
  size_t batchBytes_ = 0;
  bool cancelled_ = false;
  std::atomic<int64_t> waitedNanos_{0};
  std::atomic<int64_t> waitingSince_{0};  // steady-clock ns; 0: not waiting
  std::function<void()> onRecycle_;
};

}  // namespace sluice::runtime
