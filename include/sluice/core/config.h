// Configuration: Flink-compatible settings, read from conf/config.yaml and the
// command line, and typed access to them.
//
// Concept. A Configuration is a map from Flink's key names
// ("parallelism.default", "execution.buffer-timeout", ...) to values kept as
// strings, exactly as they were written. Every entry also remembers its source
// ("conf/config.yaml:3", "-D", "-p", "api") so that an error can say where a
// bad value came from. A ConfigOption<T> (see config_options.h for the
// registry of all of them) names a key, its type and its default; get() parses
// the stored string into T or returns the default when the key is unset.
//
// Value syntax follows Flink:
//   - integers, longs, doubles: decimal text ("4", "-1", "0.75");
//   - booleans: "true" / "false", any case;
//   - durations (TimeUtils): "100 ms", "10s", "1 min", "2 h", "1 d"; a bare
//     number is milliseconds;
//   - memory sizes (MemorySize): "32kb", "64 mb", "1g", "1024" (bytes);
//     units are binary (1k = 1024), as in Flink;
//   - lists: "a;b;c".
//
// Precedence, lowest first (ARCHITECTURE.md): config file < command line -D <
// command line -p < API calls on the environment < operator calls.
// loadConfiguration() resolves the first three; addAll() layers the rest.
//
// Ownership and threads. Configuration is a plain value type: copy it freely.
// Const methods may be called from several threads at once; anything that
// modifies it needs external synchronisation. In practice a job's
// configuration is built on the client thread before the job runs and is
// read-only afterwards.
//
// Errors. Loading (file, -D) checks every key against the option registry and
// every value against its option's type, and returns a Status naming the key,
// the bad value and its source. get() throws SluiceException for a value that
// was set through setString() and does not parse, since that is an invalid use
// of the API at job-build time.
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <sluice/core/status.h>

namespace sluice {

// An amount of memory in bytes, written with Flink's MemorySize syntax.
struct MemorySize {
  uint64_t bytes = 0;

  static constexpr MemorySize ofBytes(uint64_t n) { return MemorySize{n}; }
  static constexpr MemorySize ofKibiBytes(uint64_t n) { return MemorySize{n << 10}; }
  static constexpr MemorySize ofMebiBytes(uint64_t n) { return MemorySize{n << 20}; }
  static constexpr MemorySize ofGibiBytes(uint64_t n) { return MemorySize{n << 30}; }

  // Parses "<number> [unit]": the number is a non-negative integer, optional
  // whitespace may separate it from the unit, and the unit is one of (any
  // case) b/bytes, k/kb/kibibytes, m/mb/mebibytes, g/gb/gibibytes,
  // t/tb/tebibytes. No unit means bytes. Fails on anything else (e.g. "1.5g",
  // "32 KiB", "-1") and on overflow of 64 bits.
  static Result<MemorySize> parse(std::string_view text);

  // Largest unit that divides exactly, Flink style: "32 kb", "1 gb", "100 bytes".
  std::string toString() const;

  friend constexpr bool operator==(const MemorySize&, const MemorySize&) = default;
  friend constexpr auto operator<=>(const MemorySize&, const MemorySize&) = default;
};

// Parses Flink's duration syntax "<number> [unit]" (TimeUtils.parseDuration):
// a non-negative integer, optional whitespace, then a unit, any case:
//   ns, nano, nanos, nanosecond, nanoseconds
//   us, µs, micro, micros, microsecond, microseconds
//   ms, milli, millis, millisecond, milliseconds
//   s, sec, secs, second, seconds
//   m, min, minute, minutes
//   h, hour, hours
//   d, day, days
// No unit means milliseconds. Values below a millisecond are truncated
// towards zero ("1500 us" is 1 ms), since Sluice keeps durations in ms.
Result<std::chrono::milliseconds> parseDuration(std::string_view text);

// Formats with the largest unit that divides exactly, Flink style:
// "100 ms", "10 s", "1 min", "2 h", "1 d", "0 ms".
std::string formatDuration(std::chrono::milliseconds d);

// The value types a ConfigOption may have.
template <class T>
concept ConfigValueType = std::same_as<T, int32_t> || std::same_as<T, int64_t> ||
    std::same_as<T, bool> || std::same_as<T, double> || std::same_as<T, std::string> ||
    std::same_as<T, std::chrono::milliseconds> || std::same_as<T, MemorySize>;

// How an option's default is stored: as T itself, except that a string option
// keeps its default as a std::string_view so that every ConfigOption can be a
// constexpr constant.
template <class T>
struct ConfigDefault {
  using type = T;
};
template <>
struct ConfigDefault<std::string> {
  using type = std::string_view;
};

// A typed configuration key with its default. Options are constants declared
// in config_options.h; the struct holds only views of string literals.
template <ConfigValueType T>
struct ConfigOption {
  using ValueType = T;

  std::string_view key;
  typename ConfigDefault<T>::type defaultValue;
  std::string_view description;
};

namespace internal {

// Parse a stored string into T. On failure the Status message says what was
// expected and what was found, without the key: "expected an integer, got 'four'".
Status parseOptionValue(std::string_view text, int32_t* out);
Status parseOptionValue(std::string_view text, int64_t* out);
Status parseOptionValue(std::string_view text, bool* out);
Status parseOptionValue(std::string_view text, double* out);
Status parseOptionValue(std::string_view text, std::string* out);
Status parseOptionValue(std::string_view text, std::chrono::milliseconds* out);
Status parseOptionValue(std::string_view text, MemorySize* out);

// Format a value the way it would be written in config.yaml; parsing the
// result gives the value back.
std::string formatOptionValue(int32_t v);
std::string formatOptionValue(int64_t v);
std::string formatOptionValue(bool v);
std::string formatOptionValue(double v);
std::string formatOptionValue(std::string_view v);
std::string formatOptionValue(std::chrono::milliseconds v);
std::string formatOptionValue(MemorySize v);

// Checks that text parses as T; used to validate values at load time.
template <ConfigValueType T>
Status checkOptionValue(std::string_view text) {
  T value{};
  return parseOptionValue(text, &value);
}

}  // namespace internal

class Configuration {
 public:
  // Source recorded by set() and the two-argument setString().
  static constexpr std::string_view kApiSource = "api";

  Configuration() = default;

  // The option's value, or its default when the key is unset. Throws
  // SluiceException when the stored string does not parse as T, e.g.
  // "parallelism.default: expected an integer, got 'four' (from api)".
  template <ConfigValueType T>
  T get(const ConfigOption<T>& option) const;

  // Stores the value formatted as text; the source becomes "api".
  template <ConfigValueType T>
  void set(const ConfigOption<T>& option, const std::type_identity_t<T>& value) {
    setString(std::string(option.key), internal::formatOptionValue(value));
  }

  // Stores a raw value. Neither key nor value is checked here (any key is
  // allowed through the API); get() checks the value when it is read.
  void setString(std::string key, std::string value, std::string source = std::string(kApiSource));

  std::optional<std::string> getString(std::string_view key) const;
  bool contains(std::string_view key) const;
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }

  // All keys that are set, sorted.
  std::vector<std::string> keys() const;

  // Copies every entry of higherPrecedence into this one, replacing values
  // (and sources) of keys set in both.
  void addAll(const Configuration& higherPrecedence);

  // Where the key's value came from: "conf/config.yaml:3", "-D", "-p", "api";
  // empty when the key is unset.
  std::string source(std::string_view key) const;

  // Loads a Flink config.yaml. Nested maps flatten with '.', and flat dotted
  // keys are accepted too (the two may be mixed); scalars are stored as their
  // text; a list of scalars becomes "a;b;c"; a null value leaves the key
  // unset. Every key must be a registered option and every value must parse
  // as its option's type. Errors (InvalidArgument) name the source and line:
  //   "unknown configuration key 'parallelism.defualt' at conf/config.yaml:3
  //    (did you mean 'parallelism.default'?)"
  //   "parallelism.default: expected an integer, got 'four' (at conf/config.yaml:3)"
  //   "conf/config.yaml:4: YAML syntax error: ..."
  // A file that is missing, a directory or unreadable is an IoError naming
  // the path and the reason:
  //   "cannot read configuration file 'conf': Is a directory"
  static Result<Configuration> fromYamlFile(const std::string& path);
  static Result<Configuration> fromYamlString(std::string_view text, std::string_view sourceName);

  friend bool operator==(const Configuration&, const Configuration&) = default;

 private:
  struct Entry {
    std::string value;
    std::string source;
    friend bool operator==(const Entry&, const Entry&) = default;
  };

  [[noreturn]] static void throwBadValue(std::string_view key, const Entry& entry,
                                         const Status& problem);

  std::map<std::string, Entry, std::less<>> entries_;
};

template <ConfigValueType T>
T Configuration::get(const ConfigOption<T>& option) const {
  auto it = entries_.find(option.key);
  if (it == entries_.end()) return T(option.defaultValue);
  T value{};
  Status st = internal::parseOptionValue(it->second.value, &value);
  if (!st.isOk()) throwBadValue(option.key, it->second, st);
  return value;
}

// The result of parsing a command line, Flink CLI style.
struct CommandLine {
  // Values from -D and -p, with sources "-D" and "-p" (or "--parallelism").
  // -p wins over a -D for parallelism.default wherever each appears.
  Configuration config;
  // From -c / --config, when given.
  std::optional<std::string> configFile;
  // Every argument not consumed, in order (argv[0], the program, is not
  // included). Everything after a "--" is passed through unchanged.
  std::vector<std::string> remaining;
};

// Recognises, anywhere in argv[1..]:
//   -D key=value, -Dkey=value            (repeatable; later wins)
//   -p N, --parallelism N, --parallelism=N
//   -c path, --config path, --config=path
// -D keys must be registered options and values must parse as their type;
// errors are InvalidArgument, e.g.
//   "unknown configuration key 'paralelism.default' from -D (did you mean 'parallelism.default'?)".
Result<CommandLine> parseCommandLine(int argc, const char* const* argv);

// Resolves the configuration of a job started with this command line, as
// StreamExecutionEnvironment::getExecutionEnvironment(argc, argv) does:
// the config file (-c, else $SLUICE_CONF_DIR/config.yaml when SLUICE_CONF_DIR
// is set, else ./conf/config.yaml when it exists, else none) < -D < -p.
// -c names the file itself, never a directory to look in. A file that was
// asked for (-c or SLUICE_CONF_DIR) but cannot be read (missing, a directory,
// no permission) is an IoError; so is a ./conf/config.yaml that is there but
// a directory or unreadable (only its absence means "no file").
// remainingArgs, when not null, receives CommandLine::remaining.
Result<Configuration> loadConfiguration(int argc, const char* const* argv,
                                        std::vector<std::string>* remainingArgs);

}  // namespace sluice
