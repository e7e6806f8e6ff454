// StreamGraph: the job as the user wrote it, one node per operator.
//
// The DataStream API appends nodes and edges while the user's program builds
// the pipeline; `execute()` turns the graph into a JobGraph (operators chained
// into tasks, see job_graph.h) and then into parallel subtasks. Building must
// be deterministic: every process of a cluster rebuilds the same graph from
// the same program and finds its operators by node id.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <sluice/graph/operator.h>

namespace sluice {

struct StreamNode {
  int id = -1;
  std::string name;         // shown in logs, errors and the web UI
  std::string uid;          // stable id for state; empty = derived from the position
  int parallelism = -1;     // -1: the environment's
  int maxParallelism = -1;  // -1: the environment's
  // Empty: not set; resolve() takes the inputs' group when they agree, else
  // "default" (Flink's rule).
  std::string slotSharingGroup;
  ChainingStrategy chaining = ChainingStrategy::kAlways;
  std::shared_ptr<const OperatorFactory> factory;
  std::vector<int> inEdges;   // edge ids, in creation order
  std::vector<int> outEdges;  // edge ids, in creation order
};

struct StreamEdge {
  int id = -1;
  int source = -1;
  int target = -1;
  int inputIndex = 0;         // which input of the target (0, or 1 for two-input)
  std::string sideOutputTag;  // empty: the main output
  PartitionKind partition = PartitionKind::kDefault;
  std::shared_ptr<const TypeOps> type;                  // record type on this edge
  std::shared_ptr<const NetworkOutputFactory> network;  // serializer + partitioner
};

class StreamGraph {
 public:
  StreamGraph() = default;

  int addNode(std::string name, std::shared_ptr<const OperatorFactory> factory);
  // Throws SluiceException when an id is out of range.
  int addEdge(int source, int target, int inputIndex, std::string sideOutputTag,
              PartitionKind partition, std::shared_ptr<const TypeOps> type,
              std::shared_ptr<const NetworkOutputFactory> network);

  StreamNode& node(int id);
  const StreamNode& node(int id) const;
  const StreamEdge& edge(int id) const;
  StreamEdge& edge(int id);
  const std::vector<StreamNode>& nodes() const { return nodes_; }
  const std::vector<StreamEdge>& edges() const { return edges_; }

  // Job-wide settings the environment copies in before resolve().
  std::string jobName = "Sluice Job";
  int defaultParallelism = 1;
  int defaultMaxParallelism = 128;
  bool chainingEnabled = true;
  int64_t bufferTimeoutMs = 100;

  // Fixes every node's parallelism and max parallelism and every edge's
  // partitioning (kDefault -> forward or rebalance), and validates the graph.
  // Throws SluiceException naming the operator for: parallelism < 1 or above
  // its max parallelism; a non-parallel source with parallelism > 1; a forward
  // edge between different parallelisms; an empty graph.
  void resolve();

 private:
  std::vector<StreamNode> nodes_;
  std::vector<StreamEdge> edges_;
};

}  // namespace sluice
