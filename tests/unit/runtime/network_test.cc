// The in-process network stack of one job edge: RecordWriter (producer side,
// frames elements into pooled segments), InputGate (the consumer's queue of
// buffers) and ElementDecoder (reassembles framed elements, also across
// buffers), with BufferPool backpressure and cancellation.
//
// Segments are 64 bytes, so most elements span segments and length prefixes
// fall across segment boundaries. Expected bytes are written out by hand from
// the documented wire format: every element is [u32 little-endian length]
// [bytes]; watermark = [2][i64 LE], status = [3][0|1], end of partition = [5].
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <latch>
#include <random>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sluice/core/serializer.h>
#include <sluice/graph/operator.h>

#include "runtime/buffer_pool.h"
#include "runtime/input_gate.h"
#include "runtime/record_writer.h"
#include "runtime/task_waker.h"

namespace network_test {
namespace {

using namespace sluice;
using namespace sluice::runtime;
using Bytes = std::vector<uint8_t>;
using Clock = std::chrono::steady_clock;

constexpr size_t kSegment = 64;

Bytes framed(const Bytes& element) {
  uint32_t n = static_cast<uint32_t>(element.size());
  Bytes out = {static_cast<uint8_t>(n), static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n >> 16),
               static_cast<uint8_t>(n >> 24)};
  out.insert(out.end(), element.begin(), element.end());
  return out;
}

Bytes patterned(size_t size, uint8_t seed) {
  Bytes b(size);
  for (size_t i = 0; i < size; ++i) b[i] = static_cast<uint8_t>(seed + 31 * i);
  return b;
}

const Bytes kEndOfPartition = {5};

// The consumer side of one gate: a decoder per channel, everything decoded so
// far per channel, and the raw contents of every buffer per channel.
struct Consumer {
  explicit Consumer(InputGate& g)
      : gate(g),
        decoders(g.numberOfChannels()),
        elements(g.numberOfChannels()),
        buffers(g.numberOfChannels()) {}

  // Decodes every queued buffer; returns how many buffers it took.
  int drain() {
    int taken = 0;
    int c;
    Buffer b;
    while (gate.poll(c, b)) {
      ++taken;
      EXPECT_GE(c, 0);
      EXPECT_LT(c, gate.numberOfChannels());
      EXPECT_LE(b.size, kSegment);
      buffers[c].emplace_back(b.data, b.data + b.size);
      decoders[c].setBuffer(b);
      const uint8_t* data;
      size_t size;
      while (decoders[c].next(data, size)) elements[c].emplace_back(data, data + size);
      EXPECT_FALSE(decoders[c].hasBuffer()) << "a used-up buffer is recycled";
    }
    return taken;
  }

  Bytes concatenatedBuffers(int c) const {
    Bytes all;
    for (const auto& b : buffers[c]) all.insert(all.end(), b.begin(), b.end());
    return all;
  }

  InputGate& gate;
  std::vector<ElementDecoder> decoders;
  std::vector<std::vector<Bytes>> elements;
  std::vector<std::vector<Bytes>> buffers;
};

std::vector<RecordWriter::Target> targets(InputGate& gate) {
  std::vector<RecordWriter::Target> t;
  for (int c = 0; c < gate.numberOfChannels(); ++c) t.push_back({&gate, c});
  return t;
}

// Requests `count` segments, which must all come from the free list: the
// pool allocates nothing new when every segment it handed out came back.
void expectAllRecycled(BufferPool& pool) {
  const int allocated = pool.allocatedSegments();
  ASSERT_LT(allocated, pool.maxSegments()) << "use a pool with spare capacity";
  std::vector<uint8_t*> got;
  for (int i = 0; i < allocated; ++i) got.push_back(pool.request());
  EXPECT_EQ(pool.allocatedSegments(), allocated) << "a segment was not recycled";
  for (uint8_t* s : got) pool.recycle(s);
}

// --- round trips ---------------------------------------------------------------

struct RandomRun {
  std::vector<std::vector<Bytes>> sent;  // per channel
  std::vector<Bytes> wire;               // per channel: the framed bytes in order
};

void runRandomRoundTrip(uint32_t seed, bool randomFlushes) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  TaskWaker waker;
  InputGate gate(3, waker);
  BufferPool pool(kSegment, 20000);
  RecordWriter writer(targets(gate), pool, /*flushEveryRecord=*/false);
  Consumer consumer(gate);
  std::mt19937 rng(seed);
  RandomRun run;
  run.sent.resize(3);
  run.wire.resize(3);
  for (int i = 0; i < 2000; ++i) {
    int ch = static_cast<int>(rng() % 3);
    size_t len = rng() % 301;
    Bytes e(len);
    for (auto& b : e) b = static_cast<uint8_t>(rng());
    writer.emit(ch, e.data(), e.size());
    run.sent[ch].push_back(e);
    Bytes f = framed(e);
    run.wire[ch].insert(run.wire[ch].end(), f.begin(), f.end());
    if (randomFlushes && rng() % 50 == 0) writer.flushAll();
    if (rng() % 7 == 0) consumer.drain();  // interleave consumption
  }
  writer.broadcastEndOfPartition();
  EXPECT_FALSE(writer.hasPendingData());
  consumer.drain();
  for (int c = 0; c < 3; ++c) {
    SCOPED_TRACE("channel " + std::to_string(c));
    auto expected = run.sent[c];
    expected.push_back(kEndOfPartition);
    ASSERT_EQ(consumer.elements[c].size(), expected.size());
    for (size_t k = 0; k < expected.size(); ++k) {
      ASSERT_EQ(consumer.elements[c][k], expected[k]) << "element " << k;
    }
    Bytes wire = run.wire[c];
    Bytes eop = framed(kEndOfPartition);
    wire.insert(wire.end(), eop.begin(), eop.end());
    EXPECT_EQ(consumer.concatenatedBuffers(c), wire);
    if (!randomFlushes) {
      // Without flushes only the last buffer of a channel may be partly filled.
      for (size_t k = 0; k + 1 < consumer.buffers[c].size(); ++k) {
        EXPECT_EQ(consumer.buffers[c][k].size(), kSegment) << "buffer " << k;
      }
    }
  }
  expectAllRecycled(pool);
}

TEST(NetworkTest, RandomElementsRoundTripByteExactlyPerChannel) {
  for (uint32_t seed : {1u, 2u, 3u}) runRandomRoundTrip(seed, false);
}

TEST(NetworkTest, RandomElementsRoundTripWithFlushesInBetween) {
  for (uint32_t seed : {11u, 12u, 13u}) runRandomRoundTrip(seed, true);
}

// Producer and consumer on different threads with a pool far smaller than the
// data: the producer keeps blocking until the consumer recycles.
TEST(NetworkTest, ConcurrentRoundTripUnderBackpressure) {
  TaskWaker waker;
  InputGate gate(3, waker);
  BufferPool pool(kSegment, 3 * 2 + 2);
  RecordWriter writer(targets(gate), pool, false);
  std::vector<std::vector<Bytes>> sent(3);
  std::mt19937 rng(42);
  for (int i = 0; i < 3000; ++i) {
    int ch = static_cast<int>(rng() % 3);
    Bytes e(rng() % 301);
    for (auto& b : e) b = static_cast<uint8_t>(rng());
    sent[ch].push_back(std::move(e));
  }
  std::vector<int> order;  // channel of each send, in order
  {
    std::mt19937 r2(7);
    std::vector<size_t> next(3, 0);
    size_t total = sent[0].size() + sent[1].size() + sent[2].size();
    while (order.size() < total) {
      int ch = static_cast<int>(r2() % 3);
      if (next[ch] < sent[ch].size()) {
        order.push_back(ch);
        ++next[ch];
      }
    }
  }
  std::thread producer([&] {
    std::vector<size_t> next(3, 0);
    for (int ch : order) {
      const Bytes& e = sent[ch][next[ch]++];
      writer.emit(ch, e.data(), e.size());
    }
    writer.broadcastEndOfPartition();
  });

  Consumer consumer(gate);
  auto ended = [&] {
    int n = 0;
    for (int c = 0; c < 3; ++c) {
      n += !consumer.elements[c].empty() && consumer.elements[c].back() == kEndOfPartition;
    }
    return n;
  };
  const auto giveUp = Clock::now() + std::chrono::seconds(120);
  while (ended() < 3 && Clock::now() < giveUp) {
    if (consumer.drain() == 0) waker.waitUntil(Clock::now() + std::chrono::seconds(1));
  }
  producer.join();
  ASSERT_EQ(ended(), 3) << "the consumer did not see every end of partition";
  for (int c = 0; c < 3; ++c) {
    auto expected = sent[c];
    expected.push_back(kEndOfPartition);
    ASSERT_EQ(consumer.elements[c].size(), expected.size()) << "channel " << c;
    for (size_t k = 0; k < expected.size(); ++k) {
      ASSERT_EQ(consumer.elements[c][k], expected[k]) << "channel " << c << " element " << k;
    }
  }
  EXPECT_LE(pool.allocatedSegments(), 8);
}

// An element whose 4-byte length prefix starts `k` bytes before the end of a
// segment, for every k: the first segment ends with the prefix's first k
// bytes, the second starts with the rest.
TEST(NetworkTest, LengthPrefixSplitAcrossSegmentBoundary) {
  for (size_t k = 0; k <= 4; ++k) {
    SCOPED_TRACE("prefix bytes in the first segment: " + std::to_string(k));
    TaskWaker waker;
    InputGate gate(1, waker);
    BufferPool pool(kSegment, 16);
    RecordWriter writer(targets(gate), pool, false);
    Bytes first = patterned(kSegment - 4 - k, 1);  // leaves k bytes
    Bytes second = patterned(258, 2);              // length 0x00000102
    writer.emit(0, first.data(), first.size());
    writer.emit(0, second.data(), second.size());
    writer.flushAll();
    Consumer consumer(gate);
    consumer.drain();
    const auto& bufs = consumer.buffers[0];
    // 64 - k + 4 + 258 bytes after the first segment: 262 + k bytes -> 5 buffers.
    ASSERT_EQ(bufs.size(), 1 + (4 + 258 - k + kSegment - 1) / kSegment);
    ASSERT_EQ(bufs[0].size(), kSegment);
    const Bytes prefix = {0x02, 0x01, 0x00, 0x00};
    for (size_t i = 0; i < k; ++i) EXPECT_EQ(bufs[0][kSegment - k + i], prefix[i]) << i;
    for (size_t i = k; i < 4; ++i) EXPECT_EQ(bufs[1][i - k], prefix[i]) << i;
    EXPECT_THAT(consumer.elements[0], ::testing::ElementsAre(first, second));
    expectAllRecycled(pool);
  }
}

TEST(NetworkTest, ElementLargerThanManySegments) {
  TaskWaker waker;
  InputGate gate(2, waker);
  BufferPool pool(kSegment, 100);
  RecordWriter writer(targets(gate), pool, false);
  Bytes big = patterned(1000, 9);
  writer.emit(1, big.data(), big.size());
  Consumer consumer(gate);
  // 1004 bytes: 15 full segments are sent at once, 44 bytes wait for a flush.
  EXPECT_EQ(consumer.drain(), 15);
  EXPECT_TRUE(consumer.elements[1].empty());
  EXPECT_TRUE(writer.hasPendingData());
  writer.flushAll();
  EXPECT_EQ(consumer.drain(), 1);
  EXPECT_EQ(consumer.buffers[1].back().size(), 1004u - 15 * kSegment);
  ASSERT_EQ(consumer.elements[1].size(), 1u);
  EXPECT_EQ(consumer.elements[1][0], big);
  EXPECT_TRUE(consumer.buffers[0].empty());
}

// The decoder contract: next() returns every element that is complete in the
// buffers handed to it so far. A zero-length element whose length prefix
// ends exactly at the end of a buffer is complete, so it must come out of
// that buffer, not only once the channel's next buffer arrives.
TEST(NetworkTest, ZeroLengthElementWithSplitPrefixIsDeliveredFromItsLastBuffer) {
  TaskWaker waker;
  InputGate gate(1, waker);
  BufferPool pool(kSegment, 16);
  RecordWriter writer(targets(gate), pool, false);
  Bytes first = patterned(kSegment - 4 - 2, 3);  // leaves 2 bytes
  Bytes empty;
  writer.emit(0, first.data(), first.size());
  writer.emit(0, empty.data(), 0);
  writer.flushAll();
  Consumer consumer(gate);
  EXPECT_EQ(consumer.drain(), 2);
  EXPECT_EQ(consumer.buffers[0][1].size(), 2u);
  EXPECT_THAT(consumer.elements[0], ::testing::ElementsAre(first, empty));
}

TEST(NetworkTest, ZeroLengthElementsRoundTrip) {
  TaskWaker waker;
  InputGate gate(1, waker);
  BufferPool pool(kSegment, 16);
  RecordWriter writer(targets(gate), pool, false);
  for (int i = 0; i < 40; ++i) writer.emit(0, nullptr, 0);  // 160 bytes of prefixes
  writer.broadcastEndOfPartition();
  Consumer consumer(gate);
  consumer.drain();
  ASSERT_EQ(consumer.elements[0].size(), 41u);
  for (int i = 0; i < 40; ++i) EXPECT_TRUE(consumer.elements[0][i].empty()) << i;
  EXPECT_EQ(consumer.elements[0][40], kEndOfPartition);
}

// --- control elements -----------------------------------------------------------

TEST(NetworkTest, BroadcastWatermarkStatusAndEndOfPartitionEncodings) {
  TaskWaker waker;
  InputGate gate(3, waker);
  BufferPool pool(kSegment, 16);
  RecordWriter writer(targets(gate), pool, false);
  const int64_t ts = 0x0102030405060708;
  writer.broadcastWatermark(Watermark{ts});
  writer.broadcastWatermark(Watermark{-2});
  writer.broadcastWatermarkStatus(WatermarkStatus::kIdle);
  writer.broadcastWatermarkStatus(WatermarkStatus::kActive);
  Consumer consumer(gate);
  EXPECT_EQ(consumer.drain(), 0) << "control elements wait for a flush like records";
  writer.broadcastEndOfPartition();
  EXPECT_FALSE(writer.hasPendingData());
  EXPECT_EQ(consumer.drain(), 3) << "one buffer per channel";

  const Bytes wm1 = {2, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
  const Bytes wm2 = {2, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  const Bytes idle = {3, 1};
  const Bytes active = {3, 0};
  Bytes wire;
  for (const Bytes& e : {wm1, wm2, idle, active, kEndOfPartition}) {
    Bytes f = framed(e);
    wire.insert(wire.end(), f.begin(), f.end());
  }
  ASSERT_EQ(wire.size(), 13u + 13 + 6 + 6 + 5);
  for (int c = 0; c < 3; ++c) {
    SCOPED_TRACE("channel " + std::to_string(c));
    ASSERT_EQ(consumer.buffers[c].size(), 1u);
    EXPECT_EQ(consumer.buffers[c][0], wire);
    EXPECT_THAT(consumer.elements[c],
                ::testing::ElementsAre(wm1, wm2, idle, active, kEndOfPartition));
    // Read back the way the task does.
    DataInputView in(consumer.elements[c][0].data(), consumer.elements[c][0].size());
    EXPECT_EQ(static_cast<ElementTag>(in.readU8()), ElementTag::kWatermark);
    EXPECT_EQ(in.readI64(), ts);
    DataInputView in2(consumer.elements[c][1].data(), consumer.elements[c][1].size());
    in2.readU8();
    EXPECT_EQ(in2.readI64(), -2);
  }
}

TEST(NetworkTest, BroadcastEmitGoesToEveryChannel) {
  TaskWaker waker;
  InputGate gate(3, waker);
  BufferPool pool(kSegment, 32);
  RecordWriter writer(targets(gate), pool, false);
  Bytes e = patterned(100, 4);
  writer.broadcastEmit(e.data(), e.size());
  writer.flushAll();
  Consumer consumer(gate);
  EXPECT_EQ(consumer.drain(), 6);  // 104 bytes: two buffers per channel
  for (int c = 0; c < 3; ++c) {
    EXPECT_THAT(consumer.elements[c], ::testing::ElementsAre(e)) << c;
    EXPECT_EQ(consumer.concatenatedBuffers(c), framed(e)) << c;
  }
}

// --- flushing -----------------------------------------------------------------------

TEST(NetworkTest, FlushAllHandsOverPartlyFilledBuffersOnly) {
  TaskWaker waker;
  InputGate gate(3, waker);
  BufferPool pool(kSegment, 32);
  RecordWriter writer(targets(gate), pool, false);
  Consumer consumer(gate);
  EXPECT_FALSE(writer.hasPendingData());
  writer.flushAll();
  EXPECT_EQ(consumer.drain(), 0) << "nothing to flush";

  Bytes a = patterned(3, 1), b = patterned(10, 2), c = patterned(0, 3);
  writer.emit(0, a.data(), a.size());
  writer.emit(0, b.data(), b.size());
  writer.emit(2, c.data(), c.size());
  EXPECT_TRUE(writer.hasPendingData());
  EXPECT_EQ(consumer.drain(), 0) << "partial buffers stay with the writer";
  writer.flushAll();
  EXPECT_FALSE(writer.hasPendingData());
  EXPECT_EQ(consumer.drain(), 2) << "channels 0 and 2, nothing for channel 1";
  ASSERT_EQ(consumer.buffers[0].size(), 1u);
  EXPECT_EQ(consumer.buffers[0][0].size(), 4u + 3 + 4 + 10);
  EXPECT_TRUE(consumer.buffers[1].empty());
  ASSERT_EQ(consumer.buffers[2].size(), 1u);
  EXPECT_EQ(consumer.buffers[2][0].size(), 4u);
  EXPECT_THAT(consumer.elements[0], ::testing::ElementsAre(a, b));
  EXPECT_THAT(consumer.elements[2], ::testing::ElementsAre(c));
  writer.flushAll();
  EXPECT_EQ(consumer.drain(), 0) << "a second flush sends nothing";

  // An element that fills its segment exactly is sent at once; nothing pends.
  Bytes full = patterned(kSegment - 4, 5);
  writer.emit(1, full.data(), full.size());
  EXPECT_FALSE(writer.hasPendingData());
  EXPECT_EQ(consumer.drain(), 1);
  EXPECT_THAT(consumer.elements[1], ::testing::ElementsAre(full));
  // One byte more spills 1 byte into a new, pending segment.
  Bytes spill = patterned(kSegment - 3, 6);
  writer.emit(1, spill.data(), spill.size());
  EXPECT_TRUE(writer.hasPendingData());
  EXPECT_EQ(consumer.drain(), 1);
  writer.flushAll();
  EXPECT_EQ(consumer.drain(), 1);
  EXPECT_EQ(consumer.buffers[1].back().size(), 1u);
  EXPECT_THAT(consumer.elements[1], ::testing::ElementsAre(full, spill));
  expectAllRecycled(pool);
}

TEST(NetworkTest, BufferTimeoutZeroPushesOneBufferPerRecord) {
  TaskWaker waker;
  InputGate gate(2, waker);
  BufferPool pool(kSegment, 32);
  RecordWriter writer(targets(gate), pool, /*flushEveryRecord=*/true);
  Consumer consumer(gate);
  std::vector<Bytes> sent;
  for (int i = 0; i < 5; ++i) {
    sent.push_back(patterned(10 + i, static_cast<uint8_t>(i)));
    writer.emit(0, sent.back().data(), sent.back().size());
    EXPECT_FALSE(writer.hasPendingData());
    EXPECT_EQ(consumer.drain(), 1) << "record " << i;
    EXPECT_EQ(consumer.buffers[0].back().size(), 4u + 10 + i);
  }
  EXPECT_EQ(consumer.elements[0], sent);
  // A record larger than a segment goes out as its segments, the last one at once.
  Bytes big = patterned(100, 7);
  writer.emit(1, big.data(), big.size());
  EXPECT_FALSE(writer.hasPendingData());
  EXPECT_EQ(consumer.drain(), 2);
  EXPECT_EQ(consumer.buffers[1][0].size(), kSegment);
  EXPECT_EQ(consumer.buffers[1][1].size(), 104u - kSegment);
  EXPECT_THAT(consumer.elements[1], ::testing::ElementsAre(big));
  // Broadcasts flush every channel too.
  writer.broadcastWatermark(Watermark{7});
  EXPECT_FALSE(writer.hasPendingData());
  EXPECT_EQ(consumer.drain(), 2);
  EXPECT_EQ(consumer.buffers[0].back().size(), 13u);
  EXPECT_EQ(consumer.buffers[1].back().size(), 13u);
  writer.broadcastEmit(big.data(), 1);
  EXPECT_EQ(consumer.drain(), 2);
  expectAllRecycled(pool);
}

// --- buffer pool, backpressure, cancellation ------------------------------------------

TEST(BufferPoolTest, AllocatesLazilyAndReusesRecycledSegments) {
  BufferPool pool(kSegment, 3);
  EXPECT_EQ(pool.segmentSize(), kSegment);
  EXPECT_EQ(pool.maxSegments(), 3);
  EXPECT_EQ(pool.allocatedSegments(), 0);
  uint8_t* a = pool.request();
  uint8_t* b = pool.request();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(pool.allocatedSegments(), 2);
  std::memset(a, 0xab, kSegment);  // the whole segment is usable
  pool.recycle(a);
  EXPECT_EQ(pool.request(), a);
  EXPECT_EQ(pool.allocatedSegments(), 2);
  pool.recycle(a);
  pool.recycle(b);
}

TEST(BufferPoolTest, RequestBlocksWhenExhaustedAndResumesOnRecycle) {
  BufferPool pool(kSegment, 2);
  uint8_t* a = pool.request();
  uint8_t* b = pool.request();
  std::latch started(1);
  std::atomic<uint8_t*> got{nullptr};
  std::thread t([&] {
    started.count_down();
    got.store(pool.request());
  });
  started.wait();
  // The pool is exhausted: request() cannot have returned.
  EXPECT_EQ(got.load(), nullptr);
  pool.recycle(b);
  t.join();
  EXPECT_EQ(got.load(), b);
  EXPECT_EQ(pool.allocatedSegments(), 2);
  pool.recycle(a);
  pool.recycle(b);
}

TEST(BufferPoolTest, CancelFailsBlockedAndLaterRequests) {
  BufferPool pool(kSegment, 1);
  uint8_t* a = pool.request();
  std::latch started(1);
  std::atomic<bool> returned{false};
  std::atomic<uint8_t*> got{reinterpret_cast<uint8_t*>(1)};
  std::thread t([&] {
    started.count_down();
    got.store(pool.request());
    returned.store(true);
  });
  started.wait();
  EXPECT_FALSE(returned.load());
  pool.cancel();
  t.join();
  EXPECT_EQ(got.load(), nullptr);
  // Later requests fail too, even with a free segment.
  pool.recycle(a);
  EXPECT_EQ(pool.request(), nullptr);
}

// Fills a one-segment pool: the element framed to exactly 64 bytes is pushed
// to the gate and still holds the pool's only segment.
void fillOnlySegment(RecordWriter& writer) {
  Bytes full = patterned(kSegment - 4, 1);
  writer.emit(0, full.data(), full.size());
  ASSERT_FALSE(writer.hasPendingData());
}

TEST(BackpressureTest, WriterBlocksOnAFullPoolAndResumesWhenTheConsumerRecycles) {
  TaskWaker waker;
  InputGate gate(1, waker);
  BufferPool pool(kSegment, 1);
  RecordWriter writer(targets(gate), pool, false);
  fillOnlySegment(writer);
  Bytes second = patterned(10, 2);
  std::latch started(1);
  std::atomic<bool> emitted{false};
  std::thread t([&] {
    started.count_down();
    writer.emit(0, second.data(), second.size());
    emitted.store(true);
  });
  started.wait();
  EXPECT_FALSE(emitted.load()) << "emit() must wait for a free segment";
  Consumer consumer(gate);
  EXPECT_EQ(consumer.drain(), 1);  // decodes and recycles the only segment
  t.join();
  EXPECT_TRUE(emitted.load());
  writer.flushAll();
  EXPECT_EQ(consumer.drain(), 1);
  ASSERT_EQ(consumer.elements[0].size(), 2u);
  EXPECT_EQ(consumer.elements[0][1], second);
}

// A task blocked for a buffer must unwind with sluice::TaskCancelledException
// (operator.h), the one exception Task::run() treats as a cancellation rather
// than a failure.
TEST(BackpressureTest, CancelWhileBlockedThrowsTaskCancelledException) {
  TaskWaker waker;
  InputGate gate(1, waker);
  BufferPool pool(kSegment, 1);
  RecordWriter writer(targets(gate), pool, false);
  fillOnlySegment(writer);
  std::latch started(1);
  std::string outcome = "returned normally";
  std::thread t([&] {
    started.count_down();
    Bytes more = patterned(10, 3);
    try {
      writer.emit(0, more.data(), more.size());
    } catch (const TaskCancelledException&) {
      outcome = "TaskCancelledException";
    } catch (const std::exception& e) {
      outcome = std::string("another exception: ") + typeid(e).name() + " (" + e.what() + ")";
    }
  });
  started.wait();
  pool.cancel();
  t.join();
  EXPECT_EQ(outcome, "TaskCancelledException");
  // The cancel/failure path hands every segment back.
  writer.releaseAll();
  EXPECT_FALSE(writer.hasPendingData());
  gate.releaseAll();
}

TEST(BackpressureTest, CancelledPoolMakesEveryLaterEmitThrow) {
  TaskWaker waker;
  InputGate gate(2, waker);
  BufferPool pool(kSegment, 8);
  RecordWriter writer(targets(gate), pool, false);
  pool.cancel();
  Bytes e = patterned(5, 1);
  EXPECT_ANY_THROW(writer.emit(1, e.data(), e.size()));
  EXPECT_ANY_THROW(writer.broadcastWatermark(Watermark{1}));
}

TEST(InputGateTest, ReleaseAllRecyclesQueuedBuffers) {
  TaskWaker waker;
  InputGate gate(2, waker);
  BufferPool pool(kSegment, 8);
  RecordWriter writer(targets(gate), pool, false);
  Bytes e = patterned(150, 1);  // 154 bytes: 2 full segments per channel + a partial one
  writer.broadcastEmit(e.data(), e.size());
  EXPECT_EQ(pool.allocatedSegments(), 6);
  writer.releaseAll();  // the two partial segments
  EXPECT_FALSE(writer.hasPendingData());
  gate.releaseAll();  // the four queued full ones
  int c;
  Buffer b;
  EXPECT_FALSE(gate.poll(c, b));
  expectAllRecycled(pool);
}

TEST(InputGateTest, KeepsArrivalOrderAcrossChannelsAndWakesTheTask) {
  TaskWaker waker;
  InputGate gate(3, waker);
  BufferPool pool(kSegment, 8);
  EXPECT_EQ(gate.numberOfChannels(), 3);
  const int order[] = {2, 0, 2, 1};
  std::vector<uint8_t*> segs;
  for (int ch : order) {
    segs.push_back(pool.request());
    gate.push(ch, Buffer{segs.back(), static_cast<uint32_t>(segs.size()), &pool});
  }
  // The push signalled the waker: this wait returns at once, long before
  // the deadline.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  waker.waitUntil(deadline);
  EXPECT_LT(Clock::now(), deadline) << "push() did not wake the task";
  for (size_t i = 0; i < 4; ++i) {
    int c;
    Buffer b;
    ASSERT_TRUE(gate.poll(c, b));
    EXPECT_EQ(c, order[i]);
    EXPECT_EQ(b.data, segs[i]);
    EXPECT_EQ(b.size, i + 1);
    EXPECT_EQ(b.pool, &pool);
    pool.recycle(b.data);
  }
  int c;
  Buffer b;
  EXPECT_FALSE(gate.poll(c, b));
}

}  // namespace
}  // namespace network_test
