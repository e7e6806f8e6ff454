// Operator chaining (StreamGraph -> JobGraph), checked through the public
// API: each test builds a pipeline, asks the environment for the JobGraph it
// would run (env.getJobGraph(), which resolves and chains without running)
// and compares it with the graph Flink's chaining rules give, written out by
// hand: the vertices with their chains (node names, head first), names,
// parallelism and slot sharing group, and the job edges with their resolved
// partitioning.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sluice/sluice.h>

namespace chaining_test {
namespace {

using namespace sluice;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Pair = std::pair<int64_t, int64_t>;

// One expected vertex.
struct V {
  std::vector<std::string> chain;  // node names, head first
  int parallelism;
  std::string group = "default";
  std::string name = "";  // the vertex name; empty: the chain joined by " -> "
};

// One expected job edge, by vertex index.
struct E {
  int source;
  int target;
  PartitionKind partition;
};

std::vector<std::string> chainNames(const StreamGraph& graph, const JobVertex& v) {
  std::vector<std::string> names;
  for (int id : v.chain) names.push_back(graph.node(id).name);
  return names;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? " -> " : "") + names[i];
  return s;
}

// Asserts everything about `jg`: vertices (chain, name, ids, parallelism,
// group), the node -> vertex map, the chained-edge flags, and the job edges
// with their vertex in/out lists.
void expectJobGraph(const StreamExecutionEnvironment& env, const JobGraph& jg,
                    const std::vector<V>& vertices, const std::vector<E>& edges) {
  const StreamGraph& sg = env.getStreamGraph();
  ASSERT_EQ(jg.vertices.size(), vertices.size());
  std::vector<int> expectedVertexOfNode(sg.nodes().size(), -1);
  for (size_t i = 0; i < vertices.size(); ++i) {
    const JobVertex& v = jg.vertices[i];
    SCOPED_TRACE("vertex " + std::to_string(i));
    EXPECT_EQ(v.id, static_cast<int>(i));
    EXPECT_EQ(chainNames(sg, v), vertices[i].chain);
    EXPECT_EQ(v.name, vertices[i].name.empty() ? joined(vertices[i].chain) : vertices[i].name);
    EXPECT_EQ(v.parallelism, vertices[i].parallelism);
    EXPECT_EQ(v.maxParallelism, 128);
    EXPECT_EQ(v.slotSharingGroup, vertices[i].group);
    for (size_t k = 1; k < v.chain.size(); ++k)
      EXPECT_LT(v.chain[k - 1], v.chain[k]) << "graph order";
    for (int id : v.chain) expectedVertexOfNode.at(id) = static_cast<int>(i);
  }
  EXPECT_EQ(jg.vertexOfNode, expectedVertexOfNode);

  // A stream edge is chained exactly when both ends are in one vertex; the
  // others each become one job edge, in stream edge order.
  std::vector<bool> expectedChained;
  std::vector<int> unchained;
  for (const auto& e : sg.edges()) {
    bool same = expectedVertexOfNode[e.source] == expectedVertexOfNode[e.target];
    expectedChained.push_back(same);
    if (!same) unchained.push_back(e.id);
  }
  EXPECT_EQ(jg.edgeChained, expectedChained);

  ASSERT_EQ(jg.edges.size(), edges.size());
  ASSERT_EQ(unchained.size(), edges.size());
  std::vector<std::vector<int>> ins(vertices.size()), outs(vertices.size());
  for (size_t i = 0; i < edges.size(); ++i) {
    const JobEdge& je = jg.edges[i];
    SCOPED_TRACE("job edge " + std::to_string(i));
    EXPECT_EQ(je.id, static_cast<int>(i));
    EXPECT_EQ(je.source, edges[i].source);
    EXPECT_EQ(je.target, edges[i].target);
    EXPECT_EQ(je.streamEdge, unchained[i]);
    EXPECT_EQ(partitionKindName(je.partition), std::string(partitionKindName(edges[i].partition)));
    const StreamEdge& se = sg.edge(je.streamEdge);
    EXPECT_EQ(expectedVertexOfNode[se.source], edges[i].source);
    EXPECT_EQ(expectedVertexOfNode[se.target], edges[i].target);
    outs[edges[i].source].push_back(static_cast<int>(i));
    ins[edges[i].target].push_back(static_cast<int>(i));
  }
  for (size_t i = 0; i < vertices.size(); ++i) {
    EXPECT_EQ(jg.vertices[i].inputs, ins[i]) << "inputs of vertex " << i;
    EXPECT_EQ(jg.vertices[i].outputs, outs[i]) << "outputs of vertex " << i;
  }
}

Pair toPair(const int64_t& v) { return {v % 3, v}; }
bool bigEnough(const Pair& p) { return p.second > 2; }

TEST(ChainingTest, SamplePipelineChainsAroundTheKeyBy) {
  StreamExecutionEnvironment env;
  env.setParallelism(4);
  env.fromSequence(1, 100).map(toPair).filter(bigEnough).keyBy<0>().sum(1).print();

  JobGraph jg = env.getJobGraph("chaining");
  EXPECT_EQ(jg.jobName, "chaining");
  EXPECT_EQ(jg.bufferTimeoutMs, 100);
  expectJobGraph(env, jg,
                 {{{"Source: Sequence Source", "Map", "Filter"}, 4},
                  {{"Keyed Aggregation", "Print to Std. Out"}, 4}},
                 {{0, 1, PartitionKind::kHash}});
  EXPECT_EQ(jg.vertices[0].name, "Source: Sequence Source -> Map -> Filter");
  EXPECT_EQ(jg.vertices[1].name, "Keyed Aggregation -> Print to Std. Out");
  EXPECT_THAT(jg.vertices[0].chain, ElementsAre(0, 1, 2));
  EXPECT_THAT(jg.vertices[1].chain, ElementsAre(3, 4));
  EXPECT_EQ(jg.vertices[0].head(), 0);
}

TEST(ChainingTest, DefaultJobNameAndBufferTimeoutAreCopied) {
  StreamExecutionEnvironment env;
  env.setBufferTimeout(0);
  env.fromSequence(1, 3).print();
  JobGraph jg = env.getJobGraph();
  EXPECT_EQ(jg.jobName, "Sluice Streaming Job");
  EXPECT_EQ(jg.bufferTimeoutMs, 0);
  expectJobGraph(env, jg, {{{"Source: Sequence Source", "Print to Std. Out"}, 1}}, {});
}

TEST(ChainingTest, GetJobGraphDoesNotConsumeOrResolveTheEnvironmentsGraph) {
  StreamExecutionEnvironment env;
  env.setParallelism(3);
  env.fromSequence(1, 3).map(toPair).print();
  JobGraph first = env.getJobGraph();
  for (const auto& n : env.getStreamGraph().nodes()) EXPECT_EQ(n.parallelism, -1) << n.name;
  for (const auto& e : env.getStreamGraph().edges()) {
    EXPECT_EQ(e.partition, PartitionKind::kDefault);
  }
  JobGraph second = env.getJobGraph();
  ASSERT_EQ(first.vertices.size(), 1u);
  ASSERT_EQ(second.vertices.size(), 1u);
  EXPECT_EQ(first.vertices[0].chain, second.vertices[0].chain);
  EXPECT_EQ(second.vertices[0].parallelism, 3);
}

TEST(ChainingTest, DisableChainingIsolatesTheOperator) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  env.fromSequence(1, 100)
      .map(toPair)
      .filter(bigEnough)
      .disableChaining()
      .map([](const Pair& p) { return p.second; })
      .print();
  expectJobGraph(
      env, env.getJobGraph(),
      {{{"Source: Sequence Source", "Map"}, 2}, {{"Filter"}, 2}, {{"Map", "Print to Std. Out"}, 2}},
      {{0, 1, PartitionKind::kForward}, {1, 2, PartitionKind::kForward}});
}

TEST(ChainingTest, DisableChainingOnASinkOnlyCutsItsInput) {
  StreamExecutionEnvironment env;
  env.fromSequence(1, 100).map(toPair).print().disableChaining();
  expectJobGraph(env, env.getJobGraph(),
                 {{{"Source: Sequence Source", "Map"}, 1}, {{"Print to Std. Out"}, 1}},
                 {{0, 1, PartitionKind::kForward}});
}

TEST(ChainingTest, StartNewChainStartsAChainThatSuccessorsJoin) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  env.fromSequence(1, 100)
      .map(toPair)
      .filter(bigEnough)
      .startNewChain()
      .map([](const Pair& p) { return p.second; })
      .print();
  expectJobGraph(
      env, env.getJobGraph(),
      {{{"Source: Sequence Source", "Map"}, 2}, {{"Filter", "Map", "Print to Std. Out"}, 2}},
      {{0, 1, PartitionKind::kForward}});
}

TEST(ChainingTest, DifferentParallelismBreaksTheChainAndRebalances) {
  StreamExecutionEnvironment env;
  env.setParallelism(4);
  env.fromSequence(1, 100).map(toPair).setParallelism(2).filter(bigEnough).print();
  expectJobGraph(
      env, env.getJobGraph(),
      {{{"Source: Sequence Source"}, 4}, {{"Map"}, 2}, {{"Filter", "Print to Std. Out"}, 4}},
      {{0, 1, PartitionKind::kRebalance}, {1, 2, PartitionKind::kRebalance}});
}

TEST(ChainingTest, ExplicitPartitioningIsKeptAndBreaksTheChain) {
  StreamExecutionEnvironment env;
  env.setParallelism(3);
  auto mapped = env.fromSequence(1, 100).map(toPair);
  mapped.rebalance()
      .filter(bigEnough)
      .rescale()
      .map([](const Pair& p) { return p.first; })
      .broadcast()
      .print();
  expectJobGraph(env, env.getJobGraph(),
                 {{{"Source: Sequence Source", "Map"}, 3},
                  {{"Filter"}, 3},
                  {{"Map"}, 3},
                  {{"Print to Std. Out"}, 3}},
                 {{0, 1, PartitionKind::kRebalance},
                  {1, 2, PartitionKind::kRescale},
                  {2, 3, PartitionKind::kBroadcast}});
}

TEST(ChainingTest, ExplicitForwardBetweenEqualParallelismChains) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  env.fromSequence(1, 100).forward().map(toPair).forward().print();
  expectJobGraph(env, env.getJobGraph(),
                 {{{"Source: Sequence Source", "Map", "Print to Std. Out"}, 2}}, {});
}

TEST(ChainingTest, DisableOperatorChainingGivesOneVertexPerOperator) {
  StreamExecutionEnvironment env;
  env.setParallelism(4);
  env.disableOperatorChaining();
  env.fromSequence(1, 100).map(toPair).filter(bigEnough).keyBy<0>().sum(1).print();
  expectJobGraph(env, env.getJobGraph(),
                 {{{"Source: Sequence Source"}, 4},
                  {{"Map"}, 4},
                  {{"Filter"}, 4},
                  {{"Keyed Aggregation"}, 4},
                  {{"Print to Std. Out"}, 4}},
                 {{0, 1, PartitionKind::kForward},
                  {1, 2, PartitionKind::kForward},
                  {2, 3, PartitionKind::kHash},
                  {3, 4, PartitionKind::kForward}});
}

TEST(ChainingTest, DifferentSlotSharingGroupsBreakTheChain) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  env.fromSequence(1, 100)
      .map(toPair)
      .slotSharingGroup("a")
      .filter(bigEnough)
      .slotSharingGroup("a")
      .print()
      .slotSharingGroup("b");
  expectJobGraph(env, env.getJobGraph(),
                 {{{"Source: Sequence Source"}, 2},
                  {{"Map", "Filter"}, 2, "a"},
                  {{"Print to Std. Out"}, 2, "b"}},
                 {{0, 1, PartitionKind::kForward}, {1, 2, PartitionKind::kForward}});
}

// Flink (StreamGraphGenerator#determineSlotSharingGroup): an operator without
// a slot sharing group of its own takes its inputs' group when they all agree,
// else "default". So map("a") -> filter -> print all run in group "a" and
// chain together.
TEST(ChainingTest, SlotSharingGroupIsInheritedFromInputsAsInFlink) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  env.fromSequence(1, 100).map(toPair).slotSharingGroup("a").filter(bigEnough).print();
  expectJobGraph(
      env, env.getJobGraph(),
      {{{"Source: Sequence Source"}, 2}, {{"Map", "Filter", "Print to Std. Out"}, 2, "a"}},
      {{0, 1, PartitionKind::kForward}});
}

TEST(ChainingTest, UnionOfTwoSourcesMakesTheConsumerAChainHead) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  auto a = env.fromSequence(1, 10);
  auto b = env.fromSequence(11, 20);
  a.unionWith(b).map(toPair).print();
  expectJobGraph(env, env.getJobGraph(),
                 {{{"Source: Sequence Source"}, 2},
                  {{"Source: Sequence Source"}, 2},
                  {{"Map", "Print to Std. Out"}, 2}},
                 {{0, 2, PartitionKind::kForward}, {1, 2, PartitionKind::kForward}});
}

class Sum2 : public CoMapFunction<int64_t, std::string, int64_t> {
 public:
  int64_t map1(const int64_t& v) override { return v; }
  int64_t map2(const std::string& s) override { return static_cast<int64_t>(s.size()); }
};

TEST(ChainingTest, TwoInputOperatorIsAChainHead) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  auto numbers = env.fromSequence(1, 10);
  auto words = env.fromSequence(1, 10).map([](const int64_t& v) { return std::to_string(v); });
  numbers.connect(words).map(Sum2{}).print();
  const StreamGraph& sg = env.getStreamGraph();
  expectJobGraph(env, env.getJobGraph(),
                 {{{"Source: Sequence Source"}, 2},
                  {{"Source: Sequence Source", "Map"}, 2},
                  {{"Co-Map", "Print to Std. Out"}, 2}},
                 {{0, 2, PartitionKind::kForward}, {1, 2, PartitionKind::kForward}});
  // The two inputs keep their input index.
  JobGraph jg = env.getJobGraph();
  EXPECT_EQ(sg.edge(jg.edges[0].streamEdge).inputIndex, 0);
  EXPECT_EQ(sg.edge(jg.edges[1].streamEdge).inputIndex, 1);
}

class SplitOdd : public ProcessFunction<int64_t, int64_t> {
 public:
  void processElement(const int64_t& v, Context& ctx, Collector<int64_t>& out) override {
    if (v % 2 == 0) {
      out.collect(v);
    } else {
      ctx.output(OutputTag<std::string>("odd"), std::to_string(v));
    }
  }
};

TEST(ChainingTest, SideOutputsAndFanOutChainAsATree) {
  StreamExecutionEnvironment env;
  env.setParallelism(3);
  auto evens = env.fromSequence(1, 100).process(SplitOdd{});  // 1
  auto odd = evens.getSideOutput(OutputTag<std::string>("odd"));
  evens.filter([](const int64_t& v) { return v % 4 == 0; }).print();                     // 2, 3
  evens.filter([](const int64_t& v) { return v % 4 != 0; }).print();                     // 4, 5
  odd.map([](const std::string& s) { return static_cast<int64_t>(s.size()); }).print();  // 6, 7

  const StreamGraph& sg = env.getStreamGraph();
  JobGraph jg = env.getJobGraph();
  expectJobGraph(env, jg,
                 {{{"Source: Sequence Source", "Process", "Filter", "Print to Std. Out", "Filter",
                    "Print to Std. Out", "Map", "Print to Std. Out"},
                   3,
                   "default",
                   // Flink names a forking chain "A -> (B, C)".
                   "Source: Sequence Source -> Process -> (Filter -> Print to Std. Out, Filter -> "
                   "Print to Std. Out, Map -> Print to Std. Out)"}},
                 {});
  ASSERT_EQ(jg.vertices.size(), 1u);
  EXPECT_THAT(jg.vertices[0].chain, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  // The process operator has three chained outputs, one of them the side output.
  ASSERT_EQ(sg.node(1).outEdges.size(), 3u);
  int sideEdges = 0;
  for (int eid : sg.node(1).outEdges) {
    EXPECT_TRUE(jg.edgeChained[eid]);
    if (sg.edge(eid).sideOutputTag == "odd") {
      ++sideEdges;
      EXPECT_EQ(sg.edge(eid).target, 6);
    }
  }
  EXPECT_EQ(sideEdges, 1);
}

TEST(ChainingTest, FanOutWithOneBranchAcrossTheNetwork) {
  StreamExecutionEnvironment env;
  env.setParallelism(2);
  auto mapped = env.fromSequence(1, 100).map(toPair);                           // 1
  mapped.filter(bigEnough).print();                                             // 2, 3
  mapped.keyBy<0>().sum(1).print();                                             // 4, 5
  mapped.map([](const Pair& p) { return p.first; }).setParallelism(1).print();  // 6, 7
  expectJobGraph(env, env.getJobGraph(),
                 {{{"Source: Sequence Source", "Map", "Filter", "Print to Std. Out"}, 2},
                  {{"Keyed Aggregation", "Print to Std. Out"}, 2},
                  {{"Map"}, 1},
                  {{"Print to Std. Out"}, 2}},
                 {{0, 1, PartitionKind::kHash},
                  {0, 2, PartitionKind::kRebalance},
                  {2, 3, PartitionKind::kRebalance}});
}

// --- StreamGraph::resolve errors ---------------------------------------------

std::string resolveError(const StreamExecutionEnvironment& env) {
  try {
    (void)env.getJobGraph();
  } catch (const SluiceException& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(ResolveTest, ForwardBetweenDifferentParallelismIsRejected) {
  StreamExecutionEnvironment env;
  env.setParallelism(4);
  env.fromSequence(1, 10).forward().map(toPair).setParallelism(2).print();
  std::string msg = resolveError(env);
  EXPECT_THAT(msg, HasSubstr("Forward partitioning does not allow change of parallelism"));
  EXPECT_THAT(msg, HasSubstr("Upstream operation: 'Source: Sequence Source' parallelism: 4"));
  EXPECT_THAT(msg, HasSubstr("downstream operation: 'Map' parallelism: 2"));
}

TEST(ResolveTest, ParallelismAboveMaxParallelismIsRejected) {
  StreamExecutionEnvironment env;
  env.fromSequence(1, 10).map(toPair).setMaxParallelism(4).setParallelism(8).print();
  std::string msg = resolveError(env);
  EXPECT_THAT(msg, HasSubstr("operator 'Map'"));
  EXPECT_THAT(msg, HasSubstr("parallelism 8 is higher than its max parallelism 4"));
}

TEST(ResolveTest, ParallelismAboveTheJobsMaxParallelismIsRejected) {
  StreamExecutionEnvironment env;
  env.setMaxParallelism(2);
  env.fromSequence(1, 10).map(toPair).setParallelism(3).print();
  EXPECT_THAT(resolveError(env),
              HasSubstr("operator 'Map': parallelism 3 is higher than its max parallelism 2"));
}

TEST(ResolveTest, NonParallelSourceDefaultsToParallelismOne) {
  StreamExecutionEnvironment env;
  env.setParallelism(3);
  env.fromElements(int64_t{1}, int64_t{2}, int64_t{3}).map(toPair).print();
  expectJobGraph(env, env.getJobGraph(),
                 {{{"Source: Collection Source"}, 1}, {{"Map", "Print to Std. Out"}, 3}},
                 {{0, 1, PartitionKind::kRebalance}});
}

// The DataStream returned by fromElements() has no setParallelism() (see the
// report), so the test sets it on the StreamGraph node, as the API would.
TEST(ResolveTest, NonParallelSourceWithParallelismTwoIsRejected) {
  StreamExecutionEnvironment env;
  auto source = env.fromElements(int64_t{1}, int64_t{2}, int64_t{3});
  source.print();
  env.state()->graph.node(source.inputs().at(0).node).parallelism = 2;
  std::string msg = resolveError(env);
  EXPECT_THAT(msg, HasSubstr("'Source: Collection Source' is a non-parallel source"));
  EXPECT_THAT(msg, HasSubstr("must be 1, got 2"));
}

TEST(ResolveTest, EmptyGraphIsRejected) {
  StreamExecutionEnvironment env;
  EXPECT_THAT(resolveError(env), HasSubstr("No operators defined in streaming topology"));
}

}  // namespace
}  // namespace chaining_test
