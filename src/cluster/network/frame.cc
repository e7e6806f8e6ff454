#include "cluster/network/frame.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace sluice::cluster {

std::string ChannelKey::toString() const {
  return fmt::format("job {} attempt {} edge {} subtask {} subpartition {}", jobId, attempt,
                     jobEdge, producerSubtask, subpartition);
}

namespace network {
namespace {

void putU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void putU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t getU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t getU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

void appendHeader(std::vector<uint8_t>& out, const FrameHeader& h) {
  size_t at = out.size();
  out.resize(at + kHeaderSize);
  encodeHeader(h, out.data() + at);
}

// Printable excerpt of untrusted text for an error message.
std::string printable(std::string_view s) {
  std::string r;
  for (char c : s.substr(0, 64)) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) {
      r += c;
    } else {
      r += fmt::format("\\x{:02x}", u);
    }
  }
  return r;
}

}  // namespace

const char* frameTypeName(FrameType type) {
  switch (type) {
    case FrameType::kPartitionRequest: return "PartitionRequest";
    case FrameType::kBuffer: return "Buffer";
    case FrameType::kCredit: return "Credit";
    case FrameType::kCancelPartition: return "CancelPartition";
    case FrameType::kPartitionReleased: return "PartitionReleased";
    case FrameType::kError: return "Error";
    case FrameType::kClose: return "Close";
  }
  return "Unknown";
}

void encodeHeader(const FrameHeader& h, uint8_t* out) {
  out[0] = kMagic0;
  out[1] = kMagic1;
  out[2] = kProtocolVersion;
  out[3] = static_cast<uint8_t>(h.type);
  putU32(out + 4, h.length);
  putU32(out + 8, h.channel);
  putU32(out + 12, h.aux);
}

void appendPartitionRequest(std::vector<uint8_t>& out, uint32_t channel, uint32_t initialCredit,
                            const ChannelKey& key) {
  size_t idLen = std::min<size_t>(key.jobId.size(), kMaxJobIdLength);
  auto length = static_cast<uint32_t>(2 + idLen + 16);
  appendHeader(out, {FrameType::kPartitionRequest, length, channel, initialCredit});
  size_t at = out.size();
  out.resize(at + length);
  uint8_t* p = out.data() + at;
  putU16(p, static_cast<uint16_t>(idLen));
  std::memcpy(p + 2, key.jobId.data(), idLen);
  p += 2 + idLen;
  putU32(p, static_cast<uint32_t>(key.attempt));
  putU32(p + 4, static_cast<uint32_t>(key.jobEdge));
  putU32(p + 8, static_cast<uint32_t>(key.producerSubtask));
  putU32(p + 12, static_cast<uint32_t>(key.subpartition));
}

void appendCredit(std::vector<uint8_t>& out, uint32_t channel, uint32_t credit) {
  appendHeader(out, {FrameType::kCredit, 0, channel, credit});
}
void appendCancelPartition(std::vector<uint8_t>& out, uint32_t channel) {
  appendHeader(out, {FrameType::kCancelPartition, 0, channel, 0});
}
void appendPartitionReleased(std::vector<uint8_t>& out, uint32_t channel) {
  appendHeader(out, {FrameType::kPartitionReleased, 0, channel, 0});
}
void appendError(std::vector<uint8_t>& out, uint32_t channel, const std::string& message) {
  size_t n = std::min<size_t>(message.size(), kMaxControlPayload);
  appendHeader(out, {FrameType::kError, static_cast<uint32_t>(n), channel, 0});
  out.insert(out.end(), message.begin(), message.begin() + static_cast<std::ptrdiff_t>(n));
}
void appendClose(std::vector<uint8_t>& out) {
  appendHeader(out, {FrameType::kClose, 0, kNoChannel, 0});
}
void appendBuffer(std::vector<uint8_t>& out, uint32_t channel, uint32_t backlog,
                  std::span<const uint8_t> payload) {
  appendHeader(out, {FrameType::kBuffer, static_cast<uint32_t>(payload.size()), channel, backlog});
  out.insert(out.end(), payload.begin(), payload.end());
}

FrameDecoder::Result FrameDecoder::fail(std::string message) {
  failed_ = true;
  error_ = std::move(message);
  return Result::kError;
}

FrameDecoder::Result FrameDecoder::next(std::span<const uint8_t>& in) {
  if (failed_) return Result::kError;
  if (!inPayload_) {
    size_t take = std::min(kHeaderSize - headerFill_, in.size());
    std::memcpy(header_.data() + headerFill_, in.data(), take);
    headerFill_ += take;
    in = in.subspan(take);
    // Reject a wrong magic as soon as its bytes are there: a stray client
    // (an HTTP request, a port scan) is named before it sends 16 bytes.
    if (headerFill_ >= 1 && header_[0] != kMagic0) {
      return fail(
          fmt::format("bad magic byte 0x{:02x} (not a Sluice data-plane peer)", header_[0]));
    }
    if (headerFill_ >= 2 && header_[1] != kMagic1) {
      return fail(
          fmt::format("bad magic byte 0x{:02x} (not a Sluice data-plane peer)", header_[1]));
    }
    if (headerFill_ >= 3 && header_[2] != kProtocolVersion) {
      return fail(fmt::format("unsupported data-plane protocol version {} (this build speaks {})",
                              header_[2], kProtocolVersion));
    }
    if (headerFill_ < kHeaderSize) return Result::kNeedMore;
    headerFill_ = 0;
    uint8_t type = header_[3];
    FrameHeader h;
    h.length = getU32(header_.data() + 4);
    h.channel = getU32(header_.data() + 8);
    h.aux = getU32(header_.data() + 12);
    if (type < static_cast<uint8_t>(FrameType::kPartitionRequest) ||
        type > static_cast<uint8_t>(FrameType::kClose)) {
      return fail(fmt::format("unknown frame type {}", type));
    }
    h.type = static_cast<FrameType>(type);
    uint32_t limit = 0;
    switch (h.type) {
      case FrameType::kBuffer: limit = maxBufferPayload_; break;
      case FrameType::kPartitionRequest:
      case FrameType::kError: limit = kMaxControlPayload; break;
      default: limit = 0; break;
    }
    if (h.length > limit) {
      return fail(fmt::format("{} frame of {} bytes, over the limit of {} bytes",
                              frameTypeName(h.type), h.length, limit));
    }
    if (h.type == FrameType::kCredit && (h.aux == 0 || h.aux > kMaxCredit)) {
      return fail(fmt::format("Credit frame with credit {} (must be 1..{})", h.aux, kMaxCredit));
    }
    if (h.type == FrameType::kPartitionRequest && h.aux > kMaxCredit) {
      return fail(
          fmt::format("PartitionRequest with initial credit {} (at most {})", h.aux, kMaxCredit));
    }
    if (h.channel == kNoChannel && h.type != FrameType::kError && h.type != FrameType::kClose) {
      return fail(fmt::format("{} frame without a channel id", frameTypeName(h.type)));
    }
    frame_ = Frame{};
    frame_.header = h;
    if (h.type == FrameType::kBuffer) return Result::kBuffer;
    if (h.length == 0) return finishControl();
    inPayload_ = true;
    payload_.clear();
    payload_.reserve(h.length);  // bounded by kMaxControlPayload above
  }
  size_t want = frame_.header.length - payload_.size();
  size_t take = std::min(want, in.size());
  payload_.insert(payload_.end(), in.begin(), in.begin() + static_cast<std::ptrdiff_t>(take));
  in = in.subspan(take);
  if (payload_.size() < frame_.header.length) return Result::kNeedMore;
  inPayload_ = false;
  return finishControl();
}

FrameDecoder::Result FrameDecoder::finishControl() {
  switch (frame_.header.type) {
    case FrameType::kPartitionRequest: {
      const uint8_t* p = payload_.data();
      size_t n = payload_.size();
      if (n < 2) return fail("PartitionRequest payload too short for its job id length");
      size_t idLen = getU16(p);
      if (idLen == 0 || idLen > kMaxJobIdLength) {
        return fail(fmt::format("PartitionRequest with a job id of {} bytes (must be 1..{})", idLen,
                                kMaxJobIdLength));
      }
      if (n != 2 + idLen + 16) {
        return fail(
            fmt::format("PartitionRequest payload of {} bytes, expected {} for a {}-byte job id", n,
                        2 + idLen + 16, idLen));
      }
      ChannelKey& key = frame_.key;
      key.jobId.assign(reinterpret_cast<const char*>(p + 2), idLen);
      p += 2 + idLen;
      int32_t v[4];
      for (int i = 0; i < 4; ++i) v[i] = static_cast<int32_t>(getU32(p + 4 * i));
      if (v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < 0) {
        return fail(
            fmt::format("PartitionRequest for job {} with a negative field ({}, {}, {}, {})",
                        printable(key.jobId), v[0], v[1], v[2], v[3]));
      }
      key.attempt = v[0];
      key.jobEdge = v[1];
      key.producerSubtask = v[2];
      key.subpartition = v[3];
      break;
    }
    case FrameType::kError: frame_.message.assign(payload_.begin(), payload_.end()); break;
    default: break;
  }
  payload_.clear();
  return Result::kControl;
}

}  // namespace network
}  // namespace sluice::cluster
