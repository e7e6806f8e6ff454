// The REST endpoint's router: Flink's path patterns ("/jobs/:jobid/plan")
// with one handler per method, and Flink's JSON answers. Internal to
// rest/web_monitor; includes httplib, so only the endpoint's .cc files use it.
//
// A path matches the pattern with the same number of segments whose literal
// segments equal it, preferring the pattern with the most literals
// ("/jobs/overview" over "/jobs/:jobid"). A matched path with a method the
// pattern has no handler for is 405 with an Allow header.
#pragma once

#include <httplib.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sluice::rest {

using Json = nlohmann::json;

// A JSON response: `application/json; charset=UTF-8`, not cached.
void sendJson(httplib::Response& res, int status, const Json& body);
// Flink's error body {"errors": [message]}.
void sendError(httplib::Response& res, int status, const std::string& message);

std::string lowerAscii(std::string s);
// The path Flink routes: without the optional "/v1" version prefix (Flink's
// REST client sends it) and without a trailing slash.
std::string normalizePath(const std::string& path);

// What a route's handler gets.
struct Call {
  const httplib::Request& http;
  httplib::Response& res;
  std::map<std::string, std::string> params;  // "jobid" -> the path's value

  const std::string& param(const std::string& name) const { return params.at(name); }
  std::optional<std::string> query(const std::string& name) const {
    if (!http.has_param(name)) return std::nullopt;
    return http.get_param_value(name);
  }
};

using Handler = std::function<void(Call&)>;

class Router {
 public:
  void add(const std::string& method, const std::string& pattern, Handler handler);

  // Runs the handler of `req` (HEAD as GET; OPTIONS answers 204 with Allow)
  // or answers 405. False when no pattern matches the normalized `path`.
  bool dispatch(const std::string& path, const httplib::Request& req, httplib::Response& res) const;

 private:
  struct Route {
    std::string pattern;
    std::vector<std::string> segments;
    int literals = 0;
    std::map<std::string, Handler> methods;
  };
  const Route* match(const std::vector<std::string>& segments,
                     std::map<std::string, std::string>* params) const;
  static std::string allowed(const Route& r);

  std::vector<Route> routes_;
};

}  // namespace sluice::rest
