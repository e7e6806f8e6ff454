// Helpers of the REST endpoint's unit tests: a WebMonitor on port 0 over a
// FakeDispatcher, HTTP calls that return the status and the parsed JSON, and
// a check that a JSON object has exactly Flink's fields.
#pragma once

#include <httplib.h>

#include <initializer_list>
#include <memory>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fake_dispatcher.h"
#include "rest/web_monitor.h"

namespace sluice::rest_client {

using Json = nlohmann::json;

struct Reply {
  int status = 0;  // 0: no response (connection failed)
  Json body;       // parsed when the response is JSON
  std::string raw;
  httplib::Headers headers;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

inline Reply toReply(const httplib::Result& r) {
  Reply out;
  if (!r) return out;
  out.status = r->status;
  out.raw = r->body;
  out.headers = r->headers;
  if (r->get_header_value("Content-Type").find("application/json") != std::string::npos) {
    out.body = Json::parse(r->body, nullptr, false);
  }
  return out;
}

// Exactly these keys (Flink's field set of the object).
inline void expectKeys(const Json& j, std::initializer_list<const char*> keys,
                       const std::string& where = "") {
  ASSERT_TRUE(j.is_object()) << where << ": " << j.dump();
  std::set<std::string> expected(keys.begin(), keys.end());
  std::set<std::string> actual;
  for (auto it = j.begin(); it != j.end(); ++it) actual.insert(it.key());
  EXPECT_EQ(actual, expected) << where << ": " << j.dump();
}

// A started WebMonitor on a free port of 127.0.0.1.
class Server {
 public:
  explicit Server(rest::WebMonitorOptions options = {}) {
    options.port = 0;
    options.bindAddress = "127.0.0.1";
    monitor_ = std::make_unique<rest::WebMonitor>(dispatcher, options);
    const Status s = monitor_->start();
    EXPECT_TRUE(s.isOk()) << s.toString();
  }
  ~Server() {
    dispatcher.releaseSavepoints();
    monitor_->stop();
  }

  int port() const { return monitor_->port(); }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port());
    c.set_read_timeout(30, 0);
    return c;
  }
  Reply get(const std::string& path) const { return toReply(client().Get(path.c_str())); }
  Reply post(const std::string& path, const std::string& body,
             const httplib::Headers& headers = {}) const {
    return toReply(client().Post(path.c_str(), headers, body, "application/json"));
  }
  Reply patch(const std::string& path, const httplib::Headers& headers = {}) const {
    return toReply(client().Patch(path.c_str(), headers, "", "application/json"));
  }
  Reply del(const std::string& path, const httplib::Headers& headers = {}) const {
    return toReply(client().Delete(path.c_str(), headers));
  }

  fake_dispatcher::FakeDispatcher dispatcher;
  rest::WebMonitor& monitor() { return *monitor_; }

 private:
  std::unique_ptr<rest::WebMonitor> monitor_;
};

}  // namespace sluice::rest_client
