// The handlers of Flink's REST paths over a Dispatcher
// (rest/rest_handlers.h): each validates its path and query parameters and
// its body, calls the Dispatcher, and answers with rest_json's bodies or
// Flink's {"errors": [...]}.
#include "rest/rest_handlers.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/text.h"
#include "rest/rest_json.h"
#include "rest/rest_params.h"
#include "rest/savepoint_operations.h"
#include "rest/web_monitor.h"

namespace sluice::rest {
namespace {

// Flink's default of the exceptions handler's maxExceptions.
constexpr int64_t kDefaultMaxExceptions = 20;

std::string base64(std::string_view in) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t n = (static_cast<uint8_t>(in[i]) << 16) |
                       (static_cast<uint8_t>(in[i + 1]) << 8) | static_cast<uint8_t>(in[i + 2]);
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(kAlphabet[(n >> 6) & 63]);
    out.push_back(kAlphabet[n & 63]);
  }
  if (i < in.size()) {
    uint32_t n = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) n |= static_cast<uint8_t>(in[i + 1]) << 8;
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? kAlphabet[(n >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

// The HTTP status of a Dispatcher failure.
int httpStatusOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kNotFound: return 404;
    case StatusCode::kInvalidArgument: return 400;
    default: return 500;
  }
}

// A field of a JSON request body, checked for its type.
template <class T>
Status readField(const Json& body, const char* name, std::optional<T>* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return Status::ok();
  if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) {
      return Status::invalidArgument(
          fmt::format("field '{}' must be true or false, got {}", name, it->dump()));
    }
    *out = it->template get<bool>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) {
      return Status::invalidArgument(
          fmt::format("field '{}' must be a string, got {}", name, it->dump()));
    }
    *out = it->template get<std::string>();
  } else if constexpr (std::is_same_v<T, int64_t>) {
    if (!it->is_number_integer()) {
      return Status::invalidArgument(
          fmt::format("field '{}' must be an integer, got {}", name, it->dump()));
    }
    *out = it->template get<int64_t>();
  } else {
    static_assert(std::is_same_v<T, std::vector<std::string>>);
    bool ok = it->is_array();
    if (ok) {
      for (const Json& e : *it) ok = ok && e.is_string();
    }
    if (!ok) {
      return Status::invalidArgument(
          fmt::format("field '{}' must be an array of strings, got {}", name, it->dump()));
    }
    *out = it->template get<std::vector<std::string>>();
  }
  return Status::ok();
}

}  // namespace

class RestHandlers::Impl {
 public:
  Impl(Dispatcher& dispatcher, const WebMonitorOptions& options,
       std::function<std::string()> address)
      : dispatcher_(dispatcher),
        options_(options),
        address_(std::move(address)),
        savepoints_(dispatcher) {}

  void stop() { savepoints_.stop(); }

  // ---- lookups that answer the error themselves ----

  std::optional<JobInfo> findJob(Call& c) {
    const std::string& id = c.param("jobid");
    if (!isHexId(id)) {
      sendError(c.res, 400,
                fmt::format("Invalid job id '{}': a job id is 32 hexadecimal characters",
                            escapeForMessage(id)));
      return std::nullopt;
    }
    auto job = dispatcher_.job(lowerAscii(id));
    if (!job) sendError(c.res, 404, fmt::format("Job {} not found", id));
    return job;
  }

  const VertexInfo* findVertex(Call& c, const JobInfo& job) {
    const std::string& id = c.param("vertexid");
    if (!isHexId(id)) {
      sendError(c.res, 400,
                fmt::format("Invalid vertex id '{}': a vertex id is 32 hexadecimal characters",
                            escapeForMessage(id)));
      return nullptr;
    }
    const std::string lower = lowerAscii(id);
    for (const VertexInfo& v : job.vertices) {
      if (v.id == lower) return &v;
    }
    sendError(c.res, 404, fmt::format("Vertex {} not found in job {}", id, job.id));
    return nullptr;
  }

  // The JSON object in the body ({} when empty), or an error answered.
  std::optional<Json> jsonBody(Call& c) {
    const std::string& b = c.http.body;
    if (b.find_first_not_of(" \t\r\n") == std::string::npos) return Json::object();
    try {
      Json j = Json::parse(b);
      if (!j.is_object()) {
        sendError(c.res, 400, "Request body must be a JSON object");
        return std::nullopt;
      }
      return j;
    } catch (const Json::parse_error& e) {
      sendError(c.res, 400, std::string("Request body is not valid JSON: ") + e.what());
      return std::nullopt;
    }
  }

  bool check(Call& c, const Status& s) {
    if (s.isOk()) return true;
    sendError(c.res, 400, s.message());
    return false;
  }

  template <class T>
  bool queryValue(Call& c, const std::string& name, Result<T> (*parse)(std::string_view),
                  std::optional<T>* out) {
    auto q = c.query(name);
    if (!q) return true;
    auto v = parse(*q);
    if (!v.isOk()) return check(c, v.status());
    *out = std::move(v).value();
    return true;
  }

  bool jarsAvailable(Call& c) {
    if (!options_.submitEnabled) {
      sendError(c.res, 404,
                "Job upload and submission over REST are disabled (web.submit.enable: false)");
      return false;
    }
    if (!dispatcher_.supportsJars()) {
      sendError(c.res, 404,
                "Job libraries can only be uploaded to a cluster (sluice jobmanager); this "
                "endpoint serves an embedded job, so /jars needs cluster mode");
      return false;
    }
    return true;
  }

  // ---- handlers ----

  void addRoutes(Router& router) {
    auto bind = [this](void (Impl::*fn)(Call&)) { return [this, fn](Call& c) { (this->*fn)(c); }; };
    router.add("GET", "/config", bind(&Impl::getConfig));
    router.add("GET", "/overview", bind(&Impl::getOverview));
    router.add("GET", "/jobs", bind(&Impl::getJobs));
    router.add("GET", "/jobs/overview", bind(&Impl::getJobsOverview));
    router.add("GET", "/jobs/:jobid", bind(&Impl::getJob));
    router.add("PATCH", "/jobs/:jobid", bind(&Impl::patchJob));
    router.add("GET", "/jobs/:jobid/plan", bind(&Impl::getPlan));
    router.add("GET", "/jobs/:jobid/exceptions", bind(&Impl::getExceptions));
    router.add("GET", "/jobs/:jobid/metrics", bind(&Impl::getJobMetrics));
    router.add("GET", "/jobs/:jobid/checkpoints", bind(&Impl::getCheckpoints));
    router.add("GET", "/jobs/:jobid/checkpoints/config", bind(&Impl::getCheckpointConfig));
    router.add("GET", "/jobs/:jobid/checkpoints/details/:checkpointid",
               bind(&Impl::getCheckpointDetails));
    router.add("POST", "/jobs/:jobid/savepoints", bind(&Impl::postSavepoint));
    router.add("GET", "/jobs/:jobid/savepoints/:triggerid", bind(&Impl::getSavepointStatus));
    router.add("POST", "/jobs/:jobid/stop", bind(&Impl::postStop));
    router.add("GET", "/jobs/:jobid/vertices/:vertexid", bind(&Impl::getVertex));
    router.add("GET", "/jobs/:jobid/vertices/:vertexid/metrics", bind(&Impl::getVertexMetrics));
    router.add("GET", "/jobs/:jobid/vertices/:vertexid/subtasks/metrics",
               bind(&Impl::getAggregatedSubtaskMetrics));
    router.add("GET", "/jobs/:jobid/vertices/:vertexid/subtasks/:subtaskindex",
               bind(&Impl::getSubtask));
    router.add("GET", "/jobs/:jobid/vertices/:vertexid/subtasks/:subtaskindex/metrics",
               bind(&Impl::getSubtaskMetrics));
    router.add("GET", "/jobs/:jobid/vertices/:vertexid/backpressure", bind(&Impl::getBackpressure));
    router.add("GET", "/jobs/:jobid/vertices/:vertexid/watermarks", bind(&Impl::getWatermarks));
    router.add("GET", "/jobmanager/metrics", bind(&Impl::getJobManagerMetrics));
    router.add("GET", "/taskmanagers", bind(&Impl::getTaskManagers));
    router.add("GET", "/taskmanagers/:taskmanagerid", bind(&Impl::getTaskManager));
    router.add("GET", "/taskmanagers/:taskmanagerid/metrics", bind(&Impl::getTaskManagerMetrics));
    router.add("GET", "/jars", bind(&Impl::getJars));
    router.add("POST", "/jars/upload", bind(&Impl::postJarUpload));
    router.add("DELETE", "/jars/:jarid", bind(&Impl::deleteJar));
    router.add("POST", "/jars/:jarid/run", bind(&Impl::postJarRun));
  }

  void getConfig(Call& c) {
    sendJson(c.res, 200,
             dashboardConfig(options_, options_.submitEnabled && dispatcher_.supportsJars()));
  }

  void getOverview(Call& c) {
    sendJson(c.res, 200, clusterOverview(dispatcher_.overview(), dispatcher_.jobs()));
  }

  void getJobs(Call& c) { sendJson(c.res, 200, jobIds(dispatcher_.jobs())); }

  void getJobsOverview(Call& c) { sendJson(c.res, 200, jobsOverview(dispatcher_.jobs())); }

  void getJob(Call& c) {
    auto job = findJob(c);
    if (!job) return;
    sendJson(c.res, 200, jobDetails(*job, dispatcher_.metrics(), nowMs()));
  }

  void getPlan(Call& c) {
    auto job = findJob(c);
    if (!job) return;
    sendJson(c.res, 200, Json{{"plan", jobPlan(*job)}});
  }

  void getExceptions(Call& c) {
    auto job = findJob(c);
    if (!job) return;
    int64_t max = kDefaultMaxExceptions;
    if (auto q = c.query("maxExceptions")) {
      auto v = parseInteger(*q, "query parameter 'maxExceptions'", 0, 1 << 20);
      if (!check(c, v.status())) return;
      max = v.value();
    }
    sendJson(c.res, 200, jobExceptions(*job, static_cast<size_t>(max)));
  }

  void getJobMetrics(Call& c) {
    auto job = findJob(c);
    if (!job) return;
    const MetricStore m = dispatcher_.metrics();
    auto it = m.jobs.find(job->id);
    sendJson(c.res, 200,
             metricQuery(it == m.jobs.end() ? MetricStore::Values{} : it->second, c.query("get")));
  }

  void getCheckpoints(Call& c) {
    auto job = findJob(c);
    if (!job) return;
    sendJson(c.res, 200, checkpointingStatistics(*job));
  }

  void getCheckpointConfig(Call& c) {
    auto job = findJob(c);
    if (!job) return;
    if (!job->checkpoints.enabled) {
      sendError(c.res, 404,
                fmt::format("Checkpointing is not enabled for this job ({}).", job->id));
      return;
    }
    sendJson(c.res, 200, checkpointConfig(*job));
  }

  void getCheckpointDetails(Call& c) {
    auto job = findJob(c);
    if (!job) return;
    auto id = parseInteger(c.param("checkpointid"), "path parameter 'checkpointid'", 0,
                           std::numeric_limits<int64_t>::max());
    if (!check(c, id.status())) return;
    for (const CheckpointInfo& ci : job->checkpoints.history) {
      if (ci.id == id.value()) {
        sendJson(c.res, 200, checkpointDetails(*job, ci));
        return;
      }
    }
    sendError(c.res, 404,
              fmt::format("Checkpoint {} of job {} is unknown or no longer among the {} "
                          "checkpoints kept (web.checkpoints.history)",
                          id.value(), job->id, job->checkpoints.history.size()));
  }

  void patchJob(Call& c) {
    const std::string& id = c.param("jobid");
    if (!isHexId(id)) {
      sendError(c.res, 400,
                fmt::format("Invalid job id '{}': a job id is 32 hexadecimal characters",
                            escapeForMessage(id)));
      return;
    }
    if (auto mode = c.query("mode")) {
      const std::string m = lowerAscii(*mode);
      if (m == "stop") {
        sendError(c.res, 400,
                  "query parameter 'mode': stop is not supported (as in Flink); cancel with "
                  "mode=cancel, or stop with a savepoint with POST /jobs/:jobid/stop");
        return;
      }
      if (m != "cancel") {
        sendError(c.res, 400,
                  fmt::format("query parameter 'mode': unknown termination mode '{}' (expected "
                              "cancel)",
                              escapeForMessage(*mode)));
        return;
      }
    }
    const Status s = dispatcher_.cancel(lowerAscii(id));
    if (s.isOk()) {
      sendJson(c.res, 202, Json::object());
    } else if (s.code() == StatusCode::kNotFound) {
      sendError(c.res, 404, s.message());
    } else if (s.code() == StatusCode::kInvalidArgument) {
      sendError(c.res, 409, s.message());  // Flink: the job already reached another end
    } else {
      sendError(c.res, 500, s.message());
    }
  }

  // POST .../savepoints and .../stop.
  void triggerSavepoint(Call& c, bool stop) {
    auto job = findJob(c);
    if (!job) return;
    auto body = jsonBody(c);
    if (!body) return;
    std::optional<std::string> dir, format, triggerId;
    std::optional<bool> terminate, drain;
    if (!check(c, readField(*body, stop ? "targetDirectory" : "target-directory", &dir))) return;
    if (stop) {
      if (!check(c, readField(*body, "drain", &drain))) return;
    } else {
      if (!check(c, readField(*body, "cancel-job", &terminate))) return;
    }
    if (!check(c, readField(*body, "formatType", &format))) return;
    if (format && *format != "CANONICAL" && *format != "NATIVE") {
      sendError(c.res, 400,
                fmt::format("field 'formatType': expected CANONICAL or NATIVE, got '{}'",
                            escapeForMessage(*format)));
      return;
    }
    if (!check(c, readField(*body, "triggerId", &triggerId))) return;
    if (triggerId && !isHexId(*triggerId)) {
      sendError(c.res, 400,
                fmt::format("field 'triggerId': expected 32 hexadecimal characters, got '{}'",
                            escapeForMessage(*triggerId)));
      return;
    }
    auto id =
        savepoints_.trigger(job->id, dir.value_or(""), stop || terminate.value_or(false),
                            stop && drain.value_or(false), lowerAscii(triggerId.value_or("")));
    if (!id.isOk()) {
      const bool badId = id.status().code() == StatusCode::kInvalidArgument;
      sendError(c.res, badId ? 400 : 503, id.status().message());
      return;
    }
    sendJson(c.res, 202, Json{{"request-id", id.value()}});
  }

  void postSavepoint(Call& c) { triggerSavepoint(c, false); }
  void postStop(Call& c) { triggerSavepoint(c, true); }

  void getSavepointStatus(Call& c) {
    auto job = findJob(c);
    if (!job) return;
    const std::string& trigger = c.param("triggerid");
    if (!isHexId(trigger)) {
      sendError(c.res, 400,
                fmt::format("Invalid trigger id '{}': a trigger id is 32 hexadecimal characters",
                            escapeForMessage(trigger)));
      return;
    }
    auto op = savepoints_.status(job->id, lowerAscii(trigger));
    if (!op) {
      sendError(c.res, 404,
                fmt::format("Savepoint operation {} of job {} is unknown or no longer kept",
                            trigger, job->id));
      return;
    }
    if (!op->done) {
      sendJson(c.res, 200, Json{{"status", {{"id", "IN_PROGRESS"}}}, {"operation", nullptr}});
      return;
    }
    Json operation;
    if (op->error.isOk()) {
      operation = Json{{"location", op->location}};
    } else {
      const std::string trace = op->error.toString();
      operation = Json{{"failure-cause",
                        {{"class", "sluice::SluiceException"},
                         {"stack-trace", trace},
                         {"serialized-throwable", base64(trace)}}}};
    }
    sendJson(c.res, 200, Json{{"status", {{"id", "COMPLETED"}}}, {"operation", operation}});
  }

  void getVertex(Call& c) {
    auto job = findJob(c);
    if (!job) return;
    const VertexInfo* v = findVertex(c, *job);
    if (!v) return;
    sendJson(c.res, 200, vertexDetails(*job, *v, dispatcher_.metrics(), nowMs()));
  }

  // The subtask of the path's :subtaskindex, or an error answered.
  const SubtaskInfo* findSubtask(Call& c, const VertexInfo& v) {
    auto index = parseInteger(c.param("subtaskindex"), "path parameter 'subtaskindex'", 0,
                              std::numeric_limits<int>::max());
    if (!check(c, index.status())) return nullptr;
    for (const SubtaskInfo& s : v.subtasks) {
      if (s.subtask == index.value()) return &s;
    }
    sendError(c.res, 404,
              fmt::format("Vertex {} has no subtask {} (parallelism {})", v.id, index.value(),
                          v.parallelism));
    return nullptr;
  }

  void getSubtask(Call& c) {
    auto job = findJob(c);
    if (!job) return;
    const VertexInfo* v = findVertex(c, *job);
    if (!v) return;
    const SubtaskInfo* s = findSubtask(c, *v);
    if (!s) return;
    sendJson(c.res, 200, subtaskDetails(*job, *v, *s, dispatcher_.metrics(), nowMs()));
  }

  void getVertexMetrics(Call& c) {
    auto job = findJob(c);
    if (!job) return;
    const VertexInfo* v = findVertex(c, *job);
    if (!v) return;
    sendJson(
        c.res, 200,
        metricQuery(vertexMetricValues(dispatcher_.metrics(), job->id, v->id), c.query("get")));
  }

  void getSubtaskMetrics(Call& c) {
    auto job = findJob(c);
    if (!job) return;
    const VertexInfo* v = findVertex(c, *job);
    if (!v) return;
    const SubtaskInfo* s = findSubtask(c, *v);
    if (!s) return;
    const MetricStore m = dispatcher_.metrics();
    const MetricStore::Values* values = subtaskMetrics(m, job->id, v->id, s->subtask);
    sendJson(c.res, 200, metricQuery(values ? *values : MetricStore::Values{}, c.query("get")));
  }

  void getAggregatedSubtaskMetrics(Call& c) {
    auto job = findJob(c);
    if (!job) return;
    const VertexInfo* v = findVertex(c, *job);
    if (!v) return;
    std::optional<Aggregations> agg;
    std::optional<SubtaskSelection> subtasks;
    if (!queryValue<Aggregations>(c, "agg", &parseAggregations, &agg)) return;
    if (!queryValue<SubtaskSelection>(c, "subtasks", &parseSubtaskSelection, &subtasks)) return;
    sendJson(c.res, 200,
             aggregatedSubtaskMetrics(dispatcher_.metrics(), job->id, *v, c.query("get"),
                                      agg.value_or(Aggregations{}),
                                      subtasks.value_or(SubtaskSelection{})));
  }

  void getBackpressure(Call& c) {
    auto job = findJob(c);
    if (!job) return;
    const VertexInfo* v = findVertex(c, *job);
    if (!v) return;
    sendJson(c.res, 200, backpressure(*v, dispatcher_.metrics(), job->id, nowMs()));
  }

  void getWatermarks(Call& c) {
    auto job = findJob(c);
    if (!job) return;
    const VertexInfo* v = findVertex(c, *job);
    if (!v) return;
    sendJson(c.res, 200, watermarks(*v, dispatcher_.metrics(), job->id));
  }

  void getJobManagerMetrics(Call& c) {
    sendJson(c.res, 200, metricQuery(dispatcher_.metrics().jobManager, c.query("get")));
  }

  void getTaskManagers(Call& c) {
    sendJson(c.res, 200, taskManagerList(dispatcher_.taskManagers()));
  }

  std::optional<TaskManagerInfo> findTaskManager(Call& c) {
    const std::string& id = c.param("taskmanagerid");
    for (TaskManagerInfo& tm : dispatcher_.taskManagers()) {
      if (tm.id == id) return std::move(tm);
    }
    sendError(c.res, 404, fmt::format("TaskManager {} not found", escapeForMessage(id)));
    return std::nullopt;
  }

  void getTaskManager(Call& c) {
    auto tm = findTaskManager(c);
    if (!tm) return;
    const MetricStore m = dispatcher_.metrics();
    auto it = m.taskManagers.find(tm->id);
    sendJson(c.res, 200,
             taskManagerDetails(*tm, it == m.taskManagers.end() ? nullptr : &it->second));
  }

  void getTaskManagerMetrics(Call& c) {
    auto tm = findTaskManager(c);
    if (!tm) return;
    const MetricStore m = dispatcher_.metrics();
    auto it = m.taskManagers.find(tm->id);
    sendJson(c.res, 200,
             metricQuery(it == m.taskManagers.end() ? MetricStore::Values{} : it->second,
                         c.query("get")));
  }

  void getJars(Call& c) {
    if (!jarsAvailable(c)) return;
    Json files = Json::array();
    for (const JarInfo& j : dispatcher_.jars()) {
      files.push_back(
          {{"id", j.id}, {"name", j.name}, {"uploaded", j.uploaded}, {"entry", Json::array()}});
    }
    sendJson(c.res, 200, Json{{"address", address_()}, {"files", std::move(files)}});
  }

  void postJarUpload(Call& c) {
    if (!jarsAvailable(c)) return;
    if (!c.http.is_multipart_form_data()) {
      sendError(c.res, 400,
                "POST /jars/upload expects multipart/form-data with the job library in the "
                "field 'jarfile' (curl -X POST -F jarfile=@libmyjob.so .../jars/upload)");
      return;
    }
    const httplib::MultipartFormData* file = nullptr;
    auto it = c.http.files.find("jarfile");
    if (it != c.http.files.end()) {
      file = &it->second;
    } else if (c.http.files.size() == 1) {
      file = &c.http.files.begin()->second;
    } else {
      sendError(c.res, 400,
                fmt::format("Send one file, in the field 'jarfile'; the request has {} files",
                            c.http.files.size()));
      return;
    }
    std::string name = file->filename;
    const size_t slash = name.find_last_of("/\\");
    if (slash != std::string::npos) name = name.substr(slash + 1);
    const auto endsWith = [](const std::string& s, std::string_view suffix) {
      return s.size() >= suffix.size() &&
             s.compare(s.size() - suffix.size(), suffix.size(), suffix.data(), suffix.size()) == 0;
    };
    const bool plainName = std::all_of(name.begin(), name.end(), [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-' ||
             ch == '+';
    });
    if (name.empty() || name == ".so" || !endsWith(name, ".so") || !plainName) {
      sendError(c.res, 400,
                fmt::format("Only job libraries (lib<name>.so) can be uploaded, got '{}'",
                            escapeForMessage(file->filename)));
      return;
    }
    if (file->content.empty()) {
      sendError(c.res, 400, fmt::format("The uploaded file '{}' is empty", escapeForMessage(name)));
      return;
    }
    auto r = dispatcher_.uploadJar(name, file->content);
    if (!r.isOk()) {
      sendError(c.res, httpStatusOf(r.status()), r.status().message());
      return;
    }
    sendJson(c.res, 200, Json{{"filename", r.value().id}, {"status", "success"}});
  }

  bool validJarId(Call& c, const std::string& id) {
    if (id.empty() || id.size() > 255 || id.find("..") != std::string::npos ||
        id.find_first_of("/\\") != std::string::npos) {
      sendError(c.res, 400, fmt::format("Invalid jar id '{}'", escapeForMessage(id)));
      return false;
    }
    return true;
  }

  void deleteJar(Call& c) {
    if (!jarsAvailable(c)) return;
    const std::string& id = c.param("jarid");
    if (!validJarId(c, id)) return;
    const Status s = dispatcher_.deleteJar(id);
    if (!s.isOk()) {
      sendError(c.res, httpStatusOf(s), s.message());
      return;
    }
    sendJson(c.res, 200, Json::object());
  }

  void postJarRun(Call& c) {
    if (!jarsAvailable(c)) return;
    const std::string& id = c.param("jarid");
    if (!validJarId(c, id)) return;
    auto body = jsonBody(c);
    if (!body) return;
    std::optional<std::string> argsText, savepointPath;
    std::optional<std::vector<std::string>> argsList;
    std::optional<int64_t> parallelism;
    std::optional<bool> allowNonRestored;
    if (!check(c, readField(*body, "programArgs", &argsText))) return;
    if (!check(c, readField(*body, "programArgsList", &argsList))) return;
    if (!check(c, readField(*body, "parallelism", &parallelism))) return;
    if (!check(c, readField(*body, "savepointPath", &savepointPath))) return;
    if (!check(c, readField(*body, "allowNonRestoredState", &allowNonRestored))) return;
    // The request body wins over query parameters, as in Flink.
    if (!argsText && !argsList) {
      if (auto q = c.query("programArg")) argsList = splitCommaList(*q);
      if (auto q = c.query("program-args")) argsText = *q;
    }
    if (argsText && argsList) {
      sendError(c.res, 400, "programArgs and programArgsList cannot both be set");
      return;
    }
    if (!parallelism) {
      if (auto q = c.query("parallelism")) {
        auto p = parseInteger(*q, "query parameter 'parallelism'", 1, 1 << 15);
        if (!check(c, p.status())) return;
        parallelism = p.value();
      }
    } else if (*parallelism != -1 && (*parallelism < 1 || *parallelism > (1 << 15))) {
      sendError(
          c.res, 400,
          fmt::format("field 'parallelism': {} is out of range [1, {}]", *parallelism, 1 << 15));
      return;
    }
    if (!savepointPath) savepointPath = c.query("savepointPath");
    if (!allowNonRestored) {
      if (auto q = c.query("allowNonRestoredState")) {
        auto b = parseBoolean(*q, "query parameter 'allowNonRestoredState'");
        if (!check(c, b.status())) return;
        allowNonRestored = b.value();
      }
    }
    JarRunRequest req;
    if (argsList) {
      req.programArgs = *argsList;
    } else if (argsText) {
      auto split = splitProgramArgs(*argsText);
      if (!check(c, split.status())) return;
      req.programArgs = std::move(split).value();
    }
    req.parallelism = static_cast<int>(parallelism.value_or(-1));
    req.savepointPath = savepointPath.value_or("");
    req.allowNonRestoredState = allowNonRestored.value_or(false);
    auto r = dispatcher_.runJar(id, req);
    if (!r.isOk()) {
      sendError(c.res, httpStatusOf(r.status()), r.status().message());
      return;
    }
    sendJson(c.res, 200, Json{{"jobid", r.value()}});
  }

 private:
  Dispatcher& dispatcher_;
  const WebMonitorOptions options_;
  std::function<std::string()> address_;
  SavepointOperations savepoints_;
};

RestHandlers::RestHandlers(Dispatcher& dispatcher, const WebMonitorOptions& options,
                           std::function<std::string()> address)
    : impl_(std::make_unique<Impl>(dispatcher, options, std::move(address))) {}

RestHandlers::~RestHandlers() = default;

void RestHandlers::addRoutes(Router& router) { impl_->addRoutes(router); }

void RestHandlers::stop() { impl_->stop(); }

}  // namespace sluice::rest
