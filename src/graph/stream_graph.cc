#include <fmt/format.h>

#include <sluice/core/status.h>
#include <sluice/graph/stream_graph.h>

namespace sluice {

const char* partitionKindName(PartitionKind kind) {
  switch (kind) {
    case PartitionKind::kDefault: return "DEFAULT";
    case PartitionKind::kForward: return "FORWARD";
    case PartitionKind::kRebalance: return "REBALANCE";
    case PartitionKind::kRescale: return "RESCALE";
    case PartitionKind::kHash: return "HASH";
    case PartitionKind::kBroadcast: return "BROADCAST";
    case PartitionKind::kShuffle: return "SHUFFLE";
    case PartitionKind::kGlobal: return "GLOBAL";
    case PartitionKind::kCustom: return "CUSTOM";
  }
  return "UNKNOWN";
}

int StreamGraph::addNode(std::string name, std::shared_ptr<const OperatorFactory> factory) {
  StreamNode n;
  n.id = static_cast<int>(nodes_.size());
  n.name = std::move(name);
  if (factory && factory->isSource()) n.chaining = ChainingStrategy::kHead;
  n.factory = std::move(factory);
  nodes_.push_back(std::move(n));
  return nodes_.back().id;
}

int StreamGraph::addEdge(int source, int target, int inputIndex, std::string sideOutputTag,
                         PartitionKind partition, std::shared_ptr<const TypeOps> type,
                         std::shared_ptr<const NetworkOutputFactory> network) {
  if (source < 0 || source >= static_cast<int>(nodes_.size()) || target < 0 ||
      target >= static_cast<int>(nodes_.size())) {
    throw SluiceException(
        fmt::format("StreamGraph: edge {} -> {} refers to an unknown node", source, target));
  }
  StreamEdge e;
  e.id = static_cast<int>(edges_.size());
  e.source = source;
  e.target = target;
  e.inputIndex = inputIndex;
  e.sideOutputTag = std::move(sideOutputTag);
  e.partition = partition;
  e.type = std::move(type);
  e.network = std::move(network);
  edges_.push_back(std::move(e));
  nodes_[source].outEdges.push_back(edges_.back().id);
  nodes_[target].inEdges.push_back(edges_.back().id);
  return edges_.back().id;
}

StreamNode& StreamGraph::node(int id) { return nodes_.at(id); }
const StreamNode& StreamGraph::node(int id) const { return nodes_.at(id); }
StreamEdge& StreamGraph::edge(int id) { return edges_.at(id); }
const StreamEdge& StreamGraph::edge(int id) const { return edges_.at(id); }

void StreamGraph::resolve() {
  if (nodes_.empty()) {
    throw SluiceException("No operators defined in streaming topology. Cannot execute.");
  }
  if (defaultParallelism < 1) {
    throw SluiceException(
        fmt::format("parallelism must be at least 1, got {}", defaultParallelism));
  }
  for (auto& n : nodes_) {
    if (n.slotSharingGroup.empty()) {
      // Inherit the inputs' group when they all agree (nodes come after their
      // inputs, so those are resolved already).
      std::string group;
      bool agree = !n.inEdges.empty();
      for (int e : n.inEdges) {
        const std::string& g = nodes_[edges_[e].source].slotSharingGroup;
        if (group.empty()) group = g;
        agree &= (g == group);
      }
      n.slotSharingGroup = agree ? group : "default";
    }
    if (n.maxParallelism == -1) n.maxParallelism = defaultMaxParallelism;
    if (n.maxParallelism < 1 || n.maxParallelism > (1 << 15)) {
      throw SluiceException(
          fmt::format("operator '{}': max parallelism must be in [1, 32768], got {}", n.name,
                      n.maxParallelism));
    }
    if (n.parallelism == -1) {
      n.parallelism = (n.factory && n.factory->isNonParallel()) ? 1 : defaultParallelism;
    }
    if (n.parallelism < 1) {
      throw SluiceException(fmt::format("operator '{}': parallelism must be at least 1, got {}",
                                        n.name, n.parallelism));
    }
    if (n.parallelism > n.maxParallelism) {
      throw SluiceException(
          fmt::format("operator '{}': parallelism {} is higher than its max parallelism {} "
                      "(set pipeline.max-parallelism or setMaxParallelism)",
                      n.name, n.parallelism, n.maxParallelism));
    }
    if (n.factory && n.factory->isNonParallel() && n.parallelism != 1) {
      throw SluiceException(
          fmt::format("operator '{}' is a non-parallel source; its parallelism must be 1, got {}",
                      n.name, n.parallelism));
    }
  }
  for (auto& e : edges_) {
    const StreamNode& up = nodes_[e.source];
    const StreamNode& down = nodes_[e.target];
    if (e.partition == PartitionKind::kDefault) {
      e.partition =
          up.parallelism == down.parallelism ? PartitionKind::kForward : PartitionKind::kRebalance;
    }
    if (e.partition == PartitionKind::kForward && up.parallelism != down.parallelism) {
      throw SluiceException(fmt::format(
          "Forward partitioning does not allow change of parallelism. Upstream operation: '{}' "
          "parallelism: {}, downstream operation: '{}' parallelism: {}. You must use another "
          "partitioning strategy, such as broadcast, rebalance, shuffle or global.",
          up.name, up.parallelism, down.name, down.parallelism));
    }
  }
}

}  // namespace sluice
