#include "runtime/buffer_pool.h"

#include <algorithm>
#include <chrono>

namespace sluice::runtime {
namespace {

std::atomic<int64_t> allocatedBytes{0};

int64_t steadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

BufferPool::BufferPool(size_t segmentSize, int maxSegments)
    : segmentSize_(segmentSize), maxSegments_(maxSegments) {}

void recycle(const Buffer& buffer) {
  if (buffer.batch != nullptr) {
    buffer.pool->recycleBatch(buffer.batch);
  } else {
    buffer.pool->recycle(buffer.data);
  }
}

bool BufferPool::makeRoomLocked(bool forBatch) {
  if (forBatch && !free_.empty()) {
    uint8_t* s = free_.back();
    free_.pop_back();
    auto it =
        std::find_if(owned_.begin(), owned_.end(), [s](const auto& o) { return o.get() == s; });
    allocatedBytes.fetch_sub(static_cast<int64_t>(segmentSize_), std::memory_order_relaxed);
    owned_.erase(it);
    return true;
  }
  if (!forBatch && !freeBatches_.empty()) {
    ElementBatch* b = freeBatches_.back();
    freeBatches_.pop_back();
    auto it = std::find_if(ownedBatches_.begin(), ownedBatches_.end(),
                           [b](const auto& o) { return o.get() == b; });
    allocatedBytes.fetch_sub(static_cast<int64_t>(batchBytes_), std::memory_order_relaxed);
    ownedBatches_.erase(it);
    return true;
  }
  return false;
}

void BufferPool::waitLocked(std::unique_lock<std::mutex>& lock) {
  // Backpressure: time it, once per wait, never per record.
  const int64_t since = steadyNanos();
  waitingSince_.store(since, std::memory_order_relaxed);
  available_.wait(lock, [&] { return cancelled_ || !free_.empty() || !freeBatches_.empty(); });
  waitingSince_.store(0, std::memory_order_relaxed);
  waitedNanos_.fetch_add(steadyNanos() - since, std::memory_order_relaxed);
}

uint8_t* BufferPool::request() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (cancelled_) return nullptr;
    if (!free_.empty()) {
      uint8_t* s = free_.back();
      free_.pop_back();
      return s;
    }
    if (static_cast<int>(owned_.size() + ownedBatches_.size()) < maxSegments_ ||
        makeRoomLocked(false)) {
      owned_.push_back(std::make_unique<uint8_t[]>(segmentSize_));
      allocatedBytes.fetch_add(static_cast<int64_t>(segmentSize_), std::memory_order_relaxed);
      return owned_.back().get();
    }
    waitLocked(lock);
  }
}

ElementBatch* BufferPool::requestBatch() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (cancelled_) return nullptr;
    if (!freeBatches_.empty()) {
      ElementBatch* b = freeBatches_.front();
      freeBatches_.pop_front();
      return b;
    }
    if (static_cast<int>(owned_.size() + ownedBatches_.size()) < maxSegments_ ||
        makeRoomLocked(true)) {
      ownedBatches_.push_back(makeBatch_());
      allocatedBytes.fetch_add(static_cast<int64_t>(batchBytes_), std::memory_order_relaxed);
      return ownedBatches_.back().get();
    }
    waitLocked(lock);
  }
}

void BufferPool::recycleBatch(ElementBatch* batch) {
  batch->reset();
  {
    std::lock_guard lock(mu_);
    freeBatches_.push_back(batch);
  }
  available_.notify_one();
  if (onRecycle_) onRecycle_();
}

BufferPool::~BufferPool() {
  allocatedBytes.fetch_sub(
      static_cast<int64_t>(owned_.size() * segmentSize_ + ownedBatches_.size() * batchBytes_),
      std::memory_order_relaxed);
}

int BufferPool::usedSegments() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(owned_.size() - free_.size() + ownedBatches_.size() -
                          freeBatches_.size());
}

int64_t BufferPool::waitedNanos() const {
  const int64_t since = waitingSince_.load(std::memory_order_relaxed);
  const int64_t total = waitedNanos_.load(std::memory_order_relaxed);
  return since == 0 ? total : total + std::max<int64_t>(0, steadyNanos() - since);
}

int64_t BufferPool::processAllocatedBytes() {
  return allocatedBytes.load(std::memory_order_relaxed);
}

void BufferPool::recycle(uint8_t* segment) {
  {
    std::lock_guard lock(mu_);
    free_.push_back(segment);
  }
  available_.notify_one();
  if (onRecycle_) onRecycle_();
}

void BufferPool::cancel() {
  {
    std::lock_guard lock(mu_);
    cancelled_ = true;
  }
  available_.notify_all();
}

int BufferPool::allocatedSegments() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(owned_.size() + ownedBatches_.size());
}

}  // namespace sluice::runtime
