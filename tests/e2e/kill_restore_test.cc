// The proof of exactly-once across process deaths: the job in
// programs/crash_job.cc (a keyed running count and sum into the exactly-once
// FileSink, retained checkpoints) runs as a separate process that the test
// kills with SIGKILL at seeded times and restarts from the newest retained
// checkpoint, until one run finishes. The committed files must then hold
// exactly the failure-free output, computed here without the engine. The
// SIGTERM tests check the graceful cancellation while execute() blocks: the
// process ends by SIGTERM, the checkpoints stay (RETAIN_ON_CANCELLATION), and
// a restore from them completes the job exactly once; a second SIGTERM ends
// a process whose cancellation cannot finish.
//
// Delays only choose when a signal is sent; no assertion depends on timing.
// Where the test must know the process got somewhere (a checkpoint, the
// signal handler), it waits for a file or a log line to appear.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness/checkpoint_jobs.h"
#include "harness/crash_job_output.h"

extern char** environ;

namespace kill_restore_test {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

using sluice::checkpointing::readFinishedLines;
using sluice::test::checkCrashJobOutput;
using sluice::test::TempDir;
using sluice::test::waitUntil;

constexpr int64_t kRecords = 6000;

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The last `maxLines` lines of a log, for failure messages.
std::string tail(const std::string& text, size_t maxLines = 150) {
  size_t pos = text.size();
  for (size_t n = 0; n <= maxLines && pos > 0; ++n) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
  }
  return "[...]\n" + text.substr(pos + 1);
}

// One job process. Its stdout and stderr go to `log`; it runs in `cwd` (a
// directory without conf/config.yaml) with SLUICE_CONF_DIR unset, so no
// configuration file of the machine or the tree changes the job.
class JobProcess {
 public:
  JobProcess(const std::vector<std::string>& args, const fs::path& log, const fs::path& cwd)
      : log_(log) {
    std::vector<std::string> argv = {SLUICE_CRASH_JOB_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> envs;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string_view entry(*e);
      if (entry.rfind("SLUICE_CONF_DIR=", 0) == 0 || entry.rfind("SLUICE_LOG_LEVEL=", 0) == 0) {
        continue;
      }
      envs.emplace_back(entry);
    }
    envs.emplace_back("SLUICE_LOG_LEVEL=info");
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    std::vector<char*> cenv;
    for (auto& e : envs) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    const std::string logPath = log.string();
    const std::string dir = cwd.string();

    pid_ = ::fork();
    if (pid_ == 0) {
      // Only async-signal-safe calls between fork and exec.
      const int fd = ::open(logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0 || ::dup2(fd, 1) < 0 || ::dup2(fd, 2) < 0 || ::chdir(dir.c_str()) != 0) {
        ::_exit(126);
      }
      ::execve(cargv[0], cargv.data(), cenv.data());
      ::_exit(127);
    }
    if (pid_ < 0) ADD_FAILURE() << "fork failed: " << std::strerror(errno);
  }
  ~JobProcess() {
    if (running()) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  JobProcess(const JobProcess&) = delete;
  JobProcess& operator=(const JobProcess&) = delete;

  bool running() const { return pid_ > 0 && !status_; }

  // Sends `sig` to this process only. A process that already exited is a
  // zombie until reaped, so its pid cannot belong to anyone else.
  void signal(int sig) {
    if (running()) ::kill(pid_, sig);
  }

  // Reaps the process if it has ended; returns whether it has.
  bool poll() {
    if (!running()) return status_.has_value();
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) status_ = st;
    return status_.has_value();
  }

  // Waits until the process ends (true) or `timeout` passes (false; the
  // process is then killed, so nothing outlives the test).
  bool waitFor(milliseconds timeout) {
    if (waitUntil([&] { return poll(); }, timeout)) return true;
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    status_ = st;
    return false;
  }

  void killNow() {
    signal(SIGKILL);
    waitFor(milliseconds(60000));
  }

  int status() const { return status_.value_or(-1); }
  bool exitedWith(int code) const {
    return status_ && WIFEXITED(*status_) && WEXITSTATUS(*status_) == code;
  }
  bool signalledBy(int sig) const {
    return status_ && WIFSIGNALED(*status_) && WTERMSIG(*status_) == sig;
  }
  std::string describeStatus() const {
    if (!status_) return "still running";
    if (WIFEXITED(*status_)) return "exit code " + std::to_string(WEXITSTATUS(*status_));
    if (WIFSIGNALED(*status_)) return std::string("killed by ") + strsignal(WTERMSIG(*status_));
    return "status " + std::to_string(*status_);
  }
  std::string log() const { return readFile(log_); }
  bool logContains(const std::string& text) const { return log().find(text) != std::string::npos; }

 private:
  fs::path log_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// The job-id directories under the checkpoint directory.
std::set<std::string> jobDirs(const fs::path& checkpoints) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(checkpoints, ec)) {
    if (e.is_directory()) out.insert(e.path().filename().string());
  }
  return out;
}

// The newest completed checkpoint (chk-N with _metadata, largest N) of one
// job-id directory.
std::optional<fs::path> newestCompleted(const fs::path& jobDir) {
  std::optional<fs::path> best;
  int64_t bestId = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(jobDir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("chk-", 0) != 0) continue;
    char* end = nullptr;
    const int64_t id = std::strtoll(name.c_str() + 4, &end, 10);
    if (end == name.c_str() + 4 || *end != '\0') continue;
    if (!fs::exists(e.path() / "_metadata", ec)) continue;
    if (id > bestId) {
      bestId = id;
      best = e.path();
    }
  }
  return best;
}

// The checkpoint a run retained: the newest completed one in the job-id
// directory the run created (the one directory that is new since `before`).
std::optional<fs::path> retainedBy(const fs::path& checkpoints,
                                   const std::set<std::string>& before) {
  for (const auto& d : jobDirs(checkpoints)) {
    if (before.count(d) == 0) return newestCompleted(checkpoints / d);
  }
  return std::nullopt;
}

// Hidden (in-progress or pending) files left under the output directory.
std::vector<std::string> hiddenFiles(const fs::path& out) {
  std::vector<std::string> hidden;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(out, ec)) {
    if (e.is_regular_file() && e.path().filename().string().rfind('.', 0) == 0) {
      hidden.push_back(fs::relative(e.path(), out).string());
    }
  }
  return hidden;
}

// The output, checkpoint and log directories of one test, and the runs of
// the job in it.
class Scenario {
 public:
  explicit Scenario(std::string backend) : dir_("kill-restore"), backend_(std::move(backend)) {
    fs::create_directories(output());
    fs::create_directories(checkpoints());
  }

  fs::path output() const { return dir_.path() / "out"; }
  fs::path checkpoints() const { return dir_.path() / "checkpoints"; }

  // Starts run number runs() of the job, restoring from `restore` if set.
  std::unique_ptr<JobProcess> launch(const std::optional<fs::path>& restore,
                                     std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--output",      output().string(),
                                     "--checkpoints", checkpoints().string(),
                                     "--backend",     backend_};
    if (restore) args.insert(args.end(), {"--restore", restore->string()});
    args.insert(args.end(), extra.begin(), extra.end());
    const fs::path log = dir_.path() / ("run-" + std::to_string(logs_.size()) + ".log");
    logs_.push_back({log, restore ? restore->string() : std::string("(fresh start)")});
    return std::make_unique<JobProcess>(args, log, dir_.path());
  }

  // Every run's log (the tail of each), for a failure message.
  std::string logs() const {
    std::ostringstream s;
    for (size_t i = 0; i < logs_.size(); ++i) {
      s << "\n===== run " << i << ", restored from " << logs_[i].second << " ("
        << logs_[i].first.string() << ") =====\n"
        << tail(readFile(logs_[i].first));
    }
    return s.str();
  }

 private:
  TempDir dir_;
  std::string backend_;
  std::vector<std::pair<fs::path, std::string>> logs_;  // log, restored from
};

constexpr milliseconds kRunTimeout{60000};

// ---- SIGKILL at seeded times -------------------------------------------------

struct KillPlan {
  uint32_t seed;
  const char* backend;
  int kills;
};

void PrintTo(const KillPlan& p, std::ostream* os) {
  *os << "seed " << p.seed << ", " << p.backend << ", " << p.kills << " kill(s)";
}

std::string planName(const testing::TestParamInfo<KillPlan>& info) {
  return "seed" + std::to_string(info.param.seed) + "_" + info.param.backend;
}

class KillRestoreTest : public testing::TestWithParam<KillPlan> {};

// Kills the job process (SIGKILL) at seeded times, restarts it from the
// newest retained checkpoint of the runs so far (from scratch while there
// is none), and finally lets it finish: the committed output is the
// failure-free output.
TEST_P(KillRestoreTest, OutputIsExactlyOnceAfterKills) {
  const KillPlan plan = GetParam();
  std::mt19937 rng(plan.seed);
  Scenario scenario(plan.backend);
  std::optional<fs::path> restore;
  std::ostringstream story;
  story << "seed " << plan.seed << " (" << plan.backend << "):";
  bool finished = false;

  for (int k = 0; k < plan.kills && !finished; ++k) {
    const auto before = jobDirs(scenario.checkpoints());
    auto job = scenario.launch(restore);
    const milliseconds delay(300 + static_cast<int64_t>(rng() % 1201));
    // Only chooses the moment of the kill.
    std::this_thread::sleep_for(delay);
    if (job->poll()) {
      // A fast machine finished the job before the kill: nothing left to
      // kill, and the output must still be right.
      ASSERT_TRUE(job->exitedWith(0)) << job->describeStatus() << scenario.logs();
      story << " run " << k << " finished before its kill at " << delay.count() << " ms;";
      finished = true;
      break;
    }
    job->killNow();
    ASSERT_TRUE(job->signalledBy(SIGKILL) || job->exitedWith(0))
        << "run " << k << ": " << job->describeStatus() << scenario.logs();
    if (job->exitedWith(0)) {
      finished = true;
      break;
    }
    // The newest checkpoint this run completed; if it completed none, the
    // next run starts from the same place this one did.
    if (auto retained = retainedBy(scenario.checkpoints(), before)) restore = *retained;
    story << " run " << k << " killed at " << delay.count() << " ms, next restores from "
          << (restore ? restore->lexically_relative(scenario.checkpoints()).string()
                      : std::string("nothing"))
          << ";";
  }
  if (!finished) {
    auto job = scenario.launch(restore);
    ASSERT_TRUE(job->waitFor(kRunTimeout))
        << "the last run did not finish in " << kRunTimeout.count() << " ms" << scenario.logs();
    ASSERT_TRUE(job->exitedWith(0)) << job->describeStatus() << scenario.logs();
    story << " the last run finished";
  }
  std::cout << story.str() << "\n";

  const std::string wrong = checkCrashJobOutput(scenario.output(), kRecords);
  EXPECT_EQ(wrong, "") << story.str() << scenario.logs();
  const auto hidden = hiddenFiles(scenario.output());
  EXPECT_TRUE(hidden.empty()) << hidden.size() << " hidden files left, e.g. " << hidden.front()
                              << "\n"
                              << story.str() << scenario.logs();
}

INSTANTIATE_TEST_SUITE_P(Seeds, KillRestoreTest,
                         testing::Values(KillPlan{1, "hashmap", 1}, KillPlan{2, "rocksdb", 2},
                                         KillPlan{3, "hashmap", 2}),
                         planName);

// ---- SIGTERM ----------------------------------------------------------------

const std::string kHandlersInstalled = "crash_job: signal handlers installed";

// The first SIGTERM cancels the job gracefully: the process ends by SIGTERM,
// the retained checkpoints stay, and restoring from the newest completes the
// job exactly once.
TEST(KillRestoreSigtermTest, SigtermCancelsAndKeepsTheCheckpointsForARestore) {
  Scenario scenario("rocksdb");
  const auto before = jobDirs(scenario.checkpoints());
  // 20 s at this rate: the job is still running when the signal comes.
  auto job = scenario.launch(std::nullopt, {"--rate", "300"});
  ASSERT_TRUE(waitUntil(
      [&] {
        return job->poll() || (job->logContains(kHandlersInstalled) &&
                               retainedBy(scenario.checkpoints(), before).has_value());
      },
      kRunTimeout))
      << "no checkpoint completed" << scenario.logs();
  ASSERT_TRUE(job->running()) << job->describeStatus() << scenario.logs();

  job->signal(SIGTERM);
  ASSERT_TRUE(job->waitFor(milliseconds(20000)))
      << "the process did not end within 20 s of SIGTERM" << scenario.logs();
  ASSERT_TRUE(job->signalledBy(SIGTERM)) << job->describeStatus() << scenario.logs();
  EXPECT_TRUE(job->logContains("Received SIGTERM: cancelling job")) << scenario.logs();
  // The graceful path ran to its end (not the default action of SIGTERM).
  EXPECT_TRUE(job->logContains("was cancelled by SIGTERM; ending the process by it"))
      << scenario.logs();

  const auto retained = retainedBy(scenario.checkpoints(), before);
  ASSERT_TRUE(retained.has_value())
      << "no completed checkpoint left after the cancellation (RETAIN_ON_CANCELLATION)"
      << scenario.logs();

  auto restored = scenario.launch(retained, {"--rate", "0"});
  ASSERT_TRUE(restored->waitFor(kRunTimeout))
      << "the restored run did not finish" << scenario.logs();
  ASSERT_TRUE(restored->exitedWith(0)) << restored->describeStatus() << scenario.logs();
  EXPECT_EQ(checkCrashJobOutput(scenario.output(), kRecords), "") << scenario.logs();
  const auto hidden = hiddenFiles(scenario.output());
  EXPECT_TRUE(hidden.empty()) << hidden.size() << " hidden files left, e.g. " << hidden.front()
                              << scenario.logs();
}

// A second SIGTERM ends the process at once, also when the cancellation the
// first one started cannot finish (a task is stuck in user code).
TEST(KillRestoreSigtermTest, SecondSigtermEndsAStuckCancellation) {
  Scenario scenario("hashmap");
  auto job = scenario.launch(std::nullopt, {"--stall-at", "1000"});
  ASSERT_TRUE(waitUntil([&] { return job->poll() || job->logContains("crash_job: stalled at"); },
                        kRunTimeout))
      << scenario.logs();
  ASSERT_TRUE(job->running()) << job->describeStatus() << scenario.logs();

  job->signal(SIGTERM);
  ASSERT_TRUE(
      waitUntil([&] { return job->poll() || job->logContains("Received SIGTERM: cancelling job"); },
                kRunTimeout))
      << scenario.logs();
  ASSERT_TRUE(job->running()) << "the cancellation finished although a task is stuck: "
                              << job->describeStatus() << scenario.logs();

  job->signal(SIGTERM);
  ASSERT_TRUE(job->waitFor(milliseconds(20000)))
      << "the process did not end within 20 s of the second SIGTERM" << scenario.logs();
  EXPECT_TRUE(job->signalledBy(SIGTERM)) << job->describeStatus() << scenario.logs();
  EXPECT_FALSE(job->logContains("ending the process by it")) << scenario.logs();
}

// Two SIGTERMs back to back, once the handler is in place: the process dies
// by SIGTERM.
TEST(KillRestoreSigtermTest, TwoSigtermsInARowEndTheProcess) {
  Scenario scenario("hashmap");
  auto job = scenario.launch(std::nullopt, {"--rate", "300"});
  ASSERT_TRUE(
      waitUntil([&] { return job->poll() || job->logContains(kHandlersInstalled); }, kRunTimeout))
      << scenario.logs();
  ASSERT_TRUE(job->running()) << job->describeStatus() << scenario.logs();

  job->signal(SIGTERM);
  job->signal(SIGTERM);
  ASSERT_TRUE(job->waitFor(milliseconds(20000)))
      << "the process did not end within 20 s of two SIGTERMs" << scenario.logs();
  EXPECT_TRUE(job->signalledBy(SIGTERM)) << job->describeStatus() << scenario.logs();
}

// The check itself, on output written here: it takes any interleaving of the
// two source subtasks (here the second subtask's records all come first, so
// key 0 meets record 3007 before record 0, whose step is 0), and it names a
// record counted twice in place of another.
TEST(CrashJobOutputCheckTest, AcceptsAnyInterleavingAndNamesARecordCountedTwice) {
  constexpr int64_t kKeys = 97;
  auto write = [](const fs::path& dir, const std::vector<int64_t>& order) {
    fs::create_directories(dir);
    std::map<int64_t, std::pair<int64_t, int64_t>> running;  // key -> count, sum
    std::ofstream out(dir / "part-0-0");
    for (int64_t i : order) {
      auto& [c, s] = running[i % kKeys];
      ++c;
      s += i;
      out << i % kKeys << "," << c << "," << s << "\n";
    }
  };
  std::vector<int64_t> order;
  for (int64_t i = kRecords / 2; i < kRecords; ++i) order.push_back(i);
  for (int64_t i = 0; i < kRecords / 2; ++i) order.push_back(i);
  TempDir dir("crash-job-check");
  write(dir.path() / "interleaved", order);
  EXPECT_EQ(checkCrashJobOutput(dir.path() / "interleaved", kRecords), "");

  // Record 97 (key 0) replaced by a second record 3007: the counts and the
  // number of lines are right, the final sum is not, and the step names it.
  std::vector<int64_t> twice = order;
  for (auto& i : twice) {
    if (i == 97) i = 3007;
  }
  write(dir.path() / "twice", twice);
  const std::string wrong = checkCrashJobOutput(dir.path() / "twice", kRecords);
  EXPECT_NE(wrong.find("key 0: sum"), std::string::npos) << wrong;
  EXPECT_NE(wrong.find("adds 3007"), std::string::npos) << wrong;
}

}  // namespace
}  // namespace kill_restore_test
