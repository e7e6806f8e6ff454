#include "rest/rest_router.h"

#include <cctype>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/text.h"

namespace sluice::rest {
namespace {

constexpr const char* kJsonType = "application/json; charset=UTF-8";

std::vector<std::string> splitPath(const std::string& path) {
  std::vector<std::string> out;
  if (path.empty() || path == "/") return out;
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool isParameter(const std::string& segment) { return !segment.empty() && segment[0] == ':'; }

}  // namespace

void sendJson(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_header("Cache-Control", "no-cache, no-store, must-revalidate");
  res.set_header("Pragma", "no-cache");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace), kJsonType);
}

void sendError(httplib::Response& res, int status, const std::string& message) {
  sendJson(res, status, Json{{"errors", Json::array({message})}});
}

std::string lowerAscii(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string normalizePath(const std::string& path) {
  std::string p = path.empty() ? "/" : path;
  if (p == "/v1") return "/";
  if (p.rfind("/v1/", 0) == 0) p = p.substr(3);
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

void Router::add(const std::string& method, const std::string& pattern, Handler handler) {
  for (Route& r : routes_) {
    if (r.pattern == pattern) {
      r.methods[method] = std::move(handler);
      return;
    }
  }
  Route r;
  r.pattern = pattern;
  r.segments = splitPath(pattern);
  for (const std::string& s : r.segments) r.literals += isParameter(s) ? 0 : 1;
  r.methods[method] = std::move(handler);
  routes_.push_back(std::move(r));
}

const Router::Route* Router::match(const std::vector<std::string>& segments,
                                   std::map<std::string, std::string>* params) const {
  const Route* best = nullptr;
  for (const Route& r : routes_) {
    if (r.segments.size() != segments.size()) continue;
    bool ok = true;
    for (size_t i = 0; ok && i < segments.size(); ++i) {
      ok = isParameter(r.segments[i]) ? !segments[i].empty() : r.segments[i] == segments[i];
    }
    if (ok && (!best || r.literals > best->literals)) best = &r;
  }
  if (best) {
    for (size_t i = 0; i < segments.size(); ++i) {
      if (isParameter(best->segments[i])) (*params)[best->segments[i].substr(1)] = segments[i];
    }
  }
  return best;
}

std::string Router::allowed(const Route& r) {
  std::string out;
  for (const auto& [m, h] : r.methods) out += (out.empty() ? "" : ", ") + m;
  return out;
}

bool Router::dispatch(const std::string& path, const httplib::Request& req,
                      httplib::Response& res) const {
  std::map<std::string, std::string> params;
  const Route* r = match(splitPath(path), &params);
  if (!r) return false;
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  if (method == "OPTIONS") {
    res.status = 204;
    res.set_header("Allow", allowed(*r));
    return true;
  }
  auto h = r->methods.find(method);
  if (h == r->methods.end()) {
    res.set_header("Allow", allowed(*r));
    sendError(res, 405,
              fmt::format("Method {} is not allowed on {}; allowed: {}",
                          escapeForMessage(req.method), r->pattern, allowed(*r)));
    return true;
  }
  Call call{req, res, std::move(params)};
  h->second(call);
  return true;
}

}  // namespace sluice::rest
