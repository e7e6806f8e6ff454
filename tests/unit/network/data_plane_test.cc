// The data plane between two DataPlanes in one process over real loopback
// sockets: every byte arrives in order per channel, credit bounds what is in
// flight (a consumer that stops recycling stops its producer), requests may
// come before the producer registers, and releasing an attempt frees its
// buffers while other attempts go on.
#include "cluster/network/data_plane.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "sluice/core/status.h"
#include "unit/network/harness.h"

namespace data_plane_test {
namespace {

using namespace network_harness;

TEST(DataPlaneTest, EveryByteArrivesInOrderOnEachChannelAndEveryBufferComesBack) {
  DataPlane producerSide(options());
  DataPlane consumerSide(options());
  constexpr int kChannels = 3;
  constexpr int kPerChannel = 400;
  constexpr int kPool = 4;
  Consumer consumer(kChannels);
  consumerSide.consumeRemote(inputs("job", 1, kChannels, producerSide.port()), consumer.gate);
  Producer producer(sinks(producerSide, "job", 1, kChannels), kPerChannel, kPool);
  producer.start();
  consumer.receiveAll(kPerChannel);
  producer.join();
  EXPECT_EQ(consumer.received, kChannels * kPerChannel);
  EXPECT_EQ(producer.pushed, kChannels * kPerChannel);
  EXPECT_LE(producer.pool.allocatedSegments(), kPool);
  // The last writes recycle once the socket took them.
  EXPECT_TRUE(eventually([&] { return producer.recycled == producer.pushed; }));
  EXPECT_EQ(consumerSide.openConnections(), 1)
      << "one connection for all channels from one producer";
  EXPECT_EQ(producerSide.openConnections(), 1);
  EXPECT_EQ(consumerSide.receiveMemoryInUse(), (kChannels * 2 + 8) * kSegment);

  producerSide.releaseAttempt("job", 1);
  consumerSide.releaseAttempt("job", 1);
  EXPECT_TRUE(eventually([&] { return consumerSide.receiveMemoryInUse() == 0; }));
}

TEST(DataPlaneTest, AConsumerThatStopsRecyclingBoundsWhatIsInFlightThenEverythingFlows) {
  constexpr int kExclusive = 2;
  constexpr int kFloating = 8;
  constexpr int kPool = 16;
  constexpr int kTotal = 100;
  DataPlane producerSide(options(kExclusive, kFloating));
  DataPlane consumerSide(options(kExclusive, kFloating));
  Producer producer(sinks(producerSide, "job", 1, 1), kTotal, kPool);
  producer.start();
  // Buffers pushed before anyone asked for them just queue: the producer
  // fills its pool and blocks.
  ASSERT_TRUE(eventually([&] { return producer.pushed == kPool && producer.inRequest; }));

  Consumer consumer(1);
  consumerSide.consumeRemote(inputs("job", 1, 1, producerSide.port()), consumer.gate);
  // The consumer takes buffers but never recycles them: credit runs out
  // after the exclusive buffers plus the floating ones its backlog asked for.
  std::vector<Buffer> held;
  auto takeAvailable = [&] {
    int ch = 0;
    Buffer b;
    while (consumer.gate.poll(ch, b)) {
      consumer.check(ch, b);
      held.push_back(b);
    }
  };
  ASSERT_TRUE(eventually([&] {
    takeAvailable();
    return held.size() == kExclusive + kFloating &&
           producer.pushed == kPool + kExclusive + kFloating && producer.inRequest;
  })) << "held "
      << held.size() << " pushed " << producer.pushed;
  // A round trip through both io threads: nothing else was on its way.
  consumerSide.releaseAttempt("unrelated", 1);
  producerSide.releaseAttempt("unrelated", 1);
  takeAvailable();
  EXPECT_EQ(held.size(), static_cast<size_t>(kExclusive + kFloating));
  EXPECT_EQ(producer.pushed, kPool + kExclusive + kFloating) << "the producer is backpressured";
  EXPECT_LE(producer.pool.allocatedSegments(), kPool);

  for (auto& b : held) b.pool->recycle(b.data);
  consumer.receiveAll(kTotal);
  producer.join();
  EXPECT_EQ(consumer.received, kTotal);
  producerSide.releaseAttempt("job", 1);
  consumerSide.releaseAttempt("job", 1);
  EXPECT_TRUE(eventually([&] { return consumerSide.receiveMemoryInUse() == 0; }));
}

TEST(DataPlaneTest, ManyChannelsShareTheFloatingBuffersWithinTheBound) {
  constexpr int kChannels = 4;
  constexpr int kExclusive = 1;
  constexpr int kFloating = 3;
  DataPlane producerSide(options(kExclusive, kFloating));
  DataPlane consumerSide(options(kExclusive, kFloating));
  Consumer consumer(kChannels);
  consumerSide.consumeRemote(inputs("job", 1, kChannels, producerSide.port()), consumer.gate);
  Producer producer(sinks(producerSide, "job", 1, kChannels), 200, 8);
  producer.start();
  // Hold whatever arrives while more is there; recycle once the gate is
  // empty (a slow task). What is held never exceeds the credit bound.
  size_t maxHeld = 0;
  std::vector<Buffer> held;
  int ch = 0;
  Buffer b;
  while (consumer.received < kChannels * 200) {
    if (!consumer.gate.poll(ch, b)) {
      for (auto& h : held) h.pool->recycle(h.data);
      held.clear();
      ASSERT_TRUE(consumer.take(ch, b));
    }
    consumer.check(ch, b);
    held.push_back(b);
    maxHeld = std::max(maxHeld, held.size());
  }
  for (auto& h : held) h.pool->recycle(h.data);
  producer.join();
  EXPECT_LE(maxHeld, static_cast<size_t>(kChannels * kExclusive + kFloating));
  producerSide.releaseAttempt("job", 1);
  consumerSide.releaseAttempt("job", 1);
}

TEST(DataPlaneTest, ARequestBeforeTheProducerRegisteredWaitsForIt) {
  DataPlane producerSide(options());
  DataPlane consumerSide(options());
  Consumer consumer(2);
  consumerSide.consumeRemote(inputs("job", 4, 2, producerSide.port()), consumer.gate);
  ASSERT_TRUE(eventually([&] { return producerSide.openConnections() == 1; }));
  Producer producer(sinks(producerSide, "job", 4, 2), 50, 4);
  producer.start();
  consumer.receiveAll(50);
  producer.join();
  EXPECT_EQ(consumer.received, 100);
  producerSide.releaseAttempt("job", 4);
  consumerSide.releaseAttempt("job", 4);
}

TEST(DataPlaneTest, ReleasingAnAttemptDuringTrafficRecyclesItsBuffersAndLeavesTheOtherRunning) {
  DataPlane producerSide(options());
  DataPlane consumerSide(options());
  std::vector<std::string> failures;
  std::mutex failuresMu;
  auto listener = [&](const std::string& job, int attempt, const std::string& error) {
    std::lock_guard lock(failuresMu);
    failures.push_back(job + "/" + std::to_string(attempt) + ": " + error);
  };
  producerSide.setFailureListener(listener);
  consumerSide.setFailureListener(listener);

  Consumer old(2);
  Consumer current(2);
  consumerSide.consumeRemote(inputs("job", 1, 2, producerSide.port()), old.gate);
  consumerSide.consumeRemote(inputs("job", 2, 2, producerSide.port()), current.gate);
  const size_t bothGates = 2 * (2 * 2 + 8) * kSegment;
  EXPECT_EQ(consumerSide.receiveMemoryInUse(), bothGates);
  Producer oldProducer(sinks(producerSide, "job", 1, 2), 5000, 4);
  Producer producer(sinks(producerSide, "job", 2, 2), 300, 4);
  oldProducer.start();
  producer.start();

  std::atomic<bool> stopOld{false};
  std::thread oldTask([&] { old.receiveAll(5000, &stopOld); });
  ASSERT_TRUE(eventually([&] { return old.received >= 50; }));
  producerSide.releaseAttempt("job", 1);
  consumerSide.releaseAttempt("job", 1);
  // Once released, the producer's pushes are recycled at once: it runs to
  // its end, and no buffer of it stays behind in the data plane.
  oldProducer.join();
  EXPECT_EQ(oldProducer.recycled, oldProducer.pushed);
  stopOld = true;
  oldTask.join();
  old.gate.releaseAll();  // as a cancelled task does
  EXPECT_TRUE(eventually([&] { return consumerSide.receiveMemoryInUse() == bothGates / 2; }));

  current.receiveAll(300);
  producer.join();
  EXPECT_EQ(current.received, 600);
  producerSide.releaseAttempt("job", 2);
  consumerSide.releaseAttempt("job", 2);
  EXPECT_TRUE(eventually([&] { return consumerSide.receiveMemoryInUse() == 0; }));
  std::lock_guard lock(failuresMu);
  EXPECT_TRUE(failures.empty()) << "a release is no failure: " << failures.front();
  EXPECT_EQ(consumerSide.openConnections(), 1);
}

TEST(DataPlaneTest, ARequestForAnAlreadyReleasedAttemptIsAnsweredWithoutFailure) {
  DataPlane producerSide(options());
  DataPlane consumerSide(options());
  std::atomic<int> failures{0};
  consumerSide.setFailureListener([&](const std::string&, int, const std::string&) { ++failures; });
  producerSide.releaseAttempt("job", 1);
  Consumer consumer(1);
  consumerSide.consumeRemote(inputs("job", 1, 1, producerSide.port()), consumer.gate);
  // And a sink asked for after the release drops what it is given.
  BufferPool pool(kSegment, 1);
  uint8_t* seg = pool.request();
  producerSide.producerChannel(key("job", 1, 0))->push(0, Buffer{seg, 10, &pool});
  EXPECT_NE(pool.request(), nullptr) << "the dropped buffer came back";
  // A live attempt on the same connection still works.
  Consumer live(1);
  consumerSide.consumeRemote(inputs("job", 2, 1, producerSide.port()), live.gate);
  Producer producer(sinks(producerSide, "job", 2, 1), 20, 2);
  producer.start();
  live.receiveAll(20);
  producer.join();
  EXPECT_EQ(failures, 0);
  int ch = 0;
  Buffer b;
  EXPECT_FALSE(consumer.gate.poll(ch, b));
  consumerSide.releaseAttempt("job", 1);
  consumerSide.releaseAttempt("job", 2);
  producerSide.releaseAttempt("job", 2);
}

TEST(DataPlaneTest, ReceiveMemoryOverTheCapIsRefusedNamingTheSizes) {
  auto o = options(2, 8);
  o.maxNetworkMemory = 20 * kSegment;
  DataPlane plane(o);
  Consumer a(5);
  try {
    plane.consumeRemote(inputs("job", 1, 5, plane.port()), a.gate);  // 5*2+8 = 18 segments: fits
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  Consumer b(1);
  try {
    plane.consumeRemote(inputs("job", 1, 1, plane.port()), b.gate);  // 10 more: over
    FAIL() << "expected a SluiceException";
  } catch (const sluice::SluiceException& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(std::to_string(10 * kSegment)), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(20 * kSegment)), std::string::npos) << what;
  }
  plane.releaseAttempt("job", 1);
}

TEST(DataPlaneTest, APortInUseIsRefusedNamingHostAndPort) {
  DataPlane first(options());
  auto o = options();
  o.port = first.port();
  try {
    DataPlane second(o);
    FAIL() << "expected a SluiceException";
  } catch (const sluice::SluiceException& e) {
    EXPECT_NE(
        std::string(e.what()).find("cannot listen on 127.0.0.1:" + std::to_string(first.port())),
        std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace data_plane_test
