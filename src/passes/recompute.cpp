#include "passes/recompute.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "ir/phase.h"
#include "ir/rebuild.h"
#include "ops/op_table.h"

namespace memfit {
namespace {

// Stage 2: which values stay as the forward pass made them, and the level of
// every forward node (0 for nodes that are never cloned).
struct Kept {
  std::vector<bool> keep;      // by value
  std::vector<int32_t> level;  // by node
  // checkpoint_level[v]: the level of checkpoint v (0 for `keep`), -1 if none.
  std::vector<int32_t> checkpoint_level;
};

Result<Kept> kept_values(const Graph& graph, const std::vector<bool>& forward,
                         const RecomputeOptions& options) {
  // Values the forward pass itself needs: read by a forward node, returned,
  // or carried to the next step; and how many forward nodes read each.
  std::vector<bool> needed(graph.num_values(), false);
  std::vector<bool> read_backward(graph.num_values(), false);  // by a non-forward node
  std::vector<int32_t> forward_readers(graph.num_values(), 0);
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    for (ValueId in : graph.nodes()[n].inputs) {
      if (!forward[n]) {
        read_backward[in.idx()] = true;
        continue;
      }
      needed[in.idx()] = true;
      ++forward_readers[in.idx()];
    }
  }
  for (ValueId v : graph.outputs()) needed[v.idx()] = true;
  for (const StateUpdate& u : graph.updates()) needed[u.next.idx()] = true;

  Kept kept;
  kept.checkpoint_level.assign(graph.num_values(), -1);
  auto mark = [&](ValueId v, int32_t level) -> Status {
    if (!v.valid() || v.idx() >= graph.num_values()) {
      return Status::error("a checkpoint is not a value of the graph");
    }
    const Value& value = graph.value(v);
    if (!value.producer.valid() || !forward[value.producer.idx()]) {
      return Status::error("checkpoint '" + value.name + "' is not an output of a forward node");
    }
    if (kept.checkpoint_level[v.idx()] >= 0) {
      return Status::error("checkpoint '" + value.name + "' is listed twice");
    }
    kept.checkpoint_level[v.idx()] = level;
    return Status::ok();
  };
  for (ValueId v : options.keep) MEMFIT_RETURN_IF_ERROR(mark(v, 0));
  for (size_t k = 0; k < options.levels.size(); ++k) {
    for (ValueId v : options.levels[k])
      MEMFIT_RETURN_IF_ERROR(mark(v, static_cast<int32_t>(k + 1)));
  }

  const auto leaf = static_cast<int32_t>(options.levels.size()) + 1;
  kept.keep.assign(graph.num_values(), true);
  kept.level.assign(graph.num_nodes(), 0);
  // A mirrored clone must not keep alive a value that would die in the
  // forward pass: each input of a mirrored node is a graph input, read by the
  // backward pass anyway, or made by a mirrored node (decided before it, in
  // the forward order). chain[n]: the most mirrored nodes a clone of n
  // recomputes, itself included (0: not mirrored); at most kMirrorChain, so
  // a reader recomputes a bounded number of cheap ops (a chain of cheap ops
  // stores every (kMirrorChain + 1)-th value the backward pass reads).
  constexpr int32_t kMirrorChain = 4;
  std::vector<int32_t> chain(graph.num_nodes(), 0);
  auto available = [&](ValueId in) {
    const NodeId producer = graph.value(in).producer;
    return !producer.valid() || read_backward[in.idx()] || chain[producer.idx()] > 0;
  };
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    const Node& node = graph.nodes()[n];
    if (!forward[n]) continue;
    bool any_needed = false;
    int32_t readers = 0;
    int32_t level = leaf;
    bool checkpoint = false;
    for (ValueId out : node.outputs) {
      any_needed = any_needed || needed[out.idx()];
      readers += forward_readers[out.idx()];
      const int32_t c = kept.checkpoint_level[out.idx()];
      if (c < 0) continue;
      checkpoint = true;
      if (c > 0) level = std::min(level, c);
    }
    if (!any_needed) continue;
    int32_t longest = 0;
    for (ValueId in : node.inputs) {
      if (graph.value(in).producer.valid())
        longest = std::max(longest, chain[graph.value(in).producer.idx()]);
    }
    const bool mirrored = options.mirror && op_info(node.op).cheap_to_recompute && !checkpoint &&
                          readers <= 1 && longest < kMirrorChain &&
                          std::all_of(node.inputs.begin(), node.inputs.end(), available);
    if (mirrored) chain[n] = longest + 1;
    if (options.keep_others && !mirrored) continue;
    kept.level[n] = mirrored ? leaf + 1 : level;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const ValueId out = node.outputs[o];
      kept.keep[out.idx()] = kept.checkpoint_level[out.idx()] == 0 || always_kept(node, o);
    }
  }
  for (ValueId v : graph.outputs()) kept.keep[v.idx()] = true;
  for (const StateUpdate& u : graph.updates()) kept.keep[u.next.idx()] = true;
  return kept;
}

// segment[l - 1][n]: the level-l segment of forward node n (l = 1 .. L): the
// number of checkpoints of level <= l made by n or a forward node before it.
std::vector<std::vector<int32_t>> segments(const Graph& graph, const std::vector<bool>& forward,
                                           const Kept& kept, const RecomputeOptions& options) {
  const size_t levels = options.levels.size();
  std::vector<bool> ends(graph.num_values(), options.segment_ends.empty());
  for (ValueId v : options.segment_ends) {
    if (v.valid() && v.idx() < ends.size()) ends[v.idx()] = true;
  }
  std::vector<std::vector<int32_t>> segment(levels, std::vector<int32_t>(graph.num_nodes(), 0));
  for (size_t l = 1; l <= levels; ++l) {
    int32_t count = 0;
    for (size_t n = 0; n < graph.num_nodes(); ++n) {
      if (!forward[n]) continue;
      for (ValueId out : graph.nodes()[n].outputs) {
        const int32_t c = kept.checkpoint_level[out.idx()];
        count += c >= 0 && c <= static_cast<int32_t>(l) && ends[out.idx()];
      }
      segment[l - 1][n] = count;
    }
  }
  return segment;
}

}  // namespace

Result<std::vector<bool>> mirrored_nodes(const Graph& graph, const RecomputeOptions& options) {
  std::vector<bool> forward(graph.num_nodes()), mirrored(graph.num_nodes(), false);
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    forward[n] = node_phase(graph, graph.nodes()[n]) == Phase::forward;
  }
  if (!options.mirror) return mirrored;
  MEMFIT_ASSIGN_OR_RETURN(const Kept kept, kept_values(graph, forward, options));
  // Stage 2 gives mirrored nodes level L + 2 and no other node.
  const auto mirror_level = static_cast<int32_t>(options.levels.size()) + 2;
  for (size_t n = 0; n < graph.num_nodes(); ++n) mirrored[n] = kept.level[n] == mirror_level;
  return mirrored;
}

Result<bool> recompute(Graph& graph, const RecomputeOptions& options, RecomputeStats* stats) {
  // Stage 1.
  const size_t num_nodes = graph.num_nodes();
  std::vector<bool> forward(num_nodes);
  for (size_t n = 0; n < num_nodes; ++n) {
    forward[n] = node_phase(graph, graph.nodes()[n]) == Phase::forward;
  }
  MEMFIT_ASSIGN_OR_RETURN(const Kept kept, kept_values(graph, forward, options));
  const std::vector<bool>& keep = kept.keep;
  const size_t levels = options.levels.size();
  const std::vector<std::vector<int32_t>> segment = segments(graph, forward, kept, options);

  // Stage 3. Clones are appended to `graph` (out of order for now) and take
  // their place in `order`; clone_of[v] is the latest clone of a dropped value
  // v, made by the clone of its producer at generation clone_generation[node].
  // A clone of level k is valid while its generation is at least
  // invalidated[k] (invalidating a level starts a new generation) and, for
  // k in 2 .. L + 1, the context (below) is in its level-(k - 1) segment.
  const size_t num_values = graph.num_values();
  std::vector<ValueId> clone_of(num_values);
  std::vector<int64_t> clone_generation(num_nodes, -1);
  std::vector<size_t> clones(num_nodes, 0);
  std::vector<int64_t> invalidated(levels + 3, 0);  // by level 0 .. L + 2
  int64_t generation = 0;
  auto invalidate = [&](size_t level) { invalidated[level] = ++generation; };
  // The context: the segments, by level 1 .. L, of the last dropped value a
  // non-forward node read. Entering another level-l segment invalidates the
  // clones of level l + 1.
  std::vector<int32_t> context(levels, -1);
  auto valid = [&](NodeId original) {
    const int64_t made = clone_generation[original.idx()];
    const auto level = static_cast<size_t>(kept.level[original.idx()]);
    if (made < 0 || made < invalidated[level]) return false;
    return level < 2 || level > levels + 1 ||
           segment[level - 2][original.idx()] == context[level - 2];
  };
  std::vector<NodeId> order;
  order.reserve(num_nodes);
  RecomputeStats counted;
  std::vector<bool> collected(num_nodes, false);  // in the walk being cloned (materialize)
  auto clone_node = [&](NodeId original) {
    Node node = recompute_form(graph.node(original));  // a copy: appending moves the storage
    const NodeId id(static_cast<int32_t>(graph.num_nodes()));
    node.name = graph.unique_node_name(node.name + ".recompute");
    for (ValueId& in : node.inputs) {
      if (keep[in.idx()]) continue;
      // Made earlier in this walk, or a valid clone the walk stopped at.
      const NodeId producer = graph.value(in).producer;
      MEMFIT_CHECK(collected[producer.idx()] || valid(producer));
      in = clone_of[in.idx()];
    }
    for (ValueId& out : node.outputs) {
      Value value = graph.value(out);
      value.name = graph.unique_value_name(value.name + ".recompute");
      value.producer = id;
      const ValueId copy = graph.add_value_raw(std::move(value));
      if (!keep[out.idx()]) clone_of[out.idx()] = copy;
      out = copy;
    }
    graph.add_node_raw(std::move(node));
    clone_generation[original.idx()] = generation;
    counted.most_clones = std::max(counted.most_clones, ++clones[original.idx()]);
    order.push_back(id);
    ++counted.recomputed_nodes;
  };
  // Clones the producer of dropped value `v` and, first, the producers of the
  // dropped values it reads that have no valid clone: a depth-first walk with
  // an explicit stack (a segment may be thousands of nodes long) collects
  // them, and they are cloned in their forward order, as the forward pass
  // ran them, so each clone is made just before its first reader among them.
  // (Cloning in the walk's post-order instead would make an input with no
  // dropped ancestors, such as a recurrent step's input projection, long
  // before the chain that reads it: a segment's worth of them live at once.)
  // No level is invalidated during a walk. Its clones of nodes outside the
  // context's segments serve the walk only (they are not valid afterwards):
  // a walk that recomputes one chain of a segment with several (an unrolled
  // LSTM's layers) from an earlier checkpoint does not hold that chain for
  // the walks of the others, which recompute it again, each step next to
  // its reader, so the recursive strategy keeps O(log n) memory.
  std::vector<std::pair<NodeId, size_t>> stack;  // (original node, next input to look at)
  std::vector<NodeId> walk;
  auto materialize = [&](ValueId v) {
    walk.clear();
    stack.emplace_back(graph.value(v).producer, 0);
    collected[graph.value(v).producer.idx()] = true;
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < graph.node(node).inputs.size()) {
        const ValueId in = graph.node(node).inputs[next++];
        const NodeId producer = graph.value(in).producer;
        if (!keep[in.idx()] && !valid(producer) && !collected[producer.idx()]) {
          collected[producer.idx()] = true;
          stack.emplace_back(producer, 0);
        }
        continue;
      }
      walk.push_back(node);
      stack.pop_back();
    }
    std::sort(walk.begin(), walk.end());
    for (NodeId node : walk) clone_node(node);
    for (NodeId node : walk) collected[node.idx()] = false;
  };
  auto enter = [&](NodeId producer) {
    for (size_t l = 1; l <= levels; ++l) {
      const int32_t s = segment[l - 1][producer.idx()];
      if (context[l - 1] == s) continue;
      context[l - 1] = s;
      invalidate(l + 1);
    }
  };
  std::vector<bool> redirected(num_values, false);
  for (size_t n = 0; n < num_nodes; ++n) {
    const NodeId id(static_cast<int32_t>(n));
    if (!forward[n]) {
      // Mirrored clones serve one non-forward node.
      if (options.mirror) invalidate(levels + 2);
      std::vector<ValueId> inputs = graph.node(id).inputs;
      for (ValueId& in : inputs) {
        if (keep[in.idx()]) continue;
        const NodeId producer = graph.value(in).producer;
        enter(producer);
        if (!valid(producer)) materialize(in);
        if (!redirected[in.idx()]) ++counted.dropped_values;
        redirected[in.idx()] = true;
        in = clone_of[in.idx()];
      }
      graph.node(id).inputs = std::move(inputs);
    }
    order.push_back(id);
  }
  if (stats) *stats = counted;
  // Without clones no input was redirected: the graph is as it was.
  if (counted.recomputed_nodes == 0) return false;

  // Stage 4.
  graph = rebuild_graph(graph, order);
  return true;
}

}  // namespace memfit
