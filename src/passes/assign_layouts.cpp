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
      : graph_(graph), backend_(backend), options_(options), out_(graph), before_(graph.num_nodes()) {}

  Result<Graph> run(LayoutSummary* summary) {
    const Layout blocked = backend_.blocked_layout();
    for (size_t n = 0; n < graph_.num_nodes(); ++n) {
      const NodeId id(static_cast<int32_t>(n));
      BlockedOperands operands = backend_.blocked_operands(out_, out_.node(id));
      if (!operands_fit(out_.node(id), operands)) operands = {};
      std::vector<ValueId> inputs = out_.node(id).inputs;
      std::vector<Layout> want(inputs.size(), Layout::plain);
      bool block_outputs = false;
      if (operands.kind == BlockedOperands::Kind::seed) {
        for (size_t i = 0; i < inputs.size(); ++i) {
          if (has(operands.inputs, i)) want[i] = blocked;
          if (has(operands.either_inputs, i)) want[i] = out_.value(inputs[i]).layout;
        }
        block_outputs = true;
      } else if (operands.kind == BlockedOperands::Kind::follow) {
        for (size_t i = 0; i < inputs.size(); ++i) {
          if (has(operands.inputs, i) && out_.value(inputs[i]).layout != Layout::plain) {
            block_outputs = true;
          }
        }
        for (size_t i = 0; i < inputs.size(); ++i) {
          if (block_outputs && has(operands.inputs, i)) want[i] = blocked;
        }
      }
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (want[i] != Layout::plain && !is_volume(out_.value(inputs[i]))) want[i] = Layout::plain;
        MEMFIT_ASSIGN_OR_RETURN(inputs[i], in_layout(inputs[i], want[i], before_[n]));
      }
      Node& node = out_.node(id);
      node.inputs = std::move(inputs);
      if (!block_outputs) continue;
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        Value& value = out_.value(node.outputs[o]);
        if (has(operands.outputs, o) && is_volume(value)) {
          value.layout = blocked;
          ++summary_.blocked_values;
        }
      }
    }
    // Stage 4: what a host reads is plain.
    std::vector<ValueId> outputs = out_.outputs();
    for (ValueId& v : outputs) {
      MEMFIT_ASSIGN_OR_RETURN(v, in_layout(v, Layout::plain, at_end_));
    }
    std::vector<StateUpdate> updates = out_.updates();
    for (StateUpdate& u : updates) {
      MEMFIT_ASSIGN_OR_RETURN(u.next, in_layout(u.next, Layout::plain, at_end_));
    }
    if (summary) *summary = summary_;
    if (summary_.reorders == 0 && summary_.blocked_values == 0) return graph_;
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

  // `v` in `layout`: itself, or the output of a reorder node appended to
  // out_ and recorded in `place` (the nodes to put before its first reader).
  Result<ValueId> in_layout(ValueId v, Layout layout, std::vector<NodeId>& place) {
    if (out_.value(v).layout == layout) return v;
    const auto key = std::make_pair(v.index, layout);
    if (auto it = reordered_.find(key); it != reordered_.end()) return it->second;
    const Value source = out_.value(v);  // a copy: adding a node moves the values
    // A copy of a graph input (a batch) is an activation, as the input's other products.
    const Role role = source.producer.valid() ? source.role : Role::activation;
    MEMFIT_ASSIGN_OR_RETURN(NodeId id, add_node(out_, OpKind::reorder, {v}, NoAttrs{},
                                                source.name + "." + std::string(layout_name(layout)),
                                                role));
    const ValueId copy = out_.node(id).outputs[0];
    out_.value(copy).layout = layout;
    if (layout != Layout::plain) ++summary_.blocked_values;
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
