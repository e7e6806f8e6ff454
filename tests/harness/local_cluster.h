// A Sluice standalone cluster of real processes on 127.0.0.1, for tests: a
// JobManager and TaskManagers started from the `sluice` binary with
// ephemeral ports, the CLI run as a process, and kill -9 of a TaskManager by
// the pid this harness started. Nothing here depends on the wall clock's
// speed: waits have generous deadlines and poll.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace sluice::test {

inline std::string readWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One child process with its stdout and stderr in a file.
class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() { stop(); }

  void start(const std::vector<std::string>& argv, const std::filesystem::path& output,
             const std::filesystem::path& cwd) {
    output_ = output;
    std::vector<char*> args;
    std::vector<std::string> copy = argv;
    for (auto& a : copy) args.push_back(a.data());
    args.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      if (::chdir(cwd.c_str()) != 0) ::_exit(126);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ASSERT_GT(pid_, 0) << "fork failed: " << std::strerror(errno);
  }

  pid_t pid() const { return pid_; }
  std::string output() const { return readWholeFile(output_); }
  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exitStatus_ = status;
      pid_ = -1;
      return false;
    }
    return true;
  }
  void kill(int signal) {
    if (pid_ > 0) ::kill(pid_, signal);
  }
  // Waits up to `timeout` for the process to end; returns its wait status.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (running()) {
      if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return exitStatus_;
  }
  // SIGTERM, then SIGKILL after 20 s; only the process this object started.
  void stop() {
    if (!running()) return;
    kill(SIGTERM);
    if (!wait(std::chrono::seconds(20))) {
      kill(SIGKILL);
      wait(std::chrono::seconds(20));
    }
  }

 private:
  pid_t pid_ = -1;
  int exitStatus_ = 0;
  std::filesystem::path output_;
};

struct CliResult {
  int exitCode = -1;
  std::string output;  // stdout and stderr
};

class LocalCluster {
 public:
  // `dir` holds the processes' output and logs. `config` are -D settings
  // given to every process.
  LocalCluster(std::filesystem::path dir, std::vector<std::string> config)
      : dir_(std::move(dir)), config_(std::move(config)) {
    std::filesystem::create_directories(dir_);
  }
  ~LocalCluster() {
    for (auto& tm : taskManagers_) tm->stop();
    if (jobManager_) jobManager_->stop();
  }

  static std::string binary() { return SLUICE_BIN; }

  // The JobManager's REST endpoint gets a free port on 127.0.0.1 (restPort()).
  // `extra` are -D settings for the JobManager only, after those of every
  // process.
  void startJobManager(const std::vector<std::string>& extra = {}) {
    jobManager_ = std::make_unique<ChildProcess>();
    std::vector<std::string> argv = {binary(), "jobmanager",  "-D", "jobmanager.rpc.port=0",
                                     "-D",     "rest.port=0", "-D", "rest.bind-address=127.0.0.1"};
    addConfig(argv, "jm");
    for (const auto& c : extra) argv.insert(argv.end(), {"-D", c});
    jobManager_->start(argv, dir_ / "jobmanager.out", dir_);
    std::smatch m;
    const std::regex listening("JobManager listening on [^ ]*:([0-9]+)");
    const std::regex rest("REST API and web UI at (https?://[^ \\r\\n]*:([0-9]+))");
    waitFor(
        [&] {
          std::string out = jobManager_->output();
          if (!std::regex_search(out, m, listening)) return false;
          port_ = std::stoi(m[1]);
          if (!std::regex_search(out, m, rest)) return false;
          restUrl_ = m[1];
          restPort_ = std::stoi(m[2]);
          return true;
        },
        "the JobManager to listen", *jobManager_);
  }

  // Returns the TaskManager's index.
  int startTaskManager(int slots) {
    auto tm = std::make_unique<ChildProcess>();
    const int index = static_cast<int>(taskManagers_.size());
    std::vector<std::string> argv = {
        binary(), "taskmanager",
        "-D",     "jobmanager.rpc.port=" + std::to_string(port_),
        "-D",     "taskmanager.numberOfTaskSlots=" + std::to_string(slots)};
    addConfig(argv, "tm" + std::to_string(index));
    tm->start(argv, dir_ / ("taskmanager-" + std::to_string(index) + ".out"), dir_);
    ChildProcess& ref = *tm;
    taskManagers_.push_back(std::move(tm));
    waitFor([&] { return ref.output().find("registered at the JobManager") != std::string::npos; },
            "TaskManager " + std::to_string(index) + " to register", ref);
    return index;
  }

  ChildProcess& taskManager(int i) { return *taskManagers_.at(static_cast<size_t>(i)); }
  ChildProcess& jobManager() { return *jobManager_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  // The JobManager's REST API and web UI: its port and "http://127.0.0.1:<port>".
  int restPort() const { return restPort_; }
  const std::string& restUrl() const { return restUrl_; }

  // Runs `sluice <action> -m <jm> args...` and waits for it.
  CliResult cli(const std::string& action, const std::vector<std::string>& args,
                std::chrono::seconds timeout = std::chrono::seconds(240)) {
    std::vector<std::string> argv = {binary(), action, "-m", address()};
    argv.insert(argv.end(), args.begin(), args.end());
    return runProcess(argv, timeout);
  }

  CliResult runProcess(const std::vector<std::string>& argv,
                       std::chrono::seconds timeout = std::chrono::seconds(240)) {
    ChildProcess p;
    const auto out = dir_ / ("cli-" + std::to_string(++cliRuns_) + ".out");
    p.start(argv, out, dir_);
    CliResult r;
    std::optional<int> status = p.wait(timeout);
    r.output = p.output();
    if (!status) {
      p.kill(SIGKILL);
      p.wait(std::chrono::seconds(10));
      ADD_FAILURE() << "timed out: " << argv[0] << " " << argv[1] << "\n" << r.output;
      return r;
    }
    r.exitCode = WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
    return r;
  }

  // `sluice run -d`: returns the job id.
  std::string submitDetached(const std::string& library, const std::vector<std::string>& options,
                             const std::vector<std::string>& jobArgs) {
    std::vector<std::string> args = {"-d"};
    args.insert(args.end(), options.begin(), options.end());
    args.push_back(library);
    args.insert(args.end(), jobArgs.begin(), jobArgs.end());
    CliResult r = cli("run", args);
    std::smatch m;
    const std::regex submitted("submitted with JobID ([0-9a-f]+)");
    if (r.exitCode != 0 || !std::regex_search(r.output, m, submitted)) {
      ADD_FAILURE() << "sluice run failed (" << r.exitCode << "):\n" << r.output;
      return "";
    }
    return m[1];
  }

  // The job's state as `sluice list` shows it ("RUNNING", ...), and its
  // cause line when there is one.
  std::string jobState(const std::string& jobId, std::string* cause = nullptr) {
    CliResult r = cli("list", {"-a"});
    std::istringstream in(r.output);
    std::string line;
    std::string state;
    bool mine = false;
    while (std::getline(in, line)) {
      if (line.find(" : " + jobId + " : ") != std::string::npos) {
        auto open = line.rfind('(');
        auto close = line.rfind(')');
        if (open != std::string::npos && close > open)
          state = line.substr(open + 1, close - open - 1);
        mine = true;
      } else if (mine && cause != nullptr && line.rfind("    cause: ", 0) == 0) {
        *cause = line.substr(11);
        mine = false;
      } else {
        mine = false;
      }
    }
    return state;
  }

  // Polls `sluice list` until the job is in a terminal state; returns it.
  std::string waitForEnd(const std::string& jobId, std::string* cause = nullptr,
                         std::chrono::seconds timeout = std::chrono::seconds(300)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      std::string s = jobState(jobId, cause);
      if (s == "FINISHED" || s == "FAILED" || s == "CANCELED") return s;
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "job " << jobId << " did not end; last state " << s << "\n"
                      << jobManager_->output();
        return s;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  const std::filesystem::path& dir() const { return dir_; }

 private:
  void addConfig(std::vector<std::string>& argv, const std::string& name) {
    argv.insert(argv.end(),
                {"-D", "env.log.dir=" + (dir_ / ("log-" + name)).string(), "-D",
                 "blob.storage.directory=" + (dir_ / ("blobs-" + name)).string(), "-D",
                 "jobmanager.bind-host=127.0.0.1", "-D", "jobmanager.rpc.address=127.0.0.1", "-D",
                 "taskmanager.bind-host=127.0.0.1", "-D", "taskmanager.host=127.0.0.1"});
    for (const auto& c : config_) argv.insert(argv.end(), {"-D", c});
  }

  template <class Ready>
  void waitFor(Ready ready, const std::string& what, ChildProcess& p) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!ready()) {
      if (!p.running() || std::chrono::steady_clock::now() > deadline) {
        FAIL() << "waiting for " << what << " failed:\n" << p.output();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::filesystem::path dir_;
  std::vector<std::string> config_;
  std::unique_ptr<ChildProcess> jobManager_;
  std::vector<std::unique_ptr<ChildProcess>> taskManagers_;
  int port_ = 0;
  int restPort_ = 0;
  std::string restUrl_;
  int cliRuns_ = 0;
};

}  // namespace sluice::test
