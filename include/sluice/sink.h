// Sinks, in the style of Flink's Sink V2 API: a Sink creates one SinkWriter
// per parallel subtask; the writer receives every element on its task thread,
// is flushed at the end of input, and closed last (also after a failure).
// Exactly-once (two-phase commit) sinks come with checkpoints.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include <sluice/core/runtime_context.h>

namespace sluice {

class SinkWriterContext {
 public:
  virtual ~SinkWriterContext() = default;
  // The element's timestamp, or nullopt when it has none.
  virtual std::optional<int64_t> timestamp() const = 0;
  virtual int64_t currentWatermark() const = 0;
};

class WriterInitContext {
 public:
  virtual ~WriterInitContext() = default;
  virtual int getSubtaskId() const = 0;
  virtual int getNumberOfParallelSubtasks() const = 0;
  virtual RuntimeContext& getRuntimeContext() = 0;
};

template <class T>
class SinkWriter {
 public:
  virtual ~SinkWriter() = default;
  virtual void write(const T& element, const SinkWriterContext& context) = 0;
  // `endOfInput`: the last call; everything buffered must be written out.
  virtual void flush(bool endOfInput) { (void)endOfInput; }
  virtual void close() {}
};

// Must be shareable between threads: createWriter is called once per subtask.
template <class T>
class Sink {
 public:
  using InputType = T;
  virtual ~Sink() = default;
  virtual std::unique_ptr<SinkWriter<T>> createWriter(WriterInitContext& context) const = 0;
};

}  // namespace sluice
