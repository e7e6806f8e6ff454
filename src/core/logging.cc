#include "core/logging.h"

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <memory>

#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace sluice::log {
namespace {

thread_local std::string tThreadName;

// Pattern flag %N: the thread name set with setThreadName(), else the thread id.
// Formatting runs on the logging thread (the logger is synchronous), so the
// thread_local is the caller's.
class ThreadNameFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    if (tThreadName.empty()) {
      fmt::format_to(std::back_inserter(dest), "tid {}", msg.thread_id);
    } else {
      dest.append(tThreadName.data(), tThreadName.data() + tThreadName.size());
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<ThreadNameFlag>();
  }
};

spdlog::level::level_enum toSpdlog(Level level) {
  switch (level) {
    case Level::kTrace: return spdlog::level::trace;
    case Level::kDebug: return spdlog::level::debug;
    case Level::kInfo: return spdlog::level::info;
    case Level::kWarn: return spdlog::level::warn;
    case Level::kError: return spdlog::level::err;
    case Level::kOff: return spdlog::level::off;
  }
  return spdlog::level::info;
}

struct LoggerState {
  std::atomic<int> level{static_cast<int>(Level::kInfo)};
  std::shared_ptr<spdlog::logger> logger;

  LoggerState() {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    // Not registered in spdlog's global registry, so a user's own spdlog setup
    // and ours do not interfere.
    logger = std::make_shared<spdlog::logger>("sluice", std::move(sink));
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<ThreadNameFlag>('N').set_pattern("%Y-%m-%d %H:%M:%S.%e [%^%l%$] [%N] %v");
    logger->set_formatter(std::move(formatter));
    logger->set_level(spdlog::level::trace);  // filtering happens in shouldLog()
    logger->flush_on(spdlog::level::trace);
    if (const char* env = std::getenv("SLUICE_LOG_LEVEL"); env != nullptr && *env != '\0') {
      if (auto parsed = parseLevel(env)) {
        level.store(static_cast<int>(*parsed), std::memory_order_relaxed);
      } else {
        logger->log(
            spdlog::level::warn,
            "ignoring SLUICE_LOG_LEVEL='{}': expected trace, debug, info, warn, error or off", env);
      }
    }
  }
};

LoggerState& state() {
  // Constructed on first use, thread-safely; destroyed after every static
  // object that logged while being constructed.
  static LoggerState s;
  return s;
}

}  // namespace

std::optional<Level> parseLevel(std::string_view text) {
  std::string lower;
  lower.reserve(text.size());
  for (char c : text)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (lower == "trace") return Level::kTrace;
  if (lower == "debug") return Level::kDebug;
  if (lower == "info") return Level::kInfo;
  if (lower == "warn" || lower == "warning") return Level::kWarn;
  if (lower == "error") return Level::kError;
  if (lower == "off") return Level::kOff;
  return std::nullopt;
}

Level level() { return static_cast<Level>(state().level.load(std::memory_order_relaxed)); }

void setLevel(Level level) {
  state().level.store(static_cast<int>(level), std::memory_order_relaxed);
}

bool shouldLog(Level level) {
  return level != Level::kOff &&
         static_cast<int>(level) >= state().level.load(std::memory_order_relaxed);
}

std::string logToStdoutAndFile(const std::string& file) {
  try {
    auto out = std::make_shared<spdlog::sinks::stdout_color_sink_mt>();
    auto f = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file, false);
    auto& sinks = state().logger->sinks();
    sinks.clear();
    sinks.push_back(std::move(out));
    sinks.push_back(std::move(f));
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<ThreadNameFlag>('N').set_pattern("%Y-%m-%d %H:%M:%S.%e [%^%l%$] [%N] %v");
    state().logger->set_formatter(std::move(formatter));
    return "";
  } catch (const std::exception& e) {
    return fmt::format("cannot open the log file '{}': {}", file, e.what());
  }
}

void setThreadName(std::string_view name) { tThreadName.assign(name); }

const std::string& threadName() { return tThreadName; }

namespace detail {
void write(Level level, std::string_view message) {
  state().logger->log(toSpdlog(level), "{}", message);
}
}  // namespace detail

}  // namespace sluice::log
