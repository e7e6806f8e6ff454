// ElementBatch: how records cross a thread boundary inside one process.
//
// Between two subtasks of the same process a channel carries batches of
// typed records, not serialized bytes: the producer copies each record into
// the channel's current batch (or moves it, when its sender is done with it), the batch moves to
// the consumer whole (one queue operation per batch), the consumer's operator reads the records in
// place, and the empty batch goes back to the producer's pool to be filled
// again. Nothing is serialized or decoded, and a batch's records keep their
// heap capacity (strings, vectors) from one use to the next, so a steady
// stream allocates nothing.
//
// Control elements (watermarks, watermark status, barriers, end of
// partition) travel in the same batch, in order: each is kept in its wire
// encoding ([tag][fields], as a serialized channel carries it) together with
// the number of records that precede it, so the consumer handles them
// exactly as it handles them off the wire.
//
// A batch counts as one buffer of the producer's BufferPool: the pool bounds
// how many are in flight, which is what bounds memory and makes a slow
// consumer backpressure its producer, as with serialized segments.
//
// Threading: the producer's task thread fills it; once handed over, only the
// consumer's task thread reads it, until it recycles it to the pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include <sluice/core/assert.h>
#include <sluice/core/prefetch.h>
#include <sluice/core/stream_element.h>

namespace sluice {

class ElementBatch {
 public:
  // A control element: `size` bytes of its wire encoding at `offset` in
  // controlBytes(), after the first `position` records of the batch.
  struct Control {
    uint32_t position;
    uint32_t offset;
    uint32_t size;
  };

  virtual ~ElementBatch() = default;

  size_t numRecords() const { return count_; }
  // Records plus control elements.
  size_t numElements() const { return count_ + controls_.size(); }
  bool empty() const { return count_ == 0 && controls_.empty(); }
  // Full: hand it over before adding more elements.
  bool full() const { return count_ >= recordLimit_; }
  uint32_t capacity() const { return capacity_; }

  const std::vector<Control>& controls() const { return controls_; }
  const uint8_t* controlBytes() const { return controlBytes_.data(); }

  // Appends a control element after the records added so far.
  void addControl(const uint8_t* encoded, size_t size) {
    const auto offset = static_cast<uint32_t>(controlBytes_.size());
    controlBytes_.insert(controlBytes_.end(), encoded, encoded + size);
    controls_.push_back({count_, offset, static_cast<uint32_t>(size)});
    if (recordLimit_ > 0) --recordLimit_;
  }

  // What the batch stands for in the byte counters (numBytesOut/In): the
  // records' in-memory size (not heap memory they own) plus the control
  // elements' encodings.
  size_t approximateBytes() const { return count_ * recordSize_ + controlBytes_.size(); }

  // Empties the batch for reuse; records keep their storage.
  void reset() {
    count_ = 0;
    recordLimit_ = capacity_;
    controls_.clear();
    controlBytes_.clear();
  }

 protected:
  ElementBatch(uint32_t capacity, size_t recordSize)
      : capacity_(capacity == 0 ? 1 : capacity), recordSize_(recordSize) {}

  uint32_t count_ = 0;

 private:
  const uint32_t capacity_;
  // Records the batch takes before it is full: the capacity less the
  // control elements in it. Kept so that full(), asked after every record,
  // is one comparison.
  uint32_t recordLimit_ = capacity_;
  const size_t recordSize_;
  std::vector<Control> controls_;
  std::vector<uint8_t> controlBytes_;
};

// The batch of one record type. Records are assigned into slots that
// persist across uses of the batch, so their storage is reused.
template <class T>
class TypedElementBatch final : public ElementBatch {
 public:
  // Holds about `bytes` of records (at least 16, at most 8192 records).
  explicit TypedElementBatch(size_t bytes)
      : ElementBatch(capacityFor(bytes), sizeof(Record)),
        slots_(std::allocator<Record>().allocate(capacity())) {}
  ~TypedElementBatch() override {
    std::destroy_n(slots_, constructed_);
    std::allocator<Record>().deallocate(slots_, capacity());
  }
  TypedElementBatch(const TypedElementBatch&) = delete;
  TypedElementBatch& operator=(const TypedElementBatch&) = delete;

  // Adding to a full batch is not allowed: the writer hands a batch over as
  // soon as it is full.
  void add(const StreamRecord<T>& record) { put(record); }
  // Moves `record` in; a slot's old storage may go back to `record`.
  void add(StreamRecord<T>&& record) { put(std::move(record)); }
  // The same for a record given as its value and timestamp fields.
  void addValue(T&& value, bool hasTimestamp, int64_t timestamp) {
    Record& r = slot();
    r.value = std::move(value);
    r.hasTimestamp = hasTimestamp;
    r.timestamp = timestamp;
    ++count_;
  }
  const StreamRecord<T>& record(size_t i) const { return slots_[i]; }
  const StreamRecord<T>* records() const { return slots_; }

 private:
  using Record = StreamRecord<T>;
  template <class R>
  void put(R&& record) {
    slot() = std::forward<R>(record);
    ++count_;
  }
  // The slot of the next record. Slots are constructed on first use (memory
  // of a batch that never fills is not touched) and keep their storage
  // (strings, vectors) from one use of the batch to the next.
  Record& slot() {
    SLUICE_DASSERT(count_ < capacity(), "a record added to a full batch");
    if (count_ == constructed_) [[unlikely]] {
      ::new (static_cast<void*>(slots_ + constructed_)) Record();
      ++constructed_;
    }
    // Records are written faster than the lines they go to come from the
    // consumer's core (which read them last): ask for the line 512 bytes
    // ahead. Not past the batch's end: the memory there may be another
    // thread's.
    constexpr uint32_t kAhead = (512 + sizeof(Record) - 1) / sizeof(Record);
    if (count_ + kAhead < capacity()) prefetchForWrite(slots_ + count_ + kAhead);
    return slots_[count_];
  }
  static uint32_t capacityFor(size_t bytes) {
    size_t n = bytes / sizeof(Record);
    if (n < 16) n = 16;
    if (n > 8192) n = 8192;
    return static_cast<uint32_t>(n);
  }
  Record* const slots_;
  uint32_t constructed_ = 0;
};

}  // namespace sluice
