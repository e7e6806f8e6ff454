// A TaskManager's Status.* metrics for a process without a JVM (Flink's
// Status.JVM.* become Status.Process.*): CPU load and time, resident
// memory, threads, managed memory and network (shuffle) memory.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <sluice/core/config.h>

#include "core/metric_registry.h"

namespace sluice::runtime {

struct HardwareInfo {
  int cpuCores = 1;
  int64_t physicalMemory = 0;  // bytes
  int64_t freeMemory = 0;      // bytes available now
};
HardwareInfo hardwareInfo();

// Registers the Status.* metrics under a new kTaskManager group with
// `variables` (<host>, <tm_id>). `config` gives the managed and network
// memory budgets.
std::shared_ptr<metrics::MetricGroupImpl> registerProcessMetrics(
    std::map<std::string, std::string> variables, const Configuration& config);

// Resident set size of this process in bytes (0 when /proc is unreadable).
int64_t residentSetBytes();

}  // namespace sluice::runtime
