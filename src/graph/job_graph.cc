#include <fmt/format.h>

#include <sluice/core/status.h>
#include <sluice/graph/job_graph.h>

namespace sluice {

bool isChainable(const StreamGraph& graph, const StreamEdge& edge) {
  const StreamNode& up = graph.node(edge.source);
  const StreamNode& down = graph.node(edge.target);
  return graph.chainingEnabled && down.inEdges.size() == 1 &&
         edge.partition == PartitionKind::kForward && up.parallelism == down.parallelism &&
         up.slotSharingGroup == down.slotSharingGroup && up.chaining != ChainingStrategy::kNever &&
         down.chaining == ChainingStrategy::kAlways;
}

namespace {

// Flink's chain names: "A -> B" along a chain, "A -> (B, C)" where it forks.
std::string chainedName(const StreamGraph& graph, const std::vector<bool>& chained, int node) {
  std::vector<std::string> next;
  for (int e : graph.node(node).outEdges) {
    if (chained[e]) next.push_back(chainedName(graph, chained, graph.edge(e).target));
  }
  const std::string& name = graph.node(node).name;
  if (next.empty()) return name;
  if (next.size() == 1) return name + " -> " + next.front();
  std::string joined;
  for (const auto& n : next) joined += (joined.empty() ? "" : ", ") + n;
  return name + " -> (" + joined + ")";
}

}  // namespace

JobGraph createJobGraph(const StreamGraph& graph) {
  JobGraph jg;
  jg.jobName = graph.jobName;
  jg.bufferTimeoutMs = graph.bufferTimeoutMs;
  const auto& nodes = graph.nodes();
  const auto& edges = graph.edges();
  jg.edgeChained.assign(edges.size(), false);
  for (const auto& e : edges) jg.edgeChained[e.id] = isChainable(graph, e);

  // Nodes are created after their inputs, so id order is topological and a
  // chained node's predecessor already has its vertex.
  jg.vertexOfNode.assign(nodes.size(), -1);
  for (const auto& n : nodes) {
    for (int in : n.inEdges) {
      if (graph.edge(in).source >= n.id) {
        throw SluiceException(
            fmt::format("StreamGraph: operator '{}' has an input created after it", n.name));
      }
    }
    bool head = n.inEdges.size() != 1 || !jg.edgeChained[n.inEdges[0]];
    if (head) {
      JobVertex v;
      v.id = static_cast<int>(jg.vertices.size());
      v.chain.push_back(n.id);
      v.parallelism = n.parallelism;
      v.maxParallelism = n.maxParallelism;
      v.slotSharingGroup = n.slotSharingGroup;
      jg.vertexOfNode[n.id] = v.id;
      jg.vertices.push_back(std::move(v));
    } else {
      int vid = jg.vertexOfNode[graph.edge(n.inEdges[0]).source];
      jg.vertexOfNode[n.id] = vid;
      jg.vertices[vid].chain.push_back(n.id);
    }
  }
  for (auto& v : jg.vertices) v.name = chainedName(graph, jg.edgeChained, v.head());
  for (const auto& e : edges) {
    if (jg.edgeChained[e.id]) continue;
    JobEdge je;
    je.id = static_cast<int>(jg.edges.size());
    je.source = jg.vertexOfNode[e.source];
    je.target = jg.vertexOfNode[e.target];
    je.streamEdge = e.id;
    je.partition = e.partition;
    jg.vertices[je.source].outputs.push_back(je.id);
    jg.vertices[je.target].inputs.push_back(je.id);
    jg.edges.push_back(je);
  }
  return jg;
}

std::vector<int> connectedConsumers(PartitionKind partition, int subtask, int producerParallelism,
                                    int consumerParallelism) {
  std::vector<int> out;
  if (partition == PartitionKind::kForward) {
    out.push_back(subtask);
  } else if (partition == PartitionKind::kRescale) {
    if (producerParallelism >= consumerParallelism) {
      // Each consumer j reads producers [j*P/C, (j+1)*P/C).
      for (int j = 0; j < consumerParallelism; ++j) {
        int64_t start = int64_t{j} * producerParallelism / consumerParallelism;
        int64_t end = int64_t{j + 1} * producerParallelism / consumerParallelism;
        if (subtask >= start && subtask < end) out.push_back(j);
      }
    } else {
      // Rounded up, as Flink's pointwise connection does.
      int64_t start =
          (int64_t{subtask} * consumerParallelism + producerParallelism - 1) / producerParallelism;
      int64_t end = (int64_t{subtask + 1} * consumerParallelism + producerParallelism - 1) /
                    producerParallelism;
      for (int64_t j = start; j < end; ++j) out.push_back(static_cast<int>(j));
    }
  } else {
    for (int j = 0; j < consumerParallelism; ++j) out.push_back(j);
  }
  return out;
}

ExecutionGraph createExecutionGraph(const JobGraph& jobGraph) {
  ExecutionGraph eg;
  eg.channels.resize(jobGraph.edges.size());
  for (const auto& je : jobGraph.edges) {
    const JobVertex& src = jobGraph.vertices[je.source];
    const JobVertex& dst = jobGraph.vertices[je.target];
    for (int i = 0; i < src.parallelism; ++i) {
      auto consumers = connectedConsumers(je.partition, i, src.parallelism, dst.parallelism);
      for (size_t c = 0; c < consumers.size(); ++c) {
        eg.channels[je.id].push_back({je.id, i, static_cast<int>(c), consumers[c]});
      }
    }
  }
  return eg;
}

}  // namespace sluice
