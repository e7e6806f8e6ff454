// State assignment: which part of a checkpoint each subtask restores, at the
// same and at another parallelism, computed here from the key-group formula
// and compared with what assignStates() plans.
#include "checkpoint/state_assignment.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sluice/sluice.h>

namespace sluice::checkpoint {
namespace state_assignment_test {
namespace {

using ::testing::HasSubstr;

struct Job {
  // source -> keyBy -> sum(uid "sum") at `parallelism`; max parallelism 128.
  explicit Job(int parallelism, bool withUid = true) {
    StreamExecutionEnvironment env;
    env.setParallelism(parallelism);
    auto sum = env.fromSequence(1, 10)
                   .uid("source")
                   .keyBy([](int64_t v) { return v; })
                   .reduce([](int64_t a, int64_t b) { return a + b; });
    if (withUid) sum.uid("sum");
    sum.print();
    auto g = std::make_shared<StreamGraph>(env.getStreamGraph());
    g->defaultParallelism = parallelism;
    g->resolve();
    graph = g;
    jobGraph = createJobGraph(*graph);
    uids = operatorUids(*graph);
    for (const StreamNode& n : graph->nodes()) {
      if (n.name == "Keyed Reduce") sumNode = n.id;
      if (n.uid == "source") sourceNode = n.id;
    }
    sumVertex = jobGraph.vertexOfNode.at(sumNode);
  }
  std::shared_ptr<const StreamGraph> graph;
  JobGraph jobGraph;
  std::vector<std::string> uids;
  int sumNode = -1;
  int sourceNode = -1;
  int sumVertex = -1;
};

// A checkpoint of the sum at `oldParallelism`: subtask i's keyed snapshot
// holds "keyed i", its timers "timers i", its operator state a list state
// with the element i.
CompletedCheckpoint checkpointOfSum(int oldParallelism, int maxParallelism = 128) {
  CompletedCheckpoint cp;
  cp.id = 7;
  OperatorCheckpointState op;
  op.uid = "sum";
  op.name = "Keyed Reduce";
  op.parallelism = oldParallelism;
  op.maxParallelism = maxParallelism;
  for (int i = 0; i < oldParallelism; ++i) {
    OperatorSubtaskState st;
    st.keyed.bytes = std::make_shared<const std::string>("keyed " + std::to_string(i));
    st.timers = "timers " + std::to_string(i);
    OperatorStateBackend backend("sum");
    backend.getListState(ListStateDescriptor<int64_t>("list")).add(i);
    st.operatorState = backend.snapshot();
    op.subtasks.push_back(std::move(st));
  }
  cp.operators.push_back(std::move(op));
  OperatorCheckpointState source;
  source.uid = "source";
  source.name = "Source";
  source.hasCoordinatorState = true;
  source.coordinatorState = "unassigned splits";
  source.subtasks.resize(1);
  cp.operators.push_back(std::move(source));
  return cp;
}

bool overlaps(int maxP, int oldP, int oldIndex, int newP, int newIndex) {
  KeyGroupRange a = computeKeyGroupRangeForOperatorIndex(maxP, oldP, oldIndex);
  KeyGroupRange b = computeKeyGroupRangeForOperatorIndex(maxP, newP, newIndex);
  return a.startKeyGroup <= b.endKeyGroup && b.startKeyGroup <= a.endKeyGroup;
}

std::vector<int64_t> listOf(const std::string& operatorState) {
  OperatorStateBackend backend("sum");
  backend.restore(operatorState);
  std::vector<int64_t> out;
  for (int64_t v : backend.getListState(ListStateDescriptor<int64_t>("list")).get()) {
    out.push_back(v);
  }
  return out;
}

class StateAssignmentTest : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(StateAssignmentTest, EverySubtaskGetsTheKeyedSnapshotsOfItsKeyGroups) {
  const auto [oldP, newP] = GetParam();
  Job job(newP);
  Result<StateAssignment> r =
      assignStates(checkpointOfSum(oldP), *job.graph, job.jobGraph, job.uids, false);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  const StateAssignment& a = r.value();
  EXPECT_EQ(a.coordinatorStates.at(job.sourceNode), "unassigned splits");
  std::multiset<int64_t> listElements;
  for (int s = 0; s < newP; ++s) {
    const OperatorStateRestore& restore = a.tasks.at(TaskId{job.sumVertex, s}).at(job.sumNode);
    std::vector<std::string> expectedKeyed;
    for (int old = 0; old < oldP; ++old) {
      if (overlaps(128, oldP, old, newP, s))
        expectedKeyed.push_back("keyed " + std::to_string(old));
    }
    std::vector<std::string> keyed;
    for (const auto& h : restore.keyedState) keyed.push_back(*h.bytes);
    EXPECT_EQ(keyed, expectedKeyed) << "new subtask " << s;
    ASSERT_EQ(restore.timers.size(), static_cast<size_t>(oldP)) << "timers of every old subtask";
    for (int64_t v : listOf(restore.operatorState)) listElements.insert(v);
  }
  // List state is split: every old element lands on exactly one new subtask.
  std::multiset<int64_t> expected;
  for (int i = 0; i < oldP; ++i) expected.insert(i);
  EXPECT_EQ(listElements, expected);
}

INSTANTIATE_TEST_SUITE_P(Parallelisms, StateAssignmentTest,
                         ::testing::Values(std::pair{2, 2}, std::pair{2, 3}, std::pair{3, 1},
                                           std::pair{1, 4}, std::pair{4, 3}),
                         [](const auto& info) {
                           return "p" + std::to_string(info.param.first) + "_to_p" +
                                  std::to_string(info.param.second);
                         });

TEST(StateAssignment, StateOfAnOperatorTheJobLacksIsRefusedUnlessIgnored) {
  Job job(2, /*withUid=*/false);
  Result<StateAssignment> r =
      assignStates(checkpointOfSum(2), *job.graph, job.jobGraph, job.uids, false);
  ASSERT_FALSE(r.isOk());
  EXPECT_THAT(r.status().message(), HasSubstr("uid 'sum'"));
  EXPECT_THAT(r.status().message(), HasSubstr("execution.savepoint.ignore-unclaimed-state"));
  Result<StateAssignment> ignored =
      assignStates(checkpointOfSum(2), *job.graph, job.jobGraph, job.uids, true);
  ASSERT_TRUE(ignored.isOk()) << ignored.status().toString();
  for (const auto& [task, restores] : ignored.value().tasks) {
    EXPECT_EQ(restores.count(job.sumNode), 0u) << "the unclaimed state is dropped";
  }
}

TEST(StateAssignment, KeyedStateNeedsTheSameMaxParallelism) {
  Job job(2);
  Result<StateAssignment> r =
      assignStates(checkpointOfSum(2, 64), *job.graph, job.jobGraph, job.uids, false);
  ASSERT_FALSE(r.isOk());
  EXPECT_THAT(r.status().message(), HasSubstr("max parallelism changed from 64 to 128"));
}

TEST(StateAssignment, OperatorsWithoutUidGetOneFromTheirPosition) {
  Job job(1, /*withUid=*/false);
  EXPECT_EQ(job.uids[static_cast<size_t>(job.sourceNode)], "source");
  int autos = 0;
  for (const std::string& uid : job.uids) autos += uid.rfind("auto-", 0) == 0;
  EXPECT_EQ(autos, static_cast<int>(job.uids.size()) - 1);
}

}  // namespace
}  // namespace state_assignment_test
}  // namespace sluice::checkpoint
