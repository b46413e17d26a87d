// The pass of assign_layouts.h.
#include "passes/assign_layouts.h"

#include <map>
#include <utility>
#include <vector>

#include "ir/rebuild.h"
#include "ops/typed_graph.h"

namespace memfit {
namespace {

bool is_volume(const Value& value) {
  const size_t rank = value.type.shape.size();
  return value.type.dtype == DType::f32 && (rank == 4 || rank == 5);
}

bool has(uint32_t mask, size_t i) { return i < 32 && ((mask >> i) & 1u) != 0; }

class LayoutAssigner {
 public:
  LayoutAssigner(const Graph& graph, const Backend& backend, const LayoutOptions& options)
      : graph_(graph),
        backend_(backend),
        options_(options),
        out_(graph),
        before_(graph.num_nodes()),
        read_(graph.num_values(), false) {}

  Result<Graph> run(LayoutSummary* summary) {
    const Layout blocked = backend_.blocked_layout();
    for (size_t n = 0; n < graph_.num_nodes(); ++n) {
      const NodeId id(static_cast<int32_t>(n));
      BlockedOperands operands = backend_.blocked_operands(out_, out_.node(id));
      if (!operands_fit(out_.node(id), operands)) operands = {};
      if (!options_.blocked_weights) operands.weights = Layout::plain;
      std::vector<ValueId> inputs = out_.node(id).inputs;
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (has(operands.weight_inputs, i)) adopt(inputs[i], operands.weights);
      }
      std::vector<Layout> want(inputs.size(), Layout::plain);
      Layout outputs_layout = Layout::plain;
      if (operands.kind == BlockedOperands::Kind::seed) {
        for (size_t i = 0; i < inputs.size(); ++i) {
          if (has(operands.inputs, i)) want[i] = blocked;
          if (has(operands.either_inputs, i)) want[i] = out_.value(inputs[i]).layout;
        }
        outputs_layout = blocked;
      } else if (operands.kind == BlockedOperands::Kind::follow) {
        // The layout of the first blocked input, for all of them.
        for (size_t i = 0; i < inputs.size() && outputs_layout == Layout::plain; ++i) {
          if (has(operands.inputs, i)) outputs_layout = out_.value(inputs[i]).layout;
        }
        for (size_t i = 0; i < inputs.size(); ++i) {
          if (has(operands.inputs, i)) want[i] = outputs_layout;
        }
      }
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (want[i] != Layout::plain && !is_volume(out_.value(inputs[i]))) want[i] = Layout::plain;
        MEMFIT_ASSIGN_OR_RETURN(inputs[i], in_layout(inputs[i], want[i], before_[n]));
      }
      for (ValueId v : inputs) mark_read(v);
      Node& node = out_.node(id);
      node.inputs = std::move(inputs);
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        Value& value = out_.value(node.outputs[o]);
        if (!is_volume(value)) continue;
        const Layout layout = has(operands.weight_outputs, o) ? operands.weights
                              : has(operands.outputs, o)      ? outputs_layout
                                                              : Layout::plain;
        if (layout == Layout::plain) continue;
        value.layout = layout;
        count(layout);
      }
    }
    // Stage 4: what a host reads is plain; the next value of state is in its state's layout.
    std::vector<ValueId> outputs = out_.outputs();
    for (ValueId& v : outputs) {
      MEMFIT_ASSIGN_OR_RETURN(v, in_layout(v, Layout::plain, at_end_));
    }
    std::vector<StateUpdate> updates = out_.updates();
    for (StateUpdate& u : updates) {
      MEMFIT_ASSIGN_OR_RETURN(u.next, in_layout(u.next, out_.value(u.state).layout, at_end_));
    }
    if (summary) *summary = summary_;
    if (summary_.reorders == 0 && summary_.blocked_values == 0 && summary_.weight_values == 0) {
      return graph_;
    }
    return rebuild(outputs, updates);
  }

 private:
  // Whether every volume among the operands the node would take blocked
  // (its `inputs` and `outputs`) may be blocked under options_.partial_blocks.
  bool operands_fit(const Node& node, const BlockedOperands& operands) const {
    if (options_.partial_blocks == PartialBlocks::pad) return true;
    const int64_t block = layout_block(backend_.blocked_layout());
    auto fits = [&](ValueId v) {
      const Value& value = out_.value(v);
      if (!is_volume(value)) return true;
      const int64_t channels = value.type.shape[1];
      if (channels % block == 0) return true;
      return options_.partial_blocks == PartialBlocks::pad_beyond_one_block && channels > block;
    };
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (has(operands.inputs, i) && !fits(node.inputs[i])) return false;
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (has(operands.outputs, o) && !fits(node.outputs[o])) return false;
    }
    return true;
  }

  // Whether `v` is state (a persistent graph input) that no node has read
  // yet: its layout is still free to choose, at no copy (the executor
  // converts state as it loads and stores it).
  bool unread_state(ValueId v) const {
    const Value& value = out_.value(v);
    return !value.producer.valid() && is_persistent(value.role) && !read_.at(v.idx()) &&
           value.layout == Layout::plain && is_volume(value);
  }

  // One more value made blocked, in `layout`.
  void count(Layout layout) {
    if (is_weight_layout(layout)) summary_.weights = layout;
    ++(is_weight_layout(layout) ? summary_.weight_values : summary_.blocked_values);
  }

  // Values the pass adds (reorders' outputs) are produced, never state.
  void mark_read(ValueId v) {
    if (v.idx() < read_.size()) read_[v.idx()] = true;
  }

  // Unread state `v` takes `layout` (oi8, oi16: convolution weights).
  void adopt(ValueId v, Layout layout) {
    if (layout == Layout::plain || !unread_state(v)) return;
    out_.value(v).layout = layout;
    count(layout);
  }

  // `v` in `layout`: itself (unread state adopts it), or the output of a
  // reorder node appended to out_ and recorded in `place` (the nodes to put
  // before its first reader).
  Result<ValueId> in_layout(ValueId v, Layout layout, std::vector<NodeId>& place) {
    if (out_.value(v).layout == layout) return v;
    if (layout != Layout::plain && unread_state(v)) {
      adopt(v, layout);
      return v;
    }
    const auto key = std::make_pair(v.index, layout);
    if (auto it = reordered_.find(key); it != reordered_.end()) return it->second;
    mark_read(v);
    const Value source = out_.value(v);  // a copy: adding a node moves the values
    // A copy of a graph input (a batch) is an activation, as the input's other products.
    const Role role = source.producer.valid() ? source.role : Role::activation;
    MEMFIT_ASSIGN_OR_RETURN(NodeId id, add_node(out_, OpKind::reorder, {v}, NoAttrs{},
                                                source.name + "." + std::string(layout_name(layout)),
                                                role));
    const ValueId copy = out_.node(id).outputs[0];
    out_.value(copy).layout = layout;
    if (layout != Layout::plain) count(layout);
    ++summary_.reorders;
    place.push_back(id);
    reordered_.emplace(key, copy);
    return copy;
  }

  // out_ with each reorder node before its first reader, the outputs and
  // updates given.
  Graph rebuild(const std::vector<ValueId>& outputs, const std::vector<StateUpdate>& updates) {
    std::vector<NodeId> order;
    order.reserve(out_.num_nodes());
    for (size_t n = 0; n < graph_.num_nodes(); ++n) {
      order.insert(order.end(), before_[n].begin(), before_[n].end());
      order.push_back(NodeId(static_cast<int32_t>(n)));
    }
    order.insert(order.end(), at_end_.begin(), at_end_.end());
    Graph placed = out_;
    placed.set_outputs(outputs);
    placed.set_updates(updates);
    return rebuild_graph(placed, order);
  }

  const Graph& graph_;
  const Backend& backend_;
  LayoutOptions options_;
  Graph out_;
  std::vector<std::vector<NodeId>> before_;  // reorders to run before node n
  std::vector<NodeId> at_end_;
  std::vector<bool> read_;  // by the nodes laid out so far (values of graph_)
  std::map<std::pair<int32_t, Layout>, ValueId> reordered_;
  LayoutSummary summary_;
};

}  // namespace

Result<Graph> assign_layouts(const Graph& graph, const Backend& backend, LayoutSummary* summary,
                             const LayoutOptions& options) {
  if (backend.blocked_layout() == Layout::plain) {
    if (summary) *summary = {};
    return graph;
  }
  LayoutAssigner assigner(graph, backend, options);
  MEMFIT_ASSIGN_OR_RETURN(Graph result, assigner.run(summary));
  MEMFIT_RETURN_IF_ERROR(verify_graph(result));
  return result;
}

}  // namespace memfit
