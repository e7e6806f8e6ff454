// Metrics and the REST API of an embedded job, read over HTTP from the job
// process's own endpoint (rest.embedded.enabled): record counts of a bounded job per
// operator, backpressure upstream of a slow sink, watermarks, checkpoint
// counters, and the errors of bad requests.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sluice/sluice.h>

#include "harness/gated_source.h"
#include "harness/wait.h"

namespace sluice {
namespace embedded_metrics_test {
namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Drops every record (the counts are read from the metrics).
template <class T>
class DiscardingSink final : public Sink<T> {
 public:
  std::unique_ptr<SinkWriter<T>> createWriter(WriterInitContext&) const override {
    return std::make_unique<Writer>();
  }

 private:
  class Writer final : public SinkWriter<T> {
   public:
    void write(const T&, const SinkWriterContext&) override {}
  };
};

// The REST endpoint of this process: started by the first job configured
// with rest.embedded.enabled and rest.port 0; every later job of the process is served by it too.
Configuration restConfig() {
  Configuration c;
  c.set(options::kRestEmbeddedEnabled, true);
  c.set(options::kRestPort, 0);
  return c;
}

struct Rest {
  explicit Rest(const std::string& url) : client(url) {
    client.set_connection_timeout(5);
    client.set_read_timeout(10);
  }
  json get(const std::string& path, int expectStatus = 200) {
    auto r = client.Get(path);
    EXPECT_TRUE(r) << "GET " << path << ": " << httplib::to_string(r.error());
    if (!r) return json();
    EXPECT_EQ(r->status, expectStatus) << "GET " << path << ": " << r->body;
    return json::parse(r->body, nullptr, false);
  }
  httplib::Client client;
};

// Flink's `subtasks/metrics?get=...&agg=sum` of one vertex: id -> sum.
std::map<std::string, double> sums(Rest& rest, const std::string& job, const std::string& vertex,
                                   const std::string& ids) {
  json body = rest.get("/jobs/" + job + "/vertices/" + vertex + "/subtasks/metrics?get=" + ids +
                       "&agg=sum");
  std::map<std::string, double> out;
  if (!body.is_array()) return out;
  for (const auto& m : body) {
    if (m.contains("sum")) out[m["id"].get<std::string>()] = m["sum"].get<double>();
  }
  return out;
}

// Checks each metric id's sum over the vertex's subtasks.
void expectSums(Rest& rest, const std::string& job, const std::string& vertex,
                const std::vector<std::pair<std::string, int64_t>>& expected) {
  std::string ids;
  for (const auto& [id, value] : expected) ids += (ids.empty() ? "" : ",") + id;
  auto got = sums(rest, job, vertex, ids);
  for (const auto& [id, value] : expected) EXPECT_EQ(got[id], value) << id;
}

// The vertex whose name contains `part`.
std::string vertexId(const json& job, const std::string& part) {
  for (const auto& v : job["vertices"]) {
    if (v["name"].get<std::string>().find(part) != std::string::npos) {
      return v["id"].get<std::string>();
    }
  }
  ADD_FAILURE() << "no vertex named like '" << part << "' in " << job.dump();
  return "";
}

TEST(EmbeddedMetricsTest, BoundedJobCountsEveryRecordPerOperator) {
  constexpr int64_t kRecords = 30'000;
  // Computed independently of the job: what the filter keeps.
  int64_t kept = 0;
  for (int64_t i = 0; i < kRecords; ++i) kept += (i * 2) % 3 == 0 ? 1 : 0;

  StreamExecutionEnvironment env(restConfig());
  env.setParallelism(2);
  env.fromGenerator([](int64_t i) { return i; }, kRecords)
      .map([](int64_t x) { return x * 2; })
      .name("Doubler")
      .filter([](int64_t x) { return x % 3 == 0; })
      .name("Thirds")
      .keyBy([](int64_t x) { return x % 10; })
      .map([](int64_t x) { return x + 1; })
      .name("Keyed")
      .sinkTo(DiscardingSink<int64_t>(), "Sink");
  JobClient client = env.executeAsync("counting");
  const std::string url = client.getWebInterfaceURL();
  ASSERT_FALSE(url.empty()) << "rest.embedded.enabled is set: the job process must serve REST";
  client.getJobExecutionResult();

  Rest rest(url);
  json job = rest.get("/jobs/" + client.getJobId());
  ASSERT_TRUE(job.is_object());
  EXPECT_EQ(job["state"], "FINISHED");
  ASSERT_EQ(job["vertices"].size(), 2u) << job.dump();
  const std::string head = vertexId(job, "Doubler");
  const std::string tail = vertexId(job, "Keyed");

  auto h = sums(rest, client.getJobId(), head,
                "Doubler.numRecordsIn,Doubler.numRecordsOut,Thirds.numRecordsIn,"
                "Thirds.numRecordsOut,numRecordsOut,numRecordsIn");
  EXPECT_EQ(h["Doubler.numRecordsIn"], kRecords);
  EXPECT_EQ(h["Doubler.numRecordsOut"], kRecords);
  EXPECT_EQ(h["Thirds.numRecordsIn"], kRecords);
  EXPECT_EQ(h["Thirds.numRecordsOut"], kept);
  EXPECT_EQ(h["numRecordsOut"], kept) << "the task sends what the filter kept";
  EXPECT_EQ(h["numRecordsIn"], 0) << "a source task reads no network input";

  auto t = sums(rest, client.getJobId(), tail,
                "numRecordsIn,Keyed.numRecordsIn,Keyed.numRecordsOut,Sink.numRecordsIn,"
                "numBytesIn");
  EXPECT_EQ(t["numRecordsIn"], kept);
  EXPECT_EQ(t["Keyed.numRecordsIn"], kept);
  EXPECT_EQ(t["Keyed.numRecordsOut"], kept);
  EXPECT_EQ(t["Sink.numRecordsIn"], kept);
  EXPECT_GT(t["numBytesIn"], kept * 8) << "every record carries at least its 8-byte value";

  // The vertex summary of /jobs/:id sums the task-level counters.
  for (const auto& v : job["vertices"]) {
    if (v["id"] == tail) {
      EXPECT_EQ(v["metrics"]["read-records"].get<int64_t>(), kept);
      EXPECT_TRUE(v["metrics"]["read-records-complete"].get<bool>());
    }
    if (v["id"] == head) {
      EXPECT_EQ(v["metrics"]["write-records"].get<int64_t>(), kept);
    }
  }
}

class Both final : public CoMapFunction<int64_t, int64_t, int64_t> {
 public:
  int64_t map1(const int64_t& v) override { return v; }
  int64_t map2(const int64_t& v) override { return -v; }
};

// A source's count is published per batch; one-out-per-in operators (timestamp
// assignment, map, co-map, reduce) and the branches of a fan-out take theirs
// from what feeds them instead of counting. The counts must still be exact.
TEST(EmbeddedMetricsTest, CountsTheEngineDerivesAreExact) {
  constexpr int64_t kRecords = 20'001;
  const int64_t odd = kRecords / 2;  // 1, 3, ..., kRecords - 2

  StreamExecutionEnvironment env(restConfig());
  env.setParallelism(2);
  auto stamped =
      env.fromGenerator([](int64_t i) { return i; }, kRecords)
          .name("Gen")
          .assignTimestampsAndWatermarks(
              WatermarkStrategy<int64_t>::forMonotonousTimestamps().withTimestampAssigner(
                  [](const int64_t& x, int64_t) { return x; }))
          .name("Stamp");
  auto odds = stamped.filter([](int64_t x) { return x % 2 == 1; }).name("Odds");
  auto tens = stamped.map([](int64_t x) { return x / 10; }).name("Tens");
  odds.connect(tens)
      .map(Both())
      .name("Both")
      .keyBy([](int64_t x) { return x % 7; })
      .reduce([](int64_t a, int64_t b) { return a + b; })
      .name("Sum")
      .sinkTo(DiscardingSink<int64_t>(), "Sink");
  JobClient client = env.executeAsync("derived-counts");
  const std::string url = client.getWebInterfaceURL();
  ASSERT_FALSE(url.empty());
  client.getJobExecutionResult();

  Rest rest(url);
  json job = rest.get("/jobs/" + client.getJobId());
  ASSERT_TRUE(job.is_object());
  ASSERT_EQ(job["vertices"].size(), 3u) << job.dump();
  const int64_t both = odd + kRecords;
  expectSums(rest, client.getJobId(), vertexId(job, "Gen"),
             {{"Gen.numRecordsOut", kRecords},
              {"Stamp.numRecordsIn", kRecords},
              {"Stamp.numRecordsOut", kRecords},
              {"Odds.numRecordsIn", kRecords},
              {"Odds.numRecordsOut", odd},
              {"Tens.numRecordsIn", kRecords},
              {"Tens.numRecordsOut", kRecords},
              {"numRecordsOut", both}});
  expectSums(rest, client.getJobId(), vertexId(job, "Both"),
             {{"numRecordsIn", both},
              {"Both.numRecordsIn", both},
              {"Both.numRecordsOut", both},
              {"numRecordsOut", both}});
  expectSums(
      rest, client.getJobId(), vertexId(job, "Sum"),
      {{"Sum.numRecordsIn", both}, {"Sum.numRecordsOut", both}, {"Sink.numRecordsIn", both}});
}

// An ended job stays visible to the REST API, but as its description: its
// user functions, and what they captured, go with the job's owner.
TEST(EmbeddedMetricsTest, AnEndedJobIsKeptAsItsDescriptionNotItsRun) {
  constexpr int64_t kRecords = 1'000;
  auto payload = std::make_shared<int64_t>(7);
  std::weak_ptr<int64_t> watch = payload;
  std::string id;
  std::string url;
  {
    StreamExecutionEnvironment env(restConfig());
    env.fromGenerator([payload](int64_t i) { return i + *payload; }, kRecords)
        .name("Gen")
        .sinkTo(DiscardingSink<int64_t>(), "Sink");
    payload.reset();
    JobClient client = env.executeAsync("archived");
    id = client.getJobId();
    url = client.getWebInterfaceURL();
    client.getJobExecutionResult();
  }
  EXPECT_TRUE(watch.expired()) << "the ended job's user functions are still held";

  Rest rest(url);
  json job = rest.get("/jobs/" + id);
  ASSERT_TRUE(job.is_object());
  EXPECT_EQ(job["state"], "FINISHED");
  EXPECT_EQ(job["vertices"].size(), 1u) << job.dump();
  EXPECT_GT(job["end-time"].get<int64_t>(), 0);
  bool listed = false;
  const json jobs = rest.get("/jobs");
  for (const auto& j : jobs["jobs"]) listed = listed || j["id"] == id;
  EXPECT_TRUE(listed) << "/jobs lists the ended job";
  auto h = sums(rest, id, vertexId(job, "Gen"), "Gen.numRecordsOut");
  EXPECT_EQ(h["Gen.numRecordsOut"], kRecords);

  auto r = rest.client.Patch("/jobs/" + id + "?mode=cancel");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 409) << r->body;
  EXPECT_NE(r->body.find("FINISHED"), std::string::npos) << r->body;
}

std::atomic<int64_t> gSlowSinkRecords{0};

class SlowSink final : public Sink<int64_t> {
 public:
  std::unique_ptr<SinkWriter<int64_t>> createWriter(WriterInitContext&) const override {
    return std::make_unique<Writer>();
  }

 private:
  class Writer final : public SinkWriter<int64_t> {
   public:
    void write(const int64_t&, const SinkWriterContext&) override {
      std::this_thread::sleep_for(milliseconds(1));
      gSlowSinkRecords.fetch_add(1);
    }
  };
};

TEST(EmbeddedMetricsTest, BackpressureIsHighUpstreamOfASlowSinkAndLowElsewhere) {
  Configuration c = restConfig();
  c.set(options::kExecutionCheckpointingInterval, milliseconds(300));
  // Small buffers: barriers wait behind fewer records at the slow sink.
  c.set(options::kTaskManagerMemorySegmentSize, MemorySize::ofKibiBytes(1));
  StreamExecutionEnvironment env(c);
  env.setParallelism(1);
  env.fromGenerator([](int64_t i) { return i; }, kUnboundedCount)
      .map([](int64_t x) { return x; })
      .name("Upstream")
      .sinkTo(SlowSink(), "Slow Sink")
      .disableChaining();
  JobClient client = env.executeAsync("backpressured");
  Rest rest(client.getWebInterfaceURL());
  json job = rest.get("/jobs/" + client.getJobId());
  const std::string up = vertexId(job, "Upstream");
  const std::string sink = vertexId(job, "Slow Sink");

  // The upstream task waits for buffers the sink does not free: its
  // backPressuredTimeMsPerSecond approaches 1000; the sink is busy, never
  // backpressured.
  json bp;
  const bool high = test::waitUntil(
      [&] {
        bp = rest.get("/jobs/" + client.getJobId() + "/vertices/" + up + "/backpressure");
        return bp.is_object() && bp["backpressure-level"] == "high";
      },
      seconds(30));
  EXPECT_TRUE(high) << bp.dump();
  ASSERT_TRUE(bp["subtasks"].is_array() && bp["subtasks"].size() == 1u) << bp.dump();
  EXPECT_GT(bp["subtasks"][0]["ratio"].get<double>(), 0.5);

  auto upTimes = sums(rest, client.getJobId(), up, "backPressuredTimeMsPerSecond");
  EXPECT_GT(upTimes["backPressuredTimeMsPerSecond"], 500);
  json sinkBp = rest.get("/jobs/" + client.getJobId() + "/vertices/" + sink + "/backpressure");
  EXPECT_EQ(sinkBp["backpressure-level"], "ok") << sinkBp.dump();
  auto sinkTimes = sums(rest, client.getJobId(), sink,
                        "backPressuredTimeMsPerSecond,busyTimeMsPerSecond,idleTimeMsPerSecond");
  EXPECT_LT(sinkTimes["backPressuredTimeMsPerSecond"], 100);
  EXPECT_GT(sinkTimes["busyTimeMsPerSecond"], 500) << "the sink sleeps inside write()";

  // Checkpoint counters against the checkpoint history: both count the same
  // completed checkpoints (barriers pass the slow sink: it reads on).
  json cps;
  ASSERT_TRUE(test::waitUntil(
      [&] {
        cps = rest.get("/jobs/" + client.getJobId() + "/checkpoints");
        return cps.is_object() && cps["counts"]["completed"].get<int64_t>() >= 2;
      },
      seconds(60)))
      << cps.dump();
  client.cancel();
  EXPECT_THROW(client.getJobExecutionResult(), JobExecutionException);
  cps = rest.get("/jobs/" + client.getJobId() + "/checkpoints");
  json metrics = rest.get("/jobs/" + client.getJobId() +
                          "/metrics?get=numberOfCompletedCheckpoints,numberOfFailedCheckpoints");
  std::map<std::string, std::string> values;
  for (const auto& m : metrics) values[m["id"]] = m["value"];
  EXPECT_EQ(values["numberOfCompletedCheckpoints"],
            std::to_string(cps["counts"]["completed"].get<int64_t>()));
  EXPECT_EQ(values["numberOfFailedCheckpoints"],
            std::to_string(cps["counts"]["failed"].get<int64_t>()));
  int64_t completedInHistory = 0;
  for (const auto& h : cps["history"]) completedInHistory += h["status"] == "COMPLETED" ? 1 : 0;
  EXPECT_GE(completedInHistory, 2);
  EXPECT_EQ(client.getCheckpointStats().completed, cps["counts"]["completed"].get<int64_t>());
}

TEST(EmbeddedMetricsTest, WatermarksReportedAreTheOnesTheOperatorsSaw) {
  auto gate = std::make_shared<test::SourceGate>();
  StreamExecutionEnvironment env(restConfig());
  env.setParallelism(1);
  env.fromSource(test::GatedGeneratorSource(
                     gate, [](int64_t i) { return i; }, 1'000),
                 WatermarkStrategy<int64_t>::forMonotonousTimestamps().withTimestampAssigner(
                     [](int64_t x, int64_t) { return x * 10; }),
                 "Gated")
      .map([](int64_t x) { return x; })
      .name("After")
      .disableChaining()
      .sinkTo(DiscardingSink<int64_t>(), "Sink");
  JobClient client = env.executeAsync("watermarks");
  gate->open(500);
  // Records 0..499 with timestamps 0..4990: a monotonous watermark is the
  // highest timestamp minus one.
  const std::string expected = std::to_string(499 * 10 - 1);
  Rest rest(client.getWebInterfaceURL());
  json job = rest.get("/jobs/" + client.getJobId());
  const std::string after = vertexId(job, "After");
  json wm;
  EXPECT_TRUE(test::waitUntil(
      [&] {
        wm = rest.get("/jobs/" + client.getJobId() + "/vertices/" + after + "/watermarks");
        return wm.is_array() && wm.size() == 1u && wm[0]["value"] == expected;
      },
      seconds(30)))
      << wm.dump();
  EXPECT_EQ(wm[0]["id"], "0.currentInputWatermark");
  gate->openFully();
  client.getJobExecutionResult();
  // At the end of input every operator saw the maximum watermark.
  wm = rest.get("/jobs/" + client.getJobId() + "/vertices/" + after + "/watermarks");
  ASSERT_TRUE(wm.is_array() && !wm.empty()) << wm.dump();
  EXPECT_EQ(wm[0]["value"], std::to_string(kMaxTimestamp));
}

TEST(EmbeddedMetricsTest, UserMetricsAreReportedWithTheirGroups) {
  class Counting final : public RichMapFunction<int64_t, int64_t> {
   public:
    void open() override {
      MetricGroup& g = getRuntimeContext().getMetricGroup().addGroup("mine");
      seen_ = &g.counter("seen");
      g.gauge("answer", [] { return 42.0; });
      sizes_ = &g.histogram("sizes");
    }
    int64_t map(const int64_t& x) override {
      seen_->inc();
      sizes_->update(x % 100);
      return x;
    }

   private:
    Counter* seen_ = nullptr;
    Histogram* sizes_ = nullptr;
  };
  StreamExecutionEnvironment env(restConfig());
  env.setParallelism(2);
  env.fromGenerator([](int64_t i) { return i; }, 1'000)
      .map(Counting())
      .name("Counting")
      .sinkTo(DiscardingSink<int64_t>(), "Sink");
  JobClient client = env.executeAsync("user metrics");
  client.getJobExecutionResult();
  Rest rest(client.getWebInterfaceURL());
  json job = rest.get("/jobs/" + client.getJobId());
  const std::string v = vertexId(job, "Counting");
  auto s = sums(rest, client.getJobId(), v, "Counting.mine.seen,Counting.mine.answer");
  EXPECT_EQ(s["Counting.mine.seen"], 1000);
  EXPECT_EQ(s["Counting.mine.answer"], 84) << "the gauge of both subtasks";
}

TEST(EmbeddedMetricsTest, BadRequestsGetFlinkErrorsAndTheServerGoesOn) {
  StreamExecutionEnvironment env(restConfig());
  env.fromGenerator([](int64_t i) { return i; }, 10).sinkTo(DiscardingSink<int64_t>(), "Sink");
  JobClient client = env.executeAsync("errors");
  client.getJobExecutionResult();
  Rest rest(client.getWebInterfaceURL());
  json notFound = rest.get("/jobs/0123456789abcdef0123456789abcdef", 404);
  ASSERT_TRUE(notFound.contains("errors")) << notFound.dump();
  json bad = rest.get("/jobs/not-a-job-id", 400);
  ASSERT_TRUE(bad.contains("errors")) << bad.dump();
  auto r = rest.client.Patch("/jobs/" + client.getJobId() + "?mode=cancel");
  ASSERT_TRUE(r);
  EXPECT_GE(r->status, 400) << "a finished job cannot be cancelled: " << r->body;
  json overview = rest.get("/jobs/overview");
  bool listed = false;
  for (const auto& j : overview["jobs"]) listed |= j["jid"] == client.getJobId();
  EXPECT_TRUE(listed) << overview.dump();
}

}  // namespace
}  // namespace embedded_metrics_test
}  // namespace sluice
