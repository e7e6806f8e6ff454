// The broadcast state pattern on the mini-cluster: a rules stream broadcast
// to a keyed (and to a non-keyed) event stream, and applyToKeyedState over
// every key, on both keyed backends.
//
// The two inputs of a broadcast operator interleave nondeterministically, so
// the checks do not depend on the interleaving: each output says what the
// function had seen when it produced it (how many rules; which counts), and
// the test recomputes the output from exactly that prefix. What is
// deterministic is checked exactly: every subtask receives every rule, in
// order; every event is evaluated once; per-key sequence numbers are 1..n.
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <sluice/broadcast.h>
#include <sluice/sluice.h>

#include "integration/integration_util.h"

// An event matches a rule when value % modulus == remainder.
struct Rule {
  int64_t id = 0;
  int64_t modulus = 1;
  int64_t remainder = 0;
};
SLUICE_STRUCT(Rule, id, modulus, remainder)

struct Event {
  int64_t key = 0;
  int64_t value = 0;
  bool operator<(const Event& o) const { return key != o.key ? key < o.key : value < o.value; }
  bool operator==(const Event&) const = default;
};
SLUICE_STRUCT(Event, key, value)

// One output: an evaluated event, or (key == -1) the acknowledgement of a
// rule by the subtask that stored it.
struct Evaluation {
  int64_t subtask = 0;
  int64_t key = 0;
  int64_t value = 0;
  int64_t seq = 0;        // keyed only: 1 for its key's first event, 2 for the second, ...
  int64_t rulesSeen = 0;  // rules in broadcast state when evaluated
  std::vector<int64_t> matched;
};
SLUICE_STRUCT(Evaluation, subtask, key, value, seq, rulesSeen, matched)

// applyToKeyedState trace: "event" (key, count after it), "begin" (a report
// or reset starts; marker), "report" (marker, key, count), "reset" (marker).
struct Trace {
  std::string kind;
  int64_t subtask = 0;
  int64_t marker = 0;
  int64_t key = 0;
  int64_t count = 0;
};
SLUICE_STRUCT(Trace, kind, subtask, marker, key, count)

namespace sluice::integration {
namespace broadcast_state_test {
namespace {

constexpr int kParallelism = 3;
constexpr int64_t kEvents = 12000;
constexpr int64_t kKeys = 41;
constexpr int64_t kRules = 60;

const MapStateDescriptor<int64_t, Rule> kRulesDesc("rules");

std::vector<Rule> makeRules() {
  std::vector<Rule> rules;
  Rng rng(99);
  for (int64_t id = 0; id < kRules; ++id) {
    const int64_t modulus = rng.between(2, 13);
    rules.push_back(Rule{id, modulus, rng.below(modulus)});
  }
  return rules;
}

Event eventOf(int64_t i) { return Event{(i * 7919) % kKeys, i}; }

std::vector<int64_t> reference(const std::vector<Rule>& rules, int64_t rulesSeen, int64_t value) {
  std::vector<int64_t> out;
  for (int64_t id = 0; id < rulesSeen; ++id) {
    const Rule& r = rules[id];
    if (value % r.modulus == r.remainder) out.push_back(r.id);
  }
  return out;
}

template <class Ctx>
Evaluation evaluate(const Event& e, Ctx& ctx, int64_t subtask) {
  Evaluation ev;
  ev.subtask = subtask;
  ev.key = e.key;
  ev.value = e.value;
  auto& rules = ctx.getBroadcastState(kRulesDesc);
  ev.rulesSeen = static_cast<int64_t>(rules.size());
  for (const auto& [id, rule] : rules.immutableEntries()) {
    if (e.value % rule.modulus == rule.remainder) ev.matched.push_back(id);
  }
  std::sort(ev.matched.begin(), ev.matched.end());
  return ev;
}

template <class Ctx>
void storeRule(const Rule& rule, Ctx& ctx, int64_t subtask, Collector<Evaluation>& out) {
  auto& rules = ctx.getBroadcastState(kRulesDesc);
  rules.put(rule.id, rule);
  Evaluation ack;
  ack.subtask = subtask;
  ack.key = -1;
  ack.value = rule.id;
  ack.rulesSeen = static_cast<int64_t>(rules.size());
  out.collect(ack);
}

class KeyedRules final : public KeyedBroadcastProcessFunction<int64_t, Event, Rule, Evaluation> {
 public:
  void processElement(const Event& e, ReadOnlyContext& ctx, Collector<Evaluation>& out) override {
    auto& seq = getRuntimeContext().getState(ValueStateDescriptor<int64_t>("seq"));
    const int64_t n = seq.value().value_or(0) + 1;
    seq.update(n);
    Evaluation ev = evaluate(e, ctx, getRuntimeContext().getIndexOfThisSubtask());
    ev.seq = n;
    out.collect(std::move(ev));
  }
  void processBroadcastElement(const Rule& rule, Context& ctx,
                               Collector<Evaluation>& out) override {
    storeRule(rule, ctx, getRuntimeContext().getIndexOfThisSubtask(), out);
  }
};

class NonKeyedRules final : public BroadcastProcessFunction<Event, Rule, Evaluation> {
 public:
  void processElement(const Event& e, ReadOnlyContext& ctx, Collector<Evaluation>& out) override {
    out.collect(evaluate(e, ctx, getRuntimeContext().getIndexOfThisSubtask()));
  }
  void processBroadcastElement(const Rule& rule, Context& ctx,
                               Collector<Evaluation>& out) override {
    storeRule(rule, ctx, getRuntimeContext().getIndexOfThisSubtask(), out);
  }
};

// Checks the outputs of a rules job (see the top of the file); returns the
// evaluations of events.
std::vector<Evaluation> checkRulesOutput(const std::vector<Evaluation>& got,
                                         const std::vector<Rule>& rules) {
  std::vector<Evaluation> events;
  std::map<int64_t, std::vector<int64_t>> acksBySubtask;
  std::map<int64_t, int64_t> lastRulesSeen;
  int64_t evaluatedWithRules = 0;
  for (const Evaluation& ev : got) {
    EXPECT_GE(ev.subtask, 0);
    EXPECT_LT(ev.subtask, kParallelism);
    if (ev.key == -1) {
      auto& acks = acksBySubtask[ev.subtask];
      acks.push_back(ev.value);
      // Rules arrive in order, so after the i-th rule the state holds i.
      EXPECT_EQ(ev.rulesSeen, static_cast<int64_t>(acks.size()));
    } else {
      events.push_back(ev);
      EXPECT_GE(ev.rulesSeen, 0);
      EXPECT_LE(ev.rulesSeen, kRules);
      // The rules a subtask has seen only grow, and an event sees exactly the
      // rules acknowledged before it in the subtask's output.
      EXPECT_EQ(ev.rulesSeen, static_cast<int64_t>(acksBySubtask[ev.subtask].size()))
          << "event " << ev.value;
      EXPECT_GE(ev.rulesSeen, lastRulesSeen[ev.subtask]);
      lastRulesSeen[ev.subtask] = ev.rulesSeen;
      EXPECT_EQ(ev.matched, reference(rules, ev.rulesSeen, ev.value)) << "event " << ev.value;
      if (ev.rulesSeen > 0) ++evaluatedWithRules;
    }
  }
  // Every subtask received every rule, in order.
  std::vector<int64_t> allIds;
  for (int64_t id = 0; id < kRules; ++id) allIds.push_back(id);
  EXPECT_EQ(acksBySubtask.size(), static_cast<size_t>(kParallelism));
  for (const auto& [subtask, acks] : acksBySubtask) {
    EXPECT_EQ(acks, allIds) << "subtask " << subtask;
  }
  // Every event evaluated exactly once.
  std::vector<Event> evaluated;
  for (const Evaluation& ev : events) evaluated.push_back(Event{ev.key, ev.value});
  std::vector<Event> expected;
  for (int64_t i = 1; i <= kEvents; ++i) expected.push_back(eventOf(i));
  EXPECT_EQ(sorted(evaluated), sorted(expected));
  ::testing::Test::RecordProperty("events_evaluated_with_rules",
                                  std::to_string(evaluatedWithRules));
  return events;
}

class BroadcastStateJobTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BroadcastStateJobTest, KeyedEventsAreEvaluatedAgainstTheRulesSeenBeforeThem) {
  TempDir dir("broadcast");
  Configuration config;
  config.setString("state.backend.rocksdb.localdir", dir.path().string());
  StreamExecutionEnvironment env(config);
  env.setParallelism(kParallelism).setStateBackend(GetParam());
  const std::vector<Rule> rules = makeRules();

  BroadcastStream<Rule> ruleStream = env.fromCollection(rules).broadcast(kRulesDesc);
  std::vector<Evaluation> got = env.fromSequence(1, kEvents)
                                    .map([](const int64_t& i) { return eventOf(i); })
                                    .keyBy([](const Event& e) { return e.key; })
                                    .connect(ruleStream)
                                    .process(KeyedRules())
                                    .executeAndCollect("keyed broadcast");

  std::vector<Evaluation> events = checkRulesOutput(got, rules);
  // Keyed state per key: sequence numbers 1..n, all in one subtask, the
  // subtask that owns the key's key group.
  std::map<int64_t, std::vector<int64_t>> seqs;
  std::map<int64_t, std::set<int64_t>> subtasks;
  for (const Evaluation& ev : events) {
    seqs[ev.key].push_back(ev.seq);
    subtasks[ev.key].insert(ev.subtask);
  }
  std::map<int64_t, int64_t> perKey;
  for (int64_t i = 1; i <= kEvents; ++i) ++perKey[eventOf(i).key];
  ASSERT_EQ(seqs.size(), static_cast<size_t>(kKeys));
  for (auto& [key, s] : seqs) {
    std::vector<int64_t> expected(perKey[key]);
    for (size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<int64_t>(i) + 1;
    EXPECT_EQ(sorted(s), expected) << "key " << key;
    EXPECT_EQ(
        subtasks[key],
        (std::set<int64_t>{assignKeyToParallelOperator(key, kDefaultMaxParallelism, kParallelism)}))
        << "key " << key;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, BroadcastStateJobTest, ::testing::Values("hashmap", "rocksdb"),
                         [](const auto& info) { return info.param; });

TEST(BroadcastStateJob, NonKeyedEventsAreEvaluatedAgainstTheRulesSeenBeforeThem) {
  StreamExecutionEnvironment env;
  env.setParallelism(kParallelism);
  const std::vector<Rule> rules = makeRules();
  std::vector<Evaluation> got = env.fromSequence(1, kEvents)
                                    .map([](const int64_t& i) { return eventOf(i); })
                                    .rebalance()
                                    .connect(env.fromCollection(rules).broadcast(kRulesDesc))
                                    .process(NonKeyedRules())
                                    .executeAndCollect("broadcast");
  std::vector<Evaluation> events = checkRulesOutput(got, rules);
  // Rebalanced: every subtask evaluated some events.
  std::set<int64_t> subtasks;
  for (const Evaluation& ev : events) subtasks.insert(ev.subtask);
  EXPECT_EQ(subtasks.size(), static_cast<size_t>(kParallelism));
}

// --- applyToKeyedState --------------------------------------------------------------------

const ValueStateDescriptor<int64_t> kCountDesc("count");
const MapStateDescriptor<std::string, int64_t> kCommandsDesc("commands");

// Counts events per key; broadcast commands "report-N" emit every key's
// count, "reset-N" clear every key's count, each through applyToKeyedState.
class ReportingCounter final
    : public KeyedBroadcastProcessFunction<int64_t, Event, std::string, Trace> {
 public:
  void processElement(const Event& e, ReadOnlyContext&, Collector<Trace>& out) override {
    auto& count = getRuntimeContext().getState(kCountDesc);
    const int64_t n = count.value().value_or(0) + 1;
    count.update(n);
    out.collect(Trace{"event", subtask(), 0, e.key, n});
  }
  void processBroadcastElement(const std::string& cmd, Context& ctx,
                               Collector<Trace>& out) override {
    const int64_t marker = std::stoll(cmd.substr(cmd.find('-') + 1));
    ctx.getBroadcastState(kCommandsDesc).put(cmd, marker);
    out.collect(Trace{"begin", subtask(), marker, 0, 0});
    if (cmd.starts_with("report")) {
      ctx.applyToKeyedState(kCountDesc, [&](const int64_t& key, ValueState<int64_t>& state) {
        out.collect(Trace{"report", subtask(), marker, key, state.value().value_or(-1)});
      });
    } else {
      ctx.applyToKeyedState(kCountDesc,
                            [](const int64_t&, ValueState<int64_t>& state) { state.clear(); });
      out.collect(Trace{"reset", subtask(), marker, 0, 0});
    }
  }

 private:
  int64_t subtask() const { return getRuntimeContext().getIndexOfThisSubtask(); }
};

class ApplyToKeyedStateJobTest : public ::testing::TestWithParam<std::string> {};

// Replays each subtask's output in order against a model of its keyed state:
// every report lists exactly the keys that have a count at that point, with
// their counts; every event's count follows from the events and resets
// before it.
TEST_P(ApplyToKeyedStateJobTest, ReportsAndResetsVisitEveryKeyWithState) {
  TempDir dir("apply-keyed");
  Configuration config;
  config.setString("state.backend.rocksdb.localdir", dir.path().string());
  StreamExecutionEnvironment env(config);
  env.setParallelism(kParallelism).setStateBackend(GetParam());

  std::vector<std::string> commands;
  for (int i = 1; i <= 30; ++i)
    commands.push_back((i % 7 == 0 ? "reset-" : "report-") + std::to_string(i));
  commands.push_back("report-99");
  std::map<int64_t, bool> isReport;
  std::vector<int64_t> expectedMarkers;
  for (const std::string& c : commands) {
    const int64_t marker = std::stoll(c.substr(c.find('-') + 1));
    isReport[marker] = c.starts_with("report");
    expectedMarkers.push_back(marker);
  }
  std::vector<Trace> got = env.fromSequence(1, kEvents)
                               .map([](const int64_t& i) { return eventOf(i); })
                               .keyBy([](const Event& e) { return e.key; })
                               .connect(env.fromCollection(commands).broadcast(kCommandsDesc))
                               .process(ReportingCounter())
                               .executeAndCollect("apply to keyed state");

  std::map<int64_t, std::vector<Trace>> bySubtask;
  for (const Trace& t : got) bySubtask[t.subtask].push_back(t);
  ASSERT_EQ(bySubtask.size(), static_cast<size_t>(kParallelism));

  int64_t eventsSeen = 0;
  int64_t reportedKeys = 0;
  std::set<int64_t> keysSeen;
  for (const auto& [subtask, traces] : bySubtask) {
    SCOPED_TRACE("subtask " + std::to_string(subtask));
    std::map<int64_t, int64_t> model;  // key -> count, as the keyed state holds it
    std::vector<int64_t> markers;
    size_t i = 0;
    while (i < traces.size()) {
      const Trace& t = traces[i];
      if (t.kind == "event") {
        ++eventsSeen;
        keysSeen.insert(t.key);
        EXPECT_EQ(assignKeyToParallelOperator(t.key, kDefaultMaxParallelism, kParallelism),
                  subtask);
        EXPECT_EQ(t.count, ++model[t.key]) << "key " << t.key;
        ++i;
        continue;
      }
      ASSERT_EQ(t.kind, "begin");
      markers.push_back(t.marker);
      ++i;
      if (isReport.at(t.marker)) {
        std::map<int64_t, int64_t> reported;
        while (i < traces.size() && traces[i].kind == "report") {
          EXPECT_EQ(traces[i].marker, t.marker);
          EXPECT_TRUE(reported.emplace(traces[i].key, traces[i].count).second)
              << "key " << traces[i].key << " visited twice";
          ++i;
        }
        EXPECT_EQ(reported, model) << "report " << t.marker;
        reportedKeys += static_cast<int64_t>(reported.size());
      } else {
        ASSERT_LT(i, traces.size());
        EXPECT_EQ(traces[i].kind, "reset");
        ++i;
        model.clear();
      }
    }
    // Every subtask got every command, in order.
    EXPECT_EQ(markers, expectedMarkers);
  }
  EXPECT_EQ(eventsSeen, kEvents);
  EXPECT_EQ(keysSeen.size(), static_cast<size_t>(kKeys));
  ::testing::Test::RecordProperty("keys_visited_by_reports", std::to_string(reportedKeys));
}

INSTANTIATE_TEST_SUITE_P(Backends, ApplyToKeyedStateJobTest,
                         ::testing::Values("hashmap", "rocksdb"),
                         [](const auto& info) { return info.param; });

class KeyedStateOnTheBroadcastSide final
    : public KeyedBroadcastProcessFunction<int64_t, Event, Rule, Evaluation> {
 public:
  void processElement(const Event&, ReadOnlyContext&, Collector<Evaluation>&) override {}
  void processBroadcastElement(const Rule&, Context&, Collector<Evaluation>&) override {
    getRuntimeContext().getState(ValueStateDescriptor<int64_t>("seq")).value();
  }
};

TEST(BroadcastStateJob, KeyedStateWithoutAKeyOnTheBroadcastSideFailsSayingWhatToUse) {
  StreamExecutionEnvironment env;
  BroadcastStream<Rule> ruleStream = env.fromCollection(makeRules()).broadcast(kRulesDesc);
  env.fromSequence(1, 10)
      .map([](const int64_t& i) { return eventOf(i); })
      .keyBy([](const Event& e) { return e.key; })
      .connect(ruleStream)
      .process(KeyedStateOnTheBroadcastSide())
      .name("Rules")
      .sinkTo(DiscardSink<Evaluation>());
  try {
    env.execute("keyed state on the broadcast side");
    FAIL() << "expected the job to fail";
  } catch (const JobExecutionException& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no current key in processBroadcastElement"), std::string::npos) << what;
    EXPECT_NE(what.find("applyToKeyedState"), std::string::npos) << what;
    EXPECT_NE(what.find("Rules"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace broadcast_state_test
}  // namespace sluice::integration
