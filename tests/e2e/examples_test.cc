// Runs the example programs as a user would (separate processes) and checks
// their printed counts against counts computed here from the same input.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness/word_counts.h"

namespace examples_test {
namespace {

std::map<std::string, int64_t> referenceCounts(const std::string& text) {
  return sluice::test::referenceWordCounts(text);
}

// Parses "(word,n)" lines, optionally prefixed "k> ", keeping the last (highest)
// count per word and checking that each word's counts run 1, 2, 3, ...
std::map<std::string, int64_t> parseRunningCounts(const std::string& out) {
  std::map<std::string, int64_t> last;
  std::istringstream in(out);
  std::string l;
  while (std::getline(in, l)) {
    std::string body = l;
    size_t prefix = body.find("> ");
    if (prefix != std::string::npos && prefix > 0 &&
        body.find_first_not_of("0123456789") == prefix) {
      body = body.substr(prefix + 2);
    }
    size_t comma = body.rfind(',');
    if (body.size() < 4 || body.front() != '(' || body.back() != ')' ||
        comma == std::string::npos || comma + 2 > body.size() - 1 ||
        body.find_first_not_of("0123456789", comma + 1) != body.size() - 1) {
      ADD_FAILURE() << "unexpected output line: " << l;
      continue;
    }
    std::string word = body.substr(1, comma - 1);
    int64_t n = std::stoll(body.substr(comma + 1, body.size() - comma - 2));
    EXPECT_EQ(n, last[word] + 1) << "counts of '" << word << "' must increase by one";
    last[word] = n;
  }
  return last;
}

struct ProcessResult {
  int exitCode = -1;
  std::string out;
};

// Runs argv with stdout captured (stderr passes through to the test log).
ProcessResult run(const std::vector<std::string>& argv) {
  int pipeFd[2];
  EXPECT_EQ(pipe(pipeFd), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipeFd[1], 1);
    close(pipeFd[0]);
    close(pipeFd[1]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(pipeFd[1]);
  ProcessResult r;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipeFd[0], buf, sizeof buf)) > 0) r.out.append(buf, static_cast<size_t>(n));
  close(pipeFd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(ExamplesTest, WordCountCountsTheBundledText) {
  auto expected = referenceCounts(readFile(SLUICE_WORDCOUNT_TEXT));
  ASSERT_GT(expected.size(), 100u);
  for (const char* p : {"1", "3"}) {
    ProcessResult r = run({SLUICE_WORDCOUNT_BIN, "-p", p});
    ASSERT_EQ(r.exitCode, 0) << "parallelism " << p;
    EXPECT_EQ(parseRunningCounts(r.out), expected) << "parallelism " << p;
  }
}

TEST(ExamplesTest, WordCountRejectsAnUnknownConfigKey) {
  ProcessResult r = run({SLUICE_WORDCOUNT_BIN, "-D", "parallelism.defualt=2"});
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_TRUE(r.out.empty());
}

TEST(ExamplesTest, SocketWordCountCountsWhatTheServerSends) {
  int server = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(server, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(server, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(server, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  int port = ntohs(addr.sin_port);

  std::string text;
  for (int i = 0; i < 2000; ++i) {
    text += "line " + std::to_string(i % 97) + " of the socket test, Sluice and Flink\n";
  }
  text += "a trailing line without newline";
  // The server: accept one client, send everything, close.
  std::thread serverThread([&] {
    int client = accept(server, nullptr, nullptr);
    if (client < 0) return;
    size_t off = 0;
    while (off < text.size()) {
      ssize_t n = send(client, text.data() + off, text.size() - off, MSG_NOSIGNAL);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    close(client);
  });
  ProcessResult r =
      run({SLUICE_SOCKET_WORDCOUNT_BIN, "--hostname", "127.0.0.1", "--port", std::to_string(port)});
  serverThread.join();
  close(server);
  ASSERT_EQ(r.exitCode, 0);
  EXPECT_EQ(parseRunningCounts(r.out), referenceCounts(text));
}

TEST(ExamplesTest, SocketWordCountFailsClearlyWhenNobodyListens) {
  // Bind then close to get a port that is very likely free.
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
  close(s);
  ProcessResult r = run({SLUICE_SOCKET_WORDCOUNT_BIN, "--hostname", "127.0.0.1", "--port",
                         std::to_string(ntohs(addr.sin_port))});
  EXPECT_EQ(r.exitCode, 1);
}

}  // namespace
}  // namespace examples_test

namespace examples_test {
namespace {

// The windowed WordCount's generator, restated: word i is kWords[(i * 3) % 8]
// at event time i * 100 + (i % 5) * 50 ms; 5 s tumbling windows.
std::set<std::string> referenceWindowedCounts(int64_t events) {
  const char* words[] = {"to", "be", "or", "not", "that", "is", "the", "question"};
  std::map<std::pair<std::string, int64_t>, int64_t> counts;
  for (int64_t i = 0; i < events; ++i) {
    int64_t ts = i * 100 + (i % 5) * 50;
    ++counts[{words[(i * 3) % 8], ts - ts % 5000}];
  }
  std::set<std::string> lines;
  for (const auto& [key, n] : counts) {
    lines.insert(key.first + "," + std::to_string(n) + "," + std::to_string(key.second) + "," +
                 std::to_string(key.second + 5000));
  }
  return lines;
}

std::set<std::string> outputLines(const std::string& out) {
  std::set<std::string> lines;
  std::istringstream in(out);
  std::string l;
  while (std::getline(in, l)) {
    size_t prefix = l.find("> ");
    if (prefix != std::string::npos && l.find_first_not_of("0123456789") == prefix) {
      l = l.substr(prefix + 2);
    }
    EXPECT_TRUE(lines.insert(l).second) << "window fired twice: " << l;
  }
  return lines;
}

}  // namespace

TEST(ExamplesTest, WindowedWordCountCountsEveryWindowOnce) {
  const int64_t events = 20'000;  // ~2,000 s of event time: ~400 windows x 8 words
  auto expected = referenceWindowedCounts(events);
  ASSERT_GT(expected.size(), 3000u);
  for (const char* p : {"1", "2"}) {
    ProcessResult r =
        run({SLUICE_WINDOWED_WORDCOUNT_BIN, "-p", p, "--events", std::to_string(events)});
    ASSERT_EQ(r.exitCode, 0) << "parallelism " << p;
    EXPECT_EQ(outputLines(r.out), expected) << "parallelism " << p;
  }
}

}  // namespace examples_test
