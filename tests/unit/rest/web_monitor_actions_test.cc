// The REST endpoint's mutating calls against a FakeDispatcher: cancel,
// asynchronous savepoints and stop-with-savepoint, job library upload and
// run; the bearer token (401 and no Dispatcher call without it); TLS (a
// plain-HTTP client is refused, the server keeps serving); body limits.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness/temp_dir.h"
#include "harness/wait.h"
#include "rest/rest_params.h"
#include "rest_client.h"

namespace sluice {
namespace web_monitor_actions_test {
namespace {

using fake_dispatcher::kJobA;
using fake_dispatcher::kJobB;
using rest_client::expectKeys;
using rest_client::Json;
using rest_client::Reply;
using rest_client::Server;
using rest_client::toReply;

const std::string kToken = "s3cret-token";

httplib::Headers bearer(const std::string& token) { return {{"Authorization", "Bearer " + token}}; }

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
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) {
    out.append(buf, static_cast<size_t>(n));
    if (out.find("\r\n\r\n") != std::string::npos) break;
  }
  ::close(fd);
  return out;
}

// Polls the savepoint status until it is COMPLETED.
Json waitForCompletion(const Server& server, const std::string& job, const std::string& id) {
  Json last;
  test::waitUntil([&] {
    last = server.get("/jobs/" + job + "/savepoints/" + id).body;
    return last.is_object() && last["status"]["id"] == "COMPLETED";
  });
  return last;
}

TEST(WebMonitorActionsTest, CancelPatchesTheJob) {
  Server server;
  const Reply r = server.patch("/jobs/" + kJobA);
  EXPECT_EQ(r.status, 202);
  EXPECT_EQ(r.body, Json::object());
  EXPECT_EQ(server.patch("/jobs/" + kJobA + "?mode=cancel").status, 202);
  EXPECT_EQ(server.dispatcher.cancelCalls(), (std::vector<std::string>{kJobA, kJobA}));

  // Flink removed mode=stop; unknown modes and ids are rejected before any call.
  const Reply stop = server.patch("/jobs/" + kJobA + "?mode=stop");
  EXPECT_EQ(stop.status, 400);
  EXPECT_NE(stop.body["errors"][0].get<std::string>().find("/stop"), std::string::npos);
  EXPECT_EQ(server.patch("/jobs/" + kJobA + "?mode=pause").status, 400);
  EXPECT_EQ(server.patch("/jobs/not-a-job").status, 400);
  EXPECT_EQ(server.dispatcher.cancelCalls().size(), 2u);

  // A job that already ended: Flink's 409; an unknown one: 404.
  const Reply ended = server.patch("/jobs/" + kJobB);
  EXPECT_EQ(ended.status, 409);
  EXPECT_NE(ended.body["errors"][0].get<std::string>().find("FINISHED"), std::string::npos);
  EXPECT_EQ(server.patch("/jobs/ffffffffffffffffffffffffffffffff").status, 404);
}

TEST(WebMonitorActionsTest, WebCancelEnableOnlyHidesTheButtonAsInFlink) {
  rest::WebMonitorOptions o;
  o.cancelEnabled = false;
  Server server(o);
  EXPECT_EQ(server.get("/config").body["features"]["web-cancel"], false);
  EXPECT_EQ(server.patch("/jobs/" + kJobA).status, 202);
  EXPECT_EQ(server.dispatcher.cancelCalls().size(), 1u);
}

TEST(WebMonitorActionsTest, SavepointRunsAsynchronously) {
  Server server;
  const Reply t = server.post("/jobs/" + kJobA + "/savepoints",
                              R"({"target-directory": "/tmp/sp", "cancel-job": false,
                                  "formatType": "CANONICAL"})");
  ASSERT_EQ(t.status, 202) << t.raw;
  expectKeys(t.body, {"request-id"});
  const std::string id = t.body["request-id"];
  EXPECT_TRUE(rest::isHexId(id)) << id;

  ASSERT_TRUE(test::waitUntil([&] { return server.dispatcher.savepointCalls().size() == 1; }));
  const Reply running = server.get("/jobs/" + kJobA + "/savepoints/" + id);
  ASSERT_EQ(running.status, 200);
  EXPECT_EQ(running.body, Json::parse(R"({"status":{"id":"IN_PROGRESS"},"operation":null})"));

  server.dispatcher.releaseSavepoints();
  const Json done = waitForCompletion(server, kJobA, id);
  EXPECT_EQ(done, Json::parse(R"({"status":{"id":"COMPLETED"},
                                  "operation":{"location":"file:/savepoints/savepoint-new"}})"));
  const auto calls = server.dispatcher.savepointCalls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].jobId, kJobA);
  EXPECT_EQ(calls[0].directory, "/tmp/sp");
  EXPECT_FALSE(calls[0].terminate);
  EXPECT_FALSE(calls[0].drain);

  // cancel-job: a savepoint that stops the job; an empty body is {}.
  const Reply cancel = server.post("/jobs/" + kJobA + "/savepoints", R"({"cancel-job": true})");
  ASSERT_EQ(cancel.status, 202);
  waitForCompletion(server, kJobA, cancel.body["request-id"]);
  const Reply empty = server.post("/jobs/" + kJobA + "/savepoints", "");
  ASSERT_EQ(empty.status, 202) << empty.raw;
  waitForCompletion(server, kJobA, empty.body["request-id"]);
  const auto all = server.dispatcher.savepointCalls();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_TRUE(all[1].terminate);
  EXPECT_FALSE(all[1].drain);
  EXPECT_EQ(all[1].directory, "");
  EXPECT_FALSE(all[2].terminate);
}

TEST(WebMonitorActionsTest, StopWithSavepointDrains) {
  Server server;
  server.dispatcher.releaseSavepoints();
  const Reply t =
      server.post("/jobs/" + kJobA + "/stop", R"({"targetDirectory": "/sp", "drain": true})");
  ASSERT_EQ(t.status, 202) << t.raw;
  const Json done = waitForCompletion(server, kJobA, t.body["request-id"]);
  EXPECT_EQ(done["operation"]["location"], "file:/savepoints/savepoint-new");
  const auto calls = server.dispatcher.savepointCalls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].directory, "/sp");
  EXPECT_TRUE(calls[0].terminate);
  EXPECT_TRUE(calls[0].drain);
}

TEST(WebMonitorActionsTest, FailedSavepointReportsItsCause) {
  Server server;
  server.dispatcher.setSavepointResult(Status::ioError("cannot write /sp: disk full"));
  server.dispatcher.releaseSavepoints();
  const Reply t = server.post("/jobs/" + kJobA + "/savepoints", "{}");
  ASSERT_EQ(t.status, 202);
  const Json done = waitForCompletion(server, kJobA, t.body["request-id"]);
  expectKeys(done["operation"], {"failure-cause"});
  const Json& cause = done["operation"]["failure-cause"];
  expectKeys(cause, {"class", "stack-trace", "serialized-throwable"});
  EXPECT_NE(cause["stack-trace"].get<std::string>().find("disk full"), std::string::npos);
  EXPECT_FALSE(cause["serialized-throwable"].get<std::string>().empty());
}

TEST(WebMonitorActionsTest, SavepointTriggersAreBoundedAndIdempotent) {
  Server server;
  const std::string base = "/jobs/" + kJobA + "/savepoints";
  // The same client-chosen trigger id again is a retry, not a second savepoint.
  const std::string mine = "00000000000000000000000000000abc";
  const std::string body = R"({"triggerId": ")" + mine + R"("})";
  EXPECT_EQ(server.post(base, body).body["request-id"], mine);
  EXPECT_EQ(server.post(base, body).body["request-id"], mine);
  ASSERT_TRUE(test::waitUntil([&] { return server.dispatcher.savepointCalls().size() == 1; }));
  // ... and cannot name another job's operation.
  EXPECT_EQ(server.post("/jobs/" + kJobB + "/savepoints", body).status, 400);
  EXPECT_EQ(server.get("/jobs/" + kJobB + "/savepoints/" + mine).status, 404);

  // At most 16 run at once (one already does).
  for (int i = 1; i < 16; ++i) EXPECT_EQ(server.post(base, "{}").status, 202) << i;
  const Reply full = server.post(base, "{}");
  EXPECT_EQ(full.status, 503);
  EXPECT_NE(full.body["errors"][0].get<std::string>().find("too many"), std::string::npos);
  server.dispatcher.releaseSavepoints();
  const Json done = waitForCompletion(server, kJobA, mine);
  EXPECT_EQ(done["operation"]["location"], "file:/savepoints/savepoint-new");
  ASSERT_TRUE(test::waitUntil([&] {
    const Reply r = server.post(base, "{}");
    return r.status == 202;
  }));
}

TEST(WebMonitorActionsTest, StopsWhileServing) {
  auto server = std::make_unique<Server>();
  std::atomic<bool> done{false};
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, port = server->port()] {
      while (!done) {
        httplib::Client c("127.0.0.1", port);
        c.set_connection_timeout(2, 0);
        auto r = c.Get(("/jobs/" + kJobA).c_str());
        if (r && r->status == 200) ++answered;
      }
    });
  }
  ASSERT_TRUE(test::waitUntil([&] { return answered.load() > 20; }));
  server->monitor().stop();
  const int afterStop = answered.load();
  server.reset();
  done = true;
  for (auto& t : clients) t.join();
  // Requests in flight when stop() began may still finish, none after it returned.
  EXPECT_LE(answered.load(), afterStop + 4);
}

TEST(WebMonitorActionsTest, SavepointRequestErrors) {
  Server server;
  const std::string base = "/jobs/" + kJobA + "/savepoints";
  const Reply badJson = server.post(base, "{\"target-directory\": ");
  EXPECT_EQ(badJson.status, 400);
  EXPECT_NE(badJson.body["errors"][0].get<std::string>().find("not valid JSON"), std::string::npos);
  const Reply notObject = server.post(base, "[1, 2]");
  EXPECT_EQ(notObject.status, 400);
  const Reply wrongType = server.post(base, R"({"cancel-job": "yes"})");
  EXPECT_EQ(wrongType.status, 400);
  EXPECT_NE(wrongType.body["errors"][0].get<std::string>().find("cancel-job"), std::string::npos);
  EXPECT_EQ(server.post(base, R"({"target-directory": 7})").status, 400);
  EXPECT_EQ(server.post(base, R"({"formatType": "XML"})").status, 400);
  EXPECT_EQ(server.post("/jobs/" + kJobA + "/stop", R"({"drain": 1})").status, 400);
  EXPECT_EQ(server.post("/jobs/ffffffffffffffffffffffffffffffff/savepoints", "{}").status, 404);
  EXPECT_TRUE(server.dispatcher.savepointCalls().empty());

  EXPECT_EQ(server.get(base + "/0123456789abcdef0123456789abcdef").status, 404);
  EXPECT_EQ(server.get(base + "/not-a-trigger").status, 400);

  // A large body is refused before it is read (before it is sent, with
  // Expect: 100-continue); a chunked one needs a length.
  const std::string head = "POST " + base +
                           " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(2 << 20) +
                           "\r\n";
  const std::string big = rawExchange(server.port(), head + "\r\n");
  EXPECT_EQ(big.rfind("HTTP/1.1 413", 0), 0u) << big;
  const std::string expect = rawExchange(server.port(), head + "Expect: 100-continue\r\n\r\n");
  EXPECT_EQ(expect.rfind("HTTP/1.1 413", 0), 0u) << expect;
  const std::string chunked = rawExchange(
      server.port(), "POST " + base +
                         " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0"
                         "\r\n\r\n");
  EXPECT_EQ(chunked.rfind("HTTP/1.1 411", 0), 0u) << chunked;
  EXPECT_TRUE(server.dispatcher.savepointCalls().empty());
  EXPECT_EQ(server.get("/config").status, 200);
}

TEST(WebMonitorActionsTest, TokenGuardsEveryMutatingCall) {
  rest::WebMonitorOptions o;
  o.token = kToken;
  Server server(o);
  server.dispatcher.setSupportsJars(true);
  server.dispatcher.releaseSavepoints();
  EXPECT_EQ(server.get("/config").body["token-required"], true);

  const std::vector<httplib::Headers> wrong = {{},
                                               bearer("wrong"),
                                               bearer(kToken + "x"),
                                               bearer(kToken.substr(1)),
                                               {{"Authorization", "Basic " + kToken}},
                                               {{"Authorization", kToken}}};
  httplib::MultipartFormDataItems jar = {{"jarfile",
                                          "\x7f"
                                          "ELF",
                                          "libjob.so", ""}};
  for (const auto& h : wrong) {
    const Reply cancel = server.patch("/jobs/" + kJobA, h);
    EXPECT_EQ(cancel.status, 401);
    EXPECT_EQ(cancel.header("WWW-Authenticate").rfind("Bearer", 0), 0u);
    expectKeys(cancel.body, {"errors"});
    EXPECT_EQ(server.post("/jobs/" + kJobA + "/savepoints", "{}", h).status, 401);
    EXPECT_EQ(server.post("/jobs/" + kJobA + "/stop", "{}", h).status, 401);
    EXPECT_EQ(toReply(server.client().Post("/jars/upload", h, jar)).status, 401);
    EXPECT_EQ(server.post("/jars/x/run", "{}", h).status, 401);
    EXPECT_EQ(server.del("/jars/x", h).status, 401);
  }
  EXPECT_TRUE(server.dispatcher.cancelCalls().empty());
  EXPECT_TRUE(server.dispatcher.savepointCalls().empty());
  EXPECT_TRUE(server.dispatcher.uploads().empty());
  EXPECT_TRUE(server.dispatcher.runs().empty());
  EXPECT_TRUE(server.dispatcher.deletes().empty());

  // A refused upload leaves a kept-alive connection usable.
  httplib::Client keepAlive = server.client();
  keepAlive.set_keep_alive(true);
  EXPECT_EQ(toReply(keepAlive.Post("/jars/upload", {}, jar)).status, 401);
  EXPECT_EQ(toReply(keepAlive.Get("/jobs")).status, 200);
  EXPECT_EQ(toReply(keepAlive.Patch("/jobs/" + kJobA, "", "application/json")).status, 401);
  EXPECT_EQ(toReply(keepAlive.Get("/overview")).status, 200);

  // Reads stay open.
  EXPECT_EQ(server.get("/jobs").status, 200);
  EXPECT_EQ(server.get("/jobs/" + kJobA).status, 200);

  // With the token (the scheme in any case) every call goes through.
  EXPECT_EQ(server.patch("/jobs/" + kJobA, bearer(kToken)).status, 202);
  EXPECT_EQ(server.patch("/jobs/" + kJobA, {{"Authorization", "bearer " + kToken}}).status, 202);
  EXPECT_EQ(server.dispatcher.cancelCalls().size(), 2u);
  const Reply sp = server.post("/jobs/" + kJobA + "/savepoints", "{}", bearer(kToken));
  ASSERT_EQ(sp.status, 202);
  waitForCompletion(server, kJobA, sp.body["request-id"]);
  const Reply up = toReply(server.client().Post("/jars/upload", bearer(kToken), jar));
  EXPECT_EQ(up.status, 200) << up.raw;
  EXPECT_EQ(server.dispatcher.uploads().size(), 1u);
  EXPECT_EQ(server.post("/jars/0f0f_libjob.so/run", "{}", bearer(kToken)).status, 200);
  EXPECT_EQ(server.del("/jars/0f0f_libjob.so", bearer(kToken)).status, 200);
}

TEST(WebMonitorActionsTest, JarsNeedClusterModeAndWebSubmit) {
  Server embedded;
  const Reply r = embedded.get("/jars");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body["errors"][0].get<std::string>().find("cluster mode"), std::string::npos);
  httplib::MultipartFormDataItems jar = {{"jarfile", "bytes", "libjob.so", ""}};
  EXPECT_EQ(toReply(embedded.client().Post("/jars/upload", {}, jar)).status, 404);
  EXPECT_TRUE(embedded.dispatcher.uploads().empty());

  rest::WebMonitorOptions o;
  o.submitEnabled = false;
  Server disabled(o);
  disabled.dispatcher.setSupportsJars(true);
  const Reply off = toReply(disabled.client().Post("/jars/upload", {}, jar));
  EXPECT_EQ(off.status, 404);
  EXPECT_NE(off.body["errors"][0].get<std::string>().find("web.submit.enable"), std::string::npos);
  EXPECT_TRUE(disabled.dispatcher.uploads().empty());
}

TEST(WebMonitorActionsTest, UploadListRunAndDeleteJobLibraries) {
  Server server;
  server.dispatcher.setSupportsJars(true);
  std::string bytes = std::string(
                          "\x7f"
                          "ELF\x02\x01\x01",
                          7) +
                      std::string(3, '\0');
  for (int i = 0; i < 100000; ++i) bytes.push_back(static_cast<char>(i * 31));
  httplib::MultipartFormDataItems jar = {
      {"jarfile", bytes, "build/libwordcount.so", "application/x-sharedlib"}};
  const Reply up = toReply(server.client().Post("/jars/upload", {}, jar));
  ASSERT_EQ(up.status, 200) << up.raw;
  EXPECT_EQ(up.body, Json::parse(R"({"filename":"0f0f_libwordcount.so","status":"success"})"));
  const auto uploads = server.dispatcher.uploads();
  ASSERT_EQ(uploads.size(), 1u);
  ASSERT_TRUE(uploads.count("libwordcount.so"));  // the base name only
  EXPECT_EQ(uploads.at("libwordcount.so"), bytes);

  const Reply list = server.get("/jars");
  ASSERT_EQ(list.status, 200);
  expectKeys(list.body, {"address", "files"});
  EXPECT_EQ(list.body["address"], server.monitor().address());
  ASSERT_EQ(list.body["files"].size(), 1u);
  expectKeys(list.body["files"][0], {"id", "name", "uploaded", "entry"});
  EXPECT_EQ(list.body["files"][0]["id"], "0f0f_libwordcount.so");
  EXPECT_EQ(list.body["files"][0]["name"], "libwordcount.so");
  EXPECT_EQ(list.body["files"][0]["uploaded"], 1700000000000);
  EXPECT_EQ(list.body["files"][0]["entry"], Json::array());

  const std::string run = "/jars/0f0f_libwordcount.so/run";
  const Reply r = server.post(run, R"({"programArgs": "--input 'a b' \"c \\\"d\\\"\" e\\ f",
                                      "parallelism": 3, "savepointPath": "/sp/1",
                                      "allowNonRestoredState": true})");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body, Json::parse(R"({"jobid":"feedfacefeedfacefeedfacefeedface"})"));
  auto runs = server.dispatcher.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].first, "0f0f_libwordcount.so");
  EXPECT_EQ(runs[0].second.programArgs,
            (std::vector<std::string>{"--input", "a b", "c \"d\"", "e f"}));
  EXPECT_EQ(runs[0].second.parallelism, 3);
  EXPECT_EQ(runs[0].second.savepointPath, "/sp/1");
  EXPECT_TRUE(runs[0].second.allowNonRestoredState);

  // A list in the body, or query parameters when the body has none.
  EXPECT_EQ(server.post(run, R"({"programArgsList": ["x y", "z"]})").status, 200);
  EXPECT_EQ(
      server.post(run + "?programArg=p,q&parallelism=2&allowNonRestoredState=false", "").status,
      200);
  EXPECT_EQ(server.post(run + "?program-args=--a%20%27b%20c%27", "").status, 200);
  runs = server.dispatcher.runs();
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[1].second.programArgs, (std::vector<std::string>{"x y", "z"}));
  EXPECT_EQ(runs[1].second.parallelism, -1);
  EXPECT_EQ(runs[2].second.programArgs, (std::vector<std::string>{"p", "q"}));
  EXPECT_EQ(runs[2].second.parallelism, 2);
  EXPECT_FALSE(runs[2].second.allowNonRestoredState);
  EXPECT_EQ(runs[3].second.programArgs, (std::vector<std::string>{"--a", "b c"}));

  for (const char* bad :
       {R"({"programArgs": "a", "programArgsList": ["b"]})", R"({"programArgs": "'unterminated"})",
        R"({"programArgsList": [1]})", R"({"parallelism": 0})", R"({"parallelism": "2"})", "{"}) {
    EXPECT_EQ(server.post(run, bad).status, 400) << bad;
  }
  EXPECT_EQ(server.post(run + "?parallelism=zero", "").status, 400);
  EXPECT_EQ(server.dispatcher.runs().size(), 4u);
  EXPECT_EQ(server.post("/jars/unknown.so/run", "{}").status, 404);

  EXPECT_EQ(server.del("/jars/0f0f_libwordcount.so").status, 200);
  EXPECT_EQ(server.del("/jars/0f0f_libwordcount.so").status, 404);
  EXPECT_EQ(server.get("/jars").body["files"], Json::array());
}

TEST(WebMonitorActionsTest, UploadRejectsWhatIsNotAJobLibrary) {
  Server server;
  server.dispatcher.setSupportsJars(true);
  auto upload = [&](httplib::MultipartFormDataItems items) {
    return toReply(server.client().Post("/jars/upload", {}, items));
  };
  const Reply jarFile = upload({{"jarfile", "PK\x03\x04", "job.jar", ""}});
  EXPECT_EQ(jarFile.status, 400);
  EXPECT_NE(jarFile.body["errors"][0].get<std::string>().find(".so"), std::string::npos);
  EXPECT_EQ(upload({{"jarfile", "", "libempty.so", ""}}).status, 400);
  EXPECT_EQ(upload({{"jarfile", "x", "lib\x01evil.so", ""}}).status, 400);
  EXPECT_EQ(upload({{"jarfile", "x", "lib job.so", ""}}).status, 400);
  EXPECT_EQ(upload({{"a", "x", "liba.so", ""}, {"b", "y", "libb.so", ""}}).status, 400);
  const Reply notMultipart = server.post("/jars/upload", "{}");
  EXPECT_EQ(notMultipart.status, 400);
  EXPECT_NE(notMultipart.body["errors"][0].get<std::string>().find("multipart"), std::string::npos);
  EXPECT_TRUE(server.dispatcher.uploads().empty());
  // One file in another field is taken, as Flink takes any single file.
  EXPECT_EQ(upload({{"file", "x", "libother.so", ""}}).status, 200);
}

// ---- TLS ----

bool makeCertificate(const test::TempDir& dir, const std::string& cert, const std::string& key) {
  const std::string cmd =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
      "-subj /CN=localhost -addext subjectAltName=DNS:localhost -keyout '" +
      dir.file(key) + "' -out '" + dir.file(cert) + "' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

TEST(WebMonitorActionsTest, TlsServesHttpsAndRefusesPlainHttp) {
  test::TempDir dir("rest-tls");
  ASSERT_TRUE(makeCertificate(dir, "cert.pem", "key.pem")) << "the openssl command failed";
  fake_dispatcher::FakeDispatcher dispatcher;
  rest::WebMonitorOptions o;
  o.port = 0;
  o.ssl = true;
  o.certificateFile = dir.file("cert.pem");
  o.keyFile = dir.file("key.pem");
  rest::WebMonitor monitor(dispatcher, o);
  const Status s = monitor.start();
  ASSERT_TRUE(s.isOk()) << s.toString();
  EXPECT_EQ(monitor.address(), "https://127.0.0.1:" + std::to_string(monitor.port()));

  auto https = [&] {
    // By name: httplib 0.11 reads uninitialised bytes when it checks an IP
    // address against the certificate.
    httplib::SSLClient c("localhost", monitor.port());
    c.set_ca_cert_path(o.certificateFile.c_str());
    c.enable_server_certificate_verification(true);
    return toReply(c.Get("/jobs"));
  };
  const Reply first = https();
  ASSERT_EQ(first.status, 200);
  EXPECT_EQ(first.body["jobs"].size(), 4u);

  httplib::Client plain("127.0.0.1", monitor.port());
  plain.set_read_timeout(10, 0);
  auto refused = plain.Get("/jobs");
  EXPECT_FALSE(refused) << "a plain HTTP request got an answer: " << refused->status;
  EXPECT_EQ(rawExchange(monitor.port(), "GET /jobs HTTP/1.1\r\nHost: x\r\n\r\n").find("HTTP/"),
            std::string::npos);

  EXPECT_EQ(https().status, 200);  // still serving
  monitor.stop();
}

TEST(WebMonitorActionsTest, TlsFileErrorsNameTheFileAndTheKey) {
  test::TempDir dir("rest-tls-errors");
  ASSERT_TRUE(makeCertificate(dir, "cert.pem", "key.pem"));
  ASSERT_TRUE(makeCertificate(dir, "other-cert.pem", "other-key.pem"));
  const std::string garbage = dir.write("garbage.pem", "not a certificate\n");
  fake_dispatcher::FakeDispatcher dispatcher;
  auto start = [&](const std::string& cert, const std::string& key) {
    rest::WebMonitorOptions o;
    o.port = 0;
    o.ssl = true;
    o.certificateFile = cert;
    o.keyFile = key;
    rest::WebMonitor m(dispatcher, o);
    return m.start();
  };
  const std::string missing = dir.file("missing.pem");
  Status s = start(missing, dir.file("key.pem"));
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find(missing), std::string::npos) << s.toString();
  EXPECT_NE(s.message().find("security.ssl.rest.keystore"), std::string::npos) << s.toString();

  s = start(dir.file("cert.pem"), missing);
  EXPECT_NE(s.message().find(missing), std::string::npos) << s.toString();
  EXPECT_NE(s.message().find("security.ssl.rest.key"), std::string::npos) << s.toString();

  s = start(garbage, dir.file("key.pem"));
  EXPECT_NE(s.message().find(garbage), std::string::npos) << s.toString();
  EXPECT_NE(s.message().find("security.ssl.rest.keystore"), std::string::npos) << s.toString();

  s = start(dir.file("cert.pem"), garbage);
  EXPECT_NE(s.message().find(garbage), std::string::npos) << s.toString();
  EXPECT_NE(s.message().find("security.ssl.rest.key"), std::string::npos) << s.toString();

  s = start(dir.file("cert.pem"), dir.file("other-key.pem"));
  EXPECT_NE(s.message().find("does not belong"), std::string::npos) << s.toString();

  s = start("", dir.file("key.pem"));
  EXPECT_NE(s.message().find("security.ssl.rest.keystore"), std::string::npos) << s.toString();
}

// ---- parameters ----

TEST(WebMonitorActionsTest, ProgramArgumentsSplitLikeAShell) {
  auto split = [](std::string_view s) { return rest::splitProgramArgs(s); };
  EXPECT_EQ(split("").value(), std::vector<std::string>{});
  EXPECT_EQ(split("  a   b\tc ").value(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(split("--x='1 2' \"q \\\"z\\\"\" a\\ b ''").value(),
            (std::vector<std::string>{"--x=1 2", "q \"z\"", "a b", ""}));
  EXPECT_EQ(split("'a\\b'").value(), (std::vector<std::string>{"a\\b"}));
  EXPECT_FALSE(split("'open").isOk());
  EXPECT_FALSE(split("\"open").isOk());
  EXPECT_NE(split("a \"b").status().message().find("double quote"), std::string::npos);
}

TEST(WebMonitorActionsTest, SubtaskSelectionAndAggregations) {
  auto sel = rest::parseSubtaskSelection("0, 2-4,7");
  ASSERT_TRUE(sel.isOk());
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(sel.value().contains(i), i == 0 || (i >= 2 && i <= 4) || i == 7) << i;
  }
  EXPECT_TRUE(rest::parseSubtaskSelection("").value().contains(12345));
  for (const char* bad : {"x", "1-", "-1", "3-1", "1.5", ",,"}) {
    const auto r = rest::parseSubtaskSelection(bad);
    EXPECT_FALSE(r.isOk()) << bad;
    if (!r.isOk()) {
      EXPECT_NE(r.status().message().find("subtasks"), std::string::npos) << bad;
    }
  }
  const auto a = rest::parseAggregations("Max,sum");
  ASSERT_TRUE(a.isOk());
  EXPECT_FALSE(a.value().min);
  EXPECT_TRUE(a.value().max);
  EXPECT_FALSE(a.value().avg);
  EXPECT_TRUE(a.value().sum);
  const auto all = rest::parseAggregations("");
  EXPECT_TRUE(all.value().min && all.value().max && all.value().avg && all.value().sum);
  EXPECT_FALSE(rest::parseAggregations("min,p99").isOk());
  EXPECT_TRUE(rest::isHexId("0123456789ABCDEFabcdef0123456789"));
  EXPECT_FALSE(rest::isHexId("0123456789abcdef0123456789abcde"));
  EXPECT_FALSE(rest::isHexId("0123456789abcdef0123456789abcdeg"));
}

}  // namespace
}  // namespace web_monitor_actions_test
}  // namespace sluice
