// Helpers of the data-plane tests: a producer thread writing buffers of known
// contents, a consumer gate, and a check of every byte that arrives.
#pragma once

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cluster/network/data_plane.h"
#include "runtime/buffer_pool.h"
#include "runtime/input_gate.h"
#include "runtime/task_waker.h"

namespace network_harness {

using sluice::cluster::ChannelKey;
using sluice::cluster::DataPlane;
using sluice::cluster::DataPlaneOptions;
using sluice::runtime::Buffer;
using sluice::runtime::BufferPool;
using sluice::runtime::BufferSink;
using sluice::runtime::InputGate;
using sluice::runtime::TaskWaker;

constexpr size_t kSegment = 4096;
constexpr auto kPatience = std::chrono::seconds(60);

inline DataPlaneOptions options(int buffersPerChannel = 2, int floating = 8) {
  DataPlaneOptions o;
  o.segmentSize = kSegment;
  o.buffersPerChannel = buffersPerChannel;
  o.floatingBuffersPerGate = floating;
  return o;
}

inline ChannelKey key(const std::string& job, int attempt, int subpartition) {
  return ChannelKey{job, attempt, 3, 1, subpartition};
}

// Waits for a condition another thread makes true; fails the test after
// kPatience (a hang, not a slow machine).
inline bool eventually(const std::function<bool()>& condition) {
  auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Buffer `seq` of channel `ch`: its size and every byte follow from the two.
inline uint32_t sizeFor(int ch, int seq) {
  return static_cast<uint32_t>(
      8 + (static_cast<uint32_t>(seq) * 977u + static_cast<uint32_t>(ch) * 131u) % (kSegment - 8));
}
inline uint8_t byteAt(int ch, int seq, uint32_t i) {
  return static_cast<uint8_t>(seq * 31 + ch * 7 + i);
}
inline void fill(uint8_t* p, int ch, int seq) {
  uint32_t size = sizeFor(ch, seq);
  std::memcpy(p, &seq, 4);
  std::memcpy(p + 4, &ch, 4);
  for (uint32_t i = 8; i < size; ++i) p[i] = byteAt(ch, seq, i);
}
// Empty when `b` is buffer `seq` of channel `ch`, else what differs.
inline std::string verify(const Buffer& b, int ch, int seq) {
  if (b.size != sizeFor(ch, seq)) return "size " + std::to_string(b.size);
  int s = 0;
  int c = 0;
  std::memcpy(&s, b.data, 4);
  std::memcpy(&c, b.data + 4, 4);
  if (s != seq || c != ch)
    return "buffer " + std::to_string(s) + " of channel " + std::to_string(c);
  for (uint32_t i = 8; i < b.size; ++i) {
    if (b.data[i] != byteAt(ch, seq, i)) return "byte " + std::to_string(i);
  }
  return {};
}

// One producer subtask: writes `perChannel` buffers to each sink, round
// robin, from its own bounded pool (blocking when all are in flight).
class Producer {
 public:
  Producer(std::vector<BufferSink*> sinks, int perChannel, int poolSize)
      : sinks_(std::move(sinks)), perChannel_(perChannel), pool(kSegment, poolSize) {
    pool.setRecycleListener([this] { ++recycled; });
  }
  ~Producer() { join(); }

  void start() {
    thread_ = std::thread([this] {
      for (int seq = 0; seq < perChannel_; ++seq) {
        for (size_t c = 0; c < sinks_.size(); ++c) {
          inRequest = true;
          uint8_t* seg = pool.request();
          inRequest = false;
          if (seg == nullptr) return;  // cancelled
          fill(seg, static_cast<int>(c), seq);
          sinks_[c]->push(static_cast<int>(c),
                          Buffer{seg, sizeFor(static_cast<int>(c), seq), &pool});
          ++pushed;
        }
      }
    });
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::vector<BufferSink*> sinks_;
  const int perChannel_;
  std::thread thread_;

 public:
  BufferPool pool;
  std::atomic<int> pushed{0};
  std::atomic<int> recycled{0};
  std::atomic<bool> inRequest{false};
};

// One consumer task's gate, and a check of what arrives on each channel.
class Consumer {
 public:
  explicit Consumer(int channels)
      : gate(channels, waker_), next_(static_cast<size_t>(channels), 0) {}

  // Takes one buffer, waiting for it up to kPatience.
  bool take(int& channel, Buffer& buffer) {
    auto deadline = std::chrono::steady_clock::now() + kPatience;
    while (!gate.poll(channel, buffer)) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      waker_.waitUntil(std::chrono::steady_clock::now() + std::chrono::milliseconds(20));
    }
    return true;
  }
  // Takes, checks (order and bytes) and recycles until every channel got
  // `perChannel` buffers, or `stop` turns true.
  void receiveAll(int perChannel, const std::atomic<bool>* stop = nullptr) {
    for (;;) {
      bool done = true;
      for (int n : next_) done = done && n >= perChannel;
      if (done || (stop != nullptr && stop->load())) return;
      int ch = 0;
      Buffer b;
      if (stop != nullptr) {
        if (!gate.poll(ch, b)) {
          waker_.waitUntil(std::chrono::steady_clock::now() + std::chrono::milliseconds(5));
          continue;
        }
      } else if (!take(ch, b)) {
        ADD_FAILURE() << "no buffer within the patience; got " << received << " so far";
        return;
      }
      check(ch, b);
      b.pool->recycle(b.data);
    }
  }
  void check(int ch, const Buffer& b) {
    ASSERT_GE(ch, 0);
    ASSERT_LT(ch, static_cast<int>(next_.size()));
    std::string wrong = verify(b, ch, next_[static_cast<size_t>(ch)]);
    EXPECT_TRUE(wrong.empty()) << "channel " << ch << " buffer " << next_[static_cast<size_t>(ch)]
                               << ": " << wrong;
    ++next_[static_cast<size_t>(ch)];
    ++received;
  }
  int nextOf(int ch) const { return next_[static_cast<size_t>(ch)]; }

 private:
  TaskWaker waker_;

 public:
  InputGate gate;
  std::atomic<int> received{0};

 private:
  std::vector<int> next_;
};

inline std::vector<DataPlane::RemoteInput> inputs(const std::string& job, int attempt, int channels,
                                                  int port) {
  std::vector<DataPlane::RemoteInput> r;
  for (int c = 0; c < channels; ++c) r.push_back({key(job, attempt, c), "127.0.0.1", port, c});
  return r;
}

inline std::vector<BufferSink*> sinks(DataPlane& plane, const std::string& job, int attempt,
                                      int channels) {
  std::vector<BufferSink*> r;
  for (int c = 0; c < channels; ++c) r.push_back(plane.producerChannel(key(job, attempt, c)));
  return r;
}

}  // namespace network_harness
