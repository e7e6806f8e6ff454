// Flink's metric response bodies: IOMetricsInfo, back pressure, watermarks
// and the metric queries (rest/rest_json.h).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>

#include <nlohmann/json.hpp>

#include "rest/rest_json.h"

namespace sluice::rest {
namespace {

// The metric as a number, or nothing when it is absent or not numeric.
std::optional<double> number(const MetricStore::Values* m, const std::string& id) {
  if (!m) return std::nullopt;
  auto it = m->find(id);
  if (it == m->end() || it->second.empty()) return std::nullopt;
  const char* begin = it->second.c_str();
  char* end = nullptr;
  const double d = std::strtod(begin, &end);
  if (end == begin || *end != '\0') return std::nullopt;
  return d;
}

// Counters are integers; a counter too large for a double's mantissa keeps
// its digits.
int64_t count(const MetricStore::Values* m, const std::string& id) {
  if (!m) return 0;
  auto it = m->find(id);
  if (it == m->end()) return 0;
  const std::string& s = it->second;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc() && ptr == s.data() + s.size()) return v;
  const auto d = number(m, id);
  return d && std::isfinite(*d) ? static_cast<int64_t>(*d) : 0;
}

const std::map<int, MetricStore::Values>* vertexSubtasks(const MetricStore& metrics,
                                                         const std::string& jobId,
                                                         const std::string& vertexId) {
  auto job = metrics.tasks.find(jobId);
  if (job == metrics.tasks.end()) return nullptr;
  auto vertex = job->second.find(vertexId);
  if (vertex == job->second.end()) return nullptr;
  return &vertex->second;
}

}  // namespace

const MetricStore::Values* subtaskMetrics(const MetricStore& metrics, const std::string& jobId,
                                          const std::string& vertexId, int subtask) {
  const auto* subtasks = vertexSubtasks(metrics, jobId, vertexId);
  if (!subtasks) return nullptr;
  auto it = subtasks->find(subtask);
  return it == subtasks->end() ? nullptr : &it->second;
}

Json ioMetricsInfo(const std::vector<const MetricStore::Values*>& subtasks, bool complete) {
  int64_t readBytes = 0, writeBytes = 0, readRecords = 0, writeRecords = 0;
  int64_t backPressured = 0, idle = 0;
  double busy = 0;
  for (const MetricStore::Values* m : subtasks) {
    readBytes += count(m, "numBytesIn");
    writeBytes += count(m, "numBytesOut");
    readRecords += count(m, "numRecordsIn");
    writeRecords += count(m, "numRecordsOut");
    backPressured += count(m, "accumulatedBackPressuredTimeMs");
    idle += count(m, "accumulatedIdleTimeMs");
    const auto b = number(m, "accumulatedBusyTimeMs");
    if (b && std::isfinite(*b)) busy += *b;
  }
  return Json{{"read-bytes", readBytes},
              {"read-bytes-complete", complete},
              {"write-bytes", writeBytes},
              {"write-bytes-complete", complete},
              {"read-records", readRecords},
              {"read-records-complete", complete},
              {"write-records", writeRecords},
              {"write-records-complete", complete},
              {"accumulated-backpressured-time", backPressured},
              {"accumulated-idle-time", idle},
              {"accumulated-busy-time", busy}};
}

const char* backpressureLevel(double ratio) {
  if (ratio <= 0.10) return "ok";
  if (ratio <= 0.5) return "low";
  return "high";
}

Json backpressure(const VertexInfo& vertex, const MetricStore& metrics, const std::string& jobId,
                  int64_t now) {
  const auto* subtasks = vertexSubtasks(metrics, jobId, vertex.id);
  if (!subtasks || subtasks->empty()) return Json{{"status", "deprecated"}};
  Json list = Json::array();
  double worst = 0;
  for (const auto& [index, values] : *subtasks) {
    int attempt = 0;
    for (const SubtaskInfo& s : vertex.subtasks) {
      if (s.subtask == index) attempt = s.attempt;
    }
    auto ratioOf = [&](const char* id) -> Json {
      const auto v = number(&values, id);
      if (!v) return 0.0;
      if (!std::isfinite(*v)) return nullptr;
      return *v / 1000.0;
    };
    const Json ratio = ratioOf("backPressuredTimeMsPerSecond");
    const double r = ratio.is_number() ? ratio.get<double>() : 0.0;
    worst = std::max(worst, r);
    list.push_back({{"subtask", index},
                    {"attempt-number", attempt},
                    {"backpressure-level", backpressureLevel(r)},
                    {"ratio", ratio},
                    {"idleRatio", ratioOf("idleTimeMsPerSecond")},
                    {"busyRatio", ratioOf("busyTimeMsPerSecond")}});
  }
  return Json{{"status", "ok"},
              {"backpressure-level", backpressureLevel(worst)},
              {"end-timestamp", now},
              {"subtasks", std::move(list)}};
}

Json watermarks(const VertexInfo& vertex, const MetricStore& metrics, const std::string& jobId) {
  Json list = Json::array();
  const auto* subtasks = vertexSubtasks(metrics, jobId, vertex.id);
  if (!subtasks) return list;
  for (const auto& [index, values] : *subtasks) {
    auto it = values.find("currentInputWatermark");
    if (it == values.end()) continue;
    list.push_back(
        {{"id", std::to_string(index) + ".currentInputWatermark"}, {"value", it->second}});
  }
  return list;
}

Json metricQuery(const MetricStore::Values& values, const std::optional<std::string>& get) {
  Json list = Json::array();
  if (!get) {
    for (const auto& [id, value] : values) list.push_back({{"id", id}});
    return list;
  }
  std::set<std::string> seen;
  for (const std::string& id : splitCommaList(*get)) {
    if (!seen.insert(id).second) continue;
    auto it = values.find(id);
    if (it != values.end()) list.push_back({{"id", id}, {"value", it->second}});
  }
  return list;
}

MetricStore::Values vertexMetricValues(const MetricStore& metrics, const std::string& jobId,
                                       const std::string& vertexId) {
  MetricStore::Values out;
  const auto* subtasks = vertexSubtasks(metrics, jobId, vertexId);
  if (!subtasks) return out;
  for (const auto& [index, values] : *subtasks) {
    for (const auto& [id, value] : values) out[std::to_string(index) + "." + id] = value;
  }
  return out;
}

Json aggregatedSubtaskMetrics(const MetricStore& metrics, const std::string& jobId,
                              const VertexInfo& vertex, const std::optional<std::string>& get,
                              const Aggregations& agg, const SubtaskSelection& selection) {
  Json list = Json::array();
  const auto* subtasks = vertexSubtasks(metrics, jobId, vertex.id);
  if (!subtasks) return list;
  std::vector<const MetricStore::Values*> selected;
  for (const auto& [index, values] : *subtasks) {
    if (selection.contains(index)) selected.push_back(&values);
  }
  if (!get) {
    std::set<std::string> ids;
    for (const auto* values : selected) {
      for (const auto& [id, value] : *values) ids.insert(id);
    }
    for (const std::string& id : ids) list.push_back({{"id", id}});
    return list;
  }
  std::set<std::string> seen;
  for (const std::string& id : splitCommaList(*get)) {
    if (!seen.insert(id).second) continue;
    std::vector<double> xs;
    for (const auto* values : selected) {
      const auto v = number(values, id);
      if (v && std::isfinite(*v)) xs.push_back(*v);
    }
    if (xs.empty()) continue;
    double sum = 0;
    for (double x : xs) sum += x;
    Json entry{{"id", id}};
    if (agg.min) entry["min"] = *std::min_element(xs.begin(), xs.end());
    if (agg.max) entry["max"] = *std::max_element(xs.begin(), xs.end());
    if (agg.avg) entry["avg"] = sum / static_cast<double>(xs.size());
    if (agg.sum) entry["sum"] = sum;
    list.push_back(std::move(entry));
  }
  return list;
}

}  // namespace sluice::rest
