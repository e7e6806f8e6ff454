// The built-in sinks behind DataStream's print, printToErr, writeAsText,
// writeAsCsv and executeAndCollect. Each is a Sink (see <sluice/sink.h>): one
// writer per parallel subtask, on that subtask's task thread.
//
//   PrintSink<T>    one line per element on stdout or stderr, prefixed with
//                   the subtask as Flink's PrintSinkOutputWriter does.
//   TextFileSink<T> one line per element into a file per subtask.
//   CsvFileSink<T>  one row per tuple / pair / SLUICE_STRUCT, a column per field.
//   CollectSink<T>  every element into a buffer shared with the environment.
//
// Elements become text with sluice::toString (<sluice/format.h>), which
// prints like Java/Flink.
//
// Files (writeAsText, writeAsCsv), as Flink's FileOutputFormat lays them out:
// with parallelism 1 the sink writes the file `path`; with parallelism > 1,
// `path` is a directory (created if missing) holding one file per subtask,
// named "1", "2", ... (subtask index + 1).
//   WriteMode::kNoOverwrite  a file that already exists fails the job; an
//                            existing directory is used (parallelism > 1),
//                            but each subtask's file in it must not exist.
//   WriteMode::kOverwrite    existing files are replaced; with parallelism 1
//                            an existing directory at `path` is deleted
//                            recursively; with parallelism > 1 an existing
//                            file at `path` is deleted and an existing
//                            directory kept (files of a run with a higher
//                            parallelism stay, as in Flink).
// A writer opens its file when the sink creates it (task start) and fails
// with SluiceException "<api>: ... '<file>': <strerror>" when it cannot; it
// writes in large blocks and fails the same way on a write error (e.g. disk
// full). Everything is written out by flush(endOfInput) and by close().
//
// Threads: sinks are immutable and shared by all subtasks; each writer is used
// by its own task thread only. PrintSink writers of different subtasks share
// stdout: every line goes out with one fwrite, which POSIX stdio performs
// atomically per FILE, so lines never interleave mid-line.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <sluice/core/owned.h>
#include <sluice/core/serializer.h>
#include <sluice/core/status.h>
#include <sluice/format.h>
#include <sluice/sink.h>

namespace sluice {

// What a file sink does with an output path that already exists (Flink's
// FileSystem.WriteMode).
enum class WriteMode { kNoOverwrite, kOverwrite };

namespace internal {

// Flink's print prefix: "<id>:<subtask+1>> " with parallelism > 1 (no "<id>:"
// without an identifier), "<id>> " with parallelism 1 and an identifier, else
// nothing.
std::string printPrefix(const std::string& sinkIdentifier, int subtask, int parallelism);

// Writes `data` to `stream` with one fwrite and flushes it, so a line reaches
// a pipe or terminal as soon as it is printed (like Java's System.out).
void writeLine(std::FILE* stream, const std::string& data);

// The file one subtask of a file sink writes, buffered. `api` names the call
// in error messages ("writeAsText").
class TextOutputFile {
 public:
  static constexpr size_t kBufferSize = size_t{64} << 10;

  // Prepares `path` (see the rules at the top of this file) and opens this
  // subtask's file. `resume`: the job restarted after a failure (attempt >
  // 0); the file is appended to, whatever the mode, so the output written
  // before the failure stays (records replayed from the restored
  // checkpoint appear again: at-least-once). Throws SluiceException.
  TextOutputFile(std::string api, const std::string& path, WriteMode mode, int subtask,
                 int parallelism, bool resume = false);
  ~TextOutputFile();
  TextOutputFile(const TextOutputFile&) = delete;
  TextOutputFile& operator=(const TextOutputFile&) = delete;

  // Text appended here is written out when the buffer fills (see written()).
  std::string& buffer() { return buffer_; }
  // Call after appending a record: writes the buffer out once it is large.
  void written() {
    if (buffer_.size() >= kBufferSize) writeOut();
  }
  // Writes everything out. Throws SluiceException on a write error.
  void flush() { writeOut(); }
  // Writes out what is left and closes the file; errors are logged, not
  // thrown (close also runs after a failure). Idempotent.
  void close();

  const std::string& filePath() const { return file_; }

 private:
  void writeOut();

  std::string api_;
  std::string file_;
  int fd_ = -1;
  std::string buffer_;
};

// The elements a CollectSink received, shared with the environment that
// returns them from executeAndCollect(). Any thread.
template <class T>
class CollectBuffer {
 public:
  void append(const T& value) {
    std::lock_guard lock(mu_);
    values_.push_back(value);
  }
  // Everything collected so far, leaving the buffer empty.
  std::vector<T> take() {
    std::lock_guard lock(mu_);
    return std::exchange(values_, {});
  }
  size_t size() const {
    std::lock_guard lock(mu_);
    return values_.size();
  }

 private:
  mutable std::mutex mu_;
  std::vector<T> values_;
};

template <class T>
struct IsCsvRecord : std::false_type {};
template <class A, class B>
struct IsCsvRecord<std::pair<A, B>> : std::true_type {};
template <class... Ts>
struct IsCsvRecord<std::tuple<Ts...>> : std::true_type {};

}  // namespace internal

// Prints toString(element) and a newline to stdout (or stderr), each line
// prefixed as internal::printPrefix says (print() / printToErr()).
template <class T>
class PrintSink final : public Sink<T> {
 public:
  explicit PrintSink(bool stdErr = false, std::string sinkIdentifier = "")
      : stream_(nullptr), stdErr_(stdErr), sinkIdentifier_(std::move(sinkIdentifier)) {}

  // Test hook: print to `stream` (not owned; must outlive every writer).
  static PrintSink toStream(std::FILE* stream, std::string sinkIdentifier = "") {
    PrintSink sink(false, std::move(sinkIdentifier));
    sink.stream_ = stream;
    return sink;
  }

  std::unique_ptr<SinkWriter<T>> createWriter(WriterInitContext& context) const override {
    std::FILE* stream = stream_ != nullptr ? stream_ : (stdErr_ ? stderr : stdout);
    return internal::makeOwned<Writer>(
        stream, internal::printPrefix(sinkIdentifier_, context.getSubtaskId(),
                                      context.getNumberOfParallelSubtasks()));
  }

 private:
  class Writer final : public SinkWriter<T> {
   public:
    Writer(std::FILE* stream, std::string prefix) : stream_(stream), prefix_(std::move(prefix)) {}
    void write(const T& element, const SinkWriterContext&) override {
      line_.assign(prefix_);
      appendTo(line_, element);
      line_ += '\n';
      internal::writeLine(stream_, line_);
    }
    void flush(bool) override { std::fflush(stream_); }

   private:
    std::FILE* stream_;
    std::string prefix_;
    std::string line_;  // reused for every element
  };

  std::FILE* stream_;
  bool stdErr_;
  std::string sinkIdentifier_;
};

// Writes toString(element) and "\n" per element (writeAsText), into `path` or
// `path`/<subtask+1> (see the top of this file).
template <class T>
class TextFileSink final : public Sink<T> {
 public:
  explicit TextFileSink(std::string path, WriteMode mode = WriteMode::kNoOverwrite)
      : path_(std::move(path)), mode_(mode) {
    if (path_.empty()) throw SluiceException("writeAsText: the path is empty");
  }

  std::unique_ptr<SinkWriter<T>> createWriter(WriterInitContext& context) const override {
    return internal::makeOwned<Writer>(path_, mode_, context.getSubtaskId(),
                                       context.getNumberOfParallelSubtasks(),
                                       context.getRuntimeContext().getAttemptNumber() > 0);
  }

 private:
  class Writer final : public SinkWriter<T> {
   public:
    Writer(const std::string& path, WriteMode mode, int subtask, int parallelism, bool resume)
        : file_("writeAsText", path, mode, subtask, parallelism, resume) {}
    void write(const T& element, const SinkWriterContext&) override {
      std::string& buf = file_.buffer();
      appendTo(buf, element);
      buf += '\n';
      file_.written();
    }
    void flush(bool) override { file_.flush(); }
    void close() override { file_.close(); }

   private:
    internal::TextOutputFile file_;
  };

  std::string path_;
  WriteMode mode_;
};

// Writes one row per element (writeAsCsv): the fields' toString text joined
// by `fieldDelimiter`, then `rowDelimiter`. Fields are not quoted or escaped,
// as in Flink's writeAsCsv: a field that contains a delimiter makes the row
// ambiguous. Files as for TextFileSink.
//
// T: std::pair, std::tuple, or a SLUICE_STRUCT type (fields in declared
// order).
template <class T>
class CsvFileSink final : public Sink<T> {
  static_assert(internal::IsCsvRecord<T>::value || SluiceStruct<T>,
                "writeAsCsv: the element type must be a std::pair, a std::tuple or a "
                "SLUICE_STRUCT type (one CSV column per field); use writeAsText or map to "
                "a tuple first");

 public:
  CsvFileSink(std::string path, WriteMode mode = WriteMode::kNoOverwrite,
              std::string rowDelimiter = "\n", std::string fieldDelimiter = ",")
      : path_(std::move(path)),
        mode_(mode),
        rowDelimiter_(std::move(rowDelimiter)),
        fieldDelimiter_(std::move(fieldDelimiter)) {
    if (path_.empty()) throw SluiceException("writeAsCsv: the path is empty");
  }

  std::unique_ptr<SinkWriter<T>> createWriter(WriterInitContext& context) const override {
    return internal::makeOwned<Writer>(*this, context.getSubtaskId(),
                                       context.getNumberOfParallelSubtasks(),
                                       context.getRuntimeContext().getAttemptNumber() > 0);
  }

 private:
  class Writer final : public SinkWriter<T> {
   public:
    Writer(const CsvFileSink& sink, int subtask, int parallelism, bool resume)
        : file_("writeAsCsv", sink.path_, sink.mode_, subtask, parallelism, resume),
          rowDelimiter_(sink.rowDelimiter_),
          fieldDelimiter_(sink.fieldDelimiter_) {}

    void write(const T& element, const SinkWriterContext&) override {
      std::string& buf = file_.buffer();
      bool first = true;
      auto field = [&](const auto& f) {
        if (!first) buf += fieldDelimiter_;
        first = false;
        appendTo(buf, f);
      };
      if constexpr (SluiceStruct<T>) {
        forEachField(element, [&](std::string_view, const auto& f) { field(f); });
      } else {
        std::apply([&](const auto&... fs) { (field(fs), ...); }, element);
      }
      buf += rowDelimiter_;
      file_.written();
    }
    void flush(bool) override { file_.flush(); }
    void close() override { file_.close(); }

   private:
    internal::TextOutputFile file_;
    std::string rowDelimiter_;
    std::string fieldDelimiter_;
  };

  std::string path_;
  WriteMode mode_;
  std::string rowDelimiter_;
  std::string fieldDelimiter_;
};

// Appends every element to a CollectBuffer shared with the environment
// (executeAndCollect). Elements of one subtask keep their order; subtasks
// interleave arbitrarily. Each append takes the buffer's lock: this sink is
// for tests and small results, not for throughput.
template <class T>
class CollectSink final : public Sink<T> {
 public:
  explicit CollectSink(std::shared_ptr<internal::CollectBuffer<T>> buffer)
      : buffer_(std::move(buffer)) {
    if (!buffer_) throw SluiceException("CollectSink: the buffer is null");
  }

  std::unique_ptr<SinkWriter<T>> createWriter(WriterInitContext&) const override {
    return internal::makeOwned<Writer>(buffer_);
  }

 private:
  class Writer final : public SinkWriter<T> {
   public:
    explicit Writer(std::shared_ptr<internal::CollectBuffer<T>> buffer)
        : buffer_(std::move(buffer)) {}
    void write(const T& element, const SinkWriterContext&) override { buffer_->append(element); }

   private:
    std::shared_ptr<internal::CollectBuffer<T>> buffer_;
  };

  std::shared_ptr<internal::CollectBuffer<T>> buffer_;
};

}  // namespace sluice
