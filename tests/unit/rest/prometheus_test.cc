// Tests for the metric reporters (src/rest/metric_reporters.h): the
// Prometheus text format, read back by a small parser of the exposition
// format written here; the /metrics endpoint over HTTP; port ranges and bind
// errors; configuration errors; the log reporter's blocks.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/core/config.h>
#include <sluice/core/config_options.h>

#include "core/logging.h"
#include "core/metric_registry.h"
#include "harness/wait.h"
#include "rest/metric_reporters.h"

namespace sluice {
namespace prometheus_test {
namespace {

using metrics::MetricRegistry;
using metrics::ScopeKind;
using Vars = std::map<std::string, std::string>;
using Clock = std::chrono::steady_clock;

// ---- a parser of the text format, strict about what renderPrometheus must produce ----

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromFamily {
  std::string help;
  std::string type;
  std::vector<PromSample> samples;
};

struct Page {
  std::vector<std::string> order;  // family names as they appear
  std::map<std::string, PromFamily> families;
  std::string error;  // the first problem found, empty when the page is valid

  const PromFamily& family(const std::string& name) const {
    static const PromFamily none;
    auto it = families.find(name);
    return it == families.end() ? none : it->second;
  }
};

bool isMetricNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}
bool isMetricNameChar(char c) { return isMetricNameStart(c) || (c >= '0' && c <= '9'); }
bool isLabelNameStart(char c) { return isMetricNameStart(c) && c != ':'; }
bool isLabelNameChar(char c) { return isMetricNameChar(c) && c != ':'; }

std::optional<double> parseValue(const std::string& text) {
  if (text == "NaN") return std::nan("");
  if (text == "+Inf") return INFINITY;
  if (text == "-Inf") return -INFINITY;
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

Page parsePage(const std::string& text) {
  Page page;
  auto fail = [&page](const std::string& why, const std::string& line) {
    if (page.error.empty()) page.error = why + ": '" + line + "'";
  };
  if (!text.empty() && text.back() != '\n') fail("the page does not end with a newline", "");
  std::string current;  // the family whose lines come now
  std::set<std::string> finished;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      const bool help = line[2] == 'H';
      const std::string rest = line.substr(7);
      const size_t space = rest.find(' ');
      if (space == std::string::npos) {
        fail("a comment without text", line);
        continue;
      }
      const std::string name = rest.substr(0, space);
      if (name != current) {
        if (!current.empty()) finished.insert(current);
        if (finished.count(name)) fail("a family appears twice", line);
        current = name;
        if (!page.families.count(name)) page.order.push_back(name);
      }
      PromFamily& f = page.families[name];
      if (!f.samples.empty()) fail("a comment after the family's samples", line);
      if (help) {
        std::string unescaped;
        const std::string raw = rest.substr(space + 1);
        for (size_t i = 0; i < raw.size(); ++i) {
          if (raw[i] == '\\' && i + 1 < raw.size() && (raw[i + 1] == '\\' || raw[i + 1] == 'n')) {
            unescaped.push_back(raw[i + 1] == 'n' ? '\n' : '\\');
            ++i;
          } else {
            unescaped.push_back(raw[i]);
          }
        }
        if (!f.help.empty()) fail("a second HELP", line);
        f.help = unescaped;
      } else {
        const std::string type = rest.substr(space + 1);
        if (type != "gauge" && type != "counter" && type != "summary" && type != "histogram" &&
            type != "untyped") {
          fail("an unknown type", line);
        }
        if (!f.type.empty()) fail("a second TYPE", line);
        f.type = type;
      }
      continue;
    }
    if (!line.empty() && line[0] == '#') {
      fail("a comment that is neither HELP nor TYPE", line);
      continue;
    }
    // name{labels} value
    PromSample s;
    size_t i = 0;
    if (line.empty() || !isMetricNameStart(line[0])) {
      fail("a line that is no sample", line);
      continue;
    }
    while (i < line.size() && isMetricNameChar(line[i])) ++i;
    s.name = line.substr(0, i);
    bool ok = true;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (ok && i < line.size() && line[i] != '}') {
        const size_t start = i;
        if (!isLabelNameStart(line[i])) ok = false;
        while (ok && i < line.size() && isLabelNameChar(line[i])) ++i;
        const std::string key = line.substr(start, i - start);
        if (!ok || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') {
          ok = false;
          break;
        }
        i += 2;
        std::string value;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\') {
            if (i + 1 >= line.size()) {
              ok = false;
              break;
            }
            const char e = line[i + 1];
            if (e == '\\') {
              value.push_back('\\');
            } else if (e == '"') {
              value.push_back('"');
            } else if (e == 'n') {
              value.push_back('\n');
            } else {
              ok = false;
            }
            i += 2;
          } else {
            value.push_back(line[i++]);
          }
        }
        if (!ok || i >= line.size()) {
          ok = false;
          break;
        }
        ++i;  // closing quote
        if (!s.labels.emplace(key, value).second) ok = false;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size() || line[i] != '}') ok = false;
      ++i;
    }
    if (!ok || i >= line.size() || line[i] != ' ') {
      fail("a malformed sample", line);
      continue;
    }
    auto value = parseValue(line.substr(i + 1));
    if (!value) {
      fail("a malformed value", line);
      continue;
    }
    s.value = *value;
    if (current.empty()) {
      fail("a sample before any TYPE", line);
      continue;
    }
    PromFamily& f = page.families[current];
    const bool belongs =
        s.name == current ||
        (f.type == "summary" && (s.name == current + "_count" || s.name == current + "_sum"));
    if (!belongs || f.type.empty()) fail("a sample outside its family", line);
    for (const PromSample& other : f.samples) {
      if (other.name == s.name && other.labels == s.labels) fail("the same series twice", line);
    }
    f.samples.push_back(std::move(s));
  }
  return page;
}

// ---- helpers ----

Vars operatorVars(const std::string& subtask = "0") {
  return {{"<host>", "h1"},
          {"<tm_id>", "tm-1"},
          {"<job_id>", "4f2a"},
          {"<job_name>", "WordCount"},
          {"<task_name>", "Map"},
          {"<task_id>", "t1"},
          {"<subtask_index>", subtask},
          {"<operator_name>", "Tokenizer"},
          {"<operator_id>", "op1"}};
}

// The label set Flink's reporter gives `vars`: names without brackets,
// values with every character outside [a-zA-Z0-9:_] replaced.
std::map<std::string, std::string> expectedLabels(const Vars& vars) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : vars) {
    std::string value = v;
    for (char& c : value) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != ':' && c != '_') c = '_';
    }
    out[k.substr(1, k.size() - 2)] = value;
  }
  return out;
}

std::unique_ptr<MetricRegistry> testRegistry() {
  return std::make_unique<MetricRegistry>(MetricRegistry::UpdateThread::kNone);
}

class LogLevelGuard {
 public:
  LogLevelGuard() : saved_(log::level()) { log::setLevel(log::Level::kInfo); }
  ~LogLevelGuard() { log::setLevel(saved_); }

 private:
  log::Level saved_;
};

// A port held by a listening socket of this test, so that nothing else can
// bind it while the test runs.
class TakenPort {
 public:
  TakenPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(fd_, 1) != 0) {
      ADD_FAILURE() << "cannot take a port: " << std::strerror(errno);
      return;
    }
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~TakenPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

Configuration promConfig(const std::string& port, const std::string& factory = "prometheus") {
  Configuration c;
  c.set(options::kMetricsReporterPromFactoryClass, factory);
  c.set(options::kMetricsReporterPromHost, "127.0.0.1");
  c.set(options::kMetricsReporterPromPort, port);
  return c;
}

// ---- the text format ----

TEST(PrometheusFormatTest, FamilyNamesForEveryScopeKind) {
  auto registry = testRegistry();
  const std::vector<std::pair<ScopeKind, std::string>> kinds = {
      {ScopeKind::kJobManager, "flink_jobmanager_numRecordsIn"},
      {ScopeKind::kJobManagerJob, "flink_jobmanager_job_numRecordsIn"},
      {ScopeKind::kTaskManager, "flink_taskmanager_numRecordsIn"},
      {ScopeKind::kTaskManagerJob, "flink_taskmanager_job_numRecordsIn"},
      {ScopeKind::kTask, "flink_taskmanager_job_task_numRecordsIn"},
      {ScopeKind::kOperator, "flink_taskmanager_job_task_operator_numRecordsIn"}};
  std::vector<std::shared_ptr<metrics::MetricGroupImpl>> groups;
  for (size_t i = 0; i < kinds.size(); ++i) {
    groups.push_back(registry->createGroup(kinds[i].first, operatorVars()));
    groups.back()->counter("numRecordsIn").inc(static_cast<int64_t>(i + 1));
  }
  const std::string text = rest::renderPrometheus(registry->snapshot());
  Page page = parsePage(text);
  ASSERT_EQ(page.error, "") << text;
  ASSERT_EQ(page.order.size(), kinds.size()) << text;
  for (size_t i = 0; i < kinds.size(); ++i) {
    const PromFamily& f = page.family(kinds[i].second);
    EXPECT_EQ(f.type, "gauge") << kinds[i].second;
    std::string scope = metrics::logicalScope(kinds[i].first);
    std::replace(scope.begin(), scope.end(), '.', '_');
    EXPECT_EQ(f.help, "numRecordsIn (scope: " + scope + ")");
    ASSERT_EQ(f.samples.size(), 1u) << kinds[i].second;
    EXPECT_EQ(f.samples[0].value, static_cast<double>(i + 1));
    EXPECT_EQ(f.samples[0].labels, expectedLabels(operatorVars()));
  }
}

TEST(PrometheusFormatTest, SamplesOfOneFamilyStayTogetherAcrossGroups) {
  auto registry = testRegistry();
  auto a = registry->createGroup(ScopeKind::kOperator, operatorVars("0"));
  auto b = registry->createGroup(ScopeKind::kOperator, operatorVars("1"));
  for (auto* g : {a.get(), b.get()}) {
    g->counter("numRecordsIn").inc(g == a.get() ? 10 : 20);
    g->counter("numRecordsOut").inc(g == a.get() ? 1 : 2);
    g->gauge("currentOutputWatermark", [] { return 1000.0; });
  }
  const std::string text = rest::renderPrometheus(registry->snapshot());
  Page page = parsePage(text);  // the parser refuses a family split in two
  ASSERT_EQ(page.error, "") << text;
  EXPECT_EQ(page.order, (std::vector<std::string>{
                            "flink_taskmanager_job_task_operator_numRecordsIn",
                            "flink_taskmanager_job_task_operator_numRecordsOut",
                            "flink_taskmanager_job_task_operator_currentOutputWatermark"}));
  const PromFamily& in = page.family("flink_taskmanager_job_task_operator_numRecordsIn");
  ASSERT_EQ(in.samples.size(), 2u);
  std::map<std::string, double> bySubtask;
  for (const auto& s : in.samples) bySubtask[s.labels.at("subtask_index")] = s.value;
  EXPECT_EQ(bySubtask, (std::map<std::string, double>{{"0", 10}, {"1", 20}}));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3 * (2 + 2)) << text;
}

TEST(PrometheusFormatTest, LabelValuesAreFilteredAsFlinkDoesByDefault) {
  auto registry = testRegistry();
  Vars vars = operatorVars();
  vars["<task_name>"] = "Source: Custom Source -> Map";
  vars["<job_name>"] = "my \"quoted\" job\\1\nline";
  auto g = registry->createGroup(ScopeKind::kTask, vars);
  g->counter("numRecordsOut").inc(3);
  const std::string text = rest::renderPrometheus(registry->snapshot());
  Page page = parsePage(text);
  ASSERT_EQ(page.error, "") << text;
  const PromFamily& f = page.family("flink_taskmanager_job_task_numRecordsOut");
  ASSERT_EQ(f.samples.size(), 1u) << text;
  EXPECT_EQ(f.samples[0].labels, expectedLabels(vars));
  EXPECT_EQ(f.samples[0].labels.at("task_name"), "Source:_Custom_Source____Map");
}

TEST(PrometheusFormatTest, UnfilteredLabelValuesAreEscaped) {
  auto registry = testRegistry();
  Vars vars = operatorVars();
  const std::string nasty = "my \"quoted\" job\\1\nline";
  vars["<job_name>"] = nasty;
  auto g = registry->createGroup(ScopeKind::kTask, vars);
  g->counter("numRecordsOut").inc(3);
  const std::string text = rest::renderPrometheus(registry->snapshot(), false);
  EXPECT_NE(text.find(R"(job_name="my \"quoted\" job\\1\nline")"), std::string::npos) << text;
  Page page = parsePage(text);
  ASSERT_EQ(page.error, "") << text;
  const PromFamily& f = page.family("flink_taskmanager_job_task_numRecordsOut");
  ASSERT_EQ(f.samples.size(), 1u) << text;
  EXPECT_EQ(f.samples[0].labels.at("job_name"), nasty);
  EXPECT_EQ(f.samples[0].labels.at("task_name"), "Map");
}

TEST(PrometheusFormatTest, TypesAndSummaries) {
  auto registry = testRegistry();
  auto g = registry->createGroup(ScopeKind::kOperator, operatorVars());
  g->counter("c").inc(7);
  g->gauge("g", [] { return 0.25; });
  g->gauge("nan", [] { return std::nan(""); });
  g->gauge("inf", [] { return -INFINITY; });
  Meter& m = g->meter("m", nullptr);
  Histogram& h = g->histogram("latency", nullptr);
  for (int i = 1; i <= 10; ++i) h.update(i);
  const Clock::time_point t0 = Clock::now();
  registry->updateViews(t0);
  m.markEvent(10);
  registry->updateViews(t0 + std::chrono::seconds(2));

  const std::string text = rest::renderPrometheus(registry->snapshot());
  Page page = parsePage(text);
  ASSERT_EQ(page.error, "") << text;
  const std::string p = "flink_taskmanager_job_task_operator_";
  for (const char* n : {"c", "g", "nan", "inf", "m"}) {
    EXPECT_EQ(page.family(p + n).type, "gauge") << n;
    ASSERT_EQ(page.family(p + n).samples.size(), 1u) << n;
  }
  EXPECT_EQ(page.family(p + "c").samples[0].value, 7);
  EXPECT_EQ(page.family(p + "g").samples[0].value, 0.25);
  EXPECT_TRUE(std::isnan(page.family(p + "nan").samples[0].value));
  EXPECT_EQ(page.family(p + "inf").samples[0].value, -INFINITY);
  EXPECT_EQ(page.family(p + "m").samples[0].value, 5);  // 10 events over 2 s

  const PromFamily& s = page.family(p + "latency");
  EXPECT_EQ(s.type, "summary");
  // Rank q * 11 in 1..10 (Flink's percentile): 0.5 -> 5.5, 0.75 -> 8.25, the
  // others past the last value.
  const std::map<std::string, double> quantiles = {{"0.5", 5.5}, {"0.75", 8.25}, {"0.95", 10},
                                                   {"0.98", 10}, {"0.99", 10},   {"0.999", 10}};
  std::map<std::string, double> seen;
  std::optional<double> count;
  std::optional<double> sum;
  for (const PromSample& x : s.samples) {
    auto labels = x.labels;
    if (x.name == p + "latency") {
      seen[labels.at("quantile")] = x.value;
      labels.erase("quantile");
    } else if (x.name == p + "latency_count") {
      count = x.value;
    } else if (x.name == p + "latency_sum") {
      sum = x.value;
    }
    EXPECT_EQ(labels, expectedLabels(operatorVars())) << x.name;
  }
  EXPECT_EQ(seen, quantiles);
  EXPECT_EQ(count, 10);
  EXPECT_EQ(sum, 55);
}

TEST(PrometheusFormatTest, SubGroupsJoinTheNameAndKeysBecomeLabels) {
  auto registry = testRegistry();
  auto g = registry->createGroup(ScopeKind::kOperator, operatorVars());
  g->addGroup("my.group").counter("words-total").inc(4);
  g->addGroup("user", "alice").counter("clicks").inc(1);
  g->addGroup("user", "bob").counter("clicks").inc(2);
  const std::string text = rest::renderPrometheus(registry->snapshot());
  Page page = parsePage(text);
  ASSERT_EQ(page.error, "") << text;
  const PromFamily& words = page.family("flink_taskmanager_job_task_operator_my_group_words_total");
  ASSERT_EQ(words.samples.size(), 1u) << text;
  EXPECT_EQ(words.samples[0].value, 4);
  EXPECT_EQ(words.help, "words-total (scope: taskmanager_job_task_operator_my_group)");

  const PromFamily& clicks = page.family("flink_taskmanager_job_task_operator_user_clicks");
  ASSERT_EQ(clicks.samples.size(), 2u) << text;
  for (const auto& s : clicks.samples) {
    Vars v = operatorVars();
    v["<user>"] = s.value == 1 ? "alice" : "bob";
    EXPECT_EQ(s.labels, expectedLabels(v));
  }
}

TEST(PrometheusFormatTest, EmptySnapshotIsAnEmptyPage) {
  EXPECT_EQ(rest::renderPrometheus({}), "");
}

// ---- the reporters ----

TEST(MetricReportersTest, NothingConfiguredStartsNothing) {
  auto registry = testRegistry();
  auto reporters = rest::MetricReporters::start(Configuration(), *registry);
  ASSERT_TRUE(reporters.isOk()) << reporters.status().toString();
  EXPECT_EQ(reporters.value()->prometheusPort(), -1);
}

TEST(MetricReportersTest, ServesMetricsOverHttp) {
  auto registry = testRegistry();
  auto g = registry->createGroup(ScopeKind::kOperator, operatorVars());
  Counter& c = g->counter("numRecordsIn");
  c.inc(41);
  for (const std::string factory :
       {"prometheus", "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"}) {
    auto reporters = rest::MetricReporters::start(promConfig("0", factory), *registry);
    ASSERT_TRUE(reporters.isOk()) << reporters.status().toString();
    const int port = reporters.value()->prometheusPort();
    ASSERT_GT(port, 0);
    httplib::Client client("127.0.0.1", port);
    for (int round = 0; round < 2; ++round) {
      auto res = client.Get("/metrics");
      ASSERT_TRUE(res) << httplib::to_string(res.error());
      EXPECT_EQ(res->status, 200);
      EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
      Page page = parsePage(res->body);
      ASSERT_EQ(page.error, "") << res->body;
      const PromFamily& f = page.family("flink_taskmanager_job_task_operator_numRecordsIn");
      ASSERT_EQ(f.samples.size(), 1u) << res->body;
      EXPECT_EQ(f.samples[0].value, c.getCount());
      c.inc();
    }
    auto root = client.Get("/");
    ASSERT_TRUE(root);
    EXPECT_EQ(root->status, 200);
    EXPECT_EQ(parsePage(root->body).error, "") << root->body;
    EXPECT_EQ(parsePage(root->body)
                  .family("flink_taskmanager_job_task_operator_numRecordsIn")
                  .samples.size(),
              1u);
    auto other = client.Get("/other");
    ASSERT_TRUE(other);
    EXPECT_EQ(other->status, 404);
    reporters.value()->stop();
    EXPECT_EQ(reporters.value()->prometheusPort(), -1);
    EXPECT_FALSE(client.Get("/metrics"));
  }
}

TEST(MetricReportersTest, APortRangeMovesPastATakenPort) {
  auto registry = testRegistry();
  std::unique_ptr<TakenPort> taken;
  for (int attempt = 0; attempt < 20; ++attempt) {
    taken = std::make_unique<TakenPort>();
    if (taken->port() > 0 && taken->port() <= 65000) break;
  }
  ASSERT_LE(taken->port(), 65000);
  const int first = taken->port();
  auto reporters = rest::MetricReporters::start(
      promConfig(std::to_string(first) + "-" + std::to_string(first + 20)), *registry);
  ASSERT_TRUE(reporters.isOk()) << reporters.status().toString();
  const int port = reporters.value()->prometheusPort();
  EXPECT_GT(port, first);
  EXPECT_LE(port, first + 20);
  httplib::Client client("127.0.0.1", port);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST(MetricReportersTest, ATakenPortIsAnErrorNamingTheAddressAndTheCause) {
  auto registry = testRegistry();
  TakenPort taken;
  ASSERT_GT(taken.port(), 0);
  auto reporters =
      rest::MetricReporters::start(promConfig(std::to_string(taken.port())), *registry);
  ASSERT_FALSE(reporters.isOk());
  const std::string message = reporters.status().message();
  EXPECT_EQ(reporters.status().code(), StatusCode::kIoError);
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(taken.port())), std::string::npos)
      << message;
  EXPECT_NE(message.find(std::strerror(EADDRINUSE)), std::string::npos) << message;
}

TEST(MetricReportersTest, BadConfigurationNamesTheKey) {
  auto registry = testRegistry();
  struct Case {
    std::string key;
    std::string value;
    std::vector<std::string> mentions;
  };
  const std::vector<Case> cases = {
      {"metrics.reporter.prom.factory.class",
       "org.example.Reporter",
       {"metrics.reporter.prom.factory.class", "'org.example.Reporter'",
        "org.apache.flink.metrics.prometheus.PrometheusReporterFactory", "prometheus"}},
      {"metrics.reporter.slf4j.factory.class",
       "slf4j",
       {"metrics.reporter.slf4j.factory.class", "'slf4j'",
        "org.apache.flink.metrics.slf4j.Slf4jReporterFactory", "log"}},
      {"metrics.reporter.prom.port", "abc", {"metrics.reporter.prom.port", "'abc'"}},
      {"metrics.reporter.prom.port", "70000", {"metrics.reporter.prom.port", "'70000'"}},
      {"metrics.reporter.prom.port", "9260-9250", {"metrics.reporter.prom.port", "'9260-9250'"}},
      {"metrics.reporter.prom.port", "9250,", {"metrics.reporter.prom.port", "'9250,'"}},
      {"metrics.reporter.slf4j.interval", "0 ms", {"metrics.reporter.slf4j.interval", "positive"}},
      {"metrics.reporter.slf4j.interval", "soon", {"metrics.reporter.slf4j.interval", "soon"}},
  };
  for (const Case& c : cases) {
    Configuration config = promConfig("0");
    if (c.key == "metrics.reporter.slf4j.interval") {
      config.setString("metrics.reporter.slf4j.factory.class", "log");
    }
    config.setString(c.key, c.value);
    auto reporters = rest::MetricReporters::start(config, *registry);
    ASSERT_FALSE(reporters.isOk()) << c.key << "=" << c.value;
    EXPECT_EQ(reporters.status().code(), StatusCode::kInvalidArgument) << c.value;
    for (const std::string& m : c.mentions) {
      EXPECT_NE(reporters.status().message().find(m), std::string::npos)
          << reporters.status().message() << " does not mention " << m;
    }
  }
}

TEST(MetricReportersTest, TheLogReporterWritesBlocksOfMetrics) {
  LogLevelGuard guard;
  auto registry = testRegistry();
  auto g = registry->createGroup(ScopeKind::kOperator, operatorVars());
  g->counter("records").inc(5);
  std::atomic<int> gaugeReads{0};
  g->gauge("reads", [&gaugeReads] { return static_cast<double>(gaugeReads.fetch_add(1) * 0); });
  g->gauge("ratio", [] { return 0.75; });
  g->meter("perSecond", nullptr);
  Histogram& h = g->histogram("latency", nullptr);
  for (int i = 1; i <= 10; ++i) h.update(i);

  Configuration config;
  config.setString("metrics.reporter.slf4j.factory.class",
                   "org.apache.flink.metrics.slf4j.Slf4jReporterFactory");
  config.setString("metrics.reporter.slf4j.interval", "5 ms");
  testing::internal::CaptureStderr();
  auto reporters = rest::MetricReporters::start(config, *registry);
  // Two reads of the gauge: the first report has been written completely.
  const bool reported = test::waitUntil([&] { return gaugeReads.load() >= 2; });
  if (reporters.isOk()) reporters.value()->stop();
  const std::string out = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(reporters.isOk()) << reporters.status().toString();
  ASSERT_TRUE(reported);

  const std::string id = "h1.taskmanager.tm-1.WordCount.Tokenizer.0.";
  const size_t start = out.find("=========================== Starting metrics report");
  ASSERT_NE(start, std::string::npos) << out;
  const size_t end = out.find("=========================== Finished metrics report", start);
  ASSERT_NE(end, std::string::npos) << out;
  const std::string block = out.substr(start, end - start);
  const std::vector<std::string> inOrder = {
      "\n-- Counters " + std::string(79 - 12, '-') + "\n",
      "\n" + id + "records: 5\n",
      "\n-- Gauges " + std::string(79 - 10, '-') + "\n",
      "\n" + id + "reads: 0\n",
      "\n" + id + "ratio: 0.75\n",
      "\n-- Meters " + std::string(79 - 10, '-') + "\n",
      "\n" + id + "perSecond: 0\n",
      "\n-- Histograms " + std::string(79 - 14, '-') + "\n",
      "\n" + id +
          "latency: count=10, min=1, max=10, mean=5.5, stddev=3.0276503540974917, p50=5.5, "
          "p75=8.25, p95=10, p98=10, p99=10, p999=10\n",
  };
  size_t at = 0;
  for (const std::string& part : inOrder) {
    const size_t found = block.find(part, at);
    ASSERT_NE(found, std::string::npos) << "missing or out of order: " << part << "\n" << block;
    at = found + part.size() - 1;
  }
  EXPECT_NE(out.find("log reporter writing the metrics every 5 ms"), std::string::npos) << out;
}

}  // namespace
}  // namespace prometheus_test
}  // namespace sluice
