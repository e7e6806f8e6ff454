// The data plane's wire format, and an incremental decoder for it (pure: no I/O).
//
// Every frame is a 16-byte header followed by `length` payload bytes. All
// integers are little-endian.
//
//   offset  size  field
//   0       2     magic "SL" (0x53 0x4C)
//   2       1     version (kProtocolVersion)
//   3       1     type (FrameType)
//   4       4     length of the payload in bytes
//   8       4     channel id (chosen by the consumer, unique per connection;
//                 kNoChannel for connection-level frames)
//   12      4     aux: initial credit (PartitionRequest), backlog (Buffer),
//                 credit (Credit); 0 otherwise
//
// Frames, and who sends them on a connection (the consumer's TaskManager
// connects to the producer's):
//   PartitionRequest  consumer -> producer  payload: the ChannelKey (below)
//   Buffer            producer -> consumer  payload: one buffer's bytes
//   Credit            consumer -> producer  aux more buffers may be sent
//   CancelPartition   consumer -> producer  the consumer dropped the channel
//   PartitionReleased producer -> consumer  the producer dropped the channel
//   Error             either                payload: UTF-8 message; channel
//                                           kNoChannel fails the connection
//   Close             either                the sender is shutting down
//
// ChannelKey payload: u16 jobId length, jobId bytes, then i32 attempt,
// i32 jobEdge, i32 producerSubtask, i32 subpartition (all >= 0).
//
// The decoder checks everything before it trusts it: magic, version, type,
// a length within the type's limit (a Buffer's at most the segment size, a
// control frame's at most kMaxControlPayload) and the fields of each type. It
// allocates only after a length passed those checks.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace sluice::cluster {

// One channel of one job attempt: producer (jobEdge, producerSubtask), and the
// index of the consumer in that producer's RecordWriter targets (subpartition).
struct ChannelKey {
  std::string jobId;
  int attempt = 0;
  int jobEdge = 0;
  int producerSubtask = 0;
  int subpartition = 0;

  bool operator==(const ChannelKey&) const = default;
  auto operator<=>(const ChannelKey&) const = default;
  // "job <id> attempt <a> edge <e> subtask <s> subpartition <p>", for messages.
  std::string toString() const;
};

namespace network {

inline constexpr uint8_t kMagic0 = 0x53;  // 'S'
inline constexpr uint8_t kMagic1 = 0x4C;  // 'L'
inline constexpr uint8_t kProtocolVersion = 1;
inline constexpr size_t kHeaderSize = 16;
inline constexpr uint32_t kNoChannel = 0xFFFFFFFFu;
// Longest control payload (a ChannelKey, an error message).
inline constexpr uint32_t kMaxControlPayload = 8 * 1024;
inline constexpr uint32_t kMaxJobIdLength = 1024;
// Most credit one frame may carry (far above any sane buffer count).
inline constexpr uint32_t kMaxCredit = 1u << 20;

enum class FrameType : uint8_t {
  kPartitionRequest = 1,
  kBuffer = 2,
  kCredit = 3,
  kCancelPartition = 4,
  kPartitionReleased = 5,
  kError = 6,
  kClose = 7,
};

const char* frameTypeName(FrameType type);

struct FrameHeader {
  FrameType type = FrameType::kClose;
  uint32_t length = 0;
  uint32_t channel = kNoChannel;
  uint32_t aux = 0;
};

using HeaderBytes = std::array<uint8_t, kHeaderSize>;

void encodeHeader(const FrameHeader& header, uint8_t* out);
inline HeaderBytes encodeHeader(const FrameHeader& header) {
  HeaderBytes b;
  encodeHeader(header, b.data());
  return b;
}

// Append one whole control frame to `out`.
void appendPartitionRequest(std::vector<uint8_t>& out, uint32_t channel, uint32_t initialCredit,
                            const ChannelKey& key);
void appendCredit(std::vector<uint8_t>& out, uint32_t channel, uint32_t credit);
void appendCancelPartition(std::vector<uint8_t>& out, uint32_t channel);
void appendPartitionReleased(std::vector<uint8_t>& out, uint32_t channel);
// The message is cut to kMaxControlPayload bytes.
void appendError(std::vector<uint8_t>& out, uint32_t channel, const std::string& message);
void appendClose(std::vector<uint8_t>& out);
// A Buffer frame (header and payload), for tests: the data plane sends the
// header and the segment as two pieces of one gathered write.
void appendBuffer(std::vector<uint8_t>& out, uint32_t channel, uint32_t backlog,
                  std::span<const uint8_t> payload);

// A decoded control frame (every type but Buffer has its payload parsed).
struct Frame {
  FrameHeader header;
  ChannelKey key;       // kPartitionRequest
  std::string message;  // kError
};

class FrameDecoder {
 public:
  enum class Result {
    kNeedMore,  // `in` is used up and holds no whole frame (header) yet
    kControl,   // frame() is a whole control frame
    kBuffer,    // frame().header is a Buffer header; its header.length payload
                // bytes come next in the stream: the caller consumes them
                // (from `in` first) before calling next() again
    kError,     // error() says what is wrong; the decoder stays failed
  };

  // maxBufferPayload: the receive segment size; a longer Buffer is an error.
  explicit FrameDecoder(uint32_t maxBufferPayload) : maxBufferPayload_(maxBufferPayload) {}

  // Consumes bytes from the front of `in` (which it advances) up to the end
  // of one header (Buffer) or one whole control frame.
  Result next(std::span<const uint8_t>& in);

  const Frame& frame() const { return frame_; }
  const std::string& error() const { return error_; }
  // True between frames (no header or control payload half read).
  bool atFrameBoundary() const { return headerFill_ == 0 && !inPayload_; }

 private:
  Result fail(std::string message);
  Result finishControl();

  const uint32_t maxBufferPayload_;
  HeaderBytes header_{};
  size_t headerFill_ = 0;
  bool inPayload_ = false;  // header parsed, control payload being gathered
  std::vector<uint8_t> payload_;
  Frame frame_;
  std::string error_;
  bool failed_ = false;
};

}  // namespace network
}  // namespace sluice::cluster
