#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <sluice/core/config.h>
#include <sluice/core/config_options.h>

#include "core/logging.h"

namespace sluice {
namespace {

constexpr std::string_view kWhitespace = " \t\r\n\f\v";

std::string_view trim(std::string_view s) {
  size_t begin = s.find_first_not_of(kWhitespace);
  if (begin == std::string_view::npos) return {};
  size_t end = s.find_last_not_of(kWhitespace);
  return s.substr(begin, end - begin + 1);
}

std::string toLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Splits "<digits><spaces><unit>" after trimming. Returns false when the text
// does not start with a digit.
bool splitNumberAndUnit(std::string_view text, std::string_view* digits, std::string_view* unit) {
  size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  if (i == 0) return false;
  *digits = text.substr(0, i);
  *unit = trim(text.substr(i));
  return true;
}

// Parses a run of decimal digits; false on overflow.
bool parseDigits(std::string_view digits, uint64_t* out) {
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *out);
  return ec == std::errc() && ptr == digits.data() + digits.size();
}

// "at conf/config.yaml:3" for a file position, "from -D" for anything else.
std::string describeSource(std::string_view source) {
  if (source.find(':') != std::string_view::npos) return fmt::format("at {}", source);
  return fmt::format("from {}", source);
}

template <class Int>
Status parseInteger(std::string_view text, Int* out) {
  // Like Java's parseInt: one optional sign, then decimal digits only.
  std::string_view digits = trim(text);
  if (!digits.empty() && digits.front() == '+') {
    digits.remove_prefix(1);
    if (!digits.empty() && digits.front() == '-') digits = {};
  }
  if (digits.empty())
    return Status::invalidArgument(fmt::format("expected an integer, got '{}'", text));
  Int value{};
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ptr != digits.data() + digits.size() ||
      (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    return Status::invalidArgument(fmt::format("expected an integer, got '{}'", text));
  }
  if (ec == std::errc::result_out_of_range) {
    return Status::invalidArgument(fmt::format("integer out of range [{}, {}], got '{}'",
                                               std::numeric_limits<Int>::min(),
                                               std::numeric_limits<Int>::max(), text));
  }
  *out = value;
  return Status::ok();
}

// Optimal string alignment distance: Levenshtein plus adjacent transpositions,
// so that "defualt" is one edit from "default".
size_t editDistance(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  const size_t m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::string unknownKeyMessage(std::string_view key, std::string_view source) {
  std::string msg = fmt::format("unknown configuration key '{}' {}", key, describeSource(source));
  std::string_view suggestion = suggestOptionKey(key);
  if (!suggestion.empty()) msg += fmt::format(" (did you mean '{}'?)", suggestion);
  return msg;
}

std::string badValueMessage(std::string_view key, std::string_view problem,
                            std::string_view source) {
  return fmt::format("{}: {} ({})", key, problem, describeSource(source));
}

// Checks a key/value pair from a file or -D against the registry.
Status validateEntry(std::string_view key, std::string_view value, std::string_view source) {
  const OptionDescriptor* option = findOption(key);
  if (option == nullptr) return Status::invalidArgument(unknownKeyMessage(key, source));
  Status st = option->validate(value);
  if (!st.isOk()) return Status::invalidArgument(badValueMessage(key, st.message(), source));
  return Status::ok();
}

template <class T>
constexpr std::string_view typeNameOf() {
  if constexpr (std::is_same_v<T, int32_t>) return "Integer";
  if constexpr (std::is_same_v<T, int64_t>) return "Long";
  if constexpr (std::is_same_v<T, bool>) return "Boolean";
  if constexpr (std::is_same_v<T, double>) return "Double";
  if constexpr (std::is_same_v<T, std::string>) return "String";
  if constexpr (std::is_same_v<T, std::chrono::milliseconds>) return "Duration";
  if constexpr (std::is_same_v<T, MemorySize>) return "MemorySize";
}

template <class T>
OptionDescriptor describe(const ConfigOption<T>& option) {
  return OptionDescriptor{option.key, typeNameOf<T>(),
                          internal::formatOptionValue(option.defaultValue), option.description,
                          &internal::checkOptionValue<T>};
}

std::vector<OptionDescriptor> buildRegistry() {
  std::vector<OptionDescriptor> all = std::apply(
      [](const auto*... option) { return std::vector<OptionDescriptor>{describe(*option)...}; },
      options::kAllOptions);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  return all;
}

// ---- YAML ----

std::string positionOf(std::string_view sourceName, const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0) return std::string(sourceName);
  return fmt::format("{}:{}", sourceName, mark.line + 1);
}

struct YamlLoader {
  std::string_view sourceName;
  Configuration config;

  Status load(const YAML::Node& node, const std::string& prefix) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      YAML::Node keyNode = it->first;  // copies: the iterator yields temporaries
      YAML::Node valueNode = it->second;
      std::string where = positionOf(sourceName, keyNode.Mark());
      if (!keyNode.IsScalar() || keyNode.Scalar().empty()) {
        return Status::invalidArgument(
            fmt::format("{}: a configuration key must be a non-empty string", where));
      }
      std::string key = prefix.empty() ? keyNode.Scalar() : prefix + "." + keyNode.Scalar();
      if (valueNode.IsMap()) {
        SLUICE_RETURN_IF_ERROR(load(valueNode, key));
        continue;
      }
      if (findOption(key) == nullptr) return Status::invalidArgument(unknownKeyMessage(key, where));
      std::string value;
      if (valueNode.IsNull()) {
        continue;  // "key:" with no value leaves the option unset
      } else if (valueNode.IsScalar()) {
        value = valueNode.Scalar();
      } else if (valueNode.IsSequence()) {
        for (size_t i = 0; i < valueNode.size(); ++i) {
          if (!valueNode[i].IsScalar()) {
            return Status::invalidArgument(
                fmt::format("{}: {}: list elements must be plain values", where, key));
          }
          if (i > 0) value += ';';
          value += valueNode[i].Scalar();
        }
      }
      if (config.contains(key)) {
        return Status::invalidArgument(
            fmt::format("duplicate configuration key '{}' at {} (first set at {})", key, where,
                        config.source(key)));
      }
      SLUICE_RETURN_IF_ERROR(validateEntry(key, value, where));
      config.setString(key, std::move(value), where);
    }
    return Status::ok();
  }
};

// ---- command line ----

bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

Status applyDynamicProperty(std::string_view keyValue, Configuration* config) {
  size_t eq = keyValue.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return Status::invalidArgument(fmt::format("-D expects key=value, got '{}'", keyValue));
  }
  std::string key(trim(keyValue.substr(0, eq)));
  std::string value(keyValue.substr(eq + 1));
  SLUICE_RETURN_IF_ERROR(validateEntry(key, value, "-D"));
  config->setString(std::move(key), std::move(value), "-D");
  return Status::ok();
}

}  // namespace

// ---- values ----

Result<MemorySize> MemorySize::parse(std::string_view text) {
  std::string_view t = trim(text);
  if (t.empty()) return Status::invalidArgument("expected a memory size, got an empty string");
  std::string_view digits;
  std::string_view unit;
  if (!splitNumberAndUnit(t, &digits, &unit)) {
    return Status::invalidArgument(
        fmt::format("expected a memory size such as '64 mb', got '{}'", text));
  }
  uint64_t number = 0;
  if (!parseDigits(digits, &number)) {
    return Status::invalidArgument(fmt::format("memory size '{}' does not fit in 64 bits", text));
  }
  std::string u = toLower(unit);
  int shift = -1;
  if (u.empty() || u == "b" || u == "bytes") {
    shift = 0;
  } else if (u == "k" || u == "kb" || u == "kibibytes") {
    shift = 10;
  } else if (u == "m" || u == "mb" || u == "mebibytes") {
    shift = 20;
  } else if (u == "g" || u == "gb" || u == "gibibytes") {
    shift = 30;
  } else if (u == "t" || u == "tb" || u == "tebibytes") {
    shift = 40;
  } else {
    return Status::invalidArgument(
        fmt::format("unknown memory unit '{}' in '{}' (expected one of: b, bytes, k, kb, "
                    "kibibytes, m, mb, mebibytes, "
                    "g, gb, gibibytes, t, tb, tebibytes)",
                    unit, text));
  }
  if (shift > 0 && number > (std::numeric_limits<uint64_t>::max() >> shift)) {
    return Status::invalidArgument(fmt::format("memory size '{}' does not fit in 64 bits", text));
  }
  return MemorySize{number << shift};
}

std::string MemorySize::toString() const {
  static constexpr std::pair<int, std::string_view> kUnits[] = {
      {40, "tb"}, {30, "gb"}, {20, "mb"}, {10, "kb"}};
  if (bytes != 0) {
    for (const auto& [shift, name] : kUnits) {
      uint64_t unit = uint64_t{1} << shift;
      if (bytes % unit == 0) return fmt::format("{} {}", bytes / unit, name);
    }
  }
  return fmt::format("{} bytes", bytes);
}

Result<std::chrono::milliseconds> parseDuration(std::string_view text) {
  using std::chrono::milliseconds;
  std::string_view t = trim(text);
  if (t.empty()) return Status::invalidArgument("expected a duration, got an empty string");
  std::string_view digits;
  std::string_view unit;
  if (!splitNumberAndUnit(t, &digits, &unit)) {
    return Status::invalidArgument(
        fmt::format("expected a duration such as '10 s', got '{}'", text));
  }
  uint64_t number = 0;
  if (!parseDigits(digits, &number) ||
      number > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Status::invalidArgument(fmt::format("duration '{}' does not fit in 64 bits", text));
  }
  std::string u = toLower(unit);
  // Either a multiplier to milliseconds or a divisor from a finer unit.
  int64_t multiplier = 0;
  int64_t divisor = 1;
  if (u == "ns" || u == "nano" || u == "nanos" || u == "nanosecond" || u == "nanoseconds") {
    divisor = 1'000'000;
  } else if (u == "us" || u == "\xc2\xb5s" || u == "micro" || u == "micros" || u == "microsecond" ||
             u == "microseconds") {
    divisor = 1'000;
  } else if (u.empty() || u == "ms" || u == "milli" || u == "millis" || u == "millisecond" ||
             u == "milliseconds") {
    multiplier = 1;
  } else if (u == "s" || u == "sec" || u == "secs" || u == "second" || u == "seconds") {
    multiplier = 1'000;
  } else if (u == "m" || u == "min" || u == "minute" || u == "minutes") {
    multiplier = 60'000;
  } else if (u == "h" || u == "hour" || u == "hours") {
    multiplier = 3'600'000;
  } else if (u == "d" || u == "day" || u == "days") {
    multiplier = 86'400'000;
  } else {
    return Status::invalidArgument(
        fmt::format("unknown time unit '{}' in '{}' (expected one of: ns, us, ms, s, min, h, d, or "
                    "their long names "
                    "such as millis, seconds, minutes)",
                    unit, text));
  }
  auto value = static_cast<int64_t>(number);
  if (multiplier == 0) return milliseconds{value / divisor};
  if (value > std::numeric_limits<int64_t>::max() / multiplier) {
    return Status::invalidArgument(
        fmt::format("duration '{}' does not fit in 64 bits of milliseconds", text));
  }
  return milliseconds{value * multiplier};
}

std::string formatDuration(std::chrono::milliseconds d) {
  static constexpr std::pair<int64_t, std::string_view> kUnits[] = {
      {86'400'000, "d"}, {3'600'000, "h"}, {60'000, "min"}, {1'000, "s"}};
  int64_t ms = d.count();
  if (ms != 0) {
    for (const auto& [unit, name] : kUnits) {
      if (ms % unit == 0) return fmt::format("{} {}", ms / unit, name);
    }
  }
  return fmt::format("{} ms", ms);
}

namespace internal {

Status parseOptionValue(std::string_view text, int32_t* out) { return parseInteger(text, out); }

Status parseOptionValue(std::string_view text, int64_t* out) { return parseInteger(text, out); }

Status parseOptionValue(std::string_view text, bool* out) {
  std::string lower = toLower(trim(text));
  if (lower == "true") {
    *out = true;
  } else if (lower == "false") {
    *out = false;
  } else {
    return Status::invalidArgument(fmt::format("expected true or false, got '{}'", text));
  }
  return Status::ok();
}

Status parseOptionValue(std::string_view text, double* out) {
  std::string_view t = trim(text);
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  double value = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (t.empty() || ec != std::errc() || ptr != t.data() + t.size()) {
    return Status::invalidArgument(fmt::format("expected a number, got '{}'", text));
  }
  *out = value;
  return Status::ok();
}

Status parseOptionValue(std::string_view text, std::string* out) {
  out->assign(text);
  return Status::ok();
}

Status parseOptionValue(std::string_view text, std::chrono::milliseconds* out) {
  auto parsed = parseDuration(text);
  if (!parsed.isOk()) return parsed.status();
  *out = parsed.value();
  return Status::ok();
}

Status parseOptionValue(std::string_view text, MemorySize* out) {
  auto parsed = MemorySize::parse(text);
  if (!parsed.isOk()) return parsed.status();
  *out = parsed.value();
  return Status::ok();
}

std::string formatOptionValue(int32_t v) { return std::to_string(v); }
std::string formatOptionValue(int64_t v) { return std::to_string(v); }
std::string formatOptionValue(bool v) { return v ? "true" : "false"; }
std::string formatOptionValue(double v) {
  return fmt::format("{}", v);
}  // shortest round-trip form
std::string formatOptionValue(std::string_view v) { return std::string(v); }
std::string formatOptionValue(std::chrono::milliseconds v) { return formatDuration(v); }
std::string formatOptionValue(MemorySize v) { return v.toString(); }

}  // namespace internal

// ---- registry ----

const std::vector<OptionDescriptor>& registeredOptions() {
  static const std::vector<OptionDescriptor> all = buildRegistry();
  return all;
}

const OptionDescriptor* findOption(std::string_view key) {
  const auto& all = registeredOptions();
  auto it =
      std::lower_bound(all.begin(), all.end(), key,
                       [](const OptionDescriptor& o, std::string_view k) { return o.key < k; });
  if (it == all.end() || it->key != key) return nullptr;
  return &*it;
}

std::string_view suggestOptionKey(std::string_view unknownKey) {
  std::string lowerKey = toLower(unknownKey);
  std::string_view best;
  size_t bestDistance = std::numeric_limits<size_t>::max();
  for (const OptionDescriptor& option : registeredOptions()) {
    size_t d = editDistance(lowerKey, toLower(option.key));
    if (d < bestDistance) {
      bestDistance = d;
      best = option.key;
    }
  }
  // A typo: a few edits, more allowed for longer keys.
  if (bestDistance <= std::max<size_t>(2, unknownKey.size() / 5)) return best;
  // A prefix of keys, as "parallelism" for "parallelism.default": the
  // shortest such key ("state.backend" -> "state.backend.type").
  std::string_view shortest;
  for (const OptionDescriptor& option : registeredOptions()) {
    if (option.key.size() > unknownKey.size() && startsWith(option.key, unknownKey) &&
        option.key[unknownKey.size()] == '.' &&
        (shortest.empty() || option.key.size() < shortest.size())) {
      shortest = option.key;
    }
  }
  return shortest;
}

// ---- Configuration ----

void Configuration::setString(std::string key, std::string value, std::string source) {
  entries_.insert_or_assign(std::move(key), Entry{std::move(value), std::move(source)});
}

std::optional<std::string> Configuration::getString(std::string_view key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second.value;
}

bool Configuration::contains(std::string_view key) const {
  return entries_.find(key) != entries_.end();
}

std::vector<std::string> Configuration::keys() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [key, entry] : entries_) out.push_back(key);
  return out;
}

void Configuration::addAll(const Configuration& higherPrecedence) {
  for (const auto& [key, entry] : higherPrecedence.entries_) entries_.insert_or_assign(key, entry);
}

std::string Configuration::source(std::string_view key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? std::string() : it->second.source;
}

void Configuration::throwBadValue(std::string_view key, const Entry& entry, const Status& problem) {
  throw SluiceException(badValueMessage(key, problem.message(), entry.source));
}

Result<Configuration> Configuration::fromYamlFile(const std::string& path) {
  // POSIX calls rather than an ifstream: a stream opens a directory and then
  // reads nothing, so a directory (or a read error) would load as an empty
  // file, and it keeps no errno to name the reason.
  auto cannotRead = [&path](int err) {
    return Status::ioError(
        fmt::format("cannot read configuration file '{}': {}", path, std::strerror(err)));
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return cannotRead(errno);
  struct stat st;
  int statErr = ::fstat(fd, &st) != 0 ? errno : 0;
  if (statErr == 0 && S_ISDIR(st.st_mode)) statErr = EISDIR;
  if (statErr != 0) {
    ::close(fd);
    return cannotRead(statErr);
  }
  std::string text;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) break;
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd);
    return cannotRead(err);
  }
  ::close(fd);
  return fromYamlString(text, path);
}

Result<Configuration> Configuration::fromYamlString(std::string_view text,
                                                    std::string_view sourceName) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Status::invalidArgument(
        fmt::format("{}: YAML syntax error: {}", positionOf(sourceName, e.mark), e.msg));
  }
  YamlLoader loader{sourceName, Configuration()};
  if (root.IsNull()) return loader.config;  // empty file or only comments
  if (!root.IsMap()) {
    return Status::invalidArgument(
        fmt::format("{}: a configuration file must be a map of keys to values",
                    positionOf(sourceName, root.Mark())));
  }
  try {
    SLUICE_RETURN_IF_ERROR(loader.load(root, ""));
  } catch (const YAML::Exception& e) {
    return Status::invalidArgument(fmt::format("{}: {}", positionOf(sourceName, e.mark), e.msg));
  }
  return std::move(loader.config);
}

// ---- command line ----

Result<CommandLine> parseCommandLine(int argc, const char* const* argv) {
  CommandLine result;
  std::optional<std::pair<std::string, std::string>> parallelism;  // value, flag
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i] == nullptr ? std::string_view() : std::string_view(argv[i]);
    auto nextValue = [&](std::string_view flag) -> Result<std::string> {
      if (i + 1 >= argc || argv[i + 1] == nullptr) {
        return Status::invalidArgument(fmt::format("{} expects a value", flag));
      }
      return std::string(argv[++i]);
    };
    if (arg == "--") {
      for (++i; i < argc; ++i) result.remaining.emplace_back(argv[i] == nullptr ? "" : argv[i]);
      break;
    }
    if (arg == "-D") {
      auto value = nextValue("-D");
      if (!value.isOk()) return value.status();
      SLUICE_RETURN_IF_ERROR(applyDynamicProperty(value.value(), &result.config));
    } else if (startsWith(arg, "-D")) {
      SLUICE_RETURN_IF_ERROR(applyDynamicProperty(arg.substr(2), &result.config));
    } else if (arg == "-p" || arg == "--parallelism") {
      auto value = nextValue(arg);
      if (!value.isOk()) return value.status();
      parallelism.emplace(std::move(value).value(), std::string(arg));
    } else if (startsWith(arg, "--parallelism=")) {
      parallelism.emplace(std::string(arg.substr(std::string_view("--parallelism=").size())),
                          "--parallelism");
    } else if (arg == "-c" || arg == "--config") {
      auto value = nextValue(arg);
      if (!value.isOk()) return value.status();
      result.configFile = std::move(value).value();
    } else if (startsWith(arg, "--config=")) {
      result.configFile = std::string(arg.substr(std::string_view("--config=").size()));
    } else {
      result.remaining.emplace_back(arg);
    }
  }
  if (parallelism) {
    const auto& [value, flag] = *parallelism;
    int32_t p = 0;
    if (!internal::parseOptionValue(value, &p).isOk() || p < 1) {
      return Status::invalidArgument(
          fmt::format("{}: expected a positive integer, got '{}'", flag, value));
    }
    result.config.setString(std::string(options::kParallelismDefault.key), std::to_string(p), flag);
  }
  return result;
}

Result<Configuration> loadConfiguration(int argc, const char* const* argv,
                                        std::vector<std::string>* remainingArgs) {
  auto cli = parseCommandLine(argc, argv);
  if (!cli.isOk()) return cli.status();
  CommandLine& commandLine = cli.value();

  std::optional<std::string> file = commandLine.configFile;
  if (!file) {
    const char* confDir = std::getenv("SLUICE_CONF_DIR");
    if (confDir != nullptr && *confDir != '\0') {
      file = (std::filesystem::path(confDir) / "config.yaml").string();
    } else {
      // Optional only when absent: a directory or an unreadable file there
      // is an error (below), not silently no configuration.
      std::error_code ec;
      const auto status = std::filesystem::status("conf/config.yaml", ec);
      if (status.type() != std::filesystem::file_type::not_found) file = "conf/config.yaml";
    }
  }

  Configuration config;
  if (file) {
    auto loaded = Configuration::fromYamlFile(*file);
    if (!loaded.isOk()) return loaded.status();
    config = std::move(loaded).value();
    log::info("loaded configuration from {}", *file);
  } else {
    log::info("no configuration file found; using defaults");
  }
  config.addAll(commandLine.config);
  if (remainingArgs != nullptr) *remainingArgs = std::move(commandLine.remaining);
  return config;
}

}  // namespace sluice
