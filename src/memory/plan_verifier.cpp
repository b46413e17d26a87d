// The independent plan verifier. It shares no code with the planner
// (liveness*.cpp, heap*.cpp, planner.cpp) and ignores the plan's own account
// of its reasoning (value_live, inplace_of): it reads only the slices and the
// arena size and replays the step over the arena's bytes, so a planner bug
// cannot hide behind a helper or an interval that both sides got wrong.
//
// Input: a graph (checked here with verify_graph: the schedule must be in
// topological order), the sizes the backend asked for, and a plan.
//
// Stages:
//   1. Shape of the plan: one slice per value and per node; every slice
//      aligned to kArenaAlignment, at least the bytes asked for, inside its
//      pool; the arena (the host pool) is the largest device (host) slice end,
//      and the arena fits the budget.
//   1b. Pools and copies: a value is in the host pool exactly when to_host
//      made it, workspaces are on the device; only to_device and swap_wait
//      read host values; every to_host is awaited by a swap_wait whose inputs
//      are its source and its output. The copy to_host runs asynchronously
//      from its node to that swap_wait, so its source must stay intact up to
//      the swap_wait, which reads it: stage 2 checks that like any read. A
//      copy to_device writes its output from its node on, where stage 2
//      writes it.
//   2. Replay. An interval map per pool from offset to the value whose bytes lie
//      there holds the values written and not yet (even partly) overwritten.
//      Before node 0 the graph inputs are written (data is copied in, state is
//      already there). At step i, node i
//        a. reads its inputs: each must be intact;
//        b. writes its workspace, which must overlap none of its own inputs and
//           outputs, then its outputs, which must overlap neither each other
//           nor an input, except an output written in place over an input:
//           the op table lists (j -> k) for every position j of that input,
//           both start at the same offset, and both have the same element
//           count and dtype (a broadcast operand would be read after its
//           elements were overwritten). Every other value a write overlaps is
//           destroyed, and the write that destroyed it is recorded.
//   3. End of the step: graph outputs and update values are intact; each
//      persistent input is intact, or was replaced in place by its own update
//      value (the only write the next step can find it under).
// A write over a value still needed is reported where that value is next
// needed (its next read, or the end of the step), naming the write. That is
// the same verdict as refusing the write, with no liveness to compute, so the
// verifier cannot agree with a wrong liveness of the planner by accident.
// Copies are issued in schedule order and run in that order, so a host range
// read by a pending to_device is rewritten only by a later copy: the replay in
// schedule order is exact for the host pool too.
// Cost: O((values + nodes + edges) log values): a value enters and leaves the
// map at most once, each time at the cost of one map operation.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "memory/planner.h"
#include "ops/op_table.h"
#include "ops/typed_graph.h"

namespace memfit {
namespace {

std::string bytes_range(size_t begin, size_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

std::string node_ref(const Node& node) { return "node '" + node.name + "'"; }

// A slice lies in an arena of `arena` bytes; written so that no sum overflows.
bool inside(const Slice& slice, size_t arena) {
  return slice.bytes <= arena && slice.offset <= arena - slice.bytes;
}

// `label` names what the slice holds: a value or a node's workspace.
Status check_slice(const std::string& label, const Slice& slice, size_t wanted, size_t arena) {
  const std::string where = label + " " + bytes_range(slice.offset, slice.end());
  if (slice.offset % kArenaAlignment != 0 || slice.bytes % kArenaAlignment != 0) {
    return Status::error(where + " is not aligned to " + std::to_string(kArenaAlignment) +
                         " bytes");
  }
  if (slice.bytes < wanted) {
    return Status::error(where + " has " + std::to_string(slice.bytes) + " bytes, but needs " +
                         std::to_string(wanted));
  }
  if (!inside(slice, arena)) {
    return Status::error(where + " ends past the arena of " + std::to_string(arena) + " bytes");
  }
  return Status::ok();
}

Status check_plan_shape(const Graph& graph, const PlanSizes& sizes, const MemoryPlan& plan,
                        size_t budget) {
  const size_t values = graph.num_values();
  const size_t nodes = graph.num_nodes();
  if (sizes.value_bytes.size() != values || sizes.workspace_bytes.size() != nodes) {
    return Status::error("the sizes list " + std::to_string(sizes.value_bytes.size()) +
                         " values and " + std::to_string(sizes.workspace_bytes.size()) +
                         " workspaces for a graph of " + std::to_string(values) + " values and " +
                         std::to_string(nodes) + " nodes");
  }
  if (plan.value_slices.size() != values || plan.workspace_slices.size() != nodes) {
    return Status::error("the plan has " + std::to_string(plan.value_slices.size()) +
                         " value slices and " + std::to_string(plan.workspace_slices.size()) +
                         " workspace slices for a graph of " + std::to_string(values) +
                         " values and " + std::to_string(nodes) + " nodes");
  }
  if (Status graph_status = verify_graph(graph); !graph_status) {
    return Status::error("the graph of the plan is invalid: " + graph_status.message());
  }
  size_t largest_end = 0, largest_host_end = 0;
  for (size_t v = 0; v < values; ++v) {
    const Slice& slice = plan.value_slices[v];
    const bool host = slice.pool == Pool::host;
    MEMFIT_RETURN_IF_ERROR(check_slice("%" + graph.values()[v].name, slice, sizes.value_bytes[v],
                                       host ? plan.host_bytes : plan.arena_bytes));
    (host ? largest_host_end : largest_end) = std::max(host ? largest_host_end : largest_end,
                                                       slice.end());
  }
  for (size_t n = 0; n < nodes; ++n) {
    const Slice& slice = plan.workspace_slices[n];
    if (slice.pool != Pool::device) {
      return Status::error("the workspace of " + node_ref(graph.nodes()[n]) +
                           " is in the host pool; kernels use device memory");
    }
    MEMFIT_RETURN_IF_ERROR(check_slice("the workspace of " + node_ref(graph.nodes()[n]), slice,
                                       sizes.workspace_bytes[n], plan.arena_bytes));
    largest_end = std::max(largest_end, slice.end());
  }
  if (plan.host_bytes != largest_host_end) {
    return Status::error("the plan claims a host pool of " + std::to_string(plan.host_bytes) +
                         " bytes, but its host slices end at " + std::to_string(largest_host_end));
  }
  // The arena is what the executor allocates: a larger one breaks the promise
  // that the predicted peak is the reached peak, to the byte.
  if (plan.arena_bytes != largest_end) {
    return Status::error("the plan claims an arena of " + std::to_string(plan.arena_bytes) +
                         " bytes, but its slices end at " + std::to_string(largest_end));
  }
  if (budget > 0 && plan.arena_bytes > budget) {
    return Status::error("the plan needs " + std::to_string(plan.arena_bytes) +
                         " bytes, over the budget of " + std::to_string(budget));
  }
  return Status::ok();
}

// Stage 1b.
Status check_pools_and_copies(const Graph& graph, const MemoryPlan& plan) {
  auto is_host = [&](ValueId v) { return plan.value_slices[v.idx()].pool == Pool::host; };
  std::vector<bool> awaited(graph.num_values(), false);
  for (size_t v = 0; v < graph.num_values(); ++v) {
    if (!graph.values()[v].producer.valid() && is_host(ValueId(static_cast<int32_t>(v)))) {
      return Status::error("graph input %" + graph.values()[v].name +
                           " is in the host pool; graph inputs are copied onto the device");
    }
  }
  for (const Node& node : graph.nodes()) {
    for (ValueId out : node.outputs) {
      if (is_host(out) != (node.op == OpKind::to_host)) {
        return Status::error("%" + graph.value(out).name + ", made by " + node_ref(node) +
                             ", is in the " + (is_host(out) ? "host pool" : "device arena") +
                             "; only outputs of to_host live in the host pool");
      }
    }
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const bool may_read_host =
          node.op == OpKind::to_device || (node.op == OpKind::swap_wait && i == 1);
      if (is_host(node.inputs[i]) && !may_read_host) {
        return Status::error(node_ref(node) + " reads %" + graph.value(node.inputs[i]).name +
                             " from the host pool; only to_device copies it back");
      }
    }
    if (node.op != OpKind::swap_wait) continue;
    const Value& copy = graph.value(node.inputs[1]);
    const bool waits_for_copy = copy.producer.valid() &&
                                graph.node(copy.producer).op == OpKind::to_host &&
                                graph.node(copy.producer).inputs[0] == node.inputs[0];
    if (!waits_for_copy) {
      return Status::error(node_ref(node) + " must wait for a to_host of %" +
                           graph.value(node.inputs[0]).name + ", but %" + copy.name +
                           " is not its output");
    }
    awaited[node.inputs[1].idx()] = true;
  }
  for (const Node& node : graph.nodes()) {
    if (node.op == OpKind::to_host && !awaited[node.outputs[0].idx()]) {
      return Status::error(node_ref(node) + " copies %" + graph.value(node.inputs[0]).name +
                           " to the host, but no swap_wait says when the copy has completed, so "
                           "its device range could be reused during the copy");
    }
  }
  return Status::ok();
}

// The write that destroyed a value, kept to explain a later read of it.
struct Overwrite {
  int32_t step = 0;  // the step of the node that wrote
  ValueId by;        // invalid: the node's workspace
  bool in_place = false;
  size_t begin = 0;  // the bytes of the victim it overwrote
  size_t end = 0;
};

class ArenaReplay {
 public:
  ArenaReplay(const Graph& graph, const MemoryPlan& plan)
      : graph_(graph), plan_(plan), overwritten_(graph.num_values()) {}

  Status write_graph_inputs();
  Status run_node(int32_t step);
  Status check_end() const;

 private:
  struct Held {
    size_t end = 0;
    ValueId value;
  };
  using Map = std::map<size_t, Held>;

  std::string value_ref(ValueId v) const;
  std::string explain(const Overwrite& o) const;
  // The held ranges of `pool` that overlap [begin, end), in offset order.
  std::vector<Map::iterator> overlapping(Pool pool, size_t begin, size_t end);
  Map& held(Pool pool) { return held_[static_cast<size_t>(pool)]; }
  void destroy(Map::iterator it, Overwrite overwrite);
  Status write_workspace(int32_t step, NodeId id);
  Status write_output(int32_t step, NodeId id, int output);
  Status check_in_place(int32_t step, const Node& node, int output, ValueId input) const;

  const Graph& graph_;
  const MemoryPlan& plan_;
  Map held_[2];  // per pool: offset -> the intact value whose slice starts there
  std::vector<std::optional<Overwrite>> overwritten_;  // one per value
};

std::string ArenaReplay::value_ref(ValueId v) const {
  const Slice& slice = plan_.value_slices[v.idx()];
  return "%" + graph_.value(v).name + (slice.pool == Pool::host ? " host " : " ") +
         bytes_range(slice.offset, slice.end());
}

std::string ArenaReplay::explain(const Overwrite& o) const {
  const std::string node = node_ref(graph_.node(NodeId(o.step)));
  const std::string at = " at step " + std::to_string(o.step);
  if (!o.by.valid()) {
    return node + " overwrote " + bytes_range(o.begin, o.end) + " with its workspace" + at;
  }
  if (o.in_place) return node + " wrote " + value_ref(o.by) + " in place over it" + at;
  return node + " overwrote " + bytes_range(o.begin, o.end) + " with " + value_ref(o.by) + at;
}

std::vector<ArenaReplay::Map::iterator> ArenaReplay::overlapping(Pool pool, size_t begin,
                                                                 size_t end) {
  Map& map = held(pool);
  std::vector<Map::iterator> result;
  auto it = map.upper_bound(begin);
  if (it != map.begin() && std::prev(it)->second.end > begin) --it;
  for (; it != map.end() && it->first < end; ++it) result.push_back(it);
  return result;
}

void ArenaReplay::destroy(Map::iterator it, Overwrite overwrite) {
  overwrite.begin = std::max(overwrite.begin, it->first);
  overwrite.end = std::min(overwrite.end, it->second.end);
  const ValueId victim = it->second.value;
  overwritten_[victim.idx()] = overwrite;
  held(plan_.value_slices[victim.idx()].pool).erase(it);
}

Status ArenaReplay::write_graph_inputs() {
  for (size_t v = 0; v < graph_.num_values(); ++v) {
    const ValueId id(static_cast<int32_t>(v));
    if (graph_.value(id).producer.valid()) continue;
    const Slice& slice = plan_.value_slices[v];
    if (slice.bytes == 0) continue;
    const std::vector<Map::iterator> hit = overlapping(slice.pool, slice.offset, slice.end());
    if (!hit.empty()) {
      return Status::error("graph inputs " + value_ref(hit.front()->second.value) + " and " +
                           value_ref(id) + " overlap; both are written before the first node");
    }
    held(slice.pool).emplace(slice.offset, Held{slice.end(), id});
  }
  return Status::ok();
}

Status ArenaReplay::run_node(int32_t step) {
  const NodeId id(step);
  const Node& node = graph_.node(id);
  for (ValueId input : node.inputs) {
    if (const std::optional<Overwrite>& o = overwritten_[input.idx()]) {
      return Status::error(node_ref(node) + " reads " + value_ref(input) + " at step " +
                           std::to_string(step) + ", but " + explain(*o));
    }
  }
  MEMFIT_RETURN_IF_ERROR(write_workspace(step, id));
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    MEMFIT_RETURN_IF_ERROR(write_output(step, id, static_cast<int>(k)));
  }
  return Status::ok();
}

Status ArenaReplay::write_workspace(int32_t step, NodeId id) {
  const Node& node = graph_.node(id);
  const Slice& slice = plan_.workspace_slices[id.idx()];
  if (slice.bytes == 0) return Status::ok();
  for (Map::iterator it : overlapping(Pool::device, slice.offset, slice.end())) {
    const ValueId victim = it->second.value;
    if (std::find(node.inputs.begin(), node.inputs.end(), victim) != node.inputs.end()) {
      return Status::error("the workspace of " + node_ref(node) + " " +
                           bytes_range(slice.offset, slice.end()) + " overlaps its input " +
                           value_ref(victim) + " at step " + std::to_string(step));
    }
    destroy(it, Overwrite{step, ValueId(), false, slice.offset, slice.end()});
  }
  return Status::ok();
}

Status ArenaReplay::write_output(int32_t step, NodeId id, int output) {
  const Node& node = graph_.node(id);
  const ValueId value = node.outputs[static_cast<size_t>(output)];
  const Slice& slice = plan_.value_slices[value.idx()];
  if (slice.bytes == 0) return Status::ok();
  const std::string writes =
      node_ref(node) + " writes " + value_ref(value) + " at step " + std::to_string(step);
  const Slice& workspace = plan_.workspace_slices[id.idx()];
  if (workspace.bytes > 0 && slice.pool == Pool::device && slice.offset < workspace.end() &&
      workspace.offset < slice.end()) {
    return Status::error(writes + " over its own workspace " +
                         bytes_range(workspace.offset, workspace.end()));
  }
  for (Map::iterator it : overlapping(slice.pool, slice.offset, slice.end())) {
    const ValueId victim = it->second.value;
    if (graph_.value(victim).producer == id) {
      return Status::error(writes + " over its other output " + value_ref(victim));
    }
    const bool is_input =
        std::find(node.inputs.begin(), node.inputs.end(), victim) != node.inputs.end();
    if (is_input) MEMFIT_RETURN_IF_ERROR(check_in_place(step, node, output, victim));
    destroy(it, Overwrite{step, value, is_input, slice.offset, slice.end()});
  }
  held(slice.pool).emplace(slice.offset, Held{slice.end(), value});
  return Status::ok();
}

Status ArenaReplay::check_in_place(int32_t step, const Node& node, int output,
                                   ValueId input) const {
  const ValueId value = node.outputs[static_cast<size_t>(output)];
  const std::string writes = node_ref(node) + " writes " + value_ref(value) + " over its input " +
                             value_ref(input) + " at step " + std::to_string(step);
  const std::vector<InplacePair> pairs = inplace_pairs(node);
  // Every position that reads the input must allow it: a kernel may read
  // position j's buffer anywhere while it writes the output.
  for (size_t j = 0; j < node.inputs.size(); ++j) {
    if (node.inputs[j] != input) continue;
    const bool listed = std::any_of(pairs.begin(), pairs.end(), [&](const InplacePair& p) {
      return p.input == static_cast<int>(j) && p.output == output;
    });
    if (!listed) {
      return Status::error(writes + ", but the op table lists no in-place pair (input " +
                           std::to_string(j) + " -> output " + std::to_string(output) + ") for " +
                           std::string(op_name(node.op)));
    }
  }
  if (plan_.value_slices[value.idx()].offset != plan_.value_slices[input.idx()].offset) {
    return Status::error(writes + ": an output written in place must start where its input does");
  }
  const Value& in = graph_.value(input);
  const Value& out = graph_.value(value);
  if (in.elements() != out.elements() || in.type.dtype != out.type.dtype ||
      in.layout != out.layout) {
    auto typed = [](const Value& v) {
      const std::string layout = v.layout == Layout::plain ? "" : "@" + std::string(layout_name(v.layout));
      return type_string(v.type) + layout;
    };
    return Status::error(writes + ": in place needs the same element count, dtype and layout, " +
                         "but the input is " + typed(in) + " and the output " + typed(out));
  }
  return Status::ok();
}

Status ArenaReplay::check_end() const {
  const std::string at_end = " must hold its value at the end of the step, but ";
  for (ValueId v : graph_.outputs()) {
    if (const std::optional<Overwrite>& o = overwritten_[v.idx()]) {
      return Status::error("graph output " + value_ref(v) + at_end + explain(*o));
    }
  }
  std::vector<ValueId> next_of(graph_.num_values());
  for (const StateUpdate& update : graph_.updates()) {
    next_of[update.state.idx()] = update.next;
    if (const std::optional<Overwrite>& o = overwritten_[update.next.idx()]) {
      return Status::error(value_ref(update.next) + ", the update of %" +
                           graph_.value(update.state).name + "," + at_end + explain(*o));
    }
  }
  for (size_t v = 0; v < graph_.num_values(); ++v) {
    const Value& value = graph_.values()[v];
    const std::optional<Overwrite>& o = overwritten_[v];
    if (value.producer.valid() || !is_persistent(value.role) || !o) continue;
    const ValueId next = next_of[v];
    if (next.valid() && o->by == next && o->in_place) continue;
    const std::string only = next.valid() ? " (only its update %" + graph_.value(next).name +
                                                " may replace it, in place)"
                                          : " (it has no update)";
    return Status::error(std::string(role_name(value.role)) + " " +
                         value_ref(ValueId(static_cast<int32_t>(v))) + at_end + explain(*o) + only);
  }
  return Status::ok();
}

}  // namespace

Status verify_plan(const Graph& graph, const PlanSizes& sizes, const MemoryPlan& plan,
                   size_t budget) {
  MEMFIT_RETURN_IF_ERROR(check_plan_shape(graph, sizes, plan, budget));
  MEMFIT_RETURN_IF_ERROR(check_pools_and_copies(graph, plan));
  ArenaReplay replay(graph, plan);
  MEMFIT_RETURN_IF_ERROR(replay.write_graph_inputs());
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    MEMFIT_RETURN_IF_ERROR(replay.run_node(static_cast<int32_t>(n)));
  }
  return replay.check_end();
}

}  // namespace memfit
