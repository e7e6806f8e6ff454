#include "checkpoint/checkpoint_options.h"

#include <sluice/graph/operator.h>

namespace sluice::checkpoint {
namespace {

constexpr uint8_t kTerminate = 1;
constexpr uint8_t kDrain = 2;

}  // namespace

std::vector<uint8_t> encodeBarrier(const CheckpointBarrier& barrier,
                                   const CheckpointOptions& options) {
  std::vector<uint8_t> bytes;
  DataOutputView out(bytes);
  out.writeU8(static_cast<uint8_t>(ElementTag::kBarrier));
  out.writeI64(barrier.id);
  out.writeI64(barrier.timestamp);
  out.writeU8(static_cast<uint8_t>(barrier.type));
  out.writeU8(
      static_cast<uint8_t>((options.terminate ? kTerminate : 0) | (options.drain ? kDrain : 0)));
  out.writeString(options.targetDirectory);
  return bytes;
}

void decodeBarrier(DataInputView& in, CheckpointBarrier& barrier, CheckpointOptions& options) {
  barrier.id = in.readI64();
  barrier.timestamp = in.readI64();
  barrier.type = static_cast<CheckpointType>(in.readU8());
  const uint8_t flags = in.readU8();
  options.type = barrier.type;
  options.terminate = (flags & kTerminate) != 0;
  options.drain = (flags & kDrain) != 0;
  in.readString(options.targetDirectory);
}

}  // namespace sluice::checkpoint
