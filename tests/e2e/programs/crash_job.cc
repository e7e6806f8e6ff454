// The job that tests/e2e/kill_restore_test.cc kills, signals and restores:
// a keyed running count and sum over the indices 0..N-1, written as
// "key,count,sum" lines through the exactly-once FileSink, with retained
// externalized checkpoints so that a later process can restore from them.
//
//   sluice_crash_job --output DIR --checkpoints DIR
//                    [--restore CHECKPOINT]        execution.savepoint.path
//                    [--backend hashmap|rocksdb]   rocksdb checkpoints incrementally
//                    [--records N]                 default 6000
//                    [--rate R]                    records per second in total, 0 = no limit
//                                                  (default 2400: about 2.5 s)
//                    [--stall-at I]                the record with index I blocks its task forever
//                    [-D key=value ...]            any other setting
//
// Content is deterministic: record i is (i % 97, 1, i) whatever the timing;
// only when each record is processed depends on the rate and the machine.
// The rate comes from the generator source, which never sleeps.
//
// To let a test signal the process only once the engine's SIGTERM handler is
// in place (it is installed while execute() blocks), the program prints
// "crash_job: signal handlers installed" to stderr as soon as SIGTERM no
// longer has its default disposition. --stall-at prints
// "crash_job: stalled at record I" (after that line) and then never returns
// from the map, so a cancellation cannot finish.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <sluice/sluice.h>

namespace {

using Row = std::tuple<int64_t, int64_t, int64_t>;  // key, running count, running sum

constexpr int64_t kKeys = 97;

bool sigtermHandled() {
  struct sigaction current {};
  if (::sigaction(SIGTERM, nullptr, &current) != 0) return false;
  return current.sa_handler != SIG_DFL || (current.sa_flags & SA_SIGINFO) != 0;
}

void waitForSigtermHandler() {
  while (!sigtermHandled()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

int64_t parseInt(const std::string& flag, const std::string& value) {
  try {
    size_t used = 0;
    const int64_t v = std::stoll(value, &used);
    if (used == value.size()) return v;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(flag + " expects an integer, got '" + value + "'");
}

struct Args {
  std::string output;
  std::string checkpoints;
  std::string restore;
  std::string backend = "hashmap";
  int64_t records = 6000;
  double rate = 2400;
  int64_t stallAt = -1;
};

// Splits our own flags from the engine's (-D, -p, -c), which go on to
// getExecutionEnvironment together with the -D settings our flags stand for.
Args parseArgs(int argc, char** argv, std::vector<std::string>& engineArgs) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " expects a value");
      return argv[++i];
    };
    if (arg == "--output") {
      a.output = value();
    } else if (arg == "--checkpoints") {
      a.checkpoints = value();
    } else if (arg == "--restore") {
      a.restore = value();
    } else if (arg == "--backend") {
      a.backend = value();
      if (a.backend != "hashmap" && a.backend != "rocksdb") {
        throw std::invalid_argument("--backend expects hashmap or rocksdb, got '" + a.backend +
                                    "'");
      }
    } else if (arg == "--records") {
      a.records = parseInt(arg, value());
    } else if (arg == "--rate") {
      a.rate = static_cast<double>(parseInt(arg, value()));
    } else if (arg == "--stall-at") {
      a.stallAt = parseInt(arg, value());
    } else {
      engineArgs.push_back(arg);
    }
  }
  if (a.output.empty() || a.checkpoints.empty()) {
    throw std::invalid_argument("--output DIR and --checkpoints DIR are required");
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::string> engineArgs;
    const Args args = parseArgs(argc, argv, engineArgs);

    // Our flags first, so that a -D on the command line overrides them.
    std::vector<std::string> settings = {
        argv[0],
        "-D",
        "execution.checkpointing.interval=100ms",
        "-D",
        "state.checkpoints.dir=" + args.checkpoints,
        "-D",
        "execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION",
        "-D",
        "state.checkpoints.num-retained=2",
        "-D",
        "state.backend.type=" + args.backend,
        "-D",
        std::string("state.backend.incremental=") + (args.backend == "rocksdb" ? "true" : "false")};
    if (!args.restore.empty()) {
      settings.insert(settings.end(), {"-D", "execution.savepoint.path=" + args.restore});
    }
    settings.insert(settings.end(), engineArgs.begin(), engineArgs.end());
    std::vector<const char*> cargv;
    for (const auto& s : settings) cargv.push_back(s.c_str());

    auto env = sluice::StreamExecutionEnvironment::getExecutionEnvironment(
        static_cast<int>(cargv.size()), cargv.data());
    env.setParallelism(2);

    auto sink = sluice::FileSink<std::string>::forRowFormat(
                    args.output, sluice::SimpleStringEncoder<std::string>())
                    .withBucketAssigner(sluice::BasePathBucketAssigner<std::string>())
                    .build();

    const int64_t stallAt = args.stallAt;
    env.fromGenerator([](int64_t i) { return i; }, args.records, args.rate)
        .uid("source")
        .map([stallAt](int64_t i) {
          if (i == stallAt) {
            waitForSigtermHandler();
            std::fprintf(stderr, "crash_job: stalled at record %lld\n", static_cast<long long>(i));
            std::fflush(stderr);
            for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
          }
          return Row{i % kKeys, 1, i};
        })
        .uid("to-row")
        .keyBy([](const Row& r) { return std::get<0>(r); })
        .reduce([](const Row& a, const Row& b) {
          return Row{std::get<0>(a), std::get<1>(a) + std::get<1>(b),
                     std::get<2>(a) + std::get<2>(b)};
        })
        .uid("running-sum")
        .map([](const Row& r) {
          return std::to_string(std::get<0>(r)) + "," + std::to_string(std::get<1>(r)) + "," +
                 std::to_string(std::get<2>(r));
        })
        .uid("format")
        .sinkTo(std::move(sink), "File Sink")
        .uid("file-sink");

    std::atomic<bool> done{false};
    std::thread announcer([&done] {
      while (!done.load() && !sigtermHandled()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (!done.load()) {
        std::fprintf(stderr, "crash_job: signal handlers installed\n");
        std::fflush(stderr);
      }
    });
    struct Join {
      std::atomic<bool>& done;
      std::thread& t;
      ~Join() {
        done.store(true);
        t.join();
      }
    } join{done, announcer};

    env.execute("crash job");
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "crash_job: " << e.what() << "\n";
    return 1;
  }
}
