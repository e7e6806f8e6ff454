// DataPlane: one TaskManager's network stack, which carries buffers between
// subtasks on different TaskManagers over TCP with Flink's credit-based flow
// control.
//
// Concepts:
// - A channel is one (producer subtask, subpartition) of one job attempt
//   (ChannelKey). The producer's RecordWriter pushes whole buffers into the
//   channel's sink (producerChannel()); the consumer's InputGate receives them
//   (consumeRemote()). The data plane never looks inside a buffer: records,
//   watermarks, barriers and end-of-partition are all bytes inside.
// - Connections: one TCP connection per ordered TaskManager pair. The
//   consumer's DataPlane connects to the producer's data port and multiplexes
//   all its channels from that producer over it (frame.h: the wire format).
// - Credit: the consumer grants one credit per free receive segment it holds
//   for a channel, the producer sends a buffer only against a credit. Each
//   remote input channel has `buffersPerChannel` exclusive segments (its
//   initial credit); each consumer gate has `floatingBuffersPerGate` floating
//   segments that go, as extra credit, to the channels whose producer reports
//   a backlog. When the consumer task recycles a received buffer, its credit
//   goes back to the producer. A producer's queued buffers stay in the
//   producer's own bounded BufferPool, so a slow consumer blocks its producer
//   in BufferPool::request(): backpressure across machines with bounded memory.
// - Failure: a connection that breaks (peer closed, reset, timed out, or a
//   protocol violation: bad frame, buffer without credit, unknown channel) is
//   closed with a logged error naming the peer; the failure listener hears
//   once per affected live (jobId, attempt); other connections go on.
//
// Threads: one io thread per DataPlane runs all network work and calls the
// InputGates' push() and the failure listener. Every public method may be
// called from any thread; releaseAttempt() waits for the io thread (unless
// called on it, e.g. from the failure listener, where it does not wait).
//
// Lifetime rules:
// - A producer channel's sink stays valid until ~DataPlane (after
//   releaseAttempt it recycles whatever it is pushed). Its buffers go back to
//   their pool once written to the socket, or dropped by releaseAttempt; once
//   releaseAttempt() returned (called off the io thread), the DataPlane holds
//   no buffer of that attempt, so the producer's pool may be destroyed.
// - An InputGate passed to consumeRemote() must live until releaseAttempt()
//   of that attempt returned (or ~DataPlane). The receive pools outlive the
//   release until the gate recycled every buffer it holds (the task calls
//   InputGate::releaseAll() on cancel); they are freed then.
// - Every received buffer must be recycled before ~DataPlane, and every
//   producer pool with buffers still queued here must outlive ~DataPlane.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cluster/network/frame.h"
#include "runtime/buffer_pool.h"
#include "runtime/input_gate.h"

namespace sluice::cluster {

struct DataPlaneOptions {
  // Address and port the data port listens on (taskmanager.bind-host,
  // taskmanager.data.port). Default: 127.0.0.1, port 0 (ephemeral).
  std::string bindHost = "127.0.0.1";
  int port = 0;
  // Receive segment size (taskmanager.memory.segment-size); a received buffer
  // may be at most this long. Default: 32 KiB.
  size_t segmentSize = 32 * 1024;
  // Exclusive receive buffers (= initial credit) per remote input channel
  // (taskmanager.network.memory.buffers-per-channel). Default: 2.
  int buffersPerChannel = 2;
  // Floating receive buffers shared by one consumer gate's remote channels
  // (taskmanager.network.memory.floating-buffers-per-gate). Default: 8.
  int floatingBuffersPerGate = 8;
  // Cap on this process's receive-buffer memory; consumeRemote() beyond it
  // throws. Default: 1 GiB.
  size_t maxNetworkMemory = size_t{1} << 30;
};

class DataPlane {
 public:
  using FailureListener =
      std::function<void(const std::string& jobId, int attempt, const std::string& error)>;

  // Binds and listens, starts the io thread. Throws SluiceException
  // "cannot listen on host:port: <reason>".
  explicit DataPlane(DataPlaneOptions options);
  // Closes every connection (peers see a Close frame, then EOF) and joins the
  // io thread. Buffers still queued are recycled.
  ~DataPlane();
  DataPlane(const DataPlane&) = delete;
  DataPlane& operator=(const DataPlane&) = delete;

  // The data port actually bound (useful with port 0).
  int port() const;

  // Producer side: the sink for one outgoing channel; the same pointer for
  // the same key. push() queues the buffer (the `channel` argument is
  // ignored: the consumer knows its gate channel); it is sent when the
  // consumer granted credit, then recycled. Any thread.
  runtime::BufferSink* producerChannel(const ChannelKey& key);

  // Consumer side: one consumer task's remote input channels, all feeding
  // `gate`. For each, connects to (or reuses the connection to) host:port and
  // requests the subpartition; received buffers go to
  // gate.push(gateChannel, Buffer{..., pool = a receive pool of this plane}).
  // Throws SluiceException when the receive buffers would exceed
  // maxNetworkMemory. Connection failures come to the failure listener.
  struct RemoteInput {
    ChannelKey key;
    std::string host;
    int port = 0;
    int gateChannel = 0;
  };
  void consumeRemote(std::vector<RemoteInput> inputs, runtime::InputGate& gate);

  // Drops every channel of (jobId, attempt), both sides: queued buffers are
  // recycled, peers told, receive pools freed once every buffer came back.
  // A later PartitionRequest for the attempt is answered PartitionReleased.
  void releaseAttempt(const std::string& jobId, int attempt);

  // Set before channels exist. Called on the io thread; must not block long.
  void setFailureListener(FailureListener listener);

  // For tests and metrics: receive-buffer memory reserved now (bytes), and
  // the number of open connections (both directions).
  size_t receiveMemoryInUse() const;
  int openConnections() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::cluster
