// Internal logging: the only way library code writes output.
//
// sluice::log::info("task {} switched to {}", name, state) formats with fmt
// syntax (checked at compile time) and writes one line to stderr:
//   2024-05-01 12:00:00.123 [info] [Map (1/4)] task Map (1/4) switched to RUNNING
// The bracketed thread name is the one set with setThreadName() on the calling
// thread (task threads set theirs to the task name), or the thread id.
//
// The level defaults to info and is read once, on first use, from the
// environment variable SLUICE_LOG_LEVEL (trace|debug|info|warn|error|off, any
// case); setLevel() changes it at run time. A message below the level costs
// one atomic load: its arguments are not formatted.
//
// Threads: every function may be called from any thread. The thread name is
// thread_local. The output is spdlog underneath, but spdlog is not part of
// this header, so code that logs needs only fmt.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace sluice::log {

enum class Level { kTrace = 0, kDebug, kInfo, kWarn, kError, kOff };

// Parses trace|debug|info|warn|warning|error|off, any case.
std::optional<Level> parseLevel(std::string_view text);

Level level();
void setLevel(Level level);
bool shouldLog(Level level);

// Cluster processes: from now on every line goes to stdout and is appended
// to `file` (its directory is created). Call once, before other threads log.
// Returns an error naming the file and the cause when it cannot be opened
// (empty on success).
std::string logToStdoutAndFile(const std::string& file);

// Names the calling thread in every line it logs from now on; empty clears.
void setThreadName(std::string_view name);
const std::string& threadName();

namespace detail {
// Writes one formatted message at the given level, unconditionally.
void write(Level level, std::string_view message);
}  // namespace detail

template <class... Args>
void logAt(Level lvl, fmt::format_string<Args...> format, Args&&... args) {
  if (!shouldLog(lvl)) return;
  detail::write(lvl, fmt::format(format, std::forward<Args>(args)...));
}

template <class... Args>
void trace(fmt::format_string<Args...> format, Args&&... args) {
  logAt(Level::kTrace, format, std::forward<Args>(args)...);
}
template <class... Args>
void debug(fmt::format_string<Args...> format, Args&&... args) {
  logAt(Level::kDebug, format, std::forward<Args>(args)...);
}
template <class... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  logAt(Level::kInfo, format, std::forward<Args>(args)...);
}
template <class... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  logAt(Level::kWarn, format, std::forward<Args>(args)...);
}
template <class... Args>
void error(fmt::format_string<Args...> format, Args&&... args) {
  logAt(Level::kError, format, std::forward<Args>(args)...);
}

}  // namespace sluice::log
