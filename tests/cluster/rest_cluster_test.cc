// The JobManager's REST API over a live cluster of processes (a JobManager
// and two TaskManagers of the `sluice` binary): the cluster, its
// TaskManagers and their metrics fetched over RPC, a running job's vertices
// placed on both TaskManagers, its record counts and checkpoints, job
// libraries uploaded and run through /jars, cancel, and the token that
// guards every mutating call on REST and on the CLI's RPC.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "harness/local_cluster.h"
#include "harness/temp_dir.h"
#include "harness/wait.h"

namespace rest_cluster_test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using sluice::test::CliResult;
using sluice::test::LocalCluster;
using sluice::test::readWholeFile;
using sluice::test::TempDir;
using sluice::test::waitUntil;
using std::chrono::milliseconds;

constexpr const char* kToken = "s3cret-token";

// A JSON client of the JobManager's REST endpoint.
struct Rest {
  explicit Rest(const std::string& url, std::string token = "") : client(url) {
    client.set_connection_timeout(5);
    client.set_read_timeout(30);
    if (!token.empty()) client.set_bearer_token_auth(token);
  }
  json get(const std::string& path, int expectStatus = 200) {
    auto r = client.Get(path);
    EXPECT_TRUE(r) << "GET " << path << ": " << httplib::to_string(r.error());
    if (!r) return json();
    EXPECT_EQ(r->status, expectStatus) << "GET " << path << ": " << r->body;
    return json::parse(r->body, nullptr, false);
  }
  // Any status; the body parsed (null when it is no JSON).
  std::pair<int, json> send(const std::string& method, const std::string& path,
                            const std::string& body = "") {
    httplib::Result r = method == "GET"     ? client.Get(path)
                        : method == "PATCH" ? client.Patch(path)
                        : method == "POST"  ? client.Post(path, body, "application/json")
                                            : client.Delete(path);
    EXPECT_TRUE(r) << method << " " << path << ": " << httplib::to_string(r.error());
    if (!r) return {-1, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  // POST /jars/upload with the file as Flink's web UI sends it; -1 when the
  // connection broke (and `mayBreak`).
  std::pair<int, json> upload(const std::string& file, bool mayBreak = false) {
    httplib::MultipartFormDataItems items = {{"jarfile", readWholeFile(file),
                                              fs::path(file).filename().string(),
                                              "application/x-sharedlib"}};
    auto r = client.Post("/jars/upload", items);
    EXPECT_TRUE(r || mayBreak) << "POST /jars/upload: " << httplib::to_string(r.error());
    if (!r) return {-1, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  httplib::Client client;
};

// The status line a POST of `contentLength` bytes to `path` gets after its
// headers alone, as a client sending "Expect: 100-continue" (curl) sees a
// refusal before it uploads anything.
std::string statusBeforeBody(int port, const std::string& path, size_t contentLength,
                             const std::string& extraHeaders = "") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "socket failed";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string line;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string head = "POST " + path +
                             " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; "
                             "boundary=b\r\nContent-Length: " +
                             std::to_string(contentLength) + "\r\n" + extraHeaders + "\r\n";
    if (::send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size())) {
      char c = 0;
      while (::recv(fd, &c, 1, 0) == 1 && c != '\n') line += c;
    }
  }
  ::close(fd);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

// The ids the TaskManagers logged ("TaskManager tm-... listening on").
std::set<std::string> taskManagerIds(LocalCluster& cluster, int count) {
  std::set<std::string> ids;
  const std::regex re("TaskManager (tm-[0-9a-f]+) listening");
  for (int i = 0; i < count; ++i) {
    std::smatch m;
    const std::string out = cluster.taskManager(i).output();
    if (std::regex_search(out, m, re)) ids.insert(m[1]);
  }
  return ids;
}

// A job of the crash job library that runs until cancelled: about `rate`
// records a second through two vertices of parallelism 2, checkpointing.
std::vector<std::string> endlessJobArgs(const fs::path& dir, const std::string& name) {
  return {"--output",  (dir / name).string(), "--checkpoints", (dir / (name + "-cp")).string(),
          "--records", "1000000000",          "--rate",        "400"};
}

std::string restState(Rest& rest, const std::string& job) {
  json j = rest.get("/jobs/" + job);
  return j.is_object() && j.contains("state") ? j["state"].get<std::string>() : "";
}

// Sum of a vertex's subtask metric `id` (Flink's subtasks/metrics, agg=sum).
double subtaskSum(Rest& rest, const std::string& job, const std::string& vertex,
                  const std::string& id) {
  json body =
      rest.get("/jobs/" + job + "/vertices/" + vertex + "/subtasks/metrics?get=" + id + "&agg=sum");
  if (!body.is_array()) return -1;
  for (const auto& m : body) {
    if (m["id"] == id && m.contains("sum")) return m["sum"].get<double>();
  }
  return -1;
}

int64_t completedCheckpoints(Rest& rest, const std::string& job) {
  json cps = rest.get("/jobs/" + job + "/checkpoints");
  if (!cps.is_object() || !cps.contains("counts")) return -1;
  return cps["counts"]["completed"].get<int64_t>();
}

TEST(ClusterRestTest, ServesTheClusterTheTaskManagersAndARunningJobsMetrics) {
  TempDir dir("cluster-rest");
  LocalCluster cluster(dir.path(), {"cluster.evenly-spread-out-slots=true"});
  cluster.startJobManager({"metrics.fetcher.update-interval=200ms"});
  cluster.startTaskManager(2);
  cluster.startTaskManager(2);
  ASSERT_GT(cluster.restPort(), 0);
  const std::set<std::string> tmIds = taskManagerIds(cluster, 2);
  ASSERT_EQ(tmIds.size(), 2u);
  Rest rest(cluster.restUrl());

  json overview = rest.get("/overview");
  EXPECT_EQ(overview["taskmanagers"], 2) << overview.dump();
  EXPECT_EQ(overview["slots-total"], 4) << overview.dump();
  EXPECT_EQ(overview["slots-available"], 4) << overview.dump();

  json tms = rest.get("/taskmanagers");
  ASSERT_TRUE(tms.contains("taskmanagers")) << tms.dump();
  std::set<std::string> listed;
  for (const auto& tm : tms["taskmanagers"]) {
    listed.insert(tm["id"].get<std::string>());
    EXPECT_EQ(tm["slotsNumber"], 2) << tm.dump();
    EXPECT_EQ(tm["freeSlots"], 2) << tm.dump();
    EXPECT_GT(tm["dataPort"].get<int>(), 0) << tm.dump();
    EXPECT_EQ(tm["path"].get<std::string>().rfind("127.0.0.1:", 0), 0u) << tm.dump();
    EXPECT_GT(tm["hardware"]["cpuCores"].get<int>(), 0) << tm.dump();
    EXPECT_GT(tm["hardware"]["physicalMemory"].get<int64_t>(), 0) << tm.dump();
  }
  EXPECT_EQ(listed, tmIds);
  // Each TaskManager's own process metrics, fetched from it over RPC.
  for (const std::string& id : tmIds) {
    json one = rest.get("/taskmanagers/" + id);
    EXPECT_EQ(one["id"], id) << one.dump();
    double rss = 0;
    EXPECT_TRUE(waitUntil(
        [&] {
          json m = rest.get("/taskmanagers/" + id + "/metrics?get=Status.Process.Memory.RSS");
          if (!m.is_array() || m.empty()) return false;
          rss = std::stod(m[0]["value"].get<std::string>());
          return m[0]["id"] == "Status.Process.Memory.RSS" && rss > 0;
        },
        milliseconds(60000)))
        << id << " RSS " << rss;
  }

  const std::string job =
      cluster.submitDetached(SLUICE_CRASH_JOB_LIB, {}, endlessJobArgs(dir.path(), "out"));
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(waitUntil([&] { return restState(rest, job) == "RUNNING"; }, milliseconds(120000)))
      << rest.get("/jobs/" + job).dump();
  EXPECT_EQ(cluster.jobState(job), "RUNNING") << "the CLI sees what REST shows";

  json jobs = rest.get("/jobs/overview");
  bool found = false;
  for (const auto& j : jobs["jobs"]) {
    if (j["jid"] != job) continue;
    found = true;
    EXPECT_EQ(j["name"], "crash job");
    EXPECT_EQ(j["state"], "RUNNING");
  }
  EXPECT_TRUE(found) << jobs.dump();
  overview = rest.get("/overview");
  EXPECT_EQ(overview["slots-available"], 2) << "the job holds one slot of each TaskManager";
  EXPECT_EQ(overview["jobs-running"], 1) << overview.dump();

  json details = rest.get("/jobs/" + job);
  EXPECT_EQ(details["jid"], job);
  EXPECT_EQ(details["name"], "crash job");
  ASSERT_EQ(details["vertices"].size(), 2u) << details.dump();
  std::string source;
  for (const auto& v : details["vertices"]) {
    EXPECT_EQ(v["parallelism"], 2) << v.dump();
    const std::string vid = v["id"].get<std::string>();
    if (v["name"].get<std::string>().find("Source") != std::string::npos) source = vid;
    json vertex = rest.get("/jobs/" + job + "/vertices/" + vid);
    ASSERT_EQ(vertex["subtasks"].size(), 2u) << vertex.dump();
    std::set<std::string> on;
    for (const auto& st : vertex["subtasks"]) {
      EXPECT_EQ(st["host"], "127.0.0.1") << st.dump();
      on.insert(st["taskmanager-id"].get<std::string>());
    }
    EXPECT_EQ(on, tmIds) << "evenly spread: one subtask of " << vid << " on each TaskManager";
  }
  ASSERT_FALSE(source.empty()) << details.dump();

  // Records flow, and the counts the JobManager fetched keep growing.
  double first = 0;
  ASSERT_TRUE(waitUntil(
      [&] {
        first = subtaskSum(rest, job, source, "numRecordsOut");
        return first > 0;
      },
      milliseconds(60000)))
      << first;
  double later = first;
  EXPECT_TRUE(waitUntil(
      [&] {
        later = subtaskSum(rest, job, source, "numRecordsOut");
        return later > first;
      },
      milliseconds(60000)))
      << first << " -> " << later;

  // The job checkpoints every 100 ms: the completed count grows.
  int64_t cp0 = -1;
  ASSERT_TRUE(waitUntil(
      [&] {
        cp0 = completedCheckpoints(rest, job);
        return cp0 >= 1;
      },
      milliseconds(60000)))
      << cp0;
  int64_t cp1 = cp0;
  EXPECT_TRUE(waitUntil(
      [&] {
        cp1 = completedCheckpoints(rest, job);
        return cp1 >= cp0 + 2;
      },
      milliseconds(60000)))
      << cp0 << " -> " << cp1;

  // The JobManager's own metrics.
  json jm = rest.get("/jobmanager/metrics?get=numRegisteredTaskManagers,taskSlotsTotal");
  std::map<std::string, std::string> jmValues;
  if (jm.is_array()) {
    for (const auto& m : jm) jmValues[m["id"].get<std::string>()] = m["value"].get<std::string>();
  }
  EXPECT_EQ(jmValues["numRegisteredTaskManagers"], "2") << jm.dump();
  EXPECT_EQ(jmValues["taskSlotsTotal"], "4") << jm.dump();

  auto [status, body] = rest.send("PATCH", "/jobs/" + job + "?mode=cancel");
  EXPECT_EQ(status, 202) << body.dump();
  EXPECT_EQ(cluster.waitForEnd(job), "CANCELED");
  EXPECT_TRUE(waitUntil([&] { return restState(rest, job) == "CANCELED"; }, milliseconds(60000)));
  // Bad ids are answered, not crashed on.
  EXPECT_TRUE(rest.get("/jobs/0123456789abcdef0123456789abcdef", 404).contains("errors"));
  EXPECT_TRUE(rest.get("/taskmanagers/tm-nosuch", 404).contains("errors"));
}

TEST(ClusterRestTest, AJobLibraryUploadedToJarsRunsAsAJob) {
  TempDir dir("cluster-jars");
  LocalCluster cluster(dir.path(), {"cluster.evenly-spread-out-slots=true"});
  cluster.startJobManager();
  cluster.startTaskManager(1);
  cluster.startTaskManager(1);
  Rest rest(cluster.restUrl());

  auto [status, uploaded] = rest.upload(SLUICE_CRASH_JOB_LIB);
  ASSERT_EQ(status, 200) << uploaded.dump();
  EXPECT_EQ(uploaded["status"], "success");
  const std::string jarId = fs::path(uploaded["filename"].get<std::string>()).filename().string();
  const std::string libName = fs::path(SLUICE_CRASH_JOB_LIB).filename().string();
  EXPECT_NE(jarId.find("_" + libName), std::string::npos) << jarId;
  // Stored under <blob.storage.directory>/jars, byte for byte.
  const fs::path stored = dir.path() / "blobs-jm" / "jars" / jarId;
  ASSERT_TRUE(fs::exists(stored)) << stored;
  EXPECT_EQ(readWholeFile(stored), readWholeFile(SLUICE_CRASH_JOB_LIB));

  json jars = rest.get("/jars");
  ASSERT_EQ(jars["files"].size(), 1u) << jars.dump();
  EXPECT_EQ(jars["files"][0]["id"], jarId);
  EXPECT_EQ(jars["files"][0]["name"], libName);

  json run = {{"programArgsList", endlessJobArgs(dir.path(), "jar-out")}, {"parallelism", 2}};
  auto [runStatus, started] = rest.send("POST", "/jars/" + jarId + "/run", run.dump());
  ASSERT_EQ(runStatus, 200) << started.dump();
  const std::string job = started["jobid"].get<std::string>();
  ASSERT_EQ(job.size(), 32u) << started.dump();
  ASSERT_TRUE(waitUntil([&] { return restState(rest, job) == "RUNNING"; }, milliseconds(120000)))
      << rest.get("/jobs/" + job).dump();
  EXPECT_EQ(cluster.jobState(job), "RUNNING");
  // The job creates its output directory once it runs: until then there is
  // nothing to check (is_empty throws on a missing path).
  EXPECT_TRUE(waitUntil(
      [&] {
        std::error_code ec;
        return !fs::is_empty(dir.path() / "jar-out", ec) && !ec;
      },
      milliseconds(60000)))
      << "the job's sink writes";

  // Errors: an unknown jar, a library that is no job, a bad parallelism.
  auto [unknown, unknownBody] =
      rest.send("POST", "/jars/0123_nosuch.so/run", json::object().dump());
  EXPECT_EQ(unknown, 404) << unknownBody.dump();
  auto [badP, badPBody] =
      rest.send("POST", "/jars/" + jarId + "/run", json{{"parallelism", 0}}.dump());
  EXPECT_EQ(badP, 400) << badPBody.dump();
  {
    const fs::path notALib = dir.path() / "not-a-lib.so";
    std::ofstream(notALib) << "not an ELF file";
    auto [up, upBody] = rest.upload(notALib.string());
    ASSERT_EQ(up, 200) << upBody.dump();
    const std::string bad = fs::path(upBody["filename"].get<std::string>()).filename().string();
    auto [st, body] = rest.send("POST", "/jars/" + bad + "/run", json::object().dump());
    EXPECT_EQ(st, 400) << body.dump();
    EXPECT_NE(body.dump().find("cannot load job library"), std::string::npos) << body.dump();
    auto [del, delBody] = rest.send("DELETE", "/jars/" + bad);
    EXPECT_EQ(del, 200) << delBody.dump();
    EXPECT_FALSE(fs::exists(dir.path() / "blobs-jm" / "jars" / bad));
  }

  auto [cancel, cancelBody] = rest.send("PATCH", "/jobs/" + job + "?mode=cancel");
  EXPECT_EQ(cancel, 202) << cancelBody.dump();
  EXPECT_EQ(cluster.waitForEnd(job), "CANCELED");
}

TEST(ClusterRestTest, WithATokenMutatingCallsWithoutItChangeNothing) {
  TempDir dir("cluster-token");
  LocalCluster cluster(dir.path(), {});
  cluster.startJobManager({std::string("rest.authentication.token=") + kToken});
  cluster.startTaskManager(2);
  const std::string tokenFlag = std::string("rest.authentication.token=") + kToken;

  // The CLI without the token cannot submit; with it, it can.
  std::vector<std::string> runArgs = {"-d", SLUICE_CRASH_JOB_LIB};
  for (const auto& a : endlessJobArgs(dir.path(), "refused")) runArgs.push_back(a);
  CliResult refused = cluster.cli("run", runArgs);
  EXPECT_EQ(refused.exitCode, 1) << refused.output;
  EXPECT_NE(refused.output.find("rest.authentication.token"), std::string::npos) << refused.output;
  const std::string job = cluster.submitDetached(SLUICE_CRASH_JOB_LIB, {"-D", tokenFlag},
                                                 endlessJobArgs(dir.path(), "out"));
  ASSERT_FALSE(job.empty());
  Rest open(cluster.restUrl());
  ASSERT_TRUE(waitUntil([&] { return restState(open, job) == "RUNNING"; }, milliseconds(120000)));

  // REST without the token (or with a wrong one): 401, nothing changes.
  auto [cancel, cancelBody] = open.send("PATCH", "/jobs/" + job + "?mode=cancel");
  EXPECT_EQ(cancel, 401) << cancelBody.dump();
  EXPECT_TRUE(cancelBody.contains("errors")) << cancelBody.dump();
  Rest wrong(cluster.restUrl(), "not-the-token");
  EXPECT_EQ(wrong.send("PATCH", "/jobs/" + job + "?mode=cancel").first, 401);
  const size_t libSize = fs::file_size(SLUICE_CRASH_JOB_LIB);
  EXPECT_EQ(statusBeforeBody(cluster.restPort(), "/jars/upload", libSize),
            "HTTP/1.1 401 Unauthorized");
  EXPECT_EQ(statusBeforeBody(cluster.restPort(), "/jars/upload", libSize,
                             "Authorization: Bearer not-the-token\r\n"),
            "HTTP/1.1 401 Unauthorized");
  // A client that sends the whole library regardless: the endpoint refuses
  // it without reading it and closes the connection, so the client sees the
  // 401 or a broken write (httplib's client writes into the closed socket:
  // SIGPIPE, ignored here); either way nothing is stored.
  ::signal(SIGPIPE, SIG_IGN);
  auto [upload, uploadBody] = open.upload(SLUICE_CRASH_JOB_LIB, true);
  EXPECT_TRUE(upload == 401 || upload == -1) << upload << " " << uploadBody.dump();
  const fs::path jars = dir.path() / "blobs-jm" / "jars";
  EXPECT_TRUE(!fs::exists(jars) || fs::is_empty(jars)) << "no jar stored";
  EXPECT_EQ(open.get("/jars")["files"].size(), 0u);
  EXPECT_EQ(restState(open, job), "RUNNING");
  EXPECT_EQ(cluster.jobState(job), "RUNNING");

  // The CLI without the token: a clear error, the job runs on.
  CliResult cliRefused = cluster.cli("cancel", {job});
  EXPECT_EQ(cliRefused.exitCode, 1) << cliRefused.output;
  EXPECT_NE(cliRefused.output.find("rest.authentication.token"), std::string::npos)
      << cliRefused.output;
  EXPECT_EQ(cluster.jobState(job), "RUNNING");
  CliResult spRefused = cluster.cli("savepoint", {job, (dir.path() / "sp").string()});
  EXPECT_EQ(spRefused.exitCode, 1) << spRefused.output;
  EXPECT_FALSE(fs::exists(dir.path() / "sp"));

  // With the token: REST upload works, and the CLI's cancel.
  Rest authorized(cluster.restUrl(), kToken);
  auto [up, upBody] = authorized.upload(SLUICE_CRASH_JOB_LIB);
  EXPECT_EQ(up, 200) << upBody.dump();
  EXPECT_EQ(authorized.get("/jars")["files"].size(), 1u);
  CliResult cancelled = cluster.cli("cancel", {"-D", tokenFlag, job});
  EXPECT_EQ(cancelled.exitCode, 0) << cancelled.output;
  EXPECT_EQ(cluster.jobState(job), "CANCELED");
}

TEST(ClusterRestTest, AJobWaitingForSlotsIsCreatedAndOneThatCannotStartFailedWithItsCause) {
  TempDir dir("cluster-rest-start");
  {
    LocalCluster cluster(dir.path() / "waits", {});
    cluster.startJobManager();
    cluster.startTaskManager(1);
    Rest rest(cluster.restUrl());
    // The job needs two slots; the cluster has one until a second
    // TaskManager registers.
    const std::string job =
        cluster.submitDetached(SLUICE_CRASH_JOB_LIB, {}, endlessJobArgs(dir.path(), "waits-out"));
    ASSERT_FALSE(job.empty());
    ASSERT_TRUE(waitUntil([&] { return restState(rest, job) == "CREATED"; }, milliseconds(60000)))
        << rest.get("/jobs/" + job).dump();
    json details = rest.get("/jobs/" + job);
    EXPECT_EQ(details["name"], "crash job");
    ASSERT_EQ(details["vertices"].size(), 2u) << details.dump();
    for (const auto& v : details["vertices"]) {
      EXPECT_EQ(v["parallelism"], 2) << v.dump();
      EXPECT_EQ(v["status"], "CREATED") << v.dump();
    }
    json overview = rest.get("/jobs/overview");
    bool listed = false;
    for (const auto& j : overview["jobs"]) listed |= j["jid"] == job && j["state"] == "CREATED";
    EXPECT_TRUE(listed) << overview.dump();
    cluster.startTaskManager(1);
    EXPECT_TRUE(waitUntil([&] { return restState(rest, job) == "RUNNING"; }, milliseconds(120000)))
        << rest.get("/jobs/" + job).dump();
    EXPECT_EQ(rest.send("PATCH", "/jobs/" + job + "?mode=cancel").first, 202);
    EXPECT_EQ(cluster.waitForEnd(job), "CANCELED");
  }
  {
    LocalCluster cluster(dir.path() / "fails", {});
    cluster.startJobManager({"slot.request.timeout=300ms"});
    Rest rest(cluster.restUrl());
    const std::string job =
        cluster.submitDetached(SLUICE_CRASH_JOB_LIB, {}, endlessJobArgs(dir.path(), "fails-out"));
    ASSERT_FALSE(job.empty());
    ASSERT_TRUE(waitUntil([&] { return restState(rest, job) == "FAILED"; }, milliseconds(60000)))
        << rest.get("/jobs/" + job).dump();
    json details = rest.get("/jobs/" + job);
    EXPECT_GT(details["end-time"].get<int64_t>(), 0) << details.dump();
    json exceptions = rest.get("/jobs/" + job + "/exceptions");
    EXPECT_NE(exceptions.dump().find("could not get the slots the job needs"), std::string::npos)
        << exceptions.dump();
    // A job that never ran cannot be cancelled; the error says why.
    auto [status, body] = rest.send("PATCH", "/jobs/" + job + "?mode=cancel");
    EXPECT_EQ(status, 409) << body.dump();
    EXPECT_NE(body.dump().find("not running"), std::string::npos) << body.dump();
  }
}

// A long-running JobManager does not keep every job it ran: beyond
// jobstore.max-capacity the job that ended first goes, and every ended job
// goes jobstore.expiration-time seconds after it ended (Flink's job store).
TEST(ClusterRestTest, EndedJobsLeaveTheJobManagerPerTheJobStoreOptions) {
  TempDir dir("cluster-rest-jobstore");
  auto gone = [](Rest& rest, const std::string& job) {
    return rest.send("GET", "/jobs/" + job).first == 404;
  };
  {
    LocalCluster cluster(dir.path() / "capacity", {"heartbeat.interval=200ms"});
    cluster.startJobManager({"jobstore.max-capacity=2"});
    cluster.startTaskManager(2);
    Rest rest(cluster.restUrl());
    std::vector<std::string> jobs;
    for (int i = 0; i < 3; ++i) {
      const std::string name = "short-" + std::to_string(i);
      jobs.push_back(cluster.submitDetached(
          SLUICE_CRASH_JOB_LIB, {},
          {"--output", (dir.path() / name).string(), "--checkpoints",
           (dir.path() / (name + "-cp")).string(), "--records", "20", "--rate", "1000"}));
      ASSERT_FALSE(jobs.back().empty());
      ASSERT_EQ(cluster.waitForEnd(jobs.back()), "FINISHED");
    }
    ASSERT_TRUE(waitUntil([&] { return gone(rest, jobs[0]); }, milliseconds(60000)))
        << rest.get("/jobs/overview").dump();
    EXPECT_EQ(cluster.jobState(jobs[0]), "") << "sluice list -a no longer shows it";
    EXPECT_EQ(restState(rest, jobs[1]), "FINISHED");
    EXPECT_EQ(restState(rest, jobs[2]), "FINISHED");
    std::set<std::string> listed;
    const json overview = rest.get("/jobs/overview");
    for (const auto& j : overview["jobs"]) listed.insert(j["jid"]);
    EXPECT_EQ(listed, (std::set<std::string>{jobs[1], jobs[2]}));
    const std::string log = cluster.jobManager().output();
    EXPECT_NE(log.find("Removed job " + jobs[0]), std::string::npos) << log;
    EXPECT_NE(log.find("jobstore.max-capacity"), std::string::npos) << log;
  }
  {
    // No TaskManager: the job fails to get its slots, then expires.
    LocalCluster cluster(dir.path() / "expiry", {"heartbeat.interval=200ms"});
    cluster.startJobManager({"jobstore.expiration-time=1", "slot.request.timeout=300ms"});
    Rest rest(cluster.restUrl());
    const std::string job =
        cluster.submitDetached(SLUICE_CRASH_JOB_LIB, {}, endlessJobArgs(dir.path(), "expiry-out"));
    ASSERT_FALSE(job.empty());
    std::string state;
    ASSERT_TRUE(waitUntil(
        [&] {
          auto [status, body] = rest.send("GET", "/jobs/" + job);
          if (status == 200) state = body["state"].get<std::string>();
          return status == 404;
        },
        milliseconds(60000)));
    EXPECT_EQ(state, "FAILED") << "seen failed before it went";
    const std::string log = cluster.jobManager().output();
    EXPECT_NE(log.find("Removed job " + job), std::string::npos) << log;
    EXPECT_NE(log.find("jobstore.expiration-time"), std::string::npos) << log;
  }
  LocalCluster cluster(dir.path() / "bad", {});
  CliResult r = cluster.runProcess(
      {LocalCluster::binary(), "jobmanager", "-D", "jobmanager.rpc.port=0", "-D",
       "jobmanager.bind-host=127.0.0.1", "-D", "rest.bind-address=127.0.0.1", "-D", "rest.port=0",
       "-D", "jobstore.max-capacity=0", "-D", "env.log.dir=" + (dir.path() / "log").string(), "-D",
       "blob.storage.directory=" + (dir.path() / "blobs").string()},
      std::chrono::seconds(60));
  EXPECT_EQ(r.exitCode, 1) << r.output;
  EXPECT_NE(r.output.find("jobstore.max-capacity must be at least 1, got 0"), std::string::npos)
      << r.output;
}

// The port the process's Prometheus reporter logged it listens on.
int prometheusPort(sluice::test::ChildProcess& process) {
  std::smatch m;
  const std::regex re("Prometheus reporter listening on http://[^ ]*:([0-9]+)/metrics");
  const std::string out = process.output();
  return std::regex_search(out, m, re) ? std::stoi(m[1]) : -1;
}

TEST(ClusterRestTest, EveryProcessServesItsOwnMetricsToPrometheus) {
  TempDir dir("cluster-prometheus");
  LocalCluster cluster(
      dir.path(), {"metrics.reporter.prom.factory.class=prometheus", "metrics.reporter.prom.port=0",
                   "metrics.reporter.prom.host=127.0.0.1"});
  cluster.startJobManager();
  cluster.startTaskManager(2);
  const int jmPort = prometheusPort(cluster.jobManager());
  const int tmPort = prometheusPort(cluster.taskManager(0));
  ASSERT_GT(jmPort, 0) << cluster.jobManager().output();
  ASSERT_GT(tmPort, 0) << cluster.taskManager(0).output();
  const std::string job =
      cluster.submitDetached(SLUICE_CRASH_JOB_LIB, {}, endlessJobArgs(dir.path(), "out"));
  ASSERT_FALSE(job.empty());
  auto scrape = [](int port) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(10);
    auto r = c.Get("/metrics");
    return r && r->status == 200 ? r->body : std::string();
  };
  // The TaskManager: its operators' counters with the job's labels (some
  // operator emits, however the job is chained), and its own Status.*.
  const std::regex records("flink_taskmanager_job_task_operator_numRecordsOut\\{[^}]*job_id=\"" +
                           job + "\"[^}]*\\} ([0-9.e+]+)");
  std::string tm;
  EXPECT_TRUE(waitUntil(
      [&] {
        tm = scrape(tmPort);
        for (auto it = std::sregex_iterator(tm.begin(), tm.end(), records);
             it != std::sregex_iterator(); ++it) {
          if (std::stod((*it)[1]) > 0) return true;
        }
        return false;
      },
      milliseconds(60000)))
      << tm.substr(0, 4000);
  EXPECT_NE(tm.find("flink_taskmanager_Status_Process_Memory_RSS"), std::string::npos);
  // The JobManager: its own metrics and the job's.
  const std::string jm = scrape(jmPort);
  EXPECT_NE(jm.find("flink_jobmanager_numRegisteredTaskManagers{host=\"127_0_0_1\"} 1"),
            std::string::npos)
      << jm.substr(0, 4000);
  EXPECT_NE(jm.find("flink_jobmanager_job_numberOfCompletedCheckpoints"), std::string::npos)
      << jm.substr(0, 4000);
  CliResult cancel = cluster.cli("cancel", {job});
  EXPECT_EQ(cancel.exitCode, 0) << cancel.output;
}

TEST(ClusterRestTest, AJobManagerWhoseRestPortIsTakenFailsToStartNamingIt) {
  TempDir dir("cluster-rest-port");
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int taken = ntohs(addr.sin_port);

  LocalCluster cluster(dir.path(), {});
  CliResult r = cluster.runProcess(
      {LocalCluster::binary(), "jobmanager", "-D", "jobmanager.rpc.port=0", "-D",
       "jobmanager.bind-host=127.0.0.1", "-D", "rest.bind-address=127.0.0.1", "-D",
       "rest.port=" + std::to_string(taken), "-D", "env.log.dir=" + (dir.path() / "log").string(),
       "-D", "blob.storage.directory=" + (dir.path() / "blobs").string()},
      std::chrono::seconds(60));
  ::close(fd);
  EXPECT_EQ(r.exitCode, 1) << r.output;
  EXPECT_NE(r.output.find("rest.port"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(std::to_string(taken)), std::string::npos) << r.output;
}

}  // namespace
}  // namespace rest_cluster_test
