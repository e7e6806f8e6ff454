// Data-driven window scenarios: every file tests/data/windows/*.scenario is
// one gtest, run by this driver through the public API. The driver builds the
// windowed job with the DataStream API, instantiates its window operator from
// the stream graph in an OperatorHarness, feeds the scenario's steps, and
// compares what the operator emitted after each step with the expected
// output, which was worked out by hand from Flink's documented semantics.
//
// Each scenario runs twelve ways and must give the same output every time:
//   straight   one subtask, heap state backend;
//   restore    snapshot after every step, restored into a fresh instance;
//              and the same after every third step only;
//   rescale    snapshot after every step, restored at parallelism 1 <-> 2,
//              elements routed to the subtask that owns their key group;
//              and the same after every third step only;
//   rocksdb    one subtask, RocksDB state backend;
//   tiered     one subtask, tiered state backend with a 1-byte budget
//              (every entry not in use goes to its RocksDB), snapshot and
//              restore after every step;
// the first five once with `pipeline.window.slicing` on and once with it
// off. Aligned event-time windows (tumbling, sliding, cumulating) with an
// incremental function, the default trigger and no evictor run on the
// sliced window operator when it is on (and on the heap backend), and
// event-time sessions with a static gap on the session window operator
// under the same conditions; the driver checks from the operator's name in
// the stream graph that the expected operator ran, so a fast run cannot
// fall back unnoticed.
//
// File format (tests/data/windows/README.md says the same, with examples).
// Lines are whitespace-separated tokens; `#` starts a comment; the leading
// comment lines describe the scenario. Three sections, in order:
//
//   config (until the line `input`):
//     assigner tumbling SIZE [OFFSET] | sliding SIZE SLIDE [OFFSET]
//            | cumulating MAXSIZE STEP [OFFSET]
//            | session GAP | dynamic-session (the gap is the element's value)
//            | tumbling-processing SIZE [OFFSET] | sliding-processing SIZE SLIDE
//            | session-processing GAP | global | count N [SLIDE]
//     stream keyed | all            keyBy(key).window(...) or windowAll(...)
//     function sum | min | max | minBy | maxBy (field 1 of the element)
//            | reduce (a lambda that sums) | aggregate (an AggregateFunction
//            that sums) | process (a ProcessWindowFunction that sums)
//            | reduce+process | aggregate+process (incremental, then a
//            ProcessWindowFunction) | apply (a WindowFunction that sums)
//            | reduce+apply (incremental, then the WindowFunction)
//            | process-state (sums; the key becomes KEY:W:G where W counts
//            the firings of this window (per-window state) and G those of
//            the key (global state)) | reduce+process-state
//            A scenario without evictor whose function is process, apply or
//            process-state also runs with the incremental forms
//            (reduce+process and aggregate+process, reduce+apply,
//            reduce+process-state): summing first gives the same output.
//     trigger event | processing | count N | purging-count N | purging-event
//            | continuous-event N | continuous-processing N | threshold N
//            (threshold: a user trigger, see ThresholdTrigger below)
//     evictor count N before|after | time N before|after | delta N before|after
//            (delta: |a - b| of the values)
//     lateness MS                   allowedLateness
//     late side | drop              sideOutputLateData or drop (default)
//     channels N                    input channels, combined by a WatermarkValve
//     clock MS                      the manual clock before the first step (default 0)
//
//   input (until the line `expect`), one step per line, numbered from 1:
//     N: element KEY VALUE TS [CHANNEL]   TS `-`: a record without timestamp
//     N: watermark TS [CHANNEL]
//     N: idle [CHANNEL] | N: active [CHANNEL]
//     N: time MS                          moves the manual clock, firing timers
//     N: end                              end of input: every channel sends
//                                         the maximum watermark
//
//   expect, one line per emitted record:
//     @N KEY VALUE [START,END)   a window with metadata emitted VALUE after step
//                                N; its timestamp must be END - 1
//     @N KEY VALUE global        the same for the GlobalWindow (timestamp max)
//     @N KEY VALUE - ts=T        a function without metadata (sum, reduce,
//                                aggregate): only the record's timestamp
//     @N late KEY VALUE ts=T     the element went to the late side output
//     dropped N                  numLateRecordsDropped at the end (default 0)
//
// Timestamps may be written `min`, `max`, `min+N`, `max-N`. The outputs of
// one step are compared as a multiset (Flink does not order timers of equal
// timestamp across keys); the steps themselves are compared in order.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/core/watermark_valve.h>
#include <sluice/sluice.h>
#include <sluice/testing.h>

#include "harness/operator_runner.h"
#include "unit/windows/window_differential.h"

namespace sluice {
namespace window_scenarios_test {
namespace {

using testing::CollectingOutput;
using Ev = std::pair<std::string, int64_t>;
using window_differential::SumAggregate;
// key, value, window
using MetaOut = std::tuple<std::string, int64_t, std::string>;
using std::chrono::milliseconds;

// --- scenario files ---------------------------------------------------------

struct Config {
  std::vector<std::string> assigner;
  bool all = false;
  std::string function = "sum";
  std::vector<std::string> trigger;
  std::vector<std::string> evictor;
  int64_t lateness = 0;
  bool lateSide = false;
  int channels = 1;
  int64_t clock = 0;
};

struct Step {
  enum Kind { kElement, kWatermark, kIdle, kActive, kTime, kEnd } kind = kElement;
  std::string key;
  int64_t value = 0;
  std::optional<int64_t> ts;
  int channel = 0;
};

struct Scenario {
  std::string name;
  Config config;
  std::vector<Step> steps;
  std::vector<std::string> expected;  // canonical lines, see render()
  int64_t dropped = 0;
};

[[noreturn]] void fail(const std::string& file, int line, const std::string& what) {
  throw std::runtime_error(file + ":" + std::to_string(line) + ": " + what);
}

int64_t parseTime(const std::string& s) {
  auto rest = [&](size_t n) -> int64_t { return n == s.size() ? 0 : std::stoll(s.substr(n)); };
  if (s.rfind("max", 0) == 0) return kMaxTimestamp + rest(3);
  if (s.rfind("min", 0) == 0) return kMinTimestamp + rest(3);
  size_t used = 0;
  int64_t v = std::stoll(s, &used);
  if (used != s.size()) throw std::invalid_argument("not a timestamp: " + s);
  return v;
}

// "[a,b)" with time expressions -> "[A,B)" in numbers.
std::string canonicalWindow(const std::string& w) {
  if (w == "global" || w == "-") return w;
  if (w.size() < 5 || w.front() != '[' || w.back() != ')' || w.find(',') == std::string::npos) {
    throw std::invalid_argument("not a window: " + w);
  }
  size_t comma = w.find(',');
  int64_t s = parseTime(w.substr(1, comma - 1));
  int64_t e = parseTime(w.substr(comma + 1, w.size() - comma - 2));
  return "[" + std::to_string(s) + "," + std::to_string(e) + ")";
}

std::string render(int step, bool late, const std::string& key, int64_t value,
                   const std::string& window, int64_t ts) {
  std::string s = "@" + std::to_string(step) + (late ? " late " : " ") + key + " " +
                  std::to_string(value) + (late ? "" : " " + window) + " ts=" + std::to_string(ts);
  return s;
}

Scenario parseScenario(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  Scenario s;
  s.name = path.filename().string();
  const std::string file = path.string();
  enum { kConfig, kInput, kExpect } section = kConfig;
  std::string line;
  int lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream ls(line);
    std::vector<std::string> t;
    for (std::string w; ls >> w;) t.push_back(w);
    if (t.empty()) continue;
    try {
      if (t.size() == 1 && t[0] == "input") {
        section = kInput;
        continue;
      }
      if (t.size() == 1 && t[0] == "expect") {
        section = kExpect;
        continue;
      }
      if (section == kConfig) {
        const std::string& k = t[0];
        std::vector<std::string> args(t.begin() + 1, t.end());
        if (k == "assigner") {
          s.config.assigner = args;
        } else if (k == "stream") {
          s.config.all = args.at(0) == "all";
        } else if (k == "function") {
          s.config.function = args.at(0);
        } else if (k == "trigger") {
          s.config.trigger = args;
        } else if (k == "evictor") {
          s.config.evictor = args;
        } else if (k == "lateness") {
          s.config.lateness = std::stoll(args.at(0));
        } else if (k == "late") {
          s.config.lateSide = args.at(0) == "side";
        } else if (k == "channels") {
          s.config.channels = std::stoi(args.at(0));
        } else if (k == "clock") {
          s.config.clock = parseTime(args.at(0));
        } else {
          fail(file, lineNo, "unknown setting '" + k + "'");
        }
      } else if (section == kInput) {
        if (t[0] != std::to_string(s.steps.size() + 1) + ":") {
          fail(
              file, lineNo,
              "steps are numbered 1, 2, ...; expected " + std::to_string(s.steps.size() + 1) + ":");
        }
        Step st;
        const std::string& k = t.at(1);
        auto channelAt = [&](size_t i) { return t.size() > i ? std::stoi(t[i]) : 0; };
        if (k == "element") {
          st.kind = Step::kElement;
          st.key = t.at(2);
          st.value = std::stoll(t.at(3));
          if (t.at(4) != "-") st.ts = parseTime(t.at(4));
          st.channel = channelAt(5);
        } else if (k == "watermark") {
          st.kind = Step::kWatermark;
          st.ts = parseTime(t.at(2));
          st.channel = channelAt(3);
        } else if (k == "idle" || k == "active") {
          st.kind = k == "idle" ? Step::kIdle : Step::kActive;
          st.channel = channelAt(2);
        } else if (k == "time") {
          st.kind = Step::kTime;
          st.ts = parseTime(t.at(2));
        } else if (k == "end") {
          st.kind = Step::kEnd;
        } else {
          fail(file, lineNo, "unknown step '" + k + "'");
        }
        if (st.channel < 0 || st.channel >= s.config.channels) {
          fail(file, lineNo, "no channel " + std::to_string(st.channel));
        }
        s.steps.push_back(st);
      } else {
        if (t[0] == "dropped") {
          s.dropped = std::stoll(t.at(1));
          continue;
        }
        if (t[0].size() < 2 || t[0][0] != '@') fail(file, lineNo, "expected @STEP ...");
        int step = std::stoi(t[0].substr(1));
        if (step < 1 || step > static_cast<int>(s.steps.size())) {
          fail(file, lineNo, "no step " + std::to_string(step));
        }
        bool late = t.at(1) == "late";
        size_t i = late ? 2 : 1;
        std::string key = t.at(i);
        int64_t value = std::stoll(t.at(i + 1));
        std::string window = late ? "-" : canonicalWindow(t.at(i + 2));
        std::optional<int64_t> ts;
        size_t tsAt = late ? i + 2 : i + 3;
        if (t.size() > tsAt) {
          if (t[tsAt].rfind("ts=", 0) != 0) fail(file, lineNo, "expected ts=T");
          ts = parseTime(t[tsAt].substr(3));
        }
        if (!ts) {
          if (window == "-") fail(file, lineNo, "a record without window needs ts=T");
          if (window == "global") {
            ts = kMaxTimestamp;
          } else {
            ts = parseTime(
                     window.substr(window.find(',') + 1, window.size() - window.find(',') - 2)) -
                 1;
          }
        }
        s.expected.push_back(render(step, late, key, value, window, *ts));
      }
    } catch (const std::logic_error& e) {
      fail(file, lineNo, std::string("cannot parse: ") + e.what());
    }
  }
  if (s.config.assigner.empty()) fail(file, lineNo, "no assigner");
  if (s.steps.empty()) fail(file, lineNo, "no input");
  return s;
}

// --- the functions a scenario can name -----------------------------------------

std::string describe(const TimeWindow& w) {
  return "[" + std::to_string(w.getStart()) + "," + std::to_string(w.getEnd()) + ")";
}
std::string describe(const GlobalWindow&) { return "global"; }

int64_t sumOf(const std::vector<Ev>& elements) {
  int64_t sum = 0;
  for (const Ev& e : elements) sum += e.second;
  return sum;
}

Ev sumReduce(const Ev& a, const Ev& b) { return {a.first, a.second + b.second}; }

template <class W>
class SumProcess final : public ProcessWindowFunction<Ev, MetaOut, std::string, W> {
 public:
  using Base = ProcessWindowFunction<Ev, MetaOut, std::string, W>;
  void process(const std::string& key, typename Base::Context& ctx, const std::vector<Ev>& elements,
               Collector<MetaOut>& out) override {
    out.collect(MetaOut{key, sumOf(elements), describe(ctx.window())});
  }
};

// Counts firings per window (window state, cleared in clear()) and per key
// (global state).
template <class W>
class StatefulProcess final : public ProcessWindowFunction<Ev, MetaOut, std::string, W> {
 public:
  using Base = ProcessWindowFunction<Ev, MetaOut, std::string, W>;
  void process(const std::string& key, typename Base::Context& ctx, const std::vector<Ev>& elements,
               Collector<MetaOut>& out) override {
    ValueState<int64_t>& w = ctx.windowState().getState(windowFires_);
    ValueState<int64_t>& g = ctx.globalState().getState(keyFires_);
    int64_t wn = w.value().value_or(0) + 1;
    int64_t gn = g.value().value_or(0) + 1;
    w.update(wn);
    g.update(gn);
    out.collect(MetaOut{key + ":" + std::to_string(wn) + ":" + std::to_string(gn), sumOf(elements),
                        describe(ctx.window())});
  }
  void clear(typename Base::Context& ctx) override {
    ctx.windowState().getState(windowFires_).clear();
  }

 private:
  ValueStateDescriptor<int64_t> windowFires_{"window-fires"};
  ValueStateDescriptor<int64_t> keyFires_{"key-fires"};
};

template <class W>
class SumApply final : public WindowFunction<Ev, MetaOut, std::string, W> {
 public:
  void apply(const std::string& key, const W& window, const std::vector<Ev>& input,
             Collector<MetaOut>& out) override {
    out.collect(MetaOut{key, sumOf(input), describe(window)});
  }
};

template <class W>
class SumProcessAll final : public ProcessAllWindowFunction<Ev, MetaOut, W> {
 public:
  using Base = ProcessAllWindowFunction<Ev, MetaOut, W>;
  void process(typename Base::Context& ctx, const std::vector<Ev>& elements,
               Collector<MetaOut>& out) override {
    out.collect(MetaOut{"*", sumOf(elements), describe(ctx.window())});
  }
};

template <class W>
class SumApplyAll final : public AllWindowFunction<Ev, MetaOut, W> {
 public:
  void apply(const W& window, const std::vector<Ev>& input, Collector<MetaOut>& out) override {
    out.collect(MetaOut{"*", sumOf(input), describe(window)});
  }
};

// A user trigger: an element whose value is 0 purges the window, one whose
// value reaches the threshold fires and purges it, anything else waits for
// the end of the window (event time), which fires.
template <class W>
class ThresholdTrigger final : public Trigger<Ev, W> {
 public:
  explicit ThresholdTrigger(int64_t threshold) : threshold_(threshold) {}
  TriggerResult onElement(const Ev& e, int64_t, const W& window, TriggerContext<W>& ctx) override {
    if (e.second == 0) return TriggerResult::PURGE;
    if (e.second >= threshold_) return TriggerResult::FIRE_AND_PURGE;
    ctx.registerEventTimeTimer(window.maxTimestamp());
    return TriggerResult::CONTINUE;
  }
  TriggerResult onEventTime(int64_t time, const W& window, TriggerContext<W>&) override {
    return time == window.maxTimestamp() ? TriggerResult::FIRE : TriggerResult::CONTINUE;
  }
  TriggerResult onProcessingTime(int64_t, const W&, TriggerContext<W>&) override {
    return TriggerResult::CONTINUE;
  }
  void clear(const W& window, TriggerContext<W>& ctx) override {
    ctx.deleteEventTimeTimer(window.maxTimestamp());
  }
  std::string toString() const override { return "ThresholdTrigger"; }

 private:
  int64_t threshold_;
};

// --- observing and running ---------------------------------------------------

void observe(const StreamRecord<Ev>& r, int step, std::vector<std::string>& out) {
  out.push_back(render(step, false, r.value.first, r.value.second, "-", r.timestamp));
}
void observe(const StreamRecord<MetaOut>& r, int step, std::vector<std::string>& out) {
  const auto& [key, value, window] = r.value;
  out.push_back(render(step, false, key, value, window, r.timestamp));
}

// A run configuration, whether the sliced window operator may run, and for
// restore and rescale how many steps pass between restores.
struct Mode {
  test::RunConfig config = test::RunConfig::kStraight;
  bool slicing = true;
  int restoreEvery = 1;
};

const Mode kModes[] = {
    {test::RunConfig::kStraight, true},   {test::RunConfig::kRestore, true},
    {test::RunConfig::kRestore, true, 3}, {test::RunConfig::kRescale, true},
    {test::RunConfig::kRescale, true, 3}, {test::RunConfig::kStraight, false},
    {test::RunConfig::kRestore, false},   {test::RunConfig::kRestore, false, 3},
    {test::RunConfig::kRescale, false},   {test::RunConfig::kRescale, false, 3},
    {test::RunConfig::kRocksDb, false},   {test::RunConfig::kTiered, false},
};

std::string modeName(Mode mode) {
  std::string name = test::runConfigName(mode.config);
  if (mode.restoreEvery != 1) name += " (every " + std::to_string(mode.restoreEvery) + " steps)";
  return name + (mode.slicing ? ", slicing on" : ", slicing off");
}

// Which operator runs the scenario in `mode`, decided from the scenario's
// settings alone (docs/windows.md, "Sliced windows" and "Session windows").
enum class Expected { kGeneral, kSliced, kSessions };
const char* expectedName(Expected e) {
  switch (e) {
    case Expected::kGeneral: return "general";
    case Expected::kSliced: return "sliced";
    case Expected::kSessions: return "session";
  }
  return "?";
}
Expected expectOperator(const Config& c, Mode mode) {
  static const std::vector<std::string> kAligned = {"tumbling", "sliding", "cumulating"};
  // Processing-time windows the sliced operator runs, with their default trigger.
  static const std::vector<std::string> kProcessing = {"tumbling-processing", "sliding-processing"};
  static const std::vector<std::string> kIncremental = {"sum",
                                                        "min",
                                                        "max",
                                                        "minBy",
                                                        "maxBy",
                                                        "reduce",
                                                        "aggregate",
                                                        "reduce+process",
                                                        "aggregate+process",
                                                        "reduce+apply",
                                                        "reduce+process-state"};
  auto in = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  const bool processing = in(kProcessing, c.assigner[0]);
  const bool heap =
      mode.config != test::RunConfig::kRocksDb && mode.config != test::RunConfig::kTiered;
  const bool fast = mode.slicing && heap && in(kIncremental, c.function) && c.evictor.empty() &&
                    (c.trigger.empty() || c.trigger[0] == (processing ? "processing" : "event"));
  if (!fast) return Expected::kGeneral;
  if (in(kAligned, c.assigner[0]) || processing) return Expected::kSliced;
  if (c.assigner[0] == "session") return Expected::kSessions;
  return Expected::kGeneral;
}

struct Result {
  std::vector<std::string> lines;
  int64_t dropped = 0;
};

const OutputTag<Ev> kLateTag("late-data");

// Plays the scenario's steps through the operator under `mode`
// (tests/harness/operator_runner.h), recording what it emitted per step.
template <class OUT>
Result play(std::shared_ptr<const OperatorFactory> factory, const Scenario& s, Mode mode) {
  test::OperatorRunner<OUT> runner(std::move(factory), mode.config,
                                   {.channelsPerInput = s.config.channels,
                                    .clock = s.config.clock,
                                    .restoreEvery = mode.restoreEvery});
  CollectingOutput<Ev>& late = runner.sideOutput(kLateTag);
  runner.open();
  Result result;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& st = s.steps[i];
    const int step = static_cast<int>(i + 1);
    switch (st.kind) {
      case Step::kElement:
        // windowAll keys every element by the same uint8_t 0.
        runner.element(0, Ev{st.key, st.value}, st.ts,
                       s.config.all ? runner.keyGroupOf(uint8_t{0}) : runner.keyGroupOf(st.key));
        break;
      case Step::kWatermark: runner.watermark(0, *st.ts, st.channel); break;
      case Step::kIdle: runner.idle(0, st.channel); break;
      case Step::kActive: runner.active(0, st.channel); break;
      case Step::kTime: runner.processingTime(*st.ts); break;
      case Step::kEnd: runner.endOfInput(); break;
    }
    for (const auto& r : runner.endStep()) observe(r, step, result.lines);
    for (const auto& r : late.records) {
      result.lines.push_back(render(step, true, r.value.first, r.value.second, "-", r.timestamp));
    }
    late.records.clear();
  }
  result.dropped = runner.counter("numLateRecordsDropped");
  runner.close();
  return result;
}

int64_t arg(const std::vector<std::string>& v, size_t i, int64_t dflt = 0) {
  return v.size() > i ? parseTime(v[i]) : dflt;
}

template <class WS>
void configure(WS& ws, const Config& c) {
  using W = typename std::decay_t<
      decltype(std::declval<typename WS::Spec>().assigner())>::element_type::WindowType;
  if (!c.trigger.empty()) {
    const std::string& t = c.trigger[0];
    int64_t n = arg(c.trigger, 1);
    if (t == "event") {
      ws.trigger(EventTimeTrigger::create());
    } else if (t == "processing") {
      ws.trigger(ProcessingTimeTrigger::create());
    } else if (t == "count") {
      ws.trigger(CountTrigger::of(n));
    } else if (t == "purging-count") {
      ws.trigger(PurgingTrigger::of(CountTrigger::of(n)));
    } else if (t == "purging-event") {
      ws.trigger(PurgingTrigger::of(EventTimeTrigger::create()));
    } else if (t == "continuous-event") {
      ws.trigger(ContinuousEventTimeTrigger::of(milliseconds(n)));
    } else if (t == "continuous-processing") {
      ws.trigger(ContinuousProcessingTimeTrigger::of(milliseconds(n)));
    } else if (t == "threshold") {
      ws.trigger(ThresholdTrigger<W>(n));
    } else {
      throw std::invalid_argument("unknown trigger " + t);
    }
  }
  if (!c.evictor.empty()) {
    const std::string& e = c.evictor[0];
    int64_t n = arg(c.evictor, 1);
    bool after = c.evictor.size() > 2 && c.evictor[2] == "after";
    if (e == "count") {
      ws.evictor(CountEvictor::of(n, after));
    } else if (e == "time") {
      ws.evictor(TimeEvictor::of(milliseconds(n), after));
    } else if (e == "delta") {
      ws.evictor(DeltaEvictor::of(
          static_cast<double>(n),
          [](const Ev& a, const Ev& b) {
            return static_cast<double>(std::llabs(a.second - b.second));
          },
          after));
    } else {
      throw std::invalid_argument("unknown evictor " + e);
    }
  }
  if (c.lateness > 0) ws.allowedLateness(milliseconds(c.lateness));
  if (c.lateSide) ws.sideOutputLateData(kLateTag);
}

template <class OUT>
Result runOp(StreamExecutionEnvironment& env, const SingleOutputStreamOperator<OUT>& op,
             const Scenario& s, Mode mode) {
  const StreamNode& node = env.getStreamGraph().node(op.getId());
  const Expected ran = node.name.rfind("Slicing", 0) == 0   ? Expected::kSliced
                       : node.name.rfind("Session", 0) == 0 ? Expected::kSessions
                                                            : Expected::kGeneral;
  const Expected expected = expectOperator(s.config, mode);
  if (ran != expected) {
    throw std::logic_error(std::string("expected the ") + expectedName(expected) +
                           " window operator, the job has " + node.name);
  }
  return play<OUT>(node.factory, s, mode);
}

// Whether a WindowedStream is one of windowAll (of any assigner kind).
template <class WS>
struct IsAllWindows : std::false_type {};
template <class T, class W, internal::FastWindows F>
struct IsAllWindows<AllWindowedStream<T, W, F>> : std::true_type {};

// Applies the scenario's window function to a WindowedStream / AllWindowedStream.
template <class WS>
Result applyFunction(StreamExecutionEnvironment& env, WS ws, const Scenario& s, Mode mode) {
  using W = typename std::decay_t<
      decltype(std::declval<typename WS::Spec>().assigner())>::element_type::WindowType;
  configure(ws, s.config);
  const std::string& f = s.config.function;
  constexpr bool kAll = IsAllWindows<WS>::value;
  if (f == "sum") return runOp(env, ws.sum(1), s, mode);
  if (f == "min") return runOp(env, ws.min(1), s, mode);
  if (f == "max") return runOp(env, ws.max(1), s, mode);
  if (f == "minBy") return runOp(env, ws.minBy(1), s, mode);
  if (f == "maxBy") return runOp(env, ws.maxBy(1), s, mode);
  if (f == "reduce") return runOp(env, ws.reduce(&sumReduce), s, mode);
  if (f == "aggregate") return runOp(env, ws.aggregate(SumAggregate{}), s, mode);
  if constexpr (kAll) {
    if (f == "process") return runOp(env, ws.process(SumProcessAll<W>{}), s, mode);
    if (f == "apply") return runOp(env, ws.apply(SumApplyAll<W>{}), s, mode);
    if (f == "reduce+apply") return runOp(env, ws.reduce(&sumReduce, SumApplyAll<W>{}), s, mode);
    if (f == "reduce+process") {
      return runOp(env, ws.reduce(&sumReduce, SumProcessAll<W>{}), s, mode);
    }
    if (f == "aggregate+process") {
      return runOp(env, ws.aggregate(SumAggregate{}, SumProcessAll<W>{}), s, mode);
    }
  } else {
    if (f == "process") return runOp(env, ws.process(SumProcess<W>{}), s, mode);
    if (f == "process-state") return runOp(env, ws.process(StatefulProcess<W>{}), s, mode);
    if (f == "apply") return runOp(env, ws.apply(SumApply<W>{}), s, mode);
    if (f == "reduce+apply") return runOp(env, ws.reduce(&sumReduce, SumApply<W>{}), s, mode);
    if (f == "reduce+process-state") {
      return runOp(env, ws.reduce(&sumReduce, StatefulProcess<W>{}), s, mode);
    }
    if (f == "reduce+process") return runOp(env, ws.reduce(&sumReduce, SumProcess<W>{}), s, mode);
    if (f == "aggregate+process") {
      return runOp(env, ws.aggregate(SumAggregate{}, SumProcess<W>{}), s, mode);
    }
  }
  throw std::invalid_argument("unknown function " + f + (kAll ? " for windowAll" : ""));
}

template <class Input>
Result applyAssigner(StreamExecutionEnvironment& env, const Input& input, const Scenario& s,
                     Mode mode) {
  const std::vector<std::string>& a = s.config.assigner;
  const std::string& kind = a[0];
  auto win = [&](auto assigner) {
    if constexpr (requires { input.window(assigner); }) {
      return applyFunction(env, input.window(assigner), s, mode);
    } else {
      return applyFunction(env, input.windowAll(assigner), s, mode);
    }
  };
  auto ms = [&](size_t i) { return milliseconds(arg(a, i)); };
  if (kind == "tumbling") return win(TumblingEventTimeWindows::of(ms(1), ms(2)));
  if (kind == "sliding") return win(SlidingEventTimeWindows::of(ms(1), ms(2), ms(3)));
  if (kind == "cumulating") return win(CumulativeEventTimeWindows::of(ms(1), ms(2), ms(3)));
  if (kind == "session") return win(EventTimeSessionWindows::withGap(ms(1)));
  if (kind == "dynamic-session") {
    return win(EventTimeSessionWindows::withDynamicGap([](const Ev& e) { return e.second; }));
  }
  if (kind == "tumbling-processing") return win(TumblingProcessingTimeWindows::of(ms(1), ms(2)));
  if (kind == "sliding-processing") {
    return win(SlidingProcessingTimeWindows::of(ms(1), ms(2), ms(3)));
  }
  if (kind == "session-processing") return win(ProcessingTimeSessionWindows::withGap(ms(1)));
  if (kind == "global") return win(GlobalWindows::create());
  if (kind == "count") {
    if constexpr (requires { input.countWindow(1); }) {
      if (a.size() > 2) return applyFunction(env, input.countWindow(arg(a, 1), arg(a, 2)), s, mode);
      return applyFunction(env, input.countWindow(arg(a, 1)), s, mode);
    } else {
      if (a.size() > 2) {
        return applyFunction(env, input.countWindowAll(arg(a, 1), arg(a, 2)), s, mode);
      }
      return applyFunction(env, input.countWindowAll(arg(a, 1)), s, mode);
    }
  }
  throw std::invalid_argument("unknown assigner " + kind);
}

Result runScenario(const Scenario& s, Mode mode) {
  Configuration config;
  config.set(options::kPipelineWindowSlicing, mode.slicing);
  StreamExecutionEnvironment env(config);
  if (mode.config == test::RunConfig::kRocksDb) env.setStateBackend("rocksdb");
  if (mode.config == test::RunConfig::kTiered) env.setStateBackend("tiered");
  auto source = env.fromElements(Ev{"unused", 0});
  if (s.config.all) return applyAssigner(env, source, s, mode);
  return applyAssigner(env, source.keyBy([](const Ev& e) { return e.first; }), s, mode);
}

// --- the tests ------------------------------------------------------------------

std::filesystem::path scenarioDir() {
  return std::filesystem::path(SLUICE_TEST_DATA_DIR) / "windows";
}

std::vector<std::string> scenarioFiles() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(scenarioDir())) {
    if (e.path().extension() == ".scenario") files.push_back(e.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> perStep(const std::vector<std::string>& lines) {
  // Sorted within a step, steps in order (the step number leads each line).
  std::vector<std::string> out = lines;
  std::stable_sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    int sa = std::stoi(a.substr(1));
    int sb = std::stoi(b.substr(1));
    return sa != sb ? sa < sb : a < b;
  });
  return out;
}

std::string join(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += "  " + l + "\n";
  return s.empty() ? "  (nothing)\n" : s;
}

class WindowScenarioTest : public ::testing::TestWithParam<std::string> {};

// The scenario's function, and the incremental forms that must give the
// same output (see the top of this file).
std::vector<std::string> functionVariants(const Config& c) {
  if (!c.evictor.empty()) return {c.function};
  if (c.function == "process") return {"process", "reduce+process", "aggregate+process"};
  if (c.function == "apply") return {"apply", "reduce+apply"};
  if (c.function == "process-state") return {"process-state", "reduce+process-state"};
  return {c.function};
}

TEST_P(WindowScenarioTest, MatchesExpectedOutput) {
  const Scenario parsed = parseScenario(scenarioDir() / GetParam());
  const std::vector<std::string> expected = perStep(parsed.expected);
  for (const std::string& function : functionVariants(parsed.config)) {
    Scenario s = parsed;
    s.config.function = function;
    for (Mode mode : kModes) {
      const std::string run = function + ", " + modeName(mode);
      SCOPED_TRACE(run);
      Result r = runScenario(s, mode);
      std::vector<std::string> actual = perStep(r.lines);
      EXPECT_EQ(actual, expected) << GetParam() << " (" << run << ")\nexpected:\n"
                                  << join(expected) << "actual:\n"
                                  << join(actual);
      EXPECT_EQ(r.dropped, s.dropped) << "numLateRecordsDropped";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Files, WindowScenarioTest, ::testing::ValuesIn(scenarioFiles()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param.substr(0, info.param.rfind('.'));
                           for (char& c : n) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

TEST(WindowScenarioFilesTest, AtLeast28Scenarios) { EXPECT_GE(scenarioFiles().size(), 28u); }

}  // namespace
}  // namespace window_scenarios_test
}  // namespace sluice
