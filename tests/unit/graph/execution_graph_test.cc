// JobGraph -> ExecutionGraph: which consumer subtasks each producer subtask of
// a job edge sends to (connectedConsumers) and the channel list built from it
// (createExecutionGraph).
//
// The expected pointwise (rescale) pattern is Flink's
// EdgeManagerBuildUtil#connectPointwise, re-implemented below from its
// definition: P == C one-to-one; P > C consumer j reads producers
// [j*P/C, (j+1)*P/C); P < C producer i feeds consumers
// [ceil(i*C/P), ceil((i+1)*C/P)). Every other partitioning is all-to-all.
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sluice/sluice.h>

namespace execution_graph_test {
namespace {

using namespace sluice;
using ::testing::ElementsAre;
using Groups = std::vector<std::vector<int>>;

// Flink's pointwise connection, as consumers per producer.
Groups flinkPointwise(int p, int c) {
  Groups out(p);
  if (p == c) {
    for (int i = 0; i < p; ++i) out[i] = {i};
  } else if (p > c) {
    for (int j = 0; j < c; ++j) {
      int start = j * p / c;
      int end = (j + 1) * p / c;
      for (int i = start; i < end; ++i) out[i].push_back(j);
    }
  } else {
    for (int i = 0; i < p; ++i) {
      int start = (i * c + p - 1) / p;
      int end = ((i + 1) * c + p - 1) / p;
      for (int j = start; j < end; ++j) out[i].push_back(j);
    }
  }
  return out;
}

Groups actual(PartitionKind kind, int p, int c) {
  Groups out;
  for (int i = 0; i < p; ++i) out.push_back(connectedConsumers(kind, i, p, c));
  return out;
}

std::vector<int> iota(int n) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(i);
  return v;
}

bool contiguousAscending(const std::vector<int>& v) {
  for (size_t k = 1; k < v.size(); ++k)
    if (v[k] != v[k - 1] + 1) return false;
  return true;
}

TEST(ConnectedConsumersTest, ForwardConnectsEachSubtaskToItsPeer) {
  for (int p = 1; p <= 8; ++p) {
    for (int i = 0; i < p; ++i) {
      EXPECT_THAT(connectedConsumers(PartitionKind::kForward, i, p, p), ElementsAre(i)) << p;
    }
  }
}

TEST(ConnectedConsumersTest, EveryNonPointwiseKindIsAllToAll) {
  for (PartitionKind kind :
       {PartitionKind::kRebalance, PartitionKind::kHash, PartitionKind::kBroadcast,
        PartitionKind::kShuffle, PartitionKind::kGlobal, PartitionKind::kCustom}) {
    for (int p = 1; p <= 6; ++p) {
      for (int c = 1; c <= 6; ++c) {
        for (int i = 0; i < p; ++i) {
          EXPECT_EQ(connectedConsumers(kind, i, p, c), iota(c))
              << partitionKindName(kind) << " " << p << "->" << c << " producer " << i;
        }
      }
    }
  }
}

TEST(ConnectedConsumersTest, RescaleWithEqualParallelismIsOneToOne) {
  EXPECT_EQ(actual(PartitionKind::kRescale, 1, 1), (Groups{{0}}));
  EXPECT_EQ(actual(PartitionKind::kRescale, 3, 3), (Groups{{0}, {1}, {2}}));
  EXPECT_EQ(actual(PartitionKind::kRescale, 5, 5), (Groups{{0}, {1}, {2}, {3}, {4}}));
}

TEST(ConnectedConsumersTest, RescaleDownGroupsContiguousProducers) {
  EXPECT_EQ(actual(PartitionKind::kRescale, 4, 2), (Groups{{0}, {0}, {1}, {1}}));
  EXPECT_EQ(actual(PartitionKind::kRescale, 3, 2), (Groups{{0}, {1}, {1}}));
  EXPECT_EQ(actual(PartitionKind::kRescale, 5, 2), (Groups{{0}, {0}, {1}, {1}, {1}}));
  EXPECT_EQ(actual(PartitionKind::kRescale, 7, 3), (Groups{{0}, {0}, {1}, {1}, {2}, {2}, {2}}));
  EXPECT_EQ(actual(PartitionKind::kRescale, 6, 1), (Groups{{0}, {0}, {0}, {0}, {0}, {0}}));
}

TEST(ConnectedConsumersTest, RescaleUpByAWholeFactorGivesEachProducerItsBlock) {
  EXPECT_EQ(actual(PartitionKind::kRescale, 2, 4), (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(actual(PartitionKind::kRescale, 1, 3), (Groups{{0, 1, 2}}));
  EXPECT_EQ(actual(PartitionKind::kRescale, 3, 6), (Groups{{0, 1}, {2, 3}, {4, 5}}));
}

// Flink rounds the producer's range up when C is not a multiple of P, so the
// first producers get the larger groups: 2 -> 5 is {0,1,2} {3,4}.
TEST(ConnectedConsumersTest, RescaleUpNonDivisibleMatchesFlink) {
  EXPECT_EQ(actual(PartitionKind::kRescale, 2, 5), (Groups{{0, 1, 2}, {3, 4}}));
  EXPECT_EQ(actual(PartitionKind::kRescale, 3, 5), (Groups{{0, 1}, {2, 3}, {4}}));
  EXPECT_EQ(actual(PartitionKind::kRescale, 4, 6), (Groups{{0, 1}, {2}, {3, 4}, {5}}));
}

TEST(ConnectedConsumersTest, RescaleMatchesFlinksPointwisePatternEverywhere) {
  std::string mismatches;
  int count = 0;
  for (int p = 1; p <= 16; ++p) {
    for (int c = 1; c <= 16; ++c) {
      if (actual(PartitionKind::kRescale, p, c) != flinkPointwise(p, c)) {
        ++count;
        mismatches += " " + std::to_string(p) + "->" + std::to_string(c);
      }
    }
  }
  EXPECT_EQ(count, 0) << "P->C pairs that differ from Flink:" << mismatches;
}

// Shape properties that any pointwise pattern must have (independent of how
// the extra subtasks are spread): contiguous, ordered groups; every producer
// and consumer connected; one side of each channel group is a single subtask;
// group sizes differ by at most one; channels = max(P, C).
TEST(ConnectedConsumersTest, RescaleIsAPointwisePartitionOfBothSides) {
  for (int p = 1; p <= 16; ++p) {
    for (int c = 1; c <= 16; ++c) {
      SCOPED_TRACE(std::to_string(p) + "->" + std::to_string(c));
      Groups g = actual(PartitionKind::kRescale, p, c);
      ASSERT_EQ(g.size(), static_cast<size_t>(p));
      std::vector<std::vector<int>> producersOf(c);
      size_t channels = 0;
      int lastConsumer = -1;
      for (int i = 0; i < p; ++i) {
        ASSERT_FALSE(g[i].empty()) << "producer " << i << " has no consumer";
        EXPECT_TRUE(contiguousAscending(g[i])) << "producer " << i;
        EXPECT_GE(g[i].front(), lastConsumer) << "groups out of order";
        lastConsumer = g[i].back();
        for (int j : g[i]) {
          ASSERT_GE(j, 0);
          ASSERT_LT(j, c);
          producersOf[j].push_back(i);
        }
        channels += g[i].size();
      }
      EXPECT_EQ(channels, static_cast<size_t>(std::max(p, c)));
      size_t minSize = SIZE_MAX, maxSize = 0;
      for (int j = 0; j < c; ++j) {
        ASSERT_FALSE(producersOf[j].empty()) << "consumer " << j << " has no producer";
        EXPECT_TRUE(contiguousAscending(producersOf[j])) << "consumer " << j;
        if (p >= c) {
          minSize = std::min(minSize, producersOf[j].size());
          maxSize = std::max(maxSize, producersOf[j].size());
        } else {
          EXPECT_EQ(producersOf[j].size(), 1u) << "consumer " << j;
        }
      }
      for (int i = 0; i < p; ++i) {
        if (p >= c) {
          EXPECT_EQ(g[i].size(), 1u);
        } else {
          minSize = std::min(minSize, g[i].size());
          maxSize = std::max(maxSize, g[i].size());
        }
      }
      EXPECT_LE(maxSize - minSize, 1u) << "unbalanced groups";
    }
  }
}

// --- createExecutionGraph ----------------------------------------------------

void expectChannelsFollowConnectedConsumers(const JobGraph& jg, const ExecutionGraph& eg) {
  ASSERT_EQ(eg.channels.size(), jg.edges.size());
  for (const JobEdge& je : jg.edges) {
    SCOPED_TRACE("job edge " + std::to_string(je.id));
    const int p = jg.vertices[je.source].parallelism;
    const int c = jg.vertices[je.target].parallelism;
    std::vector<ExecutionChannel> expected;
    for (int i = 0; i < p; ++i) {
      auto consumers = connectedConsumers(je.partition, i, p, c);
      for (size_t k = 0; k < consumers.size(); ++k) {
        expected.push_back({je.id, i, static_cast<int>(k), consumers[k]});
      }
    }
    const auto& got = eg.channels[je.id];
    ASSERT_EQ(got.size(), expected.size());
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].jobEdge, expected[k].jobEdge) << k;
      EXPECT_EQ(got[k].producerSubtask, expected[k].producerSubtask) << k;
      EXPECT_EQ(got[k].channelIndex, expected[k].channelIndex) << k;
      EXPECT_EQ(got[k].consumerSubtask, expected[k].consumerSubtask) << k;
    }
  }
}

std::pair<int64_t, int64_t> toPair(const int64_t& v) { return {v % 5, v}; }

TEST(ExecutionGraphTest, ChannelCountsPerEdgeKind) {
  StreamExecutionEnvironment env;
  env.setParallelism(4);
  auto mapped = env.fromSequence(1, 100).rescale().map(toPair).setParallelism(2);  // 0, 1
  mapped.filter([](const std::pair<int64_t, int64_t>& p) { return p.second > 0; })
      .setParallelism(6)  // 2
      .keyBy<0>()
      .sum(1)
      .setParallelism(3)  // 3
      .print()
      .setParallelism(3);  // 4
  mapped.rescale()
      .map([](const std::pair<int64_t, int64_t>& p) { return p.first; })
      .setParallelism(5)  // 5
      .print()
      .setParallelism(5);  // 6
  JobGraph jg = env.getJobGraph();
  ASSERT_EQ(jg.vertices.size(), 5u);
  ASSERT_EQ(jg.edges.size(), 4u);
  // (source vertex, target vertex, kind, channels): rescale 4->2 is 4 channels,
  // rebalance 2->6 is 12, hash 6->3 is 18, rescale 2->5 is 5.
  struct Want {
    int source, target;
    PartitionKind kind;
    size_t channels;
  };
  std::vector<Want> want = {{0, 1, PartitionKind::kRescale, 4},
                            {1, 2, PartitionKind::kRebalance, 12},
                            {2, 3, PartitionKind::kHash, 18},
                            {1, 4, PartitionKind::kRescale, 5}};
  ExecutionGraph eg = createExecutionGraph(jg);
  ASSERT_EQ(eg.channels.size(), 4u);
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(jg.edges[i].source, want[i].source);
    EXPECT_EQ(jg.edges[i].target, want[i].target);
    EXPECT_EQ(jg.edges[i].partition, want[i].kind);
    EXPECT_EQ(eg.channels[i].size(), want[i].channels);
  }
  expectChannelsFollowConnectedConsumers(jg, eg);

  // Every consumer subtask of the hash edge hears from all 6 producers, each
  // exactly once; each producer has one channel per consumer.
  std::vector<std::multiset<int>> fromProducers(3);
  for (const auto& ch : eg.channels[2])
    fromProducers[ch.consumerSubtask].insert(ch.producerSubtask);
  for (int j = 0; j < 3; ++j) EXPECT_EQ(fromProducers[j], (std::multiset<int>{0, 1, 2, 3, 4, 5}));
  // Rescale 4 -> 2: consumer 0 reads producers 0,1 and consumer 1 reads 2,3,
  // each producer with a single channel (index 0).
  for (const auto& ch : eg.channels[0]) {
    EXPECT_EQ(ch.channelIndex, 0);
    EXPECT_EQ(ch.consumerSubtask, ch.producerSubtask / 2);
  }
}

TEST(ExecutionGraphTest, HandBuiltForwardAndBroadcastEdges) {
  JobGraph jg;
  for (int v = 0; v < 3; ++v) {
    JobVertex jv;
    jv.id = v;
    jv.chain = {v};
    jv.parallelism = v == 2 ? 2 : 3;
    jg.vertices.push_back(jv);
  }
  jg.edges.push_back({0, 0, 1, 0, PartitionKind::kForward});
  jg.edges.push_back({1, 1, 2, 1, PartitionKind::kBroadcast});
  ExecutionGraph eg = createExecutionGraph(jg);
  ASSERT_EQ(eg.channels.size(), 2u);
  ASSERT_EQ(eg.channels[0].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(eg.channels[0][i].jobEdge, 0);
    EXPECT_EQ(eg.channels[0][i].producerSubtask, i);
    EXPECT_EQ(eg.channels[0][i].channelIndex, 0);
    EXPECT_EQ(eg.channels[0][i].consumerSubtask, i);
  }
  ASSERT_EQ(eg.channels[1].size(), 6u);
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(eg.channels[1][k].jobEdge, 1);
    EXPECT_EQ(eg.channels[1][k].producerSubtask, k / 2);
    EXPECT_EQ(eg.channels[1][k].channelIndex, k % 2);
    EXPECT_EQ(eg.channels[1][k].consumerSubtask, k % 2);
  }
}

TEST(ExecutionGraphTest, NoEdgesNoChannels) {
  StreamExecutionEnvironment env;
  env.setParallelism(3);
  env.fromSequence(1, 10).print();
  JobGraph jg = env.getJobGraph();
  ExecutionGraph eg = createExecutionGraph(jg);
  EXPECT_TRUE(eg.channels.empty());
}

}  // namespace
}  // namespace execution_graph_test
