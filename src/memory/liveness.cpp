// Liveness and in-place reuse.
//
// Input: a verified graph whose node order is the schedule; the bytes of every
// value and workspace.
// 1. Intervals: a value lives from its producer's step (-1 for graph inputs)
//    to its last reader's step; graph outputs, update values and persistent
//    inputs live to N, the end of the step.
// 2. In place, node by node: output o may take the buffer of input u when the
//    op table lists the pair, their types and byte sizes are equal, u is read
//    once by the node and not taken by another output, and u has no reader
//    after this node and is not a graph output. A persistent u qualifies only
//    for its own update value, which then carries the state to the next step
//    in the same bytes.
// 3. Buffers: the values of an in-place chain share one buffer, live from the
//    first value's definition to the last value's last use; each non-empty
//    workspace is a buffer live at its node. A buffer is in the host pool when
//    its value is an output of to_host (no op has an in-place pair across pools).
// Guarantees: buffers that are live at a common step hold no value needed by
// the other. Linear in nodes plus values.
#include "memory/liveness.h"

#include <algorithm>
#include <unordered_map>

#include "core/check.h"
#include "ops/op_table.h"

namespace memfit {
namespace {

std::vector<Interval> value_intervals(const Graph& graph) {
  const auto end = static_cast<int32_t>(graph.num_nodes());
  std::vector<Interval> live(graph.num_values());
  for (size_t v = 0; v < graph.num_values(); ++v) {
    const Value& value = graph.values()[v];
    const int32_t def = value.producer.valid() ? value.producer.index : -1;
    live[v] = {def, is_persistent(value.role) && def < 0 ? end : def};
  }
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    for (ValueId in : graph.nodes()[n].inputs) {
      live[in.idx()].last = std::max(live[in.idx()].last, static_cast<int32_t>(n));
    }
  }
  for (ValueId v : graph.outputs()) live[v.idx()].last = end;
  for (const StateUpdate& u : graph.updates()) live[u.next.idx()].last = end;
  return live;
}

}  // namespace

Pool value_pool(const Graph& graph, ValueId value) {
  const Value& v = graph.value(value);
  return v.producer.valid() && graph.node(v.producer).op == OpKind::to_host ? Pool::host
                                                                            : Pool::device;
}

Liveness analyze_liveness(const Graph& graph, const PlanSizes& sizes, const PlanOptions& options) {
  MEMFIT_CHECK(sizes.value_bytes.size() == graph.num_values());
  MEMFIT_CHECK(sizes.workspace_bytes.size() == graph.num_nodes());
  Liveness result;
  result.value_live = value_intervals(graph);
  result.inplace_of.assign(graph.num_values(), ValueId());

  // The last step at which a value is read, ignoring the end-of-step rules.
  std::vector<int32_t> last_read(graph.num_values(), -1);
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    for (ValueId in : graph.nodes()[n].inputs) last_read[in.idx()] = static_cast<int32_t>(n);
  }
  std::unordered_map<int32_t, int32_t> update_of;  // state value -> its next value
  for (const StateUpdate& u : graph.updates()) update_of[u.state.index] = u.next.index;
  std::vector<bool> is_output(graph.num_values(), false);
  for (ValueId v : graph.outputs()) is_output[v.idx()] = true;

  if (options.share && options.inplace) {
    for (size_t n = 0; n < graph.num_nodes(); ++n) {
      const Node& node = graph.nodes()[n];
      const auto step = static_cast<int32_t>(n);
      std::vector<bool> taken(node.inputs.size(), false);
      for (const InplacePair& pair : inplace_pairs(node)) {
        const auto i = static_cast<size_t>(pair.input);
        const auto o = static_cast<size_t>(pair.output);
        if (i >= node.inputs.size() || o >= node.outputs.size() || taken[i]) continue;
        const ValueId in = node.inputs[i];
        const ValueId out = node.outputs[o];
        if (result.inplace_of[out.idx()].valid()) continue;
        // The same bytes for the same elements: a layout may pad a broadcast
        // operand to the output's size, but an elementwise kernel would then
        // overwrite elements it still has to read.
        if (sizes.value_bytes[in.idx()] != sizes.value_bytes[out.idx()] ||
            graph.value(in).type != graph.value(out).type ||
            graph.value(in).layout != graph.value(out).layout) {
          continue;
        }
        if (std::count(node.inputs.begin(), node.inputs.end(), in) > 1) continue;
        const Value& value = graph.value(in);
        const bool persistent_input = !value.producer.valid() && is_persistent(value.role);
        bool allowed;
        if (persistent_input) {
          auto it = update_of.find(in.index);
          allowed = it != update_of.end() && it->second == out.index && last_read[in.idx()] == step &&
                    !is_output[in.idx()];
        } else {
          allowed = result.value_live[in.idx()].last == step && !is_output[in.idx()];
        }
        if (!allowed) continue;
        taken[i] = true;
        result.inplace_of[out.idx()] = in;
      }
    }
  }

  // Buffers: a value written in place joins the buffer of the value it
  // overwrites, which is defined earlier: graph inputs first, then outputs in
  // node order.
  result.value_buffer.assign(graph.num_values(), -1);
  auto assign_buffer = [&](ValueId v) {
    const ValueId over = result.inplace_of[v.idx()];
    const Interval live = result.value_live[v.idx()];
    if (over.valid()) {
      const int32_t b = result.value_buffer[over.idx()];
      MEMFIT_CHECK(b >= 0);
      result.value_buffer[v.idx()] = b;
      PlanBuffer& buffer = result.buffers[static_cast<size_t>(b)];
      buffer.live.last = std::max(buffer.live.last, live.last);
      return;
    }
    const Value& value = graph.value(v);
    result.value_buffer[v.idx()] = static_cast<int32_t>(result.buffers.size());
    result.buffers.push_back({align_up(sizes.value_bytes[v.idx()]), live,
                              !value.producer.valid() && is_persistent(value.role),
                              value_pool(graph, v)});
  };
  for (size_t v = 0; v < graph.num_values(); ++v) {
    if (!graph.values()[v].producer.valid()) assign_buffer(ValueId(static_cast<int32_t>(v)));
  }
  for (const Node& node : graph.nodes()) {
    for (ValueId out : node.outputs) assign_buffer(out);
  }
  result.workspace_buffer.assign(graph.num_nodes(), -1);
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    if (sizes.workspace_bytes[n] == 0) continue;
    const auto step = static_cast<int32_t>(n);
    result.workspace_buffer[n] = static_cast<int32_t>(result.buffers.size());
    result.buffers.push_back(
        {align_up(sizes.workspace_bytes[n]), {step, step}, false, Pool::device});
  }
  return result;
}

}  // namespace memfit
