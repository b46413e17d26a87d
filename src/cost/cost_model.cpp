#include "cost/cost_model.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "ir/phase.h"
#include "ops/op_table.h"
#include "runtime/executor.h"

namespace memfit {

double roofline_seconds(const Graph& graph, const Node& node, const MachineSpec& spec) {
  const Cost cost = op_cost(graph, node);
  return std::max(cost.flops / spec.flops_per_second, cost.bytes / spec.bytes_per_second) +
         spec.launch_seconds;
}

NodeSeconds roofline_cost(const MachineSpec& spec) {
  return
      [spec](const Graph& graph, const Node& node) { return roofline_seconds(graph, node, spec); };
}

namespace {

// A value's type and layout: kernels (and their workspaces) differ by both.
void append_type(std::string& out, const Value& value) {
  out += std::to_string(static_cast<int>(value.type.dtype));
  out += shape_string(value.type.shape);
  if (value.layout != Layout::plain) out += "@" + std::string(layout_name(value.layout));
}

template <class T>
void append_field(std::string& out, const T& field) {
  if constexpr (std::is_same_v<T, bool> || std::is_integral_v<T> || std::is_floating_point_v<T>) {
    out += std::to_string(field);
  } else {
    // Integer arrays and vectors.
    for (auto x : field) out += std::to_string(x) + ",";
  }
}

}  // namespace

std::string node_signature(const Graph& graph, const Node& node) {
  std::string key(op_name(node.op));
  key += '(';
  for (ValueId in : node.inputs) append_type(key, graph.value(in)), key += ' ';
  key += ")->(";
  for (ValueId out : node.outputs) append_type(key, graph.value(out)), key += ' ';
  key += ')';
  Attrs attrs = node.attrs;  // visit_fields is not const
  std::visit(
      [&](auto& alternative) {
        alternative.visit_fields([&](std::string_view name, const auto& field) {
          key += ' ';
          key += name;
          key += '=';
          append_field(key, field);
        });
      },
      attrs);
  return key;
}

namespace {

// `node` of `graph` alone: its inputs become data inputs (fed as zeros), its
// outputs graph outputs, so no dead-node rule removes it. Inputs and outputs
// in a blocked layout are reordered from and to plain ones (graph inputs and
// outputs are plain), by nodes before and after it; `position` receives the
// node's index.
Graph single_node_graph(const Graph& graph, const Node& node, size_t* position) {
  Graph g;
  Node copy = node;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const Value& input = graph.value(node.inputs[i]);
    copy.inputs[i] = g.add_input("in" + std::to_string(i), input.type, Role::input);
    if (input.layout == Layout::plain) continue;
    const NodeId reorder(static_cast<int32_t>(g.num_nodes()));
    Value blocked = input;
    blocked.name = "in" + std::to_string(i) + ".blocked";
    blocked.producer = reorder;
    blocked.output_index = 0;
    const ValueId from = copy.inputs[i];
    copy.inputs[i] = g.add_value_raw(std::move(blocked));
    g.add_node_raw(Node{OpKind::reorder, "reorder_in" + std::to_string(i), {from}, {copy.inputs[i]}, NoAttrs{}});
  }
  const NodeId id(static_cast<int32_t>(g.num_nodes()));
  *position = id.idx();
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    Value value = graph.value(node.outputs[o]);
    value.name = "out" + std::to_string(o);
    value.producer = id;
    copy.outputs[o] = g.add_value_raw(std::move(value));
  }
  g.add_node_raw(std::move(copy));
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    ValueId out = g.node(id).outputs[o];
    if (g.value(out).layout != Layout::plain) {
      const NodeId reorder(static_cast<int32_t>(g.num_nodes()));
      Value plain = g.value(out);
      plain.name += ".plain";
      plain.layout = Layout::plain;
      plain.producer = reorder;
      plain.output_index = 0;
      const ValueId to = g.add_value_raw(std::move(plain));
      g.add_node_raw(Node{OpKind::reorder, "reorder_out" + std::to_string(o), {out}, {to}, NoAttrs{}});
      out = to;
    }
    g.mark_output(out);
  }
  return g;
}

}  // namespace

MeasuredCosts MeasuredCosts::measure(const Graph& graph, const Backend& backend, int runs,
                                     const MachineSpec& fallback) {
  MeasuredCosts costs;
  costs.fallback_ = fallback;
  runs = std::max(runs, 1);
  // Every node, and the node that recomputes it where that differs (a batch
  // norm's clone, recompute_form), which the strategies price.
  std::vector<Node> nodes = graph.nodes();
  for (const Node& node : graph.nodes()) {
    if (node_phase(graph, node) != Phase::forward) continue;
    Node form = recompute_form(node);
    if (form.op != node.op) nodes.push_back(std::move(form));
  }
  for (const Node& node : nodes) {
    const std::string key = node_signature(graph, node);
    if (costs.seconds_.count(key)) continue;
    size_t position = 0;
    Graph g = single_node_graph(graph, node, &position);
    std::vector<std::vector<std::byte>> buffers;
    Feeds feeds;
    for (const Value& v : g.values()) {
      if (v.producer.valid()) continue;
      buffers.emplace_back(v.bytes(), std::byte{0});
      feeds[v.name] = buffers.back().data();
    }
    double seconds = -1;
    // A run returns f32 outputs only: a node with another output (the i32
    // token ids of one time step) is left to roofline.
    const bool f32_outputs = std::all_of(node.outputs.begin(), node.outputs.end(), [&](ValueId o) {
      return graph.value(o).type.dtype == DType::f32;
    });
    auto exe = f32_outputs ? Executable::compile(std::move(g), backend, ExecOptions{.share = true, .poison = false})
                           : Result<std::unique_ptr<Executable>>(Status::error("not f32"));
    if (exe) {
      StateStore state;
      bool ok = (*exe)->time_kernels().is_ok();
      // A warm-up run (first-touch page faults, lazy set-up), then the timed
      // runs: the executor's own kernel times, which --profile reports too.
      for (int r = 0; r <= runs && ok; ++r) {
        ok = (*exe)->run(state, feeds, StepContext{1, 0, 1, 1.0f}).is_ok();
        if (r == 0) (*exe)->reset_times();
      }
      if (ok) seconds = (*exe)->node_seconds()[position] / runs;
    }
    if (seconds < 0) {
      ++costs.fell_back_;
      seconds = roofline_seconds(graph, node, fallback);
    }
    costs.seconds_.emplace(key, seconds);
  }
  return costs;
}

double MeasuredCosts::seconds(const Graph& graph, const Node& node) const {
  auto it = seconds_.find(node_signature(graph, node));
  return it != seconds_.end() ? it->second : roofline_seconds(graph, node, fallback_);
}

NodeSeconds MeasuredCosts::as_function() const {
  auto shared = std::make_shared<MeasuredCosts>(*this);
  return [shared](const Graph& graph, const Node& node) { return shared->seconds(graph, node); };
}

double graph_seconds(const Graph& graph, const NodeSeconds& seconds, bool forward_only) {
  double total = 0;
  for (const Node& node : graph.nodes()) {
    if (forward_only && node_phase(graph, node) != Phase::forward) continue;
    total += seconds(graph, node);
  }
  return total;
}

}  // namespace memfit
