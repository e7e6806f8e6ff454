// The data plane against hostile or dying peers: garbage on the data port,
// a producer that sends without credit or on a channel nobody requested, and
// a producer TaskManager that goes away mid-stream. Each closes that one
// connection (the failure listener names the peer); the process goes on
// serving real pairs.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cluster/network/data_plane.h"
#include "cluster/network/frame.h"
#include "unit/network/harness.h"

namespace data_plane_fault_test {
namespace {

using namespace network_harness;
namespace net = sluice::cluster::network;

// A raw TCP socket: plays a broken consumer or a broken producer.
class RawSocket {
 public:
  explicit RawSocket(int fd) : fd_(fd) {
    timeval tv{60, 0};  // a hang fails the test instead of blocking ctest
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawSocket() { close(); }
  static RawSocket connectTo(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return RawSocket(fd);
  }
  RawSocket(RawSocket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  void send(const std::vector<uint8_t>& bytes) {
    // The peer may already have closed: MSG_NOSIGNAL, and errors are fine.
    [[maybe_unused]] auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  // Reads until the peer closes; false on timeout.
  bool waitForClose() {
    uint8_t buf[4096];
    for (;;) {
      auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }
  // Reads one whole control frame.
  bool readFrame(net::Frame& frame) {
    net::FrameDecoder d(static_cast<uint32_t>(kSegment));
    for (;;) {
      uint8_t byte = 0;  // one byte at a time: never reads past the frame
      if (::recv(fd_, &byte, 1, 0) != 1) return false;
      std::span<const uint8_t> in(&byte, 1);
      auto r = d.next(in);
      if (r == net::FrameDecoder::Result::kControl) {
        frame = d.frame();
        return true;
      }
      if (r != net::FrameDecoder::Result::kNeedMore) return false;
    }
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

// A listening socket on an ephemeral loopback port.
class RawListener {
 public:
  RawListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 4), 0);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~RawListener() { ::close(fd_); }
  int port() const { return port_; }
  RawSocket accept() { return RawSocket(::accept(fd_, nullptr, nullptr)); }

 private:
  int fd_;
  int port_ = 0;
};

// Records failure reports.
struct Failures {
  void attach(DataPlane& plane) {
    plane.setFailureListener([this](const std::string& job, int attempt, const std::string& error) {
      std::lock_guard lock(mu);
      reports.push_back(job + "/" + std::to_string(attempt) + ": " + error);
    });
  }
  size_t count() {
    std::lock_guard lock(mu);
    return reports.size();
  }
  std::string first() {
    std::lock_guard lock(mu);
    return reports.empty() ? std::string() : reports.front();
  }
  std::mutex mu;
  std::vector<std::string> reports;
};

void transferWorks(DataPlane& producerSide, DataPlane& consumerSide, const std::string& job) {
  Consumer consumer(2);
  consumerSide.consumeRemote(inputs(job, 1, 2, producerSide.port()), consumer.gate);
  Producer producer(sinks(producerSide, job, 1, 2), 30, 4);
  producer.start();
  consumer.receiveAll(30);
  producer.join();
  EXPECT_EQ(consumer.received, 60);
  producerSide.releaseAttempt(job, 1);
  consumerSide.releaseAttempt(job, 1);
}

TEST(DataPlaneFaultTest, GarbageOnTheDataPortClosesThatConnectionOnly) {
  DataPlane producerSide(options());
  DataPlane consumerSide(options());
  std::mt19937 rng(99);

  // Random bytes.
  {
    auto s = RawSocket::connectTo(producerSide.port());
    std::vector<uint8_t> junk(256);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    junk[0] = 'X';
    s.send(junk);
    EXPECT_TRUE(s.waitForClose());
  }
  // A valid header announcing a huge payload.
  {
    auto s = RawSocket::connectTo(producerSide.port());
    auto h =
        net::encodeHeader(net::FrameHeader{net::FrameType::kPartitionRequest, 0x7FFFFFFF, 0, 2});
    s.send(std::vector<uint8_t>(h.begin(), h.end()));
    EXPECT_TRUE(s.waitForClose());
  }
  // Valid frames, wrong protocol: a Credit for a channel never requested, a
  // Buffer from a consumer.
  for (int variant = 0; variant < 2; ++variant) {
    auto s = RawSocket::connectTo(producerSide.port());
    std::vector<uint8_t> bytes;
    if (variant == 0) {
      net::appendCredit(bytes, 17, 3);
    } else {
      std::vector<uint8_t> payload(10, 1);
      net::appendBuffer(bytes, 0, 0, payload);
    }
    s.send(bytes);
    EXPECT_TRUE(s.waitForClose()) << variant;
  }
  // A frame cut short, then the client goes away.
  {
    auto s = RawSocket::connectTo(producerSide.port());
    std::vector<uint8_t> bytes;
    net::appendPartitionRequest(bytes, 0, 2, key("job", 1, 0));
    bytes.resize(bytes.size() - 5);
    s.send(bytes);
    s.close();
  }
  EXPECT_TRUE(eventually([&] { return producerSide.openConnections() == 0; }));
  // The process still serves a real pair.
  transferWorks(producerSide, consumerSide, "after-garbage");
}

// A fake producer TaskManager: accepts the consumer's connection and reads
// its PartitionRequest.
struct FakeProducer {
  RawListener listener;
  std::unique_ptr<RawSocket> socket;
  net::Frame request;

  void acceptRequest() {
    socket = std::make_unique<RawSocket>(listener.accept());
    ASSERT_TRUE(socket->readFrame(request));
    ASSERT_EQ(request.header.type, net::FrameType::kPartitionRequest);
  }
};

TEST(DataPlaneFaultTest, AProducerSendingWithoutCreditFailsTheAttemptNamingThePeer) {
  DataPlane consumerSide(options(2, 0));
  Failures failures;
  failures.attach(consumerSide);
  FakeProducer fake;
  Consumer consumer(1);
  consumerSide.consumeRemote(inputs("job", 5, 1, fake.listener.port()), consumer.gate);
  fake.acceptRequest();
  EXPECT_EQ(fake.request.key, key("job", 5, 0));
  EXPECT_EQ(fake.request.header.aux, 2u) << "initial credit = exclusive buffers";
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> payload(100, 7);
  for (int i = 0; i < 3; ++i) net::appendBuffer(bytes, fake.request.header.channel, 0, payload);
  fake.socket->send(bytes);
  EXPECT_TRUE(fake.socket->waitForClose());
  ASSERT_TRUE(eventually([&] { return failures.count() == 1; }));
  std::string report = failures.first();
  EXPECT_NE(report.find("job/5"), std::string::npos) << report;
  EXPECT_NE(report.find("127.0.0.1:" + std::to_string(fake.listener.port())), std::string::npos)
      << report;
  EXPECT_NE(report.find("without credit"), std::string::npos) << report;
  // The two credited buffers were delivered before the violation.
  int ch = 0;
  Buffer b;
  int delivered = 0;
  while (consumer.gate.poll(ch, b)) {
    EXPECT_EQ(b.size, 100u);
    b.pool->recycle(b.data);
    ++delivered;
  }
  EXPECT_EQ(delivered, 2);
  consumerSide.releaseAttempt("job", 5);
  EXPECT_TRUE(eventually([&] { return consumerSide.receiveMemoryInUse() == 0; }));
}

TEST(DataPlaneFaultTest, AProducerSendingOnAnUnknownChannelOrGarbageIsCut) {
  for (int variant = 0; variant < 2; ++variant) {
    DataPlane consumerSide(options());
    Failures failures;
    failures.attach(consumerSide);
    FakeProducer fake;
    Consumer consumer(1);
    consumerSide.consumeRemote(inputs("job", 1, 1, fake.listener.port()), consumer.gate);
    fake.acceptRequest();
    std::vector<uint8_t> bytes;
    if (variant == 0) {
      std::vector<uint8_t> payload(10, 1);
      net::appendBuffer(bytes, fake.request.header.channel + 5, 0, payload);
    } else {
      bytes.assign(40, 0xEE);
    }
    fake.socket->send(bytes);
    EXPECT_TRUE(fake.socket->waitForClose());
    ASSERT_TRUE(eventually([&] { return failures.count() == 1; }));
    EXPECT_NE(failures.first().find(variant == 0 ? "unknown channel id" : "bad magic"),
              std::string::npos)
        << failures.first();
    consumerSide.releaseAttempt("job", 1);
  }
}

TEST(DataPlaneFaultTest, AProducerTaskManagerDyingMidStreamFailsTheConsumerNamingIt) {
  auto producerSide = std::make_unique<DataPlane>(options());
  const int producerPort = producerSide->port();
  DataPlane consumerSide(options());
  Failures failures;
  failures.attach(consumerSide);
  Consumer consumer(2);
  consumerSide.consumeRemote(inputs("job", 1, 2, producerPort), consumer.gate);
  Producer producer(sinks(*producerSide, "job", 1, 2), 1000000, 4);
  producer.start();
  std::atomic<bool> stop{false};
  std::thread task([&] { consumer.receiveAll(1000000, &stop); });
  ASSERT_TRUE(eventually([&] { return consumer.received >= 40; }));
  // The producer process goes: its task stops, its data plane closes.
  producer.pool.cancel();
  producer.join();
  producerSide.reset();
  ASSERT_TRUE(eventually([&] { return failures.count() == 1; }));
  std::string report = failures.first();
  EXPECT_NE(report.find("job/1"), std::string::npos) << report;
  EXPECT_NE(report.find("127.0.0.1:" + std::to_string(producerPort)), std::string::npos) << report;
  stop = true;
  task.join();
  consumer.gate.releaseAll();
  consumerSide.releaseAttempt("job", 1);
  EXPECT_TRUE(eventually([&] { return consumerSide.receiveMemoryInUse() == 0; }));
  EXPECT_EQ(failures.count(), 1u) << "once per attempt";
}

TEST(DataPlaneFaultTest, AConsumerGoingAwayFailsTheProducersAttemptAndRecyclesItsQueue) {
  DataPlane producerSide(options());
  Failures failures;
  failures.attach(producerSide);
  auto consumerSide = std::make_unique<DataPlane>(options());
  auto consumer = std::make_unique<Consumer>(1);
  consumerSide->consumeRemote(inputs("job", 3, 1, producerSide.port()), consumer->gate);
  // The consumer never recycles: the producer fills its pool and blocks.
  Producer producer(sinks(producerSide, "job", 3, 1), 1000000, 6);
  producer.start();
  // More pushed than the pool holds: the channel was requested and sent.
  ASSERT_TRUE(eventually([&] { return producer.pushed > 6; }));
  // The consumer TaskManager goes (its gate's buffers are never touched again).
  consumerSide.reset();
  ASSERT_TRUE(eventually([&] { return failures.count() == 1; }));
  EXPECT_NE(failures.first().find("job/3"), std::string::npos) << failures.first();
  // The dropped channel recycles what it held and what it is given now.
  producer.pool.cancel();
  producer.join();
  EXPECT_TRUE(eventually([&] { return producer.recycled == producer.pushed; }));
  producerSide.releaseAttempt("job", 3);
}

}  // namespace
}  // namespace data_plane_fault_test
