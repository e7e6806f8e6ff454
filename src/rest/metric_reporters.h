// The metric reporters of one process (Flink's metrics.reporter.<name>.*):
// `prom` serves every metric of the registry at /metrics in Prometheus's
// text format (the names and labels Flink's PrometheusReporter gives them),
// `slf4j` writes them to the log periodically (Flink's Slf4jReporter).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <sluice/core/config.h>
#include <sluice/core/status.h>

#include "core/metric_registry.h"

namespace sluice::rest {

// Prometheus text exposition format 0.0.4 of `samples`: one family per
// name ("flink_taskmanager_job_task_operator_numRecordsIn"), counters and
// gauges and meters as gauges (as Flink's reporter), histograms as summaries
// with quantiles 0.5, 0.75, 0.95, 0.98, 0.99, 0.999; variables as labels
// without their angle brackets. Label values have every character outside
// [a-zA-Z0-9:_] replaced by '_', as Flink's reporter does by default
// (filterLabelValueCharacters); with `filterLabelValueCharacters` false they
// are kept and escaped as the format says (\\, \", \n).
std::string renderPrometheus(const std::vector<metrics::MetricSample>& samples,
                             bool filterLabelValueCharacters = true);

class MetricReporters {
 public:
  // Starts the reporters `config` configures (none: an object that does
  // nothing). Fails naming the key for an unknown factory class, and the
  // address and OS error when the Prometheus port cannot be bound.
  // `registry` must outlive the reporters; stop() (or the destructor) joins
  // their threads. The log reporter writes its first report one interval
  // after the start.
  static Result<std::unique_ptr<MetricReporters>> start(const Configuration& config,
                                                        metrics::MetricRegistry& registry);
  ~MetricReporters();
  // The Prometheus endpoint's bound port, -1 without one.
  int prometheusPort() const;
  void stop();

 private:
  MetricReporters();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::rest
