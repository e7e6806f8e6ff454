// The standalone cluster as a user runs it: a JobManager and TaskManagers as
// processes of the `sluice` binary on 127.0.0.1 (ephemeral ports), jobs
// submitted as libraries with `sluice run`, and the CLI's verbs.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness/crash_job_output.h"
#include "harness/local_cluster.h"
#include "harness/temp_dir.h"
#include "harness/word_counts.h"

namespace cluster_test {
namespace {

namespace fs = std::filesystem;
using sluice::test::CliResult;
using sluice::test::LocalCluster;
using sluice::test::TempDir;

// Every word's final count, computed here from the text.
std::map<std::string, int64_t> referenceCounts(const std::string& file) {
  return sluice::test::referenceWordCounts(sluice::test::readWholeFile(file));
}

// The highest count printed for each word: "(word,n)" lines in every file
// under `dir`.
std::map<std::string, int64_t> finalCounts(const fs::path& dir, int64_t* lines) {
  std::map<std::string, int64_t> counts;
  *lines = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path());
    std::string line;
    while (std::getline(in, line)) {
      ++*lines;
      auto comma = line.rfind(',');
      if (line.size() < 5 || line.front() != '(' || line.back() != ')' ||
          comma == std::string::npos) {
        ADD_FAILURE() << "unexpected line '" << line << "' in " << e.path();
        continue;
      }
      std::string word = line.substr(1, comma - 1);
      int64_t n = std::stoll(line.substr(comma + 1, line.size() - comma - 2));
      counts[word] = std::max(counts[word], n);
    }
  }
  return counts;
}

TEST(ClusterTest, WordCountAtParallelism4OnTwoTaskManagersMatchesTheReference) {
  TempDir dir("cluster-wc");
  LocalCluster cluster(dir.path(), {"cluster.evenly-spread-out-slots=true"});
  cluster.startJobManager();
  cluster.startTaskManager(2);
  cluster.startTaskManager(2);
  const fs::path out = dir.path() / "out";
  CliResult r = cluster.cli("run", {"-p", "4", SLUICE_WORDCOUNT_LIB, "--input",
                                    SLUICE_WORDCOUNT_TEXT, "--output", out.string()});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("Job with JobID"), std::string::npos) << r.output;
  int64_t lines = 0;
  std::map<std::string, int64_t> got = finalCounts(out, &lines);
  std::map<std::string, int64_t> expected = referenceCounts(SLUICE_WORDCOUNT_TEXT);
  EXPECT_EQ(got, expected);
  int64_t words = 0;
  for (auto& [w, n] : expected) words += n;
  EXPECT_EQ(lines, words) << "one update per word occurrence";
  // The keyBy crossed TaskManagers: both ran subtasks of the job.
  for (int i = 0; i < 2; ++i) {
    EXPECT_NE(cluster.taskManager(i).output().find("Running 4 subtasks"), std::string::npos)
        << cluster.taskManager(i).output();
  }
}

TEST(ClusterTest, ExecuteWithTargetRemoteSubmitsFromTheJobsOwnExecutable) {
  TempDir dir("cluster-remote-execute");
  LocalCluster cluster(dir.path(), {});
  cluster.startJobManager();
  cluster.startTaskManager(2);
  const fs::path out = dir.path() / "out";
  CliResult r =
      cluster.runProcess({SLUICE_WORDCOUNT_BIN, "-D", "execution.target=remote", "-D",
                          "jobmanager.rpc.address=127.0.0.1", "-D",
                          "jobmanager.rpc.port=" + std::to_string(cluster.port()), "-p", "2",
                          "--input", SLUICE_WORDCOUNT_TEXT, "--output", out.string()});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("Job has been submitted with JobID"), std::string::npos) << r.output;
  int64_t lines = 0;
  EXPECT_EQ(finalCounts(out, &lines), referenceCounts(SLUICE_WORDCOUNT_TEXT));
  // It ran on the cluster, not in the executable.
  EXPECT_NE(cluster.jobManager().output().find("Submitted job 'Streaming WordCount'"),
            std::string::npos);
}

TEST(ClusterTest, WindowedWordCountRunsAsALibraryAsItRunsEmbedded) {
  TempDir dir("cluster-wwc");
  LocalCluster cluster(dir.path(), {"cluster.evenly-spread-out-slots=true"});
  cluster.startJobManager();
  cluster.startTaskManager(1);
  cluster.startTaskManager(1);
  const fs::path clusterOut = dir.path() / "cluster-out";
  const fs::path embeddedOut = dir.path() / "embedded-out";
  CliResult r = cluster.cli("run", {"-p", "2", SLUICE_WINDOWED_WORDCOUNT_LIB, "--events", "20000",
                                    "--output", clusterOut.string()});
  ASSERT_EQ(r.exitCode, 0) << r.output;
  CliResult e = cluster.runProcess({SLUICE_WINDOWED_WORDCOUNT_BIN, "-p", "2", "--events", "20000",
                                    "--output", embeddedOut.string()});
  ASSERT_EQ(e.exitCode, 0) << e.output;
  auto sortedLines = [](const fs::path& p) {
    std::vector<std::string> v;
    for (const auto& f : fs::recursive_directory_iterator(p)) {
      if (!f.is_regular_file()) continue;
      std::ifstream in(f.path());
      for (std::string l; std::getline(in, l);) v.push_back(l);
    }
    std::sort(v.begin(), v.end());
    return v;
  };
  std::vector<std::string> a = sortedLines(clusterOut);
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, sortedLines(embeddedOut));
}

// ---- kill -9 of a TaskManager ------------------------------------------------------

struct KillCase {
  uint32_t seed;
  std::string backend;
};

void PrintTo(const KillCase& c, std::ostream* os) { *os << c.backend << " seed " << c.seed; }

class TaskManagerKillTest : public ::testing::TestWithParam<KillCase> {};

TEST_P(TaskManagerKillTest, ExactlyOnceOutputAfterATaskManagerIsKilled) {
  const KillCase c = GetParam();
  std::mt19937 rng(c.seed);
  TempDir dir("cluster-kill");
  LocalCluster cluster(dir.path(),
                       {"cluster.evenly-spread-out-slots=true", "heartbeat.interval=100ms",
                        "heartbeat.timeout=3s", "slot.request.timeout=60s"});
  cluster.startJobManager();
  cluster.startTaskManager(2);
  cluster.startTaskManager(2);
  constexpr int64_t kRecords = 6000;
  const fs::path out = dir.path() / "out";
  const fs::path checkpoints = dir.path() / "checkpoints";
  const std::string interval = std::to_string(200 + rng() % 301) + "ms";
  const std::string job = cluster.submitDetached(
      SLUICE_CRASH_JOB_LIB,
      {"-D", "execution.checkpointing.interval=" + interval, "-D",
       "restart-strategy.type=fixed-delay", "-D", "restart-strategy.fixed-delay.attempts=20", "-D",
       "restart-strategy.fixed-delay.delay=200ms"},
      {"--output", out.string(), "--checkpoints", checkpoints.string(), "--backend", c.backend,
       "--records", std::to_string(kRecords), "--rate", "1500"});
  ASSERT_FALSE(job.empty());
  // A seeded moment in the run (4 s at full speed), then kill -9 one of
  // the two TaskManagers; every other seed brings a new one up.
  std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 2500));
  const int victim = static_cast<int>(rng() % 2);
  cluster.taskManager(victim).kill(SIGKILL);
  ASSERT_TRUE(cluster.taskManager(victim).wait(std::chrono::seconds(30)));
  if (c.seed % 2 == 1) cluster.startTaskManager(2);
  std::string cause;
  const std::string state = cluster.waitForEnd(job, &cause);
  const std::string jmLog = cluster.jobManager().output();
  ASSERT_EQ(state, "FINISHED") << cause << "\n" << jmLog;
  EXPECT_EQ(sluice::test::checkCrashJobOutput(out, kRecords), "") << jmLog;
  // The kill came while the job ran, and the job failed over.
  EXPECT_NE(jmLog.find("restarting in"), std::string::npos) << jmLog;
}

std::vector<KillCase> killCases() {
  std::vector<KillCase> cases;
  for (uint32_t s = 1; s <= 5; ++s) cases.push_back({s, "hashmap"});
  for (uint32_t s = 1; s <= 2; ++s) cases.push_back({s, "rocksdb"});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Seeds, TaskManagerKillTest, ::testing::ValuesIn(killCases()),
                         [](const ::testing::TestParamInfo<KillCase>& info) {
                           return info.param.backend + "_seed" + std::to_string(info.param.seed);
                         });

// ---- savepoint at one parallelism, resume at another ------------------------------------

// The lines programs/rescale_job.cc commits over `records` records, sorted.
std::vector<std::string> expectedRescaleLines(int64_t records) {
  constexpr int64_t kKeys = 50;
  std::vector<std::string> lines;
  std::map<int64_t, int64_t> counts;
  std::map<std::pair<int64_t, int64_t>, int64_t> windows;  // key, start -> count
  std::set<std::pair<int64_t, int64_t>> timers;
  for (int64_t i = 0; i < records; ++i) {
    const int64_t k = i % kKeys;
    const int64_t t = i * 10;
    const int64_t n = ++counts[k];
    lines.push_back("c," + std::to_string(k) + "," + std::to_string(n));
    ++windows[{k, t - t % 1000}];
    if ((i / kKeys) % 100 == 0) timers.insert({k, t + 500});
  }
  for (auto& [kw, c] : windows) {
    lines.push_back("w," + std::to_string(kw.first) + "," + std::to_string(kw.second) + "," +
                    std::to_string(c));
  }
  for (auto& [k, t] : timers) lines.push_back("t," + std::to_string(k) + "," + std::to_string(t));
  std::sort(lines.begin(), lines.end());
  return lines;
}

TEST(ClusterSavepointTest, StopAtParallelism2ResumeAt3KeepsStateTimersAndWindows) {
  TempDir dir("cluster-rescale");
  LocalCluster cluster(dir.path(), {"cluster.evenly-spread-out-slots=true"});
  cluster.startJobManager();
  cluster.startTaskManager(1);
  cluster.startTaskManager(1);
  constexpr int64_t kRecords = 12000;
  const fs::path out = dir.path() / "out";
  const fs::path savepoints = dir.path() / "savepoints";
  const std::vector<std::string> jobArgs = {"--output",      out.string(),
                                            "--checkpoints", (dir.path() / "checkpoints").string(),
                                            "--records",     std::to_string(kRecords),
                                            "--rate",        "3000"};
  const std::string job = cluster.submitDetached(
      SLUICE_RESCALE_JOB_LIB, {"-p", "2", "-D", "execution.checkpointing.interval=200ms"}, jobArgs);
  ASSERT_FALSE(job.empty());
  for (int i = 0; i < 600 && cluster.jobState(job) != "RUNNING"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  CliResult stop = cluster.cli("stop", {"--savepointPath", savepoints.string(), job});
  ASSERT_EQ(stop.exitCode, 0) << stop.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(stop.output, m, std::regex("Path: file:(\\S+)"))) << stop.output;
  const std::string savepoint = m[1];
  ASSERT_EQ(cluster.waitForEnd(job), "FINISHED");
  const size_t before = sluice::checkpointing::readFinishedLines(out).size();
  ASSERT_GT(before, 0u);
  ASSERT_LT(before, expectedRescaleLines(kRecords).size()) << "the savepoint came after the end";

  cluster.startTaskManager(1);
  std::vector<std::string> resume = {"-p",
                                     "3",
                                     "-s",
                                     savepoint,
                                     "-D",
                                     "execution.checkpointing.interval=200ms",
                                     SLUICE_RESCALE_JOB_LIB};
  resume.insert(resume.end(), jobArgs.begin(), jobArgs.end());
  CliResult r = cluster.cli("run", resume);
  ASSERT_EQ(r.exitCode, 0) << r.output << cluster.jobManager().output();
  std::vector<std::string> got = sluice::checkpointing::readFinishedLines(out);
  std::sort(got.begin(), got.end());
  const std::vector<std::string> expected = expectedRescaleLines(kRecords);
  std::vector<std::string> missing, extra;
  std::set_difference(expected.begin(), expected.end(), got.begin(), got.end(),
                      std::back_inserter(missing));
  std::set_difference(got.begin(), got.end(), expected.begin(), expected.end(),
                      std::back_inserter(extra));
  auto head = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < 20; ++i) s += v[i] + "\n";
    return s;
  };
  EXPECT_TRUE(missing.empty()) << missing.size() << " lines missing, e.g.\n" << head(missing);
  EXPECT_TRUE(extra.empty()) << extra.size() << " lines too many, e.g.\n" << head(extra);
  // The third TaskManager, new for the second run, ran a share of it.
  EXPECT_NE(cluster.taskManager(2).output().find("Running "), std::string::npos)
      << cluster.taskManager(2).output();
}

// ---- backpressure across processes ------------------------------------------------------

int64_t residentKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

TEST(ClusterBackpressureTest, ASlowConsumerBoundsTheProducersMemoryAndCancelEndsIt) {
  TempDir dir("cluster-backpressure");
  LocalCluster cluster(
      dir.path(), {"cluster.evenly-spread-out-slots=true", "taskmanager.memory.segment-size=1kb"});
  cluster.startJobManager();
  cluster.startTaskManager(1);
  cluster.startTaskManager(1);
  const std::string job = cluster.submitDetached(
      SLUICE_RESCALE_JOB_LIB, {"-p", "2", "-D", "execution.checkpointing.interval=500ms"},
      {"--mode", "backpressure", "--output", (dir.path() / "out").string(), "--checkpoints",
       (dir.path() / "checkpoints").string()});
  ASSERT_FALSE(job.empty());
  for (int i = 0; i < 600 && cluster.jobState(job) != "RUNNING"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // The generator could produce millions of records a second; the sink
  // takes 1000 per second per subtask. Without backpressure the queues
  // would grow by hundreds of MB in these seconds.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const int64_t a0 = residentKiB(cluster.taskManager(0).pid());
  const int64_t b0 = residentKiB(cluster.taskManager(1).pid());
  std::this_thread::sleep_for(std::chrono::seconds(4));
  const int64_t a1 = residentKiB(cluster.taskManager(0).pid());
  const int64_t b1 = residentKiB(cluster.taskManager(1).pid());
  EXPECT_LT(a1 - a0, 48 * 1024) << a0 << " KiB -> " << a1 << " KiB";
  EXPECT_LT(b1 - b0, 48 * 1024) << b0 << " KiB -> " << b1 << " KiB";
  // No deadlock: checkpoints complete through the backpressured channels.
  const std::string log = cluster.jobManager().output();
  EXPECT_NE(log.find("Completed checkpoint"), std::string::npos) << log;
  CliResult cancel = cluster.cli("cancel", {job}, std::chrono::seconds(60));
  EXPECT_EQ(cancel.exitCode, 0) << cancel.output;
  EXPECT_EQ(cluster.jobState(job), "CANCELED");
}

// ---- the CLI's verbs and errors ---------------------------------------------------------

TEST(ClusterCliTest, ListCancelSavepointAndStopAgainstALiveCluster) {
  TempDir dir("cluster-cli");
  LocalCluster cluster(dir.path(), {});
  cluster.startJobManager();
  cluster.startTaskManager(2);
  const fs::path savepoints = dir.path() / "savepoints";
  auto start = [&](const std::string& name) {
    return cluster.submitDetached(
        SLUICE_CRASH_JOB_LIB, {"-D", "execution.checkpointing.interval=200ms"},
        {"--output", (dir.path() / name).string(), "--checkpoints",
         (dir.path() / (name + "-cp")).string(), "--records", "100000000", "--rate", "200"});
  };
  const std::string a = start("a");
  ASSERT_FALSE(a.empty());
  // Running: list shows it.
  for (int i = 0; i < 600 && cluster.jobState(a) != "RUNNING"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(cluster.jobState(a), "RUNNING");
  CliResult sp = cluster.cli("savepoint", {a, savepoints.string()});
  ASSERT_EQ(sp.exitCode, 0) << sp.output;
  EXPECT_NE(sp.output.find("Savepoint completed. Path: file:" + savepoints.string()),
            std::string::npos)
      << sp.output;
  CliResult cancel = cluster.cli("cancel", {a});
  ASSERT_EQ(cancel.exitCode, 0) << cancel.output;
  EXPECT_EQ(cluster.jobState(a), "CANCELED");
  // A second cancel of an ended job is an error.
  CliResult again = cluster.cli("cancel", {a});
  EXPECT_EQ(again.exitCode, 1);
  EXPECT_NE(again.output.find("already ended"), std::string::npos) << again.output;

  // stop with a savepoint: the job ends FINISHED, the path is printed.
  const std::string b = start("b");
  ASSERT_FALSE(b.empty());
  for (int i = 0; i < 600 && cluster.jobState(b) != "RUNNING"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CliResult stop = cluster.cli("stop", {"--savepointPath", savepoints.string(), b});
  ASSERT_EQ(stop.exitCode, 0) << stop.output;
  EXPECT_NE(stop.output.find("Savepoint completed. Path: file:"), std::string::npos) << stop.output;
  EXPECT_EQ(cluster.waitForEnd(b), "FINISHED");
  CliResult list = cluster.cli("list", {"-a"});
  EXPECT_NE(list.output.find(a + " : crash job (CANCELED)"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find(b + " : crash job (FINISHED)"), std::string::npos) << list.output;
}

TEST(ClusterCliTest, ErrorsNameWhatWasWrongAndExitNonZero) {
  TempDir dir("cluster-cli-errors");
  LocalCluster cluster(dir.path(), {"slot.request.timeout=1s"});
  cluster.startJobManager();
  cluster.startTaskManager(2);
  // A job id that does not exist.
  CliResult unknown = cluster.cli("cancel", {"0123456789abcdef"});
  EXPECT_EQ(unknown.exitCode, 1);
  EXPECT_NE(unknown.output.find("no job with id '0123456789abcdef'"), std::string::npos)
      << unknown.output;
  CliResult unknownSp = cluster.cli("savepoint", {"feedface", dir.path().string()});
  EXPECT_EQ(unknownSp.exitCode, 1);
  EXPECT_NE(unknownSp.output.find("no job with id 'feedface'"), std::string::npos)
      << unknownSp.output;
  // A JobManager that is not there (a port nobody listens on: ours, closed).
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int deadPort = ntohs(addr.sin_port);
  ::close(fd);
  CliResult unreachable = cluster.runProcess(
      {LocalCluster::binary(), "list", "-m", "127.0.0.1:" + std::to_string(deadPort)});
  EXPECT_EQ(unreachable.exitCode, 1);
  EXPECT_NE(unreachable.output.find("cannot reach the JobManager at 127.0.0.1:" +
                                    std::to_string(deadPort)),
            std::string::npos)
      << unreachable.output;
  // More slots than the cluster has: fails after slot.request.timeout,
  // naming what it needed and had.
  CliResult tooBig =
      cluster.cli("run", {"-p", "5", SLUICE_WORDCOUNT_LIB, "--input", SLUICE_WORDCOUNT_TEXT,
                          "--output", (dir.path() / "big").string()});
  EXPECT_EQ(tooBig.exitCode, 1);
  EXPECT_NE(tooBig.output.find("it needs 5 slots, the cluster has 2 free of 2"), std::string::npos)
      << tooBig.output;
  // A library from another build (assertions off: another fingerprint).
  CliResult mismatched = cluster.cli("run", {SLUICE_MISMATCHED_JOB_LIB});
  EXPECT_EQ(mismatched.exitCode, 1);
  EXPECT_NE(mismatched.output.find("built against another Sluice build"), std::string::npos)
      << mismatched.output;
  EXPECT_NE(mismatched.output.find("release"), std::string::npos) << mismatched.output;
  EXPECT_NE(mismatched.output.find("assertions"), std::string::npos) << mismatched.output;
  // Not a job library at all.
  CliResult notALib = cluster.cli("run", {SLUICE_WORDCOUNT_TEXT});
  EXPECT_EQ(notALib.exitCode, 1);
  EXPECT_NE(notALib.output.find("cannot load job library"), std::string::npos) << notALib.output;
  // A misspelt -D key.
  CliResult badKey = cluster.cli("list", {"-D", "paralelism.default=2"});
  EXPECT_EQ(badKey.exitCode, 1);
  EXPECT_NE(badKey.output.find("did you mean 'parallelism.default'"), std::string::npos)
      << badKey.output;
  // The cluster still serves.
  CliResult ok =
      cluster.cli("run", {"-p", "2", SLUICE_WORDCOUNT_LIB, "--input", SLUICE_WORDCOUNT_TEXT,
                          "--output", (dir.path() / "ok").string()});
  EXPECT_EQ(ok.exitCode, 0) << ok.output;
}

// ---- garbage on the ports -----------------------------------------------------------------

// Connects to 127.0.0.1:port, sends `bytes`, closes.
void sendGarbage(int port, const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
      << "port " << port << ": " << std::strerror(errno);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) break;  // the peer closed on us: fine
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

int portFromLog(const std::string& log, const std::string& what) {
  std::smatch m;
  std::regex re(what + " ?[^ ]*:([0-9]+)");
  if (!std::regex_search(log, m, re)) return 0;
  return std::stoi(m[1]);
}

TEST(ClusterRobustnessTest, GarbageOnEveryPortClosesThatConnectionAndTheClusterKeepsServing) {
  TempDir dir("cluster-garbage");
  LocalCluster cluster(dir.path(), {"cluster.evenly-spread-out-slots=true"});
  cluster.startJobManager();
  cluster.startTaskManager(1);
  cluster.startTaskManager(1);
  const std::string tmLog = cluster.taskManager(0).output();
  const int tmRpc = portFromLog(tmLog, "listening on");
  const int tmData = portFromLog(tmLog, "\\(rpc\\) and");
  ASSERT_GT(tmRpc, 0) << tmLog;
  ASSERT_GT(tmData, 0) << tmLog;
  std::mt19937 rng(7);
  for (int port : {cluster.port(), tmRpc, tmData}) {
    for (int round = 0; round < 20; ++round) {
      std::string bytes(1 + rng() % 4096, '\0');
      for (auto& b : bytes) b = static_cast<char>(rng());
      if (round == 0)
        bytes = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes;        // a broken HTTP/2 preface
      if (round == 1) bytes = std::string("\xff\xff\xff\xff", 4);  // a huge length
      sendGarbage(port, bytes);
    }
  }
  EXPECT_TRUE(cluster.jobManager().running());
  EXPECT_TRUE(cluster.taskManager(0).running());
  EXPECT_TRUE(cluster.taskManager(1).running());
  CliResult ok =
      cluster.cli("run", {"-p", "2", SLUICE_WORDCOUNT_LIB, "--input", SLUICE_WORDCOUNT_TEXT,
                          "--output", (dir.path() / "out").string()});
  EXPECT_EQ(ok.exitCode, 0) << ok.output;
  int64_t lines = 0;
  EXPECT_EQ(finalCounts(dir.path() / "out", &lines), referenceCounts(SLUICE_WORDCOUNT_TEXT));
}

}  // namespace
}  // namespace cluster_test
