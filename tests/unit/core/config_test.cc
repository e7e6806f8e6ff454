// Tests for configuration (config.h, config_options.h) and internal logging.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/core/config.h>
#include <sluice/core/config_options.h>

#include "core/logging.h"
#include "harness/temp_dir.h"

#ifndef SLUICE_TEST_DATA_DIR
#define SLUICE_TEST_DATA_DIR "tests/data"
#endif

namespace sluice {
namespace config_test {
namespace {

using std::chrono::milliseconds;
namespace fs = std::filesystem;

const std::string kDataDir = std::string(SLUICE_TEST_DATA_DIR) + "/config";
const fs::path kProjectRoot = fs::path(SLUICE_TEST_DATA_DIR) / ".." / "..";

std::string dataFile(const std::string& name) { return kDataDir + "/" + name; }

// Runs parseCommandLine over {"prog", args...}.
Result<CommandLine> parseArgs(std::initializer_list<const char*> args) {
  std::vector<const char*> argv{"prog"};
  argv.insert(argv.end(), args.begin(), args.end());
  return parseCommandLine(static_cast<int>(argv.size()), argv.data());
}

Result<Configuration> loadArgs(std::initializer_list<const char*> args,
                               std::vector<std::string>* remaining) {
  std::vector<const char*> argv{"prog"};
  argv.insert(argv.end(), args.begin(), args.end());
  return loadConfiguration(static_cast<int>(argv.size()), argv.data(), remaining);
}

// Sets or unsets an environment variable for the scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// A fresh empty directory that becomes the working directory for the scope.
class ScopedTempCwd {
 public:
  ScopedTempCwd() : old_(fs::current_path()) {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("sluice_config_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::current_path(dir_);
  }
  ~ScopedTempCwd() {
    fs::current_path(old_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const fs::path& dir() const { return dir_; }

 private:
  fs::path old_;
  fs::path dir_;
};

void writeFile(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// ---------------------------------------------------------------- durations

TEST(DurationTest, ParsesFlinkSyntax) {
  struct Case {
    const char* text;
    int64_t ms;
  };
  const Case cases[] = {
      {"100 ms", 100},
      {"100ms", 100},
      {"10s", 10'000},
      {"10 s", 10'000},
      {"1 min", 60'000},
      {"1m", 60'000},
      {"2 h", 7'200'000},
      {"1 d", 86'400'000},
      {"500", 500},
      {"0", 0},
      {"  7 MS  ", 7},
      {"3 seconds", 3'000},
      {"1 second", 1'000},
      {"4 sec", 4'000},
      {"4 secs", 4'000},
      {"5 millis", 5},
      {"5 milli", 5},
      {"6 milliseconds", 6},
      {"1 minute", 60'000},
      {"2 minutes", 120'000},
      {"2 hours", 7'200'000},
      {"1 hour", 3'600'000},
      {"3 days", 259'200'000},
      {"1 day", 86'400'000},
      {"1500 us", 1},
      {"2500 micros", 2},
      {"3000 \xc2\xb5s", 3},
      {"2000000 ns", 2},
      {"999999 nanos", 0},
      {"10 Min", 600'000},
      {"1\tmin", 60'000},
  };
  for (const Case& c : cases) {
    auto parsed = parseDuration(c.text);
    ASSERT_TRUE(parsed.isOk()) << "'" << c.text << "': " << parsed.status().toString();
    EXPECT_EQ(parsed.value(), milliseconds(c.ms)) << "'" << c.text << "'";
  }
}

TEST(DurationTest, RejectsInvalidText) {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"", "expected a duration, got an empty string"},
      {"   ", "expected a duration, got an empty string"},
      {"ms", "expected a duration such as '10 s', got 'ms'"},
      {"-1 ms", "expected a duration such as '10 s', got '-1 ms'"},
      {"1.5 s",
       "unknown time unit '.5 s' in '1.5 s' (expected one of: ns, us, ms, s, min, h, d, or their "
       "long "
       "names such as millis, seconds, minutes)"},
      {"10 parsecs",
       "unknown time unit 'parsecs' in '10 parsecs' (expected one of: ns, us, ms, s, min, h, d, "
       "or their long names such as millis, seconds, minutes)"},
      {"99999999999999999999 ms", "duration '99999999999999999999 ms' does not fit in 64 bits"},
      {"9223372036854775807 d",
       "duration '9223372036854775807 d' does not fit in 64 bits of milliseconds"},
  };
  for (const Case& c : cases) {
    auto parsed = parseDuration(c.text);
    ASSERT_FALSE(parsed.isOk()) << "'" << c.text << "' parsed as " << parsed.value().count();
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), c.message);
  }
  EXPECT_FALSE(parseDuration("10 s x").isOk());
  EXPECT_FALSE(parseDuration("s10").isOk());
}

TEST(DurationTest, FormatsWithLargestExactUnitAndRoundTrips) {
  EXPECT_EQ(formatDuration(milliseconds(100)), "100 ms");
  EXPECT_EQ(formatDuration(milliseconds(0)), "0 ms");
  EXPECT_EQ(formatDuration(milliseconds(1'500)), "1500 ms");
  EXPECT_EQ(formatDuration(milliseconds(10'000)), "10 s");
  EXPECT_EQ(formatDuration(milliseconds(90'000)), "90 s");
  EXPECT_EQ(formatDuration(milliseconds(60'000)), "1 min");
  EXPECT_EQ(formatDuration(milliseconds(7'200'000)), "2 h");
  EXPECT_EQ(formatDuration(milliseconds(86'400'000)), "1 d");
  for (int64_t ms : {0L, 1L, 999L, 1'000L, 61'000L, 3'600'000L, 172'800'000L}) {
    EXPECT_EQ(parseDuration(formatDuration(milliseconds(ms))).value(), milliseconds(ms));
  }
}

// ---------------------------------------------------------------- memory sizes

TEST(MemorySizeTest, ParsesFlinkSyntax) {
  struct Case {
    const char* text;
    uint64_t bytes;
  };
  const uint64_t k = 1024;
  const Case cases[] = {
      {"32kb", 32 * k},
      {"32 kb", 32 * k},
      {"32k", 32 * k},
      {"32 KB", 32 * k},
      {"64 mb", 64 * k * k},
      {"64m", 64 * k * k},
      {"1g", k * k * k},
      {"1 GB", k * k * k},
      {"1024", 1024},
      {"0", 0},
      {"2 bytes", 2},
      {"3 B", 3},
      {"5 kibibytes", 5 * k},
      {"6 MebiBytes", 6 * k * k},
      {"7 gibibytes", 7 * k * k * k},
      {"1 t", k * k * k * k},
      {"2 tb", 2 * k * k * k * k},
      {"1 tebibytes", k * k * k * k},
      {"  12   kb ", 12 * k},
      {"16777215 tb", 16777215ULL << 40},
  };
  for (const Case& c : cases) {
    auto parsed = MemorySize::parse(c.text);
    ASSERT_TRUE(parsed.isOk()) << "'" << c.text << "': " << parsed.status().toString();
    EXPECT_EQ(parsed.value().bytes, c.bytes) << "'" << c.text << "'";
  }
}

TEST(MemorySizeTest, RejectsInvalidText) {
  const std::string units =
      "(expected one of: b, bytes, k, kb, kibibytes, m, mb, mebibytes, g, gb, gibibytes, t, tb, "
      "tebibytes)";
  struct Case {
    const char* text;
    std::string message;
  };
  const Case cases[] = {
      {"", "expected a memory size, got an empty string"},
      {"kb", "expected a memory size such as '64 mb', got 'kb'"},
      {"-1", "expected a memory size such as '64 mb', got '-1'"},
      {"1.5g", "unknown memory unit '.5g' in '1.5g' " + units},
      {"32 KiB", "unknown memory unit 'KiB' in '32 KiB' " + units},
      {"1 pb", "unknown memory unit 'pb' in '1 pb' " + units},
      {"16777216 tb", "memory size '16777216 tb' does not fit in 64 bits"},
      {"99999999999999999999", "memory size '99999999999999999999' does not fit in 64 bits"},
  };
  for (const Case& c : cases) {
    auto parsed = MemorySize::parse(c.text);
    ASSERT_FALSE(parsed.isOk()) << "'" << c.text << "' parsed as " << parsed.value().bytes;
    EXPECT_EQ(parsed.status().message(), c.message);
  }
}

TEST(MemorySizeTest, FormatsWithLargestExactUnitAndRoundTrips) {
  EXPECT_EQ(MemorySize::ofKibiBytes(32).toString(), "32 kb");
  EXPECT_EQ(MemorySize::ofGibiBytes(1).toString(), "1 gb");
  EXPECT_EQ(MemorySize::ofMebiBytes(1536).toString(), "1536 mb");
  EXPECT_EQ(MemorySize{uint64_t{3} << 40}.toString(), "3 tb");
  EXPECT_EQ(MemorySize{100}.toString(), "100 bytes");
  EXPECT_EQ(MemorySize{1536}.toString(), "1536 bytes");
  EXPECT_EQ(MemorySize{0}.toString(), "0 bytes");
  for (uint64_t bytes : {0ULL, 1ULL, 1023ULL, 1024ULL, 3ULL << 20, (1ULL << 62) + 1}) {
    EXPECT_EQ(MemorySize::parse(MemorySize{bytes}.toString()).value().bytes, bytes);
  }
}

// ---------------------------------------------------------------- typed access

TEST(ConfigurationTest, GetReturnsDefaultsWhenUnset) {
  Configuration config;
  EXPECT_EQ(config.get(options::kParallelismDefault), 1);
  EXPECT_EQ(config.get(options::kPipelineMaxParallelism), 128);
  EXPECT_EQ(config.get(options::kPipelineName), "");
  EXPECT_EQ(config.get(options::kExecutionBufferTimeout), milliseconds(100));
  EXPECT_EQ(config.get(options::kTaskManagerMemorySegmentSize).bytes, 32u * 1024u);
  EXPECT_EQ(config.get(options::kTaskManagerNumberOfTaskSlots), 1);
  EXPECT_EQ(config.get(options::kTaskManagerNetworkMemoryBuffersPerChannel), 2);
  EXPECT_EQ(config.get(options::kTaskManagerNetworkMemoryFloatingBuffersPerGate), 8);
  EXPECT_EQ(config.get(options::kPipelineAutoWatermarkInterval), milliseconds(200));
  EXPECT_EQ(config.get(options::kExecutionRuntimeMode), "STREAMING");
  EXPECT_FALSE(config.get(options::kPipelineObjectReuse));
  EXPECT_EQ(config.get(options::kStateBackendType), "hashmap");
  EXPECT_EQ(config.get(options::kStateCheckpointsDir), "");
  EXPECT_EQ(config.get(options::kExecutionCheckpointingInterval), milliseconds(0));
  EXPECT_EQ(config.get(options::kRestPort), 8081);
  EXPECT_EQ(config.get(options::kJobManagerRpcAddress), "localhost");
  EXPECT_EQ(config.get(options::kJobManagerRpcPort), 6123);
  EXPECT_TRUE(config.empty());
  EXPECT_FALSE(config.contains("parallelism.default"));
  EXPECT_EQ(config.getString("parallelism.default"), std::nullopt);
  EXPECT_EQ(config.source("parallelism.default"), "");
}

TEST(ConfigurationTest, SetStoresTextAndGetParsesItBack) {
  constexpr ConfigOption<int64_t> kLong{"test.long", -1, "a long"};
  constexpr ConfigOption<double> kDouble{"test.double", 0.5, "a double"};
  Configuration config;
  config.set(options::kParallelismDefault, 12);
  config.set(options::kPipelineObjectReuse, true);
  config.set(options::kPipelineName, "word count");
  config.set(options::kExecutionCheckpointingInterval, milliseconds(30'000));
  config.set(options::kTaskManagerMemorySegmentSize, MemorySize::ofMebiBytes(1));
  config.set(kLong, int64_t{1} << 40);
  config.set(kDouble, 0.1);

  EXPECT_EQ(config.get(options::kParallelismDefault), 12);
  EXPECT_TRUE(config.get(options::kPipelineObjectReuse));
  EXPECT_EQ(config.get(options::kPipelineName), "word count");
  EXPECT_EQ(config.get(options::kExecutionCheckpointingInterval), milliseconds(30'000));
  EXPECT_EQ(config.get(options::kTaskManagerMemorySegmentSize), MemorySize::ofMebiBytes(1));
  EXPECT_EQ(config.get(kLong), int64_t{1} << 40);
  EXPECT_EQ(config.get(kDouble), 0.1);

  EXPECT_EQ(config.getString("parallelism.default"), "12");
  EXPECT_EQ(config.getString("pipeline.object-reuse"), "true");
  EXPECT_EQ(config.getString("execution.checkpointing.interval"), "30 s");
  EXPECT_EQ(config.getString("taskmanager.memory.segment-size"), "1 mb");
  EXPECT_EQ(config.getString("test.long"), "1099511627776");
  EXPECT_EQ(config.getString("test.double"), "0.1");
  EXPECT_EQ(config.source("parallelism.default"), "api");
  EXPECT_EQ(config.keys(), (std::vector<std::string>{
                               "execution.checkpointing.interval", "parallelism.default",
                               "pipeline.name", "pipeline.object-reuse",
                               "taskmanager.memory.segment-size", "test.double", "test.long"}));
}

TEST(ConfigurationTest, GetParsesLooseButValidText) {
  Configuration config;
  config.setString("parallelism.default", " +7 ");
  config.setString("pipeline.object-reuse", "TRUE");
  config.setString("execution.buffer-timeout", "1 min");
  EXPECT_EQ(config.get(options::kParallelismDefault), 7);
  EXPECT_TRUE(config.get(options::kPipelineObjectReuse));
  EXPECT_EQ(config.get(options::kExecutionBufferTimeout), milliseconds(60'000));
}

void expectThrowsMessage(const std::function<void()>& fn, const std::string& message) {
  try {
    fn();
    ADD_FAILURE() << "expected SluiceException: " << message;
  } catch (const SluiceException& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(ConfigurationTest, GetThrowsNamingKeyValueAndSource) {
  Configuration config;
  config.setString("parallelism.default", "four");
  config.setString("pipeline.object-reuse", "yes", "-D");
  config.setString("rest.port", "99999999999");
  config.setString("execution.buffer-timeout", "soon", "conf/config.yaml:7");
  config.setString("taskmanager.memory.segment-size", "32 KiB");
  config.setString("jobmanager.rpc.port", "+-5");
  expectThrowsMessage([&] { (void)config.get(options::kParallelismDefault); },
                      "parallelism.default: expected an integer, got 'four' (from api)");
  expectThrowsMessage([&] { (void)config.get(options::kPipelineObjectReuse); },
                      "pipeline.object-reuse: expected true or false, got 'yes' (from -D)");
  expectThrowsMessage(
      [&] { (void)config.get(options::kRestPort); },
      "rest.port: integer out of range [-2147483648, 2147483647], got '99999999999' (from api)");
  expectThrowsMessage([&] { (void)config.get(options::kExecutionBufferTimeout); },
                      "execution.buffer-timeout: expected a duration such as '10 s', got 'soon' "
                      "(at conf/config.yaml:7)");
  expectThrowsMessage(
      [&] { (void)config.get(options::kTaskManagerMemorySegmentSize); },
      "taskmanager.memory.segment-size: unknown memory unit 'KiB' in '32 KiB' (expected one of: "
      "b, bytes, k, kb, kibibytes, m, mb, mebibytes, g, gb, gibibytes, t, tb, tebibytes) "
      "(from api)");
  expectThrowsMessage([&] { (void)config.get(options::kJobManagerRpcPort); },
                      "jobmanager.rpc.port: expected an integer, got '+-5' (from api)");
}

TEST(ConfigurationTest, AddAllLetsTheOtherWin) {
  Configuration low;
  low.setString("parallelism.default", "2", "file:1");
  low.setString("rest.port", "9000", "file:2");
  Configuration high;
  high.setString("parallelism.default", "5", "-D");
  high.setString("pipeline.name", "job", "-D");
  low.addAll(high);
  EXPECT_EQ(low.getString("parallelism.default"), "5");
  EXPECT_EQ(low.source("parallelism.default"), "-D");
  EXPECT_EQ(low.getString("rest.port"), "9000");
  EXPECT_EQ(low.source("rest.port"), "file:2");
  EXPECT_EQ(low.getString("pipeline.name"), "job");
  EXPECT_EQ(low.keys(),
            (std::vector<std::string>{"parallelism.default", "pipeline.name", "rest.port"}));
  EXPECT_EQ(high.size(), 2u);  // the other one is unchanged
}

// ---------------------------------------------------------------- YAML

TEST(YamlConfigTest, FlattensNestedAndFlatKeysAndJoinsLists) {
  const std::string path = dataFile("mixed.yaml");
  auto loaded = Configuration::fromYamlFile(path);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
  const Configuration& config = loaded.value();
  EXPECT_EQ(config.keys(),
            (std::vector<std::string>{"execution.checkpointing.interval", "parallelism.default",
                                      "pipeline.name", "state.backend.type",
                                      "taskmanager.memory.segment-size",
                                      "taskmanager.network.memory.buffers-per-channel"}));
  EXPECT_EQ(config.get(options::kParallelismDefault), 4);
  EXPECT_EQ(config.get(options::kTaskManagerMemorySegmentSize), MemorySize::ofKibiBytes(64));
  EXPECT_EQ(config.get(options::kTaskManagerNetworkMemoryBuffersPerChannel), 4);
  EXPECT_EQ(config.get(options::kExecutionCheckpointingInterval), milliseconds(10'000));
  EXPECT_EQ(config.get(options::kPipelineName), "alpha;beta;gamma");
  EXPECT_EQ(config.get(options::kStateBackendType), "rocksdb");
  EXPECT_EQ(config.getString("taskmanager.memory.segment-size"), "64 kb");  // stored as written
  // Sources point at the line of the innermost key.
  EXPECT_EQ(config.source("parallelism.default"), path + ":3");
  EXPECT_EQ(config.source("taskmanager.memory.segment-size"), path + ":4");
  EXPECT_EQ(config.source("taskmanager.network.memory.buffers-per-channel"), path + ":7");
  EXPECT_EQ(config.source("execution.checkpointing.interval"), path + ":9");
  EXPECT_EQ(config.source("pipeline.name"), path + ":10");
  // Unset keys keep their defaults.
  EXPECT_EQ(config.get(options::kRestPort), 8081);
}

TEST(YamlConfigTest, ScalarFormsAndNulls) {
  auto loaded = Configuration::fromYamlString(
      "pipeline.name: 'quoted: yes'\n"
      "pipeline.object-reuse: true\n"
      "state.checkpoints.dir:\n"
      "rest: {port: 9090}\n"
      "execution.runtime-mode: \"BATCH\"\n",
      "inline");
  ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
  const Configuration& config = loaded.value();
  EXPECT_EQ(config.get(options::kPipelineName), "quoted: yes");
  EXPECT_TRUE(config.get(options::kPipelineObjectReuse));
  EXPECT_FALSE(config.contains("state.checkpoints.dir"));  // a null value leaves the key unset
  EXPECT_EQ(config.get(options::kRestPort), 9090);
  EXPECT_EQ(config.get(options::kExecutionRuntimeMode), "BATCH");
  EXPECT_EQ(config.source("rest.port"), "inline:4");
}

TEST(YamlConfigTest, EmptyDocumentGivesEmptyConfiguration) {
  for (const char* text : {"", "# only a comment\n", "---\n"}) {
    auto loaded = Configuration::fromYamlString(text, "empty.yaml");
    ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
    EXPECT_TRUE(loaded.value().empty());
  }
}

TEST(YamlConfigTest, UnknownKeyNamesLineAndSuggestion) {
  const std::string path = dataFile("unknown_key.yaml");
  auto loaded = Configuration::fromYamlFile(path);
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(loaded.status().message(), "unknown configuration key 'parallelism.defualt' at " +
                                           path + ":4 (did you mean 'parallelism.default'?)");
}

TEST(YamlConfigTest, UnknownKeyForms) {
  auto flat =
      Configuration::fromYamlString("rest.port: 1\nparallelism.defualt: 4\n", "conf/config.yaml");
  ASSERT_FALSE(flat.isOk());
  EXPECT_EQ(flat.status().message(),
            "unknown configuration key 'parallelism.defualt' at conf/config.yaml:2 (did you mean "
            "'parallelism.default'?)");

  auto farOff = Configuration::fromYamlString("\n\nsome.unrelated.setting: 1\n", "c.yaml");
  ASSERT_FALSE(farOff.isOk());
  EXPECT_EQ(farOff.status().message(),
            "unknown configuration key 'some.unrelated.setting' at c.yaml:3");

  // A prefix of a known key, with a scalar value: the user forgot the last part.
  auto prefix = Configuration::fromYamlString("parallelism: 4\n", "c.yaml");
  ASSERT_FALSE(prefix.isOk());
  EXPECT_EQ(
      prefix.status().message(),
      "unknown configuration key 'parallelism' at c.yaml:1 (did you mean 'parallelism.default'?)");

  // Keys are case-sensitive, as in Flink.
  auto wrongCase = Configuration::fromYamlString("taskmanager.numberoftaskslots: 2\n", "c.yaml");
  ASSERT_FALSE(wrongCase.isOk());
  EXPECT_EQ(wrongCase.status().message(),
            "unknown configuration key 'taskmanager.numberoftaskslots' at c.yaml:1 (did you mean "
            "'taskmanager.numberOfTaskSlots'?)");

  // A null value does not hide an unknown key.
  auto nullValue = Configuration::fromYamlString("rest.prot:\n", "c.yaml");
  ASSERT_FALSE(nullValue.isOk());
  EXPECT_EQ(nullValue.status().message(),
            "unknown configuration key 'rest.prot' at c.yaml:1 (did you mean 'rest.port'?)");
}

TEST(YamlConfigTest, BadValueNamesKeyValueAndLine) {
  const std::string path = dataFile("bad_value.yaml");
  auto loaded = Configuration::fromYamlFile(path);
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(loaded.status().message(),
            "parallelism.default: expected an integer, got 'four' (at " + path + ":2)");

  auto duration =
      Configuration::fromYamlString("execution:\n  buffer-timeout: 100 parsecs\n", "c.yaml");
  ASSERT_FALSE(duration.isOk());
  EXPECT_EQ(
      duration.status().message(),
      "execution.buffer-timeout: unknown time unit 'parsecs' in '100 parsecs' (expected one of: "
      "ns, us, "
      "ms, s, min, h, d, or their long names such as millis, seconds, minutes) (at c.yaml:2)");

  auto boolean = Configuration::fromYamlString("pipeline.object-reuse: yes\n", "c.yaml");
  ASSERT_FALSE(boolean.isOk());
  EXPECT_EQ(boolean.status().message(),
            "pipeline.object-reuse: expected true or false, got 'yes' (at c.yaml:1)");

  auto list = Configuration::fromYamlString("parallelism.default: [1, 2]\n", "c.yaml");
  ASSERT_FALSE(list.isOk());
  EXPECT_EQ(list.status().message(),
            "parallelism.default: expected an integer, got '1;2' (at c.yaml:1)");
}

TEST(YamlConfigTest, RejectsDuplicatesAndOddStructure) {
  auto duplicate = Configuration::fromYamlString(
      "parallelism.default: 1\nparallelism:\n  default: 2\n", "c.yaml");
  ASSERT_FALSE(duplicate.isOk());
  EXPECT_EQ(
      duplicate.status().message(),
      "duplicate configuration key 'parallelism.default' at c.yaml:3 (first set at c.yaml:1)");

  auto listOfMaps = Configuration::fromYamlString("pipeline.name:\n  - a: 1\n", "c.yaml");
  ASSERT_FALSE(listOfMaps.isOk());
  EXPECT_EQ(listOfMaps.status().message(),
            "c.yaml:1: pipeline.name: list elements must be plain values");

  auto notAMap = Configuration::fromYamlString("- a\n- b\n", "c.yaml");
  ASSERT_FALSE(notAMap.isOk());
  EXPECT_EQ(notAMap.status().message(),
            "c.yaml:1: a configuration file must be a map of keys to values");
}

TEST(YamlConfigTest, SyntaxErrorNamesFileAndLine) {
  const std::string path = dataFile("syntax_error.yaml");
  auto loaded = Configuration::fromYamlFile(path);
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  const std::string& message = loaded.status().message();
  // The list opened on line 4 is never closed; yaml-cpp notices on line 5.
  const std::string prefix = path + ":5: YAML syntax error: ";
  EXPECT_EQ(message.substr(0, prefix.size()), prefix) << message;
  EXPECT_GT(message.size(), prefix.size()) << "the parser's own explanation follows";

  auto inline_ = Configuration::fromYamlString("rest:\n  port: 1\n bad indent: 2\n", "inline.yaml");
  ASSERT_FALSE(inline_.isOk());
  EXPECT_EQ(inline_.status().message().rfind("inline.yaml:3: YAML syntax error: ", 0), 0u)
      << inline_.status().message();
}

TEST(YamlConfigTest, MissingFileIsIoErrorNamingThePath) {
  const std::string path = dataFile("does_not_exist.yaml");
  auto loaded = Configuration::fromYamlFile(path);
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().code(), StatusCode::kIoError);
  EXPECT_EQ(loaded.status().message(),
            "cannot read configuration file '" + path + "': No such file or directory");
}

TEST(YamlConfigTest, DirectoryIsIoErrorNamingThePathAndReason) {
  test::TempDir dir;
  auto loaded = Configuration::fromYamlFile(dir.str());
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().code(), StatusCode::kIoError);
  EXPECT_EQ(loaded.status().message(),
            "cannot read configuration file '" + dir.str() + "': Is a directory");
}

TEST(YamlConfigTest, ReadErrorIsIoErrorNamingThePathAndReason) {
  // Opens for anyone, root included, and its first read fails with EIO
  // (address 0 of the process is not mapped).
  const std::string path = "/proc/self/mem";
  if (::access(path.c_str(), R_OK) != 0) GTEST_SKIP() << path << " is not available";
  auto loaded = Configuration::fromYamlFile(path);
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().code(), StatusCode::kIoError);
  EXPECT_EQ(loaded.status().message(),
            "cannot read configuration file '" + path + "': Input/output error");
}

// ---------------------------------------------------------------- command line

TEST(CommandLineTest, DynamicPropertiesInBothForms) {
  auto cli = parseArgs({"-D", "parallelism.default=3", "-Dpipeline.name=my job", "-Drest.port=9000",
                        "-D", "pipeline.name=a=b"});
  ASSERT_TRUE(cli.isOk()) << cli.status().toString();
  const Configuration& config = cli.value().config;
  EXPECT_EQ(config.get(options::kParallelismDefault), 3);
  EXPECT_EQ(config.get(options::kPipelineName),
            "a=b");  // repeatable; the last wins; only the first '=' splits
  EXPECT_EQ(config.get(options::kRestPort), 9000);
  EXPECT_EQ(config.source("parallelism.default"), "-D");
  EXPECT_EQ(config.keys(),
            (std::vector<std::string>{"parallelism.default", "pipeline.name", "rest.port"}));
  EXPECT_FALSE(cli.value().configFile.has_value());
  EXPECT_TRUE(cli.value().remaining.empty());
}

TEST(CommandLineTest, KeepsUnconsumedArgumentsInOrder) {
  auto cli = parseArgs({"--input", "in.txt", "-p", "4", "-c", "my.yaml", "-x",
                        "-Dstate.backend.type=rocksdb", "--output", "out.txt", "--", "-p", "9",
                        "-Dnot.parsed=1"});
  ASSERT_TRUE(cli.isOk()) << cli.status().toString();
  EXPECT_EQ(cli.value().remaining,
            (std::vector<std::string>{"--input", "in.txt", "-x", "--output", "out.txt", "-p", "9",
                                      "-Dnot.parsed=1"}));
  EXPECT_EQ(cli.value().configFile, "my.yaml");
  EXPECT_EQ(cli.value().config.get(options::kParallelismDefault), 4);
  EXPECT_EQ(cli.value().config.source("parallelism.default"), "-p");
  EXPECT_EQ(cli.value().config.get(options::kStateBackendType), "rocksdb");
}

TEST(CommandLineTest, LongForms) {
  auto cli = parseArgs({"--parallelism=6", "--config=a.yaml"});
  ASSERT_TRUE(cli.isOk()) << cli.status().toString();
  EXPECT_EQ(cli.value().config.get(options::kParallelismDefault), 6);
  EXPECT_EQ(cli.value().config.source("parallelism.default"), "--parallelism");
  EXPECT_EQ(cli.value().configFile, "a.yaml");

  auto spaced = parseArgs({"--parallelism", "2", "--config", "b.yaml", "--config", "c.yaml"});
  ASSERT_TRUE(spaced.isOk()) << spaced.status().toString();
  EXPECT_EQ(spaced.value().config.get(options::kParallelismDefault), 2);
  EXPECT_EQ(spaced.value().configFile, "c.yaml");
}

TEST(CommandLineTest, ParallelismFlagBeatsDynamicPropertyInAnyOrder) {
  for (auto args : {std::vector<const char*>{"prog", "-p", "5", "-Dparallelism.default=2"},
                    std::vector<const char*>{"prog", "-Dparallelism.default=2", "-p", "5"}}) {
    auto cli = parseCommandLine(static_cast<int>(args.size()), args.data());
    ASSERT_TRUE(cli.isOk()) << cli.status().toString();
    EXPECT_EQ(cli.value().config.get(options::kParallelismDefault), 5);
    EXPECT_EQ(cli.value().config.source("parallelism.default"), "-p");
  }
}

TEST(CommandLineTest, Errors) {
  struct Case {
    std::vector<const char*> args;
    const char* message;
  };
  const Case cases[] = {
      {{"-D", "paralelism.default=2"},
       "unknown configuration key 'paralelism.default' from -D (did you mean "
       "'parallelism.default'?)"},
      {{"-Dparallelism.default=two"},
       "parallelism.default: expected an integer, got 'two' (from -D)"},
      {{"-Dexecution.buffer-timeout=5 fortnights"},
       "execution.buffer-timeout: unknown time unit 'fortnights' in '5 fortnights' (expected one "
       "of: ns, us, ms, "
       "s, min, h, d, or their long names such as millis, seconds, minutes) (from -D)"},
      {{"-D"}, "-D expects a value"},
      {{"-Dparallelism.default"}, "-D expects key=value, got 'parallelism.default'"},
      {{"-D", "=4"}, "-D expects key=value, got '=4'"},
      {{"-p"}, "-p expects a value"},
      {{"-p", "0"}, "-p: expected a positive integer, got '0'"},
      {{"--parallelism=many"}, "--parallelism: expected a positive integer, got 'many'"},
      {{"-c"}, "-c expects a value"},
  };
  for (const Case& c : cases) {
    std::vector<const char*> argv{"prog"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    auto cli = parseCommandLine(static_cast<int>(argv.size()), argv.data());
    ASSERT_FALSE(cli.isOk()) << c.message;
    EXPECT_EQ(cli.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(cli.status().message(), c.message);
  }
}

TEST(CommandLineTest, EmptyDynamicValueIsAllowed) {
  auto cli = parseArgs({"-Dstate.checkpoints.dir="});
  ASSERT_TRUE(cli.isOk()) << cli.status().toString();
  EXPECT_EQ(cli.value().config.getString("state.checkpoints.dir"), "");
}

// ---------------------------------------------------------------- resolution

TEST(LoadConfigurationTest, FileThenDynamicPropertiesThenParallelism) {
  ScopedEnv noConfDir("SLUICE_CONF_DIR", nullptr);
  const std::string path = dataFile("precedence.yaml");
  std::vector<std::string> remaining;
  auto loaded = loadArgs({"-c", path.c_str(), "-Dexecution.buffer-timeout=20 ms",
                          "-Dparallelism.default=6", "--verbose", "-p", "8"},
                         &remaining);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
  const Configuration& config = loaded.value();
  EXPECT_EQ(config.get(options::kParallelismDefault), 8);  // -p beats -D beats the file's 4
  EXPECT_EQ(config.source("parallelism.default"), "-p");
  EXPECT_EQ(config.get(options::kExecutionBufferTimeout),
            milliseconds(20));  // -D beats the file's 5 s
  EXPECT_EQ(config.source("execution.buffer-timeout"), "-D");
  EXPECT_EQ(config.get(options::kTaskManagerMemorySegmentSize),
            MemorySize::ofKibiBytes(16));  // file only
  EXPECT_EQ(config.source("taskmanager.memory.segment-size"), path + ":7");
  EXPECT_EQ(config.get(options::kRestPort), 8081);  // nowhere: default
  EXPECT_EQ(remaining, std::vector<std::string>{"--verbose"});

  auto withoutOverrides = loadArgs({"--config", path.c_str()}, nullptr);
  ASSERT_TRUE(withoutOverrides.isOk()) << withoutOverrides.status().toString();
  EXPECT_EQ(withoutOverrides.value().get(options::kParallelismDefault), 4);
  EXPECT_EQ(withoutOverrides.value().get(options::kExecutionBufferTimeout), milliseconds(5'000));
}

TEST(LoadConfigurationTest, ConfDirEnvironmentVariable) {
  ScopedEnv confDir("SLUICE_CONF_DIR", (kDataDir + "/conf_dir").c_str());
  auto loaded = loadArgs({"-Drest.port=7000"}, nullptr);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
  EXPECT_EQ(loaded.value().get(options::kParallelismDefault), 3);
  EXPECT_EQ(loaded.value().get(options::kRestPort), 7000);
  EXPECT_EQ(loaded.value().source("parallelism.default"), kDataDir + "/conf_dir/config.yaml:1");

  // An explicit -c wins over the environment.
  auto explicitFile = loadArgs({"-c", dataFile("precedence.yaml").c_str()}, nullptr);
  ASSERT_TRUE(explicitFile.isOk()) << explicitFile.status().toString();
  EXPECT_EQ(explicitFile.value().get(options::kParallelismDefault), 4);
  EXPECT_EQ(explicitFile.value().get(options::kRestPort), 8081);
}

TEST(LoadConfigurationTest, ConfDirWithoutFileIsAnError) {
  ScopedEnv confDir("SLUICE_CONF_DIR", (kDataDir + "/no_such_dir").c_str());
  auto loaded = loadArgs({}, nullptr);
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().code(), StatusCode::kIoError);
  EXPECT_EQ(loaded.status().message(), "cannot read configuration file '" + kDataDir +
                                           "/no_such_dir/config.yaml': No such file or directory");
}

TEST(LoadConfigurationTest, MissingExplicitFileIsAnError) {
  ScopedEnv noConfDir("SLUICE_CONF_DIR", nullptr);
  auto loaded = loadArgs({"-c", "/nonexistent/sluice.yaml"}, nullptr);
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().message(),
            "cannot read configuration file '/nonexistent/sluice.yaml': No such file or directory");
}

TEST(LoadConfigurationTest, ExplicitDirectoryIsAnError) {
  ScopedEnv noConfDir("SLUICE_CONF_DIR", nullptr);
  test::TempDir dir;
  writeFile(dir.path() / "config.yaml", "parallelism.default: 2\n");  // -c does not look inside
  const std::string want = "cannot read configuration file '" + dir.str() + "': Is a directory";
  for (const std::string& flag : {std::string("-c"), std::string("--config")}) {
    auto loaded = loadArgs({flag.c_str(), dir.str().c_str()}, nullptr);
    ASSERT_FALSE(loaded.isOk()) << flag;
    EXPECT_EQ(loaded.status().code(), StatusCode::kIoError);
    EXPECT_EQ(loaded.status().message(), want) << flag;
  }
  const std::string joined = "--config=" + dir.str();
  auto loaded = loadArgs({joined.c_str()}, nullptr);
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().message(), want);
}

TEST(LoadConfigurationTest, ConfDirWhoseConfigYamlIsADirectoryIsAnError) {
  test::TempDir dir;
  fs::create_directory(dir.path() / "config.yaml");
  ScopedEnv confDir("SLUICE_CONF_DIR", dir.str().c_str());
  auto loaded = loadArgs({}, nullptr);
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().message(),
            "cannot read configuration file '" + dir.str() + "/config.yaml': Is a directory");
}

TEST(LoadConfigurationTest, LocalConfigYamlThatIsADirectoryIsAnError) {
  ScopedEnv noConfDir("SLUICE_CONF_DIR", nullptr);
  ScopedTempCwd cwd;
  fs::create_directories(cwd.dir() / "conf" / "config.yaml");
  auto loaded = loadArgs({}, nullptr);
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().code(), StatusCode::kIoError);
  EXPECT_EQ(loaded.status().message(),
            "cannot read configuration file 'conf/config.yaml': Is a directory");
}

// Permission bits do not stop root, so this runs only as another user.
TEST(LoadConfigurationTest, UnreadableFilesAreErrorsExplicitOrLocal) {
  ScopedEnv noConfDir("SLUICE_CONF_DIR", nullptr);
  ScopedTempCwd cwd;
  const fs::path file = cwd.dir() / "conf" / "config.yaml";
  writeFile(file, "parallelism.default: 2\n");
  fs::permissions(file, fs::perms::none);
  if (::access(file.c_str(), R_OK) == 0) {
    fs::permissions(file, fs::perms::owner_all);
    GTEST_SKIP() << "running as root: permission bits do not apply";
  }
  auto explicitFile = loadArgs({"-c", file.c_str()}, nullptr);
  ASSERT_FALSE(explicitFile.isOk());
  EXPECT_EQ(explicitFile.status().message(),
            "cannot read configuration file '" + file.string() + "': Permission denied");
  auto local = loadArgs({}, nullptr);
  ASSERT_FALSE(local.isOk());
  EXPECT_EQ(local.status().message(),
            "cannot read configuration file 'conf/config.yaml': Permission denied");

  // A conf directory that cannot be searched hides whether the file exists:
  // an error too, not "no configuration file".
  fs::permissions(file, fs::perms::owner_all);
  fs::permissions(cwd.dir() / "conf", fs::perms::none);
  auto hidden = loadArgs({}, nullptr);
  fs::permissions(cwd.dir() / "conf", fs::perms::owner_all);
  ASSERT_FALSE(hidden.isOk());
  EXPECT_EQ(hidden.status().message(),
            "cannot read configuration file 'conf/config.yaml': Permission denied");
}

TEST(LoadConfigurationTest, FallsBackToLocalConfDirThenToDefaults) {
  ScopedEnv noConfDir("SLUICE_CONF_DIR", nullptr);
  ScopedTempCwd cwd;
  {
    auto loaded = loadArgs({"-p", "2"}, nullptr);
    ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
    EXPECT_EQ(loaded.value().keys(), std::vector<std::string>{"parallelism.default"});
    EXPECT_EQ(loaded.value().get(options::kParallelismDefault), 2);
  }
  writeFile(cwd.dir() / "conf" / "config.yaml", "pipeline:\n  name: local\n");
  {
    auto loaded = loadArgs({}, nullptr);
    ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
    EXPECT_EQ(loaded.value().get(options::kPipelineName), "local");
    EXPECT_EQ(loaded.value().source("pipeline.name"), "conf/config.yaml:2");
  }
}

TEST(LoadConfigurationTest, CommandLineErrorsPropagate) {
  ScopedEnv noConfDir("SLUICE_CONF_DIR", nullptr);
  auto loaded = loadArgs({"-Dpipeline.nmae=x"}, nullptr);
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().message(),
            "unknown configuration key 'pipeline.nmae' from -D (did you mean 'pipeline.name'?)");
}

// ---------------------------------------------------------------- registry

TEST(OptionRegistryTest, SortedUniqueAndSelfConsistent) {
  const auto& all = registeredOptions();
  ASSERT_EQ(all.size(), std::tuple_size_v<decltype(options::kAllOptions)>);
  std::set<std::string_view> seen;
  for (size_t i = 0; i < all.size(); ++i) {
    const OptionDescriptor& option = all[i];
    if (i > 0) {
      EXPECT_LT(all[i - 1].key, option.key);
    }
    EXPECT_TRUE(seen.insert(option.key).second) << "duplicate key " << option.key;
    EXPECT_FALSE(option.description.empty()) << option.key;
    EXPECT_EQ(findOption(option.key), &option);
    Status st = option.validate(option.defaultValue);
    EXPECT_TRUE(st.isOk()) << option.key << " default '" << option.defaultValue
                           << "': " << st.toString();
  }
  EXPECT_EQ(findOption("parallelism"), nullptr);
  EXPECT_EQ(findOption("no.such.key"), nullptr);
}

TEST(OptionRegistryTest, DescribesTypesAndDefaults) {
  auto expect = [](std::string_view key, std::string_view type, const std::string& defaultValue) {
    const OptionDescriptor* option = findOption(key);
    ASSERT_NE(option, nullptr) << key;
    EXPECT_EQ(option->typeName, type) << key;
    EXPECT_EQ(option->defaultValue, defaultValue) << key;
  };
  expect("parallelism.default", "Integer", "1");
  expect("pipeline.max-parallelism", "Integer", "128");
  expect("pipeline.name", "String", "");
  expect("execution.buffer-timeout", "Duration", "100 ms");
  expect("execution.checkpointing.interval", "Duration", "0 ms");
  expect("pipeline.auto-watermark-interval", "Duration", "200 ms");
  expect("taskmanager.memory.segment-size", "MemorySize", "32 kb");
  expect("pipeline.object-reuse", "Boolean", "false");
  expect("state.backend.type", "String", "hashmap");
  expect("jobmanager.rpc.port", "Integer", "6123");
}

TEST(OptionRegistryTest, SuggestsCloseKeysOnly) {
  EXPECT_EQ(suggestOptionKey("rest.prot"), "rest.port");
  EXPECT_EQ(suggestOptionKey("parallelism.defualt"), "parallelism.default");
  EXPECT_EQ(suggestOptionKey("state.backend"), "state.backend.type");
  EXPECT_EQ(suggestOptionKey("taskmanager.memory.segment.size"), "taskmanager.memory.segment-size");
  EXPECT_EQ(suggestOptionKey("foo"), "");
  EXPECT_EQ(suggestOptionKey("metrics.reporters"), "");
}

// Every `inline constexpr ConfigOption<...>` in the header must be in kAllOptions.
TEST(OptionRegistryTest, EveryDeclaredOptionIsRegistered) {
  const std::string header =
      readFile(kProjectRoot / "include" / "sluice" / "core" / "config_options.h");
  ASSERT_FALSE(header.empty());
  size_t declared = 0;
  for (size_t pos = 0;
       (pos = header.find("inline constexpr ConfigOption<", pos)) != std::string::npos; ++pos) {
    ++declared;
  }
  EXPECT_EQ(declared, registeredOptions().size())
      << "an option is declared but missing from kAllOptions";
}

// conf/config.yaml ships every option, set to its default.
TEST(OptionRegistryTest, ShippedConfigListsEveryOptionWithItsDefault) {
  const std::string path = (kProjectRoot / "conf" / "config.yaml").string();
  auto loaded = Configuration::fromYamlFile(path);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
  const Configuration& config = loaded.value();
  for (const OptionDescriptor& option : registeredOptions()) {
    auto value = config.getString(option.key);
    ASSERT_TRUE(value.has_value()) << option.key << " is missing from conf/config.yaml";
    EXPECT_EQ(*value, option.defaultValue)
        << option.key << " in conf/config.yaml differs from the default";
  }
  EXPECT_EQ(config.size(), registeredOptions().size());
  EXPECT_EQ(config.get(options::kTaskManagerMemorySegmentSize),
            options::kTaskManagerMemorySegmentSize.defaultValue);
}

// ---------------------------------------------------------------- logging

class LogLevelGuard {
 public:
  LogLevelGuard() : old_(log::level()) {}
  ~LogLevelGuard() {
    log::setLevel(old_);
    log::setThreadName("");
  }

 private:
  log::Level old_;
};

TEST(LoggingTest, ParsesLevelNames) {
  EXPECT_EQ(log::parseLevel("trace"), log::Level::kTrace);
  EXPECT_EQ(log::parseLevel("DEBUG"), log::Level::kDebug);
  EXPECT_EQ(log::parseLevel("Info"), log::Level::kInfo);
  EXPECT_EQ(log::parseLevel("warn"), log::Level::kWarn);
  EXPECT_EQ(log::parseLevel("warning"), log::Level::kWarn);
  EXPECT_EQ(log::parseLevel("error"), log::Level::kError);
  EXPECT_EQ(log::parseLevel("off"), log::Level::kOff);
  EXPECT_EQ(log::parseLevel("verbose"), std::nullopt);
  EXPECT_EQ(log::parseLevel(""), std::nullopt);
}

TEST(LoggingTest, WritesLevelThreadNameAndMessageToStderr) {
  LogLevelGuard guard;
  log::setLevel(log::Level::kInfo);
  log::setThreadName("Map (1/4)");
  EXPECT_EQ(log::threadName(), "Map (1/4)");
  testing::internal::CaptureStderr();
  log::info("switched to {} after {} ms", "RUNNING", 42);
  log::debug("not shown {}", 1);
  log::warn("careful");
  std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("[info] [Map (1/4)] switched to RUNNING after 42 ms\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("[warning] [Map (1/4)] careful\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("not shown"), std::string::npos) << out;
  // One line per message, each starting with a date.
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2);
  EXPECT_TRUE(out.size() > 4 && out[4] == '-') << out;
}

TEST(LoggingTest, LevelFiltersAndThreadIdWithoutName) {
  LogLevelGuard guard;
  log::setThreadName("");
  log::setLevel(log::Level::kError);
  EXPECT_FALSE(log::shouldLog(log::Level::kWarn));
  EXPECT_TRUE(log::shouldLog(log::Level::kError));
  testing::internal::CaptureStderr();
  log::warn("hidden");
  log::error("shown {}", 7);
  log::setLevel(log::Level::kTrace);
  log::trace("traced");
  log::setLevel(log::Level::kOff);
  log::error("silenced");
  EXPECT_FALSE(log::shouldLog(log::Level::kOff));
  std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(out.find("hidden"), std::string::npos) << out;
  EXPECT_EQ(out.find("silenced"), std::string::npos) << out;
  EXPECT_NE(out.find("[error] [tid "), std::string::npos) << out;
  EXPECT_NE(out.find("] shown 7\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[trace] [tid "), std::string::npos) << out;
}

}  // namespace
}  // namespace config_test
}  // namespace sluice
