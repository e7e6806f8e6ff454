// InputGate: the consumer end of every channel that feeds one task.
//
// Producers push whole buffers (never single records); the task takes them in
// arrival order. All channels of all inputs of a task share one gate, so the
// task waits in one place whichever input has data.
#pragma once

#include <deque>
#include <mutex>

#include "runtime/buffer_pool.h"
#include "runtime/task_waker.h"

namespace sluice::runtime {

class InputGate final : public BufferSink {
 public:
  InputGate(int numberOfChannels, TaskWaker& waker)
      : numberOfChannels_(numberOfChannels), waker_(waker) {}

  int numberOfChannels() const { return numberOfChannels_; }

  // Producer thread.
  void push(int channel, Buffer buffer) override {
    {
      std::lock_guard lock(mu_);
      queue_.push_back({channel, buffer});
    }
    waker_.wake();
  }

  // Task thread. False when nothing is queued.
  bool poll(int& channel, Buffer& buffer) {
    std::lock_guard lock(mu_);
    if (queue_.empty()) return false;
    channel = queue_.front().channel;
    buffer = queue_.front().buffer;
    queue_.pop_front();
    return true;
  }

  // Buffers queued now (inPoolUsage). Any thread.
  int queuedBuffers() const {
    std::lock_guard lock(mu_);
    return static_cast<int>(queue_.size());
  }

  // Returns every queued buffer to its pool (after cancel or failure).
  void releaseAll() {
    std::lock_guard lock(mu_);
    for (auto& e : queue_) recycle(e.buffer);
    queue_.clear();
  }

 private:
  struct Entry {
    int channel;
    Buffer buffer;
  };
  const int numberOfChannels_;
  TaskWaker& waker_;
  mutable std::mutex mu_;
  std::deque<Entry> queue_;
};

}  // namespace sluice::runtime
