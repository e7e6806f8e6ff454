#include "runtime/buffer_pool.h"

namespace sluice::runtime {

BufferPool::BufferPool(size_t segmentSize, int maxSegments)
    : segmentSize_(segmentSize), maxSegments_(maxSegments) {}

uint8_t* BufferPool::request() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (cancelled_) return nullptr;
    if (!free_.empty()) {
      uint8_t* s = free_.back();
      free_.pop_back();
      return s;
    }
    if (static_cast<int>(owned_.size()) < maxSegments_) {
      owned_.push_back(std::make_unique<uint8_t[]>(segmentSize_));
      return owned_.back().get();
    }
    available_.wait(lock);
  }
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
  return static_cast<int>(owned_.size());
}

}  // namespace sluice::runtime
