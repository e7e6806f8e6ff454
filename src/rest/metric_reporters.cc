// The Prometheus text format is written here rather than with prometheus-cpp:
// Sluice's metrics already live in its own registry and are read on request
// (a snapshot), so all a reporter needs is to print a list of samples, which
// is a page of code; prometheus-cpp would add a second registry to keep in
// sync as groups come and go.
#include "rest/metric_reporters.h"

#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

#include <sluice/core/config_options.h>

#include "core/logging.h"

namespace sluice::rest {
namespace {

using metrics::MetricSample;
using metrics::MetricType;

constexpr std::string_view kPromFactory =
    "org.apache.flink.metrics.prometheus.PrometheusReporterFactory";
constexpr std::string_view kPromShort = "prometheus";
constexpr std::string_view kLogFactory = "org.apache.flink.metrics.slf4j.Slf4jReporterFactory";
constexpr std::string_view kLogShort = "log";
constexpr const char* kPromContentType = "text/plain; version=0.0.4; charset=utf-8";

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' ||
         c == '_';
}

// Flink's reporter filter: every character outside [a-zA-Z0-9:_] becomes '_'.
void appendFiltered(std::string& out, std::string_view text) {
  for (char c : text) out.push_back(isNameChar(c) ? c : '_');
}

std::string filtered(std::string_view text) {
  std::string out;
  appendFiltered(out, text);
  return out;
}

// Label names are stricter than metric names in the exposition format
// ([a-zA-Z_][a-zA-Z0-9_]*): Flink's filter would let ':' and a leading digit
// through, which Prometheus refuses.
std::string labelName(std::string_view variable) {
  if (variable.size() >= 2 && variable.front() == '<' && variable.back() == '>') {
    variable = variable.substr(1, variable.size() - 2);
  }
  std::string out;
  if (variable.empty() || (variable.front() >= '0' && variable.front() <= '9')) out.push_back('_');
  for (char c : variable) out.push_back(isNameChar(c) && c != ':' ? c : '_');
  return out;
}

void appendEscaped(std::string& out, std::string_view text, bool quotes) {
  for (char c : text) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '"':
        if (quotes) {
          out += "\\\"";
          break;
        }
        [[fallthrough]];
      default: out.push_back(c);
    }
  }
}

std::string promValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return metrics::formatMetricValue(v);
}

// "taskmanager_job_task_operator_mygroup": the logical scope and the
// logical sub-scope, each component filtered, joined with '_'.
std::string logicalScopeName(const MetricSample& s) {
  std::string out;
  appendFiltered(out, metrics::logicalScope(s.kind));
  for (const std::string& c : s.logicalSubScope) {
    out.push_back('_');
    appendFiltered(out, c);
  }
  return out;
}

struct Family {
  std::string name;
  bool summary = false;
  std::string header;  // # HELP and # TYPE
  std::string body;
  std::unordered_set<std::string> series;  // name{labels} already written
};

}  // namespace

std::string renderPrometheus(const std::vector<MetricSample>& samples,
                             bool filterLabelValueCharacters) {
  std::vector<Family> families;
  std::unordered_map<std::string, size_t> byName;
  for (const MetricSample& s : samples) {
    const std::string scope = logicalScopeName(s);
    std::string name = "flink_" + scope + "_";
    appendFiltered(name, s.name);
    const bool summary = s.type == MetricType::kHistogram;

    auto [it, inserted] = byName.emplace(name, families.size());
    if (inserted) {
      Family f;
      f.name = name;
      f.summary = summary;
      f.header = "# HELP " + name + " ";
      appendEscaped(f.header, s.name, false);
      f.header += " (scope: ";
      appendEscaped(f.header, scope, false);
      f.header += ")\n# TYPE " + name + (summary ? " summary\n" : " gauge\n");
      families.push_back(std::move(f));
    }
    Family& f = families[it->second];
    if (f.summary != summary) {
      // One family has one type: a histogram and a non-histogram of the same
      // name cannot both be exposed (Prometheus would refuse the page).
      log::debug("Prometheus: {} is both a summary and a gauge; leaving out one {}", name,
                 metrics::metricTypeName(s.type));
      continue;
    }

    std::string labels;
    for (const auto& [key, value] : s.variables) {
      if (!labels.empty()) labels.push_back(',');
      labels += labelName(key);
      labels += "=\"";
      appendEscaped(labels, filterLabelValueCharacters ? filtered(value) : value, true);
      labels.push_back('"');
    }
    if (!f.series.insert(labels).second) continue;  // the same series twice

    // One line: `series{labels} value`.
    auto line = [&f](const std::string& series, const std::string& labelText, double value) {
      f.body += series;
      if (!labelText.empty()) f.body += "{" + labelText + "}";
      f.body.push_back(' ');
      f.body += promValue(value);
      f.body.push_back('\n');
    };

    if (!summary) {
      line(name, labels, s.value);
      continue;
    }
    for (double q : {0.5, 0.75, 0.95, 0.98, 0.99, 0.999}) {
      std::string withQuantile = labels;
      if (!withQuantile.empty()) withQuantile.push_back(',');
      withQuantile += "quantile=\"" + metrics::formatMetricValue(q) + "\"";
      line(name, withQuantile, s.histogram.getQuantile(q));
    }
    line(name + "_count", labels, static_cast<double>(s.count));
    // The sum of the histogram's current sample (its last N values): Flink's
    // reporter has none, and the all-time sum is not kept.
    line(name + "_sum", labels, s.histogram.mean * static_cast<double>(s.histogram.size));
  }

  std::string out;
  for (const Family& f : families) {
    if (f.body.empty()) continue;
    out += f.header;
    out += f.body;
  }
  return out;
}

namespace {

// The ports `spec` names: "9249", "9250-9260", "0", or a comma-separated
// list of these (as Flink's port ranges).
Result<std::vector<int>> parsePorts(const std::string& spec) {
  auto bad = [&spec](const std::string& why) {
    return Status::invalidArgument(
        fmt::format("{}: expected a port, a range like 9250-9260 or a comma-separated list of "
                    "them, got '{}' ({})",
                    options::kMetricsReporterPromPort.key, spec, why));
  };
  auto number = [](std::string_view text, int* out) {
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
    if (text.empty() || text.size() > 5) return false;
    int v = 0;
    for (char c : text) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    if (v > 65535) return false;
    *out = v;
    return true;
  };
  std::vector<int> ports;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    std::string_view part(spec.data() + start, comma - start);
    const size_t dash = part.find('-');
    int lo = 0;
    int hi = 0;
    if (dash == std::string_view::npos) {
      if (!number(part, &lo)) return bad("not a port number from 0 to 65535");
      hi = lo;
    } else {
      if (!number(part.substr(0, dash), &lo) || !number(part.substr(dash + 1), &hi)) {
        return bad("not a port number from 0 to 65535");
      }
      if (lo > hi) return bad("a range must go from the lower port to the higher");
    }
    for (int p = lo; p <= hi; ++p) ports.push_back(p);
    start = comma + 1;
  }
  return ports;
}

// Why binding host:port fails, found by trying it with a plain socket the
// way httplib does (httplib reports only that it failed).
std::string bindError(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &result); rc != 0) {
    return fmt::format("cannot resolve the host: {}", ::gai_strerror(rc));
  }
  int lastError = 0;
  for (addrinfo* a = result; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) {
      lastError = errno;
      continue;
    }
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    const int rc = ::bind(fd, a->ai_addr, a->ai_addrlen);
    lastError = rc == 0 ? 0 : errno;
    ::close(fd);
    if (rc == 0) break;
  }
  ::freeaddrinfo(result);
  if (lastError == 0) return "the address could not be bound";
  return std::strerror(lastError);
}

std::string sectionLine(const char* title) {
  std::string line = fmt::format("-- {} ", title);
  if (line.size() < 79) line.append(79 - line.size(), '-');  // Flink's width
  return line;
}

// One block like Flink's Slf4jReporter: a header line, then the metrics by
// type, one `<identifier>: <value>` line each.
std::string logReport(const std::vector<MetricSample>& samples) {
  std::string out =
      "\n=========================== Starting metrics report ===========================\n";
  struct Section {
    const char* title;
    MetricType type;
  };
  for (const Section& section :
       {Section{"Counters", MetricType::kCounter}, Section{"Gauges", MetricType::kGauge},
        Section{"Meters", MetricType::kMeter}, Section{"Histograms", MetricType::kHistogram}}) {
    out += "\n" + sectionLine(section.title) + "\n";
    for (const MetricSample& s : samples) {
      if (s.type != section.type) continue;
      out += s.identifier();
      out += ": ";
      if (s.type != MetricType::kHistogram) {
        out += metrics::formatMetricValue(s.value);
      } else {
        const HistogramStatistics& h = s.histogram;
        out += fmt::format(
            "count={}, min={}, max={}, mean={}, stddev={}, p50={}, p75={}, p95={}, p98={}, "
            "p99={}, p999={}",
            h.size, h.min, h.max, metrics::formatMetricValue(h.mean),
            metrics::formatMetricValue(h.stdDev), metrics::formatMetricValue(h.getQuantile(0.5)),
            metrics::formatMetricValue(h.getQuantile(0.75)),
            metrics::formatMetricValue(h.getQuantile(0.95)),
            metrics::formatMetricValue(h.getQuantile(0.98)),
            metrics::formatMetricValue(h.getQuantile(0.99)),
            metrics::formatMetricValue(h.getQuantile(0.999)));
      }
      out += "\n";
    }
  }
  out += "\n=========================== Finished metrics report ===========================";
  return out;
}

}  // namespace

struct MetricReporters::Impl {
  metrics::MetricRegistry* registry = nullptr;

  std::unique_ptr<httplib::Server> server;
  std::thread serverThread;
  int port = -1;

  std::mutex mu;
  std::condition_variable wake;
  bool stopping = false;
  std::thread logThread;

  Status startPrometheus(const Configuration& config);
  Status startLog(const Configuration& config);
};

Status MetricReporters::Impl::startPrometheus(const Configuration& config) {
  const std::string host = config.get(options::kMetricsReporterPromHost);
  const std::string spec = config.get(options::kMetricsReporterPromPort);
  Result<std::vector<int>> ports = parsePorts(spec);
  if (!ports.isOk()) return ports.status();

  server = std::make_unique<httplib::Server>();
  // httplib's default sets SO_REUSEPORT, which would let a second process
  // bind a port that is already taken instead of moving on in the range.
  server->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  metrics::MetricRegistry* reg = registry;
  auto serve = [reg](const httplib::Request&, httplib::Response& res) {
    res.set_content(renderPrometheus(reg->snapshot()), kPromContentType);
  };
  // "/" too, as the Prometheus client's HTTP server Flink uses.
  server->Get("/metrics", serve);
  server->Get("/", serve);

  std::string lastError;
  int lastPort = 0;
  for (int p : ports.value()) {
    if (p == 0) {
      const int bound = server->bind_to_any_port(host);
      if (bound > 0) {
        port = bound;
        break;
      }
    } else if (server->bind_to_port(host, p)) {
      port = p;
      break;
    }
    lastPort = p;
    lastError = bindError(host, p);
  }
  if (port < 0) {
    const std::string where = ports.value().size() == 1
                                  ? fmt::format("{}:{}", host, lastPort)
                                  : fmt::format("{}:{} (every port of the range)", host, spec);
    server.reset();
    return Status::ioError(fmt::format("cannot bind the Prometheus reporter to {} ({}, {}): {}",
                                       where, options::kMetricsReporterPromHost.key,
                                       options::kMetricsReporterPromPort.key, lastError));
  }
  httplib::Server* s = server.get();
  serverThread = std::thread([s] {
    log::setThreadName("prometheus-reporter");
    s->listen_after_bind();
  });
  // stop() only stops a server that is running.
  while (!server->is_running()) std::this_thread::yield();
  log::info("Prometheus reporter listening on http://{}:{}/metrics", host, port);
  return Status::ok();
}

Status MetricReporters::Impl::startLog(const Configuration& config) {
  const std::chrono::milliseconds interval = config.get(options::kMetricsReporterSlf4jInterval);
  if (interval.count() <= 0) {
    return Status::invalidArgument(fmt::format("{}: the interval must be positive, got {}",
                                               options::kMetricsReporterSlf4jInterval.key,
                                               formatDuration(interval)));
  }
  logThread = std::thread([this, interval] {
    log::setThreadName("log-reporter");
    std::unique_lock<std::mutex> lock(mu);
    while (!wake.wait_for(lock, interval, [this] { return stopping; })) {
      lock.unlock();
      log::info("{}", logReport(registry->snapshot()));
      lock.lock();
    }
  });
  log::info("log reporter writing the metrics every {}", formatDuration(interval));
  return Status::ok();
}

MetricReporters::MetricReporters() : impl_(std::make_unique<Impl>()) {}

MetricReporters::~MetricReporters() { stop(); }

Result<std::unique_ptr<MetricReporters>> MetricReporters::start(const Configuration& config,
                                                                metrics::MetricRegistry& registry) {
  std::string promFactory;
  std::string logFactory;
  try {
    promFactory = config.get(options::kMetricsReporterPromFactoryClass);
    logFactory = config.get(options::kMetricsReporterSlf4jFactoryClass);
  } catch (const SluiceException& e) {
    return Status::invalidArgument(e.what());
  }
  const bool prom = !promFactory.empty();
  const bool logReporter = !logFactory.empty();
  if (prom && promFactory != kPromFactory && promFactory != kPromShort) {
    return Status::invalidArgument(fmt::format(
        "{}: unknown reporter factory '{}'; expected {} or {}",
        options::kMetricsReporterPromFactoryClass.key, promFactory, kPromFactory, kPromShort));
  }
  if (logReporter && logFactory != kLogFactory && logFactory != kLogShort) {
    return Status::invalidArgument(fmt::format(
        "{}: unknown reporter factory '{}'; expected {} or {}",
        options::kMetricsReporterSlf4jFactoryClass.key, logFactory, kLogFactory, kLogShort));
  }

  // The constructor is private, hence no make_unique.
  std::unique_ptr<MetricReporters> reporters(new MetricReporters());
  reporters->impl_->registry = &registry;
  try {
    if (prom) {
      if (Status s = reporters->impl_->startPrometheus(config); !s.isOk()) return s;
    }
    if (logReporter) {
      if (Status s = reporters->impl_->startLog(config); !s.isOk()) return s;
    }
  } catch (const SluiceException& e) {
    // A value that does not parse (config.get() throws for values set
    // through the API).
    return Status::invalidArgument(e.what());
  }
  return reporters;
}

int MetricReporters::prometheusPort() const { return impl_->port; }

void MetricReporters::stop() {
  if (impl_->server) {
    impl_->server->stop();
    if (impl_->serverThread.joinable()) impl_->serverThread.join();
    impl_->server.reset();
    impl_->port = -1;
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->logThread.joinable()) impl_->logThread.join();
}

}  // namespace sluice::rest
