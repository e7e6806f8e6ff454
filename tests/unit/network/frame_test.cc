// The data-plane frame codec: every frame type survives a round trip in any
// chunking, and hostile input (random bytes, bit flips, truncations, huge
// lengths) ends in an error or a wait for more bytes: never a crash, never an
// allocation beyond the limits.
#include "cluster/network/frame.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace frame_test {
namespace {

using namespace sluice::cluster;
using namespace sluice::cluster::network;

constexpr uint32_t kSegment = 32 * 1024;

struct Decoded {
  FrameHeader header;
  ChannelKey key;
  std::string message;
  std::vector<uint8_t> payload;  // Buffer frames
};

enum class End { kClean, kNeedMore, kError };

// Feeds `bytes` in chunks of random length, consuming Buffer payloads itself.
End decodeAll(const std::vector<uint8_t>& bytes, std::mt19937& rng, std::vector<Decoded>& out,
              std::string* error = nullptr) {
  FrameDecoder d(kSegment);
  size_t pos = 0;
  bool inPayload = false;
  size_t payloadLeft = 0;
  while (pos < bytes.size()) {
    size_t n = std::min<size_t>(bytes.size() - pos, 1 + rng() % 64);
    std::span<const uint8_t> in(bytes.data() + pos, n);
    pos += n;
    while (!in.empty()) {
      if (inPayload) {
        size_t take = std::min(payloadLeft, in.size());
        out.back().payload.insert(out.back().payload.end(), in.begin(),
                                  in.begin() + static_cast<long>(take));
        in = in.subspan(take);
        payloadLeft -= take;
        if (payloadLeft == 0) inPayload = false;
        continue;
      }
      auto r = d.next(in);
      if (r == FrameDecoder::Result::kError) {
        if (error) *error = d.error();
        EXPECT_FALSE(d.error().empty());
        return End::kError;
      }
      if (r == FrameDecoder::Result::kNeedMore) {
        EXPECT_TRUE(in.empty()) << "kNeedMore leaves no input behind";
        continue;
      }
      Decoded f;
      f.header = d.frame().header;
      f.key = d.frame().key;
      f.message = d.frame().message;
      EXPECT_LE(f.message.size(), kMaxControlPayload);
      out.push_back(std::move(f));
      if (r == FrameDecoder::Result::kBuffer) {
        EXPECT_LE(d.frame().header.length, kSegment);
        payloadLeft = d.frame().header.length;
        out.back().payload.reserve(payloadLeft);
        inPayload = payloadLeft > 0;
      }
    }
  }
  return inPayload || !d.atFrameBoundary() ? End::kNeedMore : End::kClean;
}

ChannelKey key(int i) {
  return ChannelKey{"job-" + std::to_string(i), i % 7, i % 5, i % 11, i % 13};
}

// A random valid stream, and the frames it holds.
std::vector<uint8_t> randomStream(std::mt19937& rng, int frames, std::vector<Decoded>& expected) {
  std::vector<uint8_t> out;
  for (int i = 0; i < frames; ++i) {
    Decoded f;
    uint32_t ch = rng() % 1000;
    switch (rng() % 7) {
      case 0:
        f.header = {FrameType::kPartitionRequest, 0, ch, static_cast<uint32_t>(rng() % 10)};
        f.key = key(static_cast<int>(rng() % 100));
        appendPartitionRequest(out, ch, f.header.aux, f.key);
        break;
      case 1: {
        std::vector<uint8_t> p(rng() % 3 == 0 ? kSegment : rng() % 300);
        for (auto& b : p) b = static_cast<uint8_t>(rng());
        f.header = {FrameType::kBuffer, static_cast<uint32_t>(p.size()), ch,
                    static_cast<uint32_t>(rng() % 50)};
        f.payload = p;
        appendBuffer(out, ch, f.header.aux, p);
        break;
      }
      case 2:
        f.header = {FrameType::kCredit, 0, ch, static_cast<uint32_t>(1 + rng() % 100)};
        appendCredit(out, ch, f.header.aux);
        break;
      case 3:
        f.header = {FrameType::kCancelPartition, 0, ch, 0};
        appendCancelPartition(out, ch);
        break;
      case 4:
        f.header = {FrameType::kPartitionReleased, 0, ch, 0};
        appendPartitionReleased(out, ch);
        break;
      case 5:
        f.header = {FrameType::kError, 0, rng() % 2 ? ch : kNoChannel, 0};
        f.message = "boom " + std::to_string(rng());
        appendError(out, f.header.channel, f.message);
        break;
      default:
        f.header = {FrameType::kClose, 0, kNoChannel, 0};
        appendClose(out);
        break;
    }
    expected.push_back(std::move(f));
  }
  return out;
}

TEST(FrameTest, EveryFrameTypeRoundTripsInAnyChunking) {
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    std::vector<Decoded> expected;
    auto bytes = randomStream(rng, 40, expected);
    std::vector<Decoded> got;
    ASSERT_EQ(decodeAll(bytes, rng, got), End::kClean);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const auto& e = expected[i];
      const auto& g = got[i];
      EXPECT_EQ(g.header.type, e.header.type) << i;
      EXPECT_EQ(g.header.channel, e.header.channel) << i;
      EXPECT_EQ(g.header.aux, e.header.aux) << i;
      if (e.header.type == FrameType::kPartitionRequest) {
        EXPECT_EQ(g.key, e.key) << i;
      }
      EXPECT_EQ(g.message, e.message) << i;
      EXPECT_EQ(g.payload, e.payload) << i;
    }
  }
}

TEST(FrameTest, HeaderLayoutIsLittleEndianWithMagicAndVersion) {
  auto h = encodeHeader(FrameHeader{FrameType::kCredit, 0x01020304, 0x0A0B0C0D, 0x11223344});
  const uint8_t expected[kHeaderSize] = {0x53, 0x4C, 1,    3,    0x04, 0x03, 0x02, 0x01,
                                         0x0D, 0x0C, 0x0B, 0x0A, 0x44, 0x33, 0x22, 0x11};
  EXPECT_EQ(std::memcmp(h.data(), expected, kHeaderSize), 0);
}

std::string firstError(const std::vector<uint8_t>& bytes) {
  std::mt19937 rng(1);
  std::vector<Decoded> got;
  std::string error;
  EXPECT_EQ(decodeAll(bytes, rng, got, &error), End::kError);
  return error;
}

TEST(FrameTest, RejectsBadFramesWithAMessageNamingTheProblem) {
  std::vector<uint8_t> b;
  b = {'G', 'E', 'T', ' ', '/'};
  EXPECT_NE(firstError(b).find("bad magic"), std::string::npos);

  b.clear();
  appendCredit(b, 1, 1);
  b[2] = 9;
  EXPECT_NE(firstError(b).find("version 9"), std::string::npos);

  b.clear();
  appendCredit(b, 1, 1);
  b[3] = 42;
  EXPECT_NE(firstError(b).find("unknown frame type 42"), std::string::npos);

  // A Buffer longer than a segment: refused from the header, before any payload.
  auto h = encodeHeader(FrameHeader{FrameType::kBuffer, 0x80000000u, 1, 0});
  b.assign(h.begin(), h.end());
  EXPECT_NE(firstError(b).find("over the limit"), std::string::npos);

  h = encodeHeader(FrameHeader{FrameType::kError, kMaxControlPayload + 1, kNoChannel, 0});
  b.assign(h.begin(), h.end());
  EXPECT_NE(firstError(b).find("over the limit"), std::string::npos);

  h = encodeHeader(FrameHeader{FrameType::kCredit, 0, 1, 0});
  b.assign(h.begin(), h.end());
  EXPECT_NE(firstError(b).find("credit 0"), std::string::npos);

  h = encodeHeader(FrameHeader{FrameType::kCredit, 4, 1, 1});  // control frames without payload
  b.assign(h.begin(), h.end());
  EXPECT_NE(firstError(b).find("over the limit"), std::string::npos);

  h = encodeHeader(FrameHeader{FrameType::kBuffer, 10, kNoChannel, 0});
  b.assign(h.begin(), h.end());
  EXPECT_NE(firstError(b).find("without a channel id"), std::string::npos);

  // A PartitionRequest whose job id length disagrees with its payload.
  b.clear();
  appendPartitionRequest(b, 1, 2, ChannelKey{"job", 1, 2, 3, 4});
  b[kHeaderSize] = 200;
  EXPECT_NE(firstError(b).find("PartitionRequest payload"), std::string::npos);

  b.clear();
  appendPartitionRequest(b, 1, 2, ChannelKey{"job", -1, 2, 3, 4});
  EXPECT_NE(firstError(b).find("negative"), std::string::npos);
}

TEST(FrameTest, FuzzedStreamsEndInAnErrorOrAWaitNeverACrash) {
  std::mt19937 rng(12345);
  int errors = 0;
  int waits = 0;
  for (int round = 0; round < 3000; ++round) {
    std::vector<Decoded> expected;
    std::vector<uint8_t> bytes;
    switch (round % 3) {
      case 0:  // random bytes, sometimes after a valid magic so the header checks run
        bytes.resize(rng() % 200);
        for (auto& b : bytes) b = static_cast<uint8_t>(rng());
        if (bytes.size() >= 3 && rng() % 2) {
          bytes[0] = kMagic0;
          bytes[1] = kMagic1;
          bytes[2] = kProtocolVersion;
        }
        break;
      case 1: {  // a valid stream with bit flips
        bytes = randomStream(rng, 8, expected);
        int flips = 1 + static_cast<int>(rng() % 8);
        for (int i = 0; i < flips; ++i)
          bytes[rng() % bytes.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      }
      default:  // a valid stream cut short
        bytes = randomStream(rng, 8, expected);
        bytes.resize(rng() % bytes.size());
        break;
    }
    std::vector<Decoded> got;
    End end = decodeAll(bytes, rng, got);
    errors += end == End::kError;
    waits += end == End::kNeedMore;
    for (const auto& f : got) {
      if (f.header.type == FrameType::kBuffer) {
        EXPECT_LE(f.payload.size(), kSegment);
      }
      EXPECT_LE(f.message.size(), kMaxControlPayload);
      EXPECT_LE(f.key.jobId.size(), kMaxJobIdLength);
    }
  }
  // Both outcomes were exercised.
  EXPECT_GT(errors, 100);
  EXPECT_GT(waits, 100);
}

}  // namespace
}  // namespace frame_test
