#include "runtime/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <sluice/core/config_options.h>

#include "runtime/buffer_pool.h"

namespace sluice::runtime {
namespace {

// User + system CPU time of this process in nanoseconds.
int64_t cpuNanos() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  auto ns = [](const timeval& t) {
    return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + static_cast<int64_t>(t.tv_usec) * 1000;
  };
  return ns(u.ru_utime) + ns(u.ru_stime);
}

int64_t statusField(const std::string& name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(name.size() + 1));
    int64_t v = 0;
    fields >> v;
    return v;
  }
  return 0;
}

// CPU load since the previous reading, as a fraction of all cores (Flink's
// Status.JVM.CPU.Load).
class CpuLoad {
 public:
  double read() {
    std::lock_guard lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    const int64_t cpu = cpuNanos();
    const int64_t wall =
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - lastWall_).count();
    if (wall > 200'000'000 || load_ < 0) {
      const int cores = std::max(1u, std::thread::hardware_concurrency());
      load_ =
          wall <= 0 ? 0.0 : static_cast<double>(cpu - lastCpu_) / static_cast<double>(wall) / cores;
      lastWall_ = now;
      lastCpu_ = cpu;
    }
    return load_;
  }

 private:
  std::mutex mu_;
  std::chrono::steady_clock::time_point lastWall_ = std::chrono::steady_clock::now();
  int64_t lastCpu_ = cpuNanos();
  double load_ = -1;
};

}  // namespace

HardwareInfo hardwareInfo() {
  HardwareInfo h;
  h.cpuCores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long avail = sysconf(_SC_AVPHYS_PAGES);
  const long size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && size > 0) h.physicalMemory = static_cast<int64_t>(pages) * size;
  if (avail > 0 && size > 0) h.freeMemory = static_cast<int64_t>(avail) * size;
  return h;
}

int64_t residentSetBytes() { return statusField("VmRSS") * 1024; }

std::shared_ptr<metrics::MetricGroupImpl> registerProcessMetrics(
    std::map<std::string, std::string> variables, const Configuration& config) {
  auto group = metrics::MetricRegistry::process().createGroup(metrics::ScopeKind::kTaskManager,
                                                              std::move(variables));
  MetricGroup& status = group->addGroup("Status");
  MetricGroup& process = status.addGroup("Process");
  auto load = std::make_shared<CpuLoad>();
  MetricGroup& cpu = process.addGroup("CPU");
  cpu.gauge("Load", [load] { return load->read(); });
  cpu.gauge("Time", [] { return static_cast<double>(cpuNanos()); });
  MetricGroup& memory = process.addGroup("Memory");
  memory.gauge("RSS", [] { return static_cast<double>(residentSetBytes()); });
  process.addGroup("Threads").gauge("Count",
                                    [] { return static_cast<double>(statusField("Threads")); });
  const auto managed =
      static_cast<double>(config.get(options::kTaskManagerMemoryManagedSize).bytes);
  MetricGroup& flinkMemory = status.addGroup("Flink").addGroup("Memory").addGroup("Managed");
  flinkMemory.gauge("Total", [managed] { return managed; });
  const auto network = static_cast<double>(config.get(options::kTaskManagerMemoryNetworkMax).bytes);
  MetricGroup& netty = status.addGroup("Shuffle").addGroup("Netty");
  netty.gauge("TotalMemory", [network] { return network; });
  netty.gauge("UsedMemory",
              [] { return static_cast<double>(BufferPool::processAllocatedBytes()); });
  netty.gauge("AvailableMemory", [network] {
    return std::max(0.0, network - static_cast<double>(BufferPool::processAllocatedBytes()));
  });
  return group;
}

}  // namespace sluice::runtime
