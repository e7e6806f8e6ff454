// sluice-bench --cluster (see cluster_bench.h and bench/README.md).
//
// CPU is counted per process from the kernel's accounting, which covers all
// of a process's threads: an embedded run is the job executable's own
// user+sys time (wait4's rusage); a cluster run is the growth of utime+stime
// in /proc/<pid>/stat of the JobManager and both TaskManagers between just
// before `sluice run` starts and just after it exits, plus the `sluice run`
// client's own rusage. Wall time is fork to exit of the executable, or of
// `sluice run` (submission, upload, deployment and its polling included).
#include "cluster_bench.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int64_t kNumKeys = 10000;  // keyed-sum key space, as in bench_job.cc

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tail(const std::string& s, size_t n = 3000) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

double seconds(const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec * 1e-6; }

// utime + stime of a live process, all threads, in seconds.
double processCpuSeconds(pid_t pid) {
  const std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  // Fields after the command name "(...)": state is field 3, utime 14, stime 15.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) throw std::runtime_error("cannot read /proc/<pid>/stat");
  std::istringstream in(stat.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// A child process with stdout and stderr in a file. The destructor stops it
// (SIGTERM, SIGKILL after 20 s) if it still runs; only this pid.
class Child {
 public:
  Child(const std::vector<std::string>& argv, fs::path output, const fs::path& cwd)
      : output_(std::move(output)) {
    std::vector<std::string> copy = argv;
    std::vector<char*> args;
    for (auto& a : copy) args.push_back(a.data());
    args.push_back(nullptr);
    started_ = Clock::now();
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open(output_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      if (::chdir(cwd.c_str()) != 0) ::_exit(126);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    if (pid_ < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { stop(); }

  pid_t pid() const { return pid_; }
  std::string output() const { return readFile(output_); }
  bool running() { return pid_ > 0 && !poll(WNOHANG); }

  // Waits up to `timeout`; false if it still runs.
  bool wait(std::chrono::seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (running()) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }

  void stop() {
    if (!running()) return;
    ::kill(pid_, SIGTERM);
    if (!wait(std::chrono::seconds(20))) {
      ::kill(pid_, SIGKILL);
      wait(std::chrono::seconds(20));
    }
  }

  // After it ended: exit code (128 + signal), wall seconds, own CPU seconds.
  int exitCode() const {
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }
  double wallSeconds() const { return std::chrono::duration<double>(ended_ - started_).count(); }
  double cpuSeconds() const { return seconds(usage_.ru_utime) + seconds(usage_.ru_stime); }

 private:
  bool poll(int flags) {
    pid_t r = ::wait4(pid_, &status_, flags, &usage_);
    if (r != pid_) return false;
    ended_ = Clock::now();
    pid_ = -1;
    return true;
  }

  pid_t pid_ = -1;
  int status_ = 0;
  rusage usage_{};
  fs::path output_;
  Clock::time_point started_, ended_;
};

// Polls `child`'s output until `ready` matches it and returns the match's
// first group (or the whole match); throws if the child ends or a minute
// passes first.
std::string waitForOutput(Child& child, const std::regex& ready, const std::string& what) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  for (;;) {
    const std::string out = child.output();
    std::smatch m;
    if (std::regex_search(out, m, ready)) return m.size() > 1 ? m[1].str() : m[0].str();
    if (!child.running() || Clock::now() > deadline) {
      throw std::runtime_error("waiting for " + what + " failed:\n" + tail(out));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// A JobManager and two TaskManagers (one slot each) on 127.0.0.1.
class Cluster {
 public:
  explicit Cluster(const fs::path& dir) : dir_(dir) {
    std::vector<std::string> jm = {SLUICE_BIN, "jobmanager",
                                   "-D",       "jobmanager.rpc.port=0",
                                   "-D",       "cluster.evenly-spread-out-slots=true"};
    addConfig(jm, "jm");
    jobManager_ = std::make_unique<Child>(jm, dir_ / "jobmanager.out", dir_);
    port_ =
        std::stoi(waitForOutput(*jobManager_, std::regex("JobManager listening on [^ ]*:([0-9]+)"),
                                "the JobManager to listen"));
    for (int i = 0; i < 2; ++i) {
      std::vector<std::string> tm = {SLUICE_BIN, "taskmanager",
                                     "-D",       "jobmanager.rpc.port=" + std::to_string(port_),
                                     "-D",       "taskmanager.numberOfTaskSlots=1"};
      addConfig(tm, "tm" + std::to_string(i));
      taskManagers_.push_back(
          std::make_unique<Child>(tm, dir_ / ("taskmanager-" + std::to_string(i) + ".out"), dir_));
      waitForOutput(*taskManagers_.back(), std::regex("registered at the JobManager"),
                    "TaskManager " + std::to_string(i) + " to register");
    }
  }
  ~Cluster() {
    for (auto& tm : taskManagers_) tm->stop();
    jobManager_->stop();
  }

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // CPU seconds so far of the JobManager and each TaskManager.
  std::array<double, 3> cpuSeconds() {
    for (Child* c : {jobManager_.get(), taskManagers_[0].get(), taskManagers_[1].get()}) {
      if (!c->running()) throw std::runtime_error("a cluster process ended:\n" + tail(c->output()));
    }
    return {processCpuSeconds(jobManager_->pid()), processCpuSeconds(taskManagers_[0]->pid()),
            processCpuSeconds(taskManagers_[1]->pid())};
  }

 private:
  void addConfig(std::vector<std::string>& argv, const std::string& name) {
    argv.insert(argv.end(),
                {"-D", "env.log.dir=" + (dir_ / ("log-" + name)).string(), "-D",
                 "blob.storage.directory=" + (dir_ / ("blobs-" + name)).string(), "-D",
                 "jobmanager.bind-host=127.0.0.1", "-D", "jobmanager.rpc.address=127.0.0.1", "-D",
                 "taskmanager.bind-host=127.0.0.1", "-D", "taskmanager.host=127.0.0.1"});
  }

  fs::path dir_;
  std::unique_ptr<Child> jobManager_;
  std::vector<std::unique_ptr<Child>> taskManagers_;
  int port_ = 0;
};

struct Run {
  double wallSeconds = 0;
  double cpuSeconds = 0;
  std::array<double, 4> cpuSplit{};  // cluster: JobManager, TaskManager 0 and 1, client
  int64_t jobMs = -1;                // cluster: "Job Runtime" as the JobManager reports it
};

// Sums the per-subtask "<count> <sum>" files the job's sinks wrote.
std::pair<int64_t, uint64_t> readSinkTotals(const fs::path& dir) {
  int64_t count = 0;
  uint64_t sum = 0;
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::istringstream in(readFile(e.path()));
    int64_t c = 0;
    uint64_t s = 0;
    if (!(in >> c >> s)) throw std::runtime_error("unreadable sink summary " + e.path().string());
    count += c;
    sum += s;
    ++files;
  }
  if (files != 2) throw std::runtime_error(std::to_string(files) + " sink summaries, expected 2");
  return {count, sum};
}

class Bench {
 public:
  explicit Bench(fs::path dir) : dir_(std::move(dir)), cluster_(dir_) {}

  // One run; throws when it fails or its output is wrong.
  Run run(const std::string& workload, int64_t records, bool onCluster) {
    const fs::path checkDir = dir_ / "check";
    fs::remove_all(checkDir);
    fs::create_directories(checkDir);
    std::vector<std::string> jobArgs = {"--workload",  workload,
                                        "--records",   std::to_string(records),
                                        "--check-dir", checkDir.string()};
    std::vector<std::string> argv;
    if (onCluster) {
      argv = {SLUICE_BIN, "run", "-m", cluster_.address(), "-p", "2", SLUICE_BENCH_JOB_LIB};
    } else {
      argv = {SLUICE_BENCH_JOB_BIN, "-p", "2"};
    }
    argv.insert(argv.end(), jobArgs.begin(), jobArgs.end());
    const std::string mode = onCluster ? "cluster" : "embedded";

    Run r;
    std::array<double, 3> before{};
    if (onCluster) before = cluster_.cpuSeconds();
    Child child(argv, dir_ / ("run-" + std::to_string(++runs_) + ".out"), dir_);
    if (!child.wait(std::chrono::seconds(900))) {
      throw std::runtime_error(workload + " " + mode + ": did not finish in 900 s");
    }
    std::array<double, 3> after{};
    if (onCluster) after = cluster_.cpuSeconds();
    const std::string out = child.output();
    if (child.exitCode() != 0) {
      throw std::runtime_error(workload + " " + mode + ": exit code " +
                               std::to_string(child.exitCode()) + ":\n" + tail(out));
    }
    r.wallSeconds = child.wallSeconds();
    r.cpuSeconds = child.cpuSeconds();
    if (onCluster) {
      for (size_t i = 0; i < 3; ++i) {
        r.cpuSplit[i] = after[i] - before[i];
        r.cpuSeconds += r.cpuSplit[i];
      }
      r.cpuSplit[3] = child.cpuSeconds();
      std::smatch m;
      if (std::regex_search(out, m, std::regex("Job Runtime: ([0-9]+) ms"))) {
        r.jobMs = std::stoll(m[1]);
      }
    }
    check(workload, mode, records, checkDir);
    return r;
  }

 private:
  // keyed-sum: every record arrives, and the emitted running sums add up to
  // the closed form. wordcount: every word arrives, and the sum of emitted
  // running counts is the same in every run of either mode.
  void check(const std::string& workload, const std::string& mode, int64_t records,
             const fs::path& checkDir) {
    auto [count, sum] = readSinkTotals(checkDir);
    if (count != records) {
      throw std::runtime_error(workload + " " + mode + ": " + std::to_string(count) +
                               " records reached the sinks, expected " + std::to_string(records));
    }
    if (workload == "keyed-sum") {
      uint64_t expected = 0;
      for (int64_t k = 0; k < kNumKeys; ++k) {
        const auto c = static_cast<uint64_t>(records / kNumKeys + (k < records % kNumKeys ? 1 : 0));
        expected += c * (c + 1) / 2;
      }
      if (sum != expected) throw std::runtime_error(workload + " " + mode + ": checksum differs");
      return;
    }
    auto [it, first] = wordcountSums_.emplace(records, sum);
    if (!first && it->second != sum) {
      throw std::runtime_error(workload + " " + mode +
                               ": checksum of emitted counts differs from an earlier run's");
    }
  }

  fs::path dir_;
  Cluster cluster_;
  int runs_ = 0;
  std::map<int64_t, uint64_t> wordcountSums_;  // records -> checksum of the first run
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string si(double v) {
  char buf[32];
  if (v >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  } else if (v >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.2fk", v / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  }
  return buf;
}

struct Row {
  std::string workload, mode;
  int64_t records = 0;
  std::vector<Run> runs;
  double wall() const {
    std::vector<double> v;
    for (const Run& r : runs) v.push_back(r.wallSeconds);
    return median(v);
  }
  double cpu() const {
    std::vector<double> v;
    for (const Run& r : runs) v.push_back(r.cpuSeconds);
    return median(v);
  }
  double split(size_t i) const {
    std::vector<double> v;
    for (const Run& r : runs) v.push_back(r.cpuSplit[i]);
    return median(v);
  }
  double jobMs() const {
    std::vector<double> v;
    for (const Run& r : runs) v.push_back(static_cast<double>(r.jobMs));
    return median(v);
  }
  double perCpuSecond() const { return static_cast<double>(records) / cpu(); }
};

void printTable(const std::vector<Row>& rows, int repeat) {
  std::printf(
      "cluster mode: median of %d runs per row; cluster = JobManager + 2 TaskManagers "
      "(1 slot each), embedded = one process; both -p 2\n",
      repeat);
  std::printf("%-10s %-9s %8s %8s %9s %8s %10s %7s %7s  %s\n", "workload", "mode", "records",
              "wall_s", "rec/s", "cpu_s", "rec/cpu-s", "job_ms", "vs_emb", "cpu split / target");
  const Row* embedded = nullptr;
  for (const Row& r : rows) {
    char job[16] = "-", ratio[16] = "-";
    std::string note;
    if (r.mode == "embedded") {
      embedded = &r;
    } else {
      std::snprintf(job, sizeof job, "%.0f", r.jobMs());
      char buf[160];
      std::snprintf(buf, sizeof buf, "jm %.2f tm0 %.2f tm1 %.2f client %.2f s", r.split(0),
                    r.split(1), r.split(2), r.split(3));
      note = buf;
      if (embedded != nullptr && embedded->workload == r.workload) {
        const double x = r.perCpuSecond() / embedded->perCpuSecond();
        std::snprintf(ratio, sizeof ratio, "%.2f", x);
        note += x >= 0.75 ? "; >=0.75 ok" : "; >=0.75 MISS";
      }
    }
    std::printf("%-10s %-9s %8s %8.3f %9s %8.3f %10s %7s %7s  %s\n", r.workload.c_str(),
                r.mode.c_str(), si(static_cast<double>(r.records)).c_str(), r.wall(),
                si(static_cast<double>(r.records) / r.wall()).c_str(), r.cpu(),
                si(r.perCpuSecond()).c_str(), job, ratio, note.empty() ? "-" : note.c_str());
  }
  std::fflush(stdout);
}

}  // namespace

int runClusterBench(const ClusterBenchOptions& options) {
  std::vector<std::string> workloads = options.workloads;
  if (workloads.empty()) workloads = {"keyed-sum", "wordcount"};
  for (const std::string& w : workloads) {
    if (w != "keyed-sum" && w != "wordcount") {
      std::fprintf(stderr,
                   "sluice-bench --cluster: workload '%s' has no cluster mode "
                   "(keyed-sum, wordcount)\n",
                   w.c_str());
      return 2;
    }
  }
  const fs::path dir =
      fs::temp_directory_path() / ("sluice-bench-cluster-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<Row> rows;
  bool ok = true;
  try {
    Bench bench(dir);
    for (const std::string& w : workloads) {
      const int64_t n =
          options.records > 0 ? options.records : (w == "keyed-sum" ? 20'000'000 : 5'000'000);
      Row embedded{w, "embedded", n, {}}, cluster{w, "cluster", n, {}};
      for (int i = 0; i < options.repeat; ++i) {
        // Alternate which mode goes first, so drift in the machine's load
        // does not favour one.
        for (bool onCluster : {i % 2 == 1, i % 2 == 0}) {
          Run r = bench.run(w, n, onCluster);
          std::fprintf(stderr, "%s %s run %d: %.3f s wall, %.3f s cpu\n", w.c_str(),
                       onCluster ? "cluster" : "embedded", i + 1, r.wallSeconds, r.cpuSeconds);
          (onCluster ? cluster : embedded).runs.push_back(r);
        }
      }
      rows.push_back(std::move(embedded));
      rows.push_back(std::move(cluster));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice-bench --cluster: %s\n(processes' output kept in %s)\n", e.what(),
                 dir.c_str());
    ok = false;
  }
  if (!rows.empty()) printTable(rows, options.repeat);
  if (ok) {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  return ok ? 0 : 1;
}

}  // namespace sluice::bench
