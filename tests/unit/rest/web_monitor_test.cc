// The REST endpoint's read-only paths against a FakeDispatcher with known
// data: every response compared field by field with Flink's shapes
// (flink-runtime rest/messages, 1.17-1.19) and with values computed here from
// the fake's data; routing and error answers; static files.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/core/build_fingerprint.h>

#include "rest/rest_json.h"
#include "rest/web_assets.h"
#include "rest_client.h"

namespace sluice {
namespace web_monitor_test {
namespace {

using fake_dispatcher::kJobA;
using fake_dispatcher::kJobB;
using fake_dispatcher::kTm;
using fake_dispatcher::kV1;
using fake_dispatcher::kV2;
using fake_dispatcher::kVB;
using rest_client::expectKeys;
using rest_client::Json;
using rest_client::Reply;
using rest_client::Server;

void expectIoMetrics(const Json& m, int64_t readBytes, int64_t writeBytes, int64_t readRecords,
                     int64_t writeRecords, bool complete) {
  expectKeys(m,
             {"read-bytes", "read-bytes-complete", "write-bytes", "write-bytes-complete",
              "read-records", "read-records-complete", "write-records", "write-records-complete",
              "accumulated-backpressured-time", "accumulated-idle-time", "accumulated-busy-time"});
  EXPECT_EQ(m["read-bytes"], readBytes);
  EXPECT_EQ(m["write-bytes"], writeBytes);
  EXPECT_EQ(m["read-records"], readRecords);
  EXPECT_EQ(m["write-records"], writeRecords);
  for (const char* k : {"read-bytes-complete", "write-bytes-complete", "read-records-complete",
                        "write-records-complete"}) {
    EXPECT_EQ(m[k], complete) << k;
  }
}

// Sum of a task metric over the fake's subtasks of a vertex.
int64_t sumOf(const rest::MetricStore& s, const std::string& job, const std::string& vertex,
              const std::string& id, int onlySubtask = -1) {
  int64_t sum = 0;
  for (const auto& [index, values] : s.tasks.at(job).at(vertex)) {
    if (onlySubtask >= 0 && index != onlySubtask) continue;
    auto it = values.find(id);
    if (it != values.end()) sum += std::stoll(it->second);
  }
  return sum;
}

TEST(WebMonitorTest, ConfigHasFlinksDashboardConfiguration) {
  rest::WebMonitorOptions o;
  o.refreshIntervalMs = 1234;
  o.cancelEnabled = false;
  o.mode = "cluster";
  Server server(o);
  const Reply r = server.get("/config");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Content-Type"), "application/json; charset=UTF-8");
  EXPECT_NE(r.header("Cache-Control").find("no-cache"), std::string::npos);
  expectKeys(r.body, {"refresh-interval", "timezone-name", "timezone-offset", "flink-version",
                      "flink-revision", "features", "mode", "token-required"});
  EXPECT_EQ(r.body["refresh-interval"], 1234);
  EXPECT_TRUE(r.body["timezone-name"].is_string());
  EXPECT_TRUE(r.body["timezone-offset"].is_number_integer());
  EXPECT_EQ(r.body["flink-version"], SLUICE_VERSION_STRING);
  EXPECT_TRUE(r.body["flink-revision"].is_string());
  expectKeys(r.body["features"], {"web-submit", "web-cancel", "web-rescale", "web-history"});
  // The fake is embedded-like (no jars): no web submission.
  EXPECT_EQ(r.body["features"]["web-submit"], false);
  EXPECT_EQ(r.body["features"]["web-cancel"], false);
  EXPECT_EQ(r.body["features"]["web-history"], false);
  EXPECT_EQ(r.body["mode"], "cluster");
  EXPECT_EQ(r.body["token-required"], false);

  Server jars;
  jars.dispatcher.setSupportsJars(true);
  EXPECT_EQ(jars.get("/config").body["features"]["web-submit"], true);
  EXPECT_EQ(jars.get("/config").body["features"]["web-cancel"], true);
}

TEST(WebMonitorTest, OverviewCountsJobsByState) {
  Server server;
  const Reply r = server.get("/overview");
  ASSERT_EQ(r.status, 200);
  expectKeys(r.body,
             {"taskmanagers", "slots-total", "slots-available", "jobs-running", "jobs-finished",
              "jobs-cancelled", "jobs-failed", "flink-version", "flink-commit"});
  EXPECT_EQ(r.body["taskmanagers"], 1);
  EXPECT_EQ(r.body["slots-total"], 4);
  EXPECT_EQ(r.body["slots-available"], 1);
  EXPECT_EQ(r.body["jobs-running"], 1);
  EXPECT_EQ(r.body["jobs-finished"], 1);
  EXPECT_EQ(r.body["jobs-cancelled"], 1);
  EXPECT_EQ(r.body["jobs-failed"], 1);
  EXPECT_EQ(r.body["flink-version"], SLUICE_VERSION_STRING);
}

TEST(WebMonitorTest, JobsListsIdsAndStatus) {
  Server server;
  const Reply r = server.get("/jobs");
  ASSERT_EQ(r.status, 200);
  expectKeys(r.body, {"jobs"});
  const auto& jobs = server.dispatcher.allJobs();
  ASSERT_EQ(r.body["jobs"].size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    expectKeys(r.body["jobs"][i], {"id", "status"});
    EXPECT_EQ(r.body["jobs"][i]["id"], jobs[i].id);
    EXPECT_EQ(r.body["jobs"][i]["status"], jobs[i].state);
  }
}

TEST(WebMonitorTest, JobsOverviewCountsSubtasksPerState) {
  Server server;
  const Reply r = server.get("/jobs/overview");
  ASSERT_EQ(r.status, 200);
  ASSERT_EQ(r.body["jobs"].size(), 4u);
  const Json& a = r.body["jobs"][0];
  expectKeys(a, {"jid", "name", "start-time", "end-time", "duration", "state", "last-modification",
                 "tasks"});
  EXPECT_EQ(a["jid"], kJobA);
  EXPECT_EQ(a["name"], "word count");
  EXPECT_EQ(a["state"], "RUNNING");
  EXPECT_EQ(a["start-time"], 1000);
  EXPECT_EQ(a["end-time"], -1);
  EXPECT_EQ(a["duration"], 5000);
  EXPECT_EQ(a["last-modification"], 1100);  // the newest timestamp
  expectKeys(a["tasks"], {"total", "created", "scheduled", "deploying", "running", "finished",
                          "canceling", "canceled", "failed", "reconciling", "initializing"});
  // 2 + 3 subtasks, one of them finished.
  EXPECT_EQ(a["tasks"]["total"], 5);
  EXPECT_EQ(a["tasks"]["running"], 4);
  EXPECT_EQ(a["tasks"]["finished"], 1);
  EXPECT_EQ(a["tasks"]["created"], 0);
  const Json& b = r.body["jobs"][1];
  EXPECT_EQ(b["state"], "FINISHED");
  EXPECT_EQ(b["end-time"], 900);
  EXPECT_EQ(b["last-modification"], 900);
  EXPECT_EQ(b["tasks"]["total"], 1);
  EXPECT_EQ(b["tasks"]["finished"], 1);
}

TEST(WebMonitorTest, JobDetailsHaveFlinksShapeAndSummedVertexMetrics) {
  Server server;
  const Reply r = server.get("/jobs/" + kJobA);
  ASSERT_EQ(r.status, 200) << r.raw;
  const Json& j = r.body;
  expectKeys(
      j, {"jid", "name", "isStoppable", "state", "job-type", "start-time", "end-time", "duration",
          "maxParallelism", "now", "timestamps", "vertices", "status-counts", "plan"});
  EXPECT_EQ(j["jid"], kJobA);
  EXPECT_EQ(j["name"], "word count");
  EXPECT_EQ(j["isStoppable"], true);
  EXPECT_EQ(j["state"], "RUNNING");
  EXPECT_EQ(j["job-type"], "STREAMING");
  EXPECT_EQ(j["start-time"], 1000);
  EXPECT_EQ(j["end-time"], -1);
  EXPECT_EQ(j["duration"], 5000);
  EXPECT_EQ(j["maxParallelism"], 128);
  EXPECT_GT(j["now"].get<int64_t>(), 1600000000000);
  expectKeys(j["timestamps"],
             {"INITIALIZING", "CREATED", "RUNNING", "FAILING", "FAILED", "CANCELLING", "CANCELED",
              "FINISHED", "RESTARTING", "SUSPENDED", "RECONCILING"});
  EXPECT_EQ(j["timestamps"]["RUNNING"], 1100);
  EXPECT_EQ(j["timestamps"]["CREATED"], 1000);
  EXPECT_EQ(j["timestamps"]["FINISHED"], 0);
  const std::initializer_list<const char*> states = {
      "CREATED",   "SCHEDULED", "DEPLOYING", "RUNNING",     "FINISHED",
      "CANCELING", "CANCELED",  "FAILED",    "RECONCILING", "INITIALIZING"};
  expectKeys(j["status-counts"], states);
  EXPECT_EQ(j["status-counts"]["RUNNING"], 2);  // both vertices
  EXPECT_EQ(j["status-counts"]["FINISHED"], 0);

  ASSERT_EQ(j["vertices"].size(), 2u);
  const rest::MetricStore& m = server.dispatcher.store();
  for (size_t i = 0; i < 2; ++i) {
    const Json& v = j["vertices"][i];
    const rest::VertexInfo& info = server.dispatcher.jobA().vertices[i];
    expectKeys(v, {"id", "name", "maxParallelism", "parallelism", "status", "start-time",
                   "end-time", "duration", "tasks", "metrics"});
    EXPECT_EQ(v["id"], info.id);
    EXPECT_EQ(v["name"], info.name);
    EXPECT_EQ(v["parallelism"], info.parallelism);
    EXPECT_EQ(v["maxParallelism"], info.maxParallelism);
    EXPECT_EQ(v["status"], "RUNNING");
    EXPECT_EQ(v["start-time"], info.startTime);
    EXPECT_EQ(v["end-time"], -1);
    EXPECT_GE(v["duration"].get<int64_t>(), j["now"].get<int64_t>() - info.startTime);
    expectKeys(v["tasks"], states);
    expectIoMetrics(v["metrics"], sumOf(m, kJobA, info.id, "numBytesIn"),
                    sumOf(m, kJobA, info.id, "numBytesOut"),
                    sumOf(m, kJobA, info.id, "numRecordsIn"),
                    sumOf(m, kJobA, info.id, "numRecordsOut"), false);
  }
  EXPECT_EQ(j["vertices"][0]["metrics"]["read-records"], 40);  // 10 + 30
  EXPECT_EQ(j["vertices"][1]["metrics"]["read-records"], 40);  // 7 + 13 + 20
  EXPECT_EQ(j["vertices"][1]["metrics"]["write-records"], 3);  // subtask 2 has none
  EXPECT_EQ(j["vertices"][0]["tasks"]["RUNNING"], 2);
  EXPECT_EQ(j["vertices"][1]["tasks"]["RUNNING"], 2);
  EXPECT_EQ(j["vertices"][1]["tasks"]["FINISHED"], 1);
  EXPECT_EQ(j["plan"], server.get("/jobs/" + kJobA + "/plan").body["plan"]);

  // An ended vertex's metrics are complete; its duration is fixed.
  const Reply b = server.get("/jobs/" + kJobB);
  ASSERT_EQ(b.status, 200);
  const Json& vb = b.body["vertices"][0];
  EXPECT_EQ(vb["status"], "FINISHED");
  EXPECT_EQ(vb["end-time"], 900);
  EXPECT_EQ(vb["duration"], 750);
  expectIoMetrics(vb["metrics"], 0, 0, 0, 0, true);
  EXPECT_EQ(b.body["timestamps"]["FINISHED"], 900);
  EXPECT_EQ(b.body["status-counts"]["FINISHED"], 1);
}

TEST(WebMonitorTest, PlanListsVerticesWithTheirInputs) {
  Server server;
  const Reply r = server.get("/jobs/" + kJobA + "/plan");
  ASSERT_EQ(r.status, 200);
  expectKeys(r.body, {"plan"});
  const Json& p = r.body["plan"];
  expectKeys(p, {"jid", "name", "type", "nodes"});
  EXPECT_EQ(p["jid"], kJobA);
  EXPECT_EQ(p["name"], "word count");
  EXPECT_EQ(p["type"], "STREAMING");
  ASSERT_EQ(p["nodes"].size(), 2u);
  expectKeys(p["nodes"][0], {"id", "parallelism", "operator", "operator_strategy", "description",
                             "optimizer_properties"});  // a source has no "inputs"
  EXPECT_EQ(p["nodes"][0]["id"], kV1);
  EXPECT_EQ(p["nodes"][0]["parallelism"], 2);
  EXPECT_EQ(p["nodes"][0]["description"], "Source: Words -> Map");
  expectKeys(p["nodes"][1], {"id", "parallelism", "operator", "operator_strategy", "description",
                             "inputs", "optimizer_properties"});
  ASSERT_EQ(p["nodes"][1]["inputs"].size(), 1u);
  const Json& in = p["nodes"][1]["inputs"][0];
  expectKeys(in, {"num", "id", "ship_strategy", "exchange"});
  EXPECT_EQ(in["num"], 0);
  EXPECT_EQ(in["id"], kV1);
  EXPECT_EQ(in["ship_strategy"], "HASH");
  EXPECT_EQ(in["exchange"], "pipelined_bounded");
}

TEST(WebMonitorTest, VertexDetailsListSubtasks) {
  Server server;
  const Reply r = server.get("/jobs/" + kJobA + "/vertices/" + kV2);
  ASSERT_EQ(r.status, 200) << r.raw;
  expectKeys(r.body, {"id", "name", "parallelism", "maxParallelism", "now", "subtasks"});
  EXPECT_EQ(r.body["id"], kV2);
  EXPECT_EQ(r.body["name"], "Window -> Sink: Print");
  EXPECT_EQ(r.body["parallelism"], 3);
  EXPECT_EQ(r.body["maxParallelism"], 64);
  ASSERT_EQ(r.body["subtasks"].size(), 3u);
  const rest::MetricStore& m = server.dispatcher.store();
  for (int i = 0; i < 3; ++i) {
    const Json& s = r.body["subtasks"][i];
    expectKeys(s, {"subtask", "status", "attempt", "endpoint", "host", "start-time", "end-time",
                   "duration", "metrics", "taskmanager-id"});
    EXPECT_EQ(s["subtask"], i);
    EXPECT_EQ(s["endpoint"], "10.0.0.1:6121");
    EXPECT_EQ(s["host"], "10.0.0.1");
    EXPECT_EQ(s["taskmanager-id"], kTm);
    EXPECT_EQ(s["attempt"], 0);
    EXPECT_EQ(s["start-time"], 1150 + 10 * i);
    expectIoMetrics(s["metrics"], sumOf(m, kJobA, kV2, "numBytesIn", i),
                    sumOf(m, kJobA, kV2, "numBytesOut", i), sumOf(m, kJobA, kV2, "numRecordsIn", i),
                    sumOf(m, kJobA, kV2, "numRecordsOut", i), i == 2);
  }
  EXPECT_EQ(r.body["subtasks"][0]["status"], "RUNNING");
  EXPECT_EQ(r.body["subtasks"][0]["end-time"], -1);
  EXPECT_EQ(r.body["subtasks"][2]["status"], "FINISHED");
  EXPECT_EQ(r.body["subtasks"][2]["end-time"], 3000);
  EXPECT_EQ(r.body["subtasks"][2]["duration"], 3000 - 1170);

  const Reply one = server.get("/jobs/" + kJobA + "/vertices/" + kV2 + "/subtasks/2");
  ASSERT_EQ(one.status, 200);
  EXPECT_EQ(one.body, r.body["subtasks"][2]);
  EXPECT_EQ(server.get("/jobs/" + kJobA + "/vertices/" + kV2 + "/subtasks/3").status, 404);
  const Reply bad = server.get("/jobs/" + kJobA + "/vertices/" + kV2 + "/subtasks/x");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body["errors"][0].get<std::string>().find("subtaskindex"), std::string::npos);
}

TEST(WebMonitorTest, MetricQueriesListIdsOrReturnValues) {
  Server server;
  const rest::MetricStore& m = server.dispatcher.store();
  const Reply list = server.get("/jobmanager/metrics");
  ASSERT_EQ(list.status, 200);
  ASSERT_EQ(list.body.size(), m.jobManager.size());
  for (const Json& e : list.body) {
    expectKeys(e, {"id"});
    EXPECT_TRUE(m.jobManager.count(e["id"].get<std::string>()));
  }
  const Reply values = server.get("/jobmanager/metrics?get=taskSlotsTotal,nope,numRunningJobs");
  ASSERT_EQ(values.status, 200);
  // In the requested order; unknown ids left out, as in Flink.
  EXPECT_EQ(values.body, Json::parse(R"([{"id":"taskSlotsTotal","value":"4"},
                                        {"id":"numRunningJobs","value":"1"}])"));

  EXPECT_EQ(server.get("/jobs/" + kJobA + "/metrics?get=uptime").body,
            Json::parse(R"([{"id":"uptime","value":"5000"}])"));
  EXPECT_EQ(server.get("/jobs/" + kJobB + "/metrics").body, Json::array());
  EXPECT_EQ(server.get("/taskmanagers/" + kTm + "/metrics?get=Status.Process.Memory.RSS").body,
            Json::parse(R"([{"id":"Status.Process.Memory.RSS","value":"104857600"}])"));
  EXPECT_EQ(server.get("/taskmanagers/nope/metrics").status, 404);

  // Vertex metrics: "<subtask>.<id>" over every subtask.
  const Reply vertex = server.get("/jobs/" + kJobA + "/vertices/" + kV1 + "/metrics");
  ASSERT_EQ(vertex.status, 200);
  size_t expected = 0;
  for (const auto& [i, vs] : m.tasks.at(kJobA).at(kV1)) expected += vs.size();
  EXPECT_EQ(vertex.body.size(), expected);
  EXPECT_EQ(server
                .get("/jobs/" + kJobA + "/vertices/" + kV1 +
                     "/metrics?get=1.numRecordsIn,0.Map.numRecordsIn")
                .body,
            Json::parse(R"([{"id":"1.numRecordsIn","value":"30"},
                            {"id":"0.Map.numRecordsIn","value":"10"}])"));
  // One subtask's metrics: ids without the subtask prefix.
  EXPECT_EQ(
      server.get("/jobs/" + kJobA + "/vertices/" + kV1 + "/subtasks/1/metrics?get=numRecordsOut")
          .body,
      Json::parse(R"([{"id":"numRecordsOut","value":"40"}])"));
  EXPECT_EQ(server.get("/jobs/" + kJobA + "/vertices/" + kV1 + "/subtasks/1/metrics").body.size(),
            m.tasks.at(kJobA).at(kV1).at(1).size());
}

// Reference aggregation: min/max/avg/sum of the numeric values of `id` over
// the subtasks in `subtasks` (all when empty).
struct Agg {
  double min = 0, max = 0, avg = 0, sum = 0;
  int n = 0;
};
Agg reference(const rest::MetricStore& m, const std::string& vertex, const std::string& id,
              const std::vector<int>& subtasks) {
  Agg a;
  for (const auto& [index, values] : m.tasks.at(kJobA).at(vertex)) {
    if (!subtasks.empty() && std::find(subtasks.begin(), subtasks.end(), index) == subtasks.end()) {
      continue;
    }
    auto it = values.find(id);
    if (it == values.end()) continue;
    char* end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    if (*end != '\0') continue;
    a.min = a.n == 0 ? v : std::min(a.min, v);
    a.max = a.n == 0 ? v : std::max(a.max, v);
    a.sum += v;
    ++a.n;
  }
  a.avg = a.n ? a.sum / a.n : 0;
  return a;
}

TEST(WebMonitorTest, SubtaskMetricsAggregateOverSubtasks) {
  Server server;
  const rest::MetricStore& m = server.dispatcher.store();
  const std::string base = "/jobs/" + kJobA + "/vertices/" + kV2 + "/subtasks/metrics";
  const Reply ids = server.get(base);
  ASSERT_EQ(ids.status, 200);
  std::set<std::string> expectedIds;
  for (const auto& [i, vs] : m.tasks.at(kJobA).at(kV2)) {
    for (const auto& [id, v] : vs) expectedIds.insert(id);
  }
  std::set<std::string> got;
  for (const Json& e : ids.body) {
    expectKeys(e, {"id"});
    got.insert(e["id"].get<std::string>());
  }
  EXPECT_EQ(got, expectedIds);

  struct Case {
    std::string query;
    std::vector<int> subtasks;
    std::vector<std::string> aggs;
  };
  const std::vector<Case> cases = {
      {"", {}, {"min", "max", "avg", "sum"}},
      {"&agg=min,sum", {}, {"min", "sum"}},
      {"&agg=AVG&subtasks=0,2", {0, 2}, {"avg"}},
      {"&subtasks=1-2", {1, 2}, {"min", "max", "avg", "sum"}},
  };
  const std::vector<std::string> metrics = {"numRecordsIn", "busyTimeMsPerSecond", "numRecordsOut"};
  for (const Case& c : cases) {
    // "status" is not numeric and "missing" does not exist: both left out.
    const Reply r = server.get(
        base + "?get=numRecordsIn,status,busyTimeMsPerSecond,missing,numRecordsOut" + c.query);
    ASSERT_EQ(r.status, 200) << c.query << " " << r.raw;
    std::vector<std::string> expectedMetrics;
    for (const std::string& id : metrics) {
      if (reference(m, kV2, id, c.subtasks).n > 0) expectedMetrics.push_back(id);
    }
    ASSERT_EQ(r.body.size(), expectedMetrics.size()) << c.query << " " << r.raw;
    for (size_t i = 0; i < expectedMetrics.size(); ++i) {
      const Json& e = r.body[i];
      const Agg a = reference(m, kV2, expectedMetrics[i], c.subtasks);
      EXPECT_EQ(e["id"], expectedMetrics[i]);
      EXPECT_EQ(e.size(), 1 + c.aggs.size()) << e.dump();
      for (const std::string& agg : c.aggs) {
        const double want = agg == "min"   ? a.min
                            : agg == "max" ? a.max
                            : agg == "avg" ? a.avg
                                           : a.sum;
        ASSERT_TRUE(e.contains(agg)) << e.dump();
        EXPECT_DOUBLE_EQ(e[agg].get<double>(), want) << c.query << " " << agg;
      }
    }
  }
  // numRecordsOut exists only on subtasks 0 and 1.
  EXPECT_EQ(server.get(base + "?get=numRecordsOut&subtasks=2").body, Json::array());

  for (const char* bad : {"?get=numRecordsIn&agg=median", "?get=numRecordsIn&subtasks=a",
                          "?get=numRecordsIn&subtasks=3-1", "?subtasks=-1"}) {
    const Reply r = server.get(base + bad);
    EXPECT_EQ(r.status, 400) << bad;
    ASSERT_TRUE(r.body.contains("errors")) << bad;
  }
}

TEST(WebMonitorTest, BackpressureLevelsFollowFlinksThresholds) {
  Server server;
  EXPECT_STREQ(rest::backpressureLevel(0.05), "ok");
  EXPECT_STREQ(rest::backpressureLevel(0.10), "ok");
  EXPECT_STREQ(rest::backpressureLevel(0.3), "low");
  EXPECT_STREQ(rest::backpressureLevel(0.5), "low");
  EXPECT_STREQ(rest::backpressureLevel(0.8), "high");

  const int64_t before = rest::nowMs();
  const Reply v1 = server.get("/jobs/" + kJobA + "/vertices/" + kV1 + "/backpressure");
  ASSERT_EQ(v1.status, 200);
  expectKeys(v1.body, {"status", "backpressure-level", "end-timestamp", "subtasks"});
  EXPECT_EQ(v1.body["status"], "ok");
  EXPECT_GE(v1.body["end-timestamp"].get<int64_t>(), before);
  ASSERT_EQ(v1.body["subtasks"].size(), 2u);
  const Json& s0 = v1.body["subtasks"][0];
  expectKeys(
      s0, {"subtask", "attempt-number", "backpressure-level", "ratio", "idleRatio", "busyRatio"});
  EXPECT_EQ(s0["subtask"], 0);
  EXPECT_EQ(s0["attempt-number"], 0);
  EXPECT_DOUBLE_EQ(s0["ratio"].get<double>(), 0.05);
  EXPECT_DOUBLE_EQ(s0["idleRatio"].get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(s0["busyRatio"].get<double>(), 0.85);
  EXPECT_EQ(s0["backpressure-level"], "ok");
  const Json& s1 = v1.body["subtasks"][1];
  EXPECT_EQ(s1["attempt-number"], 1);
  EXPECT_DOUBLE_EQ(s1["ratio"].get<double>(), 0.3);
  EXPECT_EQ(s1["backpressure-level"], "low");
  EXPECT_EQ(v1.body["backpressure-level"], "low");  // the worst subtask's

  const Reply v2 = server.get("/jobs/" + kJobA + "/vertices/" + kV2 + "/backpressure");
  ASSERT_EQ(v2.status, 200);
  EXPECT_DOUBLE_EQ(v2.body["subtasks"][1]["ratio"].get<double>(), 0.8);
  EXPECT_EQ(v2.body["subtasks"][1]["backpressure-level"], "high");
  EXPECT_EQ(v2.body["backpressure-level"], "high");

  // No metrics for the vertex: Flink's answer without samples.
  const Reply none = server.get("/jobs/" + kJobB + "/vertices/" + kVB + "/backpressure");
  ASSERT_EQ(none.status, 200);
  EXPECT_EQ(none.body, Json::parse(R"({"status":"deprecated"})"));
}

TEST(WebMonitorTest, WatermarksArePerSubtask) {
  Server server;
  EXPECT_EQ(server.get("/jobs/" + kJobA + "/vertices/" + kV1 + "/watermarks").body,
            Json::parse(R"([{"id":"0.currentInputWatermark","value":"1500"},
                            {"id":"1.currentInputWatermark","value":"1600"}])"));
  EXPECT_EQ(server.get("/jobs/" + kJobA + "/vertices/" + kV2 + "/watermarks").body,
            Json::parse(R"([{"id":"2.currentInputWatermark","value":"2000"}])"));
  EXPECT_EQ(server.get("/jobs/" + kJobB + "/vertices/" + kVB + "/watermarks").body, Json::array());
}

void expectCheckpointEntry(const Json& e, const rest::CheckpointInfo& c) {
  std::vector<const char*> keys = {"className",
                                   "@class",
                                   "id",
                                   "status",
                                   "is_savepoint",
                                   "savepointFormat",
                                   "trigger_timestamp",
                                   "latest_ack_timestamp",
                                   "checkpointed_size",
                                   "state_size",
                                   "end_to_end_duration",
                                   "alignment_buffered",
                                   "processed_data",
                                   "persisted_data",
                                   "num_subtasks",
                                   "num_acknowledged_subtasks",
                                   "checkpoint_type",
                                   "tasks",
                                   "alignment_duration"};
  std::string cls = "in_progress";
  if (c.status == "COMPLETED") {
    cls = "completed";
    keys.push_back("external_path");
    keys.push_back("discarded");
  } else if (c.status == "FAILED") {
    cls = "failed";
    keys.push_back("failure_timestamp");
    keys.push_back("failure_message");
  }
  std::set<std::string> expected(keys.begin(), keys.end()), actual;
  for (auto it = e.begin(); it != e.end(); ++it) actual.insert(it.key());
  EXPECT_EQ(actual, expected) << e.dump();
  EXPECT_EQ(e["className"], cls);
  EXPECT_EQ(e["@class"], cls);
  EXPECT_EQ(e["id"], c.id);
  EXPECT_EQ(e["status"], c.status);
  EXPECT_EQ(e["is_savepoint"], c.isSavepoint);
  EXPECT_EQ(e["savepointFormat"], c.isSavepoint ? Json("CANONICAL") : Json(nullptr));
  EXPECT_EQ(e["trigger_timestamp"], c.triggerTimestamp);
  EXPECT_EQ(e["latest_ack_timestamp"], c.latestAckTimestamp);
  EXPECT_EQ(e["checkpointed_size"], c.checkpointedSize);
  EXPECT_EQ(e["state_size"], c.stateSize);
  EXPECT_EQ(e["end_to_end_duration"], c.endToEndDurationMs);
  EXPECT_EQ(e["alignment_duration"], c.alignmentDurationMs);
  EXPECT_EQ(e["num_subtasks"], c.numSubtasks);
  EXPECT_EQ(e["num_acknowledged_subtasks"], c.numAcknowledgedSubtasks);
  EXPECT_EQ(e["checkpoint_type"], c.isSavepoint ? "SAVEPOINT" : "CHECKPOINT");
  if (c.status == "COMPLETED") {
    EXPECT_EQ(e["external_path"], c.externalPath);
    EXPECT_EQ(e["discarded"], false);
  }
  if (c.status == "FAILED") {
    EXPECT_EQ(e["failure_timestamp"], c.failureTimestamp);
    EXPECT_EQ(e["failure_message"], c.failureMessage);
  }
}

TEST(WebMonitorTest, CheckpointStatisticsHaveCountsSummaryLatestAndHistory) {
  Server server;
  const Reply r = server.get("/jobs/" + kJobA + "/checkpoints");
  ASSERT_EQ(r.status, 200) << r.raw;
  expectKeys(r.body, {"counts", "summary", "latest", "history"});
  const rest::CheckpointingInfo& c = server.dispatcher.jobA().checkpoints;
  expectKeys(r.body["counts"], {"restored", "total", "in_progress", "completed", "failed"});
  EXPECT_EQ(r.body["counts"]["restored"], 1);
  EXPECT_EQ(r.body["counts"]["total"], 5);
  EXPECT_EQ(r.body["counts"]["in_progress"], 1);
  EXPECT_EQ(r.body["counts"]["completed"], 3);
  EXPECT_EQ(r.body["counts"]["failed"], 1);

  ASSERT_EQ(r.body["history"].size(), c.history.size());
  for (size_t i = 0; i < c.history.size(); ++i) {
    SCOPED_TRACE(i);
    expectCheckpointEntry(r.body["history"][i], c.history[i]);
    EXPECT_EQ(r.body["history"][i]["tasks"], Json::object());
  }

  const Json& latest = r.body["latest"];
  expectKeys(latest, {"completed", "savepoint", "failed", "restored"});
  EXPECT_EQ(latest["completed"]["id"], 2);  // the newest completed checkpoint
  EXPECT_EQ(latest["savepoint"]["id"], 4);
  EXPECT_EQ(latest["failed"]["id"], 3);
  expectKeys(latest["restored"], {"id", "restore_timestamp", "is_savepoint", "external_path"});
  EXPECT_EQ(latest["restored"]["id"], 7);
  EXPECT_EQ(latest["restored"]["restore_timestamp"], 900);
  EXPECT_EQ(latest["restored"]["is_savepoint"], true);
  EXPECT_EQ(latest["restored"]["external_path"], "file:/savepoints/sp-7");

  // Summary over the completed ones (ids 4, 2, 1): sizes 4000, 2000, 1000.
  const Json& s = r.body["summary"];
  expectKeys(s, {"checkpointed_size", "state_size", "end_to_end_duration", "alignment_buffered",
                 "processed_data", "persisted_data", "alignment_duration"});
  for (auto it = s.begin(); it != s.end(); ++it) {
    expectKeys(it.value(), {"min", "max", "avg", "p50", "p90", "p95", "p99", "p999"}, it.key());
  }
  EXPECT_EQ(s["checkpointed_size"]["min"], 1000);
  EXPECT_EQ(s["checkpointed_size"]["max"], 4000);
  EXPECT_EQ(s["checkpointed_size"]["avg"], 2333);
  // Legacy percentile estimate, position p*(n+1) = 2 for the median of 3.
  EXPECT_DOUBLE_EQ(s["checkpointed_size"]["p50"].get<double>(), 2000);
  EXPECT_DOUBLE_EQ(s["checkpointed_size"]["p90"].get<double>(), 4000);
  EXPECT_EQ(s["state_size"]["max"], 8000);
  EXPECT_EQ(s["end_to_end_duration"]["min"], 100);
  EXPECT_EQ(s["end_to_end_duration"]["avg"], 200);
  EXPECT_EQ(s["alignment_duration"]["max"], 7);
  EXPECT_EQ(s["alignment_buffered"]["max"], 0);

  // A job without checkpointing still answers (no history, zero counts).
  const Reply b = server.get("/jobs/" + kJobB + "/checkpoints");
  ASSERT_EQ(b.status, 200);
  EXPECT_EQ(b.body["history"], Json::array());
  EXPECT_EQ(b.body["latest"]["completed"], nullptr);
  EXPECT_EQ(b.body["summary"]["state_size"]["p99"], 0.0);
}

TEST(WebMonitorTest, PercentileUsesFlinksLegacyEstimate) {
  std::vector<double> v;
  for (int i = 1; i <= 10; ++i) v.push_back(i);
  EXPECT_DOUBLE_EQ(rest::percentile(v, 0.5), 5.5);  // position 5.5
  EXPECT_DOUBLE_EQ(rest::percentile(v, 0.9), 9.9);  // position 9.9
  EXPECT_DOUBLE_EQ(rest::percentile(v, 0.95), 10);  // position 10.45 >= n
  EXPECT_DOUBLE_EQ(rest::percentile(v, 0.05), 1);   // position 0.55 < 1
  EXPECT_DOUBLE_EQ(rest::percentile({}, 0.5), 0);
  EXPECT_DOUBLE_EQ(rest::percentile({7}, 0.99), 7);
}

TEST(WebMonitorTest, CheckpointConfigAndDetails) {
  Server server;
  const Reply cfg = server.get("/jobs/" + kJobA + "/checkpoints/config");
  ASSERT_EQ(cfg.status, 200);
  expectKeys(cfg.body,
             {"mode", "interval", "timeout", "min_pause", "max_concurrent", "externalization",
              "state_backend", "checkpoint_storage", "unaligned_checkpoints",
              "tolerable_failed_checkpoints", "aligned_checkpoint_timeout",
              "checkpoints_after_tasks_finish", "state_changelog_enabled"});
  EXPECT_EQ(cfg.body["mode"], "exactly_once");
  EXPECT_EQ(cfg.body["interval"], 10000);
  EXPECT_EQ(cfg.body["timeout"], 600000);
  EXPECT_EQ(cfg.body["min_pause"], 500);
  EXPECT_EQ(cfg.body["max_concurrent"], 1);
  EXPECT_EQ(cfg.body["externalization"],
            Json::parse(R"({"enabled":true,"delete_on_cancellation":false})"));
  EXPECT_EQ(cfg.body["state_backend"], "EmbeddedRocksDBStateBackend");
  EXPECT_EQ(cfg.body["checkpoint_storage"], "FileSystemCheckpointStorage");
  EXPECT_EQ(cfg.body["unaligned_checkpoints"], false);
  EXPECT_EQ(cfg.body["tolerable_failed_checkpoints"], 3);

  const Reply off = server.get("/jobs/" + kJobB + "/checkpoints/config");
  EXPECT_EQ(off.status, 404);
  EXPECT_NE(off.body["errors"][0].get<std::string>().find("Checkpointing is not enabled"),
            std::string::npos);

  const Reply d = server.get("/jobs/" + kJobA + "/checkpoints/details/2");
  ASSERT_EQ(d.status, 200) << d.raw;
  const rest::CheckpointInfo& c2 = server.dispatcher.jobA().checkpoints.history[3];
  ASSERT_EQ(c2.id, 2);
  ASSERT_EQ(d.body["tasks"].size(), 2u);
  for (const auto& [vertex, t] : c2.tasks) {
    const Json& j = d.body["tasks"][vertex];
    expectKeys(j,
               {"id", "status", "latest_ack_timestamp", "checkpointed_size", "state_size",
                "end_to_end_duration", "alignment_buffered", "processed_data", "persisted_data",
                "num_subtasks", "num_acknowledged_subtasks"},
               vertex);
    EXPECT_EQ(j["id"], 2);
    EXPECT_EQ(j["status"], "COMPLETED");
    EXPECT_EQ(j["latest_ack_timestamp"], t.latestAckTimestamp);
    EXPECT_EQ(j["state_size"], t.stateSize);
    EXPECT_EQ(j["end_to_end_duration"], t.latestAckTimestamp - c2.triggerTimestamp);
    EXPECT_EQ(j["num_subtasks"], t.numSubtasks);
    EXPECT_EQ(j["num_acknowledged_subtasks"], t.numAcknowledged);
  }
  Json withoutTasks = d.body;
  withoutTasks["tasks"] = Json::object();
  expectCheckpointEntry(withoutTasks, c2);

  const Reply unknown = server.get("/jobs/" + kJobA + "/checkpoints/details/99");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body["errors"][0].get<std::string>().find("99"), std::string::npos);
  EXPECT_EQ(server.get("/jobs/" + kJobA + "/checkpoints/details/abc").status, 400);
}

TEST(WebMonitorTest, ExceptionsHaveRootAndHistory) {
  Server server;
  const Reply r = server.get("/jobs/" + kJobA + "/exceptions");
  ASSERT_EQ(r.status, 200);
  expectKeys(r.body,
             {"root-exception", "timestamp", "all-exceptions", "truncated", "exceptionHistory"});
  EXPECT_EQ(r.body["root-exception"], "Map failed: boom");
  EXPECT_EQ(r.body["timestamp"], 4000);
  EXPECT_EQ(r.body["truncated"], false);
  ASSERT_EQ(r.body["all-exceptions"].size(), 2u);  // the task failures
  expectKeys(r.body["all-exceptions"][0],
             {"exception", "task", "location", "endpoint", "timestamp", "taskManagerId"});
  EXPECT_EQ(r.body["all-exceptions"][1]["task"], "Sink: Print (1/3)");
  const Json& h = r.body["exceptionHistory"];
  expectKeys(h, {"entries", "truncated"});
  EXPECT_EQ(h["truncated"], false);
  const auto& expected = server.dispatcher.jobA().exceptions;
  ASSERT_EQ(h["entries"].size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const Json& e = h["entries"][i];
    expectKeys(e, {"exceptionName", "stacktrace", "timestamp", "taskName", "location", "endpoint",
                   "taskManagerId", "failureLabels", "concurrentExceptions"});
    EXPECT_EQ(e["exceptionName"], expected[i].exceptionName);
    EXPECT_EQ(e["stacktrace"], expected[i].stacktrace);
    EXPECT_EQ(e["timestamp"], expected[i].timestamp);
    EXPECT_EQ(e["failureLabels"], Json::object());
    EXPECT_EQ(e["concurrentExceptions"], Json::array());
  }
  EXPECT_EQ(h["entries"][0]["taskName"], "Map (2/2)");
  EXPECT_EQ(h["entries"][0]["endpoint"], "10.0.0.1:6121");
  EXPECT_EQ(h["entries"][0]["taskManagerId"], kTm);
  EXPECT_EQ(h["entries"][1]["taskName"], nullptr);  // a job-level failure
  EXPECT_EQ(h["entries"][1]["location"], nullptr);

  const Reply one = server.get("/jobs/" + kJobA + "/exceptions?maxExceptions=1");
  ASSERT_EQ(one.status, 200);
  EXPECT_EQ(one.body["exceptionHistory"]["entries"].size(), 1u);
  EXPECT_EQ(one.body["exceptionHistory"]["truncated"], true);
  EXPECT_EQ(one.body["all-exceptions"].size(), 1u);
  EXPECT_EQ(one.body["truncated"], true);
  EXPECT_EQ(server.get("/jobs/" + kJobA + "/exceptions?maxExceptions=many").status, 400);

  const Reply none = server.get("/jobs/" + kJobB + "/exceptions");
  EXPECT_EQ(none.body["root-exception"], nullptr);
  EXPECT_EQ(none.body["timestamp"], nullptr);
  EXPECT_EQ(none.body["exceptionHistory"]["entries"], Json::array());
}

TEST(WebMonitorTest, TaskManagersListAndDetails) {
  Server server;
  const rest::TaskManagerInfo& tm = server.dispatcher.taskManager();
  const Reply list = server.get("/taskmanagers");
  ASSERT_EQ(list.status, 200);
  expectKeys(list.body, {"taskmanagers"});
  ASSERT_EQ(list.body["taskmanagers"].size(), 1u);
  const Json& t = list.body["taskmanagers"][0];
  expectKeys(
      t, {"id", "path", "dataPort", "jmxPort", "timeSinceLastHeartbeat", "slotsNumber", "freeSlots",
          "totalResource", "freeResource", "hardware", "memoryConfiguration", "blocked"});
  EXPECT_EQ(t["id"], kTm);
  EXPECT_EQ(t["path"], tm.path);
  EXPECT_EQ(t["dataPort"], 6121);
  EXPECT_EQ(t["jmxPort"], -1);
  EXPECT_EQ(t["timeSinceLastHeartbeat"], tm.timeSinceLastHeartbeat);
  EXPECT_EQ(t["slotsNumber"], 4);
  EXPECT_EQ(t["freeSlots"], 1);
  EXPECT_EQ(t["blocked"], false);
  for (const char* r : {"totalResource", "freeResource"}) {
    expectKeys(t[r],
               {"cpuCores", "taskHeapMemory", "taskOffHeapMemory", "managedMemory", "networkMemory",
                "extendedResources"},
               r);
  }
  EXPECT_DOUBLE_EQ(t["totalResource"]["cpuCores"].get<double>(), 8);
  EXPECT_EQ(t["totalResource"]["managedMemory"], 1024);  // MiB
  EXPECT_EQ(t["totalResource"]["networkMemory"], 256);
  EXPECT_DOUBLE_EQ(t["freeResource"]["cpuCores"].get<double>(), 2);  // 1 of 4 slots free
  expectKeys(t["hardware"], {"cpuCores", "physicalMemory", "freeMemory", "managedMemory"});
  EXPECT_EQ(t["hardware"]["cpuCores"], 8);
  EXPECT_EQ(t["hardware"]["physicalMemory"], tm.physicalMemory);
  EXPECT_EQ(t["hardware"]["freeMemory"], tm.freeMemory);
  EXPECT_EQ(t["hardware"]["managedMemory"], tm.managedMemory);
  expectKeys(
      t["memoryConfiguration"],
      {"frameworkHeap", "taskHeap", "frameworkOffHeap", "taskOffHeap", "networkMemory",
       "managedMemory", "jvmMetaspace", "jvmOverhead", "totalFlinkMemory", "totalProcessMemory"});
  EXPECT_EQ(t["memoryConfiguration"]["networkMemory"], tm.networkMemory);

  const Reply d = server.get("/taskmanagers/" + kTm);
  ASSERT_EQ(d.status, 200);
  Json entry = d.body;
  entry.erase("allocatedSlots");
  entry.erase("metrics");
  EXPECT_EQ(entry, t);
  EXPECT_EQ(d.body["allocatedSlots"], Json::array());
  const Json& m = d.body["metrics"];
  for (const char* k : {"heapUsed",
                        "heapCommitted",
                        "heapMax",
                        "nonHeapUsed",
                        "nonHeapCommitted",
                        "nonHeapMax",
                        "directCount",
                        "directUsed",
                        "directMax",
                        "mappedCount",
                        "mappedUsed",
                        "mappedMax",
                        "memorySegmentsAvailable",
                        "memorySegmentsTotal",
                        "nettyShuffleMemorySegmentsAvailable",
                        "nettyShuffleMemorySegmentsUsed",
                        "nettyShuffleMemorySegmentsTotal",
                        "nettyShuffleMemoryAvailable",
                        "nettyShuffleMemoryUsed",
                        "nettyShuffleMemoryTotal",
                        "garbageCollectors"}) {
    EXPECT_TRUE(m.contains(k)) << k;
  }
  EXPECT_EQ(m["nettyShuffleMemoryUsed"], 300);
  EXPECT_EQ(m["nettyShuffleMemoryTotal"], 1000);
  EXPECT_EQ(m["nettyShuffleMemoryAvailable"], 700);
  EXPECT_EQ(m["processMemoryRss"], 104857600);
  EXPECT_EQ(m["managedMemoryUsed"], 1000);
  EXPECT_EQ(m["managedMemoryTotal"], 2000);
  EXPECT_DOUBLE_EQ(m["cpuLoad"].get<double>(), 0.25);
  EXPECT_EQ(m["heapUsed"], 0);

  const Reply unknown = server.get("/taskmanagers/tm-9");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body["errors"][0].get<std::string>().find("tm-9"), std::string::npos);
}

TEST(WebMonitorTest, ErrorsAreFlinksErrorBodies) {
  Server server;
  const std::string unknownJob = "ffffffffffffffffffffffffffffffff";
  const Reply notFound = server.get("/jobs/" + unknownJob);
  EXPECT_EQ(notFound.status, 404);
  expectKeys(notFound.body, {"errors"});
  EXPECT_NE(notFound.body["errors"][0].get<std::string>().find(unknownJob), std::string::npos);

  for (const std::string& bad : {std::string("nope"), std::string(31, 'a'), std::string(32, 'g')}) {
    const Reply r = server.get("/jobs/" + bad + "/checkpoints");
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_NE(r.body["errors"][0].get<std::string>().find("job id"), std::string::npos);
  }
  const Reply badVertex = server.get("/jobs/" + kJobA + "/vertices/xyz");
  EXPECT_EQ(badVertex.status, 400);
  const Reply unknownVertex = server.get("/jobs/" + kJobA + "/vertices/" + kVB);
  EXPECT_EQ(unknownVertex.status, 404);
  EXPECT_NE(unknownVertex.body["errors"][0].get<std::string>().find(kVB), std::string::npos);

  const Reply path = server.get("/no/such/path");
  EXPECT_EQ(path.status, 404);
  EXPECT_EQ(path.body, Json::parse(R"({"errors":["Not found: /no/such/path"]})"));

  // A known path with the wrong method.
  const Reply method = server.del("/jobs/" + kJobA);
  EXPECT_EQ(method.status, 405);
  EXPECT_EQ(method.header("Allow"), "GET, PATCH");
  EXPECT_NE(method.body["errors"][0].get<std::string>().find("DELETE"), std::string::npos);
  EXPECT_EQ(server.post("/overview", "{}").status, 405);

  // Flink's version prefix and a trailing slash route the same.
  EXPECT_EQ(server.get("/v1/jobs/" + kJobA).body["jid"], kJobA);
  EXPECT_EQ(server.get("/jobs/").body, server.get("/jobs").body);
  // Upper-case hex digits name the same job.
  std::string upper = kJobA;
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  EXPECT_EQ(server.get("/jobs/" + upper).body["jid"], kJobA);
}

// Sends raw bytes and returns what comes back before the server closes.
std::string rawExchange(int port, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "<connect failed>";
  }
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  (void)!::write(fd, bytes.data(), bytes.size());
  ::shutdown(fd, SHUT_WR);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

TEST(WebMonitorTest, GarbageOnTheSocketDoesNotStopTheServer) {
  Server server;
  std::string binary;
  for (int i = 0; i < 4096; ++i) binary.push_back(static_cast<char>((i * 7919) % 256));
  const std::vector<std::string> garbage = {
      binary,
      "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  // a TLS ClientHello to a plain port
      "GET /jobs HTTP/9.9\r\n\r\n",
      "BREW /coffee HTTP/1.1\r\nHost: x\r\n\r\n",
      "GET /" + std::string(100000, 'a') + " HTTP/1.1\r\n\r\n",
      "POST /jobs/" + kJobA +
          "/savepoints HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
      "GET /jobs HTTP/1.1\r\nHost: x\r\n" + std::string(20000, 'h') + "\r\n\r\n",
  };
  for (const std::string& g : garbage) {
    const std::string reply = rawExchange(server.port(), g);
    EXPECT_TRUE(reply.empty() || reply.rfind("HTTP/1.1 4", 0) == 0) << reply.substr(0, 200);
    EXPECT_EQ(server.get("/config").status, 200);
  }
}

TEST(WebMonitorTest, ServesTheDashboardAtTheRoot) {
  Server server;
  const rest::WebAsset* index = rest::findWebAsset("/index.html");
  ASSERT_NE(index, nullptr) << "web/dashboard/dist has no index.html";
  const Reply root = server.get("/");
  ASSERT_EQ(root.status, 200);
  EXPECT_EQ(root.raw, std::string(index->data));
  EXPECT_EQ(root.header("Content-Type"), std::string(index->contentType));
  EXPECT_EQ(server.get("/index.html").raw, std::string(index->data));
  const Reply missing = server.get("/assets/no-such-file.js");
  EXPECT_EQ(missing.status, 404);
  EXPECT_TRUE(missing.body.contains("errors"));
}

TEST(WebMonitorTest, OptionsComeFromFlinksKeys) {
  Configuration config;
  config.setString("rest.bind-address", "0.0.0.0");
  config.setString("rest.port", "18081");
  config.setString("security.ssl.rest.enabled", "true");
  config.setString("security.ssl.rest.keystore", "/etc/sluice/rest.pem");
  config.setString("security.ssl.rest.key", "/etc/sluice/rest.key");
  config.setString("rest.authentication.token", "t0ken");
  config.setString("web.refresh-interval", "5 s");
  config.setString("web.submit.enable", "false");
  config.setString("web.cancel.enable", "false");
  const rest::WebMonitorOptions o = rest::WebMonitorOptions::fromConfig(config);
  EXPECT_EQ(o.bindAddress, "0.0.0.0");
  EXPECT_EQ(o.port, 18081);
  EXPECT_TRUE(o.ssl);
  EXPECT_EQ(o.certificateFile, "/etc/sluice/rest.pem");
  EXPECT_EQ(o.keyFile, "/etc/sluice/rest.key");
  EXPECT_EQ(o.token, "t0ken");
  EXPECT_EQ(o.refreshIntervalMs, 5000);
  EXPECT_FALSE(o.submitEnabled);
  EXPECT_FALSE(o.cancelEnabled);
  const rest::WebMonitorOptions d = rest::WebMonitorOptions::fromConfig(Configuration{});
  EXPECT_EQ(d.bindAddress, "localhost");
  EXPECT_EQ(d.port, 8081);
  EXPECT_FALSE(d.ssl);
  EXPECT_TRUE(d.token.empty());
}

TEST(WebMonitorTest, BindsLocalhostAndReportsBindErrors) {
  fake_dispatcher::FakeDispatcher dispatcher;
  rest::WebMonitorOptions o;
  o.bindAddress = "localhost";
  o.port = 0;
  rest::WebMonitor first(dispatcher, o);
  ASSERT_TRUE(first.start().isOk());
  EXPECT_EQ(first.address(), "http://127.0.0.1:" + std::to_string(first.port()));
  httplib::Client c("localhost", first.port());
  auto r = c.Get("/config");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);

  o.port = first.port();  // taken
  rest::WebMonitor second(dispatcher, o);
  const Status s = second.start();
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("127.0.0.1:" + std::to_string(first.port())), std::string::npos)
      << s.toString();
  EXPECT_NE(s.message().find("rest.port"), std::string::npos) << s.toString();

  o.port = 0;
  o.bindAddress = "no-such-host.invalid";
  rest::WebMonitor third(dispatcher, o);
  const Status t = third.start();
  EXPECT_FALSE(t.isOk());
  EXPECT_NE(t.message().find("rest.bind-address"), std::string::npos) << t.toString();

  o.bindAddress = "127.0.0.1";
  o.port = 70000;
  rest::WebMonitor fourth(dispatcher, o);
  EXPECT_NE(fourth.start().message().find("rest.port"), std::string::npos);
}

}  // namespace
}  // namespace web_monitor_test
}  // namespace sluice
