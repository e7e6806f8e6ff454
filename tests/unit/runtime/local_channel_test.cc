// In-process channels: a RecordWriter whose consumers run in the same
// process fills typed element batches (sluice/graph/element_batch.h) instead
// of serialized segments. These tests drive the writer and the gate directly
// and check what a consumer sees: every record, in order, with the control
// elements (watermark, status, barrier, end of partition) at their places and
// in their wire encoding; batches bounded by the pool (backpressure, cancel);
// every batch back in its pool afterwards; and a writer with local and remote
// channels giving each its own form.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <latch>
#include <random>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/graph/element_batch.h>
#include <sluice/graph/operator.h>
#include <sluice/internal/operators.h>

#include "runtime/buffer_pool.h"
#include "runtime/input_gate.h"
#include "runtime/record_writer.h"
#include "runtime/task_waker.h"

namespace local_channel_test {
namespace {

using namespace sluice;
using namespace sluice::runtime;
using Bytes = std::vector<uint8_t>;
using Clock = std::chrono::steady_clock;
using Batch = TypedElementBatch<std::string>;

// What a consumer sees, per channel: records (value, timestamp) and control
// elements (their bytes), in order.
struct Record {
  std::string value;
  int64_t timestamp;
  bool operator==(const Record&) const = default;
};
using Element = std::variant<Record, Bytes>;

// 16 records per batch (the smallest batch).
constexpr size_t kBatchBytes = 1;
constexpr size_t kSegment = 64;

void setStringBatches(BufferPool& pool) {
  pool.setBatchFactory([] { return std::make_unique<Batch>(kBatchBytes); }, kSegment);
}

std::vector<RecordWriter::Target> localTargets(InputGate& gate) {
  std::vector<RecordWriter::Target> t;
  for (int c = 0; c < gate.numberOfChannels(); ++c) t.push_back({&gate, c, true});
  return t;
}

void add(RecordWriter& writer, int channel, const std::string& value, int64_t ts) {
  auto& batch = static_cast<Batch&>(writer.localBatch(channel));
  batch.add(StreamRecord<std::string>(value, ts));
  writer.recordAdded(channel, batch);
}

Bytes watermarkBytes(int64_t ts) {
  Bytes b(9);
  b[0] = 2;
  std::memcpy(b.data() + 1, &ts, 8);
  return b;
}

// Takes every queued buffer off the gate, unpacks batches into elements and
// recycles them; returns how many buffers it took.
struct Consumer {
  explicit Consumer(InputGate& g) : gate(g), elements(g.numberOfChannels()) {}
  int drain() {
    int taken = 0;
    int c;
    Buffer b;
    while (gate.poll(c, b)) {
      ++taken;
      EXPECT_EQ(b.data, nullptr) << "a local channel carries no bytes";
      EXPECT_NE(b.batch, nullptr);
      if (b.batch == nullptr) continue;
      const auto& batch = static_cast<const Batch&>(*b.batch);
      EXPECT_EQ(b.size, batch.approximateBytes());
      EXPECT_FALSE(batch.empty()) << "an empty batch is never handed over";
      size_t next = 0;
      for (const auto& control : batch.controls()) {
        for (; next < control.position; ++next) {
          elements[c].push_back(Record{batch.record(next).value, batch.record(next).timestamp});
        }
        const uint8_t* p = batch.controlBytes() + control.offset;
        elements[c].push_back(Bytes(p, p + control.size));
      }
      for (; next < batch.numRecords(); ++next) {
        elements[c].push_back(Record{batch.record(next).value, batch.record(next).timestamp});
      }
      batchSizes.push_back(batch.numElements());
      recycle(b);
    }
    return taken;
  }
  InputGate& gate;
  std::vector<std::vector<Element>> elements;
  std::vector<size_t> batchSizes;
};

TEST(LocalChannelTest, RecordsAndControlElementsKeepTheirOrderPerChannel) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TaskWaker waker;
    InputGate gate(3, waker);
    BufferPool pool(kSegment, 1000);
    setStringBatches(pool);
    RecordWriter writer(localTargets(gate), pool, /*flushEveryRecord=*/false);
    Consumer consumer(gate);
    std::vector<std::vector<Element>> expected(3);
    std::mt19937 rng(seed);
    for (int i = 0; i < 3000; ++i) {
      const uint32_t what = rng() % 100;
      if (what < 90) {
        const int ch = static_cast<int>(rng() % 3);
        // Long strings too: they live on the heap, not in the slot.
        std::string value(rng() % 40, static_cast<char>('a' + i % 26));
        add(writer, ch, value, i);
        expected[ch].push_back(Record{value, i});
      } else if (what < 94) {
        writer.broadcastWatermark(Watermark{i});
        for (auto& e : expected) e.push_back(watermarkBytes(i));
      } else if (what < 96) {
        writer.broadcastWatermarkStatus(WatermarkStatus::kIdle);
        for (auto& e : expected) e.push_back(Bytes{3, 1});
      } else if (what < 97) {
        const Bytes barrier = {4, 9, 8, 7, static_cast<uint8_t>(i)};
        writer.broadcastBarrier(barrier.data(), barrier.size());
        for (auto& e : expected) e.push_back(barrier);
      } else if (what < 98) {
        writer.flushAll();
        EXPECT_FALSE(writer.hasPendingData());
      }
      if (rng() % 11 == 0) consumer.drain();
    }
    writer.broadcastEndOfPartition();
    EXPECT_FALSE(writer.hasPendingData());
    for (auto& e : expected) e.push_back(Bytes{5});
    consumer.drain();
    for (int c = 0; c < 3; ++c) {
      SCOPED_TRACE("channel " + std::to_string(c));
      ASSERT_EQ(consumer.elements[c].size(), expected[c].size());
      for (size_t k = 0; k < expected[c].size(); ++k) {
        ASSERT_EQ(consumer.elements[c][k], expected[c][k]) << "element " << k;
      }
    }
    for (size_t n : consumer.batchSizes) EXPECT_LE(n, 16u) << "a batch holds at most 16 elements";
    EXPECT_EQ(pool.usedSegments(), 0) << "every batch went back to the pool";
  }
}

TEST(LocalChannelTest, BufferTimeoutZeroHandsOverEveryRecordAndControlElement) {
  TaskWaker waker;
  InputGate gate(2, waker);
  BufferPool pool(kSegment, 8);
  setStringBatches(pool);
  RecordWriter writer(localTargets(gate), pool, /*flushEveryRecord=*/true);
  Consumer consumer(gate);
  add(writer, 1, "x", 1);
  EXPECT_FALSE(writer.hasPendingData());
  EXPECT_EQ(consumer.drain(), 1);
  writer.broadcastWatermark(Watermark{7});
  EXPECT_EQ(consumer.drain(), 2);
  ASSERT_EQ(consumer.elements[1].size(), 2u);
  EXPECT_EQ(consumer.elements[1][0], Element(Record{"x", 1}));
  EXPECT_EQ(consumer.elements[1][1], Element(watermarkBytes(7)));
  EXPECT_EQ(consumer.elements[0], std::vector<Element>{Element(watermarkBytes(7))});
}

// One writer, a local and a remote channel: the local one gets the records
// and controls typed, the remote one the framed bytes of the same elements.
TEST(LocalChannelTest, LocalAndRemoteChannelsOfOneWriterEachGetTheirForm) {
  TaskWaker waker;
  InputGate local(1, waker);
  InputGate remote(1, waker);  // stands for the data plane's producer channel
  BufferPool pool(kSegment, 16);
  setStringBatches(pool);
  RecordWriter writer({{&local, 0, true}, {&remote, 0, false}}, pool, false);
  EXPECT_TRUE(writer.isLocal(0));
  EXPECT_FALSE(writer.isLocal(1));
  EXPECT_FALSE(writer.allLocal());
  add(writer, 0, "typed", 3);
  const Bytes record = {9, 9, 9};
  writer.emit(1, record.data(), record.size());
  writer.broadcastWatermark(Watermark{5});
  writer.broadcastEndOfPartition();

  Consumer consumer(local);
  consumer.drain();
  EXPECT_EQ(consumer.elements[0],
            (std::vector<Element>{Record{"typed", 3}, watermarkBytes(5), Bytes{5}}));

  Bytes wire;
  int c;
  Buffer b;
  while (remote.poll(c, b)) {
    EXPECT_EQ(b.batch, nullptr);
    wire.insert(wire.end(), b.data, b.data + b.size);
    recycle(b);
  }
  Bytes expected = {3, 0, 0, 0, 9, 9, 9, 9, 0, 0, 0};
  const Bytes wm = watermarkBytes(5);
  expected.insert(expected.end(), wm.begin(), wm.end());
  expected.insert(expected.end(), {1, 0, 0, 0, 5});
  EXPECT_EQ(wire, expected);
  EXPECT_EQ(pool.usedSegments(), 0);
}

// A producer done with its record (a flatMap's collector, a source) hands it
// to the network output as an rvalue: it is moved into the batch, with its
// timestamp. Short and heap-allocated values alike arrive whole, also after
// the batches were recycled and refilled (the slots' old storage went back
// to the producer's record); a broadcast copies into every channel; a
// record given as const& is left as it was.
TEST(LocalChannelTest, RecordsMovedIntoBatchesArriveWholeAndBroadcastsCopy) {
  TaskWaker waker;
  InputGate gate(2, waker);
  BufferPool pool(kSegment, 8);  // 8 batches of 16: the consumer must recycle
  setStringBatches(pool);
  RecordWriter writer(localTargets(gate), pool, false);
  internal::NetworkOutput<std::string> forward(
      writer, std::make_unique<internal::FirstChannelSelector<std::string>>());
  internal::NetworkOutput<std::string> broadcast(
      writer, std::make_unique<internal::BroadcastSelector<std::string>>());

  Consumer consumer(gate);
  std::vector<std::vector<Element>> expected(2);
  StreamRecord<std::string> scratch;
  int64_t forwarded = 0;
  int64_t broadcasted = 0;
  for (int64_t i = 0; i < 200; ++i) {
    // Alternately short (in-place) and long (heap) strings.
    const std::string value =
        i % 2 == 0 ? std::to_string(i) : std::string(20 + i % 30, static_cast<char>('a' + i % 26));
    scratch.value = value;
    scratch.setTimestamp(i);
    if (i % 7 == 0) {
      broadcast.collect(std::move(scratch));
      ++broadcasted;
      expected[0].push_back(Record{value, i});
      expected[1].push_back(Record{value, i});
    } else if (i % 11 == 0) {
      const StreamRecord<std::string> kept(value, i);
      forward.collect(kept);
      ++forwarded;
      EXPECT_EQ(kept.value, value) << "collect(const&) does not move";
      expected[0].push_back(Record{value, i});
    } else if (i % 5 == 0) {
      // A value and its timestamp, put straight into the batch.
      forward.collectValue(std::string(value), true, i, scratch);
      ++forwarded;
      expected[0].push_back(Record{value, i});
    } else if (i % 13 == 0) {
      // Broadcast takes the value through the scratch record.
      broadcast.collectValue(std::string(value), true, i, scratch);
      ++broadcasted;
      expected[0].push_back(Record{value, i});
      expected[1].push_back(Record{value, i});
    } else {
      forward.collect(std::move(scratch));
      ++forwarded;
      expected[0].push_back(Record{value, i});
    }
    if (i % 40 == 39) consumer.drain();
  }
  writer.broadcastEndOfPartition();
  consumer.drain();
  for (auto& e : expected) e.push_back(Bytes{5});
  EXPECT_EQ(consumer.elements, expected);
  EXPECT_EQ(forward.recordsCounted(), forwarded);
  EXPECT_EQ(broadcast.recordsCounted(), broadcasted);
  EXPECT_EQ(pool.usedSegments(), 0);
}

// A pool of one buffer: the 17th record waits until the consumer recycles
// the full batch.
TEST(LocalChannelTest, WriterBlocksOnAFullPoolAndResumesWhenTheConsumerRecycles) {
  TaskWaker waker;
  InputGate gate(1, waker);
  BufferPool pool(kSegment, 1);
  setStringBatches(pool);
  RecordWriter writer(localTargets(gate), pool, false);
  for (int i = 0; i < 16; ++i) add(writer, 0, "r" + std::to_string(i), i);
  EXPECT_FALSE(writer.hasPendingData()) << "a full batch is handed over at once";
  std::latch started(1);
  std::atomic<bool> added{false};
  std::thread t([&] {
    started.count_down();
    add(writer, 0, "late", 16);
    added.store(true);
  });
  started.wait();
  EXPECT_FALSE(added.load()) << "the producer must wait for a free batch";
  Consumer consumer(gate);
  EXPECT_EQ(consumer.drain(), 1);
  t.join();
  EXPECT_TRUE(added.load());
  writer.flushAll();
  consumer.drain();
  ASSERT_EQ(consumer.elements[0].size(), 17u);
  EXPECT_EQ(consumer.elements[0].back(), Element(Record{"late", 16}));
  EXPECT_EQ(pool.allocatedSegments(), 1);
}

TEST(LocalChannelTest, CancelWhileBlockedThrowsTaskCancelledException) {
  TaskWaker waker;
  InputGate gate(1, waker);
  BufferPool pool(kSegment, 1);
  setStringBatches(pool);
  RecordWriter writer(localTargets(gate), pool, false);
  for (int i = 0; i < 16; ++i) add(writer, 0, "r", i);
  std::latch started(1);
  std::string outcome = "returned normally";
  std::thread t([&] {
    started.count_down();
    try {
      add(writer, 0, "blocked", 99);
    } catch (const TaskCancelledException&) {
      outcome = "TaskCancelledException";
    } catch (const std::exception& e) {
      outcome = std::string("another exception: ") + e.what();
    }
  });
  started.wait();
  pool.cancel();
  t.join();
  EXPECT_EQ(outcome, "TaskCancelledException");
  EXPECT_ANY_THROW(writer.broadcastWatermark(Watermark{1}));
  writer.releaseAll();
  gate.releaseAll();
  EXPECT_EQ(pool.usedSegments(), 0) << "the cancel path hands every batch back";
}

TEST(LocalChannelTest, ReleaseAllRecyclesBatchesBeingFilledAndQueued) {
  TaskWaker waker;
  InputGate gate(2, waker);
  BufferPool pool(kSegment, 8);
  setStringBatches(pool);
  RecordWriter writer(localTargets(gate), pool, false);
  for (int i = 0; i < 20; ++i) add(writer, i % 2, "v", i);  // 10 per channel: partly filled
  writer.broadcastWatermark(Watermark{1});
  writer.flushAll();                                   // queued at the gate
  for (int i = 0; i < 5; ++i) add(writer, 0, "w", i);  // being filled
  EXPECT_TRUE(writer.hasPendingData());
  EXPECT_EQ(pool.usedSegments(), 3);
  writer.releaseAll();
  EXPECT_FALSE(writer.hasPendingData());
  gate.releaseAll();
  EXPECT_EQ(pool.usedSegments(), 0);
  int c;
  Buffer b;
  EXPECT_FALSE(gate.poll(c, b));
}

// Segments and batches share the pool's bound: an idle buffer of one kind
// makes way for the other instead of blocking.
TEST(BufferPoolBatchTest, SegmentsAndBatchesShareTheBound) {
  BufferPool pool(kSegment, 2);
  setStringBatches(pool);
  uint8_t* s1 = pool.request();
  uint8_t* s2 = pool.request();
  pool.recycle(s1);
  pool.recycle(s2);
  EXPECT_EQ(pool.allocatedSegments(), 2);
  ElementBatch* a = pool.requestBatch();
  ElementBatch* b = pool.requestBatch();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(pool.allocatedSegments(), 2) << "two idle segments made way for the batches";
  EXPECT_EQ(pool.usedSegments(), 2);
  std::atomic<bool> got{false};
  std::thread t([&] {
    uint8_t* s = pool.request();
    got.store(true);
    pool.recycle(s);
  });
  std::this_thread::yield();
  pool.recycleBatch(a);
  t.join();
  EXPECT_TRUE(got.load());
  pool.recycleBatch(b);
  EXPECT_EQ(pool.usedSegments(), 0);
  EXPECT_LE(pool.allocatedSegments(), 2);
}

TEST(BufferPoolBatchTest, RecycledBatchesAreEmptyAndReused) {
  BufferPool pool(kSegment, 1);
  setStringBatches(pool);
  auto* first = static_cast<Batch*>(pool.requestBatch());
  first->add(StreamRecord<std::string>(std::string(100, 'z'), 1));
  const Bytes wm = watermarkBytes(1);
  first->addControl(wm.data(), wm.size());
  pool.recycleBatch(first);
  auto* again = static_cast<Batch*>(pool.requestBatch());
  EXPECT_EQ(again, first) << "a recycled batch is handed out again";
  EXPECT_TRUE(again->empty());
  EXPECT_EQ(again->numRecords(), 0u);
  EXPECT_TRUE(again->controls().empty());
  pool.recycleBatch(again);
}

// A batch is full when its records and control elements fill its capacity;
// reset() makes the whole capacity free again, and records written into
// reused slots read back as written (long strings included).
TEST(TypedElementBatchTest, ControlElementsCountTowardsFullAndResetFreesThem) {
  Batch batch(kBatchBytes);
  ASSERT_EQ(batch.capacity(), 16u);
  const Bytes wm = watermarkBytes(7);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const size_t controls = static_cast<size_t>(round * 3);
    for (size_t i = 0; i < controls; ++i) batch.addControl(wm.data(), wm.size());
    std::vector<std::string> values;
    while (!batch.full()) {
      values.push_back(std::string(round == 1 ? 50 : 3, static_cast<char>('a' + values.size())));
      batch.add(StreamRecord<std::string>(values.back(), static_cast<int64_t>(values.size())));
    }
    EXPECT_EQ(values.size(), 16 - controls);
    EXPECT_EQ(batch.numElements(), 16u);
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(batch.record(i).value, values[i]);
      EXPECT_EQ(batch.record(i).timestamp, static_cast<int64_t>(i + 1));
    }
    batch.reset();
    EXPECT_FALSE(batch.full());
    EXPECT_TRUE(batch.empty());
  }
}

// Free batches go out oldest first, so a batch the consumer has just
// recycled is not refilled while another one has waited longer.
TEST(BufferPoolBatchTest, FreeBatchesAreHandedOutOldestFirst) {
  BufferPool pool(kSegment, 3);
  setStringBatches(pool);
  ElementBatch* a = pool.requestBatch();
  ElementBatch* b = pool.requestBatch();
  ElementBatch* c = pool.requestBatch();
  ASSERT_NE(a, b);
  ASSERT_NE(b, c);
  ASSERT_NE(a, c);
  pool.recycleBatch(b);
  pool.recycleBatch(a);
  pool.recycleBatch(c);
  EXPECT_EQ(pool.requestBatch(), b);
  EXPECT_EQ(pool.requestBatch(), a);
  pool.recycleBatch(b);
  EXPECT_EQ(pool.requestBatch(), c);
  EXPECT_EQ(pool.requestBatch(), b);
  EXPECT_EQ(pool.usedSegments(), 3);
  pool.recycleBatch(a);
  pool.recycleBatch(b);
  pool.recycleBatch(c);
  EXPECT_EQ(pool.usedSegments(), 0);
}

}  // namespace
}  // namespace local_channel_test
