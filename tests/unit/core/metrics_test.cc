// Tests for the metric types (include/sluice/core/metrics.h) and the metric
// registry (src/core/metric_registry.h): values, statistics, views driven by
// a clock the test controls, scope formats, sub-groups, name collisions,
// unregistering and concurrent use.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/core/config.h>
#include <sluice/core/config_options.h>
#include <sluice/core/metrics.h>
#include <sluice/core/status.h>

#include "core/logging.h"
#include "core/metric_registry.h"
#include "harness/wait.h"

namespace sluice {
namespace metrics_test {
namespace {

using metrics::MetricGroupImpl;
using metrics::MetricRegistry;
using metrics::MetricSample;
using metrics::MetricType;
using metrics::ScopeKind;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

using Vars = std::map<std::string, std::string>;

// Restores the log level a test changes.
class LogLevelGuard {
 public:
  LogLevelGuard() : saved_(log::level()) { log::setLevel(log::Level::kInfo); }
  ~LogLevelGuard() { log::setLevel(saved_); }

 private:
  log::Level saved_;
};

Vars operatorVars() {
  return {{"<host>", "h1"},
          {"<tm_id>", "tm-1"},
          {"<job_id>", "j1"},
          {"<job_name>", "WordCount"},
          {"<task_name>", "Map"},
          {"<subtask_index>", "0"},
          {"<operator_name>", "Tokenizer"},
          {"<operator_id>", "op1"}};
}

std::unique_ptr<MetricRegistry> testRegistry() {
  return std::make_unique<MetricRegistry>(MetricRegistry::UpdateThread::kNone);
}

// The samples named `name` (restId).
std::vector<MetricSample> named(const std::vector<MetricSample>& all, const std::string& restId) {
  std::vector<MetricSample> out;
  for (const auto& s : all) {
    if (s.restId() == restId) out.push_back(s);
  }
  return out;
}

const MetricSample& only(const std::vector<MetricSample>& all, const std::string& restId) {
  static MetricSample missing;
  auto n = named(all, restId);
  EXPECT_EQ(n.size(), 1u) << restId;
  if (n.size() != 1) return missing;
  for (const auto& s : all) {
    if (s.restId() == restId) return s;
  }
  return missing;
}

// Commons Math's LEGACY percentile, written from its definition: the value
// at 1-based rank p(n+1), interpolated.
double referenceQuantile(std::vector<int64_t> v, double q) {
  std::sort(v.begin(), v.end());
  const double rank = q * (static_cast<double>(v.size()) + 1);
  if (rank <= 1) return static_cast<double>(v.front());
  if (rank >= static_cast<double>(v.size())) return static_cast<double>(v.back());
  const int below = static_cast<int>(rank);
  const double frac = rank - below;
  return (1 - frac) * static_cast<double>(v[below - 1]) + frac * static_cast<double>(v[below]);
}

TEST(CounterTest, IncAndDec) {
  Counter c;
  c.inc();
  c.inc(41);
  c.dec();
  c.dec(10);
  EXPECT_EQ(c.getCount(), 31);
}

TEST(HistogramTest, QuantilesOfOneToTen) {
  DescriptiveStatisticsHistogram h(100);
  for (int i = 10; i >= 1; --i) h.update(i);
  HistogramStatistics s = h.getStatistics();
  EXPECT_EQ(s.size, 10);
  EXPECT_EQ(h.getCount(), 10);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 10);
  EXPECT_DOUBLE_EQ(s.mean, 5.5);
  // Sample standard deviation of 1..10: sqrt(82.5 / 9).
  EXPECT_DOUBLE_EQ(s.stdDev, std::sqrt(82.5 / 9));
  // Rank p * 11: 0.5 -> 5.5, 0.75 -> 8.25, 0.1 -> 1.1, 0.95 -> 10.45 (past the end).
  EXPECT_DOUBLE_EQ(s.getQuantile(0.5), 5.5);
  EXPECT_DOUBLE_EQ(s.getQuantile(0.75), 8.25);
  EXPECT_DOUBLE_EQ(s.getQuantile(0.1), 1.1);
  EXPECT_DOUBLE_EQ(s.getQuantile(0.95), 10);
  EXPECT_DOUBLE_EQ(s.getQuantile(0.05), 1);
  EXPECT_DOUBLE_EQ(s.getQuantile(0), 1);
  EXPECT_DOUBLE_EQ(s.getQuantile(1), 10);
  EXPECT_EQ(s.values, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
}

TEST(HistogramTest, KeepsTheLastWindowOfValuesAgainstAReference) {
  DescriptiveStatisticsHistogram h(50);
  std::vector<int64_t> all;
  uint64_t x = 12345;
  for (int i = 0; i < 137; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const auto v = static_cast<int64_t>((x >> 33) % 10000) - 2000;
    all.push_back(v);
    h.update(v);
  }
  std::vector<int64_t> last(all.end() - 50, all.end());
  HistogramStatistics s = h.getStatistics();
  EXPECT_EQ(h.getCount(), 137);
  ASSERT_EQ(s.size, 50);
  EXPECT_EQ(s.min, *std::min_element(last.begin(), last.end()));
  EXPECT_EQ(s.max, *std::max_element(last.begin(), last.end()));
  const double mean =
      static_cast<double>(std::accumulate(last.begin(), last.end(), int64_t{0})) / 50.0;
  double sq = 0;
  for (int64_t v : last) sq += (static_cast<double>(v) - mean) * (static_cast<double>(v) - mean);
  EXPECT_NEAR(s.mean, mean, 1e-9);
  EXPECT_NEAR(s.stdDev, std::sqrt(sq / 49.0), 1e-9);
  for (double q : {0.01, 0.25, 0.5, 0.75, 0.95, 0.98, 0.99, 0.999}) {
    EXPECT_NEAR(s.getQuantile(q), referenceQuantile(last, q), 1e-9) << q;
  }
}

TEST(HistogramTest, EmptyAndBadWindow) {
  DescriptiveStatisticsHistogram h(3);
  HistogramStatistics s = h.getStatistics();
  EXPECT_EQ(s.size, 0);
  EXPECT_EQ(s.getQuantile(0.5), 0);
  EXPECT_EQ(s.mean, 0);
  h.update(7);
  s = h.getStatistics();
  EXPECT_EQ(s.stdDev, 0);
  EXPECT_EQ(s.getQuantile(0.99), 7);
  try {
    DescriptiveStatisticsHistogram bad(0);
    FAIL() << "a window of 0 was accepted";
  } catch (const SluiceException& e) {
    EXPECT_NE(std::string(e.what()).find("window size must be positive, got 0"), std::string::npos)
        << e.what();
  }
}

TEST(FormatMetricValueTest, IntegralWithoutPointOthersShortest) {
  EXPECT_EQ(metrics::formatMetricValue(42), "42");
  EXPECT_EQ(metrics::formatMetricValue(-3), "-3");
  EXPECT_EQ(metrics::formatMetricValue(0.1), "0.1");
  EXPECT_EQ(metrics::formatMetricValue(2.5), "2.5");
  EXPECT_EQ(metrics::formatMetricValue(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(metrics::formatMetricValue(std::nan("")), "NaN");
  EXPECT_EQ(metrics::formatMetricValue(INFINITY), "Infinity");
  EXPECT_EQ(metrics::formatMetricValue(-INFINITY), "-Infinity");
}

TEST(MetricGroupTest, CountersGaugesAndSnapshotFields) {
  auto registry = testRegistry();
  auto g = registry->createGroup(ScopeKind::kOperator, operatorVars());
  g->counter("numRecordsIn").inc(5);
  double level = 0.25;
  g->gauge("level", [&level] { return level; });
  std::atomic<int64_t> engineCount{17};
  g->counterView("numRecordsOut", [&engineCount] { return engineCount.load(); });

  auto all = registry->snapshot();
  ASSERT_EQ(all.size(), 3u);
  const MetricSample& in = only(all, "numRecordsIn");
  EXPECT_EQ(in.type, MetricType::kCounter);
  EXPECT_EQ(in.value, 5);
  EXPECT_EQ(in.count, 5);
  EXPECT_EQ(in.kind, ScopeKind::kOperator);
  EXPECT_EQ(in.scope, "h1.taskmanager.tm-1.WordCount.Tokenizer.0");
  EXPECT_EQ(in.identifier(), "h1.taskmanager.tm-1.WordCount.Tokenizer.0.numRecordsIn");
  EXPECT_EQ(in.variables, operatorVars());
  EXPECT_TRUE(in.subScope.empty());
  EXPECT_EQ(only(all, "level").type, MetricType::kGauge);
  EXPECT_EQ(only(all, "level").value, 0.25);
  EXPECT_EQ(only(all, "numRecordsOut").type, MetricType::kCounter);
  EXPECT_EQ(only(all, "numRecordsOut").value, 17);

  level = 0.5;
  engineCount = 20;
  all = registry->snapshot();
  EXPECT_EQ(only(all, "level").value, 0.5);
  EXPECT_EQ(only(all, "numRecordsOut").value, 20);
}

TEST(MetricGroupTest, HistogramAndMeterSamples) {
  auto registry = testRegistry();
  auto g = registry->createGroup(ScopeKind::kTask, operatorVars());
  Histogram& h = g->histogram("latency", nullptr);
  for (int i = 1; i <= 4; ++i) h.update(i * 10);
  Counter& events = g->counter("events");
  Meter& m = g->meter("eventsPerSecond", &events);
  m.markEvent(3);
  EXPECT_EQ(events.getCount(), 3);
  auto all = registry->snapshot();
  const MetricSample& hs = only(all, "latency");
  EXPECT_EQ(hs.type, MetricType::kHistogram);
  EXPECT_EQ(hs.count, 4);
  EXPECT_EQ(hs.histogram.size, 4);
  EXPECT_DOUBLE_EQ(hs.histogram.mean, 25);
  const MetricSample& ms = only(all, "eventsPerSecond");
  EXPECT_EQ(ms.type, MetricType::kMeter);
  EXPECT_EQ(ms.count, 3);
  EXPECT_EQ(ms.value, 0);  // no rate before two readings
}

TEST(MeterTest, RateOverElapsedTimeThenOverTheLastMinute) {
  auto registry = testRegistry();
  auto g = registry->createGroup(ScopeKind::kTask, operatorVars());
  Meter& m = g->meter("m", nullptr);
  const Clock::time_point t0 = Clock::now();
  // count[t]: the events marked by second t; a burst of 600 at second 70.
  std::map<int, int64_t> count;
  int64_t total = 0;
  registry->updateViews(t0);
  count[0] = 0;
  EXPECT_EQ(m.getRate(), 0);
  for (int t = 1; t <= 140; ++t) {
    const int64_t n = (t == 70) ? 600 : 6;
    m.markEvent(n);
    total += n;
    count[t] = total;
    registry->updateViews(t0 + seconds(t));
    // Over the elapsed time while younger than a minute, then the last 60 s.
    const int from = std::max(0, t - 60);
    const double expected = static_cast<double>(count[t] - count[from]) / (t - from);
    ASSERT_NEAR(m.getRate(), expected, 1e-9) << "at second " << t;
  }
  EXPECT_EQ(m.getCount(), total);
  EXPECT_NEAR(m.getRate(), 6, 1e-9);  // the burst has left the window
}

TEST(MeterTest, ReadingsCloserThanHalfASecondAreIgnored) {
  auto registry = testRegistry();
  auto g = registry->createGroup(ScopeKind::kTask, operatorVars());
  std::atomic<int64_t> n{0};
  g->rateView("r", [&n] { return n.load(); });
  const Clock::time_point t0 = Clock::now();
  registry->updateViews(t0);
  n = 100;
  registry->updateViews(t0 + std::chrono::milliseconds(10));
  EXPECT_EQ(only(registry->snapshot(), "r").value, 0);
  registry->updateViews(t0 + seconds(2));
  EXPECT_NEAR(only(registry->snapshot(), "r").value, 50, 1e-9);
  // Time going backwards is ignored too.
  n = 1000;
  registry->updateViews(t0 + seconds(1));
  EXPECT_NEAR(only(registry->snapshot(), "r").value, 50, 1e-9);
}

TEST(MeterTest, RegistryThreadShowsARateForEventsRightAfterRegistration) {
  MetricRegistry registry;  // with its own update thread
  ASSERT_TRUE(registry.hasUpdateThread());
  auto g = registry.createGroup(ScopeKind::kTask, operatorVars());
  std::atomic<int64_t> n{0};
  g->rateView("numRecordsInPerSecond", [&n] { return n.load(); });
  n = 500;  // all events come before the first tick
  EXPECT_TRUE(
      test::waitUntil([&] { return only(registry.snapshot(), "numRecordsInPerSecond").value > 0; },
                      std::chrono::seconds(30)));
  g.reset();
}

TEST(TimeViewTest, MillisecondsPerSecondAndTheRemainder) {
  auto registry = testRegistry();
  auto g = registry->createGroup(ScopeKind::kTask, operatorVars());
  std::atomic<int64_t> idle{0};
  std::atomic<int64_t> back{0};
  g->timePerSecondView("idleTimeMsPerSecond", [&idle] { return idle.load(); });
  g->timePerSecondView("backPressuredTimeMsPerSecond", [&back] { return back.load(); });
  g->remainderPerSecondView("busyTimeMsPerSecond",
                            {"idleTimeMsPerSecond", "backPressuredTimeMsPerSecond"});
  auto value = [&](const std::string& name) { return only(registry->snapshot(), name).value; };
  // Nothing measured yet: not "all busy".
  EXPECT_EQ(value("busyTimeMsPerSecond"), 0);

  const Clock::time_point t0 = Clock::now();
  registry->updateViews(t0);
  EXPECT_EQ(value("busyTimeMsPerSecond"), 0);
  std::map<int, int64_t> idleAt{{0, 0}};
  std::map<int, int64_t> backAt{{0, 0}};
  constexpr int64_t kMs = 1'000'000;
  for (int t = 1; t <= 12; ++t) {
    idle += (t <= 6 ? 300 : 100) * kMs;
    back += (t <= 6 ? 0 : 500) * kMs;
    idleAt[t] = idle;
    backAt[t] = back;
    registry->updateViews(t0 + seconds(t));
    const int from = std::max(0, t - 5);
    const double idleMs = static_cast<double>(idleAt[t] - idleAt[from]) / kMs / (t - from);
    const double backMs = static_cast<double>(backAt[t] - backAt[from]) / kMs / (t - from);
    EXPECT_EQ(value("idleTimeMsPerSecond"), std::round(idleMs)) << t;
    EXPECT_EQ(value("backPressuredTimeMsPerSecond"), std::round(backMs)) << t;
    EXPECT_EQ(value("busyTimeMsPerSecond"), 1000 - std::round(idleMs) - std::round(backMs)) << t;
  }
  EXPECT_EQ(value("idleTimeMsPerSecond"), 100);
  EXPECT_EQ(value("backPressuredTimeMsPerSecond"), 500);
  EXPECT_EQ(value("busyTimeMsPerSecond"), 400);

  // More than a second per second (overlapping periods) is capped, and the
  // remainder never goes below 0.
  idle += 8000 * kMs;
  registry->updateViews(t0 + seconds(13));
  EXPECT_EQ(value("idleTimeMsPerSecond"), 1000);
  EXPECT_EQ(value("busyTimeMsPerSecond"), 0);
}

Vars allVars() {
  Vars v = operatorVars();
  v["<job_name>"] = "Job";
  return v;
}

TEST(ScopeFormatTest, FlinkDefaults) {
  auto registry = testRegistry();
  const Vars v = allVars();
  EXPECT_EQ(registry->formatScope(ScopeKind::kJobManager, v), "h1.jobmanager");
  EXPECT_EQ(registry->formatScope(ScopeKind::kJobManagerJob, v), "h1.jobmanager.Job");
  EXPECT_EQ(registry->formatScope(ScopeKind::kTaskManager, v), "h1.taskmanager.tm-1");
  EXPECT_EQ(registry->formatScope(ScopeKind::kTaskManagerJob, v), "h1.taskmanager.tm-1.Job");
  EXPECT_EQ(registry->formatScope(ScopeKind::kTask, v), "h1.taskmanager.tm-1.Job.Map.0");
  EXPECT_EQ(registry->formatScope(ScopeKind::kOperator, v), "h1.taskmanager.tm-1.Job.Tokenizer.0");
  EXPECT_STREQ(metrics::logicalScope(ScopeKind::kOperator), "taskmanager.job.task.operator");
  EXPECT_STREQ(metrics::logicalScope(ScopeKind::kJobManagerJob), "jobmanager.job");
}

TEST(ScopeFormatTest, CustomFormatsInheritanceAndValues) {
  auto registry = testRegistry();
  Configuration config;
  config.set(options::kMetricsScopeTask, "<host>.tasks.<task_name>.<subtask_index>");
  config.set(options::kMetricsScopeOperator, "*.<operator_name>.<no_such_variable>");
  config.set(options::kMetricsScopeTm, "tm.<tm_id>");
  registry->configure(config);
  Vars v = allVars();
  v["<operator_name>"] = "Map.Filter";  // a value with a dot stays one component
  v["<tm_id>"] = "";                    // an empty value is "null", as in Flink
  EXPECT_EQ(registry->formatScope(ScopeKind::kTaskManager, v), "tm.null");
  auto g = registry->createGroup(ScopeKind::kOperator, v);
  EXPECT_EQ(
      g->getScopeComponents(),
      (std::vector<std::string>{"h1", "tasks", "Map", "0", "Map.Filter", "<no_such_variable>"}));
  EXPECT_EQ(g->getMetricIdentifier("numRecordsIn"),
            "h1.tasks.Map.0.Map.Filter.<no_such_variable>.numRecordsIn");
  g->counter("numRecordsIn");
  EXPECT_EQ(registry->snapshot()[0].identifier(),
            "h1.tasks.Map.0.Map.Filter.<no_such_variable>.numRecordsIn");

  Configuration bad;
  bad.set(options::kMetricsScopeJm, "*.jobmanager");
  try {
    registry->configure(bad);
    FAIL() << "a '*' format without a parent was accepted";
  } catch (const SluiceException& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.scope.jm"), std::string::npos) << e.what();
  }
}

TEST(SubGroupTest, NamedAndKeyValueGroups) {
  auto registry = testRegistry();
  auto g = registry->createGroup(ScopeKind::kOperator, operatorVars());
  MetricGroup& mine = g->addGroup("tokenizer");
  EXPECT_EQ(&mine, &g->addGroup("tokenizer"));
  mine.counter("words").inc(3);
  EXPECT_EQ(mine.getMetricIdentifier("words"),
            "h1.taskmanager.tm-1.WordCount.Tokenizer.0.tokenizer.words");

  MetricGroup& byUser = g->addGroup("user", "alice");
  EXPECT_EQ(&byUser, &g->addGroup("user", "alice"));
  EXPECT_NE(&byUser, &g->addGroup("user", "bob"));
  EXPECT_NE(&byUser, &g->addGroup("user").addGroup("alice"));  // a plain group, no variable
  byUser.addGroup("inner").counter("clicks").inc(2);
  EXPECT_EQ(byUser.getScopeComponents().back(), "alice");
  Vars expected = operatorVars();
  expected["<user>"] = "alice";
  EXPECT_EQ(byUser.getAllVariables(), expected);
  EXPECT_EQ(g->addGroup("user").getAllVariables(), operatorVars());

  auto all = registry->snapshot();
  const MetricSample& words = only(all, "tokenizer.words");
  EXPECT_EQ(words.value, 3);
  EXPECT_EQ(words.subScope, (std::vector<std::string>{"tokenizer"}));
  EXPECT_EQ(words.logicalSubScope, (std::vector<std::string>{"tokenizer"}));
  EXPECT_EQ(words.variables, operatorVars());

  const MetricSample& clicks = only(all, "user.alice.inner.clicks");
  EXPECT_EQ(clicks.value, 2);
  EXPECT_EQ(clicks.subScope, (std::vector<std::string>{"user", "alice", "inner"}));
  EXPECT_EQ(clicks.logicalSubScope, (std::vector<std::string>{"user", "inner"}));
  EXPECT_EQ(clicks.variables, expected);
  EXPECT_EQ(clicks.identifier(),
            "h1.taskmanager.tm-1.WordCount.Tokenizer.0.user.alice.inner.clicks");

  // Filtering by a variable of a key-value group.
  auto alice = registry->snapshot("<user>", "alice");
  ASSERT_EQ(alice.size(), 1u);
  EXPECT_EQ(alice[0].restId(), "user.alice.inner.clicks");
}

TEST(SubGroupTest, EmptyNamesAreRefused) {
  auto registry = testRegistry();
  auto g = registry->createGroup(ScopeKind::kOperator, operatorVars());
  EXPECT_THROW(g->addGroup(""), SluiceException);
  EXPECT_THROW(g->addGroup("k", ""), SluiceException);
  EXPECT_THROW(g->counter(""), SluiceException);
  EXPECT_THROW(g->gauge("g", nullptr), SluiceException);
}

TEST(SnapshotTest, FilterByVariable) {
  auto registry = testRegistry();
  Vars a = operatorVars();
  Vars b = operatorVars();
  b["<job_id>"] = "j2";
  auto ga = registry->createGroup(ScopeKind::kOperator, a);
  auto gb = registry->createGroup(ScopeKind::kOperator, b);
  ga->counter("x").inc(1);
  gb->counter("x").inc(2);
  gb->counter("y").inc(3);
  auto j2 = registry->snapshot("<job_id>", "j2");
  ASSERT_EQ(j2.size(), 2u);
  EXPECT_EQ(only(j2, "x").value, 2);
  EXPECT_EQ(only(j2, "y").value, 3);
  EXPECT_EQ(registry->snapshot("<job_id>", "j3").size(), 0u);
  EXPECT_EQ(registry->snapshot().size(), 3u);
}

TEST(CollisionTest, SameKindReturnsTheExistingMetricOtherKindsAreNotReported) {
  LogLevelGuard guard;
  auto registry = testRegistry();
  auto g = registry->createGroup(ScopeKind::kOperator, operatorVars());

  testing::internal::CaptureStderr();
  Counter& a = g->counter("c");
  Counter& b = g->counter("c");
  Histogram& h1 = g->histogram("h", nullptr);
  Histogram& h2 = g->histogram("h", std::make_unique<DescriptiveStatisticsHistogram>(5));
  std::string quiet = testing::internal::GetCapturedStderr();
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(&h1, &h2);
  EXPECT_EQ(quiet.find("collision"), std::string::npos) << quiet;

  testing::internal::CaptureStderr();
  g->gauge("c", [] { return 99.0; });   // ignored: c is a counter
  Counter& detached = g->counter("h");  // h is a histogram
  detached.inc(7);                      // works, but is not reported
  g->gauge("g", [] { return 1.0; });
  g->gauge("g", [] { return 2.0; });  // the first gauge stays
  std::string warned = testing::internal::GetCapturedStderr();
  EXPECT_NE(&detached, &a);
  EXPECT_EQ(detached.getCount(), 7);
  EXPECT_EQ(std::count(warned.begin(), warned.end(), '\n'), 3) << warned;
  EXPECT_NE(warned.find("Name collision: group h1.taskmanager.tm-1.WordCount.Tokenizer.0 already "
                        "has a counter named 'c'; the new gauge is not reported"),
            std::string::npos)
      << warned;

  a.inc(4);
  auto all = registry->snapshot();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(only(all, "c").type, MetricType::kCounter);
  EXPECT_EQ(only(all, "c").value, 4);
  EXPECT_EQ(only(all, "h").type, MetricType::kHistogram);
  EXPECT_EQ(only(all, "g").value, 1);
}

TEST(RegistryTest, DestroyedGroupsAreUnregistered) {
  auto registry = testRegistry();
  auto keep = registry->createGroup(ScopeKind::kTask, operatorVars());
  keep->counter("kept");
  {
    auto gone = registry->createGroup(ScopeKind::kOperator, operatorVars());
    gone->counter("a");
    gone->addGroup("sub").counter("b");
    EXPECT_EQ(registry->snapshot().size(), 3u);
  }
  auto all = registry->snapshot();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].name, "kept");
}

TEST(RegistryTest, AThrowingGaugeIsLeftOutAndLoggedOnce) {
  LogLevelGuard guard;
  auto registry = testRegistry();
  auto g = registry->createGroup(ScopeKind::kTask, operatorVars());
  g->gauge("broken", []() -> double { throw std::runtime_error("sensor unplugged"); });
  g->counter("fine").inc(1);
  testing::internal::CaptureStderr();
  auto first = registry->snapshot();
  auto second = registry->snapshot();
  std::string out = testing::internal::GetCapturedStderr();
  for (const auto* snap : {&first, &second}) {
    ASSERT_EQ(snap->size(), 1u);
    EXPECT_EQ((*snap)[0].name, "fine");
  }
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("gauge h1.taskmanager.tm-1.WordCount.Map.0.broken threw (sensor unplugged)"),
            std::string::npos)
      << out;
}

TEST(RegistryTest, ConcurrentUpdatesGroupsAndSnapshots) {
  auto registry = testRegistry();
  auto g = registry->createGroup(ScopeKind::kTask, operatorVars());
  Counter& shared = g->counter("shared");
  Histogram& h = g->histogram("h", nullptr);
  Meter& m = g->meter("m", nullptr);
  constexpr int kThreads = 3;
  constexpr int kPerThread = 20000;
  std::atomic<bool> done{false};
  std::atomic<int> snapshots{0};

  std::thread reader([&] {
    const Clock::time_point t0 = Clock::now();
    int tick = 0;
    while (!done.load()) {
      auto all = registry->snapshot();
      for (const auto& s : all) {
        // A short-lived group's gauge is only ever read while it lives.
        if (s.name == "alive") {
          EXPECT_EQ(s.value, 1);
        }
      }
      registry->updateViews(t0 + seconds(++tick));
      snapshots.fetch_add(1);
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        shared.inc();
        h.update(i);
        m.markEvent();
        if (i % 500 == 0) {
          Vars v = operatorVars();
          v["<subtask_index>"] = std::to_string(t);
          auto shortLived = registry->createGroup(ScopeKind::kOperator, v);
          std::atomic<int> alive{1};
          shortLived->gauge("alive", [&alive] { return static_cast<double>(alive.load()); });
          shortLived->addGroup("k", std::to_string(i)).counter("n").inc();
          shortLived.reset();  // waits for a snapshot that reads it
          alive = 0;           // a snapshot reading the gauge from now on would see 0
        }
      }
    });
  }
  for (auto& w : writers) w.join();
  EXPECT_TRUE(test::waitUntil([&] { return snapshots.load() >= 2; }));
  done = true;
  reader.join();

  auto all = registry->snapshot();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(only(all, "shared").value, kThreads * kPerThread);
  EXPECT_EQ(only(all, "h").count, kThreads * kPerThread);
  EXPECT_EQ(only(all, "h").histogram.size, 500);
  EXPECT_EQ(only(all, "m").count, kThreads * kPerThread);
}

TEST(UnregisteredGroupTest, MetricsWorkAndAreReportedNowhere) {
  MetricGroup& g = unregisteredMetricGroup();
  Counter& c = g.addGroup("x").counter("y");
  c.inc(2);
  EXPECT_EQ(c.getCount(), 2);
  EXPECT_EQ(&unregisteredMetricGroup(), &g);
  for (const auto& s : MetricRegistry::process().snapshot()) EXPECT_NE(s.restId(), "x.y");
}

}  // namespace
}  // namespace metrics_test
}  // namespace sluice
