// Status and Result<T>: how fallible internals (I/O, channels, storage,
// network) report failure without exceptions.
//
// A Status is either OK or carries a code and a message that names what went
// wrong and where. Result<T> holds a value or a non-OK Status. Both are
// [[nodiscard]]: a caller checks them or passes them on.
//
// Which one the engine uses where (docs/internals.md, "Errors"):
//   - Engine I/O outside user calls returns Status / Result: checkpoint
//     storage and _metadata, restore planning, the asynchronous snapshot
//     upload, channels. Its caller decides what the failure means (decline
//     the checkpoint, fail the attempt, tell the user).
//   - A failure inside a user call throws: state access from processElement,
//     serializers, user functions. It unwinds to the task boundary, which
//     fails the attempt with the message.
//   - Misuse of the API (a wrong config key, an invalid graph) throws
//     SluiceException while the job is built, before anything runs.
//   - A broken invariant of our own code is SLUICE_ASSERT (core/assert.h).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace sluice {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kIoError,
  kCorruption,
  kCancelled,
  kTimedOut,
  kInternal,
  kUserError,
};

class [[nodiscard]] Status {
 public:
  Status() = default;

  static Status ok() { return Status(); }
  static Status invalidArgument(std::string msg) {
    return {StatusCode::kInvalidArgument, std::move(msg)};
  }
  static Status notFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
  static Status ioError(std::string msg) { return {StatusCode::kIoError, std::move(msg)}; }
  static Status corruption(std::string msg) { return {StatusCode::kCorruption, std::move(msg)}; }
  static Status cancelled(std::string msg) { return {StatusCode::kCancelled, std::move(msg)}; }
  static Status timedOut(std::string msg) { return {StatusCode::kTimedOut, std::move(msg)}; }
  static Status internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }
  static Status userError(std::string msg) { return {StatusCode::kUserError, std::move(msg)}; }

  bool isOk() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return isOk(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "IoError: cannot open 'x': No such file or directory"
  std::string toString() const;

 private:
  Status(StatusCode code, std::string msg) : code_(code), message_(std::move(msg)) {}

  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

const char* statusCodeName(StatusCode code);

inline std::string Status::toString() const {
  if (isOk()) return "OK";
  return std::string(statusCodeName(code_)) + ": " + message_;
}

inline const char* statusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kIoError: return "IoError";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kCancelled: return "Cancelled";
    case StatusCode::kTimedOut: return "TimedOut";
    case StatusCode::kInternal: return "Internal";
    case StatusCode::kUserError: return "UserError";
  }
  return "Unknown";
}

// Thrown by the API for invalid use at job-build time and by library code that
// must surface a Status through user-facing calls.
class SluiceException : public std::runtime_error {
 public:
  explicit SluiceException(const std::string& what) : std::runtime_error(what) {}
  explicit SluiceException(const Status& s) : std::runtime_error(s.toString()) {}
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT
  bool isOk() const { return status_.isOk(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  // Throws SluiceException when not OK.
  T valueOrThrow() && {
    if (!isOk()) throw SluiceException(status_);
    return std::move(*value_);
  }

 private:
  Status status_;
  std::optional<T> value_;
};

#define SLUICE_RETURN_IF_ERROR(expr)           \
  do {                                         \
    ::sluice::Status _sluice_st = (expr);      \
    if (!_sluice_st.isOk()) return _sluice_st; \
  } while (0)

}  // namespace sluice
