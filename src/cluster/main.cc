// sluice: the cluster's one executable (Flink's bin/flink, jobmanager.sh
// and taskmanager.sh in one).
//
//   sluice jobmanager [-c DIR] [-D key=value]...     run a JobManager (foreground)
//   sluice taskmanager [-c DIR] [-D key=value]...    run a TaskManager (foreground)
//   sluice run [-m host:port] [-p N] [-d] [-s savepoint] [-D k=v]... lib.so [args]
//   sluice list [-m host:port] [-a]
//   sluice cancel [-m host:port] <jobId>
//   sluice savepoint [-m host:port] <jobId> [targetDirectory]
//   sluice stop [-m host:port] [--savepointPath dir] [--drain] <jobId>
//
// Exit codes as Flink's CLI: 0 on success, 1 on any error (with a message
// on stderr).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <sluice/core/config.h>
#include <sluice/core/config_options.h>
#include <sluice/core/status.h>

#include "cluster/client.h"
#include "cluster/job_library.h"
#include "cluster/job_manager.h"
#include "cluster/task_manager.h"
#include "core/logging.h"

namespace {

using sluice::Configuration;
using sluice::SluiceException;
namespace options = sluice::options;

constexpr const char* kUsage =
    "Usage: sluice <action> [options]\n"
    "Actions:\n"
    "  jobmanager [-c confDir] [-D key=value]...   run a JobManager in the foreground\n"
    "  taskmanager [-c confDir] [-D key=value]...  run a TaskManager in the foreground\n"
    "  run [-m host:port] [-p N] [-d] [-s savepointPath] [-D key=value]... <lib.so> [args]\n"
    "  list [-m host:port] [-a]\n"
    "  cancel [-m host:port] <jobId>\n"
    "  savepoint [-m host:port] <jobId> [targetDirectory]\n"
    "  stop [-m host:port] [--savepointPath dir] [--drain] <jobId>\n";

struct Args {
  Configuration config;  // config file < -D < flags
  std::vector<std::string> positional;
  std::string jobManager;  // -m
  bool detached = false;
  bool all = false;
  bool drain = false;
  std::string savepointPath;
};

// Parses the options of one action; everything after the first positional
// of `run` (the library) belongs to the job.
Args parse(const std::string& action, int argc, char** argv) {
  Args a;
  std::string confDir;
  Configuration cli;
  int i = 2;
  auto value = [&](const std::string& flag) -> std::string {
    if (i + 1 >= argc) throw SluiceException(fmt::format("{} needs a value", flag));
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (action == "run" && !a.positional.empty()) {
      a.positional.push_back(arg);
      continue;
    }
    if (arg == "-c" || arg == "--configDir") {
      confDir = value(arg);
    } else if (arg == "-D" || (arg.rfind("-D", 0) == 0 && arg.size() > 2)) {
      std::string kv = arg == "-D" ? value(arg) : arg.substr(2);
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        throw SluiceException(fmt::format("-D expects key=value, got '{}'", kv));
      }
      if (sluice::findOption(kv.substr(0, eq)) == nullptr) {
        std::string msg = fmt::format("unknown configuration key '{}' from -D", kv.substr(0, eq));
        std::string_view hint = sluice::suggestOptionKey(kv.substr(0, eq));
        if (!hint.empty()) msg += fmt::format(" (did you mean '{}'?)", hint);
        throw SluiceException(msg);
      }
      cli.setString(kv.substr(0, eq), kv.substr(eq + 1), "-D");
    } else if (arg == "-m" || arg == "--jobmanager") {
      a.jobManager = value(arg);
    } else if (action == "run" && (arg == "-p" || arg == "--parallelism")) {
      cli.setString(std::string(options::kParallelismDefault.key), value(arg), "-p");
    } else if (action == "run" && (arg == "-d" || arg == "--detached")) {
      a.detached = true;
    } else if (action == "run" && (arg == "-s" || arg == "--fromSavepoint")) {
      cli.setString(std::string(options::kExecutionSavepointPath.key), value(arg), "-s");
    } else if (action == "list" && (arg == "-a" || arg == "--all")) {
      a.all = true;
    } else if (action == "stop" && (arg == "--savepointPath" || arg == "-p")) {
      a.savepointPath = value(arg);
    } else if (action == "stop" && (arg == "--drain" || arg == "-d")) {
      a.drain = true;
    } else if (!arg.empty() && arg[0] == '-') {
      throw SluiceException(fmt::format("unknown option '{}' for '{}'", arg, action));
    } else {
      a.positional.push_back(arg);
    }
  }
  std::string file;
  if (!confDir.empty()) {
    file = (std::filesystem::path(confDir) / "config.yaml").string();
  } else if (const char* env = std::getenv("SLUICE_CONF_DIR"); env != nullptr && *env != '\0') {
    file = (std::filesystem::path(env) / "config.yaml").string();
  } else if (std::filesystem::exists("conf/config.yaml")) {
    file = "conf/config.yaml";
  }
  if (!file.empty()) a.config = Configuration::fromYamlFile(file).valueOrThrow();
  a.config.addAll(cli);
  if (!a.jobManager.empty()) {
    auto colon = a.jobManager.rfind(':');
    if (colon == std::string::npos) {
      throw SluiceException(fmt::format("-m expects host:port, got '{}'", a.jobManager));
    }
    a.config.setString(std::string(options::kJobManagerRpcAddress.key),
                       a.jobManager.substr(0, colon), "-m");
    a.config.setString(std::string(options::kJobManagerRpcPort.key), a.jobManager.substr(colon + 1),
                       "-m");
  }
  // A bad port fails here, not as an unreachable address later.
  (void)a.config.get(options::kJobManagerRpcPort);
  return a;
}

// Waits for SIGTERM or SIGINT, then shuts `server` down.
template <class Server>
int serve(Server& server) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  std::thread watcher([&server, set] {
    int sig = 0;
    sigwait(&set, &sig);
    sluice::log::info("Received signal {}, shutting down", sig);
    server.shutdown();
  });
  watcher.detach();
  server.wait();
  return 0;
}

void blockSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

void setUpLogging(const Configuration& config, const std::string& role) {
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  std::filesystem::path dir = config.get(options::kEnvLogDir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw SluiceException(fmt::format("cannot create the log directory '{}' (env.log.dir): {}",
                                      dir.string(), ec.message()));
  }
  std::string file = (dir / fmt::format("sluice-{}-{}.log", role, host)).string();
  std::string error = sluice::log::logToStdoutAndFile(file);
  if (!error.empty()) throw SluiceException(error);
}

std::string formatTime(int64_t epochMs) {
  std::time_t t = static_cast<std::time_t>(epochMs / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%d.%m.%Y %H:%M:%S", &tm);
  return buf;
}

int run(const Args& a) {
  if (a.positional.empty()) throw SluiceException("run: no job library given (sluice run lib.so)");
  const std::string library = a.positional[0];
  std::vector<std::string> jobArgs(a.positional.begin() + 1, a.positional.end());
  // A library from another build is refused here already, naming both.
  std::string theirs = sluice::cluster::JobLibrary::fingerprintOf(library);
  if (theirs != sluice::cluster::buildFingerprint()) {
    throw SluiceException(fmt::format(
        "job library '{}' was built against another Sluice build and is refused: the library's "
        "is [{}], this sluice's is [{}]; rebuild the job against this Sluice",
        library, theirs, sluice::cluster::buildFingerprint()));
  }
  sluice::cluster::ClusterClient client = sluice::cluster::clientFor(a.config);
  auto r = client.submit(library, jobArgs, a.config);
  std::printf("Job has been submitted with JobID %s\n", r.job_id().c_str());
  std::fflush(stdout);
  if (a.detached) return 0;
  sluice::rpc::JobInfo info = client.waitForEnd(r.job_id());
  if (info.state() == "FINISHED") {
    std::printf(
        "Program execution finished\nJob with JobID %s has finished.\nJob Runtime: %lld ms\n",
        r.job_id().c_str(), static_cast<long long>(info.duration_ms()));
    return 0;
  }
  std::fprintf(stderr, "The job %s (%s) ended %s%s%s\n", r.job_id().c_str(), r.job_name().c_str(),
               info.state().c_str(), info.error().empty() ? "" : ": ", info.error().c_str());
  return 1;
}

int list(const Args& a) {
  sluice::cluster::ClusterClient client = sluice::cluster::clientFor(a.config);
  auto jobs = client.list();
  std::vector<sluice::rpc::JobInfo> running, scheduled, ended;
  for (auto& j : jobs) {
    if (j.state() == "CREATED" || j.state() == "INITIALIZING") {
      scheduled.push_back(j);
    } else if (j.state() == "FINISHED" || j.state() == "FAILED" || j.state() == "CANCELED") {
      ended.push_back(j);
    } else {
      running.push_back(j);
    }
  }
  auto print = [](const sluice::rpc::JobInfo& j) {
    std::printf("%s : %s : %s (%s)\n", formatTime(j.start_time_ms()).c_str(), j.job_id().c_str(),
                j.job_name().c_str(), j.state().c_str());
    if (!j.error().empty()) std::printf("    cause: %s\n", j.error().c_str());
  };
  if (running.empty()) {
    std::printf("No running jobs.\n");
  } else {
    std::printf("------------------ Running/Restarting Jobs -------------------\n");
    for (auto& j : running) print(j);
    std::printf("--------------------------------------------------------------\n");
  }
  if (scheduled.empty()) {
    std::printf("No scheduled jobs.\n");
  } else {
    std::printf("----------------------- Scheduled Jobs -----------------------\n");
    for (auto& j : scheduled) print(j);
    std::printf("--------------------------------------------------------------\n");
  }
  if (a.all || !ended.empty()) {
    std::printf("---------------------- Terminated Jobs -----------------------\n");
    for (auto& j : ended) print(j);
    std::printf("--------------------------------------------------------------\n");
  }
  return 0;
}

std::string jobIdArg(const Args& a, const char* action) {
  if (a.positional.empty()) throw SluiceException(fmt::format("{}: no job id given", action));
  return a.positional[0];
}

int dispatch(const std::string& action, int argc, char** argv) {
  if (action == "jobmanager" || action == "taskmanager") {
    Args a = parse(action, argc, argv);
    if (!a.positional.empty()) {
      throw SluiceException(fmt::format("{}: unexpected argument '{}'", action, a.positional[0]));
    }
    blockSignals();
    setUpLogging(a.config, action);
    if (action == "jobmanager") {
      sluice::cluster::JobManager jm(a.config);
      return serve(jm);
    }
    sluice::cluster::TaskManager tm(a.config);
    return serve(tm);
  }
  Args a = parse(action, argc, argv);
  if (action == "run") return run(a);
  if (action == "list") return list(a);
  sluice::cluster::ClusterClient client = sluice::cluster::clientFor(a.config);
  if (action == "cancel") {
    std::string id = jobIdArg(a, "cancel");
    std::printf("Cancelling job %s.\n", id.c_str());
    client.cancel(id);
    auto info = client.waitForEnd(id);
    std::printf("Cancelled job %s (%s).\n", id.c_str(), info.state().c_str());
    return 0;
  }
  if (action == "savepoint") {
    std::string id = jobIdArg(a, "savepoint");
    std::string dir = a.positional.size() > 1 ? a.positional[1] : "";
    std::printf("Triggering savepoint for job %s.\nWaiting for response...\n", id.c_str());
    std::fflush(stdout);
    std::string path = client.savepoint(id, dir, false, false);
    std::printf("Savepoint completed. Path: file:%s\n", path.c_str());
    return 0;
  }
  if (action == "stop") {
    std::string id = jobIdArg(a, "stop");
    std::printf("Suspending job %s.\n", id.c_str());
    std::fflush(stdout);
    std::string path = client.savepoint(id, a.savepointPath, true, a.drain);
    std::printf("Savepoint completed. Path: file:%s\n", path.c_str());
    return 0;
  }
  throw SluiceException(fmt::format("unknown action '{}'", action));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 1 : 0;
  }
  try {
    return dispatch(argv[1], argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice %s: %s\n", argv[1], e.what());
    return 1;
  }
}
