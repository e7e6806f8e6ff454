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

// One side of a comparison: a binary and its arguments.
struct Side {
  std::string binary;
  std::vector<std::string> args;
};

// Which A row a B row is compared with: the same key, or (for workload
// comparisons) the A row of the same parallelism or else A's row at 1.
using Pairing = std::map<Key, double>::const_iterator (*)(const std::map<Key, double>& a,
                                                          const Key& bKey);

std::map<Key, double>::const_iterator sameKey(const std::map<Key, double>& a, const Key& k) {
  return a.find(k);
}

std::map<Key, double>::const_iterator sameParallelism(const std::map<Key, double>& a,
                                                      const Key& k) {
  for (auto it = a.begin(); it != a.end(); ++it) {
    if (it->first.second == k.second) return it;
  }
  for (auto it = a.begin(); it != a.end(); ++it) {
    if (it->first.second == 1) return it;
  }
  return a.end();
}

std::string selfPath() {
  std::error_code ec;
  std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) {
    std::fprintf(stderr, "--compare: cannot find this binary (/proc/self/exe): %s\n",
                 ec.message().c_str());
    return {};
  }
  return self;
}

// `asFactor`: print ratios as 0.39x (two workloads) rather than -61% (two
// builds of one workload).
int runAlternately(const Side& sideA, const Side& sideB, int rounds, Pairing pairing,
                   const std::string& aName, const std::string& bName, bool asFactor) {
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("sluice-bench-compare-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "--compare: cannot create %s: %s\n", dir.c_str(), ec.message().c_str());
    return 2;
  }
  // Per B row: its A row's name, and the figures of each round.
  std::map<Key, std::string> aRowOf;
  std::map<Key, std::vector<double>> a;
  std::map<Key, std::vector<double>> b;
  std::map<Key, std::vector<double>> ratio;
  for (int r = 1; r <= rounds; ++r) {
    // ABBA: the order flips every round, so that whatever favours the first
    // or second run of a pair (caches, the host's clock) cancels out.
    const std::pair<char, const Side*> order[2] = {{'a', &sideA}, {'b', &sideB}};
    std::map<char, std::map<Key, double>> got;
    for (int i = 0; i < 2; ++i) {
      const auto& [side, run] = order[r % 2 == 1 ? i : 1 - i];
      const std::string stem = (dir / (std::string(1, side) + "-" + std::to_string(r))).string();
      const int rc = runChild(run->binary, run->args, stem + ".json", stem + ".txt");
      if (rc != 0) {
        std::fprintf(stderr, "--compare: %s failed (exit %d); its output is in %s.txt\n",
                     run->binary.c_str(), rc, stem.c_str());
        return 1;
      }
      try {
        got[side] = readRows(stem + ".json");
      } catch (const std::exception& e) {
        std::fprintf(stderr, "--compare: cannot read %s.json: %s\n", stem.c_str(), e.what());
        return 1;
      }
    }
    for (const auto& [key, vb] : got['b']) {
      auto va = pairing(got['a'], key);
      if (va == got['a'].end()) continue;
      aRowOf[key] = va->first.first + " p" + std::to_string(va->first.second);
      a[key].push_back(va->second);
      b[key].push_back(vb);
      ratio[key].push_back(vb / va->second);
    }
    double load[3] = {0, 0, 0};
    if (::getloadavg(load, 3) < 0) load[0] = load[1] = load[2] = -1;
    std::printf("round %d/%d done, load %.2f %.2f %.2f\n", r, rounds, load[0], load[1], load[2]);
    std::fflush(stdout);
  }
  std::printf("A = %s\nB = %s; runs kept in %s\n", aName.c_str(), bName.c_str(), dir.c_str());
  std::printf("%-24s %3s %13s %13s %11s  %-14s %s\n", "workload", "p", "A rec/cpu-s", "B rec/cpu-s",
              "B/A paired", "range of B/A", "A row");
  for (const auto& [key, ratios] : ratio) {
    const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
    char range[64];
    char paired[32];
    if (asFactor) {
      std::snprintf(range, sizeof range, "%.2fx .. %.2fx", *lo, *hi);
      std::snprintf(paired, sizeof paired, "%.3fx", median(ratios));
    } else {
      std::snprintf(range, sizeof range, "%+.0f%% .. %+.0f%%", 100 * (*lo - 1), 100 * (*hi - 1));
      std::snprintf(paired, sizeof paired, "%+.1f%%", 100 * (median(ratios) - 1));
    }
    std::printf("%-24s %3d %12.2fM %12.2fM %11s  %-14s %s\n", key.first.c_str(), key.second,
                median(a[key]) / 1e6, median(b[key]) / 1e6, paired, range, aRowOf[key].c_str());
  }
  return 0;
}

}  // namespace

int runCompare(const std::string& other, int rounds, const std::vector<std::string>& args) {
  const std::string self = selfPath();
  if (self.empty()) return 2;
  if (::access(other.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "--compare: cannot run '%s': %s\n", other.c_str(), std::strerror(errno));
    return 2;
  }
  // A is the other build, B this one.
  return runAlternately(Side{other, args}, Side{self, args}, rounds, sameKey, other,
                        self + " (this binary)", false);
}

int runCompareWorkloads(const std::string& otherWorkload, int rounds,
                        const std::vector<std::string>& args,
                        const std::vector<std::string>& workloadArgs) {
  const std::string self = selfPath();
  if (self.empty()) return 2;
  Side sideA{self, args};
  sideA.args.push_back("--workload");
  sideA.args.push_back(otherWorkload);
  Side sideB{self, args};
  sideB.args.insert(sideB.args.end(), workloadArgs.begin(), workloadArgs.end());
  std::string bName = "this binary with";
  for (const std::string& w : workloadArgs) bName += " " + w;
  return runAlternately(sideA, sideB, rounds, sameParallelism,
                        "this binary with --workload " + otherWorkload, bName, true);
}

}  // namespace sluice::bench
