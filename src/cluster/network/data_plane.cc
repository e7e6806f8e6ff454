// The data plane's io: the only file that includes Asio (see CMakeLists.txt).
//
// Everything below except ProducerChannel::push(), the receive pools' recycle
// listeners and the public entry points runs on the io thread, so the
// connection, channel and credit state needs no lock. What other threads
// touch: a ProducerChannel's queue (its mutex), the recycle counters (atomics)
// and the registry guarded by Impl::mu (producer channels, released and
// failed attempts, the failure listener, the memory budget).
//
// Receive-side accounting, per remote input channel (all on the io thread):
//   credit the producer may still use  = announced + pendingAnnounce
//   free segments reserved for it      = exclusiveFree + reservedFloating
// and the two are equal at all times, so every Buffer that arrives against a
// credit finds a segment, and BufferPool::request() never blocks here.
#include "cluster/network/data_plane.h"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>

#include <asio.hpp>

#include "core/logging.h"
#include "sluice/core/status.h"

namespace sluice::cluster {

using asio::ip::tcp;
using network::FrameDecoder;
using network::FrameHeader;
using network::FrameType;

namespace {

constexpr int kMaxBatch = 16;          // buffers per gathered write
constexpr size_t kStagingSize = 4096;  // headers and control frames are read here
constexpr int kSocketBufferBytes = 1 << 21;

using AttemptId = std::pair<std::string, int>;

// Untrusted text (a peer's error message) made safe for one log line.
std::string printable(std::string_view s) {
  std::string r;
  for (char c : s.substr(0, 512)) {
    auto u = static_cast<unsigned char>(c);
    r += (u >= 0x20 && u < 0x7F) ? c : '?';
  }
  return r;
}

void configureSocket(tcp::socket& s) {
  asio::error_code ignored;
  s.set_option(tcp::no_delay(true), ignored);
  s.set_option(asio::socket_base::keep_alive(true), ignored);
  s.set_option(asio::socket_base::send_buffer_size(kSocketBufferBytes), ignored);
  s.set_option(asio::socket_base::receive_buffer_size(kSocketBufferBytes), ignored);
}

}  // namespace

class Connection;
struct GateState;

// The producer end of one remote channel.
class ProducerChannel final : public runtime::BufferSink {
 public:
  ProducerChannel(DataPlane::Impl& plane, ChannelKey key, bool dropped)
      : plane_(plane), key(std::move(key)), dropped_(dropped) {}

  void push(int channel, runtime::Buffer buffer) override;

  // Io thread: whether a buffer waits, and the next one with the backlog
  // left behind it.
  bool hasQueued() {
    std::lock_guard lock(mu_);
    return !dropped_ && !queue_.empty();
  }
  bool pop(runtime::Buffer& buffer, size_t& backlog) {
    std::lock_guard lock(mu_);
    if (dropped_ || queue_.empty()) return false;
    buffer = queue_.front();
    queue_.pop_front();
    backlog = queue_.size();
    return true;
  }
  // Recycles what is queued; later pushes are recycled at once.
  void drop() {
    std::deque<runtime::Buffer> q;
    {
      std::lock_guard lock(mu_);
      dropped_ = true;
      q.swap(queue_);
    }
    for (auto& b : q) b.pool->recycle(b.data);
  }
  void clearNotify() {
    std::lock_guard lock(mu_);
    notifyPosted_ = false;
  }

  DataPlane::Impl& plane_;
  const ChannelKey key;
  // Io thread only.
  std::shared_ptr<Connection> conn;
  uint32_t id = 0;
  int64_t credit = 0;
  bool inReady = false;
  bool everBound = false;

 private:
  std::mutex mu_;
  std::deque<runtime::Buffer> queue_;
  bool dropped_;
  bool notifyPosted_ = false;
};

// The consumer end of one remote channel.
struct RecvChannel {
  RecvChannel(GateState* gate, ChannelKey key, int gateChannel, std::string host, int port,
              size_t segmentSize, int exclusive)
      : gate(gate),
        key(std::move(key)),
        gateChannel(gateChannel),
        host(std::move(host)),
        port(port),
        exclusive(segmentSize, exclusive),
        exclusiveFree(exclusive) {}

  GateState* const gate;
  const ChannelKey key;
  const int gateChannel;
  const std::string host;
  const int port;
  runtime::BufferPool exclusive;
  std::atomic<int> recycled{0};  // recycles not yet seen by the io thread
  // Io thread only.
  std::shared_ptr<Connection> conn;
  uint32_t id = 0;
  int exclusiveFree;
  int exclusiveInUse = 0;
  int reservedFloating = 0;
  int64_t announced = 0;        // credit the producer holds
  int64_t pendingAnnounce = 0;  // credit granted, not yet sent
  int64_t wanted = 0;           // floating buffers the backlog asks for
  bool live = false;            // registered on its connection
  bool released = false;
  bool inCreditList = false;
};

// One consumer gate's remote channels and floating pool.
struct GateState {
  GateState(runtime::InputGate* gate, std::string jobId, int attempt, size_t segmentSize,
            int floating, size_t memoryBytes)
      : gate(gate),
        jobId(std::move(jobId)),
        attempt(attempt),
        floating(segmentSize, floating),
        memoryBytes(memoryBytes),
        floatingFree(floating) {}

  runtime::InputGate* const gate;
  const std::string jobId;
  const int attempt;
  runtime::BufferPool floating;
  std::atomic<int> recycled{0};
  const size_t memoryBytes;
  std::vector<std::unique_ptr<RecvChannel>> channels;
  // Io thread only.
  int floatingFree;
  int floatingInUse = 0;
  size_t nextGrant = 0;  // round robin over channels for floating buffers
  bool released = false;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // kConsumer: this side connected and receives buffers; kProducer: accepted.
  enum class Role { kConsumer, kProducer };

  Connection(asio::io_context& io, tcp::socket socket, Role role, std::string peer,
             uint32_t segmentSize)
      : socket(std::move(socket)),
        resolver(io),
        role(role),
        peer(std::move(peer)),
        decoder(segmentSize) {}

  const char* describe() const {
    return role == Role::kConsumer ? "data connection to producer"
                                   : "data connection from consumer";
  }

  tcp::socket socket;
  tcp::resolver resolver;
  const Role role;
  const std::string peer;
  bool connected = false;
  bool closed = false;
  bool writing = false;

  // Reading.
  FrameDecoder decoder;
  std::array<uint8_t, kStagingSize> staging{};
  size_t begin = 0;
  size_t end = 0;
  std::vector<uint8_t> discard;  // payloads of channels this side already dropped
  RecvChannel* payloadChannel = nullptr;
  uint8_t* payloadDst = nullptr;
  runtime::BufferPool* payloadPool = nullptr;
  uint32_t payloadLength = 0;
  uint32_t payloadBacklog = 0;

  // Writing.
  std::vector<uint8_t> controlOut;
  std::vector<uint8_t> controlInFlight;
  std::array<network::HeaderBytes, kMaxBatch> headers{};
  std::vector<asio::const_buffer> gather;
  std::vector<runtime::Buffer> inflight;
  std::vector<ProducerChannel*> inflightOwners;
  std::vector<std::function<void()>> onWriteDone;

  // Producer role: channels by the consumer's id.
  std::unordered_map<uint32_t, ProducerChannel*> producers;
  uint32_t nextExpectedId = 0;
  std::deque<ProducerChannel*> ready;  // credit and data: waiting to be sent

  // Consumer role.
  std::unordered_map<uint32_t, RecvChannel*> consumers;
  uint32_t nextId = 0;
  std::vector<RecvChannel*> creditPending;
};

class DataPlane::Impl {
 public:
  explicit Impl(DataPlaneOptions options);
  ~Impl();

  // Public entry points (any thread).
  runtime::BufferSink* producerChannel(const ChannelKey& key);
  void consumeRemote(std::vector<RemoteInput> inputs, runtime::InputGate& gate);
  void releaseAttempt(const std::string& jobId, int attempt);
  void setFailureListener(FailureListener listener) {
    std::lock_guard lock(mu_);
    listener_ = std::move(listener);
  }
  size_t receiveMemoryInUse() const {
    std::lock_guard lock(mu_);
    return receiveMemory_;
  }
  int openConnections() const { return openConnections_.load(); }
  int port() const { return port_; }

  // Io thread.
  void onProducerData(ProducerChannel* pc);
  void onExclusiveRecycled(RecvChannel* ch);
  void onFloatingRecycled(GateState* g);

  const DataPlaneOptions opt_;
  asio::io_context io_{1};

 private:
  void startAccept();
  std::shared_ptr<Connection> outgoingConnection(const std::string& host, int port);
  void startRead(const std::shared_ptr<Connection>& c);
  void processInput(const std::shared_ptr<Connection>& c);
  bool beginBuffer(const std::shared_ptr<Connection>& c, const FrameHeader& h);
  void finishBuffer(Connection& c);
  void abandonPayload(Connection& c);
  void handleControl(const std::shared_ptr<Connection>& c, const network::Frame& f);
  void handleFromConsumer(const std::shared_ptr<Connection>& c, const network::Frame& f);
  void handleFromProducer(const std::shared_ptr<Connection>& c, const network::Frame& f);
  void kickWrite(const std::shared_ptr<Connection>& c);
  void protocolError(const std::shared_ptr<Connection>& c, const std::string& what);
  void closeConnection(const std::shared_ptr<Connection>& c, const std::string& reason, bool error);
  void makeReady(ProducerChannel* pc);
  void dropProducer(ProducerChannel* pc);
  void unregisterConsumer(RecvChannel* ch);
  void grantFloating(RecvChannel* ch);
  void scheduleCredit(RecvChannel* ch);
  void setUpGate(GateState* g);
  void doRelease(const AttemptId& attempt, std::function<void()> done);
  void maybeFreeGate(GateState* g);
  void reportFailure(const AttemptId& attempt, const std::string& message);
  void shutdown();

  asio::executor_work_guard<asio::io_context::executor_type> work_;
  tcp::acceptor acceptor_;
  asio::steady_timer acceptRetry_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> openConnections_{0};

  mutable std::mutex mu_;
  std::map<ChannelKey, std::unique_ptr<ProducerChannel>> producers_;
  // Channels of released attempts: their sinks stay valid (and drop) until
  // the DataPlane goes, as a task may still push while it is cancelled.
  std::vector<std::unique_ptr<ProducerChannel>> releasedProducers_;
  std::set<AttemptId> released_;
  std::set<AttemptId> failed_;
  FailureListener listener_;
  size_t receiveMemory_ = 0;

  std::atomic<bool> stopping_{false};
  // Io thread only.
  std::map<std::string, std::shared_ptr<Connection>> outgoing_;
  std::set<std::shared_ptr<Connection>> connections_;
  std::vector<std::unique_ptr<GateState>> gates_;
};

// ---------------------------------------------------------------------------
// ProducerChannel

void ProducerChannel::push(int /*channel*/, runtime::Buffer buffer) {
  std::unique_lock lock(mu_);
  if (dropped_) {
    lock.unlock();
    buffer.pool->recycle(buffer.data);
    return;
  }
  queue_.push_back(buffer);
  bool post = !notifyPosted_;
  notifyPosted_ = true;
  lock.unlock();
  if (post) asio::post(plane_.io_, [this] { plane_.onProducerData(this); });
}

// ---------------------------------------------------------------------------
// Setup and teardown

DataPlane::Impl::Impl(DataPlaneOptions options)
    : opt_(std::move(options)),
      work_(asio::make_work_guard(io_)),
      acceptor_(io_),
      acceptRetry_(io_) {
  if (opt_.segmentSize == 0 || opt_.segmentSize > (size_t{1} << 30)) {
    throw SluiceException(
        fmt::format("data plane: segment size {} bytes is out of range", opt_.segmentSize));
  }
  if (opt_.buffersPerChannel < 1 || opt_.floatingBuffersPerGate < 0) {
    throw SluiceException(
        fmt::format("data plane: buffers per channel must be at least 1 and floating buffers per "
                    "gate at least 0 "
                    "(got {} and {})",
                    opt_.buffersPerChannel, opt_.floatingBuffersPerGate));
  }
  try {
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(opt_.bindHost, std::to_string(opt_.port),
                                    asio::ip::resolver_base::passive);
    tcp::endpoint ep = results.begin()->endpoint();
    acceptor_.open(ep.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen(asio::socket_base::max_listen_connections);
    port_ = acceptor_.local_endpoint().port();
  } catch (const asio::system_error& e) {
    throw SluiceException(
        fmt::format("cannot listen on {}:{}: {}", opt_.bindHost, opt_.port, e.code().message()));
  }
  startAccept();
  thread_ = std::thread([this] {
    log::setThreadName(fmt::format("data-plane:{}", port_));
    io_.run();
  });
  log::info("data plane listening on {}:{}", opt_.bindHost, port_);
}

DataPlane::Impl::~Impl() {
  asio::post(io_, [this] { shutdown(); });
  work_.reset();
  thread_.join();
}

void DataPlane::Impl::shutdown() {
  stopping_ = true;
  asio::error_code ignored;
  acceptor_.close(ignored);
  acceptRetry_.cancel();
  std::vector<std::shared_ptr<Connection>> all(connections_.begin(), connections_.end());
  for (auto& c : all) {
    if (c->connected && !c->writing) {
      // Best effort, never blocking: tell the peer this is no failure of the
      // connection but a shutdown.
      std::vector<uint8_t> close;
      network::appendClose(close);
      [[maybe_unused]] auto n = ::send(c->socket.native_handle(), close.data(), close.size(),
                                       MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    closeConnection(c, "this TaskManager's data plane is shutting down", false);
  }
  std::lock_guard lock(mu_);
  for (auto& [key, pc] : producers_) pc->drop();
}

void DataPlane::Impl::startAccept() {
  acceptor_.async_accept([this](const asio::error_code& ec, tcp::socket socket) {
    if (stopping_ || ec == asio::error::operation_aborted) return;
    if (ec) {
      // E.g. out of file descriptors: try again shortly rather than spin.
      log::warn("data plane: accept on port {} failed: {}", port_, ec.message());
      acceptRetry_.expires_after(std::chrono::milliseconds(100));
      acceptRetry_.async_wait([this](const asio::error_code& e) {
        if (!e && !stopping_) startAccept();
      });
      return;
    }
    asio::error_code epErr;
    auto ep = socket.remote_endpoint(epErr);
    std::string peer = epErr ? std::string("unknown peer")
                             : fmt::format("{}:{}", ep.address().to_string(), ep.port());
    configureSocket(socket);
    auto c = std::make_shared<Connection>(io_, std::move(socket), Connection::Role::kProducer, peer,
                                          static_cast<uint32_t>(opt_.segmentSize));
    c->connected = true;
    connections_.insert(c);
    ++openConnections_;
    log::debug("data plane: accepted a connection from {}", peer);
    startRead(c);
    startAccept();
  });
}

std::shared_ptr<Connection> DataPlane::Impl::outgoingConnection(const std::string& host, int port) {
  std::string name = fmt::format("{}:{}", host, port);
  auto it = outgoing_.find(name);
  if (it != outgoing_.end() && !it->second->closed) return it->second;
  auto c = std::make_shared<Connection>(io_, tcp::socket(io_), Connection::Role::kConsumer, name,
                                        static_cast<uint32_t>(opt_.segmentSize));
  outgoing_[name] = c;
  connections_.insert(c);
  ++openConnections_;
  c->resolver.async_resolve(
      host, std::to_string(port),
      [this, c](const asio::error_code& ec, tcp::resolver::results_type results) {
        if (c->closed) return;
        if (ec) {
          closeConnection(c, fmt::format("cannot resolve {}: {}", c->peer, ec.message()), true);
          return;
        }
        asio::async_connect(
            c->socket, results, [this, c](const asio::error_code& e, const tcp::endpoint&) {
              if (c->closed) return;
              if (e) {
                closeConnection(c, fmt::format("cannot connect to {}: {}", c->peer, e.message()),
                                true);
                return;
              }
              configureSocket(c->socket);
              c->connected = true;
              startRead(c);
              kickWrite(c);
            });
      });
  return c;
}

// ---------------------------------------------------------------------------
// Public entry points

runtime::BufferSink* DataPlane::Impl::producerChannel(const ChannelKey& key) {
  std::lock_guard lock(mu_);
  auto& slot = producers_[key];
  if (!slot) {
    bool dropped = released_.count({key.jobId, key.attempt}) > 0 || stopping_;
    slot = std::make_unique<ProducerChannel>(*this, key, dropped);
  }
  return slot.get();
}

void DataPlane::Impl::consumeRemote(std::vector<RemoteInput> inputs, runtime::InputGate& gate) {
  if (inputs.empty()) return;
  const std::string jobId = inputs.front().key.jobId;
  const int attempt = inputs.front().key.attempt;
  for (const auto& in : inputs) {
    if (in.key.jobId != jobId || in.key.attempt != attempt) {
      throw SluiceException(
          fmt::format("data plane: one gate's remote inputs span two attempts ({} and {})",
                      inputs.front().key.toString(), in.key.toString()));
    }
  }
  const size_t segments = inputs.size() * static_cast<size_t>(opt_.buffersPerChannel) +
                          static_cast<size_t>(opt_.floatingBuffersPerGate);
  const size_t bytes = segments * opt_.segmentSize;
  {
    std::lock_guard lock(mu_);
    if (receiveMemory_ + bytes > opt_.maxNetworkMemory) {
      throw SluiceException(fmt::format(
          "data plane: the receive buffers of {} remote input channels need {} bytes ({} x {} "
          "exclusive + {} "
          "floating segments of {} bytes), but {} of the network memory of {} bytes are in use; "
          "raise "
          "taskmanager.memory.network.max or lower the buffers per channel / floating buffers per "
          "gate",
          inputs.size(), bytes, inputs.size(), opt_.buffersPerChannel, opt_.floatingBuffersPerGate,
          opt_.segmentSize, receiveMemory_, opt_.maxNetworkMemory));
    }
    receiveMemory_ += bytes;
  }
  auto g = std::make_unique<GateState>(&gate, jobId, attempt, opt_.segmentSize,
                                       opt_.floatingBuffersPerGate, bytes);
  GateState* gp = g.get();
  gp->floating.setRecycleListener([this, gp] {
    if (gp->recycled.fetch_add(1) == 0) asio::post(io_, [this, gp] { onFloatingRecycled(gp); });
  });
  for (auto& in : inputs) {
    auto ch =
        std::make_unique<RecvChannel>(gp, std::move(in.key), in.gateChannel, std::move(in.host),
                                      in.port, opt_.segmentSize, opt_.buffersPerChannel);
    RecvChannel* cp = ch.get();
    cp->exclusive.setRecycleListener([this, cp] {
      if (cp->recycled.fetch_add(1) == 0) asio::post(io_, [this, cp] { onExclusiveRecycled(cp); });
    });
    gp->channels.push_back(std::move(ch));
  }
  asio::post(io_, [this, g = std::move(g)]() mutable {
    GateState* p = g.get();
    gates_.push_back(std::move(g));
    setUpGate(p);
  });
}

void DataPlane::Impl::releaseAttempt(const std::string& jobId, int attempt) {
  AttemptId a{jobId, attempt};
  if (io_.get_executor().running_in_this_thread()) {
    doRelease(a, nullptr);
    return;
  }
  auto done = std::make_shared<std::promise<void>>();
  auto finished = done->get_future();
  asio::post(io_, [this, a, done] { doRelease(a, [done] { done->set_value(); }); });
  finished.wait();
}

// ---------------------------------------------------------------------------
// Consumer side

void DataPlane::Impl::setUpGate(GateState* g) {
  {
    std::lock_guard lock(mu_);
    if (released_.count({g->jobId, g->attempt}) > 0 || stopping_) g->released = true;
  }
  if (g->released) {
    for (auto& ch : g->channels) ch->released = true;
    maybeFreeGate(g);
    return;
  }
  for (auto& ch : g->channels) {
    auto c = outgoingConnection(ch->host, ch->port);
    ch->conn = c;
    ch->id = c->nextId++;
    ch->live = true;
    ch->announced = opt_.buffersPerChannel;
    c->consumers[ch->id] = ch.get();
    network::appendPartitionRequest(c->controlOut, ch->id,
                                    static_cast<uint32_t>(opt_.buffersPerChannel), ch->key);
    log::debug("data plane: requesting {} from {} as channel {}", ch->key.toString(), c->peer,
               ch->id);
    kickWrite(c);
  }
}

void DataPlane::Impl::grantFloating(RecvChannel* ch) {
  GateState* g = ch->gate;
  int64_t n = std::min<int64_t>(ch->wanted, g->floatingFree);
  if (n <= 0) return;
  g->floatingFree -= static_cast<int>(n);
  ch->reservedFloating += static_cast<int>(n);
  ch->pendingAnnounce += n;
  ch->wanted -= n;
  scheduleCredit(ch);
}

void DataPlane::Impl::scheduleCredit(RecvChannel* ch) {
  if (!ch->live || ch->pendingAnnounce == 0) return;
  if (!ch->inCreditList) {
    ch->inCreditList = true;
    ch->conn->creditPending.push_back(ch);
  }
  kickWrite(ch->conn);
}

void DataPlane::Impl::onExclusiveRecycled(RecvChannel* ch) {
  int n = ch->recycled.exchange(0);
  ch->exclusiveInUse -= n;
  if (ch->released) {
    maybeFreeGate(ch->gate);
    return;
  }
  ch->exclusiveFree += n;
  ch->pendingAnnounce += n;
  scheduleCredit(ch);
}

void DataPlane::Impl::onFloatingRecycled(GateState* g) {
  int n = g->recycled.exchange(0);
  g->floatingInUse -= n;
  if (g->released) {
    maybeFreeGate(g);
    return;
  }
  g->floatingFree += n;
  size_t count = g->channels.size();
  if (count == 0) return;
  for (size_t i = 0; i < count && g->floatingFree > 0; ++i) {
    RecvChannel* ch = g->channels[(g->nextGrant + i) % count].get();
    if (ch->live && ch->wanted > 0) grantFloating(ch);
  }
  g->nextGrant = (g->nextGrant + 1) % count;
}

void DataPlane::Impl::unregisterConsumer(RecvChannel* ch) {
  if (!ch->live) return;
  ch->live = false;
  Connection& c = *ch->conn;
  c.consumers.erase(ch->id);
  if (ch->inCreditList) {
    std::erase(c.creditPending, ch);
    ch->inCreditList = false;
  }
}

void DataPlane::Impl::maybeFreeGate(GateState* g) {
  if (!g->released || g->floatingInUse > 0 || g->recycled.load() > 0) return;
  for (auto& ch : g->channels) {
    if (ch->exclusiveInUse > 0 || ch->recycled.load() > 0) return;
  }
  {
    std::lock_guard lock(mu_);
    receiveMemory_ -= g->memoryBytes;
  }
  std::erase_if(gates_, [g](const std::unique_ptr<GateState>& p) { return p.get() == g; });
}

// ---------------------------------------------------------------------------
// Reading

void DataPlane::Impl::startRead(const std::shared_ptr<Connection>& c) {
  c->socket.async_read_some(asio::buffer(c->staging.data() + c->end, c->staging.size() - c->end),
                            [this, c](const asio::error_code& ec, size_t n) {
                              if (c->closed) return;
                              if (ec) {
                                bool boundary = c->decoder.atFrameBoundary();
                                std::string why = ec == asio::error::eof
                                                      ? "the peer closed the connection"
                                                      : ec.message();
                                if (!boundary) why += " in the middle of a frame";
                                closeConnection(c, why, !boundary);
                                return;
                              }
                              c->end += n;
                              processInput(c);
                            });
}

void DataPlane::Impl::processInput(const std::shared_ptr<Connection>& c) {
  while (!c->closed) {
    std::span<const uint8_t> in(c->staging.data() + c->begin, c->end - c->begin);
    if (in.empty()) {
      c->begin = c->end = 0;
      startRead(c);
      return;
    }
    auto r = c->decoder.next(in);
    c->begin = c->end - in.size();
    switch (r) {
      case FrameDecoder::Result::kNeedMore: break;
      case FrameDecoder::Result::kError: protocolError(c, c->decoder.error()); return;
      case FrameDecoder::Result::kControl: handleControl(c, c->decoder.frame()); break;
      case FrameDecoder::Result::kBuffer:
        if (!beginBuffer(c, c->decoder.frame().header)) return;
        break;
    }
  }
}

// Picks the destination of a Buffer's payload and copies what staging holds
// of it; reads the rest straight into the segment. True when the payload is
// complete (processing goes on), false when a read is under way.
bool DataPlane::Impl::beginBuffer(const std::shared_ptr<Connection>& c, const FrameHeader& h) {
  if (c->role != Connection::Role::kConsumer) {
    protocolError(c, "a Buffer frame from a consumer");
    return false;
  }
  c->payloadChannel = nullptr;
  c->payloadPool = nullptr;
  auto it = c->consumers.find(h.channel);
  if (it == c->consumers.end()) {
    if (h.channel >= c->nextId) {
      protocolError(c, fmt::format("a Buffer frame for unknown channel id {}", h.channel));
      return false;
    }
    // A channel this side cancelled: the producer sent before it heard.
    if (c->discard.size() < h.length) c->discard.resize(opt_.segmentSize);
    c->payloadDst = c->discard.data();
  } else {
    RecvChannel* ch = it->second;
    if (ch->announced <= 0) {
      protocolError(c, fmt::format("a Buffer frame without credit on channel {} ({})", h.channel,
                                   ch->key.toString()));
      return false;
    }
    --ch->announced;
    if (ch->exclusiveFree > 0) {
      --ch->exclusiveFree;
      ++ch->exclusiveInUse;
      c->payloadPool = &ch->exclusive;
    } else {
      // The invariant (file comment) guarantees a reserved floating segment.
      --ch->reservedFloating;
      ++ch->gate->floatingInUse;
      c->payloadPool = &ch->gate->floating;
    }
    c->payloadDst = c->payloadPool->request();
    c->payloadChannel = ch;
  }
  c->payloadLength = h.length;
  c->payloadBacklog = h.aux;
  size_t have = std::min<size_t>(c->end - c->begin, h.length);
  if (have > 0) std::memcpy(c->payloadDst, c->staging.data() + c->begin, have);
  c->begin += have;
  if (have == h.length) {
    finishBuffer(*c);
    return true;
  }
  // Staging is used up. Read the rest into the segment, and whatever follows
  // (the next header) into staging, in as few reads as the socket allows.
  c->begin = c->end = 0;
  size_t remaining = h.length - have;
  std::array<asio::mutable_buffer, 2> bufs{asio::buffer(c->payloadDst + have, remaining),
                                           asio::buffer(c->staging)};
  asio::async_read(c->socket, bufs, asio::transfer_at_least(remaining),
                   [this, c, remaining](const asio::error_code& ec, size_t n) {
                     if (c->closed || ec) {
                       abandonPayload(*c);
                       if (!c->closed) {
                         std::string why = ec == asio::error::eof ? "the peer closed the connection"
                                                                  : ec.message();
                         closeConnection(c, why + " in the middle of a Buffer frame", true);
                       }
                       return;
                     }
                     c->end = n - remaining;
                     finishBuffer(*c);
                     processInput(c);
                   });
  return false;
}

void DataPlane::Impl::abandonPayload(Connection& c) {
  if (c.payloadPool != nullptr) c.payloadPool->recycle(c.payloadDst);
  c.payloadPool = nullptr;
  c.payloadChannel = nullptr;
}

void DataPlane::Impl::finishBuffer(Connection& c) {
  RecvChannel* ch = c.payloadChannel;
  if (ch == nullptr) return;  // discarded
  if (!ch->live) {            // released (or failed) while the payload was read
    abandonPayload(c);
    return;
  }
  runtime::BufferPool* pool = c.payloadPool;
  c.payloadPool = nullptr;
  c.payloadChannel = nullptr;
  ch->gate->gate->push(ch->gateChannel, runtime::Buffer{c.payloadDst, c.payloadLength, pool});
  int64_t credit = ch->announced + ch->pendingAnnounce;
  ch->wanted = std::max<int64_t>(0, static_cast<int64_t>(c.payloadBacklog) - credit);
  grantFloating(ch);
}

void DataPlane::Impl::handleControl(const std::shared_ptr<Connection>& c, const network::Frame& f) {
  if (f.header.type == FrameType::kClose) {
    closeConnection(c, "the peer closed the connection (it is shutting down)", false);
    return;
  }
  if (c->role == Connection::Role::kProducer) {
    handleFromConsumer(c, f);
  } else {
    handleFromProducer(c, f);
  }
}

void DataPlane::Impl::handleFromConsumer(const std::shared_ptr<Connection>& c,
                                         const network::Frame& f) {
  const uint32_t id = f.header.channel;
  switch (f.header.type) {
    case FrameType::kPartitionRequest: {
      if (id < c->nextExpectedId) {
        protocolError(c, fmt::format("a PartitionRequest reuses channel id {}", id));
        return;
      }
      c->nextExpectedId = id + 1;
      ProducerChannel* pc = nullptr;
      bool released = false;
      {
        std::lock_guard lock(mu_);
        released = released_.count({f.key.jobId, f.key.attempt}) > 0;
        if (!released) {
          auto& slot = producers_[f.key];
          if (!slot) slot = std::make_unique<ProducerChannel>(*this, f.key, false);
          pc = slot.get();
        }
      }
      if (released) {
        network::appendPartitionReleased(c->controlOut, id);
      } else if (pc->everBound) {
        network::appendError(
            c->controlOut, id,
            fmt::format("{} was already requested (a second consumer, or a retry after "
                        "its connection failed)",
                        f.key.toString()));
      } else {
        pc->everBound = true;
        pc->conn = c;
        pc->id = id;
        pc->credit = f.header.aux;
        c->producers[id] = pc;
        log::debug("data plane: {} requested {} as channel {}", c->peer, f.key.toString(), id);
        makeReady(pc);
      }
      kickWrite(c);
      return;
    }
    case FrameType::kCredit: {
      auto it = c->producers.find(id);
      if (it == c->producers.end()) {
        if (id >= c->nextExpectedId)
          protocolError(c, fmt::format("a Credit frame for unknown channel id {}", id));
        return;  // a channel released here while the credit was on its way
      }
      ProducerChannel* pc = it->second;
      pc->credit += f.header.aux;
      if (pc->credit > static_cast<int64_t>(network::kMaxCredit)) {
        protocolError(
            c,
            fmt::format("channel {} was granted {} credits, more than any receiver holds buffers",
                        id, pc->credit));
        return;
      }
      makeReady(pc);
      return;
    }
    case FrameType::kCancelPartition: {
      auto it = c->producers.find(id);
      if (it == c->producers.end()) {
        if (id >= c->nextExpectedId)
          protocolError(c, fmt::format("a CancelPartition for unknown channel id {}", id));
        return;
      }
      log::debug("data plane: {} cancelled {}", c->peer, it->second->key.toString());
      dropProducer(it->second);
      return;
    }
    case FrameType::kError:
      closeConnection(c, fmt::format("the peer reported: {}", printable(f.message)), true);
      return;
    default:
      protocolError(c, fmt::format("an unexpected {} frame from a consumer",
                                   network::frameTypeName(f.header.type)));
      return;
  }
}

void DataPlane::Impl::handleFromProducer(const std::shared_ptr<Connection>& c,
                                         const network::Frame& f) {
  const uint32_t id = f.header.channel;
  switch (f.header.type) {
    case FrameType::kPartitionReleased: {
      auto it = c->consumers.find(id);
      if (it == c->consumers.end()) {
        if (id >= c->nextId)
          protocolError(c, fmt::format("a PartitionReleased for unknown channel id {}", id));
        return;
      }
      log::debug("data plane: {} released {}", c->peer, it->second->key.toString());
      unregisterConsumer(it->second);
      return;
    }
    case FrameType::kError: {
      if (id == network::kNoChannel) {
        closeConnection(c, fmt::format("the peer reported: {}", printable(f.message)), true);
        return;
      }
      auto it = c->consumers.find(id);
      if (it == c->consumers.end()) {
        if (id >= c->nextId)
          protocolError(c, fmt::format("an Error frame for unknown channel id {}", id));
        return;
      }
      RecvChannel* ch = it->second;
      std::string msg = fmt::format("producer TaskManager {} refused {}: {}", c->peer,
                                    ch->key.toString(), printable(f.message));
      log::error("data plane: {}", msg);
      unregisterConsumer(ch);
      reportFailure({ch->key.jobId, ch->key.attempt}, msg);
      return;
    }
    default:
      protocolError(c, fmt::format("an unexpected {} frame from a producer",
                                   network::frameTypeName(f.header.type)));
      return;
  }
}

// ---------------------------------------------------------------------------
// Writing

void DataPlane::Impl::onProducerData(ProducerChannel* pc) {
  pc->clearNotify();
  makeReady(pc);
}

void DataPlane::Impl::makeReady(ProducerChannel* pc) {
  if (pc->inReady || !pc->conn || pc->conn->closed || pc->credit <= 0 || !pc->hasQueued()) return;
  pc->inReady = true;
  pc->conn->ready.push_back(pc);
  kickWrite(pc->conn);
}

void DataPlane::Impl::kickWrite(const std::shared_ptr<Connection>& c) {
  if (!c->connected || c->closed || c->writing) return;
  c->gather.clear();
  for (RecvChannel* ch : c->creditPending) {
    ch->inCreditList = false;
    if (ch->pendingAnnounce > 0) {
      network::appendCredit(c->controlOut, ch->id, static_cast<uint32_t>(ch->pendingAnnounce));
      ch->announced += ch->pendingAnnounce;
      ch->pendingAnnounce = 0;
    }
  }
  c->creditPending.clear();
  c->controlInFlight.swap(c->controlOut);
  c->controlOut.clear();
  if (!c->controlInFlight.empty()) c->gather.push_back(asio::buffer(c->controlInFlight));
  int n = 0;
  while (n < kMaxBatch && !c->ready.empty()) {
    ProducerChannel* pc = c->ready.front();
    c->ready.pop_front();
    runtime::Buffer b;
    size_t backlog = 0;
    if (pc->credit <= 0 || !pc->pop(b, backlog)) {
      pc->inReady = false;
      continue;
    }
    --pc->credit;
    network::encodeHeader(FrameHeader{FrameType::kBuffer, b.size, pc->id,
                                      static_cast<uint32_t>(std::min<size_t>(backlog, UINT32_MAX))},
                          c->headers[n].data());
    c->gather.push_back(asio::buffer(c->headers[n]));
    c->gather.push_back(asio::buffer(b.data, b.size));
    c->inflight.push_back(b);
    c->inflightOwners.push_back(pc);
    ++n;
    if (backlog > 0 && pc->credit > 0) {
      c->ready.push_back(pc);  // round robin over the ready channels
    } else {
      pc->inReady = false;
    }
  }
  if (c->gather.empty()) return;
  c->writing = true;
  asio::async_write(c->socket, c->gather, [this, c](const asio::error_code& ec, size_t) {
    for (auto& b : c->inflight) b.pool->recycle(b.data);
    c->inflight.clear();
    c->inflightOwners.clear();
    c->controlInFlight.clear();
    c->writing = false;
    auto waiters = std::move(c->onWriteDone);
    c->onWriteDone.clear();
    for (auto& w : waiters) w();
    if (c->closed) return;
    if (ec) {
      closeConnection(c, ec.message(), true);
      return;
    }
    kickWrite(c);
  });
}

// ---------------------------------------------------------------------------
// Failure and release

void DataPlane::Impl::protocolError(const std::shared_ptr<Connection>& c, const std::string& what) {
  closeConnection(c, fmt::format("protocol error: {}", what), true);
}

void DataPlane::Impl::closeConnection(const std::shared_ptr<Connection>& c,
                                      const std::string& reason, bool error) {
  if (c->closed) return;
  c->closed = true;
  --openConnections_;
  connections_.erase(c);
  auto it = outgoing_.find(c->peer);
  if (it != outgoing_.end() && it->second == c) outgoing_.erase(it);
  asio::error_code ignored;
  c->socket.close(ignored);
  c->resolver.cancel();

  std::set<AttemptId> affected;
  if (c->role == Connection::Role::kProducer) {
    std::vector<ProducerChannel*> pcs;
    for (auto& [id, pc] : c->producers) pcs.push_back(pc);
    for (ProducerChannel* pc : pcs) {
      affected.insert({pc->key.jobId, pc->key.attempt});
      dropProducer(pc);
    }
    c->ready.clear();
  } else {
    std::vector<RecvChannel*> chs;
    for (auto& [id, ch] : c->consumers) chs.push_back(ch);
    for (RecvChannel* ch : chs) {
      affected.insert({ch->key.jobId, ch->key.attempt});
      unregisterConsumer(ch);
    }
  }
  std::string message = fmt::format("{} TaskManager {} failed: {}", c->describe(), c->peer, reason);
  if (stopping_) {
    log::debug("data plane: closed the {} TaskManager {}", c->describe(), c->peer);
  } else if (error || !affected.empty()) {
    log::error("data plane: {}; closed it{}", message,
               affected.empty() ? "" : fmt::format(", failing {} job attempt(s)", affected.size()));
  } else {
    log::info("data plane: {} TaskManager {} closed: {}", c->describe(), c->peer, reason);
  }
  for (const auto& a : affected) reportFailure(a, message);
}

void DataPlane::Impl::dropProducer(ProducerChannel* pc) {
  pc->drop();
  if (pc->conn) {
    Connection& c = *pc->conn;
    c.producers.erase(pc->id);
    if (pc->inReady) std::erase(c.ready, pc);
    pc->conn.reset();
  }
  pc->inReady = false;
  pc->credit = 0;
}

void DataPlane::Impl::reportFailure(const AttemptId& attempt, const std::string& message) {
  FailureListener listener;
  {
    std::lock_guard lock(mu_);
    if (stopping_ || released_.count(attempt) > 0 || !failed_.insert(attempt).second) return;
    listener = listener_;
  }
  if (!listener) return;
  try {
    listener(attempt.first, attempt.second, message);
  } catch (const std::exception& e) {
    log::error("data plane: the failure listener threw: {}", e.what());
  }
}

void DataPlane::Impl::doRelease(const AttemptId& a, std::function<void()> done) {
  std::vector<ProducerChannel*> pcs;
  {
    std::lock_guard lock(mu_);
    released_.insert(a);
    failed_.erase(a);
    for (auto it = producers_.begin(); it != producers_.end();) {
      if (it->first.jobId == a.first && it->first.attempt == a.second) {
        pcs.push_back(it->second.get());
        releasedProducers_.push_back(std::move(it->second));
        it = producers_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // A write under way may still read these channels' segments: wait for it
  // before telling the caller the producer's pool is free to go.
  auto pending = std::make_shared<int>(1);
  auto finishOne = [pending, done] {
    if (--*pending == 0 && done) done();
  };
  std::set<Connection*> waiting;
  for (ProducerChannel* pc : pcs) {
    if (pc->conn && !pc->conn->closed) {
      std::shared_ptr<Connection> c = pc->conn;
      network::appendPartitionReleased(c->controlOut, pc->id);
      bool owns = std::find(c->inflightOwners.begin(), c->inflightOwners.end(), pc) !=
                  c->inflightOwners.end();
      if (owns && waiting.insert(c.get()).second) {
        ++*pending;
        c->onWriteDone.push_back(finishOne);
      }
      dropProducer(pc);
      kickWrite(c);
    } else {
      dropProducer(pc);
    }
  }
  std::vector<GateState*> gates;
  for (auto& g : gates_) {
    if (!g->released && g->jobId == a.first && g->attempt == a.second) gates.push_back(g.get());
  }
  for (GateState* g : gates) {
    g->released = true;
    for (auto& ch : g->channels) {
      if (ch->live) {
        std::shared_ptr<Connection> c = ch->conn;
        unregisterConsumer(ch.get());
        if (!c->closed) {
          network::appendCancelPartition(c->controlOut, ch->id);
          kickWrite(c);
        }
      }
      ch->released = true;
      ch->conn.reset();
    }
    maybeFreeGate(g);
  }
  log::debug("data plane: released job {} attempt {}", a.first, a.second);
  finishOne();
}

// ---------------------------------------------------------------------------
// DataPlane

DataPlane::DataPlane(DataPlaneOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
DataPlane::~DataPlane() = default;
int DataPlane::port() const { return impl_->port(); }
runtime::BufferSink* DataPlane::producerChannel(const ChannelKey& key) {
  return impl_->producerChannel(key);
}
void DataPlane::consumeRemote(std::vector<RemoteInput> inputs, runtime::InputGate& gate) {
  impl_->consumeRemote(std::move(inputs), gate);
}
void DataPlane::releaseAttempt(const std::string& jobId, int attempt) {
  impl_->releaseAttempt(jobId, attempt);
}
void DataPlane::setFailureListener(FailureListener listener) {
  impl_->setFailureListener(std::move(listener));
}
size_t DataPlane::receiveMemoryInUse() const { return impl_->receiveMemoryInUse(); }
int DataPlane::openConnections() const { return impl_->openConnections(); }

}  // namespace sluice::cluster
