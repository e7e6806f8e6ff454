#include "compare.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace sluice::bench {
namespace {

using Key = std::pair<std::string, int>;  // workload, parallelism

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Runs `binary args... --json json` with its output in `log`; the exit
// status, or -1 with errno when it could not start.
int runChild(const std::string& binary, const std::vector<std::string>& args,
             const std::string& json, const std::string& log) {
  std::vector<std::string> argv = {binary};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--json");
  argv.push_back(json);
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (std::freopen(log.c_str(), "w", stdout) == nullptr) ::_exit(126);
    ::dup2(::fileno(stdout), STDERR_FILENO);
    ::execv(binary.c_str(), cargv.data());
    std::fprintf(stderr, "cannot run %s: %s\n", binary.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::map<Key, double> readRows(const std::string& path) {
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  std::map<Key, double> rows;
  for (const auto& r : j.at("results")) {
    rows[{r.at("workload").get<std::string>(), r.at("parallelism").get<int>()}] =
        r.at("records_per_cpu_second").get<double>();
  }
  return rows;
}

}  // namespace

int runCompare(const std::string& other, int rounds, const std::vector<std::string>& args) {
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) {
    std::fprintf(stderr, "--compare: cannot find this binary (/proc/self/exe): %s\n",
                 ec.message().c_str());
    return 2;
  }
  if (::access(other.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "--compare: cannot run '%s': %s\n", other.c_str(), std::strerror(errno));
    return 2;
  }
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("sluice-bench-compare-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "--compare: cannot create %s: %s\n", dir.c_str(), ec.message().c_str());
    return 2;
  }
  // A is the other build, B this one.
  std::map<Key, std::vector<double>> a;
  std::map<Key, std::vector<double>> b;
  std::map<Key, std::vector<double>> ratio;
  for (int r = 1; r <= rounds; ++r) {
    // ABBA: the order flips every round, so that whatever favours the first
    // or second run of a pair (caches, the host's clock) cancels out.
    const std::pair<char, const std::string*> order[2] = {{'a', &other}, {'b', &self}};
    std::map<char, std::map<Key, double>> got;
    for (int i = 0; i < 2; ++i) {
      const auto& [side, binary] = order[r % 2 == 1 ? i : 1 - i];
      const std::string stem = (dir / (std::string(1, side) + "-" + std::to_string(r))).string();
      const int rc = runChild(*binary, args, stem + ".json", stem + ".txt");
      if (rc != 0) {
        std::fprintf(stderr, "--compare: %s failed (exit %d); its output is in %s.txt\n",
                     binary->c_str(), rc, stem.c_str());
        return 1;
      }
      try {
        got[side] = readRows(stem + ".json");
      } catch (const std::exception& e) {
        std::fprintf(stderr, "--compare: cannot read %s.json: %s\n", stem.c_str(), e.what());
        return 1;
      }
    }
    for (const auto& [key, va] : got['a']) {
      auto vb = got['b'].find(key);
      if (vb == got['b'].end()) continue;
      a[key].push_back(va);
      b[key].push_back(vb->second);
      ratio[key].push_back(vb->second / va);
    }
    double load[3] = {0, 0, 0};
    if (::getloadavg(load, 3) < 0) load[0] = load[1] = load[2] = -1;
    std::printf("round %d/%d done, load %.2f %.2f %.2f\n", r, rounds, load[0], load[1], load[2]);
    std::fflush(stdout);
  }
  std::printf("A = %s\nB = %s (this binary); runs kept in %s\n", other.c_str(), self.c_str(),
              dir.c_str());
  std::printf("%-24s %3s %13s %13s %11s  %s\n", "workload", "p", "A rec/cpu-s", "B rec/cpu-s",
              "B/A paired", "range of B/A");
  for (const auto& [key, ratios] : ratio) {
    const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
    std::printf("%-24s %3d %12.2fM %12.2fM %+10.1f%%  %+.0f%% .. %+.0f%%\n", key.first.c_str(),
                key.second, median(a[key]) / 1e6, median(b[key]) / 1e6, 100 * (median(ratios) - 1),
                100 * (*lo - 1), 100 * (*hi - 1));
  }
  return 0;
}

}  // namespace sluice::bench
