// JobGraph and ExecutionGraph: the StreamGraph chained into tasks, then
// expanded into parallel subtasks and the channels between them.
//
// Chaining follows Flink's rules. An edge u -> v is chained (u and v run in one
// task and call each other directly) when all hold:
//   - chaining is enabled for the job,
//   - v has exactly one input edge,
//   - the edge is a forward edge (after resolve()) and u, v have the same
//     parallelism,
//   - u and v are in the same slot sharing group,
//   - u's strategy is not kNever and v's is kAlways.
// A chain is a tree: its head is the one node whose input is not chained.
//
// Channels: a forward edge connects subtask i to subtask i; a rescale edge
// connects pointwise (each producer to a contiguous range of consumers, or a
// range of producers to each consumer); every other edge is all-to-all.
#pragma once

#include <string>
#include <vector>

#include <sluice/graph/stream_graph.h>

namespace sluice {

struct JobEdge {
  int id = -1;
  int source = -1;                                    // job vertex
  int target = -1;                                    // job vertex
  int streamEdge = -1;                                // the StreamEdge it carries
  PartitionKind partition = PartitionKind::kForward;  // resolved
};

struct JobVertex {
  int id = -1;
  std::string name;        // "Source: Sequence -> Map -> Filter"
  std::vector<int> chain;  // stream node ids, head first, in graph order
  int parallelism = 1;
  int maxParallelism = 128;
  std::string slotSharingGroup;
  std::vector<int> inputs;   // job edge ids
  std::vector<int> outputs;  // job edge ids
  int head() const { return chain.front(); }
};

struct JobGraph {
  std::string jobName;
  std::vector<JobVertex> vertices;  // topological order
  std::vector<JobEdge> edges;
  std::vector<int> vertexOfNode;  // stream node id -> job vertex id
  std::vector<bool> edgeChained;  // stream edge id -> chained?
  int64_t bufferTimeoutMs = 100;
};

// `graph` must be resolved.
bool isChainable(const StreamGraph& graph, const StreamEdge& edge);
JobGraph createJobGraph(const StreamGraph& graph);

// One producer-subtask -> consumer-subtask channel of a job edge.
struct ExecutionChannel {
  int jobEdge = -1;
  int producerSubtask = -1;
  int channelIndex = -1;  // index among the producer's channels for this edge
  int consumerSubtask = -1;
};

struct ExecutionGraph {
  // per job edge: all its channels, ordered by producer subtask, then channel
  std::vector<std::vector<ExecutionChannel>> channels;
};

// The consumer subtasks producer `subtask` sends to, in channel order.
std::vector<int> connectedConsumers(PartitionKind partition, int subtask, int producerParallelism,
                                    int consumerParallelism);
ExecutionGraph createExecutionGraph(const JobGraph& jobGraph);

}  // namespace sluice
