#include "runtime/input_processor.h"

#include <algorithm>

#include <fmt/format.h>

namespace sluice::runtime {

// ---- SourceInputProcessor ------------------------------------------------------

InputStatus SourceInputProcessor::processInput() {
  // After the barrier of a stop-with-savepoint the source emits nothing
  // more; the job ends once the savepoint is complete.
  if (stopped_) return InputStatus::kNothingAvailable;
  return source_.emitNext();
}

void SourceInputProcessor::triggerCheckpoint(const CheckpointBarrier& barrier,
                                             const checkpoint::CheckpointOptions& options) {
  if (stopped_) {
    handler_.declineCheckpoint(barrier.id, "the source has stopped");
    return;
  }
  // An overtaken trigger is declined: a drain must not have ended event
  // time, nor a stop have stopped the source, for it.
  const bool overtaken = handler_.checkpointOvertaken(barrier.id);
  if (options.drain && !overtaken) source_.emitMaxWatermark();
  handler_.performCheckpoint(barrier, options);
  if (options.terminate && !overtaken) stopped_ = true;
}

void SourceInputProcessor::abortCheckpoint(int64_t id,
                                           const checkpoint::CheckpointOptions& options) {
  (void)id;
  // A stop-with-savepoint failed: the source reads on (as in Flink, the job
  // keeps running).
  if (options.terminate) stopped_ = false;
}

// ---- NetworkInputProcessor ----------------------------------------------------------

NetworkInputProcessor::NetworkInputProcessor(StreamOperatorBase& head, InputGate& gate,
                                             const std::vector<InputChannelInfo>& channels,
                                             const StreamGraph& graph, CheckpointingMode mode,
                                             CheckpointHandler& handler)
    : head_(head),
      gate_(gate),
      channels_(channels),
      handler_(handler),
      decoders_(channels.size()),
      cursors_(channels.size()),
      processors_(channels.size()),
      localIndex_(channels.size()),
      channelsPerInput_(static_cast<size_t>(head.numberOfInputs()), 0),
      endedPerInput_(static_cast<size_t>(head.numberOfInputs()), 0),
      queued_(channels.size()),
      aligner_(static_cast<int>(channels.size()), mode, *this) {
  for (size_t c = 0; c < channels.size(); ++c) {
    const InputChannelInfo& info = channels[c];
    const StreamEdge& e = graph.edge(info.streamEdge);
    processors_[c] = e.type->createRecordProcessor(head, info.inputIndex);
    localIndex_[c] = channelsPerInput_.at(static_cast<size_t>(info.inputIndex))++;
  }
  for (int n : channelsPerInput_) valves_.emplace_back(n);
  inputWatermarks_.assign(channelsPerInput_.size(), kMinTimestamp);
}

InputStatus NetworkInputProcessor::processInput() {
  if (ended_ == numberOfChannels()) return InputStatus::kEndOfInput;
  if (aligner_.hasResumable()) {
    drainChannel(aligner_.takeResumable());
    return InputStatus::kMoreAvailable;
  }
  int c;
  Buffer b;
  if (!gate_.poll(c, b)) return InputStatus::kNothingAvailable;
  const auto ci = static_cast<size_t>(c);
  add(bytesIn_, b.size);
  // A blocked channel, or one whose earlier buffers are still being read,
  // keeps the buffer queued behind them.
  const bool idle = !aligner_.isBlocked(c) && !busy(ci);
  queued_[ci].push_back(b);
  if (idle) drainChannel(c);
  return InputStatus::kMoreAvailable;
}

void NetworkInputProcessor::drainChannel(int c) {
  const auto ci = static_cast<size_t>(c);
  const uint8_t* data;
  size_t size;
  // numRecordsIn is counted here, in a local, and published once per drain
  // (per buffer or so), also when an operator throws: no shared write per
  // record.
  struct Publish {
    std::atomic<int64_t>& cell;
    int64_t records = 0;
    ~Publish() { add(cell, records); }
  } publish{recordsIn_};
  while (!aligner_.isBlocked(c)) {
    if (cursors_[ci].buffer.batch != nullptr) {
      publish.records += drainBatch(c);
      continue;
    }
    if (!decoders_[ci].hasBuffer()) {
      if (queued_[ci].empty()) return;
      const Buffer next = queued_[ci].front();
      queued_[ci].pop_front();
      if (next.batch != nullptr) {
        cursors_[ci] = BatchCursor{next, 0, 0};
        continue;
      }
      decoders_[ci].setBuffer(next);
    }
    while (!aligner_.isBlocked(c) && decoders_[ci].next(data, size)) {
      publish.records += handle(c, data, size) ? 1 : 0;
    }
  }
}

int64_t NetworkInputProcessor::drainBatch(int c) {
  const auto ci = static_cast<size_t>(c);
  BatchCursor& cursor = cursors_[ci];
  const ElementBatch& batch = *cursor.buffer.batch;
  const auto& controls = batch.controls();
  int64_t records = 0;
  while (!aligner_.isBlocked(c)) {
    const size_t end =
        cursor.control < controls.size() ? controls[cursor.control].position : batch.numRecords();
    if (cursor.record < end) {
      const size_t from = cursor.record;
      cursor.record = end;
      records += static_cast<int64_t>(end - from);
      processors_[ci]->processBatch(batch, from, end);
    }
    if (cursor.control == controls.size()) {
      recycle(cursor.buffer);
      cursor = BatchCursor{};
      return records;
    }
    const ElementBatch::Control& control = controls[cursor.control++];
    handle(c, batch.controlBytes() + control.offset, control.size);
  }
  return records;
}

void NetworkInputProcessor::apply(int input, const WatermarkValve::Emit& e) {
  if (e.watermark) {
    // The task's input watermark: the minimum over its inputs (Flink's
    // currentInputWatermark), noted before the operator sees it.
    inputWatermarks_[static_cast<size_t>(input)] = e.watermarkValue;
    int64_t min = e.watermarkValue;
    for (int64_t w : inputWatermarks_) min = std::min(min, w);
    inputWatermark_.store(min, std::memory_order_relaxed);
    head_.processWatermark(input, Watermark{e.watermarkValue});
  }
  if (e.status) head_.processWatermarkStatus(input, e.statusValue);
}

bool NetworkInputProcessor::handle(int c, const uint8_t* data, size_t size) {
  const auto ci = static_cast<size_t>(c);
  DataInputView in(data, size);
  const int input = channels_[ci].inputIndex;
  const auto vi = static_cast<size_t>(input);
  auto tag = static_cast<ElementTag>(in.readU8());
  switch (tag) {
    case ElementTag::kRecord: processors_[ci]->processRecord(in, false, kMinTimestamp); return true;
    case ElementTag::kRecordWithTimestamp: {
      int64_t ts = in.readI64();
      processors_[ci]->processRecord(in, true, ts);
      return true;
    }
    case ElementTag::kWatermark:
      apply(input, valves_[vi].onWatermark(localIndex_[ci], in.readI64()));
      break;
    case ElementTag::kWatermarkStatus:
      apply(input,
            valves_[vi].onStatus(localIndex_[ci], static_cast<WatermarkStatus>(in.readU8())));
      break;
    case ElementTag::kBarrier: {
      CheckpointBarrier b;
      checkpoint::CheckpointOptions o;
      checkpoint::decodeBarrier(in, b, o);
      aligner_.processBarrier(c, b, o);
      break;
    }
    case ElementTag::kEndOfPartition:
      ++ended_;
      apply(input, valves_[vi].onEndOfPartition(localIndex_[ci]));
      if (++endedPerInput_[vi] == channelsPerInput_[vi]) head_.endInput(input);
      aligner_.processEndOfPartition(c);
      break;
    default:
      throw SerializationError(fmt::format("corrupt stream: unknown element tag {} on channel {}",
                                           static_cast<int>(tag), c));
  }
  return false;
}

void NetworkInputProcessor::triggerCheckpoint(const CheckpointBarrier& barrier,
                                              const checkpoint::CheckpointOptions&) {
  handler_.declineCheckpoint(barrier.id, "only sources are triggered");
}

void NetworkInputProcessor::abortCheckpoint(int64_t id, const checkpoint::CheckpointOptions&) {
  aligner_.abortCheckpoint(id);
}

void NetworkInputProcessor::triggerCheckpointOnBarrier(
    const CheckpointBarrier& barrier, const checkpoint::CheckpointOptions& options) {
  handler_.performCheckpoint(barrier, options);
}

void NetworkInputProcessor::declineCheckpointOnBarrier(int64_t id, const std::string& reason) {
  handler_.declineCheckpoint(id, reason);
}

void NetworkInputProcessor::release() {
  for (auto& q : queued_) {
    for (Buffer& buffer : q) recycle(buffer);
    q.clear();
  }
  for (auto& d : decoders_) d.release();
  for (auto& cursor : cursors_) {
    if (cursor.buffer.batch != nullptr) recycle(cursor.buffer);
    cursor = BatchCursor{};
  }
}

}  // namespace sluice::runtime
